"""Layouts that fit every width from a phone (390 px) to a wide screen, in ipywidgets 7.7 and 8.

No control gets a fixed pixel width that could overflow a narrow page: a control takes the
width it is given up to its usual size, and a row of controls wraps onto a second line when
they do not fit side by side.
"""

from __future__ import annotations

import ipywidgets as widgets

__all__ = ["FULL_WIDTH", "control_row", "fitting"]


# The widgets' own margins (2 px each side in ipywidgets 7 and 8) come on top of the width.
FULL_WIDTH = "calc(100% - 4px)"


def fitting(max_width: str) -> widgets.Layout:
    """A control's layout: the full width of its row (margins included), but no wider than
    ``max_width`` (a CSS width such as ``"340px"``)."""
    if not isinstance(max_width, str) or not max_width.strip():
        raise ValueError(f"max_width is a CSS width such as '340px', got {max_width!r}")
    return widgets.Layout(width=FULL_WIDTH, max_width=max_width)


def control_row(children: list[widgets.Widget]) -> widgets.HBox:
    """Controls side by side, wrapping onto further lines where the page is too narrow."""
    return widgets.HBox(children, layout=widgets.Layout(flex_flow="row wrap", width="100%"))
