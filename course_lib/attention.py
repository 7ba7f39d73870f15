"""Attention: scaled dot-product, masks and multi-head attention (Vaswani et al., 2017, 3.2).

``Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V``, written out step by step so that the
book can show exactly what is computed, and :class:`MultiHeadAttention` built on it.

Masks are boolean and **True where attention is allowed**, the convention of
:func:`torch.nn.functional.scaled_dot_product_attention`. (PyTorch's ``nn.MultiheadAttention``
and ``nn.Transformer`` use the opposite one: True there means "not allowed". Convert with
``~mask``.)

Shapes, batch first throughout:

- :func:`scaled_dot_product_attention`: query ``(..., L_q, d_k)``, key ``(..., L_k, d_k)``,
  value ``(..., L_k, d_v)``, mask broadcastable to ``(..., L_q, L_k)``;
- :func:`causal_mask`: ``(L_q, L_k)``; :func:`padding_mask`: ``(batch, 1, L_k)``, so that it
  broadcasts over the queries of each sequence;
- :class:`MultiHeadAttention`: inputs ``(batch, L, d_model)``, per-head tensors
  ``(batch, num_heads, L, d_head)``, weights ``(batch, num_heads, L_q, L_k)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib._checks import (
    check_tensor,
    floating,
    integer,
    module_dtype,
    positive_int,
    probability,
)
from course_lib._devices import values_checkable

if TYPE_CHECKING:
    from course_lib.cache import KeyValueCache

__all__ = [
    "MultiHeadAttention",
    "causal_mask",
    "merge_heads",
    "padding_mask",
    "scaled_dot_product_attention",
    "split_heads",
]


# --------------------------------------------------------------------------- checks


def _check_shapes(query: Tensor, key: Tensor, value: Tensor) -> None:
    """Raise unless query, key and value are floating-point tensors of one dtype whose shapes
    fit ``(..., L_q, d_k)``, ``(..., L_k, d_k)``, ``(..., L_k, d_v)``, with ``d_k, L_k >= 1``
    and batch axes ``...`` that broadcast."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        floating(name, x)
        if x.dim() < 2:
            raise ValueError(
                f"{name} must have at least 2 dimensions (..., length, features), "
                f"got shape {tuple(x.shape)}"
            )
    if not query.dtype == key.dtype == value.dtype:
        raise TypeError(
            "query, key and value must have the same dtype, got "
            f"{query.dtype}, {key.dtype} and {value.dtype}; convert them with .to(dtype)"
        )
    if key.size(-2) == 0:
        raise ValueError(f"key must hold at least one position, got shape {tuple(key.shape)}")
    if query.size(-1) != key.size(-1):
        raise ValueError(
            f"query and key must share their last size d_k, got query {tuple(query.shape)} "
            f"and key {tuple(key.shape)}"
        )
    if query.size(-1) == 0:
        raise ValueError(f"d_k must be at least 1, got query {tuple(query.shape)}")
    if key.size(-2) != value.size(-2):
        raise ValueError(
            f"key and value must have the same length L_k, got key {tuple(key.shape)} "
            f"and value {tuple(value.shape)}"
        )
    batch_axes = [tuple(t.shape[:-2]) for t in (query, key, value)]
    try:
        torch.broadcast_shapes(*batch_axes)
    except RuntimeError:
        raise ValueError(
            "query, key and value must have the same batch axes (...) or ones that broadcast, "
            f"got query {tuple(query.shape)}, key {tuple(key.shape)} and value "
            f"{tuple(value.shape)}"
        ) from None


def _check_mask(mask: Tensor, scores_shape: torch.Size) -> Tensor:
    """``mask`` if it is boolean, broadcasts to ``scores_shape`` and leaves no query row empty."""
    if not isinstance(mask, Tensor):
        raise TypeError(f"mask must be a bool tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        hint = ""
        if mask.is_floating_point():
            hint = (
                "; a float mask of 0 and -inf (PyTorch's nn.Transformer style) converts with "
                "mask == 0"
            )
        raise TypeError(
            f"mask must be a bool tensor (True where attention is allowed), got {mask.dtype}" + hint
        )
    broadcasts = mask.dim() <= len(scores_shape) and all(
        m in (1, s) for m, s in zip(reversed(mask.shape), reversed(scores_shape), strict=False)
    )
    if not broadcasts:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the attention scores' "
            f"shape (..., L_q, L_k) = {tuple(scores_shape)}"
        )
    # A row with no allowed key would be softmax(-inf, ..., -inf) = 0/0 = NaN. Rows are checked
    # on the mask as given (before broadcasting), which is cheap, where values can be read.
    if not values_checkable(mask):
        return mask
    empty_rows = ~mask.any(dim=-1)
    if empty_rows.any():
        first = tuple(int(i) for i in empty_rows.nonzero()[0])
        raise ValueError(
            f"{int(empty_rows.sum())} query row(s) have no allowed key (the first at index "
            f"{first}); every query must be allowed to attend to at least one key, otherwise "
            "its softmax is 0/0"
        )
    return mask


# --------------------------------------------------------------------------- attention


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None = None,
    *,
    scale: float | None = None,
    dropout: Callable[[Tensor], Tensor] | None = None,
) -> tuple[Tensor, Tensor]:
    """Attend from every query to the keys and mix the values with the resulting weights.

    Args:
        query: ``(..., L_q, d_k)``.
        key: ``(..., L_k, d_k)``.
        value: ``(..., L_k, d_v)``.
        mask: optional bool tensor broadcastable to ``(..., L_q, L_k)``, True where query
            ``i`` may attend to key ``j``. Every query row needs at least one True.
        scale: the factor of the scores; default ``1 / sqrt(d_k)``. (``scale=1.0`` gives the
            unscaled dot products, to see why the scaling is there.)
        dropout: optional function applied to the weights before they mix the values, such as
            an ``nn.Dropout`` (what ``nn.MultiheadAttention`` does in training).

    Returns:
        ``(output, weights)``: output ``(..., L_q, d_v)`` and attention weights
        ``(..., L_q, L_k)``, the ones that mixed the values. Without dropout each row of the
        weights sums to 1 and masked entries are exactly 0.

    Raises:
        ValueError: on mismatched shapes, a mask that does not broadcast, or a query row
            that the mask leaves with no key.
        TypeError: if an input is not a tensor or the mask is not boolean.
    """
    _check_shapes(query, key, value)
    d_k = query.size(-1)
    if scale is None:
        scale = 1 / math.sqrt(d_k)
    # Q K^T / sqrt(d_k), computed as (Q / sqrt(d_k)) K^T: the same numbers,
    # but scaling the L_q x d_k queries is cheaper than the L_q x L_k scores.
    scores = (query * scale) @ key.transpose(-2, -1)  # (..., L_q, L_k)
    if mask is not None:
        mask = _check_mask(mask, scores.shape)
        scores = scores.masked_fill(~mask, float("-inf"))  # exp(-inf) = 0
    weights = torch.softmax(scores, dim=-1)  # each row sums to 1
    if dropout is not None:
        weights = dropout(weights)
    return weights @ value, weights


# --------------------------------------------------------------------------- masks


def causal_mask(
    size: int,
    *,
    num_keys: int | None = None,
    device: torch.device | str | None = None,
) -> Tensor:
    """The mask that lets position ``i`` attend to positions ``0..i`` only (itself and before).

    Args:
        size: the number of queries ``L_q`` (and of keys, unless ``num_keys`` is given).
        num_keys: the number of keys ``L_k >= size``, when the queries are the *last* ``size``
            positions of a longer sequence (decoding with cached keys): query ``i`` is then at
            position ``i + num_keys - size``.
        device: where to create the mask.

    Returns:
        bool tensor ``(size, num_keys)``, True on and below the (shifted) diagonal. For
        ``size=3``: ``[[T, F, F], [T, T, F], [T, T, T]]``.
    """
    size = positive_int("size", size)
    num_keys = size if num_keys is None else positive_int("num_keys", num_keys)
    if num_keys < size:
        raise ValueError(
            f"num_keys must be at least size (the queries are the last "
            f"positions of the keys), got size={size}, num_keys={num_keys}"
        )
    allowed = torch.ones(size, num_keys, dtype=torch.bool, device=device)
    return allowed.tril(diagonal=num_keys - size)


def padding_mask(ids: Tensor, pad_id: int) -> Tensor:
    """The mask that hides padding tokens from every query: True at real tokens.

    Args:
        ids: integer tensor of token ids ``(batch, L_k)``, padded with ``pad_id``
            (``course_lib.vocab.pad_batch`` makes one; its ``Vocabulary.pad_id`` is 0).
        pad_id: the id of the padding token.

    Returns:
        bool tensor ``(batch, 1, L_k)``: entry ``[b, 0, j]`` is True where ``ids[b, j]`` is a
        real token. The middle axis of size 1 broadcasts over the queries, so the mask fits
        ``(batch, L_q, L_k)`` scores (and, in :class:`MultiHeadAttention`, every head). Combine
        it with a causal mask by ``&``: ``causal_mask(L) & padding_mask(ids, pad_id)`` is
        ``(batch, L, L)``.
    """
    if not isinstance(ids, Tensor):
        raise TypeError(
            f"ids must be a tensor of token ids, got {type(ids).__name__}",
        )
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(
            f"ids must be an integer tensor of token ids, got {ids.dtype}",
        )
    if ids.dim() != 2:
        raise ValueError(
            f"ids must have shape (batch, L_k), got {tuple(ids.shape)}; "
            "for one sequence use ids.unsqueeze(0)"
        )
    pad_id = integer("pad_id", pad_id)
    return (ids != pad_id).unsqueeze(1)


# --------------------------------------------------------------------------- heads


def split_heads(x: Tensor, num_heads: int) -> Tensor:
    """Cut the features of every position into ``num_heads`` slices, one per head.

    Args:
        x: ``(batch, L, d_model)``, with ``d_model`` divisible by ``num_heads``.
        num_heads: the number of heads ``h``.

    Returns:
        ``(batch, h, L, d_model / h)``: ``result[b, m]`` holds features
        ``m * d_head .. (m + 1) * d_head - 1`` of every position, for head ``m``.
    """
    check_tensor("x", x)
    if x.dim() != 3:
        raise ValueError(
            f"expected (batch, L, d_model), got shape {tuple(x.shape)}",
        )
    num_heads = positive_int("num_heads", num_heads)
    batch, length, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(
            f"d_model={d_model} is not divisible by num_heads={num_heads}",
        )
    d_head = d_model // num_heads
    return x.view(batch, length, num_heads, d_head).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    """Put the heads' outputs side by side again: the inverse of :func:`split_heads`.

    Args:
        x: ``(batch, h, L, d_head)``.

    Returns:
        ``(batch, L, h * d_head)``: the concatenation ``[head_0, ..., head_{h-1}]`` of every
        position.
    """
    check_tensor("x", x)
    if x.dim() != 4:
        raise ValueError(
            f"expected (batch, heads, L, d_head), got shape {tuple(x.shape)}",
        )
    batch, num_heads, length, d_head = x.shape
    return x.transpose(1, 2).reshape(batch, length, num_heads * d_head)


# --------------------------------------------------------------------------- multi-head


class MultiHeadAttention(nn.Module):
    """Multi-head attention, batch first (Vaswani et al., 2017, section 3.2.2).

    ``MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O`` with
    ``head_m = Attention(Q W_m^Q, K W_m^K, V W_m^V)``. The ``h`` matrices ``W_m^Q`` of size
    ``d_model x d_head`` (``d_head = d_model / h``) sit side by side in one linear layer
    ``w_q``, and likewise for keys and values; :meth:`split_heads` cuts the projected features
    into the heads, :meth:`merge_heads` concatenates the heads' outputs before ``w_o``.

    ``d_head = d_model / h`` is the paper's choice (``d_k = d_v = d_model / h``), which this
    class follows; the formula itself only needs ``W^O`` to be ``(h d_v, d_model)``, and some
    models use other head widths (T5-3B: 32 heads of 128 features, ``d_model = 1024``).

    Args:
        d_model: size of the inputs and outputs.
        num_heads: number of heads ``h``; must divide ``d_model`` (this class's choice, above).
        dropout: probability of dropping attention weights in training. The paper does not
            describe this dropout (its section 5.4 drops each sublayer's output and the sums
            of embeddings and positional encodings); PyTorch's ``nn.MultiheadAttention`` does
            it, and so does the authors' tensor2tensor code (its ``attention_dropout``).
        bias: whether the four linear layers have biases.

    Shape:
        ``forward(query, key, value, mask)``: query ``(batch, L_q, d_model)``, key and value
        ``(batch, L_k, d_model)``; returns output ``(batch, L_q, d_model)`` and weights
        ``(batch, num_heads, L_q, L_k)``. Self-attention passes the same tensor three times;
        cross-attention passes the decoder's states as query and the encoder's output as key
        and value.
    """

    def __init__(
        self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True
    ) -> None:
        super().__init__()
        d_model = positive_int("d_model", d_model)
        num_heads = positive_int("num_heads", num_heads)
        if d_model % num_heads:
            choices = [h for h in range(1, d_model + 1) if d_model % h == 0]
            raise ValueError(
                f"d_model={d_model} is not divisible by num_heads={num_heads}: this class "
                "gives each head d_model / num_heads features (the paper's choice, not a "
                f"rule of attention); num_heads could be one of {choices[:12]}"
            )
        dropout = probability("dropout", dropout)
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_head = d_model // num_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(float(dropout))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot-uniform weights and zero biases (``nn.MultiheadAttention`` starts its input
        projections the same way)."""
        for linear in (self.w_q, self.w_k, self.w_v, self.w_o):
            nn.init.xavier_uniform_(linear.weight)
            if linear.bias is not None:
                nn.init.zeros_(linear.bias)

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention) -> MultiHeadAttention:
        """A ``MultiHeadAttention`` with copies of the weights of an ``nn.MultiheadAttention``.

        ``nn.MultiheadAttention`` keeps ``W^Q``, ``W^K`` and ``W^V`` stacked in one
        ``in_proj_weight`` of shape ``(3 d_model, d_model)``; they become ``w_q``, ``w_k`` and
        ``w_v``, and ``out_proj`` becomes ``w_o``. The result takes batch-first tensors (pass
        ``batch_first=True`` to PyTorch's module to feed both the same tensors) and masks with
        True = allowed, the opposite of ``attn_mask`` and ``key_padding_mask``.

        Raises:
            TypeError: if ``module`` is not an ``nn.MultiheadAttention``.
            ValueError: if it has ``kdim``/``vdim`` other than ``embed_dim``, ``add_bias_kv``
                or ``add_zero_attn``, which this class does not have.
        """
        if not isinstance(module, nn.MultiheadAttention):
            raise TypeError(f"expected a torch.nn.MultiheadAttention, got {type(module).__name__}")
        if not module._qkv_same_embed_dim or module.bias_k is not None or module.add_zero_attn:
            raise ValueError(
                "from_torch takes an nn.MultiheadAttention with kdim = vdim = embed_dim, "
                f"add_bias_kv=False and add_zero_attn=False; got kdim={module.kdim}, "
                f"vdim={module.vdim}, add_bias_kv={module.bias_k is not None}, "
                f"add_zero_attn={module.add_zero_attn}"
            )
        weight = module.in_proj_weight
        ours = cls(
            module.embed_dim, module.num_heads, module.dropout, bias=module.in_proj_bias is not None
        ).to(device=weight.device, dtype=weight.dtype)
        with torch.no_grad():
            for linear, w in zip((ours.w_q, ours.w_k, ours.w_v), weight.chunk(3), strict=True):
                linear.weight.copy_(w)
            ours.w_o.weight.copy_(module.out_proj.weight)
            if module.in_proj_bias is not None:
                for linear, b in zip(
                    (ours.w_q, ours.w_k, ours.w_v), module.in_proj_bias.chunk(3), strict=True
                ):
                    linear.bias.copy_(b)
                ours.w_o.bias.copy_(module.out_proj.bias)
        return ours.train(module.training)

    def split_heads(self, x: Tensor) -> Tensor:
        """``(batch, L, d_model)`` -> ``(batch, num_heads, L, d_head)``."""
        return split_heads(x, self.num_heads)

    def merge_heads(self, x: Tensor) -> Tensor:
        """``(batch, num_heads, L, d_head)`` -> ``(batch, L, d_model)``."""
        return merge_heads(x)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        mask: Tensor | None = None,
        need_weights: bool = True,
    ) -> tuple[Tensor, Tensor | None]:
        """Project, split into heads, attend in every head at once, merge, project.

        Args:
            query: ``(batch, L_q, d_model)``.
            key, value: ``(batch, L_k, d_model)``.
            mask: optional bool tensor, True where attention is allowed, of shape
                ``(L_q, L_k)`` (the same for every sequence, e.g. :func:`causal_mask`),
                ``(batch, L_q, L_k)`` (one per sequence, e.g. :func:`padding_mask`'s
                ``(batch, 1, L_k)``) or ``(batch, num_heads, L_q, L_k)``; sizes of 1
                broadcast.
            need_weights: return the attention weights. With False the heads are computed by
                PyTorch's fused ``F.scaled_dot_product_attention`` (faster, same result) and
                the weights are ``None``.

        Returns:
            ``(output, weights)``: ``(batch, L_q, d_model)`` and
            ``(batch, num_heads, L_q, L_k)`` (or ``None``).
        """
        self._check_inputs(query, key, value)
        q = self.split_heads(self.w_q(query))  # (batch, h, L_q, d_head)
        k = self.split_heads(self.w_k(key))  # (batch, h, L_k, d_head)
        v = self.split_heads(self.w_v(value))  # (batch, h, L_k, d_head)
        if mask is not None:
            mask = self.head_mask(mask, query.size(0), query.size(1), key.size(1))
        # every head at once: (batch, h, L_q, d_head)
        heads, weights = self.attend(q, k, v, mask, need_weights)
        return self.w_o(self.merge_heads(heads)), weights

    def forward_with_cache(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        cache: KeyValueCache,
        mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """:meth:`forward` for new positions, with the keys and values of earlier ones cached.

        The queries are projected as in :meth:`forward`. The keys and values of ``key`` and
        ``value`` (the new positions) are appended to ``cache``, and the queries attend over
        all stored positions. A static cache (cross-attention) is filled at the first call
        and then used as it is, without projecting ``key`` and ``value`` again.

        Args:
            query: ``(batch, n, d_model)``, the ``n`` new positions (one per generation step).
            key, value: ``(batch, n, d_model)`` for self-attention, the same as ``query``;
                the encoder output ``(batch, L_s, d_model)`` for cross-attention.
            cache: a :class:`course_lib.cache.KeyValueCache`, updated in place.
            mask: bool, True where allowed, of shape ``(n, t)``, ``(batch, n, t)`` or
                ``(batch, num_heads, n, t)`` with ``t`` the stored positions after the
                update; ``causal_mask(n, num_keys=t)`` for self-attention.
            need_weights: also return the weights ``(batch, num_heads, n, t)``.

        Returns:
            ``(output, weights)``: ``(batch, n, d_model)`` and the weights (or ``None``).
        """
        self._check_inputs(query, key, value)
        q = self.split_heads(self.w_q(query))  # (batch, h, n, d_head)
        if cache.static and cache.length:  # the encoder output, projected before
            k, v = cache.keys, cache.values
        else:  # (batch, h, t, d_head): the stored positions, then the new ones
            k, v = cache.update(
                self.split_heads(self.w_k(key)), self.split_heads(self.w_v(value))
            )  # fmt: skip
        if k.size(0) != q.size(0):
            raise ValueError(
                f"the cache holds {k.size(0)} sequences, the query {q.size(0)}"
            )  # fmt: skip
        if mask is not None:
            mask = self.head_mask(mask, query.size(0), query.size(1), k.size(-2))
        heads, weights = self.attend(q, k, v, mask, need_weights)
        return self.w_o(self.merge_heads(heads)), weights

    def attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Tensor | None,
        need_weights: bool = True,
    ) -> tuple[Tensor, Tensor | None]:
        """Scaled dot-product attention in every head, with dropout on the weights in training.

        ``q`` is ``(batch, h, L_q, d_head)``, ``k`` and ``v`` ``(batch, h, L_k, d_head)``,
        ``mask`` broadcastable to ``(batch, h, L_q, L_k)``.
        """
        if need_weights:
            return scaled_dot_product_attention(q, k, v, mask, dropout=self.dropout)
        if mask is not None:
            _check_mask(mask, torch.Size((*q.shape[:-1], k.size(-2))))
        p = self.dropout.p if self.training else 0.0
        fused = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        return fused, None

    def head_mask(self, mask: Tensor, batch: int, len_q: int, len_k: int) -> Tensor:
        """``mask`` as a 4-D tensor that broadcasts to ``(batch, num_heads, L_q, L_k)``."""
        if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
            _check_mask(mask, torch.Size((batch, self.num_heads, len_q, len_k)))  # raises
        forms = {2: "(L_q, L_k)", 3: "(batch, L_q, L_k)", 4: "(batch, num_heads, L_q, L_k)"}
        if mask.dim() not in forms:
            raise ValueError(
                f"mask must have 2, 3 or 4 dimensions: {', '.join(forms.values())}; "
                f"got shape {tuple(mask.shape)}"
            )
        full = {2: (len_q, len_k), 3: (batch, len_q, len_k)}.get(
            mask.dim(), (batch, self.num_heads, len_q, len_k)
        )
        if any(m not in (1, s) for m, s in zip(mask.shape, full, strict=True)):
            message = (
                f"a {mask.dim()}-D mask must have shape {forms[mask.dim()]} = {full} (sizes of "
                f"1 broadcast), got {tuple(mask.shape)}"
            )
            if tuple(mask.shape) == (batch, len_k):
                message += (
                    "; for a key padding mask of shape (batch, L_k) use mask[:, None, :] "
                    "(padding_mask returns that form)"
                )
            raise ValueError(message)
        if mask.dim() == 2:
            return mask[None, None]
        if mask.dim() == 3:
            return mask[:, None]
        return mask

    def _check_inputs(self, query: Tensor, key: Tensor, value: Tensor) -> None:
        for name, x in (("query", query), ("key", key), ("value", value)):
            check_tensor(name, x)
            if x.dim() != 3 or x.size(-1) != self.d_model:
                hint = "; add a batch axis with .unsqueeze(0)" if x.dim() == 2 else ""
                raise ValueError(
                    f"{name} must have shape (batch, length, d_model={self.d_model}), "
                    f"got {tuple(x.shape)}{hint}"
                )
        if not query.size(0) == key.size(0) == value.size(0):
            raise ValueError(
                "query, key and value must have the same batch size, got "
                f"{query.size(0)}, {key.size(0)} and {value.size(0)}"
            )
        if key.size(1) != value.size(1):
            raise ValueError(
                f"key and value must have the same length L_k, got {key.size(1)} and "
                f"{value.size(1)}"
            )
        if key.size(1) == 0:
            raise ValueError(f"key must hold at least one position, got {tuple(key.shape)}")
        for name, x in (("query", query), ("key", key), ("value", value)):
            module_dtype(name, x, self)

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, num_heads={self.num_heads}, d_head={self.d_head}, "
            f"dropout={self.dropout.p}"
        )
