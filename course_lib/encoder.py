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

from typing import Any, ClassVar, TypeVar

import torch
from torch import Tensor, nn

from course_lib._checks import module_dtype, positive_int, probability, sequences
from course_lib.attention import MultiHeadAttention, _check_mask
from course_lib.feedforward import FeedForward, GatedFeedForward, activation_of, copy_linear
from course_lib.normalization import RMSNorm

__all__ = [
    "NORMS",
    "Encoder",
    "EncoderLayer",
    "LayerStack",
    "check_layer_mask",
    "copy_common_parts",
    "copy_layer_norm",
    "make_norm",
]

NORMS = ("layer", "rms")
Layer = TypeVar("Layer", bound=nn.Module)


def make_norm(norm: str, d_model: int, eps: float, bias: bool = True) -> nn.Module:
    """A normalization of every token's ``d_model`` features: ``nn.LayerNorm`` (``"layer"``,
    the paper's) or :class:`~course_lib.normalization.RMSNorm` (``"rms"``, Llama's, which has
    no bias)."""
    if norm == "layer":
        return nn.LayerNorm(d_model, eps=eps, bias=bias)
    if norm == "rms":
        return RMSNorm(d_model, eps=eps)
    raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")


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


def copy_common_parts(layer_type: type[Layer], layer: nn.Module) -> Layer:
    """A ``layer_type`` (:class:`EncoderLayer` or ``DecoderLayer``) with the settings of
    PyTorch's ``layer`` and copies of its self-attention and feed-forward weights, on its
    device and in its dtype; the caller copies the rest (norms, cross-attention)."""
    attention = layer.self_attn
    weight = layer.linear1.weight
    ours = layer_type(
        attention.embed_dim,
        attention.num_heads,
        layer.linear1.out_features,
        dropout=layer.dropout.p,
        norm_first=layer.norm_first,
        activation=activation_of(layer),
        layer_norm_eps=layer.norm1.eps,
    ).to(device=weight.device, dtype=weight.dtype)  # before copying: exact in any dtype
    ours.self_attention = MultiHeadAttention.from_torch(attention)
    copy_linear(ours.feed_forward.w_1, layer.linear1)
    copy_linear(ours.feed_forward.w_2, layer.linear2)
    return ours


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
        activation: of the feed-forward network, ``"relu"``, ``"gelu"``, ``"gelu_tanh"`` or
            ``"silu"``.
        layer_norm_eps: the ``eps`` of both layer normalizations.

    Keyword-only options, the changes of today's models (all off by default, the paper's
    layer):

    - ``norm``: ``"layer"`` (LayerNorm) or ``"rms"`` (:class:`RMSNorm`, Llama's);
    - ``gated``: a :class:`~course_lib.feedforward.GatedFeedForward` (SwiGLU with
      ``activation="silu"``) instead of the two-matrix network;
    - ``num_kv_heads``: grouped-query attention, fewer key/value heads than query heads;
    - ``rotary_base``: rotary positions in the self-attention (:mod:`course_lib.rotary`);
    - ``bias``: biases in the linear maps and norms (False: none, Llama's).

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
        network = GatedFeedForward if gated else FeedForward
        self.feed_forward = network(d_model, d_ff, dropout, activation, bias=bias)
        self.norm1 = make_norm(norm, d_model, layer_norm_eps, bias)
        self.norm2 = make_norm(norm, d_model, layer_norm_eps, bias)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> EncoderLayer:
        """An ``EncoderLayer`` with copies of the weights of an ``nn.TransformerEncoderLayer``.

        Its ``norm_first``, dropout, activation (ReLU, GELU or GELU's tanh approximation, in
        any form PyTorch takes, see :func:`~course_lib.feedforward.activation_of`) and ``eps``
        are taken over, and the weights are copied exactly, in their own dtype and on their
        own device. The result takes batch-first tensors (create PyTorch's layer with
        ``batch_first=True`` to feed both the same tensors) and masks with True = allowed
        (``~src_mask``). (PyTorch's own fast path, in ``eval()`` without gradients, computes
        the exact GELU for ``nn.GELU(approximate="tanh")``; the copy computes the tanh form
        the layer names, as PyTorch's layer does in training.)

        Raises:
            TypeError: if ``layer`` is not an ``nn.TransformerEncoderLayer``.
            ValueError: for a custom activation, or a layer without biases.
        """
        if not isinstance(layer, nn.TransformerEncoderLayer):
            raise TypeError(
                f"expected a torch.nn.TransformerEncoderLayer, got {type(layer).__name__}"
            )
        ours = copy_common_parts(cls, layer)
        copy_layer_norm(ours.norm1, layer.norm1)
        copy_layer_norm(ours.norm2, layer.norm2)
        return ours.train(layer.training)

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
        self._check_inputs(x, mask)
        if self.norm_first:  # pre-norm: x + sublayer(LayerNorm(x))
            update, weights = self.self_attention_block(
                self.norm1(x),
                mask,
                return_weights,
            )
            x = x + update
            x = x + self.feed_forward_block(self.norm2(x))
        else:  # post-norm: LayerNorm(x + sublayer(x))
            update, weights = self.self_attention_block(x, mask, return_weights)
            x = self.norm1(x + update)
            x = self.norm2(x + self.feed_forward_block(x))
        return (x, weights) if return_weights else x

    def self_attention_block(
        self, x: Tensor, mask: Tensor | None = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """The first sublayer without its residual: ``dropout(SelfAttention(x))``, weights."""
        output, weights = self.self_attention(x, x, x, mask, need_weights=need_weights)
        return self.dropout1(output), weights

    def feed_forward_block(self, x: Tensor) -> Tensor:
        """The second sublayer without its residual: ``dropout(FFN(x))``."""
        return self.dropout2(self.feed_forward(x))

    def _check_inputs(self, x: Tensor, mask: Tensor | None) -> None:
        sequences("x", x, self.d_model)
        module_dtype("x", x, self)
        if mask is not None:
            batch, length = x.shape[:2]
            check_layer_mask("mask", self.self_attention, mask, batch, length, length)

    def extra_repr(self) -> str:
        return f"norm_first={self.norm_first}"


class LayerStack(nn.Module):
    """``num_layers`` layers of one kind, one after the other, and an optional final norm:
    what :class:`Encoder` and :class:`~course_lib.decoder.Decoder` share (each writes its own
    ``forward``).

    Args:
        num_layers: the number of layers ``N`` (6 in the paper).
        d_model, num_heads, d_ff, dropout, norm_first, activation, layer_norm_eps: of every
            layer (see :class:`EncoderLayer`).
        options: the keyword-only options of the layers (``norm``, ``gated``,
            ``num_kv_heads``, ``rotary_base``, ``bias``); the final norm is of the layers'
            kind.
        final_norm: apply a normalization to the last layer's output. ``None`` (the
            default) means "if ``norm_first``": a pre-norm stack ends with an addition and
            needs it; a post-norm layer already ends with a norm. (``nn.Transformer`` adds
            one either way.)
    """

    layer_type: ClassVar[type[nn.Module]]  # EncoderLayer or DecoderLayer
    torch_type: ClassVar[type[nn.Module]]  # the PyTorch stack from_torch copies

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
        **options: Any,
    ) -> None:
        super().__init__()
        num_layers = positive_int("num_layers", num_layers)
        self.d_model = positive_int("d_model", d_model)
        settings = (d_model, num_heads, d_ff, dropout, norm_first, activation, layer_norm_eps)
        self.layers = nn.ModuleList(
            self.layer_type(*settings, **options) for _ in range(num_layers)
        )
        final_norm = norm_first if final_norm is None else final_norm
        norm, bias = options.get("norm", "layer"), options.get("bias", True)
        self.norm = make_norm(norm, d_model, layer_norm_eps, bias) if final_norm else None

    @classmethod
    def from_torch(cls, stack: nn.Module) -> LayerStack:
        """A stack with copies of the layers (and final norm) of PyTorch's stack, e.g.
        ``nn.Transformer(...).encoder``, on the layers' device and dtype and in its mode."""
        if not isinstance(stack, cls.torch_type):
            expected = f"torch.nn.{cls.torch_type.__name__}"
            raise TypeError(f"expected a {expected}, got {type(stack).__name__}")
        layers = [cls.layer_type.from_torch(layer) for layer in stack.layers]
        first = layers[0]
        ours = cls(
            len(layers),
            first.d_model,
            first.self_attention.num_heads,
            first.feed_forward.d_ff,
            norm_first=first.norm_first,
        )
        ours.layers = nn.ModuleList(layers)
        ours.norm = None
        weight = first.norm1.weight
        if stack.norm is not None:  # made in the layers' dtype, so that the copy is exact
            ours.norm = nn.LayerNorm(
                ours.d_model, eps=stack.norm.eps, device=weight.device, dtype=weight.dtype
            )
            copy_layer_norm(ours.norm, stack.norm)
        return ours.to(device=weight.device, dtype=weight.dtype).train(stack.training)


class Encoder(LayerStack):
    """``num_layers`` encoder layers, one after the other, and an optional final norm.

    Args:
        num_layers: the number of layers ``N`` (6 in the paper).
        d_model, num_heads, d_ff, dropout, norm_first, activation, layer_norm_eps: of every
            layer (see :class:`EncoderLayer`).
        options: the keyword-only options of :class:`EncoderLayer` (``norm``, ``gated``,
            ``num_kv_heads``, ``rotary_base``, ``bias``); the final norm is of the layers'
            kind.
        final_norm: as in :class:`LayerStack`: ``None`` (the default) means "if
            ``norm_first``".

    Built and copied from ``nn.TransformerEncoder`` (:meth:`~LayerStack.from_torch`) as in
    :class:`LayerStack`.

    Shape:
        ``forward(x, mask)``: ``x`` is ``(batch, L, d_model)``, the embedded source tokens
        with their positions; the result, the "memory" the decoder reads, has the same shape.
    """

    layer_type = EncoderLayer
    torch_type = nn.TransformerEncoder

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
