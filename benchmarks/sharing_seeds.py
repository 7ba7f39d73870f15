"""The "Attention at scale" chapter's key/value sharing comparison, trained from several seeds.

    .venv/bin/python benchmarks/sharing_seeds.py              # seeds 0 to 2
    .venv/bin/python benchmarks/sharing_seeds.py --seeds 3 4

For each seed the chapter's three decoders of the number names (``model_for(task,
num_kv_heads=g)``: 4 query heads with 4, 2 or 1 key/value heads, 2 layers, d_model 64) are
trained for two epochs from ``torch.manual_seed(seed)`` with ``train_lm(..., seed=seed)``; seed
0 is the run the chapter prints. The script prints each model's held-out exact match and
whether the chapter's claims held: multi-head and grouped attention write at least 99% of the
1,000 held-out numbers, multi-query at least 90% (exit status 1 if one did not). Run it with
the chapter's numerics (one thread, AVX2 kernels) to reproduce seed 0 exactly::

    ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2,STRICT ONEDNN_MAX_CPU_ISA=AVX2 OMP_NUM_THREADS=1 \\
        .venv/bin/python benchmarks/sharing_seeds.py --seeds 0 1 2 3 4

On torch 2.13.0 (2026-11-29), seeds 0 to 4 gave, for 4, 2 and 1 key/value heads:
99.9, 99.7, 99.5; 99.7, 99.4, 97.0; 99.3, 99.7, 91.1; 99.6, 99.7, 99.6; 99.9, 99.8, 96.2.
``tests/test_attention_at_scale_chapter.py`` checks the claims for seeds 1 and 2.
"""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script

from benchmarks._seeds import Claims, run
from benchmarks._seeds import failed_claims as failed
from course_lib.lm_tasks import LMTask, exact_match, model_for, number_task, train_lm

KV_HEADS = (4, 2, 1)  # multi-head, grouped, multi-query


@cache
def chapter_task() -> LMTask:
    return number_task()


def measure(seed: int) -> dict[int, float]:
    """Held-out exact match of the three models trained from ``seed``, by key/value heads."""
    task = chapter_task()
    exact = {}
    with torch.random.fork_rng():
        for g in KV_HEADS:
            torch.manual_seed(seed)
            model = model_for(task, num_kv_heads=g)
            train_lm(model, task, epochs=2, seed=seed)
            exact[g] = exact_match(model, task, "held-out")
    return exact


def claims(exact: dict[int, float]) -> Claims:
    """The chapter's claims about one seed's three models."""
    return {
        "multi-head and grouped at least 99% exact": lambda: min(exact[4], exact[2]) >= 0.99,
        "multi-query at least 90% exact": lambda: exact[1] >= 0.90,
    }


def failed_claims(exact: dict[int, float]) -> list[str]:
    """The chapter's claims about one seed's three models that do not hold (none, we expect)."""
    return failed(claims(exact))


def show(seed: int, exact: dict[int, float]) -> str:
    return f"seed {seed}: " + ", ".join(f"{g} kv heads {exact[g]:.1%}" for g in KV_HEADS)


if __name__ == "__main__":
    sys.exit(run(__doc__, measure, claims, show, sys.argv[1:]))
