"""Grades in the CSV formats that Canvas and Moodle import as they are: one column per chapter.

Both files have a column per chapter that has exercises, named by the chapter (its notebook's
name, e.g. ``positional-encoding``), holding the sum of the points that count for the
chapter's exercises (overrides included). The cell is empty, not 0, when the student has no
answer and no override in that chapter.

``canvas.csv`` follows the layout of Canvas's gradebook export, which its gradebook import
reads: the columns ``Student``, ``ID``, ``SIS User ID``, ``SIS Login ID`` and ``Section``, then
one column per assignment, and a second row whose ``Student`` cell reads ``Points Possible``
with each chapter's maximum. The
student id goes into ``SIS User ID`` and ``SIS Login ID`` (Canvas matches a row on either) and
into ``Student``; ``ID`` (Canvas's own number) and ``Section`` stay empty.

``moodle.csv`` follows Moodle's "Import from CSV": a column identifying the user, here
``ID number`` holding the student id, mapped on import to the user field that holds the same
ids (ID number, email address or username), then one column per grade item.
"""

from __future__ import annotations

import os
from pathlib import Path

from course_lib.grading.records import ClassRecord, StudentRecord, write_csv

__all__ = ["canvas_rows", "moodle_rows", "write_exports"]

CANVAS = "canvas.csv"
MOODLE = "moodle.csv"
CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
POINTS_POSSIBLE = "    Points Possible"


def chapters(record: ClassRecord) -> dict[str, int]:
    """Each chapter with exercises, in the course's order, with its maximum points."""
    found: dict[str, int] = {}
    for row in record.exercises:
        found[row["chapter"]] = found.get(row["chapter"], 0) + row["points"]
    return found


def chapter_points(record: ClassRecord, student: StudentRecord) -> dict[str, int]:
    """The student's points per chapter, for the chapters where something counts."""
    chapter_of = {row["id"]: row["chapter"] for row in record.exercises}
    found: dict[str, int] = {}
    for row in student.grades:
        if row["points"] is not None:
            chapter = chapter_of[row["exercise_id"]]
            found[chapter] = found.get(chapter, 0) + row["points"]
    return found


def canvas_rows(record: ClassRecord) -> list[list[object]]:
    """The rows of ``canvas.csv``: header, ``Points Possible``, a row per student."""
    maxima = chapters(record)
    rows: list[list[object]] = [
        [*CANVAS_COLUMNS, *maxima],
        [POINTS_POSSIBLE, "", "", "", "", *maxima.values()],
    ]
    for student in record.students.values():
        points = chapter_points(record, student)
        who = student.student_id
        rows.append([who, "", who, who, "", *(points.get(c, "") for c in maxima)])
    return rows


def moodle_rows(record: ClassRecord) -> list[list[object]]:
    """The rows of ``moodle.csv``: header, a row per student."""
    maxima = chapters(record)
    rows: list[list[object]] = [["ID number", *maxima]]
    for student in record.students.values():
        points = chapter_points(record, student)
        rows.append([student.student_id, *(points.get(c, "") for c in maxima)])
    return rows


def write_exports(record: ClassRecord, folder: str | os.PathLike) -> list[Path]:
    """Write ``canvas.csv`` and ``moodle.csv`` into ``folder``; return their paths."""
    folder = Path(folder)
    write_csv(folder / CANVAS, canvas_rows(record))
    write_csv(folder / MOODLE, moodle_rows(record))
    return [folder / CANVAS, folder / MOODLE]
