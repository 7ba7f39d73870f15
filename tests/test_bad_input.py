"""Bad input gets a clear error, never a wrong answer (issue 19, point 5).

One behaviour per test: the error names what was expected and what came. Fast: tiny tensors,
and the shipped translator loaded once.
"""

from __future__ import annotations

import math

import pytest
import torch

from course_lib.attention import MultiHeadAttention, scaled_dot_product_attention
from course_lib.decoder import DecoderLayer
from course_lib.encoder import Encoder, EncoderLayer
from course_lib.feedforward import FeedForward
from course_lib.positional import PositionalEncoding, sinusoidal_positional_encoding


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
    with pytest.raises(TypeError, match=r"x is torch\.float64 but the weights of this "
                       r"EncoderLayer are torch\.float32"):  # fmt: skip
        layer(randn(2, 3, 8, dtype=torch.float64))


def test_an_encoder_given_integer_vectors_says_ids_need_an_embedding():
    with pytest.raises(TypeError, match=r"x must be a floating-point tensor, got torch\.int64; "
                       "token ids go through an embedding first"):  # fmt: skip
        Encoder(1, 8, 2, 16)(torch.ones(2, 3, 8, dtype=torch.long))


def test_a_decoder_layer_given_a_float64_memory_names_it():
    with pytest.raises(TypeError, match=r"memory is torch\.float64 but the weights"):
        DecoderLayer(8, 2, 16)(randn(2, 3, 8), randn(2, 4, 8, dtype=torch.float64))


def test_feed_forward_given_float64_names_both_dtypes():
    with pytest.raises(TypeError, match=r"x is torch\.float64 but the weights of this "
                       r"FeedForward are torch\.float32"):  # fmt: skip
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
    assert out.dtype == torch.float64 and math.isclose(float(out[0, 1, 0]), math.sin(1.0),
                                                       rel_tol=1e-6)  # fmt: skip
