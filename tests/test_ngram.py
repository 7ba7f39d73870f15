"""Specification of course_lib.ngram: byte n-grams smoothed by interpolated Kneser-Ney.

The expected probabilities are computed by hand from the formula of the module docstring,
with the counts of the tiny texts written out; the real corpus is used by the last tests only.
"""

from __future__ import annotations

import math

import pytest
import torch

from course_lib.corpus import corpus
from course_lib.ngram import (
    FALLBACK_DISCOUNT,
    ByteNGram,
    NGramBaseline,
    baseline_table,
    closed_form_discount,
)

TEXT = "abracadabra"
# Bigram counts of "abracadabra": ab 2, br 2, ra 2, ac 1, ca 1, ad 1, da 1 (10 bigrams).
# After "a": ab 2 + ac 1 + ad 1 = 4 bigrams of 3 kinds.
# Bytes before each byte (continuations): a after r, c, d -> 3; b, r, c, d after one each;
# 7 distinct bigrams in all, ending in 5 kinds of byte.


def p_unigram_level(continuations: int, discount: float = 0.5) -> float:
    """Level 1 of the order-2 model on TEXT: continuation counts over the 7 distinct bigrams,
    interpolated with the uniform 1/256 by the mass the 5 kinds gave up."""
    return (max(continuations - discount, 0) + discount * 5 / 256) / 7


@pytest.fixture
def bigram():
    return ByteNGram(2, discounts=(0.5, 0.5)).fit(TEXT)


# --------------------------------------------------------------------------- by hand


def test_a_seen_bigram_has_its_kneser_ney_probability(bigram):
    expected = (2 - 0.5 + 0.5 * 3 * p_unigram_level(1)) / 4
    assert bigram.probability(b"a", ord("b")) == pytest.approx(expected, rel=1e-12)


def test_an_unseen_bigram_after_a_seen_context_gets_the_lower_orders_share(bigram):
    # "aa" never occurs: only the 0.5 * 3 given up after "a", spread by level 1 ("a": 3)
    expected = 0.5 * 3 * p_unigram_level(3) / 4
    assert bigram.probability(b"a", ord("a")) == pytest.approx(expected, rel=1e-12)


def test_a_byte_never_seen_gets_the_uniform_share_of_both_levels(bigram):
    expected = 0.5 * 3 * (0.5 * 5 / 256 / 7) / 4
    assert bigram.probability(b"a", ord("z")) == pytest.approx(expected, rel=1e-12)


def test_an_unseen_context_passes_the_lower_order_on(bigram):
    assert bigram.probability(b"z", ord("a")) == pytest.approx(p_unigram_level(3), rel=1e-12)


def test_a_text_is_scored_byte_by_byte_the_first_from_the_shorter_context(bigram):
    first = p_unigram_level(3)  # "a" with no byte before: level 1
    second = (2 - 0.5 + 0.5 * 3 * p_unigram_level(1)) / 4  # "b" after "a"
    assert bigram.log2_probability("ab") == pytest.approx(math.log2(first * second), rel=1e-12)
    assert bigram.bits_per_byte("ab") == pytest.approx(-math.log2(first * second) / 2, rel=1e-12)


def test_the_closed_form_discounts_are_n1_over_n1_plus_2_n2_per_level():
    # level 2: counts 2, 2, 2, 1, 1, 1, 1 -> 4 / (4 + 2 * 3); level 1: 3, 1, 1, 1, 1 -> 4 / 4
    assert ByteNGram(2).fit(TEXT).discounts == (1.0, 0.4)


def test_a_level_where_nothing_is_seen_once_takes_the_fallback_discount():
    assert closed_form_discount([2, 2, 3]) == FALLBACK_DISCOUNT


def test_the_lower_order_counts_the_byte_before_the_texts_first_ngram():
    # "zab", order 3: "a" follows "z" only in the first bigram, which ends no trigram; level 1
    # has the distinct bigrams za and ab: "a" and "b" one byte before each, 2 in all
    model = ByteNGram(3, discounts=(0.5, 0.5, 0.5)).fit("zab")
    expected = (1 - 0.5 + 0.5 * 2 / 256) / 2
    assert model.probability(b"", ord("a")) == pytest.approx(expected, rel=1e-12)


def test_a_unigram_gives_a_byte_it_never_saw_a_probability_above_zero():
    # counts a 5, b 2, r 2, c 1, d 1 of 11: D = 2 / (2 + 2 * 2); 5 kinds gave D each
    model = ByteNGram(1).fit(TEXT)
    assert model.probability(b"", ord("z")) == pytest.approx((1 / 3) * 5 / 256 / 11, rel=1e-12)


def test_a_unigram_counts_raw_occurrences_not_continuations():
    model = ByteNGram(1).fit(TEXT)
    assert model.probability(b"", ord("a")) == pytest.approx(
        (5 - 1 / 3 + (1 / 3) * 5 / 256) / 11, rel=1e-12
    )


# --------------------------------------------------------------------------- distributions


@pytest.mark.parametrize("order", [1, 2, 3, 4, 5])
@pytest.mark.parametrize(
    "context",
    [b"", b"Retur", b"the ", b"\x00\xff\x01zq"],
    ids=["empty", "seen", "seen-short", "unseen"],
)
def test_the_next_byte_distribution_sums_to_one_for_seen_and_unseen_contexts(order, context):
    text = corpus("train")[:20_000]
    probabilities = ByteNGram(order).fit(text).probabilities(context)
    assert probabilities.shape == (256,) and probabilities.dtype == torch.float64
    assert probabilities.sum().item() == pytest.approx(1.0, abs=1e-12)
    assert bool((probabilities > 0).all())


def test_the_distribution_holds_the_probability_of_each_byte(bigram):
    assert bigram.probabilities("a")[ord("b")].item() == bigram.probability("a", ord("b"))


def test_only_the_last_order_minus_one_bytes_of_a_context_count(bigram):
    assert torch.equal(bigram.probabilities(b"xyzzya"), bigram.probabilities(b"a"))


# --------------------------------------------------------------------------- the real corpus


def test_bits_per_byte_fall_from_order_1_to_4_on_held_out_documents():
    train, held_out = corpus("train")[:300_000], corpus("validation")[:20_000]
    bits = [ByteNGram(order).fit(train).bits_per_byte(held_out) for order in (1, 2, 3, 4)]
    assert bits == sorted(bits, reverse=True) and bits[0] - bits[3] > 1.5, bits


def test_the_4_gram_on_the_training_split_scores_the_validation_split_as_measured():
    # measured on Python 3.10 to 3.13 (module docstring): 2.276 to 2.337 bits per byte
    bits = ByteNGram(4).fit(corpus("train")).bits_per_byte(corpus("validation"))
    assert 2.25 < bits < 2.37


def test_the_baseline_table_prints_one_row_per_order():
    rows = [NGramBaseline(1, 4.6449, 4.7821), NGramBaseline(4, 2.2961, 2.3068)]
    assert baseline_table(rows).splitlines()[1:] == [
        "    1        4.64    4.78",
        "    4        2.30    2.31",
    ]


# --------------------------------------------------------------------------- bad input


def test_a_model_used_before_fit_says_to_fit_it():
    with pytest.raises(RuntimeError, match=r"ByteNGram\(order=3\) is not fitted: call fit"):
        ByteNGram(3).bits_per_byte("abc")


def test_a_text_shorter_than_the_order_is_refused():
    with pytest.raises(ValueError, match=r"at least 5 bytes to count one 5-gram, got 3"):
        ByteNGram(5).fit("abc")


def test_an_order_of_zero_is_refused():
    with pytest.raises(ValueError, match=r"order must be a positive integer, got 0"):
        ByteNGram(0)


def test_discounts_must_be_one_per_level():
    with pytest.raises(ValueError, match=r"one discount per level, 3 for order 3; got 2"):
        ByteNGram(3, discounts=(0.5, 0.5))


@pytest.mark.parametrize("discount", [0, 1.5, -0.1])
def test_a_discount_outside_0_to_1_is_refused(discount):
    with pytest.raises(ValueError, match=r"each discount must be a number in \(0, 1\]"):
        ByteNGram(1, discounts=(discount,))


def test_a_byte_outside_0_to_255_is_refused(bigram):
    with pytest.raises(ValueError, match=r"byte must be a byte value in 0\.\.255, got 256"):
        bigram.probability(b"a", 256)


def test_a_text_that_is_not_str_or_bytes_is_refused():
    with pytest.raises(TypeError, match=r"text must be a str or bytes, got list"):
        ByteNGram(2).fit(["a", "b"])


def test_bits_per_byte_of_an_empty_text_is_refused(bigram):
    with pytest.raises(ValueError, match=r"at least one byte to measure bits per byte, got 0"):
        bigram.bits_per_byte("")
