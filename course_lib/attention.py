"""Scaled dot-product attention (Vaswani et al., 2017, section 3.2.1).

``Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V``, written out step by step so that the
book can show exactly what is computed.

Masks are boolean and **True where attention is allowed**, the convention of
:func:`torch.nn.functional.scaled_dot_product_attention`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["scaled_dot_product_attention"]


def _check_shapes(query: Tensor, key: Tensor, value: Tensor) -> None:
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        if tensor.dim() < 2:
            raise ValueError(
                f"{name} must have at least 2 dimensions (..., length, features), "
                f"got shape {tuple(tensor.shape)}"
            )
    if query.size(-1) != key.size(-1):
        raise ValueError(
            f"query and key must share their last size d_k, got query {tuple(query.shape)} "
            f"and key {tuple(key.shape)}"
        )
    if key.size(-2) != value.size(-2):
        raise ValueError(
            f"key and value must have the same length L_k, got key {tuple(key.shape)} "
            f"and value {tuple(value.shape)}"
        )


def _check_mask(mask: Tensor, scores_shape: torch.Size) -> Tensor:
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask must be a bool tensor (True where attention is allowed), got {mask.dtype}"
        )
    try:
        mask = torch.broadcast_to(mask, scores_shape)
    except RuntimeError:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the attention scores' "
            f"shape (..., L_q, L_k) = {tuple(scores_shape)}"
        ) from None
    empty_rows = ~mask.any(dim=-1)
    if empty_rows.any():
        first = tuple(int(i) for i in empty_rows.nonzero()[0])
        raise ValueError(
            f"{int(empty_rows.sum())} query row(s) have no allowed key (the first at index "
            f"{first}); every query must be allowed to attend to at least one key, otherwise "
            "its softmax is 0/0"
        )
    return mask


def scaled_dot_product_attention(
    query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Attend from every query to the keys and mix the values with the resulting weights.

    Args:
        query: ``(..., L_q, d_k)``.
        key: ``(..., L_k, d_k)``.
        value: ``(..., L_k, d_v)``.
        mask: optional bool tensor broadcastable to ``(..., L_q, L_k)``, True where query
            ``i`` may attend to key ``j``. Every query row needs at least one True.

    Returns:
        ``(output, weights)``: output ``(..., L_q, d_v)`` and attention weights
        ``(..., L_q, L_k)``, each row of the weights summing to 1.

    Raises:
        ValueError: on mismatched shapes, a mask that does not broadcast, or a query row
            that the mask leaves with no key.
        TypeError: if the mask is not boolean.
    """
    _check_shapes(query, key, value)
    d_k = query.size(-1)
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)  # (..., L_q, L_k)
    if mask is not None:
        mask = _check_mask(mask, scores.shape)
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, weights
