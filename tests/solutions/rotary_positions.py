"""Model answers to the exercises of the chapter ``chapters/rotary-positions.ipynb``."""

import torch


def rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1]
    pair = torch.arange(d // 2, dtype=torch.float64)
    omega = 10000.0 ** (-2 * pair / d)  # (d/2,)
    angle = positions.to(torch.float64)[:, None] * omega  # (L, d/2)
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    a, b = x[:, 0::2], x[:, 1::2]  # the two coordinates of every pair
    out = torch.empty_like(x)
    out[:, 0::2] = a * cos - b * sin
    out[:, 1::2] = a * sin + b * cos
    return out


SOLUTIONS = {
    "rope-rotate": rope,
    "rope-by-hand": "-0.416, 0.909, -0.020, 1.000",
    "rope-where": "b",
}
