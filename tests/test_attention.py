"""Specification of course_lib.attention: scaled dot-product attention, masks, multi-head."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.attention import (
    MultiHeadAttention,
    causal_mask,
    merge_heads,
    padding_mask,
    scaled_dot_product_attention,
    split_heads,
)
from course_lib.vocab import pad_batch


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


def test_scale_one_gives_the_unscaled_dot_products():
    q, k, v = random(3, 16), random(4, 16, seed=1), random(4, 2, seed=2)
    _, weights = scaled_dot_product_attention(q, k, v, scale=1.0)
    torch.testing.assert_close(weights, torch.softmax(q @ k.T, dim=-1))


def test_default_scale_is_one_over_the_square_root_of_d_k():
    q, k, v = random(3, 16), random(4, 16, seed=1), random(4, 2, seed=2)
    _, weights = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(weights, torch.softmax(q @ k.T / 4.0, dim=-1))


def test_dropout_is_applied_to_the_weights_that_mix_the_values():
    q, k, v = random(3, 4), random(5, 4, seed=1), random(5, 2, seed=2)
    out, weights = scaled_dot_product_attention(q, k, v, dropout=lambda w: w * 0)
    assert (weights == 0).all() and (out == 0).all()


def test_keys_of_length_zero_raise():
    with pytest.raises(ValueError, match="key must hold at least one position"):
        scaled_dot_product_attention(random(3, 4), random(0, 4), random(0, 2))


def test_mask_with_more_dimensions_than_the_scores_raises():
    q = random(3, 4)
    with pytest.raises(ValueError, match=r"mask of shape \(2, 3, 3\) does not broadcast"):
        scaled_dot_product_attention(q, q, q, torch.ones(2, 3, 3, dtype=torch.bool))


def test_float_mask_error_says_how_to_convert_an_additive_mask():
    q = random(3, 4)
    with pytest.raises(TypeError, match="converts with mask == 0"):
        scaled_dot_product_attention(q, q, q, torch.zeros(3, 3))


def test_gradients_reach_query_key_and_value():
    q, k, v = (random(2, 5, 8, seed=s).requires_grad_() for s in range(3))
    out, _ = scaled_dot_product_attention(q, k, v, causal_mask(5))
    out.square().sum().backward()
    for tensor in (q, k, v):
        assert tensor.grad is not None and torch.isfinite(tensor.grad).all()
        assert tensor.grad.abs().sum() > 0


def test_an_output_gets_no_gradient_from_masked_future_keys_and_values():
    q, k, v = (random(6, 8, seed=s).requires_grad_() for s in range(3))
    out, _ = scaled_dot_product_attention(q, k, v, causal_mask(6))
    out[2].sum().backward()
    assert (k.grad[3:] == 0).all() and (v.grad[3:] == 0).all()
    assert (k.grad[:3] != 0).any() and (v.grad[:3] != 0).all()


def test_changing_a_future_token_leaves_earlier_outputs_unchanged():
    x = random(1, 6, 8)
    changed = x.clone()
    changed[0, 4] = random(8, seed=9)
    out, _ = scaled_dot_product_attention(x, x, x, causal_mask(6))
    out_changed, _ = scaled_dot_product_attention(changed, changed, changed, causal_mask(6))
    torch.testing.assert_close(out_changed[0, :4], out[0, :4], rtol=0, atol=0)
    assert not torch.allclose(out_changed[0, 4:], out[0, 4:])


# ----------------------------------------------------------------------------- masks


def test_causal_mask_allows_each_position_itself_and_the_past():
    expected = torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]], dtype=torch.bool)
    assert torch.equal(causal_mask(3), expected)
    assert causal_mask(3).dtype == torch.bool


def test_causal_mask_is_the_complement_of_pytorchs_square_subsequent_mask():
    torch_mask = torch.nn.Transformer.generate_square_subsequent_mask(7)  # 0 or -inf
    assert torch.equal(causal_mask(7), torch_mask == 0)


def test_causal_mask_with_more_keys_puts_the_queries_at_the_last_positions():
    mask = causal_mask(2, num_keys=5)
    assert torch.equal(mask, causal_mask(5)[3:])


@pytest.mark.parametrize(
    "args, kwargs, error, message",
    [
        ((0,), {}, ValueError, "size must be a positive integer, got 0"),
        ((2.0,), {}, TypeError, "size must be an integer"),
        ((True,), {}, TypeError, "size must be an integer, got the bool"),
        ((3,), {"num_keys": 2}, ValueError, "num_keys must be at least size"),
    ],
)
def test_causal_mask_refuses_bad_sizes(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        causal_mask(*args, **kwargs)


def test_padding_mask_is_true_at_real_tokens_with_an_axis_for_the_queries():
    ids = torch.tensor([[5, 6, 7], [8, 0, 0]])
    mask = padding_mask(ids, pad_id=0)
    assert mask.shape == (2, 1, 3) and mask.dtype == torch.bool
    assert mask[:, 0].tolist() == [[True, True, True], [True, False, False]]


def test_padding_mask_matches_the_mask_of_pad_batch():
    ids, real = pad_batch([[4, 5, 6], [7]])
    assert torch.equal(padding_mask(ids, pad_id=0)[:, 0], real)


def test_padding_and_causal_masks_combine_with_and():
    ids = torch.tensor([[5, 6, 7], [8, 9, 0]])
    both = causal_mask(3) & padding_mask(ids, 0)
    assert both.shape == (2, 3, 3)
    assert both[1].tolist() == [[True, False, False], [True, True, False], [True, True, False]]


@pytest.mark.parametrize(
    "ids, pad_id, error, message",
    [
        (
            torch.tensor([[1.0, 0.0]]),
            0,
            TypeError,
            "integer tensor of token ids, got torch.float32",
        ),
        (torch.tensor([1, 0]), 0, ValueError, r"shape \(batch, L_k\), got \(2,\).*unsqueeze\(0\)"),
        (torch.tensor([[1, 0]]), 0.0, TypeError, "pad_id must be an integer"),
        ([[1, 0]], 0, TypeError, "must be a tensor of token ids, got list"),
    ],
)
def test_padding_mask_refuses_bad_input(ids, pad_id, error, message):
    with pytest.raises(error, match=message):
        padding_mask(ids, pad_id)


def test_padding_keeps_the_outputs_of_real_tokens_as_without_padding():
    x = random(1, 3, 8)
    alone, _ = scaled_dot_product_attention(x, x, x)
    padded = torch.cat([x, random(1, 2, 8, seed=5)], dim=1)  # two padding positions
    ids = torch.tensor([[4, 5, 6, 0, 0]])
    out, weights = scaled_dot_product_attention(padded, padded, padded, padding_mask(ids, 0))
    torch.testing.assert_close(out[:, :3], alone)
    assert (weights[..., 3:] == 0).all()


# ----------------------------------------------------------------------------- heads


def test_split_heads_gives_each_head_a_slice_of_the_features():
    x = random(2, 5, 12)
    heads = split_heads(x, 3)
    assert heads.shape == (2, 3, 5, 4)
    for i in range(3):
        torch.testing.assert_close(heads[:, i], x[..., 4 * i : 4 * (i + 1)])


def test_merge_heads_undoes_split_heads():
    x = random(2, 5, 12)
    torch.testing.assert_close(merge_heads(split_heads(x, 4)), x, rtol=0, atol=0)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: split_heads(random(5, 12), 3), r"expected \(batch, L, d_model\)"),
        (lambda: split_heads(random(2, 5, 12), 5), "d_model=12 is not divisible by num_heads=5"),
        (lambda: split_heads(random(2, 5, 12), 0), "num_heads must be a positive integer"),
        (lambda: merge_heads(random(2, 5, 12)), r"expected \(batch, heads, L, d_head\)"),
    ],
)
def test_split_and_merge_refuse_bad_shapes(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# ----------------------------------------------------------------------------- multi-head


def torch_pair(d_model=16, num_heads=4, **kwargs):
    torch.manual_seed(0)
    reference = nn.MultiheadAttention(d_model, num_heads, batch_first=True, **kwargs).eval()
    return reference, MultiHeadAttention.from_torch(reference)


def assert_same(ours, reference, query, key, value, mask=None, **torch_masks):
    out, weights = ours(query, key, value, mask)
    expected, expected_weights = reference(
        query, key, value, average_attn_weights=False, **torch_masks
    )
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, expected_weights, atol=1e-5, rtol=1e-5)
    return out, weights


def test_multi_head_self_attention_matches_pytorch():
    reference, ours = torch_pair()
    x = torch.randn(3, 7, 16)
    assert_same(ours, reference, x, x, x)


def test_multi_head_cross_attention_matches_pytorch_with_different_lengths():
    reference, ours = torch_pair()
    decoder, encoder = torch.randn(3, 4, 16), torch.randn(3, 9, 16)
    _, weights = assert_same(ours, reference, decoder, encoder, encoder)
    assert weights.shape == (3, 4, 4, 9)


def test_multi_head_attention_with_a_causal_mask_matches_pytorch():
    reference, ours = torch_pair()
    x = torch.randn(2, 6, 16)
    mask = causal_mask(6)
    _, weights = assert_same(ours, reference, x, x, x, mask, attn_mask=~mask)
    assert (weights[..., ~mask] == 0).all()


def test_multi_head_attention_with_a_padding_mask_matches_pytorch_key_padding_mask():
    reference, ours = torch_pair()
    ids = torch.tensor([[5, 6, 7, 8, 9], [5, 6, 7, 0, 0]])
    x = torch.randn(2, 5, 16)
    mask = padding_mask(ids, pad_id=0)
    assert_same(ours, reference, x, x, x, mask, key_padding_mask=ids == 0)


def test_cross_attention_with_a_source_padding_mask_matches_pytorch():
    reference, ours = torch_pair()
    source_ids = torch.tensor([[5, 6, 7, 8], [5, 6, 0, 0]])
    decoder, encoder = torch.randn(2, 3, 16), torch.randn(2, 4, 16)
    mask = padding_mask(source_ids, pad_id=0)
    assert_same(ours, reference, decoder, encoder, encoder, mask, key_padding_mask=~mask[:, 0])


def test_causal_and_padding_masks_together_match_pytorch():
    reference, ours = torch_pair()
    ids = torch.tensor([[5, 6, 7, 8], [5, 6, 7, 0]])
    x = torch.randn(2, 4, 16)
    mask = causal_mask(4) & padding_mask(ids, 0)
    assert_same(
        ours, reference, x, x, x, mask, attn_mask=~causal_mask(4), key_padding_mask=ids == 0
    )


def test_a_mask_per_sequence_and_head_matches_pytorchs_3d_attn_mask():
    reference, ours = torch_pair()
    x = torch.randn(2, 5, 16)
    mask = torch.rand(2, 4, 5, 5, generator=torch.Generator().manual_seed(3)) > 0.4
    mask[..., 0] = True
    assert_same(ours, reference, x, x, x, mask, attn_mask=~mask.reshape(8, 5, 5))


def test_pytorchs_head_average_is_the_mean_of_our_per_head_weights():
    reference, ours = torch_pair()
    x = torch.randn(2, 5, 16)
    _, weights = ours(x, x, x)
    _, averaged = reference(x, x, x)  # average_attn_weights=True by default
    torch.testing.assert_close(weights.mean(dim=1), averaged)


def test_without_biases_and_in_float64_the_outputs_still_match():
    reference, ours = torch_pair(bias=False)
    reference, ours = reference.double(), MultiHeadAttention.from_torch(reference.double())
    assert ours.w_q.bias is None and ours.w_q.weight.dtype == torch.float64
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    assert_same(ours, reference, x, x, x)


def test_the_fused_path_without_weights_gives_the_same_output():
    _, ours = torch_pair()
    x = torch.randn(2, 6, 16)
    for mask in (None, causal_mask(6), padding_mask(torch.tensor([[1, 2, 3, 0, 0, 0]] * 2), 0)):
        explicit, _ = ours(x, x, x, mask)
        fused, weights = ours(x, x, x, mask, need_weights=False)
        assert weights is None
        torch.testing.assert_close(fused, explicit, atol=1e-6, rtol=1e-5)


def test_the_fused_path_also_refuses_a_query_row_without_keys():
    _, ours = torch_pair()
    x = torch.randn(1, 3, 16)
    with pytest.raises(ValueError, match="no allowed key"):
        ours(x, x, x, torch.zeros(3, 3, dtype=torch.bool), need_weights=False)


def test_from_torch_copies_dropout_and_training_mode():
    torch.manual_seed(0)
    reference = nn.MultiheadAttention(16, 4, dropout=0.25, batch_first=True).train()
    ours = MultiHeadAttention.from_torch(reference)
    assert ours.dropout.p == 0.25 and ours.training
    assert not MultiHeadAttention.from_torch(reference.eval()).training


def test_dropout_acts_on_the_weights_in_training_only():
    ours = MultiHeadAttention(16, 4, dropout=0.5)
    x = torch.randn(2, 6, 16)
    ours.eval()
    _, weights = ours(x, x, x)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 6))
    ours.train()
    torch.manual_seed(0)
    _, dropped = ours(x, x, x)
    assert (dropped == 0).float().mean() > 0.3  # about half the weights are dropped
    kept = dropped != 0
    torch.testing.assert_close(dropped[kept], 2 * weights[kept])  # the rest scaled by 1/(1-p)


def test_in_eval_mode_dropout_is_off_on_the_fused_path_too():
    torch.manual_seed(0)
    ours = MultiHeadAttention(16, 4, dropout=0.5).eval()
    x = torch.randn(2, 6, 16)
    explicit, _ = ours(x, x, x)
    fused, _ = ours(x, x, x, need_weights=False)
    torch.testing.assert_close(fused, explicit)


def test_gradients_reach_every_parameter_and_every_input():
    ours = MultiHeadAttention(16, 4)
    decoder = torch.randn(2, 3, 16, requires_grad=True)
    encoder = torch.randn(2, 5, 16, requires_grad=True)
    out, _ = ours(decoder, encoder, encoder)
    out.square().sum().backward()
    for name, parameter in ours.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name
    for tensor in (decoder, encoder):
        assert torch.isfinite(tensor.grad).all() and tensor.grad.abs().sum() > 0


def test_multi_head_self_attention_is_permutation_equivariant():
    ours = MultiHeadAttention(16, 4)
    x = torch.randn(1, 6, 16)
    perm = torch.tensor([2, 5, 0, 1, 4, 3])
    out, _ = ours(x, x, x)
    out_perm, _ = ours(x[:, perm], x[:, perm], x[:, perm])
    torch.testing.assert_close(out_perm, out[:, perm])


@pytest.mark.parametrize("num_heads", [1, 2, 4, 8, 16])
def test_the_number_of_parameters_does_not_depend_on_the_number_of_heads(num_heads):
    ours = MultiHeadAttention(16, num_heads)
    assert sum(p.numel() for p in ours.parameters()) == 4 * 16 * 16 + 4 * 16


def test_each_head_uses_its_own_columns_of_the_projections():
    ours = MultiHeadAttention(12, 3)
    x = torch.randn(2, 4, 12)
    q = ours.split_heads(ours.w_q(x))
    _, weights = ours(x, x, x)
    for i in range(3):
        cols = slice(4 * i, 4 * (i + 1))
        q_i = x @ ours.w_q.weight[cols].T + ours.w_q.bias[cols]
        k_i = x @ ours.w_k.weight[cols].T + ours.w_k.bias[cols]
        torch.testing.assert_close(q[:, i], q_i)
        torch.testing.assert_close(weights[:, i], torch.softmax(q_i @ k_i.mT / 2.0, dim=-1))


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"d_model": 10, "num_heads": 4}, ValueError, "d_model=10 is not divisible by num_heads=4"),
        ({"d_model": 16, "num_heads": 0}, ValueError, "num_heads must be a positive integer"),
        ({"d_model": 16.0, "num_heads": 4}, TypeError, "d_model must be an integer"),
        ({"d_model": 16, "num_heads": 4, "dropout": 1.0}, ValueError, r"probability in \[0, 1\)"),
    ],
)
def test_bad_sizes_are_refused_when_the_module_is_built(kwargs, error, message):
    with pytest.raises(error, match=message):
        MultiHeadAttention(**kwargs)


def test_the_divisibility_error_suggests_head_counts_that_work():
    with pytest.raises(ValueError, match=r"one of \[1, 2, 5, 10\]"):
        MultiHeadAttention(10, 4)


def test_the_divisibility_error_calls_equal_head_widths_a_choice_not_a_rule():
    with pytest.raises(ValueError, match=r"the paper's choice, not a rule of attention"):
        MultiHeadAttention(10, 4)


@pytest.mark.parametrize(
    "shapes, message",
    [
        (((5, 16), (5, 16), (5, 16)), r"query must have shape \(batch, length, d_model=16\), got "
         r"\(5, 16\); add a batch axis"),
        (((2, 5, 8), (2, 5, 8), (2, 5, 8)), r"got \(2, 5, 8\)"),
        (((2, 5, 16), (3, 5, 16), (3, 5, 16)), "same batch size, got 2, 3 and 3"),
        (((2, 5, 16), (2, 5, 16), (2, 4, 16)), "key and value must have the same length L_k"),
    ],
)  # fmt: skip
def test_inputs_of_the_wrong_shape_are_refused(shapes, message):
    ours = MultiHeadAttention(16, 4)
    with pytest.raises(ValueError, match=message):
        ours(*(torch.zeros(shape) for shape in shapes))


@pytest.mark.parametrize(
    "mask, error, message",
    [
        (torch.ones(5, 4, dtype=torch.bool), ValueError,
         r"a 2-D mask must have shape \(L_q, L_k\) = \(5, 5\).*got \(5, 4\)"),
        (torch.ones(2, 5, dtype=torch.bool), ValueError,
         r"key padding mask of shape \(batch, L_k\) use mask\[:, None, :\]"),
        (torch.ones(3, 5, 5, dtype=torch.bool), ValueError,
         r"3-D mask must have shape \(batch, L_q, L_k\) = \(2, 5, 5\)"),
        (torch.ones(2, 3, 5, 5, dtype=torch.bool), ValueError,
         r"\(batch, num_heads, L_q, L_k\) = \(2, 4, 5, 5\)"),
        (torch.ones(5, dtype=torch.bool), ValueError, "mask must have 2, 3 or 4 dimensions"),
        (torch.ones(5, 5), TypeError, "mask must be a bool tensor"),
        (torch.zeros(5, 5, dtype=torch.bool), ValueError, "5 query row"),
    ],
)  # fmt: skip
def test_masks_of_the_wrong_shape_or_kind_are_refused(mask, error, message):
    ours = MultiHeadAttention(16, 4)
    x = torch.zeros(2, 5, 16)
    with pytest.raises(error, match=message):
        ours(x, x, x, mask)


def test_from_torch_refuses_other_modules_and_options_it_cannot_copy():
    with pytest.raises(TypeError, match=r"expected a torch\.nn\.MultiheadAttention, got Linear"):
        MultiHeadAttention.from_torch(nn.Linear(4, 4))
    with pytest.raises(ValueError, match="kdim = vdim = embed_dim"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(16, 4, kdim=8, vdim=8))
    with pytest.raises(ValueError, match="add_bias_kv=True"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(16, 4, add_bias_kv=True))


def test_from_torch_gives_the_same_module_for_a_sequence_first_module():
    torch.manual_seed(0)
    reference = nn.MultiheadAttention(16, 4).eval()  # batch_first=False: (L, batch, d_model)
    ours = MultiHeadAttention.from_torch(reference)
    x = torch.randn(2, 5, 16)
    expected, _ = reference(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1))
    torch.testing.assert_close(ours(x, x, x)[0], expected.transpose(0, 1), atol=1e-5, rtol=1e-5)
