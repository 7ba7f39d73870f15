"""Specification of the options of today's decoders in ``DecoderOnlyModel`` (and so in
``EncoderLayer`` and ``Encoder``), each on its own: rotary positions, RMSNorm, the gated
feed-forward network, key/value heads, no biases; and the 2017 defaults left unchanged."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from course_lib.attention import MultiHeadAttention
from course_lib.decoder import Decoder
from course_lib.encoder import Encoder, EncoderLayer, LayerStack, make_norm
from course_lib.families import DecoderOnlyModel, llama_settings
from course_lib.feedforward import FeedForward, GatedFeedForward
from course_lib.normalization import RMSNorm
from course_lib.positional import PositionalEncoding

VOCAB = 23
SIZES = {"d_model": 32, "num_heads": 4, "num_layers": 2, "d_ff": 48}


def model(**options):
    torch.manual_seed(0)
    return DecoderOnlyModel(VOCAB, **SIZES, **options).eval()


def count(module):
    return sum(p.numel() for p in module.parameters())


def ids(length=9):
    return torch.randint(1, VOCAB, (2, length), generator=torch.Generator().manual_seed(3))


def test_the_defaults_are_the_course_decoder_of_2017_with_pre_norm():
    default = model()
    assert isinstance(default.positional, PositionalEncoding)
    assert default.embedding.scale
    for layer in default.encoder.layers:
        assert layer.norm_first
        assert isinstance(layer.feed_forward, FeedForward)
        assert isinstance(layer.norm1, nn.LayerNorm) and isinstance(layer.norm2, nn.LayerNorm)
        attention = layer.self_attention
        assert attention.num_kv_heads == attention.num_heads and attention.rotary_base is None
        assert attention.w_q.bias is not None and layer.norm1.bias is not None
    assert isinstance(default.encoder.norm, nn.LayerNorm)
    assert default.output.weight is default.embedding.weight


def test_the_default_parameter_count_is_unchanged_by_the_new_options():
    d, f, layers = SIZES["d_model"], SIZES["d_ff"], SIZES["num_layers"]
    per_layer = 4 * (d * d + d) + (d * f + f) + (f * d + d) + 2 * 2 * d
    assert count(model()) == VOCAB * d + layers * per_layer + 2 * d  # tied output


def test_rotary_positions_add_no_table_and_rotate_in_every_attention():
    rotary = model(positions="rotary", rope_base=500.0)
    assert count(rotary) == count(model())  # the sinusoids had no parameters either
    assert not isinstance(rotary.positional, PositionalEncoding)
    assert not any("positional" in name for name, _ in rotary.named_buffers())
    assert all(layer.self_attention.rotary_base == 500.0 for layer in rotary.encoder.layers)
    assert torch.equal(rotary.embed(ids(5)), rotary.embedding(ids(5)))  # nothing added


def test_a_rotary_model_scores_a_shifted_pattern_by_offsets_only():
    """Without padding, a causal rotary model sees positions only through offsets; so the
    logits of a prefix do not depend on how long the sequence grows after it."""
    rotary = model(positions="rotary", pad_id=None)
    sequence = ids(12)
    with torch.no_grad():
        full, prefix = rotary(sequence), rotary(sequence[:, :7])
    torch.testing.assert_close(full[:, :7], prefix)


def test_rms_norms_replace_every_layer_norm_including_the_final_one():
    rms = model(norm="rms")
    norms = [m for m in rms.modules() if isinstance(m, (nn.LayerNorm, RMSNorm))]
    assert len(norms) == 2 * SIZES["num_layers"] + 1
    assert all(isinstance(m, RMSNorm) for m in norms)
    assert isinstance(rms.encoder.norm, RMSNorm)
    # a gain and no bias: d fewer parameters per norm
    assert count(model()) - count(rms) == len(norms) * SIZES["d_model"]


def test_make_norm_refuses_an_unknown_kind():
    with pytest.raises(ValueError, match="norm must be one of"):
        make_norm("batch", 8, 1e-5)
    with pytest.raises(ValueError, match="norm must be one of"):
        model(norm="batch")


def test_the_gated_network_has_three_matrices_of_hidden_size_d_ff():
    gated = model(gated=True, activation="silu")
    for layer in gated.encoder.layers:
        network = layer.feed_forward
        assert isinstance(network, GatedFeedForward) and network.activation == "silu"
        assert network.w_1.weight.shape == network.w_3.weight.shape == (48, 32)
        assert network.w_2.weight.shape == (32, 48)
        assert network.w_1.bias is not None  # bias=True is the model's default
    d, f = SIZES["d_model"], SIZES["d_ff"]
    extra = SIZES["num_layers"] * (d * f + f)  # one more matrix and its bias per layer
    assert count(gated) - count(model()) == extra


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_key_value_heads_shrink_the_key_and_value_maps(kv_heads):
    grouped = model(num_kv_heads=kv_heads)
    attention = grouped.encoder.layers[0].self_attention
    d_head = SIZES["d_model"] // SIZES["num_heads"]
    assert attention.w_k.weight.shape == attention.w_v.weight.shape == (kv_heads * d_head, 32)
    assert attention.w_q.weight.shape == (32, 32)
    saved = 2 * (32 - kv_heads * d_head) * (32 + 1) * SIZES["num_layers"]
    assert count(model()) - count(grouped) == saved


def test_one_key_value_head_repeated_is_the_same_as_four_identical_heads():
    """Grouped-query attention computes what multi-head attention computes when the heads of
    a group have equal keys and values."""
    grouped = model(num_kv_heads=1, positions="rotary")
    full = model(num_kv_heads=4, positions="rotary")
    shared = {
        k: v for k, v in grouped.state_dict().items() if ".w_k." not in k and ".w_v." not in k
    }
    full.load_state_dict(shared, strict=False)  # all but w_k and w_v
    for mine, theirs in zip(full.encoder.layers, grouped.encoder.layers, strict=True):
        with torch.no_grad():
            for name in ("w_k", "w_v"):
                source = getattr(theirs.self_attention, name)
                target = getattr(mine.self_attention, name)
                target.weight.copy_(source.weight.repeat(4, 1))
                target.bias.copy_(source.bias.repeat(4))
    with torch.no_grad():
        torch.testing.assert_close(full(ids()), grouped(ids()))


def test_kv_heads_must_divide_the_query_heads():
    with pytest.raises(ValueError, match="must divide num_heads=4"):
        model(num_kv_heads=3)


def test_no_biases_leaves_no_bias_anywhere_in_the_layers_or_the_output():
    plain = model(bias=False, output_bias=False, tie_embeddings=False)
    assert not [name for name, _ in plain.named_parameters() if "bias" in name]
    for layer_norm in (m for m in plain.modules() if isinstance(m, nn.LayerNorm)):
        assert layer_norm.bias is None and layer_norm.weight is not None


def test_a_llama_style_model_has_exactly_the_parts_of_llama():
    llama = DecoderOnlyModel(**llama_settings(VOCAB, 32, 4, 2, 48, num_kv_heads=2)).eval()
    names = {re.sub(r"^encoder\.(layers\.\d+\.)?", "", n) for n, _ in llama.named_parameters()}
    assert names == {
        "embedding.weight",
        "self_attention.w_q.weight",
        "self_attention.w_k.weight",
        "self_attention.w_v.weight",
        "self_attention.w_o.weight",
        "feed_forward.w_1.weight",
        "feed_forward.w_2.weight",
        "feed_forward.w_3.weight",
        "norm1.weight",
        "norm2.weight",
        "norm.weight",
        "output.weight",
    }
    assert llama.output.weight is not llama.embedding.weight and not llama.embedding.scale
    d, f, v = 32, 48, VOCAB
    per_layer = d * d * 2 + 2 * d * (2 * 8) + 3 * d * f + 2 * d
    assert count(llama) == 2 * v * d + 2 * per_layer + d
    assert llama(ids()).shape == (2, 9, VOCAB)


def test_each_option_works_alone_and_trains_a_step():
    for options in (
        {"positions": "rotary"},
        {"norm": "rms"},
        {"gated": True, "activation": "silu"},
        {"num_kv_heads": 2},
        {"bias": False},
        {"attention_window": 3},
    ):
        torch.manual_seed(0)
        one = DecoderOnlyModel(VOCAB, **SIZES, **options)
        loss = one(ids()).logsumexp(-1).mean()
        loss.backward()
        assert all(p.grad is not None for p in one.parameters()), options


def test_an_encoder_layer_keeps_the_papers_layer_by_default():
    layer = EncoderLayer(16, 4, 32)
    assert not layer.norm_first and isinstance(layer.norm1, nn.LayerNorm)
    assert isinstance(layer.feed_forward, FeedForward)
    attention = layer.self_attention
    assert isinstance(attention, MultiHeadAttention) and attention.rotary_base is None


def test_the_parameter_ledger_adds_up_and_counts_a_tied_output_map_as_zero():
    from course_lib.families import parameter_ledger

    tied = parameter_ledger(model())
    assert tied["output map"] == 0 and tied["total"] == count(model())
    assert tied["positions"] == 0  # sinusoids
    untied = parameter_ledger(model(tie_embeddings=False))
    assert untied["output map"] == VOCAB * SIZES["d_model"] + VOCAB  # with its own bias
    learned = parameter_ledger(model(positions="learned", max_len=20))
    assert learned["positions"] == 20 * SIZES["d_model"]
    assert sum(v for k, v in untied.items() if k != "total") == untied["total"]


def test_the_parameter_ledger_of_llama_2_7b_on_the_meta_device():
    from course_lib.families import parameter_ledger

    with torch.device("meta"):
        llama = DecoderOnlyModel(**llama_settings(32000, 4096, 32, 32, 11008))
    ledger = parameter_ledger(llama)
    assert ledger["total"] == 6_738_415_616
    assert ledger["norms"] == 65 * 4096 and ledger["positions"] == 0
    with pytest.raises(TypeError, match="EncoderOnlyModel or DecoderOnlyModel"):
        parameter_ledger(nn.Linear(2, 2))


def test_a_decoder_takes_the_options_of_an_encoder_and_its_final_norm_is_of_their_kind():
    options = {"norm": "rms", "gated": True, "num_kv_heads": 2, "rotary_base": 500.0}
    decoder = Decoder(2, 16, 4, 32, activation="silu", norm_first=True, bias=False, **options)
    layer = decoder.layers[0]
    assert isinstance(decoder.norm, RMSNorm)
    assert all(isinstance(n, RMSNorm) for n in (layer.norm1, layer.norm2, layer.norm3))
    assert isinstance(layer.feed_forward, GatedFeedForward)
    assert layer.self_attention.num_kv_heads == layer.cross_attention.num_kv_heads == 2
    assert layer.self_attention.rotary_base == 500.0
    assert layer.cross_attention.rotary_base is None  # target and source positions differ
    assert not any(name.endswith("bias") for name, _ in decoder.named_parameters())


def test_encoder_and_decoder_are_one_stack_with_their_own_forward():
    assert issubclass(Encoder, LayerStack) and issubclass(Decoder, LayerStack)
    assert Encoder.__init__ is Decoder.__init__ is LayerStack.__init__
    assert Encoder.from_torch.__func__ is Decoder.from_torch.__func__
    assert Encoder.forward is not Decoder.forward
