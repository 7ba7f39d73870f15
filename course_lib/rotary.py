"""Rotary positions (RoPE; Su et al., 2021, "RoFormer", section 3.2).

The sinusoidal encoding adds a vector to every token embedding, once, before the first layer.
Rotary positions add nothing: inside every attention layer, the query and the key of the token
at position ``m`` are *rotated* by an angle proportional to ``m``. Cut a vector of ``d``
features into ``d/2`` adjacent pairs ``(x[2i], x[2i+1])``; pair ``i`` is turned, as a point
of the plane, by the angle ``m * w_i`` with the frequencies of the sinusoidal encoding,
``w_i = base ** (-2i / d)``::

    rotate(x, m)[2i]     = x[2i] cos(m w_i) - x[2i+1] sin(m w_i)
    rotate(x, m)[2i + 1] = x[2i] sin(m w_i) + x[2i+1] cos(m w_i)

That is ``x @ R_m`` with ``R_m`` block-diagonal, one 2x2 rotation per pair
(:func:`rotation_matrix`): the block rotation of the positional-encoding chapter
(:func:`course_lib.positional.offset_rotation`), turned the other way. Rotations compose and
their transposes undo them, ``R_m R_n^T = R_{m-n}``, so the score of a query at ``m`` and a key
at ``n`` is ``(q R_m)(k R_n)^T = q R_{m-n} k^T``: it depends on the positions only through
the offset ``m - n``.

Hugging Face's Llama pairs feature ``j`` with feature ``j + d/2`` instead of ``2i`` with
``2i + 1`` ("rotate_half"): the same rotations of other pairs of coordinates.
:func:`course_lib.huggingface.llama_from_hf` reorders the output features of ``W^Q`` and
``W^K`` (the rows of ``nn.Linear``'s ``weight``) so that its pairs become adjacent; the
scores, and so the model, do not change.
"""

from __future__ import annotations

import torch
from torch import Tensor

from course_lib._checks import (
    base_value,
    check_tensor,
    floating,
    integer,
    positive_int,
    shape_of,
)
from course_lib.positional import DEFAULT_BASE, angular_frequencies, offset_rotation

__all__ = ["rotary_cos_sin", "rotate", "rotation_matrix"]


def rotation_matrix(
    position: int,
    d: int,
    base: float = DEFAULT_BASE,
    *,
    dtype: torch.dtype = torch.float64,
) -> Tensor:
    """``R_m``, the ``(d, d)`` matrix with ``rotate(x, m) == x @ R_m`` for a row vector ``x``.

    Block-diagonal, one rotation by ``m * w_i`` (counter-clockwise) per adjacent pair: the
    transpose of :func:`course_lib.positional.offset_rotation` ``(m)``, which moves a sinusoidal
    encoding ``m`` positions along.
    """
    position = integer("position", position)
    d = positive_int("d", d, even=True)
    return offset_rotation(-position, d, base, dtype=dtype)


def _angle_dtype(device: torch.device) -> torch.dtype:
    """float64 for the angles wherever it exists (an angle of thousands of radians keeps only
    three or four decimals in float32); Apple's ``mps`` has no float64."""
    return torch.float32 if device.type == "mps" else torch.float64


def rotary_cos_sin(
    positions: Tensor, d: int, base: float = DEFAULT_BASE, *, dtype: torch.dtype = torch.float32
) -> tuple[Tensor, Tensor]:
    """``cos(m w_i)`` and ``sin(m w_i)`` for every position ``m`` and pair ``i``.

    Args:
        positions: ``(L,)`` integer positions.
        d: the size of the vectors to rotate (a head's ``d_k``, ``d_head`` in the code), positive
            and even.
        base: the wavelength base (10000 in RoFormer and Llama 2; 500000 in Llama 3).
        dtype: of the results; the angles are computed in float64 (float32 on ``mps``).

    Returns:
        ``(cos, sin)``, each ``(L, d/2)``, on the device of ``positions``.
    """
    d = positive_int("d", d, even=True)
    base = base_value(base)
    check_tensor("positions", positions)
    wrong_dtype = positions.is_floating_point() or positions.is_complex()
    if wrong_dtype or positions.dtype == torch.bool or positions.dim() != 1:
        raise ValueError(
            f"positions must be a 1-D integer tensor (L,), got {positions.dtype} of shape "
            f"{tuple(positions.shape)}"
        )
    wide = _angle_dtype(positions.device)
    omega = angular_frequencies(d, base, dtype=wide).to(positions.device)  # (d/2,)
    angle = positions.to(wide)[:, None] * omega[None, :]  # (L, d/2)
    return torch.cos(angle).to(dtype), torch.sin(angle).to(dtype)


def rotate(
    x: Tensor,
    positions: Tensor | None = None,
    base: float = DEFAULT_BASE,
) -> Tensor:
    """Rotate every adjacent pair of features of ``x`` by its position's angles.

    Args:
        x: ``(..., L, d)`` floating-point, ``d`` even: queries or keys, e.g. ``(batch, heads,
            L, d_head)``.
        positions: ``(L,)`` integer positions of the ``L`` vectors (default ``0 .. L-1``;
            with a key/value cache, the new tokens' positions start at the cache's length).
        base: the wavelength base.

    Returns:
        A tensor of the shape and dtype of ``x``: ``result[..., j, :] == x[..., j, :] @
        rotation_matrix(positions[j], d, base)``.
    """
    check_tensor("x", x)
    floating("x", x)
    if x.dim() < 2 or x.size(-1) % 2:
        raise ValueError(
            "x must have shape (..., L, d) with d even (features rotated in pairs), "
            f"got {tuple(x.shape)}"
        )
    length = x.size(-2)
    if positions is None:
        positions = torch.arange(length, device=x.device)
    elif not isinstance(positions, Tensor) or tuple(positions.shape) != (length,):
        raise ValueError(
            f"positions must be a ({length},) integer tensor, one per vector, got "
            f"{shape_of(positions)}"
        )
    cos, sin = rotary_cos_sin(positions.to(x.device), x.size(-1), base, dtype=x.dtype)
    # (..., L, d/2) each: the two coordinates of every pair
    even, odd = x[..., 0::2], x[..., 1::2]
    turned = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return turned.flatten(-2)  # pairs back side by side: (..., L, d)
