#!/usr/bin/env python3
"""Measure the course's time budgets and print them (the README records the numbers).

    python3 benchmarks/budgets.py                  chapters, book build and the full test command
    python3 benchmarks/budgets.py --skip-tests     without the full test command (~10 minutes)
    python3 benchmarks/budgets.py --repeat 5       more runs per measurement (default 3)

What it measures, each several times (the best run is the number; the spread, worst minus best,
shows how much other load on the machine disturbed it):

- each chapter in chapters/ executed top to bottom with a fresh kernel, as `tasks.py execute`
  does but without writing the file (kernel start included). Budget: 30 s, or 45 s for the
  chapters of the parts "The Transformer at work" and "Beyond the original Transformer" in
  _toc.yml; the whole book under 300 s (the sum of the chapters' best runs);
- the book build from the stored outputs (`jupyter-book build --all`, warnings as errors) into a
  fresh folder. Budget: 60 s;
- the full test command, `python3 tasks.py test`, with the environment already set up.
  Budget: 20 minutes.

Wall-clock seconds on this machine: measure on a quiet machine for numbers to record. Exits with
status 1 if a best run is over its budget or the test command failed. Nothing here is a unit
test.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tasks  # noqa: E402  (the project's entry point: its environment and notebook runner)

CHAPTER_BUDGET = 30.0
PART_BUDGETS = {
    "The Transformer at work": 45.0,  # issue 7's chapters: training and decoding
    "Beyond the original Transformer": 45.0,  # issue 21's chapters: each trains small models
}
BOOK_EXECUTION_BUDGET = 300.0  # 240 s for the 13 chapters before issue 21
BUILD_BUDGET = 60.0
TEST_BUDGET = 20 * 60.0


def chapter_budgets() -> dict[str, float]:
    """Seconds allowed per chapter notebook (by stem), from the part _toc.yml puts it in."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    budgets = {}
    for part in toc.get("parts", []):
        budget = PART_BUDGETS.get(part.get("caption", ""), CHAPTER_BUDGET)
        for chapter in part.get("chapters", []):
            budgets[Path(chapter["file"]).name] = budget
    return {
        path.stem: budgets.get(path.stem, CHAPTER_BUDGET)
        for path in sorted(tasks.CHAPTERS.glob("*.ipynb"))
    }


def measure(label: str, repeat: int, run) -> dict:
    """Run `run()` (which returns seconds) `repeat` times; print and return the statistics."""
    runs = []
    for attempt in range(1, repeat + 1):
        seconds = run()
        runs.append(seconds)
        print(f"  {label}: run {attempt}/{repeat}: {seconds:.1f} s", flush=True)
    return {
        "best": min(runs),
        "median": statistics.median(runs),
        "spread": max(runs) - min(runs),
        "runs": runs,
    }


def time_chapter(path: Path) -> float:
    _, seconds = tasks.run_notebook(path, timeout=600)
    return seconds


def time_book_build() -> float:
    with tempfile.TemporaryDirectory(prefix="book-build-") as out:
        command = [tasks.BIN / "jupyter-book", "build", str(ROOT), "--path-output", out,
                   "--all", "--warningiserror", "--keep-going", "--quiet"]  # fmt: skip
        started = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
        seconds = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"the book build failed:\n{result.stdout[-4000:]}{result.stderr[-4000:]}")
    return seconds


def time_test_command(failures: list[str]) -> float:
    """Seconds of one `python3 tasks.py test`; a failing run is timed too and noted."""
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, str(ROOT / "tasks.py"), "test", "-q"],
        cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    lines = result.stdout.strip().splitlines()
    counts = [line for line in lines if re.search(r"\d+ (passed|failed)", line)]
    summary = counts[-1] if counts else ""
    print(f"  {summary}", flush=True)
    if result.returncode != 0:
        failures += [line for line in lines if line.startswith("FAILED")] or [summary]
    return seconds


def row(name: str, stats: dict, budget: float) -> tuple[str, str, str, str, str]:
    verdict = "ok" if stats["best"] <= budget else "OVER"
    return (name, f"{stats['best']:.1f}", f"{stats['spread']:.1f}", f"{budget:.0f}", verdict)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (3)")
    parser.add_argument("--test-repeat", type=int, default=1, help="runs of the test command")
    parser.add_argument("--skip-tests", action="store_true", help="do not time the test command")
    parser.add_argument("--json", type=Path, help="also write the measurements to this file")
    options = parser.parse_args(argv)

    tasks.setup()
    if not tasks.in_venv():  # run again inside the course's environment
        command = [tasks.VENV_PYTHON, __file__, *argv]
        return subprocess.run(command, env={**os.environ, "PYTHONHASHSEED": "0"}).returncode

    print(f"budgets on {os.cpu_count()} CPU cores, {options.repeat} runs each", flush=True)
    results: dict[str, dict] = {"chapters": {}}
    rows = []
    budgets = chapter_budgets()
    for stem, budget in budgets.items():
        path = tasks.CHAPTERS / f"{stem}.ipynb"
        stats = measure(f"execute {stem}", options.repeat, lambda path=path: time_chapter(path))
        results["chapters"][stem] = {**stats, "budget": budget}
        rows.append(row(f"execute `chapters/{stem}.ipynb`", stats, budget))
    total = {
        "best": sum(c["best"] for c in results["chapters"].values()),
        "spread": sum(c["spread"] for c in results["chapters"].values()),
    }
    results["book_execution"] = {**total, "budget": BOOK_EXECUTION_BUDGET}
    rows.append(row("execute every chapter (sum)", total, BOOK_EXECUTION_BUDGET))

    stats = measure("build the book", options.repeat, time_book_build)
    results["book_build"] = {**stats, "budget": BUILD_BUDGET}
    rows.append(row("build the book from stored outputs", stats, BUILD_BUDGET))

    failures: list[str] = []
    if not options.skip_tests:
        stats = measure(
            "python3 tasks.py test", options.test_repeat, lambda: time_test_command(failures)
        )
        results["test_command"] = {**stats, "budget": TEST_BUDGET, "failures": failures}
        rows.append(row("`python3 tasks.py test`", stats, TEST_BUDGET))

    print("\n| What | Best (s) | Spread (s) | Budget (s) | |")
    print("| --- | ---: | ---: | ---: | --- |")
    for cells in rows:
        print("| " + " | ".join(cells) + " |")
    if options.json:
        options.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    if failures:
        print("\nthe test command failed (its time is still given above):")
        print("\n".join(f"  {line}" for line in failures))
    return 1 if failures or any(cells[-1] == "OVER" for cells in rows) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
