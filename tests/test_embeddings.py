"""Specification of course_lib.embeddings: the token embedding as a trainable lookup table."""

import math

import pytest
import torch
from torch import nn

from course_lib.embeddings import PatchEmbedding, TokenEmbedding, one_hot_lookup, patchify


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
    with pytest.raises(
        TypeError, match=r"weight must be a \(vocab_size, d_model\) tensor, got list"
    ):
        one_hot_lookup(torch.tensor([0]), [[1.0, 2.0]])
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


# --- image patches --------------------------------------------------------------------------


def test_patchify_shape_of_vit_base():
    images = torch.zeros(2, 3, 224, 224)
    assert patchify(images, 16).shape == (2, 196, 768)  # 14 x 14 patches of 3 * 16 * 16


def test_patchify_hand_checked_order_reading_order_then_channel_row_column():
    image = torch.arange(2 * 4 * 4, dtype=torch.float32).reshape(1, 2, 4, 4)  # 2 channels
    patches = patchify(image, 2)
    assert patches.shape == (1, 4, 8)
    # the top-left patch: channel 0 rows 0-1, columns 0-1, then the same pixels of channel 1
    assert patches[0, 0].tolist() == [0, 1, 4, 5, 16, 17, 20, 21]
    # the second patch is to its right, the third below it
    assert patches[0, 1].tolist() == [2, 3, 6, 7, 18, 19, 22, 23]
    assert patches[0, 2].tolist() == [8, 9, 12, 13, 24, 25, 28, 29]


def test_patchify_of_rectangular_images_counts_rows_times_columns():
    assert patchify(torch.zeros(1, 1, 8, 12), 4).shape == (1, 6, 16)


@pytest.mark.parametrize(
    "shape, message",
    [
        ((3, 32, 32), "images must have shape"),
        ((1, 3, 30, 32), "must be multiples of patch_size=8"),
    ],
)
def test_patchify_refuses_bad_images(shape, message):
    with pytest.raises(ValueError, match=message):
        patchify(torch.zeros(shape), 8)


def test_patch_embedding_equals_a_conv2d_with_stride_equal_to_the_patch_size():
    torch.manual_seed(0)
    layer = PatchEmbedding(channels=3, patch_size=4, d_model=10)
    conv = nn.Conv2d(3, 10, kernel_size=4, stride=4)
    with torch.no_grad():
        conv.weight.copy_(layer.projection.weight.reshape(10, 3, 4, 4))
        conv.bias.copy_(layer.projection.bias)
    images = torch.randn(2, 3, 16, 12, generator=torch.Generator().manual_seed(1))
    expected = conv(images).flatten(2).transpose(1, 2)  # (batch, patches, d_model)
    torch.testing.assert_close(layer(images), expected, rtol=1e-5, atol=1e-5)
    assert layer(images).shape == (2, 12, 10)


def test_patch_embedding_refuses_the_wrong_number_of_channels():
    with pytest.raises(ValueError, match=r"expected images with 3 channels.*got \(2, 1, 8, 8\)"):
        PatchEmbedding(3, 4, 8)(torch.zeros(2, 1, 8, 8))


def test_patch_embedding_has_one_weight_per_pixel_value_and_output():
    layer = PatchEmbedding(3, 16, 768)
    assert layer.projection.weight.shape == (768, 768)
    assert sum(p.numel() for p in layer.parameters()) == 768 * 768 + 768
    assert "patch_size=16" in repr(layer)
