"""Specification of course_lib.positional: sinusoidal positional encoding."""

import math

import numpy as np
import pytest
import torch

from course_lib.positional import (
    PositionalEncoding,
    angular_frequencies,
    offset_rotation,
    sinusoidal_positional_encoding,
)


def reference_entry(pos: int, j: int, d_model: int, base: float = 10000.0) -> float:
    """PE[pos, j] straight from the paper's formula, one scalar at a time, in float64."""
    i = j // 2
    angle = pos / base ** (2 * i / d_model)
    return math.sin(angle) if j % 2 == 0 else math.cos(angle)


# --- known values ---------------------------------------------------------------------------


def test_worked_example_d4_pos2_matches_hand_computed_values():
    pe = sinusoidal_positional_encoding(3, 4)
    expected = torch.tensor([0.909297, -0.416147, 0.019999, 0.999800])
    torch.testing.assert_close(pe[2], expected, atol=1e-6, rtol=0)


def test_worked_example_last_entry_is_cos_of_0_02_not_cos_of_2():
    pe = sinusoidal_positional_encoding(3, 4, dtype=torch.float64)
    assert pe[2, 3].item() == pytest.approx(math.cos(0.02), abs=1e-12)
    assert pe[2, 3].item() != pytest.approx(math.cos(2.0), abs=0.1)


def test_position_zero_is_alternating_zeros_and_ones():
    pe = sinusoidal_positional_encoding(1, 8)
    assert pe[0].tolist() == [0.0, 1.0] * 4


@pytest.mark.parametrize("d_model", [2, 6, 16])
@pytest.mark.parametrize("base", [10000.0, 100.0])
def test_every_entry_matches_the_scalar_formula(d_model, base):
    pe = sinusoidal_positional_encoding(50, d_model, base, dtype=torch.float64)
    expected = torch.tensor(
        [[reference_entry(p, j, d_model, base) for j in range(d_model)] for p in range(50)],
        dtype=torch.float64,
    )
    torch.testing.assert_close(pe, expected, atol=1e-12, rtol=0)


def test_float32_table_is_accurate_at_large_positions():
    pe = sinusoidal_positional_encoding(20_001, 8)
    expected = torch.tensor([reference_entry(20_000, j, 8) for j in range(8)])
    torch.testing.assert_close(pe[20_000], expected, atol=1e-6, rtol=0)


def test_frequencies_start_at_one_and_fall_geometrically():
    omega = angular_frequencies(8)
    torch.testing.assert_close(
        omega, torch.tensor([1.0, 10000**-0.25, 10000**-0.5, 10000**-0.75], dtype=torch.float64)
    )
    ratios = omega[1:] / omega[:-1]
    torch.testing.assert_close(ratios, torch.full((3,), 10000 ** (-2 / 8), dtype=torch.float64))


# --- shape, dtype, device -------------------------------------------------------------------


def test_table_shape_and_default_dtype():
    pe = sinusoidal_positional_encoding(7, 12)
    assert pe.shape == (7, 12)
    assert pe.dtype == torch.float32


def test_dtype_argument_is_honoured():
    assert sinusoidal_positional_encoding(3, 4, dtype=torch.float64).dtype == torch.float64


def test_numpy_integers_are_accepted_as_sizes():
    assert sinusoidal_positional_encoding(np.int64(5), np.int32(4)).shape == (5, 4)


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize("d_model", [1, 3, 7, 513])
def test_odd_d_model_raises_value_error_naming_the_size(d_model):
    with pytest.raises(ValueError, match=rf"d_model must be even.*got {d_model}"):
        sinusoidal_positional_encoding(10, d_model)


@pytest.mark.parametrize("bad", [0, -4])
def test_non_positive_d_model_raises_value_error(bad):
    with pytest.raises(ValueError, match=rf"d_model must be a positive integer, got {bad}"):
        sinusoidal_positional_encoding(10, bad)


@pytest.mark.parametrize("bad", [0, -1])
def test_non_positive_max_len_raises_value_error(bad):
    with pytest.raises(ValueError, match=rf"max_len must be a positive integer, got {bad}"):
        sinusoidal_positional_encoding(bad, 8)


@pytest.mark.parametrize("bad", [4.0, "4", None, True])
def test_non_integer_sizes_raise_type_error(bad):
    with pytest.raises(TypeError, match="d_model must be an integer"):
        sinusoidal_positional_encoding(10, bad)


@pytest.mark.parametrize("bad", [1.0, 0.5, -10.0, float("inf"), float("nan")])
def test_base_must_be_a_finite_number_above_one(bad):
    with pytest.raises(ValueError, match="base must be a finite number greater than 1"):
        sinusoidal_positional_encoding(10, 8, base=bad)


# --- properties -----------------------------------------------------------------------------


def test_values_are_bounded_by_one():
    pe = sinusoidal_positional_encoding(10_000, 64)
    assert pe.abs().max().item() <= 1.0


def test_every_row_has_the_same_norm_sqrt_of_half_d_model():
    pe = sinusoidal_positional_encoding(1000, 32, dtype=torch.float64)
    torch.testing.assert_close(pe.norm(dim=1), torch.full((1000,), 4.0, dtype=torch.float64))


def test_rows_are_distinct_for_ten_thousand_positions():
    pe = sinusoidal_positional_encoding(10_000, 64, dtype=torch.float64)
    smallest = math.inf
    for start in range(0, 10_000, 2_500):
        block = torch.cdist(pe[start : start + 2_500], pe)
        rows = torch.arange(block.size(0))
        block[rows, rows + start] = math.inf  # a row's distance to itself
        smallest = min(smallest, block.min().item())
    assert smallest > 0.5


def test_distance_between_positions_depends_only_on_their_offset():
    pe = sinusoidal_positional_encoding(500, 16, dtype=torch.float64)
    for k in (1, 7, 100):
        distances = (pe[k:] - pe[:-k]).norm(dim=1)
        torch.testing.assert_close(distances, distances[:1].expand_as(distances))


@pytest.mark.parametrize("offset", [1, 3, 25, 400])
def test_shift_by_offset_is_one_fixed_linear_map_for_every_position(offset):
    pe = sinusoidal_positional_encoding(1000 + offset, 32, dtype=torch.float64)
    m = offset_rotation(offset, 32)
    torch.testing.assert_close(pe[offset:], pe[:-offset] @ m, atol=1e-10, rtol=0)


def test_negative_offset_moves_backwards():
    pe = sinusoidal_positional_encoding(60, 8, dtype=torch.float64)
    torch.testing.assert_close(pe[:50], pe[10:] @ offset_rotation(-10, 8), atol=1e-12, rtol=0)


def test_offset_map_is_orthogonal_and_composes():
    m3, m4, m7 = (offset_rotation(k, 16) for k in (3, 4, 7))
    torch.testing.assert_close(m3 @ m3.T, torch.eye(16, dtype=torch.float64))
    torch.testing.assert_close(m3 @ m4, m7)


def test_offset_map_is_block_diagonal_with_two_by_two_blocks():
    m = offset_rotation(5, 8)
    block_mask = torch.block_diag(*[torch.ones(2, 2)] * 4).bool()
    assert torch.count_nonzero(m[~block_mask]) == 0


def test_offset_must_be_an_integer():
    with pytest.raises(TypeError, match="offset must be an integer"):
        offset_rotation(1.5, 8)


# --- the module -----------------------------------------------------------------------------


def test_module_adds_the_table_to_every_sequence_of_the_batch():
    layer = PositionalEncoding(d_model=8, max_len=20)
    x = torch.randn(3, 5, 8, generator=torch.Generator().manual_seed(0))
    expected = x + sinusoidal_positional_encoding(5, 8)
    torch.testing.assert_close(layer(x), expected)


def test_module_start_shifts_the_positions():
    layer = PositionalEncoding(d_model=8, max_len=20)
    x = torch.zeros(1, 2, 8)
    torch.testing.assert_close(layer(x, start=6)[0], sinusoidal_positional_encoding(8, 8)[6:8])


def test_module_output_keeps_shape_and_dtype():
    layer = PositionalEncoding(d_model=8, max_len=20).double()
    out = layer(torch.zeros(2, 4, 8, dtype=torch.float64))
    assert out.shape == (2, 4, 8) and out.dtype == torch.float64


def test_module_table_is_a_buffer_not_a_parameter_nor_saved_state():
    layer = PositionalEncoding(d_model=8, max_len=20)
    assert list(layer.parameters()) == []
    assert "pe" in dict(layer.named_buffers())
    assert layer.state_dict() == {}


def test_module_dropout_is_off_in_eval_mode_and_on_in_train_mode():
    layer = PositionalEncoding(d_model=8, max_len=20, dropout=0.5)
    x = torch.ones(4, 10, 8)
    layer.eval()
    torch.testing.assert_close(layer(x), x + sinusoidal_positional_encoding(10, 8))
    layer.train()
    torch.manual_seed(0)
    assert (layer(x) == 0).any()


def test_sequence_longer_than_max_len_raises_with_the_needed_size():
    layer = PositionalEncoding(d_model=8, max_len=10)
    with pytest.raises(ValueError, match=r"max_len=10; create it with max_len >= 11"):
        layer(torch.zeros(1, 11, 8))


def test_start_plus_length_beyond_max_len_raises():
    layer = PositionalEncoding(d_model=8, max_len=10)
    with pytest.raises(ValueError, match=r"positions 8..11 are needed"):
        layer(torch.zeros(1, 4, 8), start=8)


@pytest.mark.parametrize("shape", [(5, 8), (2, 5, 6), (1, 2, 5, 8)])
def test_wrong_input_shape_raises_with_expected_and_given_shapes(shape):
    layer = PositionalEncoding(d_model=8, max_len=10)
    with pytest.raises(ValueError, match=r"expected embeddings of shape \(batch, seq, d_model=8\)"):
        layer(torch.zeros(shape))


def test_module_rejects_odd_d_model():
    with pytest.raises(ValueError, match="d_model must be even"):
        PositionalEncoding(d_model=5)


@pytest.mark.parametrize("bad", [-0.1, 1.0, 2])
def test_module_rejects_dropout_outside_zero_one(bad):
    with pytest.raises(ValueError, match="dropout must be a probability"):
        PositionalEncoding(d_model=4, dropout=bad)


def test_module_repr_names_its_sizes():
    assert "d_model=8, max_len=10, base=10000" in repr(PositionalEncoding(8, max_len=10))


def test_a_module_moved_to_float64_holds_the_float64_table_not_a_cast_float32_one():
    module = PositionalEncoding(16, max_len=2000).double()
    exact = sinusoidal_positional_encoding(2000, 16, dtype=torch.float64)
    assert module.pe.dtype == torch.float64
    torch.testing.assert_close(module.pe, exact, rtol=0, atol=0)
    x = torch.zeros(1, 2000, 16, dtype=torch.float64)
    torch.testing.assert_close(module(x)[0], exact, rtol=0, atol=0)
