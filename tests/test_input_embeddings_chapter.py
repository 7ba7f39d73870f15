"""The chapter "Input embeddings": its claims about trained word2vec models."""

from __future__ import annotations

import pytest


@pytest.mark.claims
@pytest.mark.parametrize("seed", [1, 2])
def test_the_chapters_claims_about_word2vec_hold_for_other_seeds(seed):
    """The chapter asserts, for its training seed 0, that its four word2vec models go from
    under 20% to at least 95% of words with a same-class nearest neighbour, that the full
    softmax reaches 95% in fewer epochs than negative sampling, that seven listed words have
    3 neighbours of their class, and that width 1 stays under 30% while width 4 reaches 95%.
    All held for seeds 0 to 4 (benchmarks/embeddings_seeds.py); seeds 1 and 2 here make three
    seeds on whatever torch the tests run. Six models of 8 epochs, about 7 s of one CPU thread
    per seed."""
    from benchmarks.embeddings_seeds import failed_claims, measure

    assert failed_claims(measure(seed)) == []
