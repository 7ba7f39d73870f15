"""Model answers to the exercises of the chapter "Positional encoding"."""

import math

import torch


def positional_encoding(max_len: int, d_model: int) -> torch.Tensor:
    position = torch.arange(max_len, dtype=torch.float32)[:, None]
    pair = torch.arange(d_model // 2, dtype=torch.float32)
    angle = position * 10000.0 ** (-2 * pair / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe


def offset_matrix(offset: int, d_model: int) -> torch.Tensor:
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(d_model // 2):
        angle = offset * 10000.0 ** (-2 * i / d_model)
        c, s = math.cos(angle), math.sin(angle)
        m[2 * i, 2 * i], m[2 * i + 1, 2 * i] = c, s
        m[2 * i, 2 * i + 1], m[2 * i + 1, 2 * i + 1] = -s, c
    return m


SOLUTIONS = {
    "positional-encoding": positional_encoding,
    "pe-worked-example": "0.909, -0.416, 0.020, 1.000",
    "pe-doubled-index-bug": "b",
    "pe-offset-rotation": offset_matrix,
}
