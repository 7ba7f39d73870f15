"""The Transformer decoder: a stack of identical layers (Vaswani et al., 2017, section 3.1).

Each :class:`DecoderLayer` has three sublayers, each wrapped in a residual connection and
layer normalization: masked (causal) self-attention over the target tokens, cross-attention
whose queries come from the decoder and whose keys and values come from the encoder's
output (the "memory"), and the position-wise feed-forward network. With ``Y`` the layer's
input and ``Z`` the memory (the encoder's final output)::

    post-norm (the paper's, the default):   U = LayerNorm(Y + MaskedSelfAttention(Y))
                                            C = LayerNorm(U + CrossAttention(U, Z))
                                            Y' = LayerNorm(C + FFN(C))
    pre-norm (norm_first=True):             U = Y + MaskedSelfAttention(LayerNorm(Y))
                                            C = U + CrossAttention(LayerNorm(U), Z)
                                            Y' = C + FFN(LayerNorm(C))

(the book's names, see notation.md). Dropout is placed as in :mod:`course_lib.encoder`: on
each sublayer's output before the residual addition (the paper's), and, as in PyTorch's
``nn.TransformerDecoderLayer``, on the attention weights and inside the feed-forward network.

Each sublayer is a method of its own (:meth:`DecoderLayer.self_attention_block`,
:meth:`~DecoderLayer.cross_attention_block`, :meth:`~DecoderLayer.feed_forward_block`), as in
PyTorch's ``nn.TransformerDecoderLayer``. :class:`Decoder` stacks ``N`` layers, every one
reading the same memory, with an optional final layer normalization.

Masks are boolean, **True where attention is allowed** (:mod:`course_lib.attention`): the
target mask is usually ``causal_mask(L_t)``, combined with the target padding by ``&``; the
memory mask is the source padding mask ``(batch, 1, L_s)``.

For generation, ``forward(..., cache=...)`` takes the new positions only and keeps the keys
and values of the earlier ones in a :class:`course_lib.cache.DecoderCache`
(:mod:`course_lib.cache` explains why that gives the same result).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from torch import Tensor, nn

from course_lib._checks import module_dtype, positive_int, probability, sequences
from course_lib.attention import MultiHeadAttention
from course_lib.encoder import (
    LayerStack,
    check_layer_mask,
    copy_common_parts,
    copy_layer_norm,
    make_norm,
)
from course_lib.feedforward import FeedForward, GatedFeedForward

if TYPE_CHECKING:
    from course_lib.cache import DecoderCache, KeyValueCache, LayerCache

__all__ = ["Decoder", "DecoderLayer", "DecoderWeights"]


class DecoderWeights(NamedTuple):
    """The attention weights of one decoder layer."""

    self_attention: Tensor  # (batch, num_heads, L_t, L_t)
    cross_attention: Tensor  # (batch, num_heads, L_t, L_s)


class DecoderLayer(nn.Module):
    """One decoder layer: masked self-attention, cross-attention and feed-forward, each with
    Add & Norm.

    Args:
        d_model: size of every token's vector (the memory's too).
        num_heads: heads of both attentions; must divide ``d_model``.
        d_ff: hidden size of the feed-forward network.
        dropout: dropout probability, used on each sublayer's output before the residual
            addition (the paper's "residual dropout"), and also, as PyTorch's
            ``nn.TransformerDecoderLayer`` does, on the attention weights and inside the
            feed-forward network (not in the paper).
        norm_first: False for post-norm ``LayerNorm(x + sublayer(x))`` (the paper's),
            True for pre-norm ``x + sublayer(LayerNorm(x))``.
        activation: of the feed-forward network, ``"relu"``, ``"gelu"``, ``"gelu_tanh"`` or
            ``"silu"``.
        layer_norm_eps: the ``eps`` of the three layer normalizations.

    Keyword-only options, off by default (the paper's layer), as in
    :class:`~course_lib.encoder.EncoderLayer`:

    - ``norm``: ``"layer"`` (LayerNorm) or ``"rms"`` (RMSNorm);
    - ``gated``: a gated feed-forward network (SwiGLU with ``activation="silu"``);
    - ``num_kv_heads``: grouped-query attention in both attentions;
    - ``rotary_base``: rotary positions in the self-attention (the cross-attention compares
      target positions with source positions, which rotary positions do not relate);
    - ``bias``: biases in the linear maps and norms (False: none).

    Shape:
        ``forward(x, memory, tgt_mask, memory_mask)``: ``x`` is ``(batch, L_t, d_model)``,
        ``memory`` ``(batch, L_s, d_model)``; the result has the shape of ``x``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        activation: str = "relu",
        layer_norm_eps: float = 1e-5,
        *,
        norm: str = "layer",
        gated: bool = False,
        num_kv_heads: int | None = None,
        rotary_base: float | None = None,
        bias: bool = True,
    ) -> None:
        super().__init__()
        self.d_model = positive_int("d_model", d_model)
        dropout = probability("dropout", dropout)
        self.norm_first = bool(norm_first)
        self.self_attention = MultiHeadAttention(
            d_model,
            num_heads,
            dropout,
            bias,
            num_kv_heads=num_kv_heads,
            rotary_base=rotary_base,
        )
        self.cross_attention = MultiHeadAttention(
            d_model, num_heads, dropout, bias, num_kv_heads=num_kv_heads
        )
        network = GatedFeedForward if gated else FeedForward
        self.feed_forward = network(d_model, d_ff, dropout, activation, bias=bias)
        self.norm1 = make_norm(norm, d_model, layer_norm_eps, bias)
        self.norm2 = make_norm(norm, d_model, layer_norm_eps, bias)
        self.norm3 = make_norm(norm, d_model, layer_norm_eps, bias)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    @classmethod
    def from_torch(cls, layer: nn.TransformerDecoderLayer) -> DecoderLayer:
        """A ``DecoderLayer`` with copies of the weights of an ``nn.TransformerDecoderLayer``.

        ``self_attn`` becomes :attr:`self_attention`, ``multihead_attn``
        :attr:`cross_attention`; ``norm_first``, dropout, activation (ReLU, GELU or GELU's
        tanh approximation, in any form PyTorch takes) and ``eps`` are taken over, and the
        weights are copied exactly, in their own dtype. The result takes batch-first tensors
        and masks with True = allowed (``~tgt_mask``, ``~memory_key_padding_mask[:, None, :]``).

        Raises:
            TypeError: if ``layer`` is not an ``nn.TransformerDecoderLayer``.
            ValueError: for a custom activation, or a layer without biases.
        """
        if not isinstance(layer, nn.TransformerDecoderLayer):
            raise TypeError(
                f"expected a torch.nn.TransformerDecoderLayer, got {type(layer).__name__}"
            )
        ours = copy_common_parts(cls, layer)
        ours.cross_attention = MultiHeadAttention.from_torch(layer.multihead_attn)
        copy_layer_norm(ours.norm1, layer.norm1)
        copy_layer_norm(ours.norm2, layer.norm2)
        copy_layer_norm(ours.norm3, layer.norm3)
        return ours.train(layer.training)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        return_weights: bool = False,
        cache: LayerCache | None = None,
    ) -> Tensor | tuple[Tensor, DecoderWeights]:
        """Masked self-attention, cross-attention to ``memory``, feed-forward; each with
        Add & Norm.

        Args:
            x: ``(batch, L_t, d_model)``: the target token vectors entering the layer.
            memory: ``(batch, L_s, d_model)``: the encoder's output.
            tgt_mask: bool mask of the self-attention, True where allowed: usually
                ``causal_mask(L_t)`` ``(L_t, L_t)``, or ``(batch, L_t, L_t)`` with padding.
            memory_mask: bool mask of the cross-attention: usually the source padding mask
                ``(batch, 1, L_s)``; ``(L_t, L_s)`` and ``(batch, L_t, L_s)`` work too.
            return_weights: also return both attentions' weights (computed the explicit,
                slower way).
            cache: for generation: ``x`` holds only the new positions, the keys and values
                of the earlier ones are in the :class:`course_lib.cache.LayerCache`, which
                is updated; ``tgt_mask`` is then ``(L_t, t)`` with ``t`` the positions
                stored after the update, e.g. ``causal_mask(L_t, num_keys=t)``.

        Returns:
            ``(batch, L_t, d_model)``, or ``(output, DecoderWeights(self_attention,
            cross_attention))`` if ``return_weights``.
        """
        past = 0 if cache is None else cache.self_attention.length
        self._check_inputs(x, memory, tgt_mask, memory_mask, past)
        self_cache, cross_cache = (None, None) if cache is None else cache
        if self.norm_first:  # pre-norm: x + sublayer(LayerNorm(x))
            update, self_weights = self.self_attention_block(
                self.norm1(x),
                tgt_mask,
                return_weights,
                self_cache,
            )
            x = x + update
            update, cross_weights = self.cross_attention_block(
                self.norm2(x),
                memory,
                memory_mask,
                return_weights,
                cross_cache,
            )
            x = x + update
            x = x + self.feed_forward_block(self.norm3(x))
        else:  # post-norm: LayerNorm(x + sublayer(x))
            update, self_weights = self.self_attention_block(
                x,
                tgt_mask,
                return_weights,
                self_cache,
            )
            x = self.norm1(x + update)
            update, cross_weights = self.cross_attention_block(
                x,
                memory,
                memory_mask,
                return_weights,
                cross_cache,
            )
            x = self.norm2(x + update)
            x = self.norm3(x + self.feed_forward_block(x))
        if return_weights:
            return x, DecoderWeights(self_weights, cross_weights)
        return x

    def self_attention_block(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        need_weights: bool = False,
        cache: KeyValueCache | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """The first sublayer without its residual: ``dropout(MaskedSelfAttention(x))``
        (with ``cache``, over the cached positions and the new ones)."""
        attention = self.self_attention
        if cache is None:
            output, weights = attention(x, x, x, mask, need_weights=need_weights)
        else:
            cached = attention.forward_with_cache
            output, weights = cached(x, x, x, cache, mask, need_weights)
        return self.dropout1(output), weights

    def cross_attention_block(
        self,
        x: Tensor,
        memory: Tensor,
        mask: Tensor | None = None,
        need_weights: bool = False,
        cache: KeyValueCache | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """The second sublayer without its residual: queries from ``x``, keys and values from
        ``memory``: ``dropout(CrossAttention(x, memory))`` (with a static ``cache``, the
        memory is projected at the first call only)."""
        attention, kv = self.cross_attention, memory  # keys and values both from memory
        if cache is None:
            output, weights = attention(x, kv, kv, mask, need_weights=need_weights)
        else:  # the memory's keys and values, projected at the first call
            cached = attention.forward_with_cache
            output, weights = cached(x, kv, kv, cache, mask, need_weights)
        return self.dropout2(output), weights

    def feed_forward_block(self, x: Tensor) -> Tensor:
        """The third sublayer without its residual: ``dropout(FFN(x))``."""
        return self.dropout3(self.feed_forward(x))

    def _check_inputs(
        self,
        x: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None,
        memory_mask: Tensor | None,
        past: int = 0,
    ) -> None:
        sequences("x", x, self.d_model)
        sequences("memory", memory, self.d_model)
        module_dtype("x", x, self)
        module_dtype("memory", memory, self)
        if memory.size(0) != x.size(0):
            raise ValueError(
                f"x and memory must have the same batch size, got x {tuple(x.shape)} and "
                f"memory {tuple(memory.shape)}"
            )
        batch, len_t, len_s = x.size(0), x.size(1), memory.size(1)
        if tgt_mask is not None:
            check_layer_mask("tgt_mask", self.self_attention, tgt_mask, batch, len_t,
                             past + len_t)  # fmt: skip
        if memory_mask is not None:
            check_layer_mask("memory_mask", self.cross_attention, memory_mask, batch, len_t,
                             len_s)  # fmt: skip

    def extra_repr(self) -> str:
        return f"norm_first={self.norm_first}"


class Decoder(LayerStack):
    """``num_layers`` decoder layers, one after the other, and an optional final norm.

    Every layer reads the same ``memory`` (the encoder's output) in its cross-attention.

    Args:
        num_layers: the number of layers ``N`` (6 in the paper).
        d_model, num_heads, d_ff, dropout, norm_first, activation, layer_norm_eps: of every
            layer (see :class:`DecoderLayer`).
        options: the keyword-only options of :class:`DecoderLayer` (``norm``, ``gated``,
            ``num_kv_heads``, ``rotary_base``, ``bias``); the final norm is of the layers'
            kind.
        final_norm: as in :class:`course_lib.encoder.LayerStack`: ``None`` (the default)
            means "if ``norm_first``".

    Built and copied from ``nn.TransformerDecoder``
    (:meth:`~course_lib.encoder.LayerStack.from_torch`) as the encoder is.

    Shape:
        ``forward(x, memory, tgt_mask, memory_mask)``: ``x`` is ``(batch, L_t, d_model)``,
        the embedded target tokens with their positions; ``memory`` is
        ``(batch, L_s, d_model)``; the result has the shape of ``x``. A linear map to the
        vocabulary turns it into next-token scores (:class:`course_lib.transformer.Transformer`).
    """

    layer_type = DecoderLayer
    torch_type = nn.TransformerDecoder

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        return_weights: bool = False,
        cache: DecoderCache | None = None,
    ) -> Tensor | tuple[Tensor, list[DecoderWeights]]:
        """Run the layers in order, each reading ``memory``, then the final norm if any.

        Args:
            x: ``(batch, L_t, d_model)``.
            memory: ``(batch, L_s, d_model)``.
            tgt_mask, memory_mask: bool masks (True = allowed) for every layer, see
                :meth:`DecoderLayer.forward`.
            return_weights: also return each layer's attention weights.
            cache: a :class:`course_lib.cache.DecoderCache` with one cache per layer, for
                generation (see :meth:`DecoderLayer.forward`).

        Returns:
            ``(batch, L_t, d_model)``, or ``(output, weights)`` with one
            :class:`DecoderWeights` per layer.
        """
        sequences("x", x, self.d_model)
        if cache is not None and len(cache.layers) != len(self.layers):
            raise ValueError(
                f"the cache has {len(cache.layers)} layer caches for a decoder of "
                f"{len(self.layers)} layers"
            )
        all_weights = []
        masks = (tgt_mask, memory_mask)
        for number, layer in enumerate(self.layers):
            past = None if cache is None else cache.layers[number]
            if return_weights:
                x, weights = layer(x, memory, *masks, return_weights=True, cache=past)
                all_weights.append(weights)
            else:
                x = layer(x, memory, *masks, cache=past)
        if self.norm is not None:
            x = self.norm(x)
        return (x, all_weights) if return_weights else x
