"""Specification of rotary positions (course_lib.rotary) and of the rotary path of
MultiHeadAttention: every pair of features turns by its position's angle, so that scores
depend on the offset of two positions only."""

from __future__ import annotations

import math

import pytest
import torch

from course_lib.attention import (
    MultiHeadAttention,
    causal_mask,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
from course_lib.cache import KeyValueCache
from course_lib.families import DecoderOnlyModel
from course_lib.huggingface import rotary_row_order
from course_lib.positional import angular_frequencies, offset_rotation
from course_lib.rotary import rotary_cos_sin, rotate, rotation_matrix


def random(*shape: int, dtype: torch.dtype = torch.float64, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# ----------------------------------------------------------------------------- the rotation


def test_rotate_equals_each_row_times_the_rotation_matrix_of_its_position():
    x = random(2, 3, 40, 16)  # (batch, heads, L, d_head)
    turned = rotate(x)
    for m in range(40):
        assert torch.allclose(turned[:, :, m], x[:, :, m] @ rotation_matrix(m, 16))


def test_given_positions_are_used_instead_of_zero_to_length_minus_one():
    x = random(5, 8)
    positions = torch.tensor([7, 0, 300, 12, 5])
    turned = rotate(x, positions)
    for row, m in enumerate(positions.tolist()):
        assert torch.allclose(turned[row], x[row] @ rotation_matrix(m, 8))


def test_pair_i_holds_features_2i_and_2i_plus_1_and_turns_counter_clockwise():
    x = torch.tensor([[1.0, 0.0, 0.0, 1.0]], dtype=torch.float64)
    turned = rotate(x, torch.tensor([2]))[0]
    # pair 0 turns by 2 * 1, pair 1 by 2 * 10000^(-2/4) = 0.02 radians
    expected = [math.cos(2), math.sin(2), -math.sin(0.02), math.cos(0.02)]
    assert torch.allclose(turned, torch.tensor(expected, dtype=torch.float64))


def test_the_base_sets_the_frequencies():
    x = torch.tensor([[0.0, 0.0, 1.0, 0.0]], dtype=torch.float64)
    turned = rotate(x, torch.tensor([3]), base=100.0)[0]
    angle = 3 * 100.0 ** (-2 / 4)
    assert torch.allclose(turned[2:], torch.tensor([math.cos(angle), math.sin(angle)]).double())


def test_position_zero_leaves_a_vector_unchanged():
    x = random(1, 32)
    assert torch.equal(rotate(x, torch.tensor([0])), x)


def test_rotation_matrix_is_the_offset_rotation_of_the_positional_chapter_turned_back():
    for m in (-5, 0, 1, 9, 1000):
        assert torch.equal(rotation_matrix(m, 12), offset_rotation(-m, 12))
        assert torch.allclose(rotation_matrix(m, 12), offset_rotation(m, 12).T)


def test_rotations_compose_and_their_transposes_turn_back():
    for m in range(0, 50, 7):
        for n in range(0, 50, 3):
            product = rotation_matrix(m, 8) @ rotation_matrix(n, 8).T
            assert torch.allclose(product, rotation_matrix(m - n, 8), atol=1e-12)


def test_the_score_of_a_turned_query_and_key_depends_on_the_offset_only():
    q, k = random(2, 16)
    length = 40
    scores = rotate(q.expand(length, 16)) @ rotate(k.expand(length, 16)).T  # (m, n)
    for offset in range(-length + 1, length):
        diagonal = scores.diagonal(offset)
        assert torch.allclose(diagonal, diagonal[:1].expand_as(diagonal), atol=1e-12)
        expected = q @ rotation_matrix(-offset, 16) @ k  # q R_{m-n} k^T with m - n = -offset
        assert torch.allclose(diagonal[0], expected)


def test_added_sinusoidal_encodings_do_not_give_scores_that_depend_on_the_offset_only():
    from course_lib.positional import sinusoidal_positional_encoding

    q, k = random(2, 16)
    pe = sinusoidal_positional_encoding(20, 16, dtype=torch.float64)
    scores = (q + pe) @ (k + pe).T
    assert (scores.diagonal(0).max() - scores.diagonal(0).min()) > 0.1


def test_rotation_keeps_the_length_of_every_vector_at_any_position():
    x = random(100, 64)
    positions = torch.randint(0, 100_000, (100,), generator=torch.Generator().manual_seed(1))
    assert torch.allclose(rotate(x, positions).norm(dim=-1), x.norm(dim=-1))


def test_attention_weights_do_not_change_when_the_whole_sequence_moves_along():
    q, k, v = random(3, 1, 2, 10, 32)
    near = torch.arange(10)
    _, weights = scaled_dot_product_attention(rotate(q, near), rotate(k, near), v)
    _, moved = scaled_dot_product_attention(rotate(q, near + 5000), rotate(k, near + 5000), v)
    assert torch.allclose(weights, moved, atol=1e-10)


# ----------------------------------------------------------------------------- cos and sin


def test_rotary_cos_sin_gives_the_cosine_and_sine_of_every_position_and_pair():
    positions = torch.tensor([0, 1, 5, 40])
    cos, sin = rotary_cos_sin(positions, 6, dtype=torch.float64)
    assert cos.shape == sin.shape == (4, 3)
    angle = positions[:, None].double() * angular_frequencies(6)[None, :]
    assert torch.allclose(cos, torch.cos(angle)) and torch.allclose(sin, torch.sin(angle))


def test_rotary_cos_sin_keeps_float32_accuracy_at_large_positions():
    positions = torch.tensor([123_457])
    cos, _ = rotary_cos_sin(positions, 8)  # float32 result of float64 angles
    exact = math.cos(123_457.0)
    assert cos.dtype == torch.float32
    assert abs(cos[0, 0].item() - exact) < 1e-6


# ----------------------------------------------------------------------------- dtypes, devices


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_rotate_keeps_the_dtype_and_is_accurate_to_it(dtype):
    x = random(4, 10, 16)
    turned = rotate(x.to(dtype))
    assert turned.dtype == dtype
    tolerance = {torch.float16: 5e-3, torch.bfloat16: 5e-2}.get(dtype, 1e-5)
    assert torch.allclose(turned.double(), rotate(x), atol=tolerance * 8)


def test_rotate_on_the_meta_device_keeps_shape_and_device():
    x = torch.empty(2, 4, 7, 16, device="meta")
    turned = rotate(x, torch.arange(3, 10, device="meta"))
    assert turned.device.type == "meta" and turned.shape == x.shape


def test_rotary_cos_sin_follows_the_device_and_dtype_asked_for():
    cos, sin = rotary_cos_sin(torch.arange(5, device="meta"), 8, dtype=torch.bfloat16)
    assert cos.device.type == sin.device.type == "meta"
    assert cos.dtype == sin.dtype == torch.bfloat16 and cos.shape == (5, 4)


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "x, positions, error, message",
    [
        (random(5, 7), None, ValueError, "d even"),
        (random(8), None, ValueError, "shape (..., L, d)"),
        (torch.zeros(5, 8, dtype=torch.long), None, TypeError, "floating-point"),
        (random(5, 8), torch.arange(5.0), ValueError, "1-D integer tensor"),
        (random(5, 8), torch.ones(5, dtype=torch.bool), ValueError, "1-D integer tensor"),
        (random(5, 8), torch.arange(4), ValueError, "positions must be a (5,) integer tensor"),
        (random(5, 8), torch.arange(10).view(5, 2), ValueError, "got (5, 2)"),
        (random(5, 8), [0, 1, 2, 3, 4], ValueError, "one per vector, got list"),
        ("not a tensor", None, TypeError, "x must be"),
    ],
)
def test_rotate_refuses_bad_input_with_a_message_that_names_it(x, positions, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        rotate(x, positions)


def test_rotate_refuses_a_base_not_above_one():
    with pytest.raises(ValueError, match="base must be a finite number greater than 1"):
        rotate(random(3, 4), base=1.0)


@pytest.mark.parametrize(
    "position, d, error, message",
    [
        (1.5, 4, TypeError, "position must be an integer"),
        (1, 5, ValueError, "d must be even"),
        (1, 0, ValueError, "d must be a positive integer"),
    ],
)
def test_rotation_matrix_refuses_bad_input(position, d, error, message):
    with pytest.raises(error, match=message):
        rotation_matrix(position, d)


def test_rotary_cos_sin_refuses_float_positions_and_odd_sizes():
    with pytest.raises(ValueError, match="integer tensor"):
        rotary_cos_sin(torch.tensor([0.5]), 4)
    with pytest.raises(ValueError, match="d must be even"):
        rotary_cos_sin(torch.arange(3), 3)


# ----------------------------------------------------------------------------- in attention


def rotary_attention(**options) -> MultiHeadAttention:
    torch.manual_seed(0)
    return MultiHeadAttention(32, 4, rotary_base=10000.0, **options).eval()


def test_rotary_attention_turns_queries_and_keys_after_the_projections_and_not_values():
    attention = rotary_attention()
    x = torch.randn(2, 6, 32)
    mask = causal_mask(6)
    output, weights = attention(x, x, x, mask, need_weights=True)
    q = rotate(split_heads(attention.w_q(x), 4))
    k = rotate(split_heads(attention.w_k(x), 4))
    v = split_heads(attention.w_v(x), 4)
    heads, by_hand = scaled_dot_product_attention(q, k, v, mask)
    assert torch.allclose(weights, by_hand, atol=1e-6)
    assert torch.allclose(output, attention.w_o(merge_heads(heads)), atol=1e-6)


def test_rotary_attention_differs_from_the_same_weights_without_rotation():
    attention = rotary_attention()
    plain = MultiHeadAttention(32, 4).eval()
    plain.load_state_dict(attention.state_dict())
    x = torch.randn(1, 5, 32)
    assert not torch.allclose(attention(x, x, x)[0], plain(x, x, x)[0], atol=1e-3)


def test_rotary_attention_needs_an_even_head_size_and_shows_its_base():
    with pytest.raises(ValueError, match="d_head must be even"):
        MultiHeadAttention(12, 4, rotary_base=10000.0)  # d_head = 3
    assert "rotary_base=10000" in repr(rotary_attention())


@pytest.mark.parametrize("num_kv_heads", [None, 2, 1])
def test_cached_steps_with_rotary_positions_equal_one_causal_pass(num_kv_heads):
    attention = rotary_attention(num_kv_heads=num_kv_heads)
    x = torch.randn(2, 9, 32)
    full, _ = attention(x, x, x, causal_mask(9))
    cache = KeyValueCache()
    prompt = x[:, :3]
    steps = [attention.forward_with_cache(prompt, prompt, prompt, cache, causal_mask(3))[0]]
    for t in range(3, 9):
        token = x[:, t : t + 1]
        steps.append(attention.forward_with_cache(token, token, token, cache)[0])
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-5)


def test_the_cache_stores_the_keys_already_turned_by_their_positions():
    attention = rotary_attention()
    x = torch.randn(1, 4, 32)
    cache = KeyValueCache()
    for t in range(4):
        token = x[:, t : t + 1]
        attention.forward_with_cache(token, token, token, cache)
    assert torch.allclose(cache.keys, rotate(split_heads(attention.w_k(x), 4)), atol=1e-6)


def test_a_static_cache_with_rotary_positions_is_refused():
    attention = rotary_attention()
    query, memory = torch.randn(1, 2, 32), torch.randn(1, 5, 32)
    with pytest.raises(ValueError, match="static cache holds cross-attention keys"):
        attention.forward_with_cache(query, memory, memory, KeyValueCache(static=True))


def test_a_rotary_decoder_only_model_adds_no_positions_and_rotates_in_every_layer():
    torch.manual_seed(0)
    model = DecoderOnlyModel(20, 32, 4, 3, positions="rotary", rope_base=500_000.0).eval()
    entering = model.embed(torch.tensor([[5, 7, 5]]))
    assert torch.equal(entering[0, 0], entering[0, 2])
    assert [layer.self_attention.rotary_base for layer in model.encoder.layers] == [500_000.0] * 3


# ----------------------------------------------------------------------------- rotate_half


def test_hugging_faces_rotate_half_pairing_is_the_same_rotation_after_reordering_features():
    d = 8
    x = random(10, d)  # features in Hugging Face's order
    positions = torch.arange(10)
    cos, sin = rotary_cos_sin(positions, d, dtype=torch.float64)
    cos, sin = torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)
    rotate_half = torch.cat((-x[:, d // 2 :], x[:, : d // 2]), dim=-1)
    theirs = x * cos + rotate_half * sin
    order = rotary_row_order(d)
    assert torch.allclose(theirs[:, order], rotate(x[:, order], positions))


def test_rotary_attention_refuses_keys_of_another_sequence():
    attention = rotary_attention()
    x, memory = torch.randn(1, 4, 32), torch.randn(1, 6, 32)
    with pytest.raises(ValueError, match="query and key must be the same tensor"):
        attention(x, memory, memory)
    with pytest.raises(ValueError, match="query and key must be the same tensor"):
        attention.forward_with_cache(x, memory, memory, KeyValueCache())
