"""The files written from the gradebook, and the class summary printed at the end of a run.

In the output folder, after every change (each written to a temporary file first, then
renamed, so a reader never sees half a file; each readable by its owner only):

- ``grades.csv``: a row per student (sorted by id), after a first data row whose
  ``student_id`` is ``(max points)`` and which holds what each exercise is worth. Columns:
  ``student_id``; one column per exercise of the course, in the course's order, named by its
  id: the points that count (an override when there is one), empty when no file of the student
  answers it; ``total``; ``files``: how many valid files of the student were graded and
  combined; ``submitted_utc``: the latest ``created_utc`` of the files whose answers count;
  ``submission``: the SHA-256 of those files, newest first, separated by spaces; ``notes``:
  what the numbers do not say (exercises that did not pass, overrides, answers superseded by a
  newer one, flagged files, invalid files); ``similar``: for each code exercise whose answer is
  the same as other students' once normalised, those students
  (:mod:`~course_lib.grading.similarity`; nothing is deducted).
- ``results.csv``: a row per student and exercise with a counted answer or an override: the
  status, the points, the override, the grader's message and the file the answer came from.
- ``summary.csv``: a row per exercise: how many students answered it and passed it, the mean
  points of those who answered, and its three most common failures.
- ``similar.csv`` (:mod:`~course_lib.grading.similarity`), ``canvas.csv`` and ``moodle.csv``
  (:mod:`~course_lib.grading.exports`), and ``feedback/<student>.html``
  (:mod:`~course_lib.grading.feedback`).

Every CSV file is written by :func:`~course_lib.grading.text.csv_text`: a cell that a
spreadsheet would read as a formula (text starting with a tab or a line break, or whose first
character after whitespace is ``=``, ``+``, ``-`` or ``@``) gets a ``'`` in front, and a cell
holding a comma, a quote, a carriage return, a line feed or a tab is quoted: student text
(exception messages, file names) and override reasons are in these files.
"""

from __future__ import annotations

import collections
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from course_lib.grading.exports import write_exports
from course_lib.grading.feedback import write_feedback
from course_lib.grading.gradebook import Gradebook
from course_lib.grading.records import ClassRecord, StudentRecord, write_csv
from course_lib.grading.text import inert

__all__ = ["ClassRecord", "inert", "terminal_summary", "write_csv", "write_reports"]

GRADES = "grades.csv"
RESULTS = "results.csv"
SUMMARY = "summary.csv"
MAX_ROW = "(max points)"
FLAG_REASONS = {
    "future": "written after the grader first read it (a time in the future)",
}
COMMON_FAILURES = 3
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?", re.IGNORECASE)
# An escape that storing wrote for a control character (``\x1b``, ``\u202e``), kept whole when
# numbers are replaced by ``#``; otherwise a number.
ESCAPE_OR_NUMBER = re.compile(r"(\\x[0-9a-f]{2}|\\u[0-9a-f]{4})|" + NUMBER.pattern, re.IGNORECASE)


def short(sha256: str) -> str:
    return sha256[:12]


def file_label(created_utc: str, sha256: str) -> str:
    """How notes name a file: its time and the start of its SHA-256."""
    return f"file of {created_utc} ({short(sha256)})"


# ----------------------------------------------------------------------------- grades.csv


def student_notes(record: ClassRecord, student: StudentRecord) -> list[str]:
    """The notes of a student's row in ``grades.csv``."""
    notes = []
    if not student.files:
        reason = f": {student.invalid[0]['message']}" if student.invalid else ""
        notes.append(f"no valid submission{reason}")
    elif student.invalid:
        notes.append(f"{len(student.invalid)} invalid file(s) not counted")
    if len(student.files) > 1:
        notes.append(f"{len(student.files)} files combined")
    for row in student.grades:
        if row["status"] not in (None, "ok"):
            notes.append(f"{row['exercise_id']}: {row['status']}")
        if row["superseded"]:
            where = file_label(row["created_utc"], row["sha256"])
            notes.append(
                f"{row['exercise_id']}: {row['superseded']} answer(s) superseded by the {where}"
            )
        if row["flag"]:
            where = file_label(row["created_utc"], row["sha256"])
            notes.append(f"{row['exercise_id']}: only the flagged {where} answers it")
        if row["override_points"] is not None:
            notes.append(f"{row['exercise_id']} set by hand: {row['override_reason']}")
    notes += flag_notes(student)
    if student.files and record.not_graded(student):
        notes.append("not graded yet")
    return notes


def flag_notes(student: StudentRecord) -> list[str]:
    """A note for each flagged file of a student: why, and that it never wins."""
    notes = []
    for row in student.files:
        if row["flag"]:
            reason = FLAG_REASONS.get(row["flag"], row["flag"])
            notes.append(
                f"the {file_label(row['created_utc'], row['sha256'])} is flagged: {reason}; "
                "its answers count only where no other file answers"
            )
    return notes


def similar_cell(student: StudentRecord) -> str:
    """The ``similar`` cell of a student: ``<exercise>: <other students>; ...``."""
    return "; ".join(f"{e}: {', '.join(s.others)}" for e, s in sorted(student.similar.items()))


def grade_rows(book: Gradebook, record: ClassRecord | None = None) -> list[list[object]]:
    """The rows of ``grades.csv``: the header, the ``(max points)`` row, a row per student."""
    record = record or ClassRecord.read(book)
    exercises = [row["id"] for row in record.exercises]
    worth = [row["points"] for row in record.exercises]
    rows: list[list[object]] = [
        [
            *("student_id", *exercises, "total", "files"),
            *("submitted_utc", "submission", "notes", "similar"),
        ],
        [MAX_ROW, *worth, sum(worth), "", "", "", "", ""],
    ]
    for student in record.students.values():
        points = student.points()
        counted = student.counted_files()
        rows.append(
            [
                student.student_id,
                *(points.get(e, "") for e in exercises),
                sum(points.values()),
                len(student.files),
                counted[0]["created_utc"] if counted else "",
                " ".join(f["sha256"] for f in counted),
                "; ".join(student_notes(record, student)),
                "; ".join(
                    f"{e}: {', '.join(s.others)}" for e, s in sorted(student.similar.items())
                ),
            ]
        )
    return rows


# ----------------------------------------------------------------------------- results.csv


def result_rows(book: Gradebook) -> list[list[object]]:
    """The rows of ``results.csv``, header first."""
    rows: list[list[object]] = [
        [
            "student_id",
            "exercise_id",
            "status",
            "points",
            "max_points",
            "graded_points",
            "override_points",
            "override_reason",
            "message",
            "submission",
        ]
    ]
    for row in book.final_grades():
        if row["status"] is None and row["override_points"] is None:
            continue
        rows.append(
            [
                row["student_id"],
                row["exercise_id"],
                row["status"] or "",
                row["points"],
                row["max_points"],
                "" if row["graded_points"] is None else row["graded_points"],
                "" if row["override_points"] is None else row["override_points"],
                row["override_reason"] or "",
                row["message"] or "",
                row["sha256"] or "",
            ]
        )
    return rows


# ----------------------------------------------------------------------------- summary


def failure(row: Any) -> str:
    """What went wrong with a counted answer, numbers replaced by ``#`` so that the same
    mistake reads the same for every student: the first failed check's message, or the
    grader's message when no check ran. A recognised mistake (the check "known mistake" of a
    value exercise) comes first: it names the misconception the other checks only show."""
    message = row["message"] or ""
    try:
        checks = json.loads(row["checks"] or "[]")
    except ValueError:
        checks = []
    failed = [c for c in checks if c.get("status") == row["status"]]
    known = [c for c in failed if c.get("name") == "known mistake"]
    first = (known or failed or [None])[0]
    if first is not None:
        message = str(first.get("message", ""))
    return f"{row['status']}: {ESCAPE_OR_NUMBER.sub(lambda m: m[1] or '#', message)}"


@dataclass
class ExerciseSummary:
    """How the class did on one exercise."""

    exercise: Any
    answered: int = 0
    passed: int = 0
    points: int = 0
    failures: collections.Counter = field(default_factory=collections.Counter)

    @property
    def mean(self) -> float | None:
        return self.points / self.answered if self.answered else None


def summarise(record: ClassRecord) -> list[ExerciseSummary]:
    """An :class:`ExerciseSummary` per exercise of the course, in the course's order."""
    summaries = {row["id"]: ExerciseSummary(row) for row in record.exercises}
    for student in record.students.values():
        for row in student.grades:
            if row["status"] is None:
                continue
            summary = summaries[row["exercise_id"]]
            summary.answered += 1
            summary.passed += row["status"] == "ok"
            summary.points += row["points"] or 0
            if row["status"] != "ok":
                summary.failures[failure(row)] += 1
    return list(summaries.values())


def summary_rows(record: ClassRecord) -> list[list[object]]:
    """The rows of ``summary.csv``, header first."""
    header: list[object] = [
        *("exercise_id", "chapter", "title", "max_points"),
        *("students", "answered", "passed", "mean_points"),
    ]
    for rank in range(1, COMMON_FAILURES + 1):
        header += [f"failure_{rank}", f"failure_{rank}_count"]
    rows = [header]
    for summary in summarise(record):
        row = summary.exercise
        common = summary.failures.most_common(COMMON_FAILURES)
        common += [("", "")] * (COMMON_FAILURES - len(common))
        rows.append(
            [
                row["id"],
                row["chapter"],
                row["title"],
                row["points"],
                len(record.students),
                summary.answered,
                summary.passed,
                "" if summary.mean is None else f"{summary.mean:.2f}",
                *(cell for pair in common for cell in pair),
            ]
        )
    return rows


def similar_rows(record: ClassRecord) -> list[list[object]]:
    """The rows of ``similar.csv``, header first: a row per student and exercise whose code
    is the same as another student's: the group's key, the other students and the file."""
    rows: list[list[object]] = [["exercise_id", "group", "student_id", "same_as", "submission"]]
    found = []
    for student in record.students.values():
        counted = {r["exercise_id"]: r["sha256"] for r in student.grades}
        for exercise_id, same in student.similar.items():
            found.append(
                [
                    exercise_id,
                    same.group,
                    student.student_id,
                    " ".join(same.others),
                    counted[exercise_id],
                ]
            )
    return rows + sorted(found, key=lambda r: (str(r[0]), str(r[1]), str(r[2])))


def superseded_list(student: StudentRecord) -> str:
    """``; superseded: <exercise ids>`` for a student with superseded answers, else ``""``."""
    exercises = sorted({r["exercise_id"] for r in student.superseded})
    return f"; superseded: {', '.join(exercises)}" if exercises else ""


def printable(text: str) -> str:
    """``text`` with every character a terminal would act on (escape sequences, other control
    and format characters) written as a Python escape, so student text cannot move the cursor
    or recolour the terminal."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def case_twins(students: Iterable[str]) -> list[list[str]]:
    """Groups of student ids that are the same but for capitals (``ana.perez``,
    ``Ana.Perez``): probably one student, graded as several."""
    groups: dict[str, list[str]] = {}
    for student in students:
        groups.setdefault(student.casefold(), []).append(student)
    return [sorted(ids) for _, ids in sorted(groups.items()) if len(ids) > 1]


def terminal_summary(book: Gradebook, *, limit: int = 20) -> list[str]:
    """The lines printed after a run: the class per exercise, then the students whose files
    were combined or flagged (at most ``limit`` lines each), made :func:`printable`."""
    return [printable(line) for line in _summary_lines(book, limit)]


def _summary_lines(book: Gradebook, limit: int) -> list[str]:
    record = ClassRecord.read(book)
    lines = ["Class summary (per exercise: answered, passed, mean points of those who answered):"]
    for summary in summarise(record):
        if not summary.answered:
            continue
        row = summary.exercise
        line = (
            f"  {row['id']}: {summary.answered} answered, {summary.passed} passed, "
            f"mean {summary.mean:.1f} of {row['points']}"
        )
        if summary.failures:
            text, count = summary.failures.most_common(1)[0]
            line += f"; most common failure ({count}x): {text[:100]}"
        lines.append(line)
    combined = [
        f"  {s.student_id}: {len(s.files)} files combined{superseded_list(s)}"
        for s in record.students.values()
        if len(s.files) > 1
    ]
    flagged = [f"  {s.student_id}: {n}" for s in record.students.values() for n in flag_notes(s)]
    twins = [f"  {' and '.join(ids)}" for ids in case_twins(record.students)]
    for title, found in (
        ("Students with several files", combined),
        ("Flagged files", flagged),
        ("Student ids that differ only in capitals (graded as different students)", twins),
    ):
        if found:
            lines.append(f"{title} ({len(found)}):")
            lines += found[:limit]
            if len(found) > limit:
                lines.append(f"  ... and {len(found) - limit} more (see {GRADES})")
    return lines


# ----------------------------------------------------------------------------- all files


def write_reports(book: Gradebook, folder: str | os.PathLike) -> list[Path]:
    """Write every report into ``folder``; return the paths of the CSV files (``grades.csv``
    and ``results.csv`` first) and of the feedback folder."""
    folder = Path(folder)
    record = ClassRecord.read(book)
    written = {
        GRADES: grade_rows(book, record),
        RESULTS: result_rows(book),
        SUMMARY: summary_rows(record),
        "similar.csv": similar_rows(record),
    }
    paths = []
    for name, rows in written.items():
        write_csv(folder / name, rows)
        paths.append(folder / name)
    paths += write_exports(record, folder)
    paths.append(write_feedback(book, record, folder))
    return paths
