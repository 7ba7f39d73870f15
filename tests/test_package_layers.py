"""Specification of course_lib's layers: what each module may import.

The layers, lowest first (``course_lib/__init__.py`` is the map a reader sees): a module
imports from its own layer and lower ones only. Imports are read from the source, at module
and at function level, so that an import a function makes when called counts too.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "course_lib"

LAYERS: dict[str, tuple[str, ...]] = {
    "foundations": ("course_lib", "course_lib._checks", "course_lib._devices"),
    "data and tokenization": (
        "course_lib.vocab",
        "course_lib.tokenization",
        "course_lib.data",
        "course_lib.discretize",
        "course_lib.corpus",
    ),
    "model components": (
        "course_lib.embeddings",
        "course_lib.positional",
        "course_lib.rotary",
        "course_lib.attention",
        "course_lib.feedforward",
        "course_lib.normalization",
        "course_lib.encoder",
        "course_lib.decoder",
        "course_lib.transformer",
        "course_lib.cache",
        "course_lib.decoding",
        "course_lib.families",
        "course_lib.huggingface",
        "course_lib.recurrence",
    ),
    "training": (
        "course_lib.training",
        "course_lib.calibration",
        "course_lib.objectives",
        "course_lib.word2vec",
        "course_lib.translation",
        "course_lib.lm_tasks",
        "course_lib.ngram",
        "course_lib.language_model",
    ),
    "presentation": (
        "course_lib.plotting",
        "course_lib.diagrams",
        "course_lib.explorers",
        "course_lib.notebook",
        "course_lib._html",
        "course_lib._layout",
    ),
    "answers engine": ("course_lib.answers",),
    "exercises": ("course_lib.exercises",),
    "grading": ("course_lib.grading",),
}
ORDER = list(LAYERS)
# Model, data and training code runs where nothing can be drawn (a grader, a script, a GPU job).
NO_DISPLAY_LAYERS = ("data and tokenization", "model components", "training")
DISPLAY_LIBRARIES = ("matplotlib", "ipywidgets", "IPython")
# The one import that goes back, made when called: the model families load and export
# Hugging Face weights through the converter, which builds the model families.
ALLOWED_CYCLE_EDGES = {
    ("course_lib.families", "course_lib.huggingface"): {"from_hf", "to_hf"},
}


@dataclass(frozen=True)
class Import:
    """One import statement: where it is, what it imports, inside which function."""

    module: str  # the importing module
    target: str  # the module imported (for ``from m import name``: m, or m.name if a module)
    names: tuple[str, ...]  # the names imported from ``target`` (empty for ``import m``)
    line: int
    function: str | None  # the enclosing function, or None at module level

    def __str__(self) -> str:
        where = f"in {self.function}()" if self.function else "at module level"
        names = f" ({', '.join(self.names)})" if self.names else ""
        return f"{self.module}:{self.line} imports {self.target}{names} {where}"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imports_in(name: str, path: Path) -> list[Import]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []

    def visit(node: ast.AST, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = function
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner = child.name if function is None else function
            if isinstance(child, ast.Import):
                for alias in child.names:
                    found.append(Import(name, alias.name, (), child.lineno, function))
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join([*parts, *([child.module] if child.module else [])])
                for alias in child.names:
                    submodule = f"{base}.{alias.name}"
                    if submodule in modules():
                        found.append(Import(name, submodule, (), child.lineno, function))
                    else:
                        found.append(Import(name, base, (alias.name,), child.lineno, function))
            visit(child, inner)

    visit(ast.parse(path.read_text(encoding="utf-8")), None)
    return found


@functools.cache
def all_imports() -> list[Import]:
    return [i for name, path in modules().items() for i in _imports_in(name, path)]


def internal_imports() -> list[Import]:
    return [i for i in all_imports() if i.target.split(".")[0] == "course_lib"]


def layer_of(module: str) -> str:
    """The layer of a module: that of the longest prefix the table names."""
    best = max(
        (
            prefix
            for names in LAYERS.values()
            for prefix in names
            if module == prefix or module.startswith(prefix + ".")
        ),
        key=len,
        default=None,
    )
    if best is None:
        raise KeyError(module)
    return next(layer for layer, names in LAYERS.items() if best in names)


def subpackage(module: str) -> str:
    """The package a module belongs to: its parent, or itself for a package."""
    return module if modules()[module].name == "__init__.py" else module.rpartition(".")[0]


def test_every_module_of_the_package_belongs_to_one_layer():
    unplaced = []
    for module in modules():
        try:
            layer_of(module)
        except KeyError:
            unplaced.append(module)
    assert not unplaced, f"place these modules in a layer of LAYERS: {unplaced}"


def test_no_module_imports_from_a_layer_above_its_own():
    upward = [
        f"{i} ({layer_of(i.module)} -> {layer_of(i.target)})"
        for i in internal_imports()
        if ORDER.index(layer_of(i.target)) > ORDER.index(layer_of(i.module))
    ]
    assert not upward, "\n".join(upward)


def test_the_answers_engine_imports_nothing_of_course_lib_outside_itself():
    outside = [
        str(i)
        for i in internal_imports()
        if layer_of(i.module) == "answers engine" and layer_of(i.target) != "answers engine"
    ]
    assert not outside, "\n".join(outside)


@pytest.mark.parametrize("layer", NO_DISPLAY_LAYERS)
def test_model_data_and_training_modules_import_no_display_library_at_module_level(layer):
    found = [
        str(i)
        for i in all_imports()
        if i.function is None
        and i.module.split(".")[0] == "course_lib"
        and layer_of(i.module) == layer
        and i.target.split(".")[0] in DISPLAY_LIBRARIES
    ]
    assert not found, "\n".join(found)


def _private(module: str, names: tuple[str, ...], inside: str) -> bool:
    """Whether importing ``names`` from ``module`` reaches past the public names of a
    package other than ``inside`` and its parents."""
    owner = subpackage(module) if module in modules() else module
    if inside == owner or inside.startswith(owner + "."):
        return False  # its own package, or a package it is part of
    relative = module.removeprefix(owner).strip(".")
    hidden = [part for part in relative.split(".") if part.startswith("_")]
    return bool(hidden) or any(n.startswith("_") for n in names)


def test_no_module_imports_a_private_name_of_another_package():
    found = [
        str(i) for i in internal_imports() if _private(i.target, i.names, subpackage(i.module))
    ]
    assert not found, "\n".join(found)


def _cycle_edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in modules()}
    for i in internal_imports():
        target = i.target if i.target in modules() else i.target.rpartition(".")[0]
        allowed = ALLOWED_CYCLE_EDGES.get((i.module, target), set())
        if i.function in allowed or target == i.module:
            continue
        graph[i.module].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                connect(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return groups


def test_no_import_cycle_at_module_or_function_level():
    assert _cycles(_cycle_edges()) == []


def test_the_allowed_cycle_is_the_hugging_face_converter_imported_when_called():
    graph = _cycle_edges()
    for (importer, target), functions in ALLOWED_CYCLE_EDGES.items():
        assert target not in graph[importer]
        made = [i for i in internal_imports() if i.module == importer and i.target == target]
        assert made and all(i.function in functions for i in made), [str(i) for i in made]


def test_the_cycle_finder_finds_a_cycle_through_three_modules():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_the_package_docstring_names_every_layer_and_every_public_module():
    doc = (PACKAGE / "__init__.py").read_text(encoding="utf-8").lower()
    missing = [layer for layer in LAYERS if layer not in doc]
    public = [
        m for m in modules() if m.count(".") == 1 and not m.rpartition(".")[2].startswith("_")
    ]
    missing += [m for m in public if m not in doc]
    assert not missing, f"course_lib/__init__.py does not name {missing}"
