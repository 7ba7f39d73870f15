"""Checks every explorer's tests share: the book's stored states are what the live explorer
shows for the same values (course_lib/explorers/base.py)."""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as widgets

from course_lib.explorers.base import Explorer


def shown(view: widgets.Widget) -> object:
    """What a part's widget shows: an HTML text, or a figure output's PNG and metadata."""
    if isinstance(view, widgets.Output):
        assert len(view.outputs) == 1, f"a figure part shows {len(view.outputs)} outputs"
        output = view.outputs[0]
        return output["data"]["image/png"], output["metadata"]
    return view.value


def spread(keys: list[tuple[int, ...]], most: int) -> list[tuple[int, ...]]:
    """At most ``most`` of ``keys``, from the first to the last, evenly spread."""
    keys = sorted(keys)
    if len(keys) <= most:
        return keys
    step = (len(keys) - 1) / (most - 1)
    return sorted({keys[round(i * step)] for i in range(most)})


def assert_book_matches_live(
    make: Callable[..., Explorer], most: int = 6, book: Explorer | None = None
) -> Explorer:
    """Build ``make(book=True)`` and ``make(book=False)``; for up to ``most`` stored states of
    every part, set the live explorer's controls to that state's values (``Explorer.set``),
    and assert the live part shows exactly the stored HTML or figure. Returns the book one
    (``book``, if given, is used instead of building it)."""
    book = make(book=True) if book is None else book
    live = make(book=False)
    assert book.book and not live.book
    for part, states in book.states.items():
        assert states, f"part {part!r} stored no state"
        for key in spread(list(states), most):
            live.set(**book.state_values(part, key))
            assert not live.message.value or live.message.layout.display == "none", (
                f"{part} {key}: the live explorer refused the book's values: {live.message.value}"
            )
            assert shown(live.parts[part]) == shown(states[key]), (
                f"part {part!r}, state {key} ({book.state_values(part, key)}): the book stores "
                "something else than the live explorer shows"
            )
    return book
