"""Specification of the feed-forward network and of the encoder and decoder layers and stacks.

Every layer is checked against PyTorch's own module holding the same weights, in both norm
orders, with causal and padding masks (ours say True = allowed, PyTorch's the opposite).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.attention import causal_mask, padding_mask
from course_lib.decoder import Decoder, DecoderLayer, DecoderWeights
from course_lib.encoder import Encoder, EncoderLayer
from course_lib.feedforward import FeedForward

D_MODEL, HEADS, D_FF = 16, 4, 40
NORM_ORDERS = pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])


def random(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def source_ids():
    """Three source sentences of 6, 4 and 1 tokens, padded with 0 at the end."""
    return torch.tensor([[5, 6, 7, 8, 9, 4], [4, 5, 6, 7, 0, 0], [9, 0, 0, 0, 0, 0]])


def torch_encoder_layer(norm_first, activation="relu", dropout=0.0, seed=0):
    torch.manual_seed(seed)
    return nn.TransformerEncoderLayer(D_MODEL, HEADS, D_FF, dropout, activation=activation,
                                      batch_first=True, norm_first=norm_first)  # fmt: skip


def torch_decoder_layer(norm_first, activation="relu", dropout=0.0, seed=0):
    torch.manual_seed(seed)
    return nn.TransformerDecoderLayer(D_MODEL, HEADS, D_FF, dropout, activation=activation,
                                      batch_first=True, norm_first=norm_first)  # fmt: skip


def randomize_norms(module: nn.Module, seed=5) -> None:
    """Give every LayerNorm a gain and bias other than 1 and 0, so that copying them counts."""
    draw = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for norm in (m for m in module.modules() if isinstance(m, nn.LayerNorm)):
            norm.weight.copy_(1 + 0.3 * torch.randn(norm.weight.shape, generator=draw))
            norm.bias.copy_(0.3 * torch.randn(norm.bias.shape, generator=draw))


# ----------------------------------------------------------------------------- feed-forward


def test_feed_forward_is_max_0_xw1_b1_w2_b2():
    ffn = FeedForward(D_MODEL, D_FF)
    x = random(2, 5, D_MODEL)
    w_1, b_1 = ffn.w_1.weight.T, ffn.w_1.bias  # (d_model, d_ff), as in the paper
    w_2, b_2 = ffn.w_2.weight.T, ffn.w_2.bias
    expected = torch.clamp(x @ w_1 + b_1, min=0) @ w_2 + b_2
    torch.testing.assert_close(ffn(x), expected)


def test_feed_forward_acts_on_each_position_alone_with_the_same_weights():
    ffn = FeedForward(D_MODEL, D_FF)
    x = random(2, 5, D_MODEL)
    one_at_a_time = torch.stack([ffn(x[:, t]) for t in range(5)], dim=1)
    torch.testing.assert_close(ffn(x), one_at_a_time)
    changed = x.clone()
    changed[0, 3] += 1.0
    moved = (ffn(changed) - ffn(x)).abs().amax(dim=-1)
    assert moved[0, 3] > 0 and moved.sum() == moved[0, 3]  # no other position moves


def test_feed_forward_with_gelu_uses_the_exact_gelu():
    ffn = FeedForward(D_MODEL, D_FF, activation="gelu")
    x = random(3, D_MODEL)
    torch.testing.assert_close(ffn(x), ffn.w_2(F.gelu(ffn.w_1(x))))


def test_feed_forward_dropout_acts_in_training_only():
    ffn = FeedForward(D_MODEL, D_FF, dropout=0.5)
    x = random(4, 8, D_MODEL)
    torch.manual_seed(0)
    assert not torch.equal(ffn.train()(x), ffn.train()(x))
    torch.testing.assert_close(ffn.eval()(x), ffn.w_2(F.relu(ffn.w_1(x))))


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (
            {"activation": "tanh"},
            ValueError,
            r"activation must be one of \['gelu', 'gelu_tanh', 'relu', 'silu'\]",
        ),
        ({"d_ff": 0}, ValueError, "d_ff must be a positive integer, got 0"),
        ({"dropout": 1.0}, ValueError, r"dropout must be a probability in \[0, 1\)"),
    ],
)
def test_feed_forward_refuses_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        FeedForward(**{"d_model": D_MODEL, "d_ff": D_FF, **kwargs})


def test_feed_forward_names_the_expected_size_of_a_wrong_input():
    with pytest.raises(ValueError, match=r"d_model=16 features in its last axis.*got \(2, 5, 12\)"):
        FeedForward(D_MODEL, D_FF)(torch.zeros(2, 5, 12))


# ----------------------------------------------------------------------------- encoder layer

MASKS = ["no mask", "causal", "padding", "causal & padding"]


def encoder_masks(kind: str):
    """Our mask (True = allowed) and PyTorch's src_mask and src_key_padding_mask."""
    keep = padding_mask(source_ids(), pad_id=0)  # (3, 1, 6)
    causal = causal_mask(6)
    ours = {"no mask": None, "causal": causal, "padding": keep, "causal & padding": causal & keep}
    src_mask = ~causal if "causal" in kind else None
    key_padding = ~keep[:, 0] if "padding" in kind else None
    return ours[kind], src_mask, key_padding


@NORM_ORDERS
@pytest.mark.parametrize("kind", MASKS)
@pytest.mark.parametrize("mode", ["train", "eval", "inference"])
def test_encoder_layer_from_torch_gives_the_same_outputs(norm_first, kind, mode):
    reference = torch_encoder_layer(norm_first)
    randomize_norms(reference)
    ours = EncoderLayer.from_torch(reference)
    x = random(3, 6, D_MODEL, seed=1)
    mask, src_mask, key_padding = encoder_masks(kind)
    reference.train(mode == "train"), ours.train(mode == "train")
    with torch.inference_mode(mode == "inference"):  # PyTorch's fused fast path
        expected = reference(x, src_mask=src_mask, src_key_padding_mask=key_padding)
        got = ours(x, mask)
    if key_padding is not None and mode == "inference":  # the fast path zeroes padded rows
        real = ~key_padding
        got, expected = got[real], expected[real]
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


def test_encoder_layer_from_torch_takes_over_gelu_and_eps():
    reference = nn.TransformerEncoderLayer(D_MODEL, HEADS, D_FF, 0.0, activation="gelu",
                                           layer_norm_eps=1e-3, batch_first=True)  # fmt: skip
    ours = EncoderLayer.from_torch(reference)
    assert ours.feed_forward.activation == "gelu" and ours.norm1.eps == 1e-3
    x = random(2, 5, D_MODEL)
    torch.testing.assert_close(ours(x), reference(x), atol=1e-5, rtol=0)


ACTIVATION_FORMS = {
    "string relu": ("relu", "relu"),
    "string gelu": ("gelu", "gelu"),
    "F.relu": (F.relu, "relu"),
    "F.gelu": (F.gelu, "gelu"),
    "torch.relu": (torch.relu, "relu"),
    "nn.ReLU()": (nn.ReLU(), "relu"),
    "nn.GELU()": (nn.GELU(), "gelu"),
    "nn.GELU(tanh)": (nn.GELU(approximate="tanh"), "gelu_tanh"),
}


@pytest.mark.parametrize("form", ACTIVATION_FORMS)
@pytest.mark.parametrize("ours_type", [EncoderLayer, DecoderLayer])
def test_from_torch_is_faithful_to_every_activation_form_pytorch_takes(form, ours_type):
    activation, name = ACTIVATION_FORMS[form]
    make = torch_encoder_layer if ours_type is EncoderLayer else torch_decoder_layer
    reference = make(False, activation=activation).double()  # training mode: no fast path
    ours = ours_type.from_torch(reference)
    assert ours.feed_forward.activation == name
    inputs = (random(2, 5, D_MODEL).double(),)
    if ours_type is DecoderLayer:
        inputs += (random(2, 3, D_MODEL, seed=1).double(),)
    torch.testing.assert_close(ours(*inputs), reference(*inputs), atol=1e-13, rtol=0)


def test_the_tanh_gelu_is_not_the_exact_gelu_so_the_test_above_tells_them_apart():
    x = torch.linspace(-3, 3, 7, dtype=torch.float64)
    assert (F.gelu(x) - F.gelu(x, approximate="tanh")).abs().max() > 1e-4


@pytest.mark.parametrize("ours_type", [EncoderLayer, DecoderLayer])
@pytest.mark.parametrize(
    "activation",
    [nn.SiLU(), torch.tanh, lambda t: t.relu()],
    ids=["nn.SiLU()", "torch.tanh", "lambda"],
)
def test_from_torch_refuses_other_activations_naming_them(ours_type, activation):
    make = torch_encoder_layer if ours_type is EncoderLayer else torch_decoder_layer
    with pytest.raises(ValueError, match=r"activation is ReLU or GELU: 'relu', 'gelu'.*got "):
        ours_type.from_torch(make(False, activation=activation))


def with_float64_weights(module: nn.Module) -> nn.Module:
    """``module`` in float64 with weights that float32 cannot hold (so a float32 copy shows)."""
    module.double()
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for parameter in module.parameters():
            noise = torch.randn(parameter.shape, generator=generator, dtype=torch.float64)
            parameter.add_(noise * 1e-3)
    return module


@NORM_ORDERS
@pytest.mark.parametrize("ours_type", [EncoderLayer, DecoderLayer])
def test_from_torch_of_a_float64_layer_is_exact(norm_first, ours_type):
    make = torch_encoder_layer if ours_type is EncoderLayer else torch_decoder_layer
    reference = make(norm_first)
    randomize_norms(reference)
    ours = ours_type.from_torch(with_float64_weights(reference))
    assert all(tensor.dtype == torch.float64 for tensor in ours.state_dict().values())
    assert torch.equal(ours.feed_forward.w_1.weight, reference.linear1.weight)
    assert torch.equal(ours.norm1.bias, reference.norm1.bias)
    inputs = (random(2, 5, D_MODEL).double(),)
    if ours_type is DecoderLayer:
        inputs += (random(2, 3, D_MODEL, seed=1).double(),)
    torch.testing.assert_close(ours(*inputs), reference(*inputs), atol=1e-14, rtol=0)


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
def test_stacks_from_torch_of_float64_stacks_are_exact():
    torch.manual_seed(0)
    reference = nn.Transformer(D_MODEL, HEADS, 2, 2, D_FF, 0.0, batch_first=True)
    randomize_norms(reference)
    with_float64_weights(reference)
    encoder, decoder = Encoder.from_torch(reference.encoder), Decoder.from_torch(reference.decoder)
    assert torch.equal(encoder.norm.weight, reference.encoder.norm.weight)
    assert torch.equal(decoder.norm.bias, reference.decoder.norm.bias)
    x, y = random(2, 6, D_MODEL).double(), random(2, 5, D_MODEL, seed=1).double()
    expected = reference(x, y, tgt_mask=~causal_mask(5))
    got = decoder(y, encoder(x), causal_mask(5))
    torch.testing.assert_close(got, expected, atol=1e-14, rtol=0)


def test_encoder_layer_from_torch_copies_rather_than_shares_the_weights():
    reference = torch_encoder_layer(False)
    ours = EncoderLayer.from_torch(reference)
    with torch.no_grad():
        ours.feed_forward.w_1.weight.zero_()
    assert reference.linear1.weight.abs().sum() > 0


@NORM_ORDERS
def test_encoder_layer_is_the_layer_equations_composed_from_its_sublayers(norm_first):
    layer = EncoderLayer(D_MODEL, HEADS, D_FF, norm_first=norm_first)
    randomize_norms(layer)
    x, mask = random(2, 5, D_MODEL), causal_mask(5)

    def attention(h):
        return layer.self_attention(h, h, h, mask)[0]

    if norm_first:
        z = x + attention(layer.norm1(x))
        expected = z + layer.feed_forward(layer.norm2(z))
    else:
        z = layer.norm1(x + attention(x))
        expected = layer.norm2(z + layer.feed_forward(z))
    torch.testing.assert_close(layer(x, mask), expected)


def test_post_norm_output_has_mean_0_and_sd_1_over_each_tokens_features():
    layer = EncoderLayer(D_MODEL, HEADS, D_FF)  # gain 1 and bias 0 at the start
    out = layer(random(2, 5, D_MODEL) * 10)
    torch.testing.assert_close(out.mean(-1), torch.zeros(2, 5), atol=1e-5, rtol=0)
    torch.testing.assert_close(out.std(-1, unbiased=False), torch.ones(2, 5), atol=1e-3, rtol=0)


def test_pre_norm_leaves_the_residual_stream_unnormalised():
    layer = EncoderLayer(D_MODEL, HEADS, D_FF, norm_first=True)
    x = random(2, 5, D_MODEL) * 10
    out = layer(x)
    assert out.std(-1, unbiased=False).mean() > 5  # x carried through, not rescaled
    post = EncoderLayer(D_MODEL, HEADS, D_FF)(x)
    assert post.std(-1, unbiased=False).mean() < 1.01


def test_encoder_layer_weights_are_returned_on_request_and_leave_the_output_unchanged():
    layer = EncoderLayer(D_MODEL, HEADS, D_FF).eval()
    x = random(3, 6, D_MODEL)
    keep = padding_mask(source_ids(), 0)
    out, weights = layer(x, keep, return_weights=True)
    torch.testing.assert_close(out, layer(x, keep))  # the fused path gives the same
    assert weights.shape == (3, HEADS, 6, 6)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, HEADS, 6))
    assert (weights[1, :, :, 4:] == 0).all()  # padding of sentence 2


def test_encoder_layer_keeps_real_tokens_as_if_the_sentence_were_alone():
    layer = EncoderLayer(D_MODEL, HEADS, D_FF).eval()
    x = random(3, 6, D_MODEL)
    keep = padding_mask(source_ids(), 0)
    torch.testing.assert_close(layer(x, keep)[1, :4], layer(x[1:2, :4])[0], atol=1e-6, rtol=0)


def test_encoder_layer_passes_gradients_to_every_parameter_and_the_input():
    layer = EncoderLayer(D_MODEL, HEADS, D_FF, dropout=0.1, norm_first=True)
    x = random(2, 5, D_MODEL).requires_grad_()
    layer(x, causal_mask(5)).pow(2).sum().backward()
    assert x.grad.abs().sum() > 0
    for name, parameter in layer.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


@pytest.mark.parametrize(
    "x, mask, error, message",
    [
        (torch.zeros(5, D_MODEL), None, ValueError, r"x must have shape \(batch, length, "
         r"d_model=16\), got \(5, 16\); add a batch axis"),
        (torch.zeros(2, 5, 12), None, ValueError, r"d_model=16\), got \(2, 5, 12\)"),
        (torch.zeros(2, 0, D_MODEL), None, ValueError, "x must hold at least one position"),
        ([[0.0] * D_MODEL], None, TypeError, "x must be a torch.Tensor, got list"),
        (torch.zeros(2, 5, D_MODEL), torch.zeros(5, 5), TypeError,
         r"mask: mask must be a bool tensor .*converts with mask == 0"),
        (torch.zeros(2, 5, D_MODEL), torch.ones(2, 5, dtype=torch.bool), ValueError,
         r"mask: .*use mask\[:, None, :\]"),
        (torch.zeros(2, 5, D_MODEL), torch.ones(4, 4, dtype=torch.bool), ValueError,
         r"mask: a 2-D mask must have shape \(L_q, L_k\) = \(5, 5\)"),
        (torch.zeros(2, 5, D_MODEL), ~causal_mask(5), ValueError,
         "mask: 1 query row.*no allowed key"),
    ],
)  # fmt: skip
def test_encoder_layer_refuses_bad_inputs_and_masks_with_clear_errors(x, mask, error, message):
    layer = EncoderLayer(D_MODEL, HEADS, D_FF)
    with pytest.raises(error, match=message):
        layer(x, mask)


def test_encoder_layer_refuses_a_head_count_that_does_not_divide_d_model():
    with pytest.raises(ValueError, match="d_model=16 is not divisible by num_heads=3"):
        EncoderLayer(D_MODEL, 3, D_FF)


def test_from_torch_refuses_other_modules_custom_activations_and_missing_biases():
    with pytest.raises(TypeError, match=r"TransformerEncoderLayer, got Linear"):
        EncoderLayer.from_torch(nn.Linear(2, 2))
    custom = nn.TransformerEncoderLayer(D_MODEL, HEADS, D_FF, activation=torch.tanh)
    with pytest.raises(ValueError, match=r"activation is ReLU or GELU.*got <built-in method tanh"):
        EncoderLayer.from_torch(custom)
    no_bias = nn.TransformerEncoderLayer(D_MODEL, HEADS, D_FF, bias=False)
    with pytest.raises(ValueError, match="bias"):
        EncoderLayer.from_torch(no_bias)
    with pytest.raises(TypeError, match=r"expected a torch\.nn\.TransformerDecoderLayer"):
        DecoderLayer.from_torch(torch_encoder_layer(False))


# ----------------------------------------------------------------------------- decoder layer


def decoder_inputs():
    """Targets of 5 positions (the third padded after 3), a memory of 6 (padded as above)."""
    tgt_ids = torch.tensor([[1, 5, 6, 7, 8], [1, 4, 4, 5, 6], [1, 7, 9, 0, 0]])
    x, memory = random(3, 5, D_MODEL, seed=2), random(3, 6, D_MODEL, seed=3)
    return tgt_ids, x, memory


@NORM_ORDERS
@pytest.mark.parametrize("padding", [False, True], ids=["causal", "causal & padding"])
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_decoder_layer_from_torch_gives_the_same_outputs(norm_first, padding, mode):
    reference = torch_decoder_layer(norm_first)
    randomize_norms(reference)
    ours = DecoderLayer.from_torch(reference)
    reference.train(mode == "train"), ours.train(mode == "train")
    tgt_ids, x, memory = decoder_inputs()
    src_keep = padding_mask(source_ids(), 0)
    tgt_keep = padding_mask(tgt_ids, 0)
    tgt_mask = causal_mask(5) & tgt_keep if padding else causal_mask(5)
    memory_mask = src_keep if padding else None
    expected = reference(
        x, memory, tgt_mask=~causal_mask(5),
        tgt_key_padding_mask=~tgt_keep[:, 0] if padding else None,
        memory_key_padding_mask=~src_keep[:, 0] if padding else None,
    )  # fmt: skip
    got = ours(x, memory, tgt_mask, memory_mask)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


@NORM_ORDERS
def test_decoder_layer_is_the_three_sublayers_each_with_add_and_norm(norm_first):
    layer = DecoderLayer(D_MODEL, HEADS, D_FF, norm_first=norm_first)
    randomize_norms(layer)
    _, y, m = decoder_inputs()
    mask = causal_mask(5)

    def self_attention(h):
        return layer.self_attention(h, h, h, mask)[0]

    def cross_attention(h):
        return layer.cross_attention(h, m, m)[0]

    if norm_first:
        a = y + self_attention(layer.norm1(y))
        b = a + cross_attention(layer.norm2(a))
        expected = b + layer.feed_forward(layer.norm3(b))
    else:
        a = layer.norm1(y + self_attention(y))
        b = layer.norm2(a + cross_attention(a))
        expected = layer.norm3(b + layer.feed_forward(b))
    torch.testing.assert_close(layer(y, m, mask), expected)


def test_decoder_layer_outputs_do_not_depend_on_later_target_tokens():
    layer = DecoderLayer(D_MODEL, HEADS, D_FF).eval()
    _, y, m = decoder_inputs()
    changed = y.clone()
    changed[:, 3] += 1.0
    before, after = layer(y, m, causal_mask(5)), layer(changed, m, causal_mask(5))
    assert torch.equal(before[:, :3], after[:, :3])
    assert not torch.allclose(before[:, 3:], after[:, 3:])


def test_decoder_layer_ignores_padded_memory_positions():
    layer = DecoderLayer(D_MODEL, HEADS, D_FF).eval()
    _, y, m = decoder_inputs()
    keep = padding_mask(source_ids(), 0)
    changed = m.clone()
    changed[~keep[:, 0]] = 100.0
    torch.testing.assert_close(layer(y, changed, causal_mask(5), keep),
                               layer(y, m, causal_mask(5), keep))  # fmt: skip


def test_decoder_layer_returns_both_attentions_weights_on_request():
    layer = DecoderLayer(D_MODEL, HEADS, D_FF).eval()
    _, y, m = decoder_inputs()
    keep = padding_mask(source_ids(), 0)
    out, weights = layer(y, m, causal_mask(5), keep, return_weights=True)
    torch.testing.assert_close(out, layer(y, m, causal_mask(5), keep))
    assert isinstance(weights, DecoderWeights)
    assert weights.self_attention.shape == (3, HEADS, 5, 5)
    assert weights.cross_attention.shape == (3, HEADS, 5, 6)
    assert (weights.self_attention[..., ~causal_mask(5)] == 0).all()
    assert (weights.cross_attention[2, :, :, 1:] == 0).all()  # source 3 has one real token


def test_decoder_layer_passes_gradients_to_every_parameter_and_to_the_memory():
    layer = DecoderLayer(D_MODEL, HEADS, D_FF, dropout=0.1)
    _, y, m = decoder_inputs()
    m.requires_grad_()
    layer(y, m, causal_mask(5)).pow(2).sum().backward()
    assert m.grad.abs().sum() > 0
    for name, parameter in layer.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


@pytest.mark.parametrize(
    "change, error, message",
    [
        ({"memory": torch.zeros(2, 6, D_MODEL)}, ValueError,
         r"x and memory must have the same batch size"),
        ({"memory": torch.zeros(3, 6, 8)}, ValueError, r"memory must have shape .*\(3, 6, 8\)"),
        ({"tgt_mask": torch.ones(6, 6, dtype=torch.bool)}, ValueError,
         r"tgt_mask: a 2-D mask must have shape \(L_q, L_k\) = \(5, 5\)"),
        ({"memory_mask": torch.ones(5, 5, dtype=torch.bool)}, ValueError,
         r"memory_mask: a 2-D mask must have shape \(L_q, L_k\) = \(5, 6\)"),
        ({"memory_mask": torch.ones(3, 6, dtype=torch.bool)}, ValueError,
         r"memory_mask: .*use mask\[:, None, :\]"),
        ({"tgt_mask": causal_mask(5).float()}, TypeError, "tgt_mask: mask must be a bool tensor"),
    ],
)  # fmt: skip
def test_decoder_layer_refuses_bad_inputs_and_masks_with_clear_errors(change, error, message):
    layer = DecoderLayer(D_MODEL, HEADS, D_FF)
    _, y, m = decoder_inputs()
    arguments = {"x": y, "memory": m, "tgt_mask": causal_mask(5), "memory_mask": None, **change}
    with pytest.raises(error, match=message):
        layer(**arguments)


# ----------------------------------------------------------------------------- stacks


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
@NORM_ORDERS
def test_encoder_and_decoder_stacks_from_torch_agree_with_pytorchs_stacks(norm_first):
    torch.manual_seed(0)
    reference = nn.Transformer(D_MODEL, HEADS, 3, 2, D_FF, 0.0, batch_first=True,
                               norm_first=norm_first)  # fmt: skip
    randomize_norms(reference)
    encoder, decoder = Encoder.from_torch(reference.encoder), Decoder.from_torch(reference.decoder)
    assert (len(encoder.layers), len(decoder.layers)) == (3, 2)
    assert encoder.norm is not None and decoder.norm is not None  # nn.Transformer has both
    tgt_ids, y, _ = decoder_inputs()
    x = random(3, 6, D_MODEL, seed=4)
    src_keep, tgt_keep = padding_mask(source_ids(), 0), padding_mask(tgt_ids, 0)
    expected = reference(x, y, tgt_mask=~causal_mask(5), src_key_padding_mask=~src_keep[:, 0],
                         tgt_key_padding_mask=~tgt_keep[:, 0],
                         memory_key_padding_mask=~src_keep[:, 0])  # fmt: skip
    memory = encoder(x, src_keep)
    got = decoder(y, memory, causal_mask(5) & tgt_keep, src_keep)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
@pytest.mark.parametrize("has_norm", [False, True], ids=["without final norm", "with final norm"])
def test_stacks_from_torch_take_over_the_final_norm_or_its_absence(has_norm):
    encoder_layer = torch_encoder_layer(norm_first=True)
    decoder_layer = torch_decoder_layer(norm_first=True)
    norms = (nn.LayerNorm(D_MODEL), nn.LayerNorm(D_MODEL)) if has_norm else (None, None)
    encoder = Encoder.from_torch(nn.TransformerEncoder(encoder_layer, 2, norm=norms[0]))
    decoder = Decoder.from_torch(nn.TransformerDecoder(decoder_layer, 2, norm=norms[1]))
    assert (encoder.norm is not None, decoder.norm is not None) == (has_norm, has_norm)
    x = random(2, 5, D_MODEL)
    reference = nn.TransformerEncoder(encoder_layer, 2, norm=norms[0], enable_nested_tensor=False)
    torch.testing.assert_close(encoder(x), reference(x), atol=1e-5, rtol=0)


@pytest.mark.parametrize("stack", [Encoder, Decoder])
def test_a_stack_is_its_layers_applied_in_order_then_the_final_norm(stack):
    model = stack(3, D_MODEL, HEADS, D_FF, final_norm=True)
    randomize_norms(model)
    _, y, m = decoder_inputs()
    inputs = (y,) if stack is Encoder else (y, m)
    h = y
    for layer in model.layers:
        h = layer(h, *inputs[1:])
    torch.testing.assert_close(model(*inputs), model.norm(h))


@pytest.mark.parametrize("stack", [Encoder, Decoder])
def test_a_final_norm_comes_by_default_with_pre_norm_only(stack):
    assert stack(2, D_MODEL, HEADS, D_FF).norm is None
    assert isinstance(stack(2, D_MODEL, HEADS, D_FF, norm_first=True).norm, nn.LayerNorm)
    assert stack(2, D_MODEL, HEADS, D_FF, norm_first=True, final_norm=False).norm is None
    assert len(stack(6, D_MODEL, HEADS, D_FF).layers) == 6


def test_stacks_return_the_weights_of_every_layer_on_request():
    encoder, decoder = Encoder(3, D_MODEL, HEADS, D_FF), Decoder(2, D_MODEL, HEADS, D_FF)
    _, y, m = decoder_inputs()
    memory, encoder_weights = encoder(m, return_weights=True)
    torch.testing.assert_close(memory, encoder(m))
    _, decoder_weights = decoder(y, memory, causal_mask(5), return_weights=True)
    assert [w.shape for w in encoder_weights] == [(3, HEADS, 6, 6)] * 3
    assert [w.cross_attention.shape for w in decoder_weights] == [(3, HEADS, 5, 6)] * 2


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
def test_stacks_refuse_zero_layers_and_foreign_modules():
    with pytest.raises(ValueError, match="num_layers must be a positive integer, got 0"):
        Encoder(0, D_MODEL, HEADS, D_FF)
    with pytest.raises(TypeError, match=r"expected a torch\.nn\.TransformerDecoder, got"):
        Decoder.from_torch(nn.Transformer(D_MODEL, HEADS, 1, 1, D_FF).encoder)
