"""Specification of the gated feed-forward network and of the hidden size of Llama's code
(course_lib/feedforward.py): the formula, Hugging Face's ``LlamaMLP`` with the same weights,
the 2/3 rule and the sizes of Llama 1 and 2."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from course_lib.feedforward import FeedForward, GatedFeedForward, swiglu_hidden_size


def random(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def gated(d_model=16, d_ff=40, activation="silu", bias=False, seed=0):
    torch.manual_seed(seed)
    return GatedFeedForward(d_model, d_ff, activation=activation, bias=bias).double()


# ----------------------------------------------------------------------------- the formula


@pytest.mark.parametrize(
    "activation, function",
    [("silu", lambda t: t * torch.sigmoid(t)), ("gelu", F.gelu), ("relu", F.relu)],
    ids=["SwiGLU", "GEGLU", "ReGLU"],
)
def test_the_network_is_w2_of_the_activated_gate_times_the_linear_map(activation, function):
    network = gated(activation=activation)
    x = random(2, 5, 16)
    w, v, w2 = network.w_1.weight, network.w_3.weight, network.w_2.weight  # (out, in) each
    expected = (function(x @ w.T) * (x @ v.T)) @ w2.T  # Shazeer's (act(xW) * xV) W_2
    assert torch.allclose(network(x), expected, atol=1e-12)


def test_silu_is_swish_with_beta_one():
    t = torch.linspace(-6, 6, 101, dtype=torch.float64)
    assert torch.allclose(F.silu(t), t * torch.sigmoid(1.0 * t))


def test_biases_enter_all_three_maps_when_asked():
    network = gated(bias=True)
    x = random(3, 16)
    hidden = F.silu(network.w_1(x)) * network.w_3(x)
    assert torch.allclose(network(x), network.w_2(hidden), atol=1e-12)
    assert all(layer.bias is not None for layer in (network.w_1, network.w_3, network.w_2))
    assert all(layer.bias is None for layer in (gated().w_1, gated().w_3, gated().w_2))


def test_three_matrices_of_two_thirds_the_width_hold_the_weights_of_two():
    d_model = 48
    relu = FeedForward(d_model, 4 * d_model, bias=False)
    swiglu = GatedFeedForward(d_model, swiglu_hidden_size(d_model))
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert swiglu_hidden_size(d_model) == 128 == 2 * 4 * d_model // 3
    assert count(relu) == count(swiglu) == 2 * 48 * 192


def test_each_position_is_transformed_on_its_own():
    network = gated()
    x = random(1, 6, 16)
    alone = torch.cat([network(x[:, i : i + 1]) for i in range(6)], dim=1)
    assert torch.allclose(network(x), alone, atol=1e-12)


def test_dropout_acts_on_the_gated_hidden_units_in_training_only():
    torch.manual_seed(0)
    network = GatedFeedForward(16, 40, dropout=0.5).double()
    x = random(4, 16)
    network.eval()
    assert torch.equal(network(x), network(x))
    network.train()
    assert not torch.equal(network(x), network(x))


def test_the_network_runs_on_the_meta_device():
    network = GatedFeedForward(16, 40).to("meta")
    assert network(torch.empty(2, 3, 16, device="meta")).shape == (2, 3, 16)


def test_bad_arguments_are_refused_with_messages():
    with pytest.raises(ValueError, match="activation must be one of"):
        GatedFeedForward(16, 40, activation="swish")
    with pytest.raises(ValueError, match="d_ff must be a positive integer"):
        GatedFeedForward(16, 0)
    with pytest.raises(ValueError, match=r"d_model=16 features .* got \(2, 8\)"):
        GatedFeedForward(16, 40)(torch.zeros(2, 8))
    with pytest.raises(TypeError, match="convert the module"):
        GatedFeedForward(16, 40)(torch.zeros(2, 16, dtype=torch.float64))


# ----------------------------------------------------------------------------- Hugging Face


def test_the_network_equals_hugging_faces_llama_mlp_with_the_same_weights():
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        hidden_size=16, intermediate_size=40, num_attention_heads=4, hidden_act="silu"
    )
    torch.manual_seed(0)
    theirs = llama.LlamaMLP(config).double()
    ours = GatedFeedForward(16, 40).double()
    with torch.no_grad():
        ours.w_1.weight.copy_(theirs.gate_proj.weight)
        ours.w_3.weight.copy_(theirs.up_proj.weight)
        ours.w_2.weight.copy_(theirs.down_proj.weight)
    x = random(2, 7, 16)
    assert (ours(x) - theirs(x)).abs().max() < 1e-12


# ----------------------------------------------------------------------------- hidden sizes


@pytest.mark.parametrize(
    "d_model, multiple_of, multiplier, hidden",
    [
        (4096, 256, None, 11008),  # Llama 1 and 2, 7B
        (5120, 256, None, 13824),  # 13B
        (6656, 256, None, 17920),  # Llama 1, 33B
        (8192, 256, None, 22016),  # Llama 1, 65B
        (8192, 4096, 1.3, 28672),  # Llama 2, 70B
    ],
    ids=["7B", "13B", "33B", "65B", "Llama-2-70B"],
)
def test_the_hidden_sizes_of_llama(d_model, multiple_of, multiplier, hidden):
    assert swiglu_hidden_size(d_model, multiple_of, multiplier) == hidden


def test_the_hidden_size_is_two_thirds_of_four_d_model_rounded_up():
    assert swiglu_hidden_size(64) == 170  # int(512 / 3) = int(170.67)
    assert swiglu_hidden_size(64, multiple_of=8) == 176  # up, not down to 168
    assert swiglu_hidden_size(4096) == 10922  # before Llama's rounding to 256
    for d_model in range(1, 200):
        for multiple_of in (1, 8, 64):
            hidden = swiglu_hidden_size(d_model, multiple_of)
            assert hidden % multiple_of == 0
            assert 0 <= hidden - int(8 * d_model / 3) < multiple_of


@pytest.mark.parametrize("multiplier", [0, -1.0, True])
def test_the_multiplier_must_be_positive(multiplier):
    with pytest.raises(ValueError, match="ffn_dim_multiplier must be a positive number"):
        swiglu_hidden_size(64, 8, multiplier)


def test_sizes_must_be_positive_integers():
    with pytest.raises(ValueError, match="d_model must be a positive integer"):
        swiglu_hidden_size(0)
    with pytest.raises(ValueError, match="multiple_of must be a positive integer"):
        swiglu_hidden_size(64, 0)
    with pytest.raises(TypeError, match="d_model must be an integer"):
        swiglu_hidden_size(64.0)
