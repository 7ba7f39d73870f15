"""The chapter "Model families": its claims about the BERT-like and GPT-like models it trains
hold for other seeds."""

from __future__ import annotations

import pytest


@pytest.mark.claims
@pytest.mark.parametrize("seed", [1, 2])
def test_the_chapters_claims_about_its_trained_encoder_and_decoder_hold_for_other_seeds(seed):
    """The chapter asserts, for its seed 0, that the encoder-only model puts a word of the
    right class in over 95% of the masked gaps, the exact word within 0.05 of the best
    possible, and P(size adjective) over 0.9 in "the <mask> fox hides"; that the decoder-only
    model gives a size adjective after "the" a probability within 0.05 of 0.2, writes over 95%
    grammatical sentences at temperature 0.5, over 85% at 1.0 and under 60% at 2.0, and that
    its nucleus(0.9) after "the teacher" is the five verbs of a person, fewer tokens than after
    "the" (benchmarks/model_families_seeds.py measured seeds 0 to 4). Seeds 1 and 2 here make
    three seeds on whatever torch the tests run: two models trained for 8 epochs and 1,500
    sentences sampled, about 20 s of one CPU thread per seed."""
    from benchmarks.model_families_seeds import failed_claims, measure

    assert failed_claims(measure(seed)) == []
