"""The chapter "Multi-head attention": its claims about the trained one-head and two-head
models."""

from __future__ import annotations

import pytest


@pytest.mark.claims
@pytest.mark.parametrize("seed", [1, 2])
def test_the_chapters_claims_about_one_head_against_two_hold_for_other_seeds(seed):
    """The chapter asserts, for its seed 0, that one head gets under 95% of the previous and
    of the first tokens right and two heads over 99% of both, and that of the two heads one
    puts its largest weight on the previous position and the other over 0.9 on position 0.
    All held for seeds 0 to 4 (benchmarks/multi_head_seeds.py; one head at most 78.8% and
    91.7%, the first-token head at least 0.94); seeds 1 and 2 here make three seeds on
    whatever torch the tests run. Two models of 600 steps, about 8 s of one CPU thread per
    seed."""
    from benchmarks.multi_head_seeds import failed_claims, measure

    assert failed_claims(measure(seed)) == []
