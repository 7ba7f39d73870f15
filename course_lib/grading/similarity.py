"""Code answers identical to another student's, once names, comments and layout are set aside.

Two counted answers to the same code exercise are *similar* when their normalised source is
the same. Normalising (:func:`normalised_source`) parses the source with :mod:`ast`, which
drops comments and layout; removes docstrings; and renames every name the code binds or uses
(functions, classes, parameters, variables, but not attributes, imported modules' own names or
Python's builtins) to ``name0``, ``name1``, ... in order of first appearance. Answers that are
only a stub (a function whose body is ``pass``, ``...`` or ``raise NotImplementedError``) and
answers that are not Python are left out.

Nothing is deducted: ``similar.csv`` lists the groups and each student's row in
``grades.csv`` names the others, for the instructor to look at.
"""

from __future__ import annotations

import ast
import builtins
import collections
import functools
import hashlib
from typing import Any, NamedTuple

from course_lib.grading.gradebook import Gradebook

__all__ = ["Similar", "normalised_source", "similar_answers"]

BUILTINS = frozenset(dir(builtins))
NAMED = 10  # at most this many other students are named; a larger group is counted


class _Renamer(ast.NodeTransformer):
    """Renames names canonically, in order of first appearance."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def rename(self, name: str) -> str:
        if name in BUILTINS:
            return name
        return self.names.setdefault(name, f"name{len(self.names)}")

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self.rename(node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = self.rename(node.arg)
        node.annotation = None
        return node

    def _definition(self, node: Any) -> Any:
        node.name = self.rename(node.name)
        _drop_docstring(node)
        if hasattr(node, "returns"):
            node.returns = None
        self.generic_visit(node)
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _definition

    def visit_alias(self, node: ast.alias) -> ast.alias:
        """The name an import binds is renamed: ``import torch`` and ``import torch as T``
        bind a name of the same canonical form."""
        if node.name != "*":
            node.asname = self.rename(node.asname or node.name.split(".")[0])
        return node


def _drop_docstring(node: Any) -> None:
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        if isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]


def _is_stub(tree: ast.Module) -> bool:
    """Whether every function in ``tree`` only passes or raises ``NotImplementedError``."""
    functions = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not functions or len(functions) != len(
        [n for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom))]
    ):
        return False
    for function in functions:
        _drop_docstring(function)
    return all(len(f.body) == 1 and _trivial(f.body[0]) for f in functions)


def _trivial(statement: ast.stmt) -> bool:
    if isinstance(statement, ast.Pass):
        return True
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
        return statement.value.value is Ellipsis
    if isinstance(statement, ast.Raise) and statement.exc is not None:
        raised = statement.exc.func if isinstance(statement.exc, ast.Call) else statement.exc
        return isinstance(raised, ast.Name) and raised.id == "NotImplementedError"
    return False


def normalised_source(source: object) -> str | None:
    """The source with comments, docstrings, layout and names made canonical; ``None`` for a
    stub or text that is not Python."""
    return _normalised(source) if isinstance(source, str) else None


@functools.lru_cache(maxsize=4096)
def _normalised(source: str) -> str | None:
    try:
        tree = ast.parse(source)
        _drop_docstring(tree)
        if _is_stub(tree):
            return None
        return ast.unparse(_Renamer().visit(tree))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _sources(book: Gradebook) -> dict[tuple[str, str], str]:
    """The normalised source of each counted code answer, by (student, exercise)."""
    code = {row["id"] for row in book.exercises() if row["kind"] == "code"}
    found: dict[tuple[str, str], str] = {}
    documents: dict[str, dict[str, Any]] = {}
    for row in book.final_grades():
        if row["exercise_id"] not in code or not row["sha256"]:
            continue
        if row["sha256"] not in documents:
            documents[row["sha256"]] = book.document(row["sha256"])
        entry = next(
            (e for e in documents[row["sha256"]]["exercises"] if e["id"] == row["exercise_id"]),
            None,
        )
        if entry is None or not isinstance(entry.get("answer"), dict):
            continue
        normal = normalised_source(entry["answer"].get("source"))
        if normal is not None:
            found[row["student_id"], row["exercise_id"]] = normal
    return found


def others(students: list[str], student: str) -> list[str]:
    """The students of a group other than ``student``, sorted; a group of more than
    ``NAMED + 1`` is summarised as ``["N other students"]``."""
    if len(students) > NAMED + 1:
        return [f"{len(students) - 1} other students"]
    return sorted(s for s in students if s != student)


class Similar(NamedTuple):
    """A counted code answer that is the same as other students' once normalised."""

    group: str  # a short key shared by the answers of one group
    others: list[str]  # the other students (see :func:`others`)


def similar_answers(book: Gradebook) -> dict[tuple[str, str], Similar]:
    """A :class:`Similar` for each (student, exercise) whose counted code answer is the same
    as another student's once normalised."""
    groups: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
    for (student, exercise_id), normal in _sources(book).items():
        groups[exercise_id, normal].append(student)
    similar = {}
    for (exercise_id, normal), students in groups.items():
        if len(students) > 1:
            text = f"{exercise_id}\n{normal}".encode("utf-8", "surrogatepass")
            key = hashlib.sha256(text).hexdigest()[:8]
            for student in students:
                similar[student, exercise_id] = Similar(key, others(students, student))
    return similar
