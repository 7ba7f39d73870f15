"""Helpers for the chapter notebooks: showing the library's code and printing stable numbers."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Iterable

import torch

__all__ = ["SourceCode", "fmt", "show_source"]


class SourceCode:
    """Source code that renders as a highlighted Python block in Jupyter and in the book.

    Its plain-text form is the code itself, so nbval compares the code that the reader sees
    with the library's current code: an edit to the library makes the chapter fail its check
    until the chapter is executed again.
    """

    def __init__(self, code: str) -> None:
        self.code = code

    def __repr__(self) -> str:
        return self.code

    def _repr_markdown_(self) -> str:
        return f"```python\n{self.code}\n```"


def _without_docstring(code: str) -> str:
    """Drop the docstring of the (single) function or class defined in ``code``."""
    definition = ast.parse(code).body[0]
    body = getattr(definition, "body", [])
    if not (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        return code
    lines = code.splitlines()
    start, end = body[0].lineno - 1, body[0].end_lineno  # 1-based, inclusive -> slice
    return "\n".join(lines[:start] + lines[end:])


def show_source(obj: object, *, docstring: bool = True) -> SourceCode:
    """The source of a ``course_lib`` function, class or method, for display in a chapter.

    Args:
        obj: the function, class or method.
        docstring: keep the docstring (set False to show only the code).
    """
    try:
        code = inspect.getsource(obj)  # type: ignore[arg-type]
    except (TypeError, OSError) as error:
        raise TypeError(f"cannot show the source of {obj!r}: {error}") from None
    code = textwrap.dedent(code).rstrip()
    if not docstring:
        code = _without_docstring(code)
    return SourceCode(code)


def fmt(values: torch.Tensor | Iterable[float] | float, digits: int = 3) -> str:
    """Numbers rounded to ``digits`` decimals with explicit signs: ``[+0.909, -0.416]``.

    The text does not depend on NumPy's or PyTorch's print options, so it is stable in
    stored notebook outputs. A scalar gives one number; anything else a flat list.
    """
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().reshape(-1).tolist()
    if isinstance(values, (int, float)):
        return f"{values:+.{digits}f}"
    return "[" + ", ".join(f"{float(v):+.{digits}f}" for v in values) + "]"
