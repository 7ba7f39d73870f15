"""GPT-2, BERT and Llama from Hugging Face ``transformers``, in the course's own classes.

A ``transformers`` GPT-2 (``GPT2LMHeadModel``) is a :class:`~course_lib.families.DecoderOnlyModel`
with GPT-2's options, and a BERT (``BertForMaskedLM``) an
:class:`~course_lib.families.EncoderOnlyModel` with BERT's; only the names and the layout of
the weights differ. Each conversion is a list of :class:`WeightLink` rows, one per Hugging
Face tensor, saying which of our tensors it becomes:

- GPT-2 keeps its linear maps in ``Conv1D`` modules, whose weight is ``(d_in, d_out)``:
  the *transpose* of ``nn.Linear``'s ``(d_out, d_in)``. Its ``c_attn`` holds ``W^Q``,
  ``W^K`` and ``W^V`` side by side, ``(d_model, 3 d_model)``: one tensor for three of ours.
- BERT's linear maps are ``nn.Linear`` already; only the names change.
- Llama's (``LlamaForCausalLM``) are ``nn.Linear`` too, but its rotary positions pair feature
  ``j`` of a head with feature ``j + d_head/2`` ("rotate_half"), where ours pair ``2i`` with
  ``2i + 1``: the rows of ``W^Q`` and ``W^K`` are reordered within every head
  (:func:`rotary_row_order`). Queries and keys are reordered alike, so every score is the same.

``from_hf`` reads the model's config, refuses what our classes cannot represent (rather than
give different numbers), builds our model with the same settings and copies every weight,
keeping the dtype, the device and the train/eval mode. ``to_hf`` does the reverse (biases our
model does not have, ``bias=False``, become zeros, which compute the same). Our model then
returns, for token ids ``(batch, L)``, the logits ``(batch, L, vocab_size)`` that the Hugging
Face model returns as ``.logits``. (Padding: our model masks the tokens of its ``pad_id``
itself, BERT's ``[PAD]`` for one; give the Hugging Face model ``attention_mask=(ids !=
pad_id)`` for the same. GPT-2 has no padding id.)

``transformers`` is not a dependency of ``course_lib``: ``to_hf`` imports it when it is
called, and ``from_hf`` is handed a model, so it is there. Nothing here downloads anything.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from course_lib.families import DecoderOnlyModel, EncoderOnlyModel, llama_settings

__all__ = [
    "BERT_ACTIVATIONS",
    "GPT2_ACTIVATIONS",
    "WeightLink",
    "bert_from_hf",
    "bert_settings",
    "bert_to_hf",
    "bert_weight_links",
    "gpt2_from_hf",
    "gpt2_settings",
    "gpt2_to_hf",
    "gpt2_weight_links",
    "llama_from_hf",
    "llama_settings_of",
    "llama_weight_links",
    "rotary_row_order",
]

# Hugging Face's activation names -> ours. GPT-2's "gelu_new" and PyTorch's tanh GELU are the
# same formula (within rounding); the erf GELU is "gelu".
GPT2_ACTIVATIONS = {
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_python_tanh": "gelu_tanh",
    "gelu": "gelu",
    "gelu_python": "gelu",
    "relu": "relu",
}
BERT_ACTIVATIONS = GPT2_ACTIVATIONS
_HF_ACTIVATION = {"gelu_tanh": "gelu_new", "gelu": "gelu", "relu": "relu"}


class WeightLink(NamedTuple):
    """One Hugging Face tensor and the tensors of ours it becomes.

    ``ours`` has one name, or several when the Hugging Face tensor holds several of ours side
    by side along its output axis (GPT-2's ``c_attn``: ``W^Q``, ``W^K``, ``W^V``).
    ``transposed``: the Hugging Face weight is ``(d_in, d_out)`` (GPT-2's ``Conv1D``), ours
    ``(d_out, d_in)``. ``rotary_heads``: the rows of this query or key projection are those of
    so many heads, each reordered by :func:`rotary_row_order` (Llama's); 0 for none.
    """

    hf: str
    ours: tuple[str, ...]
    transposed: bool = False
    rotary_heads: int = 0


def _affine(hf: str, ours: str, transposed: bool = False) -> list[WeightLink]:
    """The weight and the bias of one linear map or layer norm."""
    return [
        WeightLink(f"{hf}.weight", (f"{ours}.weight",), transposed),
        WeightLink(f"{hf}.bias", (f"{ours}.bias",)),
    ]


# --------------------------------------------------------------------------- GPT-2


def gpt2_weight_links(num_layers: int, tied: bool = True) -> list[WeightLink]:
    """Every tensor of a ``GPT2LMHeadModel`` with ``num_layers`` blocks, and where it goes.

    With ``tied`` the output map is the token embedding and has no row of its own.
    """
    links = [
        WeightLink("transformer.wte.weight", ("embedding.weight",)),
        WeightLink("transformer.wpe.weight", ("positional.table.weight",)),
    ]
    for i in range(num_layers):
        hf, ours = f"transformer.h.{i}", f"encoder.layers.{i}"
        attention = f"{ours}.self_attention"
        qkv = tuple(f"{attention}.w_{x}" for x in "qkv")
        links += _affine(f"{hf}.ln_1", f"{ours}.norm1")
        links += [
            WeightLink(f"{hf}.attn.c_attn.weight", tuple(f"{w}.weight" for w in qkv), True),
            WeightLink(f"{hf}.attn.c_attn.bias", tuple(f"{w}.bias" for w in qkv)),
        ]
        links += _affine(f"{hf}.attn.c_proj", f"{attention}.w_o", transposed=True)
        links += _affine(f"{hf}.ln_2", f"{ours}.norm2")
        links += _affine(f"{hf}.mlp.c_fc", f"{ours}.feed_forward.w_1", transposed=True)
        links += _affine(f"{hf}.mlp.c_proj", f"{ours}.feed_forward.w_2", transposed=True)
    links += _affine("transformer.ln_f", "encoder.norm")
    if not tied:
        links.append(WeightLink("lm_head.weight", ("output.weight",)))
    return links


def gpt2_settings(config: Any) -> dict[str, Any]:
    """The arguments of :class:`DecoderOnlyModel` for a ``GPT2Config``.

    Raises:
        ValueError: for what the course's classes do not compute: attention scores not
            divided by ``sqrt(d_head)`` or also by the layer's index, attention upcast and
            reordered, cross-attention, or an activation other than the GELUs and ReLU.
    """
    refused = {
        "scale_attn_weights": (False, "attention scores not divided by sqrt(d_head)"),
        "scale_attn_by_inverse_layer_idx": (True, "scores also divided by the layer's index"),
        "reorder_and_upcast_attn": (True, "attention reordered and upcast to float32"),
        "add_cross_attention": (True, "cross-attention layers"),
    }
    for name, (value, what) in refused.items():
        if getattr(config, name, not value) == value:
            raise ValueError(
                f"this GPT-2 config has {name}={value} ({what}); DecoderOnlyModel cannot "
                "represent it, so its logits would differ"
            )
    activation = _activation(config.activation_function, GPT2_ACTIVATIONS, "activation_function")
    d_model = config.n_embd
    return {
        "vocab_size": config.vocab_size,
        "d_model": d_model,
        "num_heads": config.n_head,
        "num_layers": config.n_layer,
        "d_ff": config.n_inner if config.n_inner is not None else 4 * d_model,
        "dropout": config.resid_pdrop,  # its three dropout probabilities are one here
        "norm_first": True,
        "activation": activation,
        "max_len": config.n_positions,
        # GPT-2 never masks a token by its id (fine-tuned copies often set pad = eos, a real
        # token): attention masks are the caller's, so ours masks nothing either.
        "pad_id": None,
        "positions": "learned",
        "tie_embeddings": bool(config.tie_word_embeddings),
        "scale_embeddings": False,
        "final_norm": True,
        "output_bias": False,
        "layer_norm_eps": config.layer_norm_epsilon,
    }


def gpt2_from_hf(model: Any) -> DecoderOnlyModel:
    """A :class:`DecoderOnlyModel` with copies of the weights of a ``GPT2LMHeadModel``.

    Its dtype, device and train/eval mode are taken over. (Dropout in training is placed as
    in the course's layers, which also drop the feed-forward network's hidden units; so only
    evaluation-mode outputs are the same.) Our model has no ``pad_id``: like GPT-2, it
    attends to every token it is given (the config's ``pad_token_id``, often the
    end-of-text id, is a real token).

    Raises:
        TypeError: if ``model`` is not a ``GPT2LMHeadModel``.
        ValueError: for a config the course's classes cannot represent (:func:`gpt2_settings`).
    """
    _check_hf_model(model, "GPT2LMHeadModel")
    settings = gpt2_settings(model.config)
    _check_tied(model, settings["tie_embeddings"], "lm_head.weight", "transformer.wte.weight")
    links = gpt2_weight_links(settings["num_layers"], settings["tie_embeddings"])
    return _copy_from_hf(DecoderOnlyModel, settings, model, links)


def gpt2_to_hf(model: DecoderOnlyModel) -> Any:
    """A ``transformers`` ``GPT2LMHeadModel`` with copies of the weights of ``model``.

    ``model`` must have GPT-2's architecture: learned positions, unscaled embeddings, pre-norm
    layers with a final norm, no token types, no embedding norm, no output bias. Biases it
    lacks (``bias=False``) become zeros. The config's ``bos_token_id`` and ``eos_token_id`` stay
    GPT-2's (50256) when the vocabulary holds that id, and are None otherwise. A model with a
    ``pad_id`` masks its padding itself; give the Hugging Face model
    ``attention_mask=(ids != pad_id)`` for the same logits.

    Raises:
        ImportError: if ``transformers`` is not installed.
        TypeError: if ``model`` is not a :class:`DecoderOnlyModel`.
        ValueError: for a model that GPT-2 cannot represent, naming what differs.
    """
    transformers = _import_transformers()
    _check_ours(model, DecoderOnlyModel)
    _check_representable(model, "GPT2LMHeadModel", _gpt2_differences(model))
    layer = model.encoder.layers[0]
    eos = 50256 if model.vocab_size > 50256 else None
    dropout = layer.dropout1.p
    config = transformers.GPT2Config(
        vocab_size=model.vocab_size,
        n_positions=model.positional.max_len,
        n_embd=layer.d_model,
        n_layer=len(model.encoder.layers),
        n_head=layer.self_attention.num_heads,
        n_inner=layer.feed_forward.d_ff,
        activation_function=_HF_ACTIVATION[layer.feed_forward.activation],
        resid_pdrop=dropout,
        embd_pdrop=dropout,
        attn_pdrop=dropout,
        layer_norm_epsilon=layer.norm1.eps,
        tie_word_embeddings=_is_tied(model),
        pad_token_id=model.pad_id,
        bos_token_id=eos,
        eos_token_id=eos,
    )
    hf = transformers.GPT2LMHeadModel(config)
    links = gpt2_weight_links(config.n_layer, config.tie_word_embeddings)
    return _copy_to_hf(model, hf, links)


def _gpt2_differences(model: DecoderOnlyModel) -> list[str]:
    layer = model.encoder.layers[0]
    return [
        what
        for what, differs in (
            ("post-norm layers (GPT-2's are pre-norm)", not layer.norm_first),
            ("no final norm", model.encoder.norm is None),
            ("sinusoidal positions (GPT-2's are learned)", not _learned(model)),
            ("embeddings scaled by sqrt(d_model)", model.embedding.scale),
            ("token types", model.token_types is not None),
            ("an embedding norm", model.embedding_norm is not None),
            ("a head transform", model.head_transform is not None),
            ("an output bias", model.output.bias is not None),
        )
        if differs
    ]


# --------------------------------------------------------------------------- BERT


def bert_weight_links(num_layers: int, tied: bool = True) -> list[WeightLink]:
    """Every tensor of a ``BertForMaskedLM`` with ``num_layers`` layers, and where it goes."""
    embeddings = "bert.embeddings"
    links = [
        WeightLink(f"{embeddings}.word_embeddings.weight", ("embedding.weight",)),
        WeightLink(f"{embeddings}.position_embeddings.weight", ("positional.table.weight",)),
        WeightLink(f"{embeddings}.token_type_embeddings.weight", ("token_types.weight",)),
        *_affine(f"{embeddings}.LayerNorm", "embedding_norm"),
    ]
    for i in range(num_layers):
        hf, ours = f"bert.encoder.layer.{i}", f"encoder.layers.{i}"
        attention = f"{ours}.self_attention"
        for theirs, mine in (("query", "w_q"), ("key", "w_k"), ("value", "w_v")):
            links += _affine(f"{hf}.attention.self.{theirs}", f"{attention}.{mine}")
        links += _affine(f"{hf}.attention.output.dense", f"{attention}.w_o")
        links += _affine(f"{hf}.attention.output.LayerNorm", f"{ours}.norm1")
        links += _affine(f"{hf}.intermediate.dense", f"{ours}.feed_forward.w_1")
        links += _affine(f"{hf}.output.dense", f"{ours}.feed_forward.w_2")
        links += _affine(f"{hf}.output.LayerNorm", f"{ours}.norm2")
    head = "cls.predictions"
    links += _affine(f"{head}.transform.dense", "head_transform.dense")
    links += _affine(f"{head}.transform.LayerNorm", "head_transform.norm")
    if not tied:
        links.append(WeightLink(f"{head}.decoder.weight", ("output.weight",)))
    # The decoder's bias is also kept as cls.predictions.bias: one tensor when tied, two when
    # not; the decoder's is the one that computes, so it is read last.
    links.append(WeightLink(f"{head}.bias", ("output.bias",)))
    links.append(WeightLink(f"{head}.decoder.bias", ("output.bias",)))
    return links


def bert_settings(config: Any) -> dict[str, Any]:
    """The arguments of :class:`EncoderOnlyModel` for a ``BertConfig``.

    Raises:
        ValueError: for a BERT used as a decoder (``is_decoder``, causal attention, or
            cross-attention), positions other than absolute ones, or an activation other
            than the GELUs and ReLU.
    """
    if config.is_decoder or config.add_cross_attention:
        raise ValueError(
            "this BERT config is a decoder (is_decoder or add_cross_attention); "
            "EncoderOnlyModel is BERT's bidirectional encoder"
        )
    positions = getattr(config, "position_embedding_type", "absolute")
    if positions != "absolute":
        raise ValueError(
            f"this BERT config has position_embedding_type={positions!r}; EncoderOnlyModel "
            "adds absolute learned positions only"
        )
    return {
        "vocab_size": config.vocab_size,
        "d_model": config.hidden_size,
        "num_heads": config.num_attention_heads,
        "num_layers": config.num_hidden_layers,
        "d_ff": config.intermediate_size,
        "dropout": config.hidden_dropout_prob,
        "norm_first": False,
        "activation": _activation(config.hidden_act, BERT_ACTIVATIONS, "hidden_act"),
        "max_len": config.max_position_embeddings,
        "pad_id": config.pad_token_id,
        "positions": "learned",
        "tie_embeddings": bool(config.tie_word_embeddings),
        "scale_embeddings": False,
        "final_norm": False,
        "output_bias": True,
        "layer_norm_eps": config.layer_norm_eps,
        "num_token_types": config.type_vocab_size,
        "embedding_norm": True,
        "head_transform": True,
    }


def bert_from_hf(model: Any) -> EncoderOnlyModel:
    """An :class:`EncoderOnlyModel` with copies of the weights of a ``BertForMaskedLM``.

    Its dtype, device and train/eval mode are taken over. Our model masks the padding
    tokens (``config.pad_token_id``) out of attention itself, as the Hugging Face model does
    when given ``attention_mask=(ids != pad_token_id)``.

    Raises:
        TypeError: if ``model`` is not a ``BertForMaskedLM``.
        ValueError: for a config the course's classes cannot represent (:func:`bert_settings`).
    """
    _check_hf_model(model, "BertForMaskedLM")
    settings = bert_settings(model.config)
    _check_tied(
        model,
        settings["tie_embeddings"],
        "cls.predictions.decoder.weight",
        "bert.embeddings.word_embeddings.weight",
    )
    links = bert_weight_links(settings["num_layers"], settings["tie_embeddings"])
    return _copy_from_hf(EncoderOnlyModel, settings, model, links)


def bert_to_hf(model: EncoderOnlyModel) -> Any:
    """A ``transformers`` ``BertForMaskedLM`` with copies of the weights of ``model``.

    ``model`` must have BERT's architecture: learned positions, unscaled embeddings with a
    norm, post-norm layers without a final norm, a head transform, no pooler (the masked-LM
    model has none). Token types it lacks become one table row of zeros, biases it lacks
    zeros.

    Raises:
        ImportError: if ``transformers`` is not installed.
        TypeError: if ``model`` is not an :class:`EncoderOnlyModel`.
        ValueError: for a model that BERT cannot represent, naming what differs.
    """
    transformers = _import_transformers()
    _check_ours(model, EncoderOnlyModel)
    _check_representable(model, "BertForMaskedLM", _bert_differences(model))
    layer = model.encoder.layers[0]
    dropout = layer.dropout1.p
    config = transformers.BertConfig(
        vocab_size=model.vocab_size,
        hidden_size=layer.d_model,
        num_hidden_layers=len(model.encoder.layers),
        num_attention_heads=layer.self_attention.num_heads,
        intermediate_size=layer.feed_forward.d_ff,
        hidden_act=_HF_ACTIVATION[layer.feed_forward.activation],
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
        max_position_embeddings=model.positional.max_len,
        type_vocab_size=1 if model.token_types is None else model.token_types.num_embeddings,
        layer_norm_eps=layer.norm1.eps,
        pad_token_id=model.pad_id,
        tie_word_embeddings=_is_tied(model),
    )
    hf = transformers.BertForMaskedLM(config)
    links = bert_weight_links(config.num_hidden_layers, config.tie_word_embeddings)
    return _copy_to_hf(model, hf, links)


def _bert_differences(model: EncoderOnlyModel) -> list[str]:
    layer = model.encoder.layers[0]
    return [
        what
        for what, differs in (
            ("pre-norm layers (BERT's are post-norm)", layer.norm_first),
            ("a final norm", model.encoder.norm is not None),
            ("sinusoidal positions (BERT's are learned)", not _learned(model)),
            ("embeddings scaled by sqrt(d_model)", model.embedding.scale),
            ("no embedding norm", model.embedding_norm is None),
            ("no head transform", model.head_transform is None),
            ("a pooler (BertForMaskedLM has none)", getattr(model, "pooler", None) is not None),
        )
        if differs
    ]


# --------------------------------------------------------------------------- Llama


def rotary_row_order(d_head: int) -> Tensor:
    """Where each of our rows of one head comes from in Llama's: ``[0, d/2, 1, d/2 + 1, ...]``.

    Hugging Face's Llama rotates feature ``j`` with feature ``j + d/2`` by the angle of
    frequency ``j``; :func:`course_lib.rotary.rotate` rotates ``2j`` with ``2j + 1``. Taking
    row ``order[r]`` of Llama's head as our row ``r`` puts each of its pairs side by side.
    """
    half = torch.arange(d_head // 2)
    return torch.stack((half, half + d_head // 2), dim=1).flatten()


def llama_weight_links(
    num_layers: int, num_heads: int, num_kv_heads: int, tied: bool = False
) -> list[WeightLink]:
    """Every tensor of a ``LlamaForCausalLM`` with ``num_layers`` layers, and where it goes."""
    links = [WeightLink("model.embed_tokens.weight", ("embedding.weight",))]
    for i in range(num_layers):
        hf, ours = f"model.layers.{i}", f"encoder.layers.{i}"
        attention, mlp = f"{ours}.self_attention", f"{ours}.feed_forward"
        links += [
            WeightLink(f"{hf}.input_layernorm.weight", (f"{ours}.norm1.weight",)),
            WeightLink(f"{hf}.self_attn.q_proj.weight", (f"{attention}.w_q.weight",),
                       rotary_heads=num_heads),
            WeightLink(f"{hf}.self_attn.k_proj.weight", (f"{attention}.w_k.weight",),
                       rotary_heads=num_kv_heads),
            WeightLink(f"{hf}.self_attn.v_proj.weight", (f"{attention}.w_v.weight",)),
            WeightLink(f"{hf}.self_attn.o_proj.weight", (f"{attention}.w_o.weight",)),
            WeightLink(f"{hf}.post_attention_layernorm.weight", (f"{ours}.norm2.weight",)),
            WeightLink(f"{hf}.mlp.gate_proj.weight", (f"{mlp}.w_1.weight",)),
            WeightLink(f"{hf}.mlp.up_proj.weight", (f"{mlp}.w_3.weight",)),
            WeightLink(f"{hf}.mlp.down_proj.weight", (f"{mlp}.w_2.weight",)),
        ]  # fmt: skip
    links.append(WeightLink("model.norm.weight", ("encoder.norm.weight",)))
    if not tied:
        links.append(WeightLink("lm_head.weight", ("output.weight",)))
    return links


def _rope_base(config: Any) -> float:
    """The config's rotary base, refusing a rescaled rotary (Llama 3.1's "llama3", YaRN...)."""
    parameters = getattr(config, "rope_parameters", None) or {}
    scaling = getattr(config, "rope_scaling", None) or {}
    kind = parameters.get("rope_type", scaling.get("rope_type", scaling.get("type", "default")))
    if kind != "default":
        raise ValueError(
            f"this Llama config rescales its rotary frequencies (rope_type={kind!r}); the "
            "course's rotary positions are the unscaled ones, so its logits would differ"
        )
    return float(parameters.get("rope_theta", getattr(config, "rope_theta", 10000.0)))


def llama_settings_of(config: Any) -> dict[str, Any]:
    """The arguments of :class:`DecoderOnlyModel` for a ``LlamaConfig``
    (:func:`course_lib.families.llama_settings` with its sizes).

    Raises:
        ValueError: for what the course's classes do not compute: biases in the attention
            or the feed-forward maps, a head size other than ``hidden_size / heads``, rescaled
            rotary frequencies, ``pretraining_tp > 1``, or an activation other than SiLU.
    """
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    refused = (
        ("attention_bias", bool(getattr(config, "attention_bias", False)), "attention biases"),
        ("mlp_bias", bool(getattr(config, "mlp_bias", False)), "feed-forward biases"),
        ("head_dim", head_dim * heads != config.hidden_size, "heads of another width than "
         "hidden_size / num_attention_heads"),
        ("pretraining_tp", getattr(config, "pretraining_tp", 1) != 1, "sliced linear maps"),
    )  # fmt: skip
    for name, present, what in refused:
        if present:
            raise ValueError(
                f"this Llama config has {name}={getattr(config, name)!r} ({what}); "
                "DecoderOnlyModel cannot represent it, so its logits would differ"
            )
    activation = _activation(config.hidden_act, {"silu": "silu", "swish": "silu"}, "hidden_act")
    return llama_settings(
        config.vocab_size,
        config.hidden_size,
        heads,
        config.num_hidden_layers,
        config.intermediate_size,
        config.num_key_value_heads or heads,
        activation=activation,
        layer_norm_eps=config.rms_norm_eps,
        rope_base=_rope_base(config),
        dropout=float(getattr(config, "attention_dropout", 0.0)),
        max_len=config.max_position_embeddings,
        tie_embeddings=bool(config.tie_word_embeddings),
    )


def llama_from_hf(model: Any) -> DecoderOnlyModel:
    """A :class:`DecoderOnlyModel` with copies of the weights of a ``LlamaForCausalLM``.

    Its dtype, device and train/eval mode are taken over; the rows of every ``W^Q`` and
    ``W^K`` are reordered (:func:`rotary_row_order`). Like Llama without an
    ``attention_mask``, our model attends to every token it is given (no padding id). Llama
    drops only attention weights in training (``attention_dropout``, 0 in the released
    models); our layers use that probability in more places, so with a nonzero one only
    evaluation-mode outputs are the same.

    Raises:
        TypeError: if ``model`` is not a ``LlamaForCausalLM``.
        ValueError: for a config the course's classes cannot represent
            (:func:`llama_settings_of`).
    """
    _check_hf_model(model, "LlamaForCausalLM")
    settings = llama_settings_of(model.config)
    _check_tied(model, settings["tie_embeddings"], "lm_head.weight", "model.embed_tokens.weight")
    links = llama_weight_links(
        settings["num_layers"],
        settings["num_heads"],
        settings["num_kv_heads"],
        settings["tie_embeddings"],
    )
    return _copy_from_hf(DecoderOnlyModel, settings, model, links)


# --------------------------------------------------------------------------- copying


def _copy_from_hf(
    kind: type[nn.Module], settings: dict[str, Any], hf: nn.Module, links: list[WeightLink]
) -> Any:
    """A ``kind(**settings)`` holding every linked Hugging Face tensor, on ``hf``'s dtype and
    device.

    The model is made on the ``meta`` device and given memory without drawing random
    weights (GPT-2 small has 124 million of them), since every one is then overwritten.
    """
    source = hf.state_dict()
    reference = source[links[0].hf]
    with torch.device("meta"):
        ours = kind(**settings).to(dtype=reference.dtype)
    ours = ours.to_empty(device=reference.device)
    if settings["tie_embeddings"]:  # to_empty gives each use of a shared tensor its own
        ours.output.weight = ours.embedding.weight
    written = set()
    with torch.no_grad():
        for link in links:
            tensor = source[link.hf]
            if link.transposed:
                tensor = tensor.t()  # Conv1D (d_in, d_out) -> Linear (d_out, d_in)
            if link.rotary_heads:  # Llama's rotary pairs (j, j + d/2) -> ours (2i, 2i + 1)
                heads = tensor.view(link.rotary_heads, -1, tensor.size(-1))
                tensor = heads[:, rotary_row_order(heads.size(1))].flatten(0, 1)
            for name, part in zip(link.ours, tensor.chunk(len(link.ours)), strict=True):
                ours.get_parameter(name).copy_(part)
                written.add(name)
    missed = {name for name, _ in ours.named_parameters()} - written
    if missed:  # a parameter the links do not name would hold whatever was in memory
        raise RuntimeError(f"the conversion left parameters unset: {sorted(missed)}")
    return ours.train(hf.training)


def _copy_to_hf(ours: nn.Module, hf: nn.Module, links: list[WeightLink]) -> Any:
    """Copy ``ours`` into every linked tensor of ``hf``; a tensor we lack becomes zeros."""
    reference = ours.get_parameter(links[0].ours[0])
    hf = hf.to(device=reference.device, dtype=reference.dtype)
    target = hf.state_dict()  # shares the parameters' storage
    with torch.no_grad():
        for link in links:
            parts = [_parameter_or_none(ours, name) for name in link.ours]
            tensor = target[link.hf]
            if link.transposed:
                tensor = tensor.t()
            for part, slot in zip(parts, tensor.chunk(len(parts)), strict=True):
                if part is None:  # bias=False, no token types: zeros compute the same
                    slot.zero_()
                elif part.shape != slot.shape:  # fewer token types than rows
                    slot.zero_()
                    slot[: part.size(0)].copy_(part)
                else:
                    slot.copy_(part)
    return hf.train(ours.training)


def _parameter_or_none(module: nn.Module, name: str) -> Tensor | None:
    try:
        return module.get_parameter(name)
    except AttributeError:  # a bias of a module made with bias=False, or no such module
        return None


# --------------------------------------------------------------------------- checks


def _import_transformers() -> Any:
    try:
        import transformers
    except ImportError as error:
        raise ImportError(
            "converting from and to Hugging Face needs transformers, which course_lib does "
            "not install: pip install transformers"
        ) from error
    return transformers


def _check_hf_model(model: Any, class_name: str) -> None:
    transformers = _import_transformers()
    if not isinstance(model, getattr(transformers, class_name)):
        raise TypeError(f"expected a transformers {class_name}, got {type(model).__name__}")


def _check_ours(model: Any, kind: type) -> None:
    if not isinstance(model, kind):
        raise TypeError(f"expected a course_lib {kind.__name__}, got {type(model).__name__}")


def _check_tied(model: nn.Module, tied: bool, output: str, embedding: str) -> None:
    """The config's ``tie_word_embeddings`` must say what the model's parameters do."""
    shared = model.get_parameter(output) is model.get_parameter(embedding)
    if shared != tied:
        raise ValueError(
            f"the config says tie_word_embeddings={tied} but {output} and {embedding} are "
            f"{'one' if shared else 'two'} tensor(s)"
        )


def _check_representable(model: Any, class_name: str, differences: list[str]) -> None:
    if differences:
        raise ValueError(
            f"a {class_name} cannot represent this model: it has {'; '.join(differences)}"
        )


def _activation(name: Any, known: dict[str, str], field: str) -> str:
    if name not in known:
        raise ValueError(
            f"{field}={name!r} is not an activation of the course's feed-forward network; "
            f"supported: {sorted(known)}"
        )
    return known[name]


def _learned(model: Any) -> bool:
    return hasattr(model.positional, "table")


def _is_tied(model: Any) -> bool:
    return model.output.weight is model.embedding.weight
