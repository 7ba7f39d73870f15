"""The "Input embeddings" chapter's word2vec results, trained again from several seeds.

    .venv/bin/python benchmarks/embeddings_seeds.py              # seeds 0 to 2
    .venv/bin/python benchmarks/embeddings_seeds.py --seeds 3 4

The corpus is the chapter's (``synthetic_grammar_corpus(num_sentences=1000, seed=0)``, its
54-token vocabulary); the seed is that of ``train_word2vec``, which draws the starting vectors,
the order of the examples and the noise words. Seed 0 is the run the chapter prints. For each
seed the script trains what the chapter's asserts on trained results need:

- the four models of the chapter (skip-gram and CBOW, each with negative sampling and with
  the full softmax: 16 dimensions, window 2, 5 noise words, 8 epochs, learning rate 0.01,
  batches of 256, a snapshot after every epoch), for the share of the 50 words whose nearest
  neighbour is of their own class before and after training, and the first epoch at which
  that share reaches 95%;
- skip-gram with negative sampling 1 and 4 dimensions wide (8 epochs, the chapter's width
  experiment), for the same share.

It also lists, as the chapter does, the 3 nearest neighbours of seven words (cat, baker,
bread, sleeps, red, near, the) in the skip-gram model with negative sampling.

The chapter's claims, each checked for every seed (exit status 1 if one failed): every model
goes from under 20% before training to at least 95% after; with the full softmax each method
reaches 95% in fewer epochs than with negative sampling (the chapter's table trains seeds 1
to 3 for 6 epochs; 8 here, as for its seed 0); the seven words' 3 nearest neighbours are all
of their class; width 1 stays under 30% and width 4 reaches 95%. Run it with the chapter's
numerics (one thread, AVX2 kernels) to reproduce seed 0 exactly::

    ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2,STRICT ONEDNN_MAX_CPU_ISA=AVX2 OMP_NUM_THREADS=1 \\
        .venv/bin/python benchmarks/embeddings_seeds.py --seeds 0 1 2 3 4

On torch 2.13.0 (2026-11-29) every claim held for seeds 0 to 4. Per seed, for skip-gram,
skip-gram with the full softmax, CBOW and CBOW with the full softmax: the share before training
(the same for the four, which start alike) 8%, 0%, 6%, 8%, 8%; after 8 epochs 100% for every
model and seed; the first epoch at 95% 2, 1, 4, 2 (seed 0); 2, 1, 5, 3; 2, 1, 5, 2; 2, 1, 5, 1;
2, 1, 5, 3 (seeds 1 to 3 as in the chapter's table); the seven words' 3 neighbours all of their
class (21 of 21); width 1 8% and width 4 100% for every seed. Once, outside this script, the
whole width experiment for seeds 0 to 4 (widths 1, 2, 4, 8, 16, 32): width 2 gave 62%, 48%,
66%, 76%, 72%, every width from 4 on 100%, as the chapter's text says. Torch 2.14.1 gave the
same numbers for seeds 0 to 2 (the shares are counts of 50 words, the epochs whole numbers).
About 7 s of one CPU thread per seed.

``tests/test_input_embeddings_chapter.py`` checks the claims for seeds 1 and 2 with
``measure`` and ``failed_claims`` below; the chapter itself asserts them for seed 0.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script

from benchmarks._seeds import Claims, run
from benchmarks._seeds import failed_claims as failed
from course_lib.data import WORD_CLASSES, synthetic_grammar_corpus
from course_lib.vocab import Vocabulary
from course_lib.word2vec import (
    Word2VecResult,
    nearest_neighbours,
    neighbour_class_agreement,
    train_word2vec,
)

MODELS = {  # the chapter's names: (method, full softmax)
    "skip-gram": ("skipgram", False),
    "skip-gram, full softmax": ("skipgram", True),
    "CBOW": ("cbow", False),
    "CBOW, full softmax": ("cbow", True),
}
WIDTHS = (1, 4)  # the widths the chapter's assert is about
LEVEL = 0.95  # the share of words whose nearest neighbour is of their class
LISTED = ("cat", "baker", "bread", "sleeps", "red", "near", "the")  # the chapter's words


@dataclass(frozen=True)
class Measures:
    """One seed's shares of words with a same-class nearest neighbour."""

    before: dict[str, float]  # per model, at the start
    after: dict[str, float]  # per model, after 8 epochs
    needed: dict[str, int | None]  # per model, first epoch reaching LEVEL (None: never)
    by_width: dict[int, float]  # skip-gram with negative sampling, after 8 epochs
    same_class: dict[str, int]  # of LISTED words' 3 nearest neighbours in skip-gram's table


@cache
def chapter_corpus() -> tuple[Vocabulary, list[list[int]]]:
    """The chapter's vocabulary and its corpus as ids."""
    sentences = synthetic_grammar_corpus(num_sentences=1000, seed=0)
    vocab = Vocabulary.from_corpus(sentences)
    return vocab, [vocab.encode(sentence) for sentence in sentences]


def agreement(vocab: Vocabulary, table: Tensor) -> float:
    """The share of the 50 words whose nearest neighbour in ``table`` is of their class."""
    return neighbour_class_agreement(table, vocab, WORD_CLASSES)


def epochs_to_reach(vocab: Vocabulary, result: Word2VecResult) -> int | None:
    """The first epoch whose snapshot reaches LEVEL (None: none did), as the chapter counts."""
    for epoch, table in result.snapshots:
        if agreement(vocab, table) >= LEVEL:
            return epoch
    return None


def of_its_class(vocab: Vocabulary, table: Tensor, word: str) -> int:
    """How many of ``word``'s 3 nearest neighbours in ``table`` are of its class."""
    (members,) = [ws for ws in WORD_CLASSES.values() if word in ws]
    return sum(w in members for w, _ in nearest_neighbours(table, vocab, word, k=3))


def measure(seed: int) -> Measures:
    """Train the chapter's four models and the two widths from ``seed``; their shares."""
    vocab, corpus_ids = chapter_corpus()
    settings = dict(epochs=8, lr=0.01, batch_size=256, seed=seed)
    runs = {
        name: train_word2vec(
            corpus_ids,
            len(vocab),
            method=method,
            dim=16,
            window=2,
            negatives=5,
            full_softmax=full_softmax,
            snapshot_every=1,
            **settings,
        )
        for name, (method, full_softmax) in MODELS.items()
    }
    by_width = {
        width: agreement(
            vocab, train_word2vec(corpus_ids, len(vocab), dim=width, **settings).embeddings
        )
        for width in WIDTHS
    }
    return Measures(
        before={name: agreement(vocab, run.snapshots[0][1]) for name, run in runs.items()},
        after={name: agreement(vocab, run.embeddings) for name, run in runs.items()},
        needed={name: epochs_to_reach(vocab, run) for name, run in runs.items()},
        by_width=by_width,
        same_class={
            word: of_its_class(vocab, runs["skip-gram"].embeddings, word) for word in LISTED
        },
    )


def faster(full: int | None, sampled: int | None) -> bool:
    """Both reached the level, the full softmax in fewer epochs."""
    return full is not None and sampled is not None and full < sampled


def claims(m: Measures) -> Claims:
    """The chapter's asserts on trained results, for one seed."""
    return {
        "every model under 20% before training, at least 95% after": lambda: all(
            m.after[name] >= LEVEL and m.before[name] < 0.2 for name in MODELS
        ),
        "skip-gram reaches 95% in fewer epochs with the full softmax": lambda: faster(
            m.needed["skip-gram, full softmax"], m.needed["skip-gram"]
        ),
        "CBOW reaches 95% in fewer epochs with the full softmax": lambda: faster(
            m.needed["CBOW, full softmax"], m.needed["CBOW"]
        ),
        "skip-gram: the 3 nearest neighbours of the listed words of their class": lambda: all(
            same == 3 for same in m.same_class.values()
        ),
        "width 1 under 30%, width 4 at least 95%": lambda: (
            m.by_width[1] < 0.3 and m.by_width[4] >= LEVEL
        ),
    }


def failed_claims(m: Measures) -> list[str]:
    """The chapter's claims that do not hold for one seed's measures (none, we expect)."""
    return failed(claims(m))


def show(seed: int, m: Measures) -> str:
    models = "; ".join(
        f"{name} {m.before[name]:.0%} -> {m.after[name]:.0%}, 95% at epoch {m.needed[name]}"
        for name in MODELS
    )
    widths = ", ".join(f"width {w} {share:.0%}" for w, share in m.by_width.items())
    same = sum(m.same_class.values())
    return f"seed {seed}: {models}; {widths}; listed words' neighbours of their class {same}/21"


if __name__ == "__main__":
    sys.exit(run(__doc__, measure, claims, show, sys.argv[1:]))
