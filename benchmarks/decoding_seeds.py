"""The "Decoding and inference cost" chapter's trained translators, trained again from seeds.

    .venv/bin/python benchmarks/decoding_seeds.py              # seeds 0 to 2
    .venv/bin/python benchmarks/decoding_seeds.py --seeds 3 4
    .venv/bin/python benchmarks/decoding_seeds.py --well-trained --seeds 1 2

The chapter trains one model itself: the weak translator, ``train_number_translator(
epochs=1, learning_rate=1e-3)`` (the number translator's sizes, one epoch at a third of the
learning rate, seed 0). For each seed the script trains it with ``seed=seed`` (the weights'
draw and the batches' order; the split of the numbers stays the chapter's), translates the
1,000 held-out numbers greedily and with a beam of width 4, and prints on how many numbers
the two differ, the mean log-probability of each method's outputs under the weak model, and
the exact match for the widths 1, 2, 4 and 8 that the chapter prints unchecked; then whether
the chapter's claim held: the two methods differ on some numbers and beam search's outputs
are more probable on average (exit status 1 if not).

With ``--well-trained`` it trains the recipe of the translator the chapter loads instead
(``train_number_translator(seed=seed)``, four epochs, about 30 s of one thread per seed: too
long for the test suite) and checks what the chapter says of that model for every seed:
greedy decoding and beam search of width 4 write the same on every held-out number, and for
100 beam search's best hypothesis is greedy's output. Run it with the chapter's numerics to
reproduce seed 0 exactly::

    ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2,STRICT ONEDNN_MAX_CPU_ISA=AVX2 OMP_NUM_THREADS=1 \\
        .venv/bin/python benchmarks/decoding_seeds.py --seeds 0 1 2 3 4

On torch 2.13.0 (2026-11-29) the weak translator of seeds 0 to 4 differed from greedy
decoding on 216, 143, 185, 117 and 139 held-out numbers, with mean log-probabilities (greedy,
beam) of (-3.2342, -3.0265), (-2.6702, -2.5416), (-2.8298, -2.6660), (-3.0094, -2.9297) and
(-2.2141, -2.1050): the claim held for every seed. Its exact match for widths 1, 2, 4 and 8:
65.6, 67.3, 65.6, 64.0%; 74.6, 74.9, 74.8, 74.7%; 70.4, 74.5, 74.1, 73.2%; 69.9, 71.7, 70.9,
70.4%; 76.0, 77.7, 77.7, 77.7%. The well-trained translator (``--well-trained``) of seeds 0 to
4 wrote the same as beam search on every held-out number, and for 100 beam search's best
hypothesis was greedy's output; but that output was *ciento* for seed 0 (0.55 against *cien*
0.22), *cien* for seeds 1, 3 and 4 (right) and *ciento uno* for seed 2, so the chapter now says
that the mistake at 100 is its shipped model's and asserts only that beam search's best is
greedy's. (Seed 0 trained today does not reproduce the shipped checkpoint's probabilities,
0.47 and 0.28: the checkpoint was saved on 2026-11-22, before later changes to the library.)
Torch 2.14.1 gave the same numbers for seeds 0 to 2 (weak, seeds 1 and 2: every float of
``measure`` digit for digit; the rest as far as printed).

``tests/test_decoding_chapter.py`` checks the weak translator's claim for seeds 1 and 2.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script

from benchmarks._seeds import Claims, run
from benchmarks._seeds import failed_claims as failed
from course_lib.data import NumberSplit, number_split
from course_lib.decoding import beam_search
from course_lib.translation import NumberTranslator, train_number_translator

WIDTHS = (1, 2, 4, 8)


@dataclass(frozen=True)
class Weak:
    """What the chapter reports of one weak translator on the held-out numbers."""

    differ: int  # numbers where greedy and beam (width 4) write differently
    p_greedy: float  # mean log-probability of greedy's outputs
    p_beam: float  # mean log-probability of beam search's
    exact: dict[int, float]  # exact match by beam width (empty unless asked for)


@dataclass(frozen=True)
class WellTrained:
    """What the chapter says of the well-trained translator."""

    differ: int  # held-out numbers where greedy and beam (width 4) write differently
    hundred: tuple[tuple[str, float], ...]  # beam's four hypotheses for 100, probabilities
    greedy_100: str


@cache
def chapter_split() -> NumberSplit:
    return number_split()


def differences(translator: NumberTranslator) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Greedy's and beam search's (width 4) outputs for the held-out numbers, and on how many
    numbers they differ."""
    src_ids = translator.source_ids(chapter_split().test)
    greedy = translator.generate(src_ids, beam_width=1)
    beam = translator.generate(src_ids, beam_width=4)
    length = max(greedy.size(1), beam.size(1))
    greedy, beam = (F.pad(ids, (0, length - ids.size(1))) for ids in (greedy, beam))
    return greedy, beam, int((greedy != beam).any(dim=1).sum())


def measure(seed: int, widths: tuple[int, ...] = ()) -> Weak:
    """Train the chapter's weak translator from ``seed`` and compare greedy with beam search
    as the chapter does; the exact match for each of ``widths`` too."""
    with torch.random.fork_rng():
        weak, _ = train_number_translator(seed=seed, epochs=1, learning_rate=1e-3)
    src_ids = weak.source_ids(chapter_split().test)
    greedy, beam, differ = differences(weak)
    p_greedy = weak.log_probability(src_ids, greedy).mean().item()
    p_beam = weak.log_probability(src_ids, beam).mean().item()
    exact = {w: weak.exact_match(chapter_split().test, w) for w in widths}
    return Weak(differ, p_greedy, p_beam, exact)


def claims(m: Weak) -> Claims:
    """The chapter's assert on its weak translator."""
    return {
        "greedy and beam differ on some held-out numbers, beam's outputs more probable": lambda: (
            m.differ > 0 and m.p_beam > m.p_greedy
        ),
    }


def failed_claims(m: Weak) -> list[str]:
    """The chapter's claim on the weak translator if it does not hold (it should)."""
    return failed(claims(m))


def show(seed: int, m: Weak) -> str:
    exact = ", ".join(f"width {w} {e:.1%}" for w, e in m.exact.items())
    return (
        f"seed {seed}: differ on {m.differ}, mean log-probability greedy {m.p_greedy:.4f}, "
        f"beam {m.p_beam:.4f}; exact match {exact}"
    )


def measure_well_trained(seed: int) -> WellTrained:
    """Train the shipped translator's recipe from ``seed`` and measure what the chapter says
    of it."""
    with torch.random.fork_rng():
        translator, _ = train_number_translator(seed=seed)
    vocab = translator.target_vocab
    _, _, differ = differences(translator)
    start = torch.tensor([[vocab.bos_id]])
    beams = beam_search(translator.scorer(translator.source_ids([100])), start, vocab.eos_id, 8)
    hundred = tuple(
        (" ".join(vocab.decode(ids)), score.exp().item())
        for ids, score in zip(beams.sequences[0], beams.scores[0], strict=True)
    )
    return WellTrained(differ, hundred, translator.translate([100])[0])


def claims_well_trained(m: WellTrained) -> Claims:
    """What the chapter asserts and says of its well-trained translator, for every seed."""
    return {
        "greedy and beam agree on every held-out number": lambda: m.differ == 0,
        "for 100 beam search's best hypothesis is greedy's output": lambda: (
            m.hundred[0][0] == m.greedy_100
        ),
    }


def show_well_trained(seed: int, m: WellTrained) -> str:
    beams = ", ".join(f"{words} {p:.2f}" for words, p in m.hundred)
    return f"seed {seed} (4 epochs): differ on {m.differ}; 100: greedy {m.greedy_100}, {beams}"


if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--well-trained" in argv:
        argv.remove("--well-trained")
        sys.exit(run(__doc__, measure_well_trained, claims_well_trained, show_well_trained, argv))
    sys.exit(run(__doc__, lambda seed: measure(seed, WIDTHS), claims, show, argv))
