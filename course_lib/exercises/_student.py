"""What a student calls: ``check``, ``ask``, ``hint`` and ``progress``."""

from __future__ import annotations

import html
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ipywidgets as widgets

from course_lib._html import CODE_STYLE, block, text_html
from course_lib._layout import fitting
from course_lib.exercises import _display, _store
from course_lib.exercises._registry import (
    ChoiceExercise,
    Exercise,
    Result,
    ValueExercise,
    check_timeout,
    get_exercise,
    list_exercises,
)

__all__ = ["Hints", "Progress", "Question", "ask", "check", "hint", "progress"]


def _record(exercise: Exercise, answer: object, result: Result) -> None:
    """Keep the answer and its result with the student's progress; a folder that cannot be
    written gets a warning that says what to do, and the result is still shown."""
    answer_data = exercise.answer_record(answer)

    def change(data: dict[str, Any]) -> None:
        entry = data["exercises"].setdefault(exercise.id, {})
        entry["answer"] = answer_data
        entry["result"] = result.to_dict()
        entry["attempts"] = entry.get("attempts", 0) + 1

    _save(exercise, change)


def _save(exercise: Exercise, change: Callable[[dict[str, Any]], None]) -> bool:
    """Apply ``change`` to the progress file; where it cannot be written, warn with what to
    do and return ``False`` (what was shown stays shown)."""
    try:
        _store.update(change)
    except _store.ProgressNotSaved as error:
        warnings.warn(f"{exercise.id}: {error.strerror}", RuntimeWarning, stacklevel=5)
        return False
    return True


def evaluate(
    exercise_id: str, answer: object, *, timeout: float | None = None, record: bool = True
) -> Result:
    """Run the checks of ``exercise_id`` on ``answer`` and record the result; show nothing."""
    exercise = get_exercise(exercise_id)
    if timeout is not None:
        timeout = check_timeout(timeout)
    checks, output = exercise.grade(answer, timeout=timeout)
    if not checks:
        status = "not attempted"
    else:
        status = "passed" if all(check.passed for check in checks) else "failed"
    result = Result(exercise.id, status, tuple(checks), exercise.points, output)
    if record and status != "not attempted":
        _record(exercise, answer, result)
    return result


def check(exercise_id: str, answer: object, *, timeout: float | None = None) -> Result:
    """Check ``answer`` to the exercise ``exercise_id``, show the result and record it.

    For a code exercise ``answer`` is your function (``check("positional-encoding",
    positional_encoding)``); for a choice exercise the key of an option (``"b"``); for a value
    exercise a number, a list of numbers or text such as ``"0.5, -0.25"``.

    In a notebook the result is shown as a panel (core ipywidgets), elsewhere as plain text.
    An answer that is still the exercise's stub counts as not attempted and is not recorded.
    Your code runs in a separate process, stopped after ``timeout`` seconds (default 10):
    errors, wrong types, NaN and endless loops become failed checks, not a broken kernel.

    Returns:
        The :class:`Result`: ``.passed``, ``.status``, ``.checks`` (one per check, with its
        message), ``.score``.
    """
    exercise = get_exercise(exercise_id)
    result = evaluate(exercise.id, answer, timeout=timeout)
    _display.show(
        result,
        lambda: _display.result_panel(result, exercise, lambda: _next_hint_html(exercise)),
        str(result),
    )
    return result


def _result_ipython_display(self: Result) -> None:
    if _display.already_shown(self):
        return
    exercise = get_exercise(self.exercise_id)
    _display.show(
        self,
        lambda: _display.result_panel(self, exercise, lambda: _next_hint_html(exercise)),
        str(self),
    )


Result._ipython_display_ = _result_ipython_display  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- hints


def _reveal(exercise: Exercise) -> int:
    """Count one more hint as shown (up to all of them); return how many are shown now."""
    shown = 0

    def change(data: dict[str, Any]) -> None:
        nonlocal shown
        entry = data["exercises"].setdefault(exercise.id, {})
        shown = min(entry.get("hints_shown", 0) + 1, len(exercise.hints))
        entry["hints_shown"] = shown

    if not _save(exercise, change):  # show the hint all the same
        change(_store.load())
    return shown


def _next_hint_html(exercise: Exercise) -> str:
    return _display.hints_html(exercise, _reveal(exercise))


@dataclass(frozen=True)
class Hints:
    """The hints of one exercise revealed so far (shown as a list)."""

    exercise: Exercise
    shown: int

    @property
    def texts(self) -> tuple[str, ...]:
        return self.exercise.hints[: self.shown]

    def __str__(self) -> str:
        return _display.hints_text(self.exercise, self.shown)

    def __repr__(self) -> str:  # short: the hints not revealed yet stay hidden
        return f"<{self.shown} of {len(self.exercise.hints)} hints of {self.exercise.id!r}>"

    def _repr_html_(self) -> str:
        return _display.hints_html(self.exercise, self.shown)

    def _ipython_display_(self) -> None:
        if not _display.already_shown(self):
            _display.show(self, lambda: widgets.HTMLMath(self._repr_html_()), str(self))


def hint(exercise_id: str) -> Hints:
    """Reveal the next hint of ``exercise_id`` (one more each call) and show all revealed so far.

    How many hints you have seen is remembered with your progress.
    """
    exercise = get_exercise(exercise_id)
    if not exercise.hints:
        raise ValueError(f"{exercise.id} has no hints")
    hints = Hints(exercise, _reveal(exercise))
    _display.show(hints, lambda: widgets.HTMLMath(hints._repr_html_()), str(hints))
    return hints


# --------------------------------------------------------------------------- progress


@dataclass(frozen=True)
class Progress:
    """Every exercise (of the course or of one chapter) with its recorded status.

    ``rows`` holds one dict per exercise: id, chapter, title, kind, points, status, score,
    attempts, hints (shown) and checked (UTC time of the last check).
    """

    rows: tuple[dict[str, Any], ...]

    @property
    def points(self) -> int:
        return sum(row["points"] for row in self.rows)

    @property
    def score(self) -> int:
        return sum(row["score"] for row in self.rows)

    def __str__(self) -> str:
        header = ("exercise", "kind", "points", "status", "tries", "hints")
        table = [header] + [
            (
                r["id"],
                r["kind"],
                f"{r['score']}/{r['points']}",
                r["status"],
                str(r["attempts"]),
                str(r["hints"]),
            )
            for r in self.rows
        ]
        widths = [max(len(row[c]) for row in table) for c in range(len(header))]
        lines = [
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in table
        ]
        passed = sum(r["status"] == "passed" for r in self.rows)
        lines.append(
            f"{passed} of {len(self.rows)} exercises passed, {self.score} of {self.points} points"
        )
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        # Each cell keeps room to its right; ids and statuses stay on one line (the block
        # scrolls sideways on a narrow page rather than break "not attempted" in two).
        pad = "padding: 2px 14px 2px 0; text-align: left; vertical-align: top"
        one_line = f"{pad}; white-space: nowrap"

        def row(r: dict) -> str:
            return (
                f"<tr><td style='{one_line}'><code style='{CODE_STYLE}'>"
                f"{html.escape(r['id'])}</code></td>"
                f"<td style='{pad}'>{text_html(r['title'])}</td>"
                f"<td style='{pad}'>{r['kind']}</td>"
                f"<td style='{one_line}'>{r['score']}/{r['points']}</td>"
                f"<td style='{one_line}; color:{_display.COLORS[r['status']]}'>{r['status']}</td>"
                f"<td style='{pad}'>{r['attempts']}</td><td style='{pad}'>{r['hints']}</td></tr>"
            )

        header = "".join(
            f"<th style='{one_line}'>{name}</th>"
            for name in ("exercise", "title", "kind", "points", "status", "tries", "hints")
        )
        passed = sum(r["status"] == "passed" for r in self.rows)
        return block(
            f"<table style='border-collapse: collapse'><tr>{header}</tr>"
            f"{''.join(row(r) for r in self.rows)}</table>"
            f"<p>{passed} of {len(self.rows)} exercises passed, {self.score} of "
            f"{self.points} points</p>"
        )


def progress(chapter: str | None = None) -> Progress:
    """Every exercise of the course (or of ``chapter``) with your status, score and attempts."""
    recorded = _store.load()["exercises"]
    rows = []
    for exercise in list_exercises(chapter):
        entry = recorded.get(exercise.id, {})
        status = entry.get("result", {}).get("status", "not attempted")
        if status not in _display.COLORS:
            status = "not attempted"
        rows.append(
            {
                "id": exercise.id,
                "chapter": exercise.chapter,
                "title": exercise.title,
                "kind": exercise.kind,
                "points": exercise.points,
                "status": status,
                "score": exercise.points if status == "passed" else 0,
                "attempts": entry.get("attempts", 0),
                "hints": entry.get("hints_shown", 0),
                "checked": entry.get("result", {}).get("checked_utc"),
            }
        )
    return Progress(tuple(rows))


# --------------------------------------------------------------------------- questions


class Question(widgets.VBox):
    """A choice or value exercise as a widget: an answer control, a Check button, feedback.

    Clicking Check runs :func:`check` on the answer and records it, like calling ``check``.
    A choice question lists its options as wrapped text, and its radio buttons carry only
    the keys ``(a)``, ``(b)``, ...: no option's text can run over the next one, at any width.
    The question, the options and the feedback are ``HTMLMath``: their ``$...$`` is typeset.
    The answer box fills the width up to 420 px, so it fits a phone.

    Attributes:
        answer: the RadioButtons (choice) or Text (value, its placeholder saying how many
            numbers it takes) widget.
        button: the Check button.
        feedback: an HTMLMath widget with the last result.
        result: the last :class:`Result`, or None.
    """

    def __init__(self, exercise: Exercise) -> None:
        self.exercise = exercise
        self.result: Result | None = None
        extra: list[widgets.Widget] = []
        if isinstance(exercise, ChoiceExercise):
            options = [(o.key, o.text) for o in exercise.options]
            extra.append(widgets.HTMLMath(_display.options_html(options)))
            self.answer = widgets.RadioButtons(
                options=[(f"({key})", key) for key, _ in options],
                value=None,
                description="Your answer:",
                style={"description_width": "initial"},
                layout=widgets.Layout(width="auto"),
            )
            prompt = exercise.question
        elif isinstance(exercise, ValueExercise):
            self.answer = widgets.Text(
                placeholder=exercise.answer_format,
                layout=fitting("420px"),
            )
            prompt = exercise.question
        else:
            raise TypeError(
                f"{exercise.id} is a {exercise.kind} exercise: write the function, then "
                f"call check({exercise.id!r}, your_function)"
            )
        self.button = widgets.Button(description="Check", button_style="primary")
        self.feedback = widgets.HTMLMath()
        self.button.on_click(lambda _: self.submit_answer())
        title = exercise.title if exercise.title.endswith(("?", "!", ".")) else f"{exercise.title}."
        question = widgets.HTMLMath(f"<b>{text_html(title)}</b> {text_html(prompt)}")
        super().__init__([question, *extra, self.answer, self.button, self.feedback])

    def submit_answer(self) -> Result:
        """Check the answer currently entered (what the Check button does)."""
        value = self.answer.value
        self.result = evaluate(self.exercise.id, value)
        self.feedback.value = _display.result_html(self.result, self.exercise)
        return self.result


def ask(exercise_id: str) -> Question:
    """The widget for a choice or value exercise; display it as a cell's last expression."""
    return Question(get_exercise(exercise_id))
