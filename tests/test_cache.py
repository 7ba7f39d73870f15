"""Specification of the key/value cache: incremental decoding computes what recomputing the
whole prefix computes."""

from __future__ import annotations

import pytest
import torch

from course_lib.attention import MultiHeadAttention, causal_mask
from course_lib.cache import DecoderCache, KeyValueCache
from course_lib.decoder import Decoder, DecoderLayer
from course_lib.transformer import Transformer

D_MODEL, HEADS = 16, 4


def test_update_appends_the_new_positions_after_the_stored_ones():
    cache = KeyValueCache()
    first = torch.randn(2, HEADS, 3, 4), torch.randn(2, HEADS, 3, 4)
    keys, values = cache.update(*first)
    assert cache.length == 3 and torch.equal(keys, first[0])
    new = torch.randn(2, HEADS, 1, 4), torch.randn(2, HEADS, 1, 4)
    keys, values = cache.update(*new)
    assert cache.length == 4 and keys.shape == (2, HEADS, 4, 4)
    assert torch.equal(keys[:, :, :3], first[0]) and torch.equal(keys[:, :, 3:], new[0])
    assert torch.equal(values[:, :, 3:], new[1]) and torch.equal(cache.values, values)


def test_a_static_cache_is_set_once_and_cannot_grow():
    cache = KeyValueCache(static=True)
    cache.update(torch.zeros(1, 2, 5, 4), torch.zeros(1, 2, 5, 4))
    with pytest.raises(ValueError, match="static cache is set once"):
        cache.update(torch.zeros(1, 2, 1, 4), torch.zeros(1, 2, 1, 4))


@pytest.mark.parametrize(
    ("keys", "values", "message"),
    [
        (torch.zeros(2, 2, 1, 4), torch.zeros(2, 2, 1, 3), "the same shape"),
        (torch.zeros(2, 2, 4), torch.zeros(2, 2, 4), "the same shape"),
        (torch.zeros(3, 2, 1, 4), torch.zeros(3, 2, 1, 4), "do not fit"),
        (torch.zeros(2, 4, 1, 4), torch.zeros(2, 4, 1, 4), "do not fit"),
    ],
)
def test_keys_that_do_not_fit_the_cache_are_refused(keys, values, message):
    cache = KeyValueCache()
    cache.update(torch.zeros(2, 2, 3, 4), torch.zeros(2, 2, 3, 4))
    with pytest.raises(ValueError, match=message):
        cache.update(keys, values)


def test_reorder_keeps_the_chosen_sequences_in_order():
    cache = DecoderCache(2)
    keys = torch.arange(3.0).reshape(3, 1, 1, 1).expand(3, 2, 2, 4)
    for layer in cache.layers:
        layer.self_attention.update(keys, keys)
        layer.cross_attention.update(keys, keys)
    cache.ids = torch.tensor([[1, 5], [1, 6], [1, 7]])
    cache.reorder(torch.tensor([2, 2, 0]))
    assert cache.ids.tolist() == [[1, 7], [1, 7], [1, 5]]
    for layer in cache.layers:
        assert layer.self_attention.keys[:, 0, 0, 0].tolist() == [2.0, 2.0, 0.0]
        assert layer.cross_attention.values[:, 0, 0, 0].tolist() == [2.0, 2.0, 0.0]


def test_attention_with_a_cache_step_by_step_equals_causal_attention_over_the_whole_sequence():
    torch.manual_seed(0)
    attention = MultiHeadAttention(D_MODEL, HEADS).eval()
    x = torch.randn(2, 6, D_MODEL)
    full, _ = attention(x, x, x, causal_mask(6))
    cache = KeyValueCache()
    steps = [attention.forward_with_cache(x[:, t : t + 1], x[:, t : t + 1], x[:, t : t + 1],
                                          cache)[0] for t in range(6)]  # fmt: skip
    torch.testing.assert_close(torch.cat(steps, dim=1), full)
    assert cache.length == 6


def test_attention_with_a_cache_accepts_several_new_positions_with_a_shifted_causal_mask():
    torch.manual_seed(0)
    attention = MultiHeadAttention(D_MODEL, HEADS).eval()
    x = torch.randn(1, 5, D_MODEL)
    full, _ = attention(x, x, x, causal_mask(5))
    cache = KeyValueCache()
    first, _ = attention.forward_with_cache(x[:, :2], x[:, :2], x[:, :2], cache, causal_mask(2))
    rest, weights = attention.forward_with_cache(
        x[:, 2:], x[:, 2:], x[:, 2:], cache, causal_mask(3, num_keys=5), need_weights=True
    )
    torch.testing.assert_close(torch.cat([first, rest], 1), full)
    assert weights.shape == (1, HEADS, 3, 5) and (weights[0, :, 0, 3:] == 0).all()


def test_a_static_cache_projects_the_memory_once():
    torch.manual_seed(0)
    attention = MultiHeadAttention(D_MODEL, HEADS).eval()
    memory, queries = torch.randn(2, 7, D_MODEL), torch.randn(2, 3, D_MODEL)
    expected, _ = attention(queries, memory, memory)
    cache = KeyValueCache(static=True)
    calls = []
    attention.w_k.register_forward_hook(lambda *args: calls.append(1))
    outputs = [attention.forward_with_cache(queries[:, t : t + 1], memory, memory, cache)[0]
               for t in range(3)]  # fmt: skip
    torch.testing.assert_close(torch.cat(outputs, 1), expected)
    assert len(calls) == 1 and cache.length == 7


def test_a_cache_of_another_batch_is_refused():
    attention = MultiHeadAttention(D_MODEL, HEADS)
    cache = KeyValueCache(static=True)
    memory = torch.randn(2, 4, D_MODEL)
    attention.forward_with_cache(torch.randn(2, 1, D_MODEL), memory, memory, cache)
    with pytest.raises(ValueError, match="cache holds 2 sequences, the query 3"):
        attention.forward_with_cache(torch.randn(3, 1, D_MODEL), memory[:1].expand(3, -1, -1),
                                     memory[:1].expand(3, -1, -1), cache)  # fmt: skip


@pytest.mark.parametrize("norm_first", [False, True])
def test_a_decoder_layer_with_a_cache_gives_what_it_gives_on_the_whole_prefix(norm_first):
    torch.manual_seed(0)
    decoder = Decoder(2, D_MODEL, HEADS, 32, norm_first=norm_first).eval()
    x, memory = torch.randn(2, 5, D_MODEL), torch.randn(2, 6, D_MODEL)
    memory_mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])[:, None]
    full = decoder(x, memory, causal_mask(5), memory_mask)
    cache = DecoderCache(2)
    steps = [
        decoder(x[:, t : t + 1], memory, causal_mask(1, num_keys=t + 1), memory_mask,
                cache=cache)
        for t in range(5)
    ]  # fmt: skip
    torch.testing.assert_close(torch.cat(steps, 1), full)


def test_a_decoder_layer_with_a_cache_checks_the_mask_against_the_stored_positions():
    layer = DecoderLayer(D_MODEL, HEADS, 32).eval()
    cache = DecoderCache(1).layers[0]
    x, memory = torch.randn(1, 1, D_MODEL), torch.randn(1, 3, D_MODEL)
    layer(x, memory, causal_mask(1), cache=cache)
    with pytest.raises(ValueError, match="tgt_mask"):  # 3 keys, but 2 are stored now
        layer(x, memory, causal_mask(1, num_keys=3), cache=cache)


def test_a_cache_for_another_number_of_layers_is_refused():
    decoder = Decoder(2, D_MODEL, HEADS, 32)
    with pytest.raises(ValueError, match="3 layer caches for a decoder of 2 layers"):
        decoder(torch.randn(1, 1, D_MODEL), torch.randn(1, 2, D_MODEL), cache=DecoderCache(3))


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_decode_with_a_cache_in_pieces_equals_decode_of_the_whole(norm_first):
    torch.manual_seed(0)
    model = Transformer(13, 11, d_model=D_MODEL, num_heads=HEADS, num_encoder_layers=2,
                        num_decoder_layers=2, d_ff=32, dropout=0.0,
                        norm_first=norm_first).eval()  # fmt: skip
    src = torch.tensor([[4, 5, 6, 7, 8], [9, 10, 11, 0, 0]])
    tgt = torch.tensor([[1, 4, 5, 6, 7, 8], [1, 7, 2, 0, 0, 0]])  # padded after <eos>
    src_mask = model.source_mask(src)
    memory = model.encode(src, src_mask)
    full = model.decode(tgt, memory, src_mask)
    for cuts in ([1, 2, 3, 4, 5], [3], [2, 5]):
        cache = model.new_cache()
        pieces = [model.decode(tgt[:, a:b], memory, src_mask, cache=cache)
                  for a, b in zip([0, *cuts], [*cuts, 6], strict=True)]  # fmt: skip
        torch.testing.assert_close(torch.cat(pieces, 1), full)
        assert cache.length == 6 and torch.equal(cache.ids, tgt)


def test_a_cache_must_be_fed_the_same_batch():
    torch.manual_seed(0)
    model = Transformer(13, 11, d_model=D_MODEL, num_heads=HEADS, num_encoder_layers=1,
                        num_decoder_layers=1, d_ff=32, dropout=0.0).eval()  # fmt: skip
    src = torch.tensor([[4, 5], [6, 7]])
    memory = model.encode(src)
    cache = model.new_cache()
    model.decode(torch.ones(2, 1, dtype=torch.long), memory, None, cache=cache)
    with pytest.raises(ValueError, match="cache holds 2 sequences"):
        model.decode(torch.ones(1, 1, dtype=torch.long), memory[:1], None, cache=cache)


MODERN = {
    "rms norms": {"norm": "rms"},
    "a gated network": {"gated": True, "activation": "silu"},
    "two key/value heads": {"num_kv_heads": 2},
    "rotary positions": {"rotary_base": 10_000.0},
    "no biases": {"bias": False},
}


@pytest.mark.parametrize("options", MODERN.values(), ids=MODERN.keys())
def test_a_decoder_with_a_modern_option_decodes_with_a_cache_as_on_the_whole_prefix(options):
    torch.manual_seed(0)
    decoder = Decoder(2, D_MODEL, HEADS, 32, norm_first=True, **options).eval()
    x, memory = torch.randn(2, 5, D_MODEL), torch.randn(2, 6, D_MODEL)
    full = decoder(x, memory, causal_mask(5))
    cache = DecoderCache(2)
    steps = [
        decoder(x[:, t : t + 1], memory, causal_mask(1, num_keys=t + 1), cache=cache)
        for t in range(5)
    ]
    torch.testing.assert_close(torch.cat(steps, 1), full)
