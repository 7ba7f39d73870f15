"""Specification of course_lib.transformer.Transformer: ids in, next-token logits out."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.attention import causal_mask
from course_lib.positional import sinusoidal_positional_encoding
from course_lib.transformer import Transformer

SRC_VOCAB, TGT_VOCAB, D_MODEL = 13, 11, 16
NESTED_TENSOR_WARNING = pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")


def small(**kwargs) -> Transformer:
    torch.manual_seed(0)
    settings = {"d_model": D_MODEL, "num_heads": 4, "num_encoder_layers": 2,
                "num_decoder_layers": 2, "d_ff": 32, "dropout": 0.0, **kwargs}  # fmt: skip
    return Transformer(SRC_VOCAB, TGT_VOCAB, **settings).eval()


def batch():
    """Two sentence pairs, the second padded (pad id 0) in both source and target."""
    src = torch.tensor([[4, 5, 6, 7, 8], [9, 10, 11, 0, 0]])
    tgt = torch.tensor([[1, 4, 5, 6], [1, 7, 0, 0]])  # <bos> = 1 first
    return src, tgt


def test_forward_gives_one_score_per_target_position_and_target_token():
    model = small()
    src, tgt = batch()
    logits = model(src, tgt)
    assert logits.shape == (2, 4, TGT_VOCAB)
    probabilities = logits.softmax(-1)
    torch.testing.assert_close(probabilities.sum(-1), torch.ones(2, 4))


def test_forward_is_decode_of_encode_with_the_masks_built_from_the_padding():
    model = small()
    src, tgt = batch()
    src_mask = model.source_mask(src)
    assert src_mask.tolist() == [[[True] * 5], [[True] * 3 + [False] * 2]]
    memory = model.encode(src)
    torch.testing.assert_close(model(src, tgt), model.decode(tgt, memory, src_mask))


def test_embeddings_are_scaled_by_sqrt_d_model_and_positions_added_once():
    model = small()
    src, _ = batch()
    expected = model.src_embedding.weight[src] * math.sqrt(D_MODEL)
    expected = expected + sinusoidal_positional_encoding(5, D_MODEL)
    torch.testing.assert_close(model.embed_source(src), expected)
    torch.testing.assert_close(model.encode(src), model.encoder(expected, model.source_mask(src)))


def test_scale_embeddings_false_leaves_the_embeddings_as_they_are_looked_up():
    model = small(scale_embeddings=False)
    src, _ = batch()
    expected = model.src_embedding.weight[src] + sinusoidal_positional_encoding(5, D_MODEL)
    torch.testing.assert_close(model.embed_source(src), expected)


def test_teacher_forcing_gives_every_position_what_decoding_its_prefix_gives():
    model = small()
    src, tgt = batch()
    parallel = model(src, tgt)
    memory, src_mask = model.encode(src), model.source_mask(src)
    for t in range(1, 5):  # the decoder run on tokens 0..t-1 only, as in generation
        prefix = model.decode(tgt[:, :t], memory, src_mask)
        torch.testing.assert_close(prefix[0, t - 1], parallel[0, t - 1], atol=1e-5, rtol=0)


def test_padding_does_not_change_the_logits_of_the_real_positions():
    model = small()
    src, tgt = batch()
    padded = model(src, tgt)[1, :2]
    alone = model(src[1:, :3], tgt[1:, :2])[0]
    torch.testing.assert_close(padded, alone, atol=1e-5, rtol=0)


@NESTED_TENSOR_WARNING
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_from_torch_agrees_with_nn_transformer_between_the_same_embeddings(norm_first):
    torch.manual_seed(1)
    reference = nn.Transformer(D_MODEL, 4, 2, 3, 32, 0.0, batch_first=True,
                               norm_first=norm_first).eval()  # fmt: skip
    model = Transformer.from_torch(reference, SRC_VOCAB, TGT_VOCAB, max_len=20).eval()
    assert (model.encoder.norm is not None, len(model.decoder.layers)) == (True, 3)
    src, tgt = batch()
    src_pad, tgt_pad = src == 0, tgt == 0  # PyTorch: True = not allowed
    states = reference(model.embed_source(src), model.embed_target(tgt),
                       tgt_mask=~causal_mask(4), src_key_padding_mask=src_pad,
                       tgt_key_padding_mask=tgt_pad,
                       memory_key_padding_mask=src_pad)  # fmt: skip
    torch.testing.assert_close(model(src, tgt), model.output(states), atol=1e-5, rtol=0)


@NESTED_TENSOR_WARNING
def test_from_torch_of_a_float64_transformer_is_exact_and_keeps_its_tanh_gelu():
    torch.manual_seed(1)
    reference = nn.Transformer(D_MODEL, 4, 2, 2, 32, 0.0, batch_first=True,
                               activation=nn.GELU(approximate="tanh"))  # fmt: skip
    with torch.no_grad():  # float64 weights that float32 cannot hold
        for parameter in reference.double().parameters():
            parameter.add_(torch.randn_like(parameter) * 1e-3)
    model = Transformer.from_torch(reference, SRC_VOCAB, TGT_VOCAB, max_len=20)
    assert model.encoder.layers[1].feed_forward.activation == "gelu_tanh"
    # PyTorch's decoder layers lose a module activation when nn.Transformer copies them
    # (TransformerDecoderLayer.__setstate__ puts F.relu back): the copy follows what they do.
    assert reference.decoder.layers[1].activation is F.relu
    assert model.decoder.layers[1].feed_forward.activation == "relu"
    assert model.output.weight.dtype == torch.float64
    assert torch.equal(
        model.decoder.layers[1].feed_forward.w_2.bias, reference.decoder.layers[1].linear2.bias
    )
    x, y = (
        torch.randn(2, 5, D_MODEL, dtype=torch.float64),
        torch.randn(2, 4, D_MODEL, dtype=torch.float64),
    )
    expected = reference(x, y, tgt_mask=~causal_mask(4))
    got = model.decoder(y, model.encoder(x), causal_mask(4))
    torch.testing.assert_close(got, expected, atol=1e-14, rtol=0)


def test_target_mask_is_causal_and_hides_target_padding():
    model = small()
    _, tgt = batch()
    mask = model.target_mask(tgt)
    assert mask.shape == (2, 4, 4)
    assert torch.equal(mask[0], causal_mask(4))
    assert mask[1, 3].tolist() == [True, True, False, False]


def test_without_a_pad_id_there_is_no_padding_mask_and_the_target_mask_is_causal():
    model = small(pad_id=None)
    src, tgt = batch()
    assert model.source_mask(src) is None
    assert torch.equal(model.target_mask(tgt), causal_mask(4))
    assert model(src, tgt).shape == (2, 4, TGT_VOCAB)


def test_tied_embeddings_share_one_matrix_with_the_output_projection():
    model = small(tie_embeddings=True)
    assert model.output.weight is model.tgt_embedding.weight
    assert small().output.weight is not small().tgt_embedding.weight


def test_the_defaults_are_the_papers_base_model():
    model = Transformer(100, 100)
    assert (len(model.encoder.layers), len(model.decoder.layers)) == (6, 6)
    layer = model.encoder.layers[0]
    assert (layer.d_model, layer.self_attention.num_heads, layer.feed_forward.d_ff) == (
        512, 8, 2048)  # fmt: skip
    assert layer.dropout1.p == 0.1 and not layer.norm_first


def test_a_training_step_sends_gradients_everywhere_but_the_padding_rows():
    model = small(dropout=0.1).train()
    src, tgt = batch()
    logits = model(src, tgt[:, :-1])
    loss = nn.functional.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(),
                                       ignore_index=0)  # fmt: skip
    loss.backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None, name
    assert model.src_embedding.weight.grad[0].abs().sum() == 0  # pad row: no gradient
    assert model.src_embedding.weight.grad[4].abs().sum() > 0


@pytest.mark.parametrize(
    "src, tgt, error, message",
    [
        (torch.tensor([4, 5, 6]), torch.tensor([[1, 4]]), ValueError,
         r"src_ids must be a \(batch, length\) tensor of token ids, got \(3,\); for one"),
        (torch.tensor([[4, 5]]), torch.tensor([[1, 4], [1, 5]]), ValueError,
         "src_ids and tgt_ids must have the same batch size"),
        (torch.tensor([[4, 5]]), torch.tensor([[1, 40]]), IndexError,
         r"token id 40 at position \(0, 1\) of ids is outside \[0, vocab_size=11\)"),
        (torch.tensor([[4.0, 5.0]]), torch.tensor([[1, 4]]), TypeError,
         "must be an integer tensor of token ids"),
        (torch.tensor([[4] * 30]), torch.tensor([[1, 4]]), ValueError,
         "create it with max_len >= 30"),
        (torch.tensor([[0, 0]]), torch.tensor([[1, 4]]), ValueError, "no allowed key"),
        (torch.zeros(1, 0, dtype=torch.long), torch.tensor([[1, 4]]), ValueError,
         "src_ids must hold at least one token"),
    ],
)  # fmt: skip
def test_bad_ids_get_clear_errors(src, tgt, error, message):
    model = small(max_len=20)
    with pytest.raises(error, match=message):
        model(src, tgt)


def test_decode_requires_the_source_mask_to_be_passed():
    model = small()
    src, tgt = batch()
    with pytest.raises(TypeError, match="src_mask"):
        model.decode(tgt, model.encode(src))  # type: ignore[call-arg]


# ----------------------------------------------------------------------------- shared embeddings


def shared(**kwargs) -> Transformer:
    torch.manual_seed(0)
    settings = {
        "d_model": D_MODEL,
        "num_heads": 4,
        "num_encoder_layers": 1,
        "num_decoder_layers": 1,
        "d_ff": 32,
        "dropout": 0.0,
        **kwargs,
    }
    return Transformer(SRC_VOCAB, SRC_VOCAB, **settings).eval()


def test_sharing_all_makes_the_two_embeddings_and_the_output_one_parameter():
    model = shared(tie_embeddings="all")
    weight = model.tgt_embedding.weight
    assert model.src_embedding.weight is weight and model.output.weight is weight
    assert sum(p is weight for p in model.parameters()) == 1
    unshared = shared()
    count = sum(p.numel() for p in model.parameters())
    assert count == sum(p.numel() for p in unshared.parameters()) - 2 * SRC_VOCAB * D_MODEL


@pytest.mark.parametrize(
    ("value", "name"), [(False, "none"), (True, "target-output"), ("none", "none"), ("all", "all")]
)
def test_tie_embeddings_takes_booleans_and_names(value, name):
    assert shared(tie_embeddings=value).tie_embeddings == name


def test_the_shared_matrix_gets_the_gradients_of_all_three_uses():
    model = shared(tie_embeddings="all")
    src, tgt = torch.tensor([[4, 5, 6]]), torch.tensor([[1, 7]])
    model(src, tgt).logsumexp(-1).sum().backward()
    grad = model.tgt_embedding.weight.grad
    sources = model.tgt_embedding.weight.detach()
    separate = shared()  # the same weights, three separate matrices
    with torch.no_grad():
        for module in (separate.src_embedding, separate.tgt_embedding, separate.output):
            module.weight.copy_(sources)
        for name, tensor in model.state_dict().items():
            separate.state_dict()[name].copy_(tensor)
    separate(src, tgt).logsumexp(-1).sum().backward()
    total = sum(
        m.weight.grad for m in (separate.src_embedding, separate.tgt_embedding, separate.output)
    )
    torch.testing.assert_close(grad, total)
    assert separate.src_embedding.weight.grad[4:7].abs().sum() > 0  # the source use counts


def test_a_shared_models_state_dict_round_trips_and_keeps_the_sharing():
    model = shared(tie_embeddings="all")
    state = model.state_dict()
    assert {"src_embedding.weight", "tgt_embedding.weight", "output.weight"} <= set(state)
    copy = shared(tie_embeddings="all")
    torch.nn.init.zeros_(copy.tgt_embedding.weight)
    copy.load_state_dict(state)
    assert copy.src_embedding.weight is copy.output.weight
    src, tgt = batch()
    torch.testing.assert_close(copy(src, tgt), model(src, tgt))


def test_sharing_all_needs_one_vocabulary_and_a_known_name():
    with pytest.raises(ValueError, match="one shared vocabulary"):
        small(tie_embeddings="all")
    with pytest.raises(ValueError, match="tie_embeddings must be"):
        small(tie_embeddings="source")


def test_the_shipped_checkpoint_keeps_its_keys_and_loads():
    from course_lib.translation import load_number_translator

    model = load_number_translator().model
    assert model.tie_embeddings == "none"
    assert {"src_embedding.weight", "tgt_embedding.weight", "output.weight", "output.bias"} <= set(
        model.state_dict()
    )


def papers_count(d_model, d_ff, heads, vocab=37_000):
    with torch.device("meta"):
        model = Transformer(vocab, vocab, d_model, heads, 6, 6, d_ff, tie_embeddings="all")
    return sum(p.numel() for p in model.parameters())


def test_the_papers_base_and_big_models_with_a_shared_37000_token_vocabulary():
    base, big = papers_count(512, 2048, 8), papers_count(1024, 4096, 16)
    layers = 6 * (4 * 512 * 513 + 2 * 512 * 2048 + 2048 + 512 + 2 * 2 * 512) + 6 * (
        8 * 512 * 513 + 2 * 512 * 2048 + 2048 + 512 + 3 * 2 * 512
    )
    assert base == layers + 37_000 * 512 + 37_000  # one matrix, the output's bias
    assert round(base / 1e6) == 63 and round(big / 1e6) == 214
