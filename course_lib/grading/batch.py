"""Grading a batch: add files to the gradebook, grade what is not graded yet, in parallel.

Rules (the instructors' guide states them for people):

- **Every valid file is graded, and the newest answer counts.** For each student and
  exercise, the answer that counts is the one of the newest valid file (``created_utc``; ties:
  the larger SHA-256) that answers it, so a file without an exercise never erases an earlier
  answer to it. A file whose time is flagged (in the future, or far from the student's other
  files) loses to every unflagged file. The gradebook's views apply the rule
  (:mod:`~course_lib.grading.gradebook`).
- **Idempotent.** Files are keyed by the SHA-256 of their bytes, and a submission graded with
  the current seed is not graded again: re-running on the same files changes nothing, and
  adding files grades only what they change.
- **Never loses a result.** Each submission's results are committed as soon as it is graded;
  an interrupted run keeps them and the next run grades the rest.
- **A grader-killer is not run again.** Before each code answer runs, the gradebook records
  that it is in progress (:mod:`~course_lib.grading.inprogress`); an answer that was running
  when an earlier run was killed is graded ``error`` without running it again.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from course_lib.exercises import list_exercises
from course_lib.grading._progress import ProgressBar
from course_lib.grading.gradebook import Gradebook
from course_lib.grading.grader import Grade, Grader, Plan, Settings
from course_lib.grading.inprogress import InProgress
from course_lib.grading.inputs import SubmissionFile, find_submission_files, read_submission_file
from course_lib.grading.sandbox import Job, Sandbox, WorkerPool

__all__ = ["Summary", "add_files", "grade_pending"]


@dataclass
class Summary:
    """What a run did."""

    files: list[SubmissionFile] = field(default_factory=list)
    new_files: int = 0
    graded: int = 0
    statuses: collections.Counter = field(default_factory=collections.Counter)
    seconds: float = 0.0
    workers: int = 0
    spared: list[tuple[str, str]] = field(default_factory=list)  # (sha256, exercise id)


def add_files(book: Gradebook, paths: Iterable[str | Path]) -> tuple[Summary, list[str]]:
    """Read every submission file under ``paths`` into the gradebook.

    Returns what was read, and a message for each path that does not exist.
    """
    summary = Summary()
    files, missing = find_submission_files(paths)
    for path in files:
        record = read_submission_file(path)
        summary.files.append(record)
        summary.new_files += book.add_file(record)
    return summary, missing


def _plan(grader: Grader, document: dict[str, Any]) -> Plan:
    try:
        return grader.plan(document)
    except Exception as error:  # a document the schema allowed but the grader cannot use
        grade = Grade("(submission)", "invalid", 0, 0, f"cannot be graded ({error})")
        return Plan([grade], [], [])


def grade_pending(
    book: Gradebook,
    settings: Settings,
    *,
    sandbox: str | Sandbox = "bwrap",
    jobs: int = 1,
    progress: bool = True,
    summary: Summary | None = None,
) -> Summary:
    """Grade every valid submission not yet graded with ``settings.seed``.

    Code answers run in ``jobs`` sandboxed workers (``sandbox``: ``"bwrap"``, ``"none"`` or
    a :class:`Sandbox`); the sandbox is checked before anything is graded, so a missing one
    stops the run with :class:`~course_lib.grading.sandbox.SandboxUnavailable` and no change.
    """
    summary = summary or Summary()
    started = time.monotonic()
    book.set_exercises(list_exercises())
    grader = Grader(settings)
    todo = [
        row["sha256"]
        for row in book.valid_submissions()
        if not book.is_graded(row["sha256"], settings.seed)
    ]
    marks = InProgress(book)
    plans = {sha: marks.spare(sha, _plan(grader, book.document(sha))) for sha in todo}
    summary.spared = marks.spared
    work = [
        job
        for sha, plan in plans.items()
        if (job := plan.job(sha, settings.submission_timeout)) is not None
    ]
    if work and not isinstance(sandbox, Sandbox):
        sandbox = Sandbox.create(sandbox, settings.limits)
    bar = ProgressBar(len(todo), enabled=progress)

    def save(sha: str, grades: list[Grade]) -> None:
        book.save_grades(sha, grades, settings.seed)
        summary.graded += 1
        summary.statuses.update(g.status for g in grades)
        bar.update()

    try:
        for sha, plan in plans.items():
            if not plan.tasks:
                save(sha, plan.grades)
        if work:
            assert isinstance(sandbox, Sandbox)

            def done(job: Job, outcomes: list[dict[str, Any]]) -> None:
                plan = plans[job.key]
                ran = [
                    grader.interpret(e, o) for e, o in zip(plan.exercises, outcomes, strict=True)
                ]
                save(job.key, plan.grades + ran)

            def starting(job: Job, index: int) -> None:
                marks.starting(job.key, plans[job.key].exercises[index].id)

            summary.workers = min(jobs, len(work))
            with WorkerPool(sandbox, summary.workers) as pool:
                pool.run(work, done, starting)
    finally:
        marks.close()
        bar.close()
    summary.seconds = time.monotonic() - started
    return summary
