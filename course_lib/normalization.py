"""RMSNorm: layer normalization without the centring (Zhang & Sennrich, 2019).

Layer normalization (Ba et al., 2016) subtracts each token's mean over its features, divides
by their standard deviation, then applies a gain and a bias. RMSNorm keeps only the rescaling:
it divides by the root mean square of the features and applies a gain::

    RMSNorm(x) = x / sqrt(mean(x_j^2) + eps) * g

There is no mean to subtract and no bias to add. For a vector whose features have mean 0 the
root mean square *is* the standard deviation, and the two norms agree (with LayerNorm's bias
0). Llama, Mistral, Qwen and T5 use it, with ``eps`` of 1e-6 or 1e-5; ``torch.nn.RMSNorm``
exists from PyTorch 2.4 on.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from course_lib._checks import autocast_enabled, check_tensor, floating, module_dtype, positive_int

__all__ = ["RMSNorm", "rms_norm"]


def _check_eps(eps: object) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 <= eps < math.inf:
        raise ValueError(f"eps must be a finite non-negative number, got {eps!r}")
    return float(eps)


def rms_norm(x: Tensor, weight: Tensor | None = None, eps: float = 1e-6) -> Tensor:
    """``x / sqrt(mean(x**2, over the last axis) + eps) * weight``.

    The mean of squares is taken in float32 (or wider, for float64 inputs), as Llama's code
    does, so that a float16 or bfloat16 model does not lose its small features; the result is
    cast back to the dtype of ``x`` before the gain.

    Args:
        x: ``(..., d)`` floating-point: every vector along the last axis is normalised on its
            own (each token's features, never across tokens).
        weight: the gain ``g``, ``(d,)``; ``None`` for none.
        eps: added to the mean of squares, so that a vector of zeros gives zeros.

    Returns:
        A tensor of the shape and dtype of ``x``.
    """
    eps = _check_rms_inputs(x, weight, eps)
    # float16 and bfloat16 to float32; float64 stays
    wide = x.to(torch.promote_types(x.dtype, torch.float32))
    mean_square = wide.pow(2).mean(dim=-1, keepdim=True)  # (..., 1): one per vector
    scaled = wide * torch.rsqrt(mean_square + eps)  # (..., d)
    scaled = scaled.to(x.dtype)  # back to x's dtype
    return scaled if weight is None else weight * scaled


def _check_rms_inputs(x: Tensor, weight: Tensor | None, eps: object) -> float:
    """Raise unless ``x`` is a floating ``(..., d)`` tensor and ``weight`` ``None`` or a
    ``(d,)`` tensor of its dtype; return ``eps`` as a float."""
    check_tensor("x", x)
    floating("x", x)
    if x.dim() == 0:
        raise ValueError("x must have at least one axis, the features (..., d)")
    if weight is not None:
        check_tensor("weight", weight)
    if weight is not None and tuple(weight.shape) != (x.size(-1),):
        raise ValueError(
            f"weight must have shape ({x.size(-1)},), one gain per feature of x "
            f"{tuple(x.shape)}; got {tuple(weight.shape)}"
        )
    if weight is not None and weight.dtype != x.dtype and not autocast_enabled(x):
        raise TypeError(
            f"x is {x.dtype} but weight is {weight.dtype}: the result would be "
            f"{torch.promote_types(x.dtype, weight.dtype)}; convert one of them"
        )
    return _check_eps(eps)


class RMSNorm(nn.Module):
    """Root-mean-square normalization of every vector's features, with a learned gain.

    Args:
        d_model: the number of features ``d``.
        eps: added to the mean of squares (Llama: 1e-6 or 1e-5).

    Attributes:
        weight: the gain ``g``, ``(d_model,)``, starting at 1.

    Shape:
        ``forward(x)``: ``(..., d_model)`` -> the same shape.
    """

    def __init__(self, d_model: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.d_model = positive_int("d_model", d_model)
        self.eps = _check_eps(eps)
        self.weight = nn.Parameter(torch.ones(self.d_model))

    def forward(self, x: Tensor) -> Tensor:
        check_tensor("x", x)
        if x.dim() == 0 or x.size(-1) != self.d_model:
            raise ValueError(
                f"x must have d_model={self.d_model} features in its last axis, e.g. "
                f"(batch, length, {self.d_model}); got {tuple(x.shape)}"
            )
        module_dtype("x", x, self)  # a float16 model takes float16 input, as nn.LayerNorm does
        return rms_norm(x, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps:g}"
