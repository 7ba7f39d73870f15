"""The Transformer encoder: a stack of identical layers (Vaswani et al., 2017, section 3.1).

Each :class:`EncoderLayer` has two sublayers, multi-head self-attention and the position-wise
feed-forward network, each wrapped in a residual connection and layer normalization ("Add &
Norm"). With ``X`` the layer's input (one row per token)::

    post-norm (the paper's, the default):   U = LayerNorm(X + SelfAttention(X))
                                            X' = LayerNorm(U + FFN(U))
    pre-norm (norm_first=True):             U = X + SelfAttention(LayerNorm(X))
                                            X' = U + FFN(LayerNorm(U))

(``U`` is the stream between the two sublayers, ``X'`` the layer's output; the names are the
book's, see notation.md.) Dropout, in training only, comes from two sources. The paper
(section 5.4) applies it to each sublayer's output before the residual addition, and to the
sums of the embeddings and the positional encodings, with P_drop = 0.1. PyTorch's
``nn.TransformerEncoderLayer``, like the authors' tensor2tensor code, also drops attention
weights and the feed-forward network's hidden units; this layer does all three, with one
probability, so that it matches PyTorch's.
:class:`Encoder` stacks ``N`` layers (``N = 6`` in the paper), the output of one being the
input of the next, with an optional final layer normalization (needed with pre-norm, whose
last layer ends with an addition). Token embeddings and the positional encoding come before
the first layer, once (:class:`course_lib.transformer.Transformer` does that).

Masks are boolean, **True where attention is allowed**, as in :mod:`course_lib.attention`:
``(L, L)``, ``(batch, L, L)`` or a padding mask ``(batch, 1, L)``
(:func:`course_lib.attention.padding_mask`). PyTorch's ``nn.TransformerEncoder`` uses the
opposite convention.
"""

from __future__ import annotations

from typing import TypeVar

import torch
from torch import Tensor, nn

from course_lib._checks import positive_int, probability, sequences
from course_lib.attention import MultiHeadAttention, _check_mask
from course_lib.feedforward import FeedForward, activation_of, copy_linear

__all__ = ["Encoder", "EncoderLayer", "assemble_stack", "check_layer_mask", "copy_layer_norm"]


def check_layer_mask(
    name: str, attention: MultiHeadAttention, mask: Tensor, batch: int, len_q: int, len_k: int
) -> None:
    """Raise, naming the argument ``name``, unless ``mask`` suits ``attention`` on these sizes.

    The mask must be boolean (True = allowed), broadcast to ``(batch, num_heads, L_q, L_k)``
    in one of the forms :meth:`MultiHeadAttention.forward` accepts, and leave every query at
    least one key.
    """
    try:
        full = attention.head_mask(mask, batch, len_q, len_k)
        _check_mask(full, torch.Size((batch, attention.num_heads, len_q, len_k)))
    except (TypeError, ValueError) as error:
        raise type(error)(f"{name}: {error}") from None


Stack = TypeVar("Stack", bound=nn.Module)


def assemble_stack(stack_type: type[Stack], layers: list[nn.Module], source: nn.Module) -> Stack:
    """A ``stack_type`` (:class:`Encoder` or ``Decoder``) holding ``layers`` (ours, copied from
    the layers of ``source``, PyTorch's stack) and a copy of ``source``'s final norm, on the
    layers' device and dtype and in ``source``'s mode."""
    first = layers[0]
    stack = stack_type(len(layers), first.d_model, first.self_attention.num_heads,
                       first.feed_forward.d_ff, norm_first=first.norm_first)  # fmt: skip
    stack.layers = nn.ModuleList(layers)
    stack.norm = None
    if source.norm is not None:
        stack.norm = nn.LayerNorm(stack.d_model, eps=source.norm.eps)
        copy_layer_norm(stack.norm, source.norm)
    weight = first.norm1.weight
    return stack.to(device=weight.device, dtype=weight.dtype).train(source.training)


def copy_layer_norm(target: nn.LayerNorm, source: nn.LayerNorm) -> None:
    """Copy gain and bias of ``source`` (an ``nn.LayerNorm`` of the same size) into ``target``."""
    if not isinstance(source, nn.LayerNorm) or source.weight is None or source.bias is None:
        raise ValueError(
            "from_torch takes layers whose norms are nn.LayerNorm with a gain and a bias "
            f"(elementwise_affine=True, bias=True); got {source!r}"
        )
    with torch.no_grad():
        target.weight.copy_(source.weight)
        target.bias.copy_(source.bias)


class EncoderLayer(nn.Module):
    """One encoder layer: self-attention and feed-forward, each with Add & Norm.

    Args:
        d_model: size of every token's vector.
        num_heads: heads of the self-attention; must divide ``d_model``.
        d_ff: hidden size of the feed-forward network.
        dropout: dropout probability, used on each sublayer's output before the residual
            addition (the paper's "residual dropout"), and also, as PyTorch's
            ``nn.TransformerEncoderLayer`` does, on the attention weights and inside the
            feed-forward network (not in the paper).
        norm_first: False for post-norm ``LayerNorm(x + sublayer(x))`` (the paper's),
            True for pre-norm ``x + sublayer(LayerNorm(x))``.
        activation: of the feed-forward network, ``"relu"`` or ``"gelu"``.
        layer_norm_eps: the ``eps`` of both layer normalizations.

    Shape:
        ``forward(x, mask)``: ``x`` is ``(batch, L, d_model)``; the result has the same shape.
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
    ) -> None:
        super().__init__()
        self.d_model = positive_int("d_model", d_model)
        dropout = probability("dropout", dropout)
        self.norm_first = bool(norm_first)
        self.self_attention = MultiHeadAttention(d_model, num_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> EncoderLayer:
        """An ``EncoderLayer`` with copies of the weights of an ``nn.TransformerEncoderLayer``.

        Its ``norm_first``, dropout, activation (ReLU or GELU) and ``eps`` are taken over. The
        result takes batch-first tensors (create PyTorch's layer with ``batch_first=True`` to
        feed both the same tensors) and masks with True = allowed (``~src_mask``).

        Raises:
            TypeError: if ``layer`` is not an ``nn.TransformerEncoderLayer``.
            ValueError: for a custom activation, or a layer without biases.
        """
        if not isinstance(layer, nn.TransformerEncoderLayer):
            raise TypeError(
                f"expected a torch.nn.TransformerEncoderLayer, got {type(layer).__name__}"
            )
        attention = layer.self_attn
        ours = cls(
            attention.embed_dim,
            attention.num_heads,
            layer.linear1.out_features,
            dropout=layer.dropout.p,
            norm_first=layer.norm_first,
            activation=activation_of(layer),
            layer_norm_eps=layer.norm1.eps,
        )
        ours.self_attention = MultiHeadAttention.from_torch(attention)
        copy_linear(ours.feed_forward.w_1, layer.linear1)
        copy_linear(ours.feed_forward.w_2, layer.linear2)
        copy_layer_norm(ours.norm1, layer.norm1)
        copy_layer_norm(ours.norm2, layer.norm2)
        weight = layer.linear1.weight
        return ours.to(device=weight.device, dtype=weight.dtype).train(layer.training)

    def forward(
        self, x: Tensor, mask: Tensor | None = None, return_weights: bool = False
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Self-attention, then the feed-forward network, each with Add & Norm.

        Args:
            x: ``(batch, L, d_model)``: the token vectors entering the layer.
            mask: optional bool mask, True where attention is allowed: ``(L, L)``,
                ``(batch, L, L)``, or a padding mask ``(batch, 1, L)``.
            return_weights: also return the self-attention weights (computed the explicit,
                slower way; without them the heads run in PyTorch's fused kernel).

        Returns:
            ``(batch, L, d_model)``, or ``(output, weights)`` with weights
            ``(batch, num_heads, L, L)`` if ``return_weights``.
        """
        sequences("x", x, self.d_model)
        if mask is not None:
            batch, length = x.shape[:2]
            attention = self.self_attention
            check_layer_mask("mask", attention, mask, batch, length, length)
        if self.norm_first:  # pre-norm: x + sublayer(LayerNorm(x))
            update, weights = self.self_attention_block(
                self.norm1(x), mask, return_weights
            )  # fmt: skip
            x = x + update
            x = x + self.feed_forward_block(self.norm2(x))
        else:  # post-norm: LayerNorm(x + sublayer(x))
            update, weights = self.self_attention_block(
                x, mask, return_weights
            )  # fmt: skip
            x = self.norm1(x + update)
            x = self.norm2(x + self.feed_forward_block(x))
        return (x, weights) if return_weights else x

    def self_attention_block(
        self, x: Tensor, mask: Tensor | None = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """The first sublayer without its residual: ``dropout(SelfAttention(x))``, weights."""
        output, weights = self.self_attention(
            x, x, x, mask, need_weights=need_weights
        )  # fmt: skip
        return self.dropout1(output), weights

    def feed_forward_block(self, x: Tensor) -> Tensor:
        """The second sublayer without its residual: ``dropout(FFN(x))``."""
        return self.dropout2(self.feed_forward(x))

    def extra_repr(self) -> str:
        return f"norm_first={self.norm_first}"


class Encoder(nn.Module):
    """``num_layers`` encoder layers, one after the other, and an optional final norm.

    Args:
        num_layers: the number of layers ``N`` (6 in the paper).
        d_model, num_heads, d_ff, dropout, norm_first, activation, layer_norm_eps: of every
            layer (see :class:`EncoderLayer`).
        final_norm: apply a layer normalization to the last layer's output. ``None`` (the
            default) means "if ``norm_first``": a pre-norm stack ends with an addition and
            needs it; a post-norm layer already ends with a norm. (``nn.Transformer`` adds
            one either way.)

    Shape:
        ``forward(x, mask)``: ``x`` is ``(batch, L, d_model)``, the embedded source tokens
        with their positions; the result, the "memory" the decoder reads, has the same shape.
    """

    def __init__(
        self,
        num_layers: int,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        final_norm: bool | None = None,
        activation: str = "relu",
        layer_norm_eps: float = 1e-5,
    ) -> None:
        super().__init__()
        num_layers = positive_int("num_layers", num_layers)
        self.d_model = positive_int("d_model", d_model)
        settings = (d_model, num_heads, d_ff, dropout, norm_first, activation, layer_norm_eps)
        self.layers = nn.ModuleList(EncoderLayer(*settings) for _ in range(num_layers))
        final_norm = norm_first if final_norm is None else final_norm
        self.norm = nn.LayerNorm(d_model, eps=layer_norm_eps) if final_norm else None

    @classmethod
    def from_torch(cls, encoder: nn.TransformerEncoder) -> Encoder:
        """An ``Encoder`` with copies of the layers (and final norm) of an
        ``nn.TransformerEncoder``, e.g. ``nn.Transformer(...).encoder``."""
        if not isinstance(encoder, nn.TransformerEncoder):
            raise TypeError(f"expected a torch.nn.TransformerEncoder, got {type(encoder).__name__}")
        layers = [EncoderLayer.from_torch(layer) for layer in encoder.layers]
        return assemble_stack(cls, layers, encoder)

    def forward(
        self, x: Tensor, mask: Tensor | None = None, return_weights: bool = False
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """Run the layers in order, then the final norm if there is one.

        Args:
            x: ``(batch, L, d_model)``.
            mask: optional bool mask for every layer's self-attention (True = allowed),
                usually the source padding mask ``(batch, 1, L)``.
            return_weights: also return each layer's attention weights.

        Returns:
            ``(batch, L, d_model)``, or ``(output, weights)`` with a list of one
            ``(batch, num_heads, L, L)`` tensor per layer.
        """
        sequences("x", x, self.d_model)
        all_weights = []
        for layer in self.layers:
            if return_weights:
                x, weights = layer(x, mask, return_weights=True)
                all_weights.append(weights)
            else:
                x = layer(x, mask)
        if self.norm is not None:
            x = self.norm(x)
        return (x, all_weights) if return_weights else x
