"""Exercises of the chapter "Attention for long contexts"
(``chapters/attention-at-scale.ipynb``)."""

from __future__ import annotations

import torch
from torch import Tensor

from course_lib.answers import Case
from course_lib.attention import causal_mask, sliding_window_mask, tiled_attention
from course_lib.exercises._registry import (
    ChoiceExercise,
    CodeExercise,
    Mistake,
    Option,
    ValueExercise,
    register,
)

CHAPTER = "attention-at-scale"


# --------------------------------------------------------------------------- sliding window


def _window_cases(seed: int) -> list[Case]:
    cases = [
        Case("length=4, window=2", (4, 2)),
        Case("length=5, window=1 (each token sees itself only)", (5, 1)),
        Case("length=6, window=6 (the causal mask)", (6, 6)),
        Case("length=3, window=10 (a window longer than the sequence)", (3, 10)),
        Case("length=1, window=1", (1, 1)),
    ]
    draw = torch.Generator().manual_seed(seed)
    for _ in range(3):
        length = int(torch.randint(2, 41, (), generator=draw))
        window = int(torch.randint(1, length + 3, (), generator=draw))
        cases.append(Case(f"random: length={length}, window={window}", (length, window)))
    return cases


def _reference_window(length: int, window: int) -> Tensor:
    return sliding_window_mask(length, window)


SLIDING_WINDOW = register(
    CodeExercise(
        id="aas-sliding-window-mask",
        chapter=CHAPTER,
        title="The sliding-window mask",
        points=2,
        function="sliding_window",
        parameters=("length", "window"),
        reference=_reference_window,
        cases=_window_cases,
        seed=2020,
        atol=0.0,
        dtypes=(torch.bool,),
        blocked=(sliding_window_mask, causal_mask),
        hints=(
            "Entry $(i, j)$ is True when query $i$ may see key $j$: $j \\le i$ (no future) "
            "and $j > i - w$ (not further back than the window).",
            "Make the query positions a column, `i = torch.arange(length)[:, None]`, and the "
            "key positions a row, `j = torch.arange(length)[None, :]`; comparisons between "
            "them broadcast to a `(length, length)` bool tensor.",
            "`(j <= i) & (j > i - window)`. The window counts the token itself: with "
            "`window = 1` only the diagonal is True.",
        ),
    )
)


# --------------------------------------------------------------------------- online softmax


def _block_state(scores: Tensor, values: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """A block's running maximum ``(n, 1)``, sum of exponentials ``(n, 1)`` and its own
    normalised output ``(n, d_v)``."""
    block_max = scores.amax(dim=-1, keepdim=True)
    weights = torch.exp(scores - block_max)
    block_sum = weights.sum(dim=-1, keepdim=True)
    return block_max, block_sum, (weights / block_sum) @ values


def _merge_case(label: str, scores: Tensor, values: Tensor, split: int) -> Case:
    state_a = _block_state(scores[:, :split], values[:split])
    state_b = _block_state(scores[:, split:], values[split:])
    return Case(label, (*state_a, *state_b))


OVERFLOW = "scores in the thousands (exp overflows without the maxima)"


def _merge_cases(seed: int) -> list[Case]:
    fixed = torch.Generator().manual_seed(7)
    scores = torch.randn(3, 6, generator=fixed)
    values = torch.randn(6, 4, generator=fixed)
    far_apart = scores.clone()
    far_apart[:, 3:] += 8.0  # block b's scores are much larger: block a's weights shrink
    cases = [
        _merge_case("3 queries, two blocks of 3 keys", scores, values, 3),
        _merge_case("one block far larger than the other", far_apart, values, 3),
        _merge_case("blocks of 1 and 5 keys", scores, values, 1),
        _merge_case(OVERFLOW, scores * 1000.0, values, 2),
    ]
    draw = torch.Generator().manual_seed(seed)
    for _ in range(3):
        n, keys = (
            int(torch.randint(1, 6, (), generator=draw)),
            int(torch.randint(2, 12, (), generator=draw)),
        )
        d_v, split = int(torch.randint(1, 6, (), generator=draw)), max(1, keys // 2)
        scale = float(torch.randint(1, 20, (), generator=draw))
        cases.append(
            _merge_case(
                f"random: {n} queries, {keys} keys split at {split}, scores times {scale:g}",
                torch.randn(n, keys, generator=draw) * scale,
                torch.randn(keys, d_v, generator=draw),
                split,
            )
        )
    return cases


def _reference_merge(
    max_a: Tensor, sum_a: Tensor, out_a: Tensor, max_b: Tensor, sum_b: Tensor, out_b: Tensor
) -> Tensor:
    new_max = torch.maximum(max_a, max_b)
    weight_a = sum_a * torch.exp(max_a - new_max)  # block a's sum, on the new maximum's scale
    weight_b = sum_b * torch.exp(max_b - new_max)
    return (weight_a * out_a + weight_b * out_b) / (weight_a + weight_b)


MERGE_BLOCKS = register(
    CodeExercise(
        id="aas-merge-softmax-blocks",
        chapter=CHAPTER,
        title="Merge the attention of two blocks of keys",
        points=3,
        function="merge_blocks",
        parameters=("max_a", "sum_a", "out_a", "max_b", "sum_b", "out_b"),
        reference=_reference_merge,
        cases=_merge_cases,
        seed=2018,
        atol=1e-5,
        rtol=1e-5,
        blocked=(tiled_attention,),
        hints=(
            "Bring both sums to one common reference, the larger maximum "
            "$\\hat s = \\max(\\hat s_a, \\hat s_b)$: block $a$'s sum becomes "
            "$\\ell_a e^{\\hat s_a - \\hat s}$.",
            "Each block's output is already a weighted average over its own keys. The merged "
            "output averages the two, each weighted by its block's share of the total sum.",
            "`top = torch.maximum(max_a, max_b)`, `wa = sum_a * torch.exp(max_a - top)`, likewise "
            "`wb`; the answer is `(wa * out_a + wb * out_b) / (wa + wb)`.",
        ),
    )
)


# --------------------------------------------------------------------------- cache bytes


def _bytes(layers: int, kv_heads: int, d_head: int, per_number: int, tensors: int = 2) -> Tensor:
    return torch.tensor([float(tensors * layers * kv_heads * d_head * per_number)])


KV_CACHE_BYTES = register(
    ValueExercise(
        id="aas-kv-cache-bytes",
        chapter=CHAPTER,
        title="The key/value cache of Mistral 7B",
        points=2,
        question=(
            "Mistral 7B has 32 layers, each with 32 query heads and 8 key/value heads of "
            "$d_{head} = 128$ features, and keeps its key/value cache in bfloat16. How many "
            "bytes does the cache hold for every token of the context? Give one whole number, "
            "without thousands separators."
        ),
        expected=lambda: _bytes(32, 8, 128, 2),
        atol=0.5,
        mistakes=(
            Mistake(
                lambda: _bytes(32, 8, 128, 2, tensors=1),
                "half the answer: every layer caches a key as well as a value for each token "
                "(or, if you counted both, you counted numbers, not bytes: bfloat16 takes 2 "
                "bytes)",
            ),
            Mistake(
                lambda: _bytes(1, 8, 128, 2),
                "that is one layer's cache: each of the 32 layers keeps its own keys and values",
            ),
            Mistake(
                lambda: _bytes(32, 32, 128, 2),
                "that counts the 32 query heads; only the 8 key/value heads are cached, the "
                "queries of a step are used once and thrown away",
            ),
            Mistake(
                lambda: _bytes(32, 8, 128, 4),
                "that is float32 (4 bytes a number); bfloat16 takes 2",
            ),
        ),
        hints=(
            "Per token and per layer the cache stores one key and one value for each "
            "key/value head, each of $d_{head}$ numbers.",
            "Bytes per token $= 2 \\times \\text{layers} \\times g \\times d_{head} \\times$ "
            "bytes per number, with $g$ the key/value heads.",
        ),
    )
)


# --------------------------------------------------------------------------- FlashAttention


FLASH_SAVES = register(
    ChoiceExercise(
        id="aas-flash-saves",
        chapter=CHAPTER,
        title="What FlashAttention saves",
        points=1,
        question=(
            "FlashAttention computes the same attention as the plain formula, and on a GPU it "
            "is several times faster for long sequences. Where does the time go that it saves?"
        ),
        options=(
            Option(
                "a",
                "It performs fewer floating-point operations, because it never forms the "
                "$L \\times L$ matrix.",
                "No: every score $q_i \\cdot k_j$ is still computed and multiplied with its "
                "value; its backward pass even recomputes the scores, so it does more "
                "arithmetic, not less.",
            ),
            Option(
                "b",
                "It reads and writes far less of the GPU's main memory (HBM): the tiles of "
                "scores stay in the fast on-chip memory (SRAM) and never travel out and back.",
                "Right: the plain version writes the $L \\times L$ scores to HBM, reads them "
                "for the softmax, writes the weights and reads them again; attention is limited "
                "by that traffic, not by arithmetic. The tiled, fused kernel is IO-aware.",
            ),
            Option(
                "c",
                "It approximates the softmax by skipping the keys whose scores are small.",
                "No: the online softmax is exact (up to rounding); every key counts.",
            ),
            Option(
                "d",
                "It shrinks the key/value cache during generation.",
                "No: the cache holds the same keys and values; grouped-query and multi-query "
                "attention shrink it, by sharing key/value heads.",
            ),
        ),
        answer="b",
        hints=(
            "Count the multiplications of the tiled algorithm: is any score $q_i \\cdot k_j$ "
            "left out?",
            "On a GPU, moving a number between the main memory and the chip can cost more "
            "time than computing with it.",
        ),
    )
)
