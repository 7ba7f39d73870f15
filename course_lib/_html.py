"""The HTML the widgets write: course text with its maths and code, and colours for both themes.

Course texts (questions, options, hints, feedback) write maths between ``$...$`` and code
between backticks. :func:`text_html` escapes such a text and turns its code into ``<code>``;
the maths is left for MathJax, which the ``HTMLMath`` widget calls (in the book, JupyterLab,
Classic Notebook and Colab), so it must be shown in an ``HTMLMath`` widget, not ``HTML``.

Colours are never written as fixed light-theme values: every colour is a CSS variable of the
``course-lib`` class, set by :data:`THEME_STYLE` for the light theme and again for the dark
themes (the book's ``html[data-theme=dark]``, JupyterLab's ``body[data-jp-theme-light=false]``,
VS Code's ``body.vscode-dark``), with the light value as the fallback where the style element
is dropped. Each colour reaches 4.5:1 on its theme's background.
"""

from __future__ import annotations

import html
import re

__all__ = [
    "CODE_STYLE",
    "DARK",
    "LIGHT",
    "THEME_STYLE",
    "color",
    "text_html",
    "themed",
]

LIGHT = {"pass": "#1a7f37", "fail": "#cf222e", "muted": "#57606a", "warn": "#9a6700"}
DARK = {"pass": "#4ac26b", "fail": "#ff7b72", "muted": "#9198a1", "warn": "#d29922"}

_DARK_SELECTORS = (
    "html[data-theme='dark'] .course-lib",
    "body[data-jp-theme-light='false'] .course-lib",
    "body.vscode-dark .course-lib",
)


def _variables(palette: dict[str, str]) -> str:
    return "".join(f"--course-{name}:{value};" for name, value in palette.items())


THEME_STYLE = (
    f"<style>.course-lib{{{_variables(LIGHT)}}}"
    f"{', '.join(_DARK_SELECTORS)}{{{_variables(DARK)}}}</style>"
)
"""The style element that sets the colour variables for the light and the dark themes."""

CODE_STYLE = "color: inherit; background: rgba(127, 127, 127, 0.18); padding: 0 2px;"
"""Inline code in the text colour of the page, on a tint that suits light and dark pages."""


def color(name: str) -> str:
    """The CSS value of the theme colour ``name`` (``pass``, ``fail``, ``muted``, ``warn``)."""
    if name not in LIGHT:
        raise ValueError(f"no theme colour {name!r}; choose one of {', '.join(LIGHT)}")
    return f"var(--course-{name}, {LIGHT[name]})"


def themed(fragment: str) -> str:
    """``fragment`` inside a ``course-lib`` block, after the style element its colours need;
    the block scrolls sideways rather than spill out of a narrow page."""
    return f"{THEME_STYLE}<div class='course-lib' style='overflow-x: auto'>{fragment}</div>"


_CODE = re.compile(r"`([^`]+)`")


def text_html(text: str) -> str:
    """A course text as HTML: escaped, `code` as ``<code>``, ``$maths$`` left for MathJax."""
    if not isinstance(text, str):
        raise TypeError(f"expected a text, got {type(text).__name__}")
    return _CODE.sub(
        lambda match: f"<code style='{CODE_STYLE}'>{match.group(1)}</code>", html.escape(text)
    )
