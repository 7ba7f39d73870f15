"""Sinusoidal positional encoding (Vaswani et al., 2017, section 3.5).

Self-attention treats its input as a set: permuting the tokens permutes the outputs and
nothing else. To let a Transformer use word order, a vector that depends only on the position
is added to each token embedding, once, before the first layer. The original paper uses, for
position ``pos`` and pair index ``i = 0, 1, ..., d_model/2 - 1``::

    PE[pos, 2i]     = sin(pos * w_i)
    PE[pos, 2i + 1] = cos(pos * w_i),      w_i = base ** (-2i / d_model),  base = 10000

so pair ``i`` is a wave of wavelength ``2*pi / w_i``: from ``2*pi`` (``i = 0``) up to almost
``2*pi * base`` (last pair), a geometric progression.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from course_lib._checks import (
    base_value,
    check_tensor,
    floating,
    integer,
    positive_int,
    probability,
)

__all__ = [
    "PositionalEncoding",
    "angular_frequencies",
    "offset_rotation",
    "sinusoidal_positional_encoding",
]

DEFAULT_BASE = 10000.0


def _check_floating_dtype(dtype: object) -> None:
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(
            f"dtype must be a floating-point torch.dtype such as torch.float32, got {dtype!r} "
            "(sines and cosines between -1 and 1 would round to integers)"
        )


def angular_frequencies(
    d_model: int, base: float = DEFAULT_BASE, *, dtype: torch.dtype = torch.float64
) -> Tensor:
    """Angular frequency of each sine/cosine pair: ``w_i = base ** (-2i / d_model)``.

    Args:
        d_model: embedding size, a positive even integer.
        base: the wavelength base (10000 in the paper), a number greater than 1.
        dtype: floating-point type of the result.

    Returns:
        Tensor of shape ``(d_model // 2,)``, starting at ``w_0 = 1`` and decreasing
        geometrically by the factor ``base ** (-2 / d_model)``.
    """
    d_model = positive_int("d_model", d_model, even=True)
    base = base_value(base)
    _check_floating_dtype(dtype)
    pair = torch.arange(0, d_model // 2, dtype=torch.float64)  # i = 0, 1, ..., d_model/2 - 1
    return (base ** (-2.0 * pair / d_model)).to(dtype)


def sinusoidal_positional_encoding(
    max_len: int,
    d_model: int,
    base: float = DEFAULT_BASE,
    *,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> Tensor:
    """The table of sinusoidal encodings for positions ``0 .. max_len - 1``.

    Angles are computed in float64 and then cast to ``dtype``, so that even positions in the
    tens of thousands are accurate to float32 rounding.

    Args:
        max_len: number of positions, a positive integer.
        d_model: embedding size, a positive even integer.
        base: the wavelength base (10000 in the paper), a number greater than 1.
        dtype: floating-point type of the result (float32 by default).
        device: where to put the result.

    Returns:
        Tensor ``pe`` of shape ``(max_len, d_model)``: ``pe[pos, 2i] = sin(pos * w_i)`` and
        ``pe[pos, 2i + 1] = cos(pos * w_i)`` with ``w_i`` from :func:`angular_frequencies`.

    Raises:
        ValueError: if ``max_len`` is not positive, ``d_model`` is not positive and even, or
            ``base`` is not greater than 1.
    """
    max_len = positive_int("max_len", max_len)
    _check_floating_dtype(dtype)
    omega = angular_frequencies(d_model, base)  # (d_model/2,)
    position = torch.arange(max_len, dtype=torch.float64)  # (max_len,)
    angle = position[:, None] * omega[None, :]  # (max_len, d_model/2)
    pe = torch.empty(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.to(dtype=dtype, device=device)


def offset_rotation(
    offset: int,
    d_model: int,
    base: float = DEFAULT_BASE,
    *,
    dtype: torch.dtype = torch.float64,
) -> Tensor:
    """The fixed linear map that moves every encoding ``offset`` positions along.

    For every position ``pos``: ``PE[pos + offset] == PE[pos] @ M`` with ``M`` the returned
    matrix (rows of ``PE`` are row vectors, as everywhere in the course). ``M`` does not
    depend on ``pos``: it is block-diagonal, one 2x2 rotation by the angle ``offset * w_i`` per
    sine/cosine pair, so it is orthogonal and ``offset_rotation(a + b) == M_a @ M_b``.

    Args:
        offset: how many positions to move (any integer, negative included).
        d_model: embedding size, a positive even integer.
        base: the wavelength base.
        dtype: floating-point type of the result.

    Returns:
        Tensor of shape ``(d_model, d_model)``.
    """
    offset = integer("offset", offset)
    omega = angular_frequencies(d_model, base)
    cos, sin = torch.cos(offset * omega), torch.sin(offset * omega)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    even, odd = torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)
    # sin(a + b) = sin a cos b + cos a sin b;  cos(a + b) = cos a cos b - sin a sin b
    m[even, even] = cos  # sine coordinate -> new sine
    m[odd, even] = sin  # cosine coordinate -> new sine
    m[even, odd] = -sin  # sine coordinate -> new cosine
    m[odd, odd] = cos  # cosine coordinate -> new cosine
    return m.to(dtype)


class PositionalEncoding(nn.Module):
    """Adds the sinusoidal encoding to a batch of token embeddings, then applies dropout.

    The table for ``max_len`` positions is computed once and kept as a non-persistent buffer
    (it follows ``.to(device, dtype)`` but is not saved in ``state_dict``: it has no learned
    parameters). Use it once, right after the token embedding and before the first layer.

    Args:
        d_model: embedding size, a positive even integer.
        max_len: longest sequence (counting ``start``) the module accepts.
        dropout: dropout probability applied to the sum, as in the original paper.
        base: the wavelength base (10000 in the paper).

    Shape:
        ``forward(x)``: ``x`` is ``(batch, seq, d_model)``; the result has the same shape.
    """

    pe: Tensor

    def __init__(
        self,
        d_model: int,
        max_len: int = 5000,
        dropout: float = 0.0,
        base: float = DEFAULT_BASE,
    ) -> None:
        super().__init__()
        dropout = probability("dropout", dropout)
        self.d_model = positive_int("d_model", d_model, even=True)
        self.max_len = positive_int("max_len", max_len)
        self.base = base_value(base)
        self.dropout = nn.Dropout(float(dropout))
        table = sinusoidal_positional_encoding(self.max_len, self.d_model, self.base)
        self.register_buffer("pe", table, persistent=False)

    def _apply(
        self, fn: Callable[[Tensor], Tensor], *args: Any, **kwargs: Any
    ) -> PositionalEncoding:
        """``.to()``, ``.double()``, ``.cuda()``...: then the table is computed afresh in its
        new dtype and device, rather than cast (a float32 table cast to float64 keeps float32's
        rounding, about 1e-8)."""
        super()._apply(fn, *args, **kwargs)
        if self.pe.dtype.is_floating_point:
            self.pe = sinusoidal_positional_encoding(
                self.max_len, self.d_model, self.base, dtype=self.pe.dtype, device=self.pe.device
            )
        return self

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        """Return ``dropout(x + PE[start : start + seq])``.

        Args:
            x: token embeddings of shape ``(batch, seq, d_model)``.
            start: position of the first token (non-zero when decoding one token at a time).

        Raises:
            ValueError: if ``x`` is not 3-D with last size ``d_model``, or
                ``start + seq > max_len``.
        """
        self._check_input(x, start)
        seq = x.size(1)
        return self.dropout(x + self.pe[start : start + seq].to(x.dtype))

    def _check_input(self, x: Tensor, start: int) -> None:
        check_tensor("x", x)
        if x.dim() != 3 or x.size(-1) != self.d_model:
            raise ValueError(
                f"expected embeddings of shape (batch, seq, d_model={self.d_model}), "
                f"got {tuple(x.shape)}"
            )
        floating("x", x)  # integer embeddings would round the encoding to 0, 1 and -1
        if isinstance(start, bool) or not isinstance(start, int) or start < 0:
            raise ValueError(f"start must be a non-negative integer, got {start!r}")
        seq = x.size(1)
        if start + seq > self.max_len:
            raise ValueError(
                f"positions {start}..{start + seq - 1} are needed but this PositionalEncoding "
                f"holds max_len={self.max_len}; create it with max_len >= {start + seq}"
            )

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}, base={self.base:g}"
