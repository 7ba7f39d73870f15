"""What the grader's files are written from: the class as the gradebook records it, and the
one way every file is written.

The grading modules form a chain, each importing only those before it:
:mod:`~course_lib.grading.gradebook` (the SQLite store), :mod:`~course_lib.grading.similarity`
(answers that are the same once normalised), this module (a :class:`ClassRecord` read from
the gradebook once, :func:`write_text` and :func:`write_csv`), the writers of each file
(:mod:`~course_lib.grading.exports`, :mod:`~course_lib.grading.feedback`), then
:mod:`~course_lib.grading.report`, which writes them all.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from course_lib.grading.gradebook import Gradebook
from course_lib.grading.similarity import similar_answers
from course_lib.grading.text import csv_text

__all__ = ["ClassRecord", "StudentRecord", "write_csv", "write_text"]


# ----------------------------------------------------------------------------- writing


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, readable and writable by its owner only."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
    try:
        os.fchmod(handle, 0o600)
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_csv(path: Path, rows: list[list[object]]) -> None:
    """Write ``rows`` as CSV to ``path`` (see :func:`write_text`) with
    :func:`~course_lib.grading.text.csv_text`: every cell made inert, cells with line breaks
    or tabs quoted. Every CSV file of the grader is written here."""
    write_text(path, csv_text(rows))


# ----------------------------------------------------------------------------- the class


@dataclass
class StudentRecord:
    """What the gradebook says of one student."""

    student_id: str
    grades: list[Any] = field(default_factory=list)  # final_grades rows, in course order
    files: list[Any] = field(default_factory=list)  # submission_flags rows, oldest first
    invalid: list[Any] = field(default_factory=list)  # invalid files, newest first
    superseded: list[Any] = field(default_factory=list)  # answers rows that do not count
    similar: dict[str, Any] = field(default_factory=dict)  # exercise: similarity.Similar

    def points(self) -> dict[str, int]:
        return {r["exercise_id"]: r["points"] for r in self.grades if r["points"] is not None}

    def counted_files(self) -> list[Any]:
        """The files from which a counted answer comes, newest first."""
        used = {r["sha256"] for r in self.grades if r["sha256"]}
        return [f for f in reversed(self.files) if f["sha256"] in used]


@dataclass
class ClassRecord:
    """Everything the reports show, read from the gradebook once."""

    exercises: list[Any]
    students: dict[str, StudentRecord]
    graded: set[str]

    @classmethod
    def read(cls, book: Gradebook) -> ClassRecord:
        students = {s: StudentRecord(s) for s in book.students()}
        for row in book.final_grades():
            students[row["student_id"]].grades.append(row)
        for row in book.flags():
            students[row["student_id"]].files.append(row)
        for student, rows in book.student_files().items():
            students[student].invalid = [r for r in rows if r["status"] == "invalid"]
        for row in book.answers():
            if row["rank"] > 1:
                students[row["student_id"]].superseded.append(row)
        for (student, exercise_id), same in similar_answers(book).items():
            students[student].similar[exercise_id] = same
        return cls(book.exercises(), students, book.graded_submissions())

    def not_graded(self, student: StudentRecord) -> list[Any]:
        return [f for f in student.files if f["sha256"] not in self.graded]
