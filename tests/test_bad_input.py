"""Bad input gets a clear error, never a wrong answer (issue 19, point 5).

One behaviour per test: the error names what was expected and what came. Fast: tiny tensors,
and the shipped translator loaded once.
"""

from __future__ import annotations

import math

import pytest
import torch

from course_lib.attention import MultiHeadAttention, scaled_dot_product_attention
from course_lib.cache import DecoderCache, KeyValueCache
from course_lib.decoder import DecoderLayer
from course_lib.decoding import beam_search, greedy_decode, sample
from course_lib.encoder import Encoder, EncoderLayer
from course_lib.feedforward import FeedForward
from course_lib.positional import PositionalEncoding, sinusoidal_positional_encoding
from course_lib.training import fit, label_smoothed_loss, sequence_loss, teacher_forcing
from course_lib.translation import english_names, load_number_translator


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0), dtype=dtype)


# --------------------------------------------------------------------------- attention


def test_attention_refuses_mixed_dtypes_naming_all_three():
    q, k = randn(2, 3, 4), randn(2, 3, 4, dtype=torch.float64)
    with pytest.raises(TypeError, match=r"same dtype, got torch\.float32, torch\.float64 and "):
        scaled_dot_product_attention(q, k, q)


def test_attention_refuses_integer_inputs():
    ids = torch.ones(2, 3, 4, dtype=torch.long)
    with pytest.raises(TypeError, match=r"query must be a floating-point tensor, got torch\.int64"):
        scaled_dot_product_attention(ids, ids, ids)


def test_attention_refuses_d_k_of_zero():
    empty = randn(2, 3, 0)
    with pytest.raises(ValueError, match=r"d_k must be at least 1, got query \(2, 3, 0\)"):
        scaled_dot_product_attention(empty, empty, randn(2, 3, 4))


def test_attention_refuses_batch_sizes_that_do_not_broadcast():
    with pytest.raises(ValueError, match=r"same batch axes.*query \(2, 3, 4\), key \(3, 3, 4\)"):
        scaled_dot_product_attention(randn(2, 3, 4), randn(3, 3, 4), randn(3, 3, 4))


def test_attention_still_broadcasts_batch_axes_of_size_one():
    output, _ = scaled_dot_product_attention(randn(2, 3, 4), randn(1, 5, 4), randn(1, 5, 4))
    assert output.shape == (2, 3, 4)


@pytest.mark.parametrize("need_weights", [True, False], ids=["explicit", "fused"])
def test_a_float32_multi_head_attention_given_float64_says_how_to_convert(need_weights):
    attention = MultiHeadAttention(8, 2)
    x = randn(2, 3, 8, dtype=torch.float64)
    message = (
        r"query is torch\.float64 but the weights of this MultiHeadAttention are "
        r"torch\.float32: convert the module \(\.double\(\) on it\) or the input "
        r"\(query\.to\(torch\.float32\)\)"
    )
    with pytest.raises(TypeError, match=message):
        attention(x, x, x, need_weights=need_weights)


def test_a_float64_multi_head_attention_takes_float64():
    attention = MultiHeadAttention(8, 2).double()
    x = randn(2, 3, 8, dtype=torch.float64)
    assert attention(x, x, x)[0].dtype == torch.float64


def test_multi_head_attention_under_autocast_accepts_another_precision():
    attention = MultiHeadAttention(8, 2)
    x = randn(2, 3, 8).bfloat16()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        output, _ = attention(x, x, x)
    assert output.shape == (2, 3, 8)


# --------------------------------------------------------------------------- layers


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_a_float32_encoder_layer_given_float64_names_both_dtypes(norm_first):
    layer = EncoderLayer(8, 2, 16, norm_first=norm_first)
    with pytest.raises(
        TypeError,
        match=r"x is torch\.float64 but the weights of this "
        r"EncoderLayer are torch\.float32",
    ):
        layer(randn(2, 3, 8, dtype=torch.float64))


def test_an_encoder_given_integer_vectors_says_ids_need_an_embedding():
    with pytest.raises(
        TypeError,
        match=r"x must be a floating-point tensor, got torch\.int64; "
        "token ids go through an embedding first",
    ):
        Encoder(1, 8, 2, 16)(torch.ones(2, 3, 8, dtype=torch.long))


def test_a_decoder_layer_given_a_float64_memory_names_it():
    with pytest.raises(TypeError, match=r"memory is torch\.float64 but the weights"):
        DecoderLayer(8, 2, 16)(randn(2, 3, 8), randn(2, 4, 8, dtype=torch.float64))


def test_feed_forward_given_float64_names_both_dtypes():
    with pytest.raises(
        TypeError,
        match=r"x is torch\.float64 but the weights of this "
        r"FeedForward are torch\.float32",
    ):
        FeedForward(8, 16)(randn(2, 3, 8, dtype=torch.float64))


# --------------------------------------------------------------------------- positions


@pytest.mark.parametrize("dtype", [torch.long, torch.bool])
def test_positional_encoding_refuses_integer_embeddings_that_would_round_it(dtype):
    with pytest.raises(TypeError, match=rf"x must be a floating-point tensor, got {dtype}"):
        PositionalEncoding(8, max_len=10)(torch.ones(1, 3, 8, dtype=dtype))


def test_positional_encoding_table_refuses_an_integer_dtype():
    with pytest.raises(TypeError, match=r"dtype must be a floating-point torch\.dtype.*int64"):
        sinusoidal_positional_encoding(4, 8, dtype=torch.long)


def test_positional_encoding_keeps_float64_embeddings_in_float64():
    out = PositionalEncoding(8, max_len=10)(torch.zeros(1, 3, 8, dtype=torch.float64))
    assert out.dtype == torch.float64 and math.isclose(
        float(out[0, 1, 0]), math.sin(1.0), rel_tol=1e-6
    )


# --------------------------------------------------------------------------- the cache


def filled_cache(dtype=torch.float32):
    cache = KeyValueCache()
    cache.update(randn(2, 2, 1, 4, dtype=dtype), randn(2, 2, 1, 4, dtype=dtype))
    return cache


def test_the_cache_refuses_float64_after_float32_instead_of_turning_float64():
    cache = filled_cache()
    new = randn(2, 2, 1, 4, dtype=torch.float64)
    with pytest.raises(
        TypeError,
        match=r"holds torch\.float32 keys on cpu; new keys of "
        r"torch\.float64 on cpu would silently change them",
    ):
        cache.update(new, new)
    assert cache.keys.dtype == torch.float32 and cache.length == 1


def test_the_cache_refuses_integer_keys():
    ids = torch.ones(2, 2, 1, 4, dtype=torch.long)
    with pytest.raises(TypeError, match=r"keys must be a floating-point tensor, got torch\.int64"):
        KeyValueCache().update(ids, ids)


@pytest.mark.parametrize("index", [torch.tensor([0.0, 1.0]), torch.tensor([True, False])])
def test_reorder_refuses_an_index_that_is_not_integer(index):
    with pytest.raises(TypeError, match=r"index must be an integer tensor of ids.*got torch\."):
        filled_cache().reorder(index)


def test_reorder_refuses_rows_outside_the_cached_batch():
    with pytest.raises(
        IndexError,
        match=r"rows in \[0, 2\) of the cached batch, got values "
        "from 0 to 5",
    ):
        filled_cache().reorder(torch.tensor([0, 5]))


def test_decoder_cache_reorder_refuses_a_float_index():
    cache = DecoderCache(1)
    cache.layers[0].self_attention.update(randn(2, 2, 1, 4), randn(2, 2, 1, 4))
    with pytest.raises(TypeError, match=r"index must be an integer tensor.*torch\.float32"):
        cache.reorder(torch.tensor([1.0, 0.0]))


# --------------------------------------------------------------------------- decoding

BOS = torch.ones(2, 1, dtype=torch.long)


def uniform(ids):
    return torch.zeros(ids.size(0), 6)


def nothing_allowed(ids):
    return torch.full((ids.size(0), 6), -math.inf)


def test_sample_when_every_score_is_minus_inf_says_there_is_nothing_to_draw():
    with pytest.raises(
        ValueError,
        match=r"leave no token to choose in sequence\(s\) \[0, 1\] "
        "of the batch: every score is -inf",
    ):
        sample(nothing_allowed, BOS, None, 3)


def test_greedy_decoding_refuses_nan_scores_instead_of_picking_token_0():
    def nan_scores(ids):
        return torch.full((ids.size(0), 6), math.nan)

    with pytest.raises(ValueError, match=r"leave no token to choose.*one is NaN"):
        greedy_decode(nan_scores, BOS, 2, 3)


@pytest.mark.parametrize("pad_id", [99, -1])
def test_beam_search_refuses_a_pad_id_outside_the_vocabulary(pad_id):
    with pytest.raises(
        ValueError,
        match=rf"pad_id must be a token id in \[0, vocab_size=6\) "
        rf"of the scorer's vocabulary, got {pad_id}",
    ):
        beam_search(uniform, BOS, 2, 3, beam_width=2, pad_id=pad_id)


def test_greedy_decoding_refuses_an_eos_id_it_could_never_produce():
    with pytest.raises(ValueError, match=r"eos_id must be a token id in \[0, vocab_size=6\)"):
        greedy_decode(uniform, BOS, 99, 3)


# --------------------------------------------------------------------------- the loss

LOGITS = randn(2, 3, 5)


def test_sequence_loss_names_a_label_outside_the_vocabulary():
    labels = torch.tensor([[1, 7, 0], [3, 0, 0]])
    with pytest.raises(
        IndexError,
        match=r"label 7 at position \(0, 1\) is outside "
        r"\[0, vocab_size=5\)",
    ):
        sequence_loss(LOGITS, labels)


def test_sequence_loss_refuses_labels_that_are_all_padding_rather_than_return_nan():
    with pytest.raises(
        ValueError,
        match=r"every label is the padding id 0, so no position "
        r"counts.*0/0 \(NaN\)",
    ):
        sequence_loss(LOGITS, torch.zeros(2, 3, dtype=torch.long))


def test_label_smoothed_loss_refuses_labels_that_are_all_padding_too():
    with pytest.raises(ValueError, match=r"every label is the padding id 0"):
        label_smoothed_loss(LOGITS, torch.zeros(2, 3, dtype=torch.long), 0.1)


def test_sequence_loss_still_ignores_padding_labels_beyond_the_vocabulary():
    labels = torch.tensor([[1, 9, 9], [3, 9, 9]])  # 9 pads, not a class
    loss = sequence_loss(LOGITS, labels, pad_id=9)
    assert torch.isfinite(loss)


def test_sequence_loss_refuses_float_labels():
    with pytest.raises(TypeError, match=r"labels must be an integer tensor of ids.*float32"):
        sequence_loss(LOGITS, torch.ones(2, 3))


def test_teacher_forcing_refuses_float_ids():
    with pytest.raises(TypeError, match=r"tgt_ids must be an integer tensor of ids"):
        teacher_forcing(torch.ones(2, 3))


# --------------------------------------------------------------------------- the translator


@pytest.fixture(scope="module")
def translator():
    return load_number_translator()


def test_translate_names_every_unknown_name_and_what_it_accepts(translator):
    items = ["twenty one", "Twenty-One", "21", "banana", "veintiuno"]
    message = (
        r"cannot translate 'banana' \(item 3\), 'veintiuno' \(item 4\); expected a number "
        r"from 0 to 9999 \(21 or '21'\) or its English name"
    )
    with pytest.raises(ValueError, match=message):
        translator.translate(items)


def test_translate_refuses_an_empty_name_in_a_batch(translator):
    with pytest.raises(ValueError, match=r"cannot translate an empty name \(item 1\)"):
        translator.translate(["one", "  "])


def test_translate_accepts_what_a_student_would_type_for_one_number(translator):
    items = ["twenty one", "Twenty-One", "21", "  twenty-one ", "TWENTY ONE"]
    assert translator.translate(items) == ["veintiuno"] * 5


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("One hundred and five", "one hundred five"),
        ("2001", "two thousand one"),
        ("nine thousand NINE hundred ninety nine", "nine thousand nine hundred ninety-nine"),
    ],
)
def test_english_names_reads_capitals_spaces_and_and(text, name):
    assert english_names([text]) == [name]


@pytest.mark.parametrize(
    "text",
    [
        "10000",
        "-3",
        "2.5",
        "1,000",
        "twenty and one",
        "one hundred and",
        "one one",
        "twenty-one hundred",
        "veintiuno",
    ],
)
def test_english_names_refuses_what_is_not_one_number_from_0_to_9999(text):
    with pytest.raises(ValueError, match=rf"cannot translate '{text}' \(item 0"):
        english_names([text])


def test_english_names_refuses_a_float_naming_its_position():
    with pytest.raises(TypeError, match=r"item 1 must be an integer, got 2\.0 of type float"):
        english_names([1, 2.0])


# --------------------------------------------------------------------------- meta and compile


def test_value_checks_are_skipped_on_the_meta_device():
    logits = torch.randn(2, 3, 5, device="meta")
    all_padding = torch.zeros(2, 3, dtype=torch.long, device="meta")  # no values to read
    assert sequence_loss(logits, all_padding).device.type == "meta"
    cache = KeyValueCache()
    keys = torch.randn(2, 2, 1, 4, device="meta")
    cache.update(keys, keys)
    cache.reorder(torch.tensor([1, 0], device="meta"))
    assert cache.keys.shape == (2, 2, 1, 4)


def test_value_checks_are_skipped_while_torch_compile_traces(monkeypatch):
    from course_lib import _devices

    assert _devices.values_checkable(torch.zeros(1))
    monkeypatch.setattr(_devices, "is_compiling", lambda: True)
    assert not _devices.values_checkable(torch.zeros(1))
    sequence_loss(LOGITS, torch.zeros(2, 3, dtype=torch.long))  # NaN, as PyTorch's own


def test_fit_refuses_a_batch_loss_that_is_not_one_number():
    model = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3)
    with pytest.raises(ValueError, match=r"one number .* shape \(2, 2\); reduce it with"):
        fit(model, (x,), lambda xb: model(xb), epochs=1, batch_size=2, learning_rate=0.1)
    with pytest.raises(TypeError, match=r"floating-point tensor, got 1\.5"):
        fit(model, (x,), lambda xb: 1.5, epochs=1, batch_size=2, learning_rate=0.1)


def test_a_generator_that_is_not_a_torch_generator_is_named():
    scores = torch.zeros(1, 5)
    with pytest.raises(TypeError, match=r"must be a torch\.Generator .* got 1 of type int"):
        sample(
            lambda ids: scores.expand(ids.size(0), 5),
            torch.zeros(1, 1, dtype=torch.long),
            None,
            2,
            generator=1,
        )
