"""What every ``benchmarks/*_seeds.py`` script does around its chapter's measurement.

A chapter asserts what its trained models showed for one seed. Its seeds script trains the
same models from other seeds and checks the same claims: ``measure(seed)`` trains and returns
the measures, ``claims(measures)`` maps each claim, in words, to a test of it. ``run`` is the
command line around the two (``--seeds``), and ``failed_claims`` is what the chapter's claims
test in ``tests/`` asserts to be empty for a seed.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

import torch

M = TypeVar("M")
Claims = Mapping[str, Callable[[], bool]]


def failed_claims(claims: Claims) -> list[str]:
    """The claims, in words, whose test is false (none, a chapter expects)."""
    return [claim for claim, holds in claims.items() if not holds()]


def spread(values: Iterable[float], fmt: str = ".3f") -> str:
    """``values`` as 'mean m, sd s, from a to b' (sd left out for a single value)."""
    values = list(values)
    mean = statistics.mean(values)
    sd = f", sd {statistics.stdev(values):{fmt}}" if len(values) > 1 else ""
    return f"mean {mean:{fmt}}{sd}, from {min(values):{fmt}} to {max(values):{fmt}}"


def run(
    doc: str,
    measure: Callable[[int], M],
    claims: Callable[[M], Claims],
    show: Callable[[int, M], str],
    argv: list[str],
    *,
    seeds: tuple[int, ...] = (0, 1, 2),
    summarise: Callable[[dict[int, M]], str] | None = None,
) -> int:
    """Measure every seed of ``--seeds`` on one thread (as the chapters train), print each
    seed's measures (``show``), their summary and every claim that failed; the exit status
    (1 if a claim failed for some seed)."""
    parser = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(seeds))
    chosen = parser.parse_args(argv).seeds
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, seeds {chosen}", flush=True)
    results: dict[int, M] = {}
    failed = []
    for seed in chosen:
        started = time.perf_counter()
        results[seed] = measure(seed)
        print(f"{show(seed, results[seed])}  [{time.perf_counter() - started:.0f} s]", flush=True)
        failed += [f"seed {seed}: {claim}" for claim in failed_claims(claims(results[seed]))]
    if summarise is not None:
        print(summarise(results))
    for line in failed:
        print(f"FAILED {line}")
    print(f"{len(failed)} claims failed" if failed else f"every claim held for seeds {chosen}")
    return 1 if failed else 0
