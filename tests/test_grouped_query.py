"""Specification of grouped-query and multi-query attention: query heads sharing key/value
heads, what that does to the key/value cache, and the cache's bytes per token."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from course_lib.attention import MultiHeadAttention, causal_mask, repeat_kv
from course_lib.cache import KeyValueCache, cache_bytes_per_token

D_MODEL, HEADS = 32, 8
D_HEAD = D_MODEL // HEADS


def attention(kv_heads, seed=0, **options):
    torch.manual_seed(seed)
    return MultiHeadAttention(D_MODEL, HEADS, num_kv_heads=kv_heads, **options).eval()


def sequence(length=6, batch=2, seed=1):
    return torch.randn(batch, length, D_MODEL, generator=torch.Generator().manual_seed(seed))


# ----------------------------------------------------------------------------- repeat_kv


def test_repeat_kv_gives_query_head_m_the_key_value_head_m_over_the_group_size():
    kv = torch.arange(3.0).reshape(1, 3, 1, 1).expand(1, 3, 2, 4)  # head j holds j
    repeated = repeat_kv(kv, 4)
    assert repeated.shape == (1, 12, 2, 4)
    assert repeated[0, :, 0, 0].tolist() == [m // 4 for m in range(12)]


def test_repeat_kv_once_returns_the_keys_themselves():
    kv = torch.randn(2, 4, 3, 5)
    assert repeat_kv(kv, 1) is kv


def test_repeat_kv_refuses_a_tensor_without_a_heads_axis():
    with pytest.raises(ValueError, match="batch, kv_heads, L, d_head"):
        repeat_kv(torch.randn(2, 3, 4), 2)


def torch_has_enable_gqa() -> bool:
    try:
        F.scaled_dot_product_attention(*torch.zeros(3, 1, 2, 1, 1), enable_gqa=True)
    except TypeError:
        return False
    return True


@pytest.mark.skipif(
    not torch_has_enable_gqa(), reason="F.scaled_dot_product_attention takes enable_gqa from 2.5"
)
@pytest.mark.parametrize("kv_heads", [8, 4, 2, 1])
def test_repeated_heads_give_what_torch_computes_with_enable_gqa(kv_heads):
    draw = torch.Generator().manual_seed(0)
    q = torch.randn(2, 8, 5, 4, generator=draw)
    k, v = torch.randn(2, 2, kv_heads, 5, 4, generator=draw)
    mask = causal_mask(5)
    ours = F.scaled_dot_product_attention(
        q, repeat_kv(k, 8 // kv_heads), repeat_kv(v, 8 // kv_heads), attn_mask=mask
    )
    torch_gqa = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    torch.testing.assert_close(ours, torch_gqa)


# ----------------------------------------------------------------------------- the module


def test_as_many_key_value_heads_as_query_heads_is_multi_head_attention():
    grouped, plain = attention(HEADS), attention(None)
    plain.load_state_dict(grouped.state_dict())
    x = sequence()
    torch.testing.assert_close(
        grouped(x, x, x, causal_mask(6))[0], plain(x, x, x, causal_mask(6))[0]
    )
    assert grouped.w_k.out_features == grouped.w_v.out_features == D_MODEL


def test_one_key_value_head_is_multi_query_attention_every_head_reads_the_same_keys():
    mqa = attention(1)
    assert mqa.w_k.out_features == mqa.w_v.out_features == D_HEAD
    x = sequence()
    keys = mqa.repeat_kv(mqa.w_k(x).view(2, 6, 1, D_HEAD).transpose(1, 2))
    assert keys.shape == (2, HEADS, 6, D_HEAD)
    assert all(torch.equal(keys[:, 0], keys[:, m]) for m in range(HEADS))


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_grouped_query_attention_is_multi_head_attention_with_the_groups_keys_copied(kv_heads):
    grouped = attention(kv_heads)
    full = attention(HEADS)
    state = grouped.state_dict()
    for name in ("w_k", "w_v"):  # every key/value head copied for the query heads of its group
        weight = state[f"{name}.weight"].view(kv_heads, D_HEAD, D_MODEL)
        bias = state[f"{name}.bias"].view(kv_heads, D_HEAD)
        times = HEADS // kv_heads
        state[f"{name}.weight"] = weight.repeat_interleave(times, 0).reshape(D_MODEL, D_MODEL)
        state[f"{name}.bias"] = bias.repeat_interleave(times, 0).reshape(D_MODEL)
    full.load_state_dict(state)
    x, mask = sequence(), causal_mask(6)
    torch.testing.assert_close(grouped(x, x, x, mask)[0], full(x, x, x, mask)[0])
    fused = grouped(x, x, x, mask, need_weights=False)[0]  # PyTorch's fused path
    torch.testing.assert_close(fused, full(x, x, x, mask)[0])


@pytest.mark.parametrize("kv_heads", [8, 4, 2, 1])
def test_key_and_value_parameters_shrink_by_the_share_of_key_value_heads(kv_heads):
    count = sum(p.numel() for p in attention(kv_heads).parameters())
    query_and_output = 2 * (D_MODEL * D_MODEL + D_MODEL)
    keys_and_values = 2 * (D_MODEL * kv_heads * D_HEAD + kv_heads * D_HEAD)
    assert count == query_and_output + keys_and_values


# ----------------------------------------------------------------------------- the cache


@pytest.mark.parametrize("kv_heads", [8, 2, 1])
def test_the_cache_holds_the_key_value_heads_not_the_query_heads(kv_heads):
    module, x = attention(kv_heads), sequence(length=5)
    cache = KeyValueCache()
    for t in range(5):
        step = x[:, t : t + 1]
        module.forward_with_cache(step, step, step, cache)
    assert cache.keys.shape == cache.values.shape == (2, kv_heads, 5, D_HEAD)


@pytest.mark.parametrize("kv_heads", [8, 2, 1])
def test_a_cached_grouped_query_attention_step_by_step_equals_the_whole_causal_pass(kv_heads):
    module, x = attention(kv_heads), sequence(length=6)
    full, _ = module(x, x, x, causal_mask(6))
    cache = KeyValueCache()
    steps = [
        module.forward_with_cache(x[:, t : t + 1], x[:, t : t + 1], x[:, t : t + 1], cache)[0]
        for t in range(6)
    ]
    torch.testing.assert_close(torch.cat(steps, dim=1), full)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("kv_heads", [8, 2, 1])
def test_the_bytes_per_token_are_what_real_caches_hold(kv_heads, dtype):
    layers = [attention(kv_heads, seed=n).to(dtype) for n in range(3)]
    caches = [KeyValueCache() for _ in layers]
    x = sequence(length=7, batch=1).to(dtype)
    for layer, cache in zip(layers, caches, strict=True):
        x = layer.forward_with_cache(x, x, x, cache, mask=causal_mask(7))[0]
    held = sum(cache.nbytes for cache in caches)
    assert held == 7 * cache_bytes_per_token(3, kv_heads, D_HEAD, dtype)


def test_an_empty_cache_holds_no_bytes():
    assert KeyValueCache().nbytes == 0


def test_llama_2_70b_needs_320_kib_per_token_an_eighth_of_multi_head_and_8_times_multi_query():
    grouped = cache_bytes_per_token(80, 8, 128, torch.bfloat16)
    assert grouped == 327_680 == 320 * 1024
    assert cache_bytes_per_token(80, 64, 128, torch.bfloat16) == 8 * grouped
    assert cache_bytes_per_token(80, 1, 128, torch.bfloat16) * 8 == grouped
    assert cache_bytes_per_token(80, 8, 128, torch.float32) == 2 * grouped


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((0, 8, 128), ValueError, "num_layers"),
        ((80, 0, 128), ValueError, "num_kv_heads"),
        ((80, 8, -1), ValueError, "d_head"),
        ((80, 8.5, 128), TypeError, "num_kv_heads"),
        ((80, 8, 128, "bfloat16"), TypeError, "torch.dtype"),
    ],
)
def test_a_config_that_makes_no_sense_is_refused(args, error, message):
    with pytest.raises(error, match=message):
        cache_bytes_per_token(*args)
