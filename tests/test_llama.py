"""Specification of Llama in the course's classes: ``DecoderOnlyModel.from_hf`` of a Hugging
Face ``LlamaForCausalLM`` (course_lib.huggingface.llama_from_hf) and ``llama_settings``,
checked against ``transformers`` itself (the oracle; a test dependency only) on small random
models. Nothing is downloaded.

Hugging Face's Llama computes its RMSNorm, its rotary angles and (in eager attention) its
softmax in float32 even in a float64 model, so float64 logits agree to about 1e-7, not to
float64's own precision; both dtypes are checked within 1e-5.
"""

from __future__ import annotations

import pytest
import torch

from course_lib.decoding import greedy_decode
from course_lib.families import DecoderOnlyModel, llama_settings
from course_lib.huggingface import (
    llama_from_hf,
    llama_settings_of,
    llama_weight_links,
    rotary_row_order,
)
from course_lib.rotary import rotate

transformers = pytest.importorskip("transformers")  # offline: conftest.py sets HF_HUB_OFFLINE

VOCAB = 61
TOLERANCE = 1e-5


def llama_config(**changes):
    settings = {
        "vocab_size": VOCAB,
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 64,
        **changes,
    }
    return transformers.LlamaConfig(**settings)


def hf_llama(dtype=torch.float32, **changes):
    """A small random LlamaForCausalLM, every weight (the norms' gains too) moved off its
    starting value so that a tensor copied to the wrong place shows."""
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(llama_config(**changes))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    return model.to(dtype).eval()


def token_ids(batch=3, length=13):
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(1))


def same_logits(hf, ours, ids):
    with torch.no_grad():
        expected, got = hf(ids).logits, ours(ids)
    torch.testing.assert_close(got, expected, atol=TOLERANCE, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_from_hf_gives_the_logits_of_transformers(dtype, kv_heads):
    hf = hf_llama(dtype, num_key_value_heads=kv_heads)
    ours = DecoderOnlyModel.from_hf(hf)
    assert ours.encoder.layers[0].self_attention.num_kv_heads == kv_heads
    same_logits(hf, ours, token_ids())


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("theta", [10000.0, 500000.0])
def test_tied_and_untied_heads_and_both_rotary_bases_give_the_same_logits(tied, theta):
    hf = hf_llama(tie_word_embeddings=tied, rope_theta=theta)
    ours = llama_from_hf(hf)
    assert (ours.output.weight is ours.embedding.weight) == tied
    assert ours.encoder.layers[0].self_attention.rotary_base == theta
    same_logits(hf, ours, token_ids())


def test_positions_beyond_the_configs_max_position_embeddings_still_agree():
    hf = hf_llama(max_position_embeddings=8)  # rotary has no table: any length computes
    same_logits(hf, llama_from_hf(hf), token_ids(batch=2, length=20))


def test_greedy_generation_is_the_same_as_transformers_generate():
    hf = hf_llama()
    ours = llama_from_hf(hf)
    prompt = torch.tensor([[1, 5, 7], [3, 3, 9]])
    expected = hf.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        max_new_tokens=8,
        do_sample=False,
        pad_token_id=0,
        eos_token_id=None,
    )
    got = greedy_decode(ours.next_token_scores, prompt, eos_id=None, max_new_tokens=8)
    assert torch.equal(got, expected)


def test_the_dtype_device_and_mode_of_the_given_model_are_kept():
    hf = hf_llama(torch.float64).train()
    ours = llama_from_hf(hf)
    assert ours.training
    parameters = list(ours.parameters())
    assert {p.dtype for p in parameters} == {torch.float64}
    assert {p.device for p in parameters} == {torch.device("cpu")}
    same_logits(hf, ours, token_ids())  # no dropout in this config: the same in training
    assert not llama_from_hf(hf.eval()).training


def test_a_llama_built_with_llama_settings_has_the_parameters_of_transformers():
    for kv_heads, tied in ((4, False), (2, True), (1, False)):
        config = llama_config(num_key_value_heads=kv_heads, tie_word_embeddings=tied)
        hf = transformers.LlamaForCausalLM(config)
        ours = DecoderOnlyModel(
            **llama_settings(VOCAB, 64, 4, 2, 96, kv_heads, tie_embeddings=tied)
        )
        assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in hf.parameters())


def test_llama_settings_of_a_config_are_llama_settings_with_its_sizes():
    config = llama_config(rope_theta=500000.0, rms_norm_eps=1e-5)
    expected = llama_settings(
        VOCAB,
        64,
        4,
        2,
        96,
        2,
        rope_base=500000.0,
        layer_norm_eps=1e-5,
        max_len=64,
        dropout=0.0,
    )
    assert llama_settings_of(config) == expected


def test_the_weight_links_name_every_tensor_of_llama_once():
    for tied in (False, True):
        hf = transformers.LlamaForCausalLM(llama_config(tie_word_embeddings=tied))
        links = llama_weight_links(2, 4, 2, tied)
        names = [link.hf for link in links]
        assert len(names) == len(set(names))
        expected = {name for name, _ in hf.named_parameters()}  # a tied head appears once
        assert set(names) == expected


def test_the_query_and_key_rows_are_reordered_so_rotate_half_becomes_adjacent_pairs():
    assert rotary_row_order(8).tolist() == [0, 4, 1, 5, 2, 6, 3, 7]
    d, positions = 8, torch.arange(5)
    x = torch.randn(5, d, dtype=torch.float64)
    # Hugging Face's rotation: pairs (j, j + d/2), cos/sin repeated over the two halves
    angles = positions[:, None] * 10000.0 ** (-torch.arange(0, d, 2) / d)
    cos, sin = angles.cos().repeat(1, 2), angles.sin().repeat(1, 2)
    halves = torch.cat((-x[:, d // 2 :], x[:, : d // 2]), dim=-1)  # rotate_half
    theirs = x * cos + halves * sin
    order = rotary_row_order(d)
    torch.testing.assert_close(rotate(x[:, order], positions), theirs[:, order])


def test_the_query_rows_of_our_copy_are_llamas_rows_reordered_within_each_head():
    hf = hf_llama()
    ours = llama_from_hf(hf)
    theirs = hf.model.layers[0].self_attn.q_proj.weight.view(4, 16, 64)
    mine = ours.encoder.layers[0].self_attention.w_q.weight.view(4, 16, 64)
    assert torch.equal(mine, theirs[:, rotary_row_order(16)])
    values = hf.model.layers[0].self_attn.v_proj.weight
    assert torch.equal(ours.encoder.layers[0].self_attention.w_v.weight, values)  # as it is


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"attention_bias": True}, "attention_bias=True"),
        ({"mlp_bias": True}, "mlp_bias=True"),
        ({"head_dim": 32}, "head_dim=32"),
        ({"pretraining_tp": 2}, "pretraining_tp=2"),
        ({"hidden_act": "gelu"}, "hidden_act='gelu'"),
        (
            {"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}},
            "rope_type='linear'",
        ),
        (
            {
                "rope_parameters": {
                    "rope_type": "llama3",
                    "factor": 8.0,
                    "low_freq_factor": 1.0,
                    "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 32,
                    "rope_theta": 500000.0,
                }
            },
            "rope_type='llama3'",
        ),
    ],
)
def test_llama_configs_we_cannot_represent_are_refused_with_what_differs(changes, message):
    hf = transformers.LlamaForCausalLM(llama_config(**changes))
    with pytest.raises(ValueError, match=message):
        DecoderOnlyModel.from_hf(hf)


def test_a_rescaled_rotary_is_refused_in_the_older_rope_scaling_form_too():
    config = llama_config(rope_scaling={"rope_type": "linear", "factor": 2.0})
    with pytest.raises(ValueError, match="rescales its rotary frequencies"):
        llama_settings_of(config)


def test_an_object_that_is_not_llama_or_gpt2_is_refused():
    with pytest.raises(TypeError, match="GPT2LMHeadModel or LlamaForCausalLM, got Linear"):
        DecoderOnlyModel.from_hf(torch.nn.Linear(2, 2))
    gpt2 = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(vocab_size=VOCAB, n_positions=8, n_embd=16, n_layer=1, n_head=2)
    )
    with pytest.raises(TypeError, match="LlamaForCausalLM, got GPT2LMHeadModel"):
        llama_from_hf(gpt2)


def test_a_config_that_contradicts_its_tied_head_is_refused():
    hf = hf_llama(tie_word_embeddings=False)
    hf.config.tie_word_embeddings = True
    with pytest.raises(ValueError, match="tie_word_embeddings=True"):
        llama_from_hf(hf)


def test_llama_settings_refuses_options_decoder_only_models_do_not_have():
    with pytest.raises(TypeError, match="rope_theta"):
        llama_settings(VOCAB, 64, 4, 2, 96, rope_theta=500000.0)
    settings = llama_settings(VOCAB, 64, 4, 2, 96, 2, rope_base=500000.0)
    assert settings["rope_base"] == 500000.0 and settings["num_kv_heads"] == 2
