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
- :func:`tiled_attention`: the same inputs and the same output as
  :func:`scaled_dot_product_attention`, computed block by block with an online softmax, so that
  no ``(L_q, L_k)`` tensor is ever built (the idea of FlashAttention);
- :func:`causal_mask` and :func:`sliding_window_mask`: ``(L_q, L_k)``; :func:`padding_mask`:
  ``(batch, 1, L_k)``, so that it broadcasts over the queries of each sequence;
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
    base_value,
    check_tensor,
    floating,
    integer,
    module_dtype,
    positive_int,
    probability,
)
from course_lib._devices import values_checkable
from course_lib.rotary import rotate

if TYPE_CHECKING:
    from course_lib.cache import KeyValueCache

__all__ = [
    "MultiHeadAttention",
    "causal_mask",
    "merge_heads",
    "padding_mask",
    "repeat_kv",
    "scaled_dot_product_attention",
    "sliding_window_mask",
    "split_heads",
    "tiled_attention",
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


def tiled_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None = None,
    *,
    block_size: int = 64,
    scale: float | None = None,
) -> Tensor:
    """Scaled dot-product attention, one block of queries and one block of keys at a time.

    The output equals :func:`scaled_dot_product_attention`'s (up to rounding), but the
    ``(L_q, L_k)`` matrix of scores is never built: the largest tensor of scores is one
    ``block_size x block_size`` tile. For each block of queries it walks over the blocks of
    keys and values and keeps, per query, three running quantities: the largest score seen so
    far ``m``, the sum of exponentials ``l = sum_j exp(s_j - m)``, and the output so far
    ``acc = sum_j exp(s_j - m) v_j``. When a new block raises the maximum from ``m`` to
    ``m_new``, everything accumulated is rescaled by ``exp(m - m_new)`` (the online softmax of
    Milakov & Gimelshein, 2018; Algorithm 1 of FlashAttention, Dao et al., 2022; Rabe & Staats,
    2021). At the end, ``output = acc / l``.

    Args:
        query: ``(..., L_q, d_k)``.
        key: ``(..., L_k, d_k)``.
        value: ``(..., L_k, d_v)``.
        mask: optional bool tensor broadcastable to ``(..., L_q, L_k)``, True where query
            ``i`` may attend to key ``j``, as in :func:`scaled_dot_product_attention`. Every
            query row needs at least one True.
        block_size: the number of queries, and of keys, in one tile (any positive integer;
            larger than the length means a single block).
        scale: the factor of the scores; default ``1 / sqrt(d_k)``.

    Returns:
        the output ``(..., L_q, d_v)``. There are no weights to return: they never exist as
        a whole. Half-precision inputs are accumulated in float32 and the output is cast back.

    Raises:
        ValueError: on mismatched shapes, a mask that does not broadcast, a query row that the
            mask leaves with no key, or a ``block_size`` below 1.
        TypeError: if an input is not a tensor, the mask is not boolean or ``block_size`` is
            not an integer.
    """
    _check_shapes(query, key, value)
    block_size = positive_int("block_size", block_size)
    len_q, len_k = query.size(-2), key.size(-2)
    if mask is not None:
        leading = (t.shape[:-2] for t in (query, key, value))
        batch = torch.broadcast_shapes(*leading)
        mask = _check_mask(mask, torch.Size((*batch, len_q, len_k)))
        # at least 2-D, (L_q, L_k)
        mask = mask.reshape((1,) * (2 - mask.dim()) + mask.shape)
    if scale is None:
        scale = 1 / math.sqrt(query.size(-1))
    # half precision loses too much in the running sums:
    # keep them in float32, as kernels do
    work = torch.promote_types(query.dtype, torch.float32)
    outputs = []
    for q_start in range(0, len_q, block_size):
        rows = slice(q_start, q_start + block_size)
        q = query[..., rows, :].to(work) * scale  # (..., b_q, d_k)
        # m, l and the output so far: set by the first block
        row_max = row_sum = acc = None
        for k_start in range(0, len_k, block_size):
            cols = slice(k_start, k_start + block_size)
            k = key[..., cols, :].to(work)  # (..., b_k, d_k)
            scores = q @ k.transpose(-2, -1)  # (..., b_q, b_k)
            if mask is not None:
                scores = scores.masked_fill(~_tile(mask, rows, cols), float("-inf"))
            block_max = scores.amax(dim=-1, keepdim=True)  # (..., b_q, 1)
            new_max = block_max if row_max is None else block_max.maximum(row_max)
            # A row with no allowed key *yet* has new_max = -inf; subtracting 0
            # instead keeps exp(-inf - (-inf)) = NaN out: its exponentials are
            # then exactly 0.
            shift = new_max.masked_fill(new_max == float("-inf"), 0.0)
            p = torch.exp(scores - shift)  # (..., b_q, b_k), masked entries exactly 0
            v = value[..., cols, :].to(work)  # (..., b_k, d_v)
            if row_max is None:
                row_sum, acc = p.sum(dim=-1, keepdim=True), p @ v
            else:
                # (..., b_q, 1): from the old maximum to the new one
                rescale = torch.exp(row_max - shift)
                row_sum = row_sum * rescale + p.sum(dim=-1, keepdim=True)
                acc = acc * rescale + p @ v  # (..., b_q, d_v)
            row_max = new_max
        # (..., b_q, d_v); a row with l = 0 would be 0/0 = NaN
        outputs.append(acc / row_sum)
    return torch.cat(outputs, dim=-2).to(query.dtype)  # (..., L_q, d_v)


def _tile(mask: Tensor, rows: slice, cols: slice) -> Tensor:
    """The part of a broadcastable mask ``(..., L_q or 1, L_k or 1)`` for one tile."""
    if mask.size(-2) != 1:
        mask = mask[..., rows, :]
    if mask.size(-1) != 1:
        mask = mask[..., cols]
    return mask


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


def sliding_window_mask(
    length: int,
    window: int,
    device: torch.device | str | None = None,
) -> Tensor:
    """The causal mask of a sliding window: position ``i`` attends to itself and the
    ``window - 1`` positions before it, ``i - window < j <= i``.

    Args:
        length: the number of positions ``L`` (queries and keys).
        window: the number ``w`` of keys each query sees, itself included (Mistral's
            ``sliding_window``); ``w >= L`` gives :func:`causal_mask`.
        device: where to create the mask.

    Returns:
        bool tensor ``(length, length)``, True on the diagonal and the ``window - 1``
        diagonals below it. For ``length=4, window=2``:
        ``[[T, F, F, F], [T, T, F, F], [F, T, T, F], [F, F, T, T]]``.
    """
    length = positive_int("length", length)
    window = positive_int("window", window)
    return causal_mask(length, device=device).triu(diagonal=1 - window)


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


def repeat_kv(x: Tensor, times: int) -> Tensor:
    """Repeat every key/value head ``times`` times, side by side: grouped-query attention.

    Args:
        x: ``(batch, g, L, d_head)``, the keys (or values) of ``g`` key/value heads.
        times: ``h / g``, the query heads that share each key/value head.

    Returns:
        ``(batch, g * times, L, d_head)``: query head ``m`` gets key/value head
        ``m // times``, so consecutive query heads form a group (the order of Hugging Face's
        ``repeat_kv`` and of ``F.scaled_dot_product_attention(..., enable_gqa=True)``).
    """
    check_tensor("x", x)
    if x.dim() != 4:
        shape = tuple(x.shape)
        raise ValueError(f"expected (batch, kv_heads, L, d_head), got shape {shape}")
    times = positive_int("times", times)
    return x if times == 1 else x.repeat_interleave(times, dim=1)


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
        num_kv_heads: the number ``g`` of key/value heads, dividing ``num_heads`` (default:
            ``num_heads``, the paper's multi-head attention). With ``g < h`` the query heads
            come in ``g`` groups of ``h / g`` that share one key and one value head:
            grouped-query attention (Ainslie et al., 2023); ``g = 1`` is multi-query
            attention (Shazeer, 2019). ``w_k`` and ``w_v`` then map to ``g * d_head``
            features, and a key/value cache holds ``g`` heads instead of ``h``.
        rotary_base: rotate queries and keys by their positions, with this wavelength base
            (:mod:`course_lib.rotary`; RoFormer's and Llama 2's 10000), in self-attention only
            (query and key the same tensor). ``None``: no rotation, positions come from the
            input (the paper's sinusoidal encoding).

    Shape:
        ``forward(query, key, value, mask)``: query ``(batch, L_q, d_model)``, key and value
        ``(batch, L_k, d_model)``; returns output ``(batch, L_q, d_model)`` and weights
        ``(batch, num_heads, L_q, L_k)``. Self-attention passes the same tensor three times;
        cross-attention passes the decoder's states as query and the encoder's output as key
        and value. With ``num_kv_heads = g`` the keys and values inside are
        ``(batch, g, L_k, d_head)``, repeated to the ``h`` query heads by :func:`repeat_kv`.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        *,
        num_kv_heads: int | None = None,
        rotary_base: float | None = None,
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
        self.num_kv_heads = self._kv_heads(num_kv_heads)
        self.rotary_base = self._rotary_base(rotary_base)
        kv_features = self.num_kv_heads * self.d_head
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, kv_features, bias=bias)
        self.w_v = nn.Linear(d_model, kv_features, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(float(dropout))
        self.reset_parameters()

    def _kv_heads(self, num_kv_heads: int | None) -> int:
        if num_kv_heads is None:
            return self.num_heads
        num_kv_heads = positive_int("num_kv_heads", num_kv_heads)
        if self.num_heads % num_kv_heads:
            choices = [g for g in range(1, self.num_heads + 1) if self.num_heads % g == 0]
            raise ValueError(
                f"num_kv_heads={num_kv_heads} must divide num_heads={self.num_heads}: every "
                f"key/value head serves the same number of query heads; one of {choices}"
            )
        return num_kv_heads

    def _rotary_base(self, base: float | None) -> float | None:
        if base is None:
            return None
        if self.d_head % 2:
            raise ValueError(
                f"rotary positions turn pairs of features, so d_head must be even; got "
                f"d_head = d_model / num_heads = {self.d_head}"
            )
        return base_value(base)

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

    def repeat_kv(self, x: Tensor) -> Tensor:
        """``(batch, num_kv_heads, L, d_head)`` -> ``(batch, num_heads, L, d_head)``."""
        return repeat_kv(x, self.num_heads // self.num_kv_heads)

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
        self._check_rotary(query, key)
        q = self.split_heads(self.w_q(query))  # (batch, h, L_q, d_head)
        k = split_heads(self.w_k(key), self.num_kv_heads)  # (batch, g, L_k, d_head)
        v = split_heads(self.w_v(value), self.num_kv_heads)  # (batch, g, L_k, d_head)
        if self.rotary_base is not None:  # positions 0 .. L-1 of queries and keys
            q, k = rotate(q, base=self.rotary_base), rotate(k, base=self.rotary_base)
        if mask is not None:
            mask = self.head_mask(mask, query.size(0), query.size(1), key.size(1))
        k, v = self.repeat_kv(k), self.repeat_kv(v)  # (batch, h, L_k, d_head)
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
        all stored positions. The cache holds ``num_kv_heads`` heads, repeated for the query
        heads after reading; with rotary positions the new queries and keys are rotated as
        positions ``cache.length, cache.length + 1, ...`` before the keys are stored. A
        static cache (cross-attention) is filled at the first call and then used as it is,
        without projecting ``key`` and ``value`` again.

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
        if self.rotary_base is not None and cache.static:
            raise ValueError(
                "rotary positions rotate a self-attention's queries and keys by their "
                "positions; a static cache holds cross-attention keys, which have none"
            )
        self._check_rotary(query, key)
        q = self.split_heads(self.w_q(query))  # (batch, h, n, d_head)
        if cache.static and cache.length:  # the encoder output, projected before
            k, v = cache.keys, cache.values
        else:  # (batch, g, t, d_head): the stored positions, then the new ones
            new_k = split_heads(self.w_k(key), self.num_kv_heads)
            new_v = split_heads(self.w_v(value), self.num_kv_heads)
            if self.rotary_base is not None:  # the new positions follow the stored ones
                new = torch.arange(query.size(1), device=query.device)
                positions = cache.length + new
                q = rotate(q, positions, self.rotary_base)
                new_k = rotate(new_k, positions, self.rotary_base)
            k, v = cache.update(new_k, new_v)
        if k.size(0) != q.size(0):
            held = f"the cache holds {k.size(0)} sequences"
            raise ValueError(f"{held}, the query {q.size(0)}")
        if mask is not None:
            mask = self.head_mask(mask, query.size(0), query.size(1), k.size(-2))
        k, v = self.repeat_kv(k), self.repeat_kv(v)  # (batch, h, t, d_head)
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

    def _check_rotary(self, query: Tensor, key: Tensor) -> None:
        """Rotary positions number the queries and the keys of one sequence: self-attention."""
        if self.rotary_base is not None and key is not query:
            raise ValueError(
                "rotary positions turn the queries and keys of one sequence by their "
                "positions, so query and key must be the same tensor (self-attention); "
                "cross-attention's keys have no positions in the query's sequence"
            )

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
            + (f", num_kv_heads={self.num_kv_heads}" if self.num_kv_heads != self.num_heads else "")
            + (f", rotary_base={self.rotary_base:g}" if self.rotary_base is not None else "")
        )
