"""Specification of course_lib.embeddings: the token embedding as a trainable lookup table."""

import math

import pytest
import torch
from torch import nn

from course_lib.embeddings import TokenEmbedding, one_hot_lookup


def ids_batch() -> torch.Tensor:
    return torch.tensor([[1, 4, 4, 0], [2, 7, 0, 0]])  # (batch=2, seq=4), ids 3, 5, 6 unused


# --- the lookup -----------------------------------------------------------------------------


@pytest.mark.parametrize("d_model", [1, 3, 16, 512])
def test_output_shape_is_batch_seq_d_model(d_model):
    layer = TokenEmbedding(10, d_model)
    assert layer(ids_batch()).shape == (2, 4, d_model)


def test_equals_nn_embedding_with_the_same_weights():
    torch.manual_seed(0)
    reference = nn.Embedding(10, 6, padding_idx=0)
    layer = TokenEmbedding(10, 6, padding_idx=0)
    layer.load_state_dict(reference.state_dict())
    torch.testing.assert_close(layer(ids_batch()), reference(ids_batch()), rtol=0, atol=0)


def test_each_output_vector_is_the_row_of_its_id():
    layer = TokenEmbedding(10, 6)
    out = layer(ids_batch())
    assert torch.equal(out[1, 1], layer.weight[7])
    assert torch.equal(out[0, 1], out[0, 2])  # the same id twice: the same vector


def test_any_ids_shape_works():
    layer = TokenEmbedding(10, 6)
    assert layer(torch.tensor(3)).shape == (6,)
    assert layer(torch.tensor([3, 4, 5])).shape == (3, 6)


def test_weight_is_the_only_parameter_with_shape_vocab_size_by_d_model():
    layer = TokenEmbedding(10, 6)
    assert [(name, tuple(p.shape)) for name, p in layer.named_parameters()] == [("weight", (10, 6))]


def test_repr_names_the_sizes():
    text = repr(TokenEmbedding(10, 6, padding_idx=0, scale=True))
    assert "vocab_size=10, d_model=6, padding_idx=0, scale=True" in text


# --- scaling by sqrt(d_model) ---------------------------------------------------------------


def test_scale_multiplies_by_sqrt_d_model_hand_checked():
    layer = TokenEmbedding(3, 4, scale=True)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[0.0] * 4, [1.0, -1.0, 0.5, 0.0], [0.0] * 4]))
    out = layer(torch.tensor([[1]]))
    assert out[0, 0].tolist() == [2.0, -2.0, 1.0, 0.0]  # sqrt(4) = 2


def test_scaled_and_unscaled_differ_by_exactly_sqrt_d_model():
    plain = TokenEmbedding(10, 9)
    scaled = TokenEmbedding(10, 9, scale=True)
    scaled.load_state_dict(plain.state_dict())
    torch.testing.assert_close(scaled(ids_batch()), 3.0 * plain(ids_batch()))


@pytest.mark.parametrize("scale", [False, True])
def test_output_entries_start_with_unit_variance_with_or_without_scale(scale):
    torch.manual_seed(0)
    layer = TokenEmbedding(1000, 256, scale=scale)
    out = layer(torch.arange(1000)[None, :])
    assert out.std().item() == pytest.approx(1.0, abs=0.02)


# --- one-hot times a matrix -----------------------------------------------------------------


def test_one_hot_times_weight_equals_the_lookup_exactly():
    layer = TokenEmbedding(10, 6)
    assert torch.equal(one_hot_lookup(ids_batch(), layer.weight), layer(ids_batch()))


def test_one_hot_lookup_in_float64_also_equals_indexing():
    weight = torch.randn(5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    ids = torch.tensor([[4, 0, 2]])
    assert torch.equal(one_hot_lookup(ids, weight), weight[ids])


def test_one_hot_lookup_gives_the_same_gradient_as_the_lookup():
    layer = TokenEmbedding(10, 6)
    weight = layer.weight.detach().clone().requires_grad_(True)
    layer(ids_batch()).pow(2).sum().backward()
    one_hot_lookup(ids_batch(), weight).pow(2).sum().backward()
    torch.testing.assert_close(weight.grad, layer.weight.grad)


def test_one_hot_lookup_checks_its_arguments():
    with pytest.raises(ValueError, match=r"weight must be a \(vocab_size, d_model\) matrix"):
        one_hot_lookup(torch.tensor([0]), torch.zeros(3))
    with pytest.raises(IndexError, match=r"token id 3 .* outside"):
        one_hot_lookup(torch.tensor([3]), torch.zeros(3, 2))


# --- gradients ------------------------------------------------------------------------------


def test_only_rows_of_used_ids_receive_a_gradient():
    layer = TokenEmbedding(10, 6)
    layer(ids_batch()).sum().backward()
    rows_with_gradient = (layer.weight.grad != 0).any(dim=1).nonzero().flatten().tolist()
    assert rows_with_gradient == [0, 1, 2, 4, 7]


def test_a_row_used_twice_gets_twice_the_gradient():
    layer = TokenEmbedding(10, 6)
    layer(ids_batch()).sum().backward()
    torch.testing.assert_close(layer.weight.grad[4], torch.full((6,), 2.0))
    torch.testing.assert_close(layer.weight.grad[1], torch.full((6,), 1.0))


def test_padding_row_starts_at_zero_and_gets_no_gradient():
    layer = TokenEmbedding(10, 6, padding_idx=0)
    assert torch.count_nonzero(layer.weight[0]) == 0
    layer(ids_batch()).sum().backward()
    assert torch.count_nonzero(layer.weight.grad[0]) == 0
    rows_with_gradient = (layer.weight.grad != 0).any(dim=1).nonzero().flatten().tolist()
    assert rows_with_gradient == [1, 2, 4, 7]


def test_padding_id_embeds_to_the_zero_vector_after_a_training_step():
    layer = TokenEmbedding(10, 6, padding_idx=0)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
    layer(ids_batch()).pow(2).sum().backward()
    optimizer.step()
    assert torch.count_nonzero(layer(torch.tensor([[0]]))) == 0


# --- from_torch -----------------------------------------------------------------------------


def test_from_torch_gives_the_same_output_as_the_torch_module():
    reference = nn.Embedding(10, 6)
    layer = TokenEmbedding.from_torch(reference)
    torch.testing.assert_close(layer(ids_batch()), reference(ids_batch()), rtol=0, atol=0)


def test_from_torch_shares_the_weight_instead_of_copying_it():
    reference = nn.Embedding(10, 6)
    layer = TokenEmbedding.from_torch(reference, scale=True)
    assert layer.weight is reference.weight
    with torch.no_grad():
        reference.weight[3] = 1.0
    assert layer(torch.tensor([[3]]))[0, 0].tolist() == pytest.approx([math.sqrt(6)] * 6)


def test_from_torch_takes_over_padding_idx():
    reference = nn.Embedding(10, 6, padding_idx=2)
    before = reference.weight.detach().clone()
    layer = TokenEmbedding.from_torch(reference)
    assert layer.padding_idx == 2
    assert torch.equal(reference.weight, before)  # the torch module is left untouched


def test_from_torch_refuses_other_modules_and_extra_options():
    with pytest.raises(TypeError, match=r"expected a torch\.nn\.Embedding, got Linear"):
        TokenEmbedding.from_torch(nn.Linear(3, 4))
    with pytest.raises(ValueError, match=r"plain nn\.Embedding; got max_norm=1\.0"):
        TokenEmbedding.from_torch(nn.Embedding(10, 6, max_norm=1.0))


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bool])
def test_non_integer_ids_raise_type_error_naming_the_dtype(dtype):
    layer = TokenEmbedding(10, 6)
    with pytest.raises(TypeError, match=rf"ids must be an integer tensor .* got {dtype}"):
        layer(torch.zeros(2, 3, dtype=dtype))


def test_a_list_instead_of_a_tensor_raises_type_error():
    with pytest.raises(TypeError, match="ids must be a tensor of token ids"):
        TokenEmbedding(10, 6)([[1, 2]])


@pytest.mark.parametrize("bad", [10, 57, -1])
def test_an_id_outside_the_vocabulary_raises_index_error_naming_it(bad):
    layer = TokenEmbedding(10, 6)
    ids = torch.tensor([[1, 2], [3, bad]])
    with pytest.raises(IndexError, match=rf"token id {bad} at position \(1, 1\) .*vocab_size=10"):
        layer(ids)


def test_int32_ids_are_accepted():
    layer = TokenEmbedding(10, 6)
    torch.testing.assert_close(layer(ids_batch().int()), layer(ids_batch()))


@pytest.mark.parametrize("bad", [10, -1])
def test_padding_idx_must_be_a_valid_id(bad):
    with pytest.raises(
        ValueError, match=rf"padding_idx must be an id in \[0, vocab_size=10\).*{bad}"
    ):
        TokenEmbedding(10, 6, padding_idx=bad)


def test_sizes_must_be_positive_integers():
    with pytest.raises(ValueError, match="d_model must be a positive integer, got 0"):
        TokenEmbedding(10, 0)
    with pytest.raises(TypeError, match="vocab_size must be an integer"):
        TokenEmbedding(10.0, 4)
