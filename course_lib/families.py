"""Encoder-only and decoder-only Transformers: BERT-like and GPT-like models.

The encoder-decoder Transformer splits into two families of one-stack models, and both are
built from the same layers as the full model:

- :class:`EncoderOnlyModel` (BERT-like): token embeddings, positions, a stack of encoder
  layers in which every token attends to every other (only padding is masked), and a linear
  map from every position's final vector to scores over the vocabulary. Trained by
  masked-token prediction (:func:`course_lib.objectives.train_masked_lm`): some input tokens
  are replaced by ``<mask>`` and the model predicts them from the context on *both* sides.
- :class:`DecoderOnlyModel` (GPT-like): the same, with the causal mask: position ``t`` sees
  the tokens ``0..t`` only. A decoder layer without an encoder has nothing to cross-attend
  to, so what is left of it is masked self-attention and the feed-forward network: exactly
  an encoder layer run with a causal mask. Trained by next-token prediction
  (:func:`course_lib.objectives.train_causal_lm`), it generates text token by token
  (:func:`course_lib.decoding.sample`).

Fine-tuning (:class:`SequenceClassifier`, trained by
:func:`course_lib.objectives.train_classifier`): a small head on top of
an encoder, trained on labelled sequences, starting either from a pre-trained
:class:`EncoderOnlyModel` or from a fresh one (training from scratch).

Positions are the sinusoidal encoding of the original paper or, as in BERT and GPT-2, a
learned table (:class:`LearnedPositions`).

The published models differ from the course's defaults in a few choices, each a keyword
option (see :class:`EncoderOnlyModel`): embeddings not multiplied by ``sqrt(d_model)``,
GELU's tanh form, biases or none, the ``eps`` of the norms, and BERT's token types,
embedding norm, head transform and pooler. With them, ``DecoderOnlyModel.from_hf`` and
``EncoderOnlyModel.from_hf`` load a Hugging Face GPT-2 and BERT (:mod:`course_lib.huggingface`).
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import Tensor, nn

from course_lib._checks import integer, positive_int, probability, shape_of
from course_lib.attention import causal_mask, padding_mask, sliding_window_mask
from course_lib.embeddings import TokenEmbedding, check_token_ids
from course_lib.encoder import Encoder
from course_lib.feedforward import ACTIVATIONS
from course_lib.positional import DEFAULT_BASE, PositionalEncoding

__all__ = [
    "DecoderOnlyModel",
    "EncoderOnlyModel",
    "LearnedPositions",
    "MaskedLMHeadTransform",
    "Pooler",
    "SequenceClassifier",
    "drop_biases",
    "llama_settings",
    "parameter_ledger",
]


class LearnedPositions(nn.Module):
    """A trainable vector per position, added to the token embeddings (BERT, GPT-2, ViT).

    Args:
        max_len: the number of positions, rows of the table (512 in BERT, 1024 in GPT-2).
        d_model: the size of every vector.
        dropout: applied to the sum, as with :class:`~course_lib.positional.PositionalEncoding`.

    Shape:
        ``forward(x, start=0)``: ``x`` is ``(batch, L, d_model)``; rows ``start .. start+L-1``
        of the table are added.
    """

    def __init__(self, max_len: int, d_model: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.max_len = positive_int("max_len", max_len)
        self.table = nn.Embedding(self.max_len, positive_int("d_model", d_model))
        nn.init.normal_(self.table.weight, std=0.02)  # small, as GPT-2 starts them
        self.dropout = nn.Dropout(probability("dropout", dropout))

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        end = integer("start", start) + x.size(1)
        if end > self.max_len:
            raise ValueError(
                f"positions {start}..{end - 1} are needed but the table has {self.max_len} rows"
            )
        positions = torch.arange(start, end, device=x.device)
        return self.dropout(x + self.table(positions))


def drop_biases(module: nn.Module) -> None:
    """Remove the bias of every ``nn.Linear`` and ``nn.LayerNorm`` inside ``module``, in place:
    ``x W^T`` and ``gain * normalized(x)`` remain (nanoGPT's ``bias=False``)."""
    for part in module.modules():
        if isinstance(part, (nn.Linear, nn.LayerNorm)) and part.bias is not None:
            part.bias = None  # F.linear and F.layer_norm take no bias then


class MaskedLMHeadTransform(nn.Module):
    """BERT's transform before the output map: ``LayerNorm(activation(x W + b))``.

    Args:
        d_model: the size of the input and output vectors.
        activation: of :data:`course_lib.feedforward.ACTIVATIONS` (BERT uses the model's own).
        layer_norm_eps, bias: of the layer normalization (and, ``bias``, of the linear map).

    Shape:
        ``forward(x)``: ``(batch, L, d_model)`` -> ``(batch, L, d_model)``.
    """

    def __init__(
        self, d_model: int, activation: str, layer_norm_eps: float = 1e-5, bias: bool = True
    ) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.activation = activation
        self.dense = nn.Linear(d_model, d_model, bias=bias)
        self.norm = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.norm(ACTIVATIONS[self.activation](self.dense(x)))


class Pooler(nn.Module):
    """BERT's pooler: ``tanh(x_0 W + b)`` of the first token's (``[CLS]``'s) final vector.

    Shape:
        ``forward(states)``: ``(batch, L, d_model)`` -> ``(batch, d_model)``.
    """

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.dense = nn.Linear(d_model, d_model)

    def forward(self, states: Tensor) -> Tensor:
        return torch.tanh(self.dense(states[:, 0]))  # (batch, d_model)


class _OneStackModel(nn.Module):
    """Embeddings, positions, a stack of encoder layers and a map to vocabulary scores."""

    causal = False

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 64,
        num_heads: int = 4,
        num_layers: int = 2,
        d_ff: int = 256,
        dropout: float = 0.0,
        norm_first: bool = False,
        activation: str = "gelu",
        max_len: int = 512,
        pad_id: int | None = 0,
        positions: str = "sinusoidal",
        tie_embeddings: bool = True,
        *,
        scale_embeddings: bool = True,
        final_norm: bool | None = None,
        bias: bool = True,
        output_bias: bool | None = None,
        layer_norm_eps: float = 1e-5,
        num_token_types: int = 0,
        embedding_norm: bool = False,
        head_transform: bool = False,
        norm: str = "layer",
        gated: bool = False,
        num_kv_heads: int | None = None,
        rope_base: float = DEFAULT_BASE,
        attention_window: int | None = None,
    ) -> None:
        super().__init__()
        self.vocab_size = positive_int("vocab_size", vocab_size)
        self.pad_id = None if pad_id is None else integer("pad_id", pad_id)
        self.embedding = TokenEmbedding(
            vocab_size, d_model, padding_idx=self.pad_id, scale=scale_embeddings
        )
        if not scale_embeddings:  # GPT-2's and BERT's start, N(0, 0.02^2), not nn.Embedding's
            with torch.no_grad():
                self.embedding.weight.normal_(std=0.02)
                if self.pad_id is not None:
                    self.embedding.weight[self.pad_id].zero_()
        self.token_types = None
        if num_token_types:  # BERT's segments: which sentence of a pair a token belongs to
            num_token_types = positive_int("num_token_types", num_token_types)
            self.token_types = nn.Embedding(num_token_types, d_model)
            nn.init.normal_(self.token_types.weight, std=0.02)
        # With a norm of the embeddings (BERT's), dropout comes after that norm.
        position_dropout = 0.0 if embedding_norm else dropout
        if positions == "sinusoidal":
            self.positional: nn.Module = PositionalEncoding(d_model, max_len, position_dropout)
        elif positions == "learned":
            self.positional = LearnedPositions(max_len, d_model, position_dropout)
        elif positions == "rotary":  # nothing is added; the dropout of the embeddings remains
            self.positional = nn.Dropout(position_dropout)
        else:
            raise ValueError(
                f"positions must be 'sinusoidal', 'learned' or 'rotary', got {positions!r}"
            )
        self.positions = positions
        self.attention_window = None
        if attention_window is not None:
            if not self.causal:
                raise ValueError("attention_window is a decoder-only model's sliding window")
            self.attention_window = positive_int("attention_window", attention_window)
        self.embedding_norm = None
        if embedding_norm:
            self.embedding_norm = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
            self.embedding_dropout = nn.Dropout(dropout)
        self.encoder = Encoder(
            num_layers,
            d_model,
            num_heads,
            d_ff,
            dropout,
            norm_first,
            final_norm=final_norm,
            activation=activation,
            layer_norm_eps=layer_norm_eps,
            norm=norm,
            gated=gated,
            num_kv_heads=num_kv_heads,
            rotary_base=rope_base if positions == "rotary" else None,
        )
        if not bias:
            drop_biases(self.encoder)
        self.head_transform = None
        if head_transform:
            self.head_transform = MaskedLMHeadTransform(d_model, activation, layer_norm_eps, bias)
        output_bias = not tie_embeddings if output_bias is None else output_bias
        self.output = nn.Linear(d_model, vocab_size, bias=output_bias)
        if tie_embeddings:  # one matrix for reading tokens in and scoring them out
            self.output.weight = self.embedding.weight

    def attention_mask(self, ids: Tensor) -> Tensor | None:
        """The self-attention mask of ``ids`` ``(batch, L)``, True where allowed: the padding
        mask ``(batch, 1, L)``, combined with the causal mask in a decoder-only model."""
        length, device = ids.size(1), ids.device
        mask = causal_mask(length, device=device) if self.causal else None
        window = self.attention_window
        if window is not None:  # itself and the window - 1 positions before
            mask = sliding_window_mask(length, window, device=device)
        if self.pad_id is None:
            return mask
        keep = padding_mask(ids, self.pad_id)
        return keep if mask is None else mask & keep

    def embed(self, ids: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        """What enters the first layer: ``(batch, L, d_model)``.

        The token embeddings (times ``sqrt(d_model)`` if ``scale_embeddings``), plus the
        token-type embeddings (if the model has them; ``token_type_ids`` default to 0), plus
        the positions, then the embedding norm (if any).
        """
        x = self.embedding(ids)  # (batch, L, d_model)
        if self.token_types is not None:
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(ids)
            x = x + self.token_types(token_type_ids)
        x = self.positional(x)
        if self.embedding_norm is not None:
            x = self.embedding_dropout(self.embedding_norm(x))
        return x

    def hidden_states(self, ids: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        """The last layer's vector at every position: ``(batch, L, d_model)``, for ``ids``
        ``(batch, L)`` (and ``token_type_ids`` of the same shape, see :meth:`forward`)."""
        if not isinstance(ids, Tensor) or ids.dim() != 2 or ids.size(1) == 0:
            shape = shape_of(ids)
            raise ValueError(f"ids must be a (batch, L) tensor of token ids, got {shape}")
        check_token_ids(ids, self.vocab_size)
        self._check_token_types(ids, token_type_ids)
        x = self.embed(ids, token_type_ids)
        return self.encoder(x, self.attention_mask(ids))

    def forward(self, ids: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        """Scores over the vocabulary at every position: ``(batch, L, vocab_size)``.

        Args:
            ids: ``(batch, L)`` token ids.
            token_type_ids: ``(batch, L)`` ids of each token's segment, for a model with
                ``num_token_types`` (all 0 if not given).
        """
        states = self.hidden_states(ids, token_type_ids)
        if self.head_transform is not None:
            states = self.head_transform(states)
        return self.output(states)

    def _check_token_types(self, ids: Tensor, token_type_ids: Tensor | None) -> None:
        if token_type_ids is None:
            return
        if self.token_types is None:
            raise ValueError(
                "token_type_ids were given but this model has no token types; "
                "create it with num_token_types=2 (BERT's) to use them"
            )
        if not isinstance(token_type_ids, Tensor) or token_type_ids.shape != ids.shape:
            shape = shape_of(token_type_ids)
            raise ValueError(
                f"token_type_ids must have the shape of ids, {tuple(ids.shape)}, got {shape}"
            )
        check_token_ids(token_type_ids, self.token_types.num_embeddings, "token_type_ids")


class EncoderOnlyModel(_OneStackModel):
    """A BERT-like model: every position attends to the whole sequence.

    ``forward(ids)`` gives, at every position, scores over the vocabulary for the token that
    belongs there: trained on inputs with some tokens replaced by ``<mask>``, it learns to
    fill them in from the words on both sides
    (:func:`course_lib.objectives.train_masked_lm`).

    Args:
        vocab_size: tokens of the vocabulary (``<mask>`` among them).
        d_model, num_heads, num_layers, d_ff, dropout, activation: of the encoder layers
            (BERT uses GELU).
        norm_first: post-norm (False, BERT's) or pre-norm layers.
        max_len: the longest input.
        pad_id: the padding id, masked out of attention (``None``: no padding).
        positions: ``"sinusoidal"`` or ``"learned"`` (BERT's).
        tie_embeddings: share the embedding matrix with the output map (as BERT does).
        pooler: BERT's :class:`Pooler` of the first token, :meth:`pooled`.

    Keyword-only options make the model of a published family; their defaults keep the
    course's own model:

    - ``scale_embeddings``: multiply the token embeddings by ``sqrt(d_model)``, as the
      original Transformer does (True); GPT-2 and BERT do not (False, and the table then
      starts as theirs, ``N(0, 0.02^2)``).
    - ``final_norm``: a layer normalization after the last layer; ``None`` means "if
      ``norm_first``" (GPT-2's ``ln_f``).
    - ``bias``: biases in every linear map and layer normalization of the layers (False:
      none, nanoGPT's option).
    - ``output_bias``: a bias of the output map; ``None`` means "if the output map is not
      tied" (BERT's has one with a tied map, GPT-2's none either way).
    - ``layer_norm_eps``: the ``eps`` of every layer normalization (GPT-2's 1e-5, BERT's
      1e-12).
    - ``num_token_types``: BERT's token-type (segment) embeddings, added to the token
      embeddings (``forward(ids, token_type_ids)``); 0 for none.
    - ``embedding_norm``: a layer normalization, then dropout, of the embeddings' sum
      (BERT's).
    - ``head_transform``: BERT's :class:`MaskedLMHeadTransform` (dense, activation, layer
      norm) between the last layer and the output map.

    And the changes of today's decoders (the part "Beyond the original Transformer"):

    - ``positions="rotary"``: nothing added to the embeddings; every self-attention rotates
      its queries and keys by their positions (:mod:`course_lib.rotary`), with the wavelength
      base ``rope_base`` (10000);
    - ``norm="rms"``: :class:`~course_lib.normalization.RMSNorm` instead of LayerNorm, in the
      layers and as the final norm;
    - ``gated``: a gated feed-forward network (SwiGLU with ``activation="silu"``);
    - ``num_kv_heads``: grouped-query (or, with 1, multi-query) attention;
    - ``attention_window``: (decoder-only) a sliding window: each position attends to itself
      and the ``attention_window - 1`` positions before it.

    ``from_hf`` and ``to_hf`` convert from and to a Hugging Face ``BertForMaskedLM``.
    """

    causal = False

    def __init__(self, vocab_size: int, *args: Any, pooler: bool = False, **kwargs: Any):
        super().__init__(vocab_size, *args, **kwargs)
        self.pooler = Pooler(self.embedding.d_model) if pooler else None

    @classmethod
    def from_hf(cls, model: Any) -> EncoderOnlyModel:
        """The model of a Hugging Face ``BertForMaskedLM``, with copies of its weights (see
        :func:`course_lib.huggingface.bert_from_hf`)."""
        from course_lib.huggingface import bert_from_hf

        return bert_from_hf(model)

    def to_hf(self) -> Any:
        """A Hugging Face ``BertForMaskedLM`` with copies of this model's weights (see
        :func:`course_lib.huggingface.bert_to_hf`; needs ``transformers``)."""
        from course_lib.huggingface import bert_to_hf

        return bert_to_hf(self)

    def pooled(self, ids: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        """BERT's summary of every sequence, its pooler on the first token: ``(batch, d_model)``."""
        if self.pooler is None:
            raise ValueError("this model has no pooler; create it with pooler=True")
        return self.pooler(self.hidden_states(ids, token_type_ids))


class DecoderOnlyModel(_OneStackModel):
    """A GPT-like model: position ``t`` attends to positions ``0..t`` only.

    ``forward(ids)[:, t]`` scores the token that follows position ``t``; trained on text
    (:func:`course_lib.objectives.train_causal_lm`) it generates by appending one token at a
    time. The arguments
    are those of :class:`EncoderOnlyModel` (but ``pooler``), with pre-norm layers by default
    (GPT-2's, with a final layer normalization). GPT-2 itself is
    ``DecoderOnlyModel(50257, 768, 12, 12, 3072, max_len=1024, positions="learned",
    pad_id=None, activation="gelu_tanh", scale_embeddings=False)``; ``from_hf`` and
    ``to_hf`` convert from and to a Hugging Face ``GPT2LMHeadModel``.

    A Llama is the same class with other settings (:func:`llama_settings`): rotary
    positions, RMSNorm, SwiGLU, grouped-query attention, no biases, an untied output map;
    ``from_hf`` also takes a Hugging Face ``LlamaForCausalLM``.
    """

    causal = True

    def __init__(self, vocab_size: int, *args: Any, norm_first: bool = True, **kwargs: Any):
        super().__init__(vocab_size, *args, norm_first=norm_first, **kwargs)

    @classmethod
    def from_hf(cls, model: Any) -> DecoderOnlyModel:
        """The model of a Hugging Face ``GPT2LMHeadModel`` or ``LlamaForCausalLM``, with copies
        of its weights (see :func:`course_lib.huggingface.gpt2_from_hf` and
        :func:`~course_lib.huggingface.llama_from_hf`); any other object is refused with a
        ``TypeError``."""
        from course_lib.huggingface import gpt2_from_hf, llama_from_hf

        kind = type(model).__name__
        if kind == "LlamaForCausalLM":
            return llama_from_hf(model)
        if kind != "GPT2LMHeadModel":
            raise TypeError(
                f"expected a transformers GPT2LMHeadModel or LlamaForCausalLM, got {kind}"
            )
        return gpt2_from_hf(model)

    def to_hf(self) -> Any:
        """A Hugging Face ``GPT2LMHeadModel`` with copies of this model's weights (see
        :func:`course_lib.huggingface.gpt2_to_hf`; needs ``transformers``)."""
        from course_lib.huggingface import gpt2_to_hf

        return gpt2_to_hf(self)

    def next_token_scores(self, ids: Tensor) -> Tensor:
        """The scores of the token after the last one: ``(batch, vocab_size)``; a scorer for
        :mod:`course_lib.decoding`."""
        return self(ids)[:, -1]


def llama_settings(
    vocab_size: int,
    d_model: int,
    num_heads: int,
    num_layers: int,
    d_ff: int,
    num_kv_heads: int | None = None,
    **changes: Any,
) -> dict[str, Any]:
    """The arguments of :class:`DecoderOnlyModel` for a Llama of these sizes.

    Pre-norm layers with RMSNorm (``eps`` 1e-6, the first Llama's) and a final RMSNorm,
    rotary positions (base 10000), SwiGLU feed-forward networks of hidden size ``d_ff``,
    ``num_kv_heads`` key/value heads (default: as many as query heads, Llama 1 and
    Llama-2-7B), no biases, embeddings not scaled, an output map of its own, no padding id.
    ``changes`` override any of them (``rope_base=500000.0`` for Llama 3;
    ``layer_norm_eps=1e-5`` for Llama 2, Llama 3 and Mistral 7B).
    """
    settings = {
        "vocab_size": vocab_size,
        "d_model": d_model,
        "num_heads": num_heads,
        "num_layers": num_layers,
        "d_ff": d_ff,
        "num_kv_heads": num_kv_heads,
        "norm_first": True,
        "final_norm": True,
        "norm": "rms",
        "layer_norm_eps": 1e-6,
        "positions": "rotary",
        "rope_base": DEFAULT_BASE,
        "gated": True,
        "activation": "silu",
        "bias": False,
        "output_bias": False,
        "scale_embeddings": False,
        "tie_embeddings": False,
        "pad_id": None,
    }
    unknown = set(changes) - set(inspect.signature(_OneStackModel).parameters)
    if unknown:
        raise TypeError(f"not an option of DecoderOnlyModel: {sorted(unknown)}")
    return settings | changes


def parameter_ledger(model: nn.Module) -> dict[str, int]:
    """The parameters of an :class:`EncoderOnlyModel` or :class:`DecoderOnlyModel` by component.

    Returns ``{"token embedding", "positions", "attention", "feed-forward", "norms", "output
    map", "total"}`` (plus ``"other"`` for BERT's token types, embedding norm, head transform
    and pooler, when the model has them). Attention, feed-forward and norms are summed over the
    layers, the final norm counted with the norms; a tied output map counts 0 (its matrix is
    the token embedding's), and only its bias, if any, is its own. Works on the ``meta``
    device (shapes, no memory).
    """
    if not isinstance(model, _OneStackModel):
        raise TypeError(
            f"expected an EncoderOnlyModel or DecoderOnlyModel, got {type(model).__name__}"
        )
    seen: set[int] = set()

    def count(*modules: nn.Module | None) -> int:  # each tensor once, however shared
        total = 0
        for module in modules:
            for parameter in () if module is None else module.parameters():
                if id(parameter) not in seen:
                    seen.add(id(parameter))
                    total += parameter.numel()
        return total

    layers = list(model.encoder.layers)
    ledger = {
        "token embedding": count(model.embedding),
        "positions": count(model.positional),
        "attention": count(*(layer.self_attention for layer in layers)),
        "feed-forward": count(*(layer.feed_forward for layer in layers)),
        "norms": count(*(n for layer in layers for n in (layer.norm1, layer.norm2)),
                       model.encoder.norm),
        "output map": count(model.output),
    }  # fmt: skip
    other = count(model)  # whatever is left: BERT's extras
    if other:
        ledger["other"] = other
    ledger["total"] = sum(ledger.values())
    return ledger


# --------------------------------------------------------------------------- fine-tuning


class SequenceClassifier(nn.Module):
    """An encoder with a classification head: one label per sequence.

    The encoder's last-layer vectors are averaged over the real (non-padding) tokens, and a
    linear layer maps the mean to one score per class. (BERT reads the vector of a special
    first token, ``[CLS]``, instead of the mean; either works as a summary.) The output map
    of the encoder, its masked-token head, is not used.

    Args:
        encoder: an :class:`EncoderOnlyModel`, pre-trained or fresh; its parameters are
            trained along with the head's (fine-tuning), not copied.
        num_classes: the number of labels, at least 2.

    Shape:
        ``forward(ids)``: ``ids`` is ``(batch, L)``; returns scores ``(batch, num_classes)``.
    """

    def __init__(self, encoder: EncoderOnlyModel, num_classes: int) -> None:
        super().__init__()
        if not isinstance(encoder, EncoderOnlyModel):
            raise TypeError(f"encoder must be an EncoderOnlyModel, got {type(encoder).__name__}")
        num_classes = positive_int("num_classes", num_classes)
        if num_classes < 2:
            raise ValueError(f"num_classes must be at least 2, got {num_classes}")
        self.encoder = encoder
        self.head = nn.Linear(encoder.embedding.d_model, num_classes)

    def forward(self, ids: Tensor) -> Tensor:
        states = self.encoder.hidden_states(ids)  # (batch, L, d_model)
        if self.encoder.pad_id is None:
            pooled = states.mean(dim=1)
        else:
            real = (ids != self.encoder.pad_id).unsqueeze(-1)  # (batch, L, 1)
            pooled = (states * real).sum(dim=1) / real.sum(dim=1).clamp(min=1)
        return self.head(pooled)  # (batch, num_classes)
