"""The CSV files written from the gradebook.

``grades.csv``: a row per student (sorted by id), with the columns

- ``student_id``;
- one column per exercise of the course, in the course's order, named by the exercise's id:
  the points that count (an override when there is one), empty when the student's counted
  submission does not answer that exercise;
- ``total``: the sum of those points;
- ``submitted_utc`` and ``submission``: when the counted submission was written and the
  SHA-256 of its file (empty when the student has no valid file);
- ``notes``: what the numbers do not say: exercises that did not pass and why in one word
  (``fail``, ``timeout``, ``error``, ``invalid``), overrides, files that were not counted.

``results.csv``: a row per student and exercise that has a result or an override, with the
status, the points, the override and the grader's message.

Both are rewritten as a whole after every change (written to a temporary file first, then
renamed), so a reader never sees half a file.
"""

from __future__ import annotations

import csv
import io
import os
import tempfile
from pathlib import Path

from course_lib.grading.gradebook import Gradebook

__all__ = ["write_reports"]

GRADES = "grades.csv"
RESULTS = "results.csv"


def _write(path: Path, rows: list[list[object]]) -> None:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
            stream.write(buffer.getvalue())
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def grade_rows(book: Gradebook) -> list[list[object]]:
    """The rows of ``grades.csv``, header first."""
    exercises = [row["id"] for row in book.exercises()]
    files = book.student_files()
    graded = book.graded_submissions()
    by_student: dict[str, list] = {}
    for row in book.final_grades():
        by_student.setdefault(row["student_id"], []).append(row)
    rows: list[list[object]] = [
        ["student_id", *exercises, "total", "submitted_utc", "submission", "notes"]
    ]
    for student in book.students():
        cells = by_student.get(student, [])
        points = {r["exercise_id"]: r["points"] for r in cells if r["points"] is not None}
        notes = []
        counted = next((r["sha256"] for r in cells if r["sha256"]), None)
        mine = files.get(student, [])
        valid = [f for f in mine if f["status"] == "valid"]
        invalid = [f for f in mine if f["status"] == "invalid"]
        if counted is None:
            reason = f": {invalid[0]['message']}" if invalid else ""
            notes.append(f"no valid submission{reason}")
        elif invalid:
            notes.append(f"{len(invalid)} invalid file(s) not counted")
        for row in cells:
            if row["status"] not in (None, "ok"):
                notes.append(f"{row['exercise_id']}: {row['status']}")
            if row["override_points"] is not None:
                notes.append(f"{row['exercise_id']} set by hand: {row['override_reason']}")
        if counted is not None and counted not in graded:
            notes.append("not graded yet")
        created = next((f["created_utc"] for f in valid if f["sha256"] == counted), "")
        rows.append(
            [
                student,
                *(points.get(e, "") for e in exercises),
                sum(points.values()),
                created,
                counted or "",
                "; ".join(notes),
            ]
        )
    return rows


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


def write_reports(book: Gradebook, folder: str | os.PathLike) -> list[Path]:
    """Write ``grades.csv`` and ``results.csv`` into ``folder``; return their paths."""
    folder = Path(folder)
    paths = [folder / GRADES, folder / RESULTS]
    _write(paths[0], grade_rows(book))
    _write(paths[1], result_rows(book))
    return paths
