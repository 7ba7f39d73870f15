"""The HTML the widgets write: course text with its maths and code, and colours for any theme.

Course texts (questions, options, hints, feedback) write maths between ``$...$`` and code
between backticks. :func:`text_html` escapes such a text and turns its code into ``<code>``;
the maths is left for MathJax, which the ``HTMLMath`` widget calls (in the book, JupyterLab,
Classic Notebook and Colab), so it must be shown in an ``HTMLMath`` widget, not ``HTML``.

Colours are never fixed light-theme values. A status colour (pass, fail, ...) is its hue mixed
with the text colour around it (``color-mix(..., currentColor)``): dark text on a light page
makes it a dark shade, light text on a dark page a light one, so it stays readable in every
theme (the book's light and dark modes, JupyterLab's, VS Code's, Colab's) with no theme to
detect. :data:`TEXT_COLOURS` lists the text and background colours it is checked against: each
mix reaches 4.5:1 on all of them. A browser without ``color-mix`` (before 2023) shows the text
in the page's own colour.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

__all__ = [
    "CODE_STYLE",
    "HUES",
    "TABLE_STYLE",
    "TEXT_COLOURS",
    "block",
    "color",
    "contrast_ratio",
    "mixed",
    "rgb",
    "text_html",
]

HUES = {
    "pass": ("#1f883d", 60),
    "fail": ("#d1242f", 55),
    "muted": ("#7d8590", 50),
    "warn": ("#bf8700", 45),
}
"""Each status colour: its hue and how much of it (in %) goes into the mix with the text."""

TEXT_COLOURS = {
    "Classic Notebook": ("#000000", "#ffffff"),
    "JupyterLab light": ("#212121", "#ffffff"),
    "the book, light": ("#222832", "#ffffff"),
    "JupyterLab dark": ("#ffffff", "#111111"),
    "JupyterLab dark, secondary text": ("#e0e0e0", "#111111"),
    "the book, dark": ("#ced6dd", "#14181e"),
    "the book, dark, on its light panel behind outputs": ("#222832", "#ced6dd"),
    "VS Code dark": ("#cccccc", "#1e1e1e"),
    "a #121212 page": ("#ced6dd", "#121212"),
}
"""Text colour and background of the themes the status colours are checked in."""

CODE_STYLE = "color: inherit; background: rgba(127, 127, 127, 0.18); padding: 0 2px;"
"""Inline code in the text colour of the page, on a tint that suits light and dark pages."""


TABLE_STYLE = "border-collapse: separate; border-spacing: 12px 2px;"
"""A table of numbers with room between its columns (the book's style sheet collapses a
table's borders and leaves its cells without padding)."""


def color(name: str) -> str:
    """The CSS value of the status colour ``name`` (``pass``, ``fail``, ``muted``, ``warn``)."""
    if name not in HUES:
        raise ValueError(f"no status colour {name!r}; choose one of {', '.join(HUES)}")
    hue, percent = HUES[name]
    return f"color-mix(in srgb, {hue} {percent}%, currentColor)"


def mixed(name: str, text: str) -> str:
    """The ``#rrggbb`` colour :func:`color` gives ``name`` where the text colour is ``text``."""
    hue, percent = HUES[name]
    share = percent / 100
    channels = (
        round(int(hue[i : i + 2], 16) * share + int(text[i : i + 2], 16) * (1 - share))
        for i in (1, 3, 5)
    )
    return "#" + "".join(f"{c:02x}" for c in channels)


def rgb(hex_colour: str) -> tuple[int, int, int]:
    """The red, green and blue channels (0-255) of a ``#rrggbb`` colour."""
    return tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


def contrast_ratio(first: Sequence[float], second: Sequence[float]) -> float:
    """The WCAG 2 contrast ratio of two colours given as red, green, blue channels (0-255)."""

    def luminance(channels: Sequence[float]) -> float:
        linear = [
            c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
            for c in (v / 255 for v in channels[:3])
        ]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    high, low = sorted((luminance(first), luminance(second)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def block(fragment: str) -> str:
    """``fragment`` in a block that scrolls sideways rather than spill out of a narrow page."""
    return f"<div class='course-lib' style='overflow-x: auto'>{fragment}</div>"


_CODE = re.compile(r"`([^`]+)`")


def text_html(text: str) -> str:
    """A course text as HTML: escaped, `code` as ``<code>``, ``$maths$`` left for MathJax."""
    if not isinstance(text, str):
        raise TypeError(f"expected a text, got {type(text).__name__}")
    return _CODE.sub(
        lambda match: f"<code style='{CODE_STYLE}'>{match.group(1)}</code>", html.escape(text)
    )
