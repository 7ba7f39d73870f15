"""The source of a student's function, made self-contained so that a grader can run it alone.

A function written in a notebook uses imports from other cells (``torch``, ``math``, ``np``),
perhaps a constant or a helper function defined elsewhere. :func:`function_source` collects
what the function refers to and writes it out before the function itself::

    import math
    import torch

    BASE = 10000.0

    def helper(...): ...

    def positional_encoding(max_len, d_model): ...

Helpers from the student's own ``.py`` files are written out the same way: the grader has
only the standard library, torch and NumPy to import from.
"""

from __future__ import annotations

import ast
import inspect
import math
import sys
import textwrap
import types
from collections.abc import Callable, Iterator
from typing import NamedTuple

import numpy
import torch

from course_lib.answers.runner import importable_in_grading

__all__ = ["FunctionSource", "SourceUnavailable", "function_source"]

_LITERALS = (int, float, complex, str, bytes, bool, type(None))


class SourceUnavailable(Exception):
    """The source of the function cannot be read (defined with ``exec`` or in a REPL)."""


def _names(source: str, obj: object) -> set[str]:
    """The global names a definition needs.

    For a function: the names its code looks up globally, plus every name in its signature
    (annotations, defaults) and decorators, which run where it is defined. Its parameters and
    local variables are not included, even where a global of the same name exists. For a
    class: every name in its source.
    """
    tree = ast.parse(source)
    code = getattr(obj, "__code__", None)
    if (
        code is None
        or not tree.body
        or not isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef))
    ):
        return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    definition = tree.body[0]
    outside = [definition.args, *definition.decorator_list]
    if definition.returns is not None:
        outside.append(definition.returns)
    names = set(_global_names(code))
    for part in outside:
        names |= {node.id for node in ast.walk(part) if isinstance(node, ast.Name)}
    return names


def _global_names(code: types.CodeType) -> Iterator[str]:
    """Names that ``code`` (and code nested in it) looks up outside itself."""
    yield from code.co_names
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from _global_names(constant)


def _plain(value: object) -> object:
    """``value`` with NumPy scalars and subclasses of the number types (``np.float64``) made
    plain Python numbers, inside containers too, so that its ``repr`` needs no import."""
    if isinstance(value, numpy.generic) and value.shape == ():
        value = value.item()
    if isinstance(value, bool) or value is None:
        return value
    for kind in (int, float, complex, str, bytes):
        if isinstance(value, kind) and type(value) is not kind:
            return kind(value)
    if isinstance(value, (tuple, list, frozenset, set)):
        return type(value)(_plain(item) for item in value)
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    return value


def _is_literal(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)  # repr(inf) is not Python
    if isinstance(value, (tuple, list, frozenset, set)):
        return all(_is_literal(item) for item in value)
    if isinstance(value, dict):
        return all(_is_literal(k) and _is_literal(v) for k, v in value.items())
    return isinstance(value, _LITERALS)


def _source_of(obj: object) -> str:
    try:
        return textwrap.dedent(inspect.getsource(obj)).rstrip() + "\n"  # type: ignore[arg-type]
    except (OSError, TypeError) as error:
        name = getattr(obj, "__name__", repr(obj))
        advice = ""
        if inspect.isclass(obj):
            advice = (
                ": a class defined in a notebook cell cannot be read back on this Python; "
                "write it as functions, or put it in a .py file beside the notebook and import "
                "it from there"
            )
        raise SourceUnavailable(f"the source of {name} cannot be read ({error}){advice}") from None


class FunctionSource(NamedTuple):
    """The source text, and the global names it reads but could not write out."""

    text: str
    missing: tuple[str, ...]


def _carried(value: object) -> bool:
    """Whether a function or class is written into the submission with its source: those of
    the notebook and of the student's own modules, which grading does not have."""
    module = getattr(value, "__module__", None) or ""
    top = module.split(".")[0]
    return top == "__main__" or not (importable_in_grading(module) or top == "course_lib")


def _globals_of(obj: object) -> dict[str, object]:
    found = getattr(obj, "__globals__", None)
    if found is None:
        module = sys.modules.get(getattr(obj, "__module__", "") or "")
        found = vars(module) if module is not None else {}
    return found


def function_source(func: Callable) -> FunctionSource:
    """Python source that defines ``func`` with everything it uses.

    Modules become ``import`` lines and names imported from the standard library, torch and
    NumPy ``from ... import`` lines; simple constants (numbers, strings, their lists and
    dicts, torch dtypes) become assignments; functions and
    classes of the notebook or of the student's own modules are written out with their own
    source, recursively (a helper known under another name gets an alias line). Builtins
    are left out. The text runs on its own, as grading runs it.

    Globals whose value cannot be written out (a tensor, say), and helpers whose names clash,
    are listed in ``missing``: the text will not run on its own until they are defined.

    Raises:
        SourceUnavailable: when the source of ``func`` or of a helper cannot be read.
    """
    func = inspect.unwrap(func)
    if not isinstance(func, types.FunctionType):
        raise SourceUnavailable(f"expected a function defined with def, got {type(func).__name__}")
    imports: dict[str, str] = {}
    constants: dict[str, str] = {}
    definitions: dict[str, str] = {}  # the name a definition binds -> its source
    defined: dict[str, object] = {}  # that name -> the object
    aliases: dict[str, str] = {}  # another name a helper is known by -> its own name
    unresolved: set[str] = set()
    pending: list[object] = [func]
    while pending:
        current = pending.pop()
        own = current.__name__
        if own in defined:
            if defined[own] is not current:
                unresolved.add(own)  # two helpers of the same name from different places
            continue
        defined[own] = current
        definitions[own] = _source_of(current)
        code = getattr(current, "__code__", None)
        read_as_global = set(_global_names(code)) if code else set()
        if code is not None and code.co_freevars:  # a closure: values of an enclosing call
            unresolved.update(code.co_freevars)
        scope = _globals_of(current)
        for name in sorted(_names(definitions[own], current)):
            if name not in scope or (name in defined and defined[name] is scope[name]):
                continue
            value = scope[name]
            if isinstance(value, types.ModuleType):
                real = value.__name__
                imports[name] = f"import {real}" if real == name else f"import {real} as {name}"
            elif (inspect.isfunction(value) or inspect.isclass(value)) and _carried(value):
                if value.__name__ != name:
                    aliases[name] = value.__name__
                pending.append(value)
            elif _is_literal(_plain(value)):
                constants[name] = f"{name} = {_plain(value)!r}"
            elif isinstance(value, torch.dtype):  # written as torch.float32
                imports.setdefault("torch", "import torch")
                constants[name] = f"{name} = {value!r}"
            elif getattr(value, "__module__", None) and getattr(value, "__name__", None):
                source_module = value.__module__
                real = value.__name__
                alias = "" if real == name else f" as {name}"
                imports[name] = f"from {source_module} import {real}{alias}"
            elif name in read_as_global:
                unresolved.add(name)
    unresolved |= set(aliases) & set(definitions)  # an alias would replace a definition
    parts = [
        "\n".join(sorted(set(imports.values()))),
        "\n".join(constants[name] for name in sorted(constants)),
        "\n\n".join(definitions[name].rstrip() for name in reversed(list(definitions))),
        "\n".join(f"{name} = {real}" for name, real in sorted(aliases.items())),
    ]
    return FunctionSource("\n\n".join(part for part in parts if part) + "\n",
                          tuple(sorted(unresolved)))  # fmt: skip
