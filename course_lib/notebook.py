"""Helpers for the chapter notebooks: showing the library's code and printing stable numbers."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Iterable
from types import TracebackType

import torch

__all__ = ["SourceCode", "expect_error", "fmt", "show_source"]


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


class expect_error:  # lower case: it reads like a function, `with expect_error(...)`
    """Context manager that shows the error a block raises, and insists that it raises one.

    In a chapter, ``with expect_error(ValueError): bad_call()`` prints the error's type and
    message (wrapped to ``width`` columns) and carries on. If the block raises nothing it
    fails with ``AssertionError``, so a chapter that claims "this input is refused" checks
    the claim. Errors of other types propagate unchanged.

    Args:
        *types: the exception types the block is expected to raise.
        width: column at which the printed message wraps.
    """

    def __init__(self, *types: type[BaseException], width: int = 78) -> None:
        if not types:
            raise TypeError("expect_error needs at least one exception type")
        self.types = types
        self.width = width
        self.error: BaseException | None = None

    def __enter__(self) -> expect_error:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        names = " or ".join(t.__name__ for t in self.types)
        if error is None:
            raise AssertionError(f"expected {names}, but the block raised nothing")
        if not isinstance(error, self.types):
            return False
        self.error = error
        message = f"{type(error).__name__}: {error}"
        print(textwrap.fill(message, width=self.width, subsequent_indent="    "))
        return True
