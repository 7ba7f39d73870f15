"""The chapter "Transformers at a glance": its claim about the codebooks it learns holds for
other seeds of k-means."""

from __future__ import annotations

import pytest


@pytest.mark.claims
@pytest.mark.parametrize("seed", [1, 2])
def test_a_larger_codebook_never_rebuilds_the_signal_worse_for_other_seeds(seed):
    """The chapter asserts, for its k-means seed 0, that the SNR of the signal rebuilt from a
    codebook never falls as the codebook grows from 2 to 128 entries; it held for seeds 0 to
    29 (benchmarks/glance_seeds.py). Seeds 1 and 2 here make three seeds on whatever torch
    the tests run: seven codebooks learned by k-means, well under a second per seed."""
    from benchmarks.glance_seeds import failed_claims, measure

    assert failed_claims(measure(seed)) == []
