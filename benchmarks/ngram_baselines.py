"""The standard-library corpus and its byte n-gram baselines, with the time each step takes.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/ngram_baselines.py
    .venv/bin/python benchmarks/ngram_baselines.py --orders 1 2 3 4 5 6 --discounts 0.6 0.8 0.9

Prints :func:`course_lib.corpus.corpus_info` and how long building it took (wall clock and
CPU time: on a shared machine the wall clock counts the waits), then, for each order, a
:class:`course_lib.ngram.ByteNGram` fitted on the training split: its discounts, bits per byte
on the validation and test splits, and the seconds of fitting and of scoring both splits
(wall clock and CPU).
``--discounts`` also scores the validation split with every level's discount fixed to each
value given, against the closed form (the module docstring's choice).
"""

from __future__ import annotations

import argparse
import time

from course_lib.corpus import build_corpus
from course_lib.ngram import ByteNGram


def timed(step):
    """``(result, wall seconds, CPU seconds)`` of ``step()``."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = step()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--discounts", type=float, nargs="*", default=[])
    args = parser.parse_args()

    built, wall, cpu = timed(build_corpus)
    print(built.info)
    print(f"built in {wall:.1f} s ({cpu:.1f} s of CPU)\n")
    train, validation, test = (built.text(split) for split in ("train", "validation", "test"))

    print("order  validation    test  fit: wall, CPU (s)  score: wall, CPU (s)  discounts")
    for order in args.orders:
        model, fit_wall, fit_cpu = timed(lambda order=order: ByteNGram(order).fit(train))
        (bits_val, bits_test), score_wall, score_cpu = timed(
            lambda model=model: (model.bits_per_byte(validation), model.bits_per_byte(test))
        )
        discounts = " ".join(f"{d:.3f}" for d in model.discounts)
        print(
            f"{order:>5}  {bits_val:>10.3f}  {bits_test:>6.3f}  {fit_wall:>9.2f} {fit_cpu:>8.2f}"
            f"  {score_wall:>11.2f} {score_cpu:>8.2f}  {discounts}",
            flush=True,
        )
        for fixed in args.discounts:
            other = ByteNGram(order, discounts=[fixed] * order).fit(train)
            print(f"{'':>5}  {other.bits_per_byte(validation):>10.3f}  (every D = {fixed})")


if __name__ == "__main__":
    main()
