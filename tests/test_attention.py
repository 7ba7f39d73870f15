"""Specification of course_lib.attention.scaled_dot_product_attention."""

import math

import pytest
import torch
import torch.nn.functional as F

from course_lib.attention import scaled_dot_product_attention


def random(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_matches_torch_without_mask():
    q, k, v = random(2, 3, 5, 8, seed=1), random(2, 3, 7, 8, seed=2), random(2, 3, 7, 4, seed=3)
    out, _ = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))


def test_matches_torch_with_a_boolean_mask():
    q, k, v = random(2, 5, 8, seed=1), random(2, 7, 8, seed=2), random(2, 7, 4, seed=3)
    mask = random(5, 7, seed=4) > 0
    mask[:, 0] = True  # every query keeps at least one key
    out, _ = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def test_hand_computed_two_token_example():
    q = torch.tensor([[1.0, 0.0]])
    k = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    v = torch.tensor([[10.0], [20.0]])
    out, weights = scaled_dot_product_attention(q, k, v)
    w0 = math.exp(1 / math.sqrt(2)) / (math.exp(1 / math.sqrt(2)) + 1)
    torch.testing.assert_close(weights, torch.tensor([[w0, 1 - w0]]))
    torch.testing.assert_close(out, torch.tensor([[10 * w0 + 20 * (1 - w0)]]))


def test_weights_rows_sum_to_one_and_masked_entries_are_zero():
    q, k, v = random(4, 8), random(6, 8, seed=1), random(6, 3, seed=2)
    mask = torch.ones(4, 6, dtype=torch.bool).tril()
    _, weights = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(weights.sum(-1), torch.ones(4, dtype=torch.float64))
    assert (weights[~mask] == 0).all()


def test_self_attention_without_positions_is_permutation_equivariant():
    x = random(1, 6, 8)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    out, _ = scaled_dot_product_attention(x, x, x)
    out_perm, _ = scaled_dot_product_attention(x[:, perm], x[:, perm], x[:, perm])
    torch.testing.assert_close(out_perm, out[:, perm])


def test_query_row_with_no_allowed_key_raises():
    q, k, v = random(3, 4), random(5, 4), random(5, 2)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1] = False
    with pytest.raises(ValueError, match=r"1 query row\(s\) have no allowed key .*index \(1,\)"):
        scaled_dot_product_attention(q, k, v, mask)


def test_non_boolean_mask_raises_type_error():
    q = random(3, 4)
    with pytest.raises(TypeError, match="mask must be a bool tensor"):
        scaled_dot_product_attention(q, q, q, torch.ones(3, 3))


def test_mask_that_does_not_broadcast_raises():
    q = random(3, 4)
    with pytest.raises(ValueError, match=r"mask of shape \(2, 3\) does not broadcast"):
        scaled_dot_product_attention(q, q, q, torch.ones(2, 3, dtype=torch.bool))


def test_mismatched_feature_sizes_raise():
    with pytest.raises(ValueError, match="query and key must share their last size d_k"):
        scaled_dot_product_attention(random(3, 4), random(3, 5), random(3, 5))


def test_mismatched_key_and_value_lengths_raise():
    with pytest.raises(ValueError, match="key and value must have the same length L_k"):
        scaled_dot_product_attention(random(3, 4), random(3, 4), random(2, 4))


def test_one_dimensional_inputs_raise():
    with pytest.raises(ValueError, match="query must have at least 2 dimensions"):
        scaled_dot_product_attention(torch.ones(4), torch.ones(3, 4), torch.ones(3, 4))
