"""How results, hints and questions look: core ipywidgets in a notebook, plain text elsewhere.

Only widgets that exist in ipywidgets 7.7 (what Colab ships) and 8 are used: ``VBox``,
``HBox``, ``HTML``, ``HTMLMath``, ``Button``, ``RadioButtons``, ``Text``. Texts that may hold
maths (``$...$``) are shown in ``HTMLMath``, and status colours are mixed with the text colour
(:mod:`course_lib._html`), so they are readable in light and dark themes.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence

import ipywidgets as widgets

from course_lib._html import CODE_STYLE, block, color, text_html
from course_lib.answers import Check
from course_lib.exercises._registry import Exercise, Result

__all__ = ["in_notebook", "options_html", "result_html", "result_panel", "show"]

COLORS = {"passed": color("pass"), "failed": color("fail"), "not attempted": color("muted")}
CHECK_MARKS = {
    "pass": ("&#10004;", color("pass")),
    "fail": ("&#10008;", color("fail")),
    "error": ("&#9888;", color("fail")),
    "timeout": ("&#8987;", color("warn")),
}
_BOX = "border-left: 4px solid {color}; padding: 2px 10px; margin: 4px 0;"


def in_notebook() -> bool:
    """True inside a Jupyter kernel (Jupyter, Colab, VS Code), where widgets can be shown."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _execution_count() -> int | None:
    from IPython import get_ipython

    shell = get_ipython()
    return getattr(shell, "execution_count", None)


_shown: dict[int, int | None] = {}


def show(obj: object, widget_factory: Callable[[], object], text: str) -> None:
    """Show ``obj`` now: as a widget in a notebook, as ``text`` elsewhere.

    Remembers that ``obj`` was shown in this cell, so that when it is also the cell's last
    expression (``check(...)`` on the last line) it is not shown twice.
    """
    if in_notebook():
        from IPython.display import display

        display(widget_factory())
        _shown[id(obj)] = _execution_count()
    else:
        print(text)


def already_shown(obj: object) -> bool:
    """True if ``obj`` was shown by :func:`show` during the cell that is running now."""
    return id(obj) in _shown and _shown[id(obj)] == _execution_count()


def _check_row(check: Check) -> str:
    mark, tone = CHECK_MARKS[check.status]
    return (
        f"<tr><td style='color:{tone}; padding-right:6px; vertical-align:top'>{mark}</td>"
        f"<td style='vertical-align:top; padding-right:10px'><b>{html.escape(check.name)}</b></td>"
        f"<td style='vertical-align:top'>{text_html(check.message)}</td></tr>"
    )


def options_html(options: Sequence[tuple[str, str]]) -> str:
    """The options of a choice question as a list, each ``(key) text`` in a row of its own.

    The text lives in HTML, where it wraps at any width, and the radio buttons below it carry
    only the keys: RadioButtons gives each option a fixed-height row, so a long option would
    overflow onto the next one. Show it in an ``HTMLMath`` widget: the texts may hold maths.
    """
    rows = "".join(
        f'<li style="margin: 2px 0;"><b>({html.escape(key)})</b> {text_html(text)}</li>'
        for key, text in options
    )
    return f'<ul style="list-style: none; padding-left: 0; margin: 4px 0;">{rows}</ul>'


def result_html(result: Result, exercise: Exercise) -> str:
    """The result as an HTML fragment: a coloured header, one row per check, printed output.

    Show it in an ``HTMLMath`` widget: the checks' messages may hold maths.
    """
    tone = COLORS[result.status]
    title = f"{html.escape(exercise.id)}: {text_html(exercise.title)}"
    if result.status == "not attempted":
        advice = (
            f"replace <code style='{CODE_STYLE}'>raise NotImplementedError</code> with your code, "
            "then run the cell again"
            if exercise.kind == "code"
            else "give an answer, then check it"
        )
        body = f"<div>Not attempted yet: {advice}.</div>"
    else:
        points = f"{result.score}/{result.points} points"
        body = (
            f"<div style='color:{tone}'><b>{result.status.upper()}</b>: "
            f"{result.checks_passed} of {len(result.checks)} checks passed, {points}</div>"
            "<table style='border-collapse:collapse; margin-top:4px'>"
            + "".join(_check_row(check) for check in result.checks)
            + "</table>"
        )
    if result.output:
        body += (
            "<div style='margin-top:4px'>Printed by your code:</div>"
            f"<pre style='margin:2px 0; max-height:12em; overflow:auto'>"
            f"{html.escape(result.output)}</pre>"
        )
    return block(f"<div style='{_BOX.format(color=tone)}'><b>{title}</b>{body}</div>")


def result_panel(result: Result, exercise: Exercise, next_hint: Callable[[], str]) -> widgets.VBox:
    """The result with a "Show a hint" button under it."""
    report = widgets.HTMLMath(value=result_html(result, exercise))
    panel = widgets.VBox([report])
    if exercise.hints:
        button = widgets.Button(description="Show a hint")  # no icon: names differ in 7 and 8
        hints = widgets.HTMLMath()

        def reveal(_: object) -> None:
            hints.value = next_hint()

        button.on_click(reveal)
        panel.children = (report, widgets.HBox([button]), hints)
    return panel


def hints_html(exercise: Exercise, shown: int) -> str:
    """The hints revealed so far as HTML; show it in an ``HTMLMath`` widget."""
    items = "".join(f"<li>{text_html(h)}</li>" for h in exercise.hints[:shown])
    more = len(exercise.hints) - shown
    tail = f"{more} more hint{'s' * (more != 1)} left." if more else "That was the last hint."
    return block(
        f"<div style='{_BOX.format(color=color('warn'))}'><b>Hints for {html.escape(exercise.id)}"
        f"</b><ol style='margin:2px 0'>{items}</ol><div>{tail}</div></div>"
    )


def hints_text(exercise: Exercise, shown: int) -> str:
    lines = [f"Hints for {exercise.id} ({shown} of {len(exercise.hints)} shown):"]
    lines += [f"  {n}. {text}" for n, text in enumerate(exercise.hints[:shown], start=1)]
    if shown == len(exercise.hints):
        lines.append("  That was the last hint.")
    return "\n".join(lines)
