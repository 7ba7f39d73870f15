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
- **One student's results that cannot be stored are that student's error.** When saving a
  submission's results fails, each of its exercises is stored as ``error`` with a message
  naming the file and the failure, a line naming the file is printed, and grading goes on
  with the next submission (:func:`grade_pending`'s ``save``).
- **A grader-killer is not run again.** Before each code answer runs, the gradebook records
  that it is in progress (:mod:`~course_lib.grading.inprogress`); an answer that was running
  when an earlier run was killed is graded ``error`` without running it again.
"""

from __future__ import annotations

import collections
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from course_lib.answers import Outcome
from course_lib.exercises import list_exercises
from course_lib.grading._progress import ProgressBar
from course_lib.grading.gradebook import Gradebook
from course_lib.grading.grader import Grade, Grader, Plan, Settings
from course_lib.grading.inprogress import InProgress
from course_lib.grading.inputs import SubmissionFile, find_submission_files, read_submission_file
from course_lib.grading.sandbox import Job, Sandbox, WorkerPool
from course_lib.grading.text import storable, terminal_safe

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
    unsaved: list[str] = field(default_factory=list)  # a line per submission not stored as is


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
        try:
            book.save_grades(sha, grades, settings.seed)
        except Exception as error:  # this submission's problem: the others are still graded
            grades = unsaved(book, sha, grades, error, settings.seed, summary, bar)
        summary.graded += bool(grades)
        summary.statuses.update(g.status for g in grades)
        bar.update()

    try:
        for sha, plan in plans.items():
            if not plan.tasks:
                save(sha, plan.grades)
        if work:
            assert isinstance(sandbox, Sandbox)

            def done(job: Job, outcomes: list[Outcome]) -> None:
                plan = plans[job.key]
                try:
                    ran = [
                        grader.interpret(e, o)
                        for e, o in zip(plan.exercises, outcomes, strict=True)
                    ]
                except Exception as error:  # what came back cannot be judged: an error
                    why = f"the grader could not judge what the code returned ({_named(error)})"
                    ran = [Grade(e.id, "error", 0, e.points, why) for e in plan.exercises]
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


def _named(error: BaseException) -> str:
    """``TypeName: message`` of an exception, safe to store and to print, cut to 300
    characters (its text may come from an answer)."""
    try:
        text = f"{type(error).__name__}: {error}"
    except Exception:  # an exception whose str() raises
        text = type(error).__name__
    return storable(text, 300)


def unsaved(
    book: Gradebook,
    sha: str,
    grades: list[Grade],
    error: Exception,
    seed: int,
    summary: Summary,
    bar: ProgressBar,
) -> list[Grade]:
    """Store each exercise of a submission whose results could not be saved as ``error``
    with a message naming the file and why; print a line saying so. Returns the grades
    stored (none when even those could not be, which leaves the submission to the next
    run)."""
    try:
        student, path = book.file_of(sha)
    except Exception:  # the gradebook itself failing: name the submission by its hash
        student, path = None, None
    where = f"{path or 'the submission ' + sha[:12]} (student {student or 'unknown'})"
    why = _named(error)
    message = (
        f"the results of {where} could not be stored ({why}); recorded as an error: grade "
        "it again (course-grade regrade) once the cause is fixed"
    )
    stored = [
        Grade(storable(g.exercise_id, 200), "error", 0, int(g.max_points), message) for g in grades
    ] or [Grade("(submission)", "error", 0, 0, message)]
    try:
        book.save_grades(sha, stored, seed)
    except Exception as again:
        stored = []
        message = (
            f"the results of {where} could not be stored ({why}), nor an error in their place "
            f"({_named(again)}); it stays ungraded and the next run grades it again"
        )
    line = f"course-grade: {message}"
    summary.unsaved.append(line)
    if bar.enabled and bar.terminal:
        sys.stderr.write("\r\033[K")  # the line replaces the progress bar, redrawn after it
    print(terminal_safe(line), file=sys.stderr, flush=True)
    return stored
