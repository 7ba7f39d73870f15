"""The chapter "The decoder": what it asserts of its trained digit reverser holds for seeds
other than the chapter's."""

from __future__ import annotations

import pytest


@pytest.mark.claims
@pytest.mark.parametrize("seed", [1, 2])
def test_the_chapters_claims_about_the_digit_reverser_hold_for_other_seeds(seed):
    """The chapter trains its reverser from seed 0 and asserts a next-token accuracy above 0.9
    on 500 held-out strings, the right greedy reversal of 3 1 4 1 5 9 2, 5 as the most
    probable token after <bos> 2 9, and cross-attention (averaged over the heads) peaking on
    the digit to write at more than half the held-out positions. All held for seeds 0 to 4
    (benchmarks/decoder_seeds.py); seeds 1 and 2 here make three seeds on whatever torch the
    tests run. One model of 400 steps, about 12 s of one CPU thread per seed."""
    from benchmarks.decoder_seeds import failed_claims, measure

    assert failed_claims(measure(seed)) == []
