"""The key/value cache: what a decoder keeps between the steps of generation.

A decoder generates one token per step, and at step ``t`` its masked self-attention needs
the keys and values of positions ``0..t``. Without a cache, every step feeds the whole
prefix again and recomputes all of them, although those of positions ``0..t-1`` are the same
as in the step before: the causal mask keeps a position from ever seeing a later one, so
nothing a position computes changes when tokens are appended. With a cache, each step feeds
the new token only, appends its key and value to the stored ones and attends over all of
them. The cross-attention's keys and values come from the encoder's output, which does not
change at all during generation: they are computed at the first step and reused.

- :class:`KeyValueCache` -- the keys and values of one attention layer,
  ``(batch, num_heads, t, d_head)``, and :meth:`KeyValueCache.update` that appends;
- :class:`LayerCache` -- the two caches of one decoder layer (self- and cross-attention);
- :class:`DecoderCache` -- one :class:`LayerCache` per layer, the target ids fed so far,
  and :meth:`DecoderCache.reorder` for beam search;
- :func:`cache_bytes_per_token` -- what one more token costs a model's self-attention
  caches: ``2 (keys and values) x layers x key/value heads x d_head x bytes per number``.

With grouped-query attention (``MultiHeadAttention(..., num_kv_heads=g)``) a cache holds the
``g`` key/value heads, not the ``h`` query heads: ``num_heads`` below is ``g``.

``MultiHeadAttention.forward(..., cache=...)``, ``DecoderLayer.forward(..., cache=...)``,
``Decoder.forward(..., cache=...)`` and ``Transformer.decode(..., cache=...)`` take them.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from course_lib._checks import floating, integer_ids, positive_int
from course_lib._devices import values_checkable

__all__ = ["DecoderCache", "KeyValueCache", "LayerCache", "cache_bytes_per_token"]


def cache_bytes_per_token(
    num_layers: int,
    num_kv_heads: int,
    d_head: int,
    dtype: torch.dtype = torch.float32,
) -> int:
    """The bytes the self-attention key/value caches of a decoder hold per cached token.

    Every layer stores, for every token, one key and one value of ``d_head`` numbers per
    key/value head: ``2 * num_layers * num_kv_heads * d_head * dtype's bytes``. Multiply by
    the context length (and the batch) for a whole cache.

    Args:
        num_layers: the decoder layers (each has its own cache).
        num_kv_heads: the key/value heads ``g`` of each layer (``h`` for multi-head attention,
            1 for multi-query attention).
        d_head: the features of one head.
        dtype: the dtype the cache is kept in (``torch.bfloat16``: 2 bytes per number).

    Returns:
        the bytes per token, an ``int``. Llama-2-70B (80 layers, 8 key/value heads of 128,
        bfloat16): ``cache_bytes_per_token(80, 8, 128, torch.bfloat16) == 327_680``.
    """
    num_layers = positive_int("num_layers", num_layers)
    num_kv_heads = positive_int("num_kv_heads", num_kv_heads)
    d_head = positive_int("d_head", d_head)
    if not isinstance(dtype, torch.dtype):
        wanted = "a torch.dtype such as torch.bfloat16"
        raise TypeError(f"dtype must be {wanted}, got {dtype!r}")
    return 2 * num_layers * num_kv_heads * d_head * dtype.itemsize


def _check_batch_index(index: Tensor, batch: int) -> None:
    """Raise unless ``index`` is a 1-D integer tensor of rows of a batch of ``batch``."""
    integer_ids("index", index)
    if index.dim() != 1:
        raise ValueError(
            f"index must be a 1-D tensor of batch rows, got shape {tuple(index.shape)}"
        )
    if values_checkable(index) and index.numel():
        low, high = int(index.min()), int(index.max())
        if low < 0 or high >= batch:
            raise IndexError(
                f"index must hold rows in [0, {batch}) of the cached batch, got values from "
                f"{low} to {high}"
            )


class KeyValueCache:
    """The keys and values one attention layer has computed so far.

    Args:
        static: the keys and values never grow: they are set at the first call and then
            reused as they are (cross-attention, whose keys and values are the projected
            encoder output). Otherwise (self-attention) each call appends.

    Attributes:
        keys, values: ``(batch, num_heads, t, d_head)``, or ``None`` before the first call.
    """

    def __init__(self, static: bool = False) -> None:
        self.static = bool(static)
        self.keys: Tensor | None = None
        self.values: Tensor | None = None

    @property
    def length(self) -> int:
        """``t``, the number of positions stored (0 when empty)."""
        return 0 if self.keys is None else self.keys.size(-2)

    @property
    def nbytes(self) -> int:
        """The bytes of the stored keys and values (0 when empty)."""
        return 0 if self.keys is None else self.keys.nbytes + self.values.nbytes

    def update(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """Append the new positions' keys and values; return all of them.

        Args:
            keys, values: ``(batch, num_heads, n, d_head)``, the projections of the ``n`` new
                positions (usually one).

        Returns:
            ``(keys, values)``, each ``(batch, num_heads, t + n, d_head)``: the stored ones
            followed by the new ones, in the order of the positions.
        """
        self._check(keys, values)
        if self.keys is not None:  # append along the positions
            keys = torch.cat([self.keys, keys], dim=-2)
            values = torch.cat([self.values, values], dim=-2)
        self.keys, self.values = keys, values
        return keys, values

    def _check(self, keys: Tensor, values: Tensor) -> None:
        floating("keys", keys)
        floating("values", values)
        if keys.dim() != 4 or keys.shape != values.shape:
            raise ValueError(
                "keys and values must have the same shape (batch, num_heads, n, d_head), got "
                f"{tuple(keys.shape)} and {tuple(values.shape)}"
            )
        if keys.dtype != values.dtype:
            raise TypeError(
                f"keys and values must have the same dtype, got {keys.dtype} and {values.dtype}"
            )
        if self.keys is None:
            return
        if (keys.dtype, keys.device) != (self.keys.dtype, self.keys.device):
            raise TypeError(
                f"the cache holds {self.keys.dtype} keys on {self.keys.device}; new keys of "
                f"{keys.dtype} on {keys.device} would silently change them (a cache belongs "
                "to one model: convert the model and start a new cache)"
            )
        stored = self.keys.shape
        if (stored[0], stored[1], stored[3]) != (keys.size(0), keys.size(1), keys.size(3)):
            raise ValueError(
                f"the cache holds keys of shape {tuple(stored)} (batch, num_heads, t, "
                f"d_head); new keys of shape {tuple(keys.shape)} do not fit: batch, heads "
                "and d_head must stay the same (a cache belongs to one batch and one layer)"
            )
        if self.static:
            raise ValueError(
                "a static cache is set once (the encoder output's keys and values) and "
                "then reused; it cannot grow"
            )

    def reorder(self, index: Tensor) -> None:
        """Keep the sequences ``index`` of the batch, in that order (rows may repeat)."""
        if self.keys is not None:
            _check_batch_index(index, self.keys.size(0))
            self.keys = self.keys.index_select(0, index)
            self.values = self.values.index_select(0, index)

    def __repr__(self) -> str:
        shape = None if self.keys is None else tuple(self.keys.shape)
        return f"KeyValueCache(static={self.static}, keys={shape})"


class LayerCache(NamedTuple):
    """The caches of one decoder layer."""

    self_attention: KeyValueCache  # grows by one position per step
    cross_attention: KeyValueCache  # static: the encoder output, projected once


class DecoderCache:
    """Everything a decoder keeps between generation steps: one :class:`LayerCache` per layer.

    Args:
        num_layers: the number of decoder layers.

    Attributes:
        layers: the layers' caches, in order.
        ids: ``(batch, t)``, the target ids fed so far (``None`` before the first step);
            :meth:`course_lib.transformer.Transformer.decode` builds the target padding mask
            from them.
    """

    def __init__(self, num_layers: int) -> None:
        num_layers = positive_int("num_layers", num_layers)
        self.layers = [
            LayerCache(KeyValueCache(), KeyValueCache(static=True)) for _ in range(num_layers)
        ]
        self.ids: Tensor | None = None

    @property
    def length(self) -> int:
        """The number of target positions whose keys and values are stored."""
        return self.layers[0].self_attention.length

    def reorder(self, index: Tensor) -> None:
        """Keep the sequences ``index`` of the batch, in that order: beam search calls it when
        it keeps some hypotheses and drops others.

        Args:
            index: 1-D ``torch.long`` tensor of batch rows.
        """
        if self.ids is not None:
            _check_batch_index(index, self.ids.size(0))
        for layer in self.layers:
            layer.self_attention.reorder(index)
            layer.cross_attention.reorder(index)
        if self.ids is not None:
            self.ids = self.ids.index_select(0, index)

    def __repr__(self) -> str:
        return f"DecoderCache(num_layers={len(self.layers)}, length={self.length})"
