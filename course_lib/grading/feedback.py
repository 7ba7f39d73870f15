"""A feedback page for each student: ``feedback/<student_id>.html``.

Each page is one self-contained HTML file (no scripts, no external links or styles, readable
offline) saying, for every exercise the student answered or had set by hand: the points, the
status, the checks and their messages, which file the answer came from, and notes (answers
superseded by a newer one, flagged files). Every piece of text is HTML-escaped.

What a page never shows, because it would let a student learn the grader's secret inputs:

- **The inputs drawn from the grading seed.** A check of a code exercise on a fixed, public
  input (one the student's own check also runs, with the same arguments) keeps its name and
  message. A check on an input drawn from the grading seed is called ``hidden case 1``,
  ``hidden case 2``, ... and its message is reduced to its kind (``wrong values``, ``wrong
  shape``, ``raised an error``, ...), without numbers, shapes or the error's text.
- **What the code printed** (it ran on the hidden inputs), and the grader's one-line message of
  a code exercise that had checks (it quotes the first failed check, possibly a hidden one).
- **The reference**: messages compare with the reference's values, never show its source.
- **Override reasons and similarity notes**, which are for the instructor: an override shows as
  "set by your instructor".
"""

from __future__ import annotations

import functools
import html
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from course_lib.answers import WHOLE_ANSWER_CHECKS, public_cases
from course_lib.exercises import CodeExercise, UnknownExerciseError, get_exercise
from course_lib.grading.gradebook import Gradebook
from course_lib.grading.records import ClassRecord, StudentRecord, write_text
from course_lib.grading.text import storable

__all__ = ["feedback_page", "public_labels", "shown_checks", "write_feedback"]

FOLDER = "feedback"
STATUS_WORDS = {
    "ok": "passed",
    "fail": "failed",
    "timeout": "stopped by a time limit",
    "error": "error",
    "invalid": "could not be graded",
}
HIDDEN_KINDS = (  # (start of the grader's message, what a hidden check says instead)
    ("expected shape", "wrong shape"),
    ("expected dtype", "wrong dtype"),
    ("expected a torch.Tensor", "not a tensor"),
    ("expected a tuple", "wrong kind of result"),
)
COURSE_LIB_NOTE = (
    "the code uses course_lib; graded answers must compute the result themselves, so this "
    "exercise scores 0"
)
STYLE = """
body { font-family: sans-serif; max-width: 60em; margin: 2em auto; padding: 0 1em; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
td, th { border: 1px solid #bbb; padding: 0.2em 0.6em; text-align: left; vertical-align: top; }
.ok { color: #1a7f37; } .bad { color: #b3261e; } .note { color: #555; }
"""


# ----------------------------------------------------------------------------- hidden inputs


def public_labels(exercise: CodeExercise, seed: int | None) -> set[str]:
    """The labels of the grading cases (of ``seed``) that students' own checks run too, with
    the same arguments; every other case is hidden (and ran alone, see
    :func:`course_lib.answers.judging.public_cases`)."""
    if seed is None:
        return set()
    cases = list(exercise.cases(seed))
    shown = public_cases(exercise, cases)
    return {case.label for case, public in zip(cases, shown, strict=True) if public}


@functools.lru_cache(maxsize=256)
def _public(exercise_id: str, seed: int | None) -> frozenset[str]:
    return frozenset(public_labels(get_exercise(exercise_id), seed))


def _hidden_message(status: str, message: str) -> str:
    if status == "pass":
        return "passed"
    if status == "timeout":
        return "stopped by the time limit"
    if status == "error":
        return "raised an error or could not run"
    for start, kind in HIDDEN_KINDS:
        if message.startswith(start):
            return kind
    if "NaN or infinite" in message:
        return "NaN or infinite entries"
    return "wrong values"


def shown_checks(checks: Iterable[dict[str, Any]], public: set[str]) -> list[tuple[str, str, str]]:
    """(name, status, message) of each check as a student may see it: checks on hidden inputs
    are numbered and their messages reduced to their kind; checks of the answer as a whole
    (its signature, its source, its definition) are shown as they are."""
    shown = []
    hidden = 0
    for check in checks:
        name, status = str(check.get("name", "")), str(check.get("status", ""))
        message = str(check.get("message", ""))
        if name in WHOLE_ANSWER_CHECKS or name in public:
            shown.append((name, status, message))
        else:
            hidden += 1
            shown.append((f"hidden case {hidden}", status, _hidden_message(status, message)))
    return shown


# ----------------------------------------------------------------------------- one page


def _text(text: object) -> str:
    """``text`` for the page: :func:`~course_lib.grading.text.storable` (no control
    characters or surrogates, also in a gradebook written before they were escaped on
    storing), then HTML-escaped."""
    return html.escape(storable(text, lines=True))


def _exercise(exercise_id: str) -> Any:
    try:
        return get_exercise(exercise_id)
    except UnknownExerciseError:
        return None


def _summary(row: Any, checks: list[tuple[str, str, str]], code: bool) -> str:
    """The one-line message of an exercise, safe to show."""
    message = row["message"] or ""
    if row["override_points"] is not None and row["status"] is None:
        return "no answer graded"
    if code and "uses course_lib" in message:
        return COURSE_LIB_NOTE
    if code and checks:
        failed = sum(status != "pass" for _, status, _ in checks)
        if not failed:
            return f"all {len(checks)} checks passed"
        return f"{failed} of {len(checks)} checks did not pass"
    return message


def _notes(row: Any) -> list[str]:
    notes = []
    if row["sha256"]:
        notes.append(f"answer from your file written at {row['created_utc']}")
    if row["superseded"]:
        notes.append(f"it replaces {row['superseded']} other answer(s) of yours to this exercise")
    if row["flag"]:
        notes.append(
            "that file is flagged: its time is in the future; it counts only because no other "
            "file answers this exercise"
        )
    if row["override_points"] is not None:
        notes.append("points set by your instructor")
    return notes


def _check_table(checks: list[tuple[str, str, str]]) -> str:
    if not checks:
        return ""
    rows = "".join(
        f'<tr><td>{_text(name)}</td><td class="{"ok" if status == "pass" else "bad"}">'
        f"{_text(status)}</td><td>{_text(message)}</td></tr>"
        for name, status, message in checks
    )
    return f"<table><tr><th>check</th><th>status</th><th>message</th></tr>{rows}</table>"


def _exercise_section(row: Any, seed: int | None) -> str:
    exercise = _exercise(row["exercise_id"])
    code = isinstance(exercise, CodeExercise)
    try:
        checks_data = json.loads(row["checks"] or "[]")
    except ValueError:
        checks_data = []
    public = _public(exercise.id, seed) if code else set()
    checks = (
        shown_checks(checks_data, public)
        if code
        else [
            (str(c.get("name", "")), str(c.get("status", "")), str(c.get("message", "")))
            for c in checks_data
        ]
    )
    title = exercise.title if exercise is not None else row["exercise_id"]
    status = STATUS_WORDS.get(row["status"] or "", "set by your instructor")
    notes = "".join(f"<li>{_text(n)}</li>" for n in _notes(row))
    return (
        f"<h2>{_text(title)} <small>({_text(row['exercise_id'])})</small></h2>"
        f"<p><b>{row['points']} of {row['max_points']} points</b>: {_text(status)}. "
        f"{_text(_summary(row, checks, code))}</p>"
        f'<ul class="note">{notes}</ul>{_check_table(checks)}'
    )


def _file_list(student: StudentRecord) -> str:
    items = [
        f"<li>written at {_text(f['created_utc'])}"
        + (" (flagged: its time looks wrong)" if f["flag"] else "")
        + "</li>"
        for f in reversed(student.files)
    ]
    for f in student.invalid:
        message = _text(_without_folders(str(f["message"])))
        items.append(f"<li>a file that could not be read: {message}</li>")
    return f"<ul>{''.join(items)}</ul>"


def _without_folders(message: str) -> str:
    """A file's message with the instructor's folders removed from the path it starts with."""
    head, sep, rest = message.partition(": ")
    return f"{os.path.basename(head)}{sep}{rest}" if sep else message


def feedback_page(student: StudentRecord, seed: int | None) -> str:
    """The HTML page of one student."""
    answered = [
        r for r in student.grades if r["status"] is not None or r["override_points"] is not None
    ]
    total = sum(r["points"] or 0 for r in answered)
    possible = sum(r["max_points"] for r in student.grades)
    sections = "".join(_exercise_section(r, seed) for r in answered)
    missing = len(student.grades) - len(answered)
    who = _text(student.student_id)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>Feedback for {who}</title><style>{STYLE}</style></head><body>"
        f"<h1>Feedback for {who}</h1>"
        f"<p><b>{total} of {possible} points</b> for the course's exercises. For each exercise "
        "the newest answer in your files counts. Checks on inputs you never saw are called "
        "<i>hidden case</i> and only say what kind of mistake they found.</p>"
        f"<p>Your files:</p>{_file_list(student)}"
        f"{sections}"
        f'<p class="note">{missing} exercise(s) of the course have no answer from you.</p>'
        "</body></html>\n"
    )


def write_feedback(book: Gradebook, record: ClassRecord, folder: str | os.PathLike) -> Path:
    """Write ``feedback/<student_id>.html`` for every student into ``folder``; return the
    feedback folder. Pages of students no longer in the gradebook are left alone."""
    target = Path(folder) / FOLDER
    target.mkdir(mode=0o700, exist_ok=True)
    for student in record.students.values():
        write_text(target / f"{student.student_id}.html", feedback_page(student, book.seed))
    return target
