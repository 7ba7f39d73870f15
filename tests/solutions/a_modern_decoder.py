"""Model answers to the exercises of the chapter ``chapters/a-modern-decoder.ipynb``."""

import torch


def row_order(d_head: int) -> torch.Tensor:
    half = d_head // 2
    order = torch.empty(d_head, dtype=torch.long)
    order[0::2] = torch.arange(half)  # our row 2i is Llama's row i
    order[1::2] = torch.arange(half) + half  # our row 2i + 1 is Llama's row i + d/2
    return order


# one layer: W^Q, W^O 512 x 512; W^K, W^V 512 x 128; three 512 x 1376; two gains of 512
_LAYER = 2 * 512 * 512 + 2 * 512 * 128 + 3 * 512 * 1376 + 2 * 512

SOLUTIONS = {
    "modern-layer-parameters": str(_LAYER),
    "modern-hidden-size": "53248",
    "modern-position-table": "b",
    "modern-rotary-row-order": row_order,
}
