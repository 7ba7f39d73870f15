"""Model answers to the exercises of the chapter ``chapters/rmsnorm-and-gated-ffn.ipynb``."""

import torch


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    mean_square = x.pow(2).mean(dim=-1, keepdim=True)  # one number per token
    return x / torch.sqrt(mean_square + eps) * weight


def swiglu(x: torch.Tensor, w1: torch.Tensor, w3: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    gate = x @ w1
    return (gate * torch.sigmoid(gate) * (x @ w3)) @ w2


SOLUTIONS = {
    "rms-norm": rms_norm,
    "swiglu": swiglu,
    "swiglu-hidden-size": "2816, 8650752",
    "rmsnorm-shifted-input": "b",
}
