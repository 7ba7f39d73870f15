"""Specification of course_lib.huggingface: GPT-2 and BERT from and to Hugging Face
``transformers``, checked against ``transformers`` itself (the oracle; a test dependency
only) on small random models. Nothing is downloaded."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from course_lib.decoding import greedy_decode
from course_lib.families import DecoderOnlyModel, EncoderOnlyModel
from course_lib.huggingface import gpt2_weight_links

transformers = pytest.importorskip("transformers")  # offline: conftest.py sets HF_HUB_OFFLINE

TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-10}
VOCAB = 97


def hf_gpt2(dtype=torch.float32, **config):
    """A small random GPT2LMHeadModel, its biases and norms moved away from 0 and 1."""
    torch.manual_seed(0)
    settings = {
        "vocab_size": VOCAB,
        "n_positions": 32,
        "n_embd": 32,
        "n_layer": 2,
        "n_head": 4,
        "bos_token_id": None,
        "eos_token_id": None,
        **config,
    }
    return _jitter(transformers.GPT2LMHeadModel(transformers.GPT2Config(**settings)), dtype)


def hf_bert(dtype=torch.float32, **config):
    torch.manual_seed(0)
    settings = {
        "vocab_size": VOCAB,
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 64,
        "max_position_embeddings": 40,
        **config,
    }
    return _jitter(transformers.BertForMaskedLM(transformers.BertConfig(**settings)), dtype)


def _jitter(model, dtype):
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    return model.to(dtype).eval()


def token_ids(batch=3, length=12, low=0):
    return torch.randint(low, VOCAB, (batch, length), generator=torch.Generator().manual_seed(1))


def largest_difference(a, b):
    return (a - b).abs().max().item()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gpt2_from_hf_gives_the_logits_of_transformers(dtype):
    hf = hf_gpt2(dtype)
    ours = DecoderOnlyModel.from_hf(hf)
    ids = token_ids()
    with torch.no_grad():
        assert largest_difference(ours(ids), hf(ids).logits) < TOLERANCE[dtype]
    assert ours.embedding.weight.dtype == dtype


@pytest.mark.parametrize("activation", ["gelu_new", "gelu", "relu", "gelu_pytorch_tanh"])
def test_gpt2_from_hf_takes_each_supported_activation(activation):
    hf = hf_gpt2(torch.float64, activation_function=activation)
    ids = token_ids()
    with torch.no_grad():
        assert largest_difference(DecoderOnlyModel.from_hf(hf)(ids), hf(ids).logits) < 1e-10


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gpt2_to_hf_and_back_keeps_every_weight_and_the_logits(dtype):
    hf = hf_gpt2(dtype)
    ours = DecoderOnlyModel.from_hf(hf)
    back = ours.to_hf()
    assert type(back).__name__ == "GPT2LMHeadModel" and not back.training
    again = DecoderOnlyModel.from_hf(back)
    for name, tensor in ours.state_dict().items():
        assert torch.equal(tensor, again.state_dict()[name]), name
    ids = token_ids()
    with torch.no_grad():
        assert largest_difference(back(ids).logits, hf(ids).logits) < TOLERANCE[dtype]


def test_a_gpt2_pad_token_id_masks_nothing_as_in_transformers():
    hf = hf_gpt2(torch.float64, pad_token_id=5)  # fine-tuned copies often set pad = eos
    ours = DecoderOnlyModel.from_hf(hf)
    assert ours.pad_id is None
    ids = token_ids()
    ids[:, 3] = 5
    with torch.no_grad():
        assert largest_difference(ours(ids), hf(ids).logits) < 1e-10


def test_a_model_built_with_gpt2s_options_converts_to_transformers():
    torch.manual_seed(0)
    ours = (
        DecoderOnlyModel(
            VOCAB,
            32,
            4,
            2,
            64,
            max_len=24,
            pad_id=None,
            positions="learned",
            activation="gelu_tanh",
            scale_embeddings=False,
        )
        .double()
        .eval()
    )
    hf = ours.to_hf()
    assert hf.config.activation_function == "gelu_new" and hf.config.n_inner == 64
    ids = token_ids(length=20)
    with torch.no_grad():
        assert largest_difference(ours(ids), hf(ids).logits) < 1e-10


def test_a_model_without_biases_converts_with_zero_biases():
    torch.manual_seed(0)
    ours = (
        DecoderOnlyModel(
            VOCAB,
            32,
            4,
            2,
            64,
            max_len=24,
            pad_id=None,
            positions="learned",
            scale_embeddings=False,
            bias=False,
        )
        .double()
        .eval()
    )
    assert ours.encoder.layers[0].self_attention.w_q.bias is None
    assert ours.encoder.layers[0].norm1.bias is None
    hf = ours.to_hf()
    assert not hf.transformer.h[0].attn.c_attn.bias.any()
    ids = token_ids()
    with torch.no_grad():
        assert largest_difference(ours(ids), hf(ids).logits) < 1e-10


def test_tied_and_untied_heads_convert_as_they_are():
    tied = DecoderOnlyModel.from_hf(hf_gpt2())
    assert tied.output.weight is tied.embedding.weight and tied.output.bias is None
    hf = hf_gpt2(tie_word_embeddings=False)
    assert hf.lm_head.weight is not hf.transformer.wte.weight
    untied = DecoderOnlyModel.from_hf(hf)
    assert untied.output.weight is not untied.embedding.weight and untied.output.bias is None
    torch.testing.assert_close(untied.output.weight, hf.lm_head.weight, rtol=0, atol=0)
    assert untied.to_hf().config.tie_word_embeddings is False
    ids = token_ids()
    with torch.no_grad():
        assert largest_difference(untied(ids), hf(ids).logits) < 1e-5


def test_greedy_generation_is_the_same_as_transformers_generate():
    hf = hf_gpt2(torch.float64)
    ours = DecoderOnlyModel.from_hf(hf)
    prompt = token_ids(batch=2, length=4)
    with torch.no_grad():
        theirs = hf.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            do_sample=False,
            max_new_tokens=12,
            min_new_tokens=12,
            pad_token_id=0,
        )
    mine = greedy_decode(ours.next_token_scores, prompt, eos_id=None, max_new_tokens=12)
    assert torch.equal(mine, theirs)


def test_the_dtype_device_and_mode_of_the_given_model_are_kept():
    hf = hf_gpt2(torch.float64).train()
    ours = DecoderOnlyModel.from_hf(hf)
    assert ours.training and all(p.dtype == torch.float64 for p in ours.parameters())
    assert all(p.device == hf.device for p in ours.parameters())
    back = ours.eval().to_hf()
    assert not back.training and back.dtype == torch.float64


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_bert_from_hf_gives_the_logits_with_token_types_and_padding(dtype):
    hf = hf_bert(dtype)
    ours = EncoderOnlyModel.from_hf(hf)
    ids = token_ids(low=1)
    ids[1, 8:] = 0  # padding, BERT's pad_token_id
    types = (torch.arange(12) >= 5).long().expand(3, 12)
    with torch.no_grad():
        theirs = hf(ids, attention_mask=(ids != 0).long(), token_type_ids=types).logits
        assert largest_difference(ours(ids, types), theirs) < TOLERANCE[dtype]
        # no token types given: all 0, in both
        theirs = hf(ids, attention_mask=(ids != 0).long()).logits
        assert largest_difference(ours(ids), theirs) < TOLERANCE[dtype]


def test_bert_to_hf_and_back_keeps_every_weight_and_the_logits():
    hf = hf_bert(torch.float64)
    ours = EncoderOnlyModel.from_hf(hf)
    assert ours.output.weight is ours.embedding.weight and ours.output.bias is not None
    back = ours.to_hf()
    again = EncoderOnlyModel.from_hf(back)
    for name, tensor in ours.state_dict().items():
        assert torch.equal(tensor, again.state_dict()[name]), name
    ids = token_ids(low=1)
    with torch.no_grad():
        assert largest_difference(back(ids).logits, hf(ids).logits) < 1e-10


def test_an_untied_bert_converts_both_ways():
    hf = hf_bert(torch.float64, tie_word_embeddings=False)
    ours = EncoderOnlyModel.from_hf(hf)
    assert ours.output.weight is not ours.embedding.weight
    ids = token_ids(low=1)
    with torch.no_grad():
        assert largest_difference(ours(ids), hf(ids).logits) < 1e-10
        assert largest_difference(ours.to_hf()(ids).logits, hf(ids).logits) < 1e-10


def test_bert_without_token_types_converts_with_a_zero_table():
    torch.manual_seed(0)
    ours = (
        EncoderOnlyModel(
            VOCAB,
            32,
            4,
            2,
            64,
            positions="learned",
            max_len=24,
            scale_embeddings=False,
            embedding_norm=True,
            head_transform=True,
            output_bias=True,
        )
        .double()
        .eval()
    )
    hf = ours.to_hf()
    assert hf.config.type_vocab_size == 1
    assert not hf.bert.embeddings.token_type_embeddings.weight.any()
    ids = token_ids(low=1)
    with torch.no_grad():
        theirs = hf(ids, attention_mask=(ids != 0).long()).logits
        assert largest_difference(ours(ids), theirs) < 1e-10


def count(model):
    return sum(p.numel() for p in model.parameters())


GPT2_SMALL = {
    "d_model": 768,
    "num_heads": 12,
    "num_layers": 12,
    "d_ff": 3072,
    "max_len": 1024,
    "positions": "learned",
    "pad_id": None,
    "activation": "gelu_tanh",
    "scale_embeddings": False,
}


@pytest.mark.parametrize("tied, total", [(True, 124_439_808), (False, 163_037_184)])
def test_the_gpt2_small_ledger_in_our_classes_and_in_transformers(tied, total):
    with torch.device("meta"):
        ours = DecoderOnlyModel(50257, **GPT2_SMALL, tie_embeddings=tied, output_bias=False)
        hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(tie_word_embeddings=tied))
    assert count(ours) == count(hf) == total
    assert ours.embedding.weight.is_meta  # nothing was allocated


def test_bert_base_with_its_pooler_has_the_parameters_of_transformers_bert_model():
    with torch.device("meta"):
        ours = EncoderOnlyModel(
            30522,
            768,
            12,
            12,
            3072,
            max_len=512,
            positions="learned",
            scale_embeddings=False,
            num_token_types=2,
            embedding_norm=True,
            pooler=True,
        )
        hf = transformers.BertModel(transformers.BertConfig())
    assert count(ours) == count(hf) == 109_482_240


def test_the_weight_links_name_every_tensor_of_gpt2_once():
    hf = hf_gpt2(tie_word_embeddings=False)
    links = gpt2_weight_links(2, tied=False)
    assert sorted(link.hf for link in links) == sorted(hf.state_dict())
    ours = DecoderOnlyModel.from_hf(hf)
    named = [name for link in links for name in link.ours]
    assert sorted(named) == sorted(ours.state_dict())
    # Conv1D weights are (d_in, d_out), the transpose of ours
    assert hf.transformer.h[0].mlp.c_fc.weight.shape == (32, 128)
    assert ours.encoder.layers[0].feed_forward.w_1.weight.shape == (128, 32)


@pytest.mark.parametrize(
    "config, message",
    [
        ({"scale_attn_by_inverse_layer_idx": True}, "scale_attn_by_inverse_layer_idx=True"),
        ({"reorder_and_upcast_attn": True}, "reorder_and_upcast_attn=True"),
        ({"scale_attn_weights": False}, "not divided by sqrt"),
        ({"activation_function": "silu"}, "activation_function='silu'"),
        ({"add_cross_attention": True}, "cross-attention"),
    ],
)
def test_gpt2_configs_we_cannot_represent_are_refused(config, message):
    with pytest.raises(ValueError, match=message):
        DecoderOnlyModel.from_hf(hf_gpt2(**config))


def test_bert_configs_we_cannot_represent_are_refused():
    with pytest.raises(ValueError, match="decoder"):
        EncoderOnlyModel.from_hf(hf_bert(is_decoder=True))
    with pytest.raises(ValueError, match="hidden_act='silu'"):
        EncoderOnlyModel.from_hf(hf_bert(hidden_act="silu"))


def test_the_wrong_kind_of_model_is_refused():
    with pytest.raises(TypeError, match="expected a transformers GPT2LMHeadModel"):
        DecoderOnlyModel.from_hf(hf_bert())
    with pytest.raises(TypeError, match="expected a transformers BertForMaskedLM"):
        EncoderOnlyModel.from_hf(hf_gpt2())


def test_to_hf_names_what_the_target_cannot_represent():
    course_model = DecoderOnlyModel(VOCAB, 32, 4, 2, 64)  # the course's defaults
    with pytest.raises(ValueError, match=r"sinusoidal positions.*scaled by sqrt\(d_model\)"):
        course_model.to_hf()
    with pytest.raises(ValueError, match="post-norm layers"):
        DecoderOnlyModel(
            VOCAB,
            32,
            4,
            2,
            64,
            positions="learned",
            scale_embeddings=False,
            norm_first=False,
            final_norm=True,
        ).to_hf()
    with pytest.raises(ValueError, match="no embedding norm; no head transform"):
        EncoderOnlyModel(VOCAB, 32, 4, 2, 64, positions="learned", scale_embeddings=False).to_hf()


def test_to_hf_says_how_to_install_transformers_when_it_is_missing(monkeypatch):
    ours = DecoderOnlyModel.from_hf(hf_gpt2())
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(ImportError, match="pip install transformers"):
        ours.to_hf()


def test_course_lib_does_not_import_transformers():
    code = (
        "import sys, course_lib.families, course_lib.huggingface; "
        "print('transformers' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr


class _FakeTokenizer:
    """Stands in for GPT-2's tokenizer: one id per word, within the small vocabulary."""

    eos_token_id = 0

    def encode(self, text):
        return [1 + len(word) for word in text.split()]

    def decode(self, ids):
        return " ".join(str(int(i)) for i in ids)


def test_the_chapters_download_cell_runs_with_the_hub_replaced_by_a_small_model(
    monkeypatch, capsys
):
    """The cell tagged skip-execution in "Model families" is never run by the tests; here it
    runs with from_pretrained answered by a small random model instead of the hub."""
    import nbformat

    from conftest import CHAPTERS
    from course_lib.decoding import sample

    notebook = nbformat.read(CHAPTERS / "model-families.ipynb", as_version=4)
    (cell,) = [c for c in notebook.cells if "from_pretrained(" in c.source]
    small = hf_gpt2(n_positions=64)
    monkeypatch.setattr(transformers.GPT2LMHeadModel, "from_pretrained", lambda name: small)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda n: _FakeTokenizer())
    namespace = {
        "torch": torch,
        "DecoderOnlyModel": DecoderOnlyModel,
        "greedy_decode": greedy_decode,
        "sample": sample,
        "count": lambda *modules: sum(p.numel() for m in modules for p in m.parameters()),
    }
    exec(compile(cell.source, "download-cell", "exec"), namespace)
    printed = capsys.readouterr().out
    assert "greedy: " in printed and "sampled:" in printed
    assert float(printed.rsplit(":", 1)[1]) < 1e-5  # the largest difference of the logits
