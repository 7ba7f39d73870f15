"""How long ``course-grade`` takes for a class: 200 submissions of "Positional encoding".

    python benchmarks/grading_speed.py [--count 200] [--runs 3] [--jobs 2] [--keep DIR]

Writes ``count`` synthetic submissions (``synthetic_submissions.py``: a realistic mix of
correct, wrong, hard-coded, course_lib-calling and misbehaving answers, and broken files),
then grades them ``runs`` times from scratch with ``course-grade --jobs JOBS``, each run in a
fresh output folder, and prints every run's wall-clock time, the best and the spread, the
machine's load before each run, and what each kind of submission scored (every kind must
come out as expected, or the benchmark says so and exits with status 1).

The budget (issue 8) is 200 submissions in under 3 minutes on 2 cores. The machine may be
shared: compare the best run with the budget, and read the spread.
"""

from __future__ import annotations

import argparse
import collections
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synthetic_submissions import KINDS, write_submissions

BUDGET = 180.0
SEED = 20261122
# What each kind must score on positional-encoding (the misbehaving ones: not "ok", except
# printing megabytes, which is harmless; a slow allocation may end as error or timeout).
EXPECTED = {
    "correct": {"ok"},
    "wrong": {"fail"},
    "hard-coded public checks": {"fail"},
    "calls course_lib": {"error"},
    "misbehaves": {"error", "timeout", "ok"},
    "choice and value only": {None},
    "broken file": {None},
}


def grade(inbox: Path, out: Path, jobs: int) -> float:
    command = [sys.executable, "-m", "course_lib.grading", str(inbox), "--out", str(out),
               "--seed", str(SEED), "--jobs", str(jobs), "--quiet"]  # fmt: skip
    started = time.perf_counter()
    finished = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if finished.returncode != 0:
        sys.exit(f"course-grade failed ({finished.returncode}):\n{finished.stderr}")
    return seconds


def outcomes(out: Path, kinds: dict[str, str]) -> dict[str, collections.Counter]:
    """Status of positional-encoding per kind of submission."""
    db = sqlite3.connect(out / "gradebook.sqlite")
    rows = db.execute(
        "SELECT f.path, r.status, r.seconds FROM submission_files f "
        "LEFT JOIN results r ON r.sha256 = f.sha256 AND r.exercise_id = 'positional-encoding'"
    ).fetchall()
    db.close()
    found: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for path, status, _ in rows:
        found[kinds[Path(path).name]][status] += 1
    return found


def code_seconds(out: Path) -> tuple[float, float]:
    """Seconds spent running code: in all, and in exercises stopped by the time limit."""
    db = sqlite3.connect(out / "gradebook.sqlite")
    total, stopped = db.execute(
        "SELECT SUM(seconds), SUM(CASE WHEN status = 'timeout' THEN seconds ELSE 0 END) "
        "FROM results"
    ).fetchone()
    db.close()
    return total or 0.0, stopped or 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--keep", help="write the submissions and results here (kept)")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="grading-speed-") as scratch:
        root = Path(options.keep or scratch)
        inbox = root / "submissions"
        kinds = write_submissions(inbox, options.count)
        mix = collections.Counter(kinds.values())
        print(f"{options.count} submissions: " + ", ".join(f"{k} {mix[k]}" for k in KINDS))
        print(f"{os.cpu_count()} CPUs, --jobs {options.jobs}, budget {BUDGET:.0f} s")
        times = []
        for run in range(1, options.runs + 1):
            load = os.getloadavg()[0]
            out = root / f"out-{run}"
            seconds = grade(inbox, out, options.jobs)
            times.append(seconds)
            total, stopped = code_seconds(out)
            print(
                f"run {run}: {seconds:6.1f} s (load before {load:.2f}; code ran {total:.0f} s "
                f"in the workers, {stopped:.0f} s of it in exercises stopped by the time limit)"
            )
        best, worst = min(times), max(times)
        print(
            f"best {best:.1f} s, median {statistics.median(times):.1f} s, worst {worst:.1f} s "
            f"(spread {worst - best:.1f} s); budget {BUDGET:.0f} s: "
            f"{'met' if best < BUDGET else 'NOT met'}"
        )
        found = outcomes(root / f"out-{options.runs}", kinds)
        wrong = False
        print("positional-encoding by kind of submission (status: count):")
        for kind in KINDS:
            statuses = found.get(kind, collections.Counter())
            unexpected = set(statuses) - EXPECTED[kind]
            wrong |= bool(unexpected)
            shown = ", ".join(f"{s or 'not graded'} {n}" for s, n in sorted(statuses.items(),
                                                                          key=str))  # fmt: skip
            print(f"  {kind:26} {shown}{'   UNEXPECTED' if unexpected else ''}")
        if wrong:
            sys.exit(1)


if __name__ == "__main__":
    main()
