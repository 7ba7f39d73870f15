"""A corpus of real English that every Python installation carries: the standard library's
docstrings and the language reference of :mod:`pydoc_data.topics`.

The book's language model needs real text that is there offline, on Colab as on a laptop,
with no one else's text committed to the repository. The interpreter that runs the book holds
some: the docstrings of its standard library (what ``help()`` shows) and the language
reference by topic (what ``help("assert")`` shows), about 1.9 MB of technical English.

**English, not code.** The corpus is the prose written *about* the code, not the code: what a
student wants to see a language model learn is sentences -- spelling, grammar, that "Return
the" is followed by a noun phrase -- and 1.9 MB of them is enough to show it while training in
minutes on a CPU (the source of the same modules is 9 MB, and a model of it would spend most
of its capacity on indentation and identifiers).

**What is read** (:func:`source_files`; :func:`build_corpus` reads any folder laid out like
the standard library). Nothing is imported: importing a module runs it (``antigravity`` opens
a browser, ``this`` prints, ``turtle`` wants a display), so every ``.py`` file is parsed with
:mod:`ast` and its docstrings taken with :func:`ast.get_docstring`, cleaned by
:func:`inspect.cleandoc` (the indentation common to the lines removed, tabs expanded); the
topics are read from ``pydoc_data/topics.py`` by :func:`ast.literal_eval`. The library
proper is, under ``sysconfig.get_paths()["stdlib"]``:

- every ``.py`` file whose top-level module or package is named in
  :data:`sys.stdlib_module_names`, the interpreter's own list of its standard library, which
  leaves out the test suite (``test/``), ``site-packages``, the build's generated
  ``_sysconfigdata_*``, ``config-*`` and the frozen-module fixtures ``__hello__``/``__phello__``;
- but not a file inside a directory called ``test``, ``tests`` or ``idle_test`` (the test
  suites some packages hold: ``ctypes/test``, ``unittest/test``, ``idlelib/idle_test``, ...);
- and not the parts that distributions ship as packages of their own (Debian and Ubuntu, on
  which Colab runs, or Fedora), so that whether they are installed does not change the corpus:
  :data:`LEFT_OUT` (the Tk GUI ``tkinter``, ``turtle``, ``turtledemo``, the IDLE editor
  ``idlelib``; ``lib2to3``, ``distutils``, ``ensurepip``); nor ``pydoc_data``, which is read
  as topics, not as docstrings.

A file that does not parse (it cannot, in the interpreter's own standard library, but a
patched installation might hold one) is skipped and named in :attr:`CorpusInfo.skipped`.
Python 3.11.7 reads 506 files and skips none.

**Documents.** One per module with at least one docstring (``module:json.decoder``) and one
per pydoc topic (``topic:assert``). A module's document is its name on the first line, then
its module docstring, then, in source order, the docstring of every class and function
(methods and nested functions included), each under a line with its owner's qualified name
within the module, separated by blank lines::

    json.decoder
    Implementation of JSONDecoder

    JSONDecoder
    Simple JSON <https://json.org> decoder
    ...

    JSONDecoder.decode
    Return the Python representation of ``s`` (a ``str`` instance
    containing a JSON document).

The header lines are kept because they make better training text: a docstring says "Return
the Python representation of s" without saying of what, and the name above it is what it is
about (``help()`` shows the two together); the headers also mark where one docstring ends and
the next begins. They are short: 6% of the corpus's bytes. A topic's document is its text,
which starts with its own title (``The "assert" statement``).

**Splits by document, stable across Python versions** (:func:`split_of`). A document's split
is decided by the SHA-256 of its name alone: the hash modulo 100 is its bucket, buckets 0-89
are ``"train"``, 90-94 ``"validation"`` and 95-99 ``"test"``. A module added in a later
Python therefore moves no other document from one split to another: between two Pythons, a
split gains or loses only documents that are new, removed or changed. A split's text is its
documents in the order of their names, joined by blank lines.

**Measured** (2026-11-29, on a machine whose 2 cores a test run was using): Python 3.11.7
reads 506 files and skips none; 520 documents (441 modules, 79 topics), 1,928,949 bytes:

==========  =========  =========
split       documents  bytes
==========  =========  =========
train       481        1,824,228
validation  16         39,153
test        23         65,568
==========  =========  =========

The held-out splits are small, 2% and 3.4% of the bytes (the validation split holds no topic):
with a few hundred documents of very unequal sizes, splitting by document rather than by
character gives that. Building takes 2.7 s of CPU time (4 to 9 s by the wall clock on that
busy machine), nearly all of it parsing; :func:`corpus` builds once per process.

On other Pythons (documents and bytes of train, validation, test; against 3.11, the documents
that are new, gone or changed): no document common to two versions is in different splits.

=======  =====  ============  =========================  ============================
Python   files  documents     bytes                      against 3.11
=======  =====  ============  =========================  ============================
3.10.13  490    468, 18, 23   1,789,898; 39,622; 64,745  6 new, 17 gone, 118 changed
3.11.7   506    481, 16, 23   1,824,228; 39,153; 65,568
3.12.1   507    481, 15, 23   1,858,757; 36,106; 67,329  5 new, 6 gone, 84 changed
3.13.0   525    485, 14, 23   1,898,974; 31,878; 58,067  23 new, 21 gone, 165 changed
=======  =====  ============  =========================  ============================
"""

from __future__ import annotations

import ast
import contextlib
import functools
import gc
import hashlib
import inspect
import platform
import sys
import sysconfig
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

__all__ = [
    "LEFT_OUT",
    "SPLITS",
    "Corpus",
    "CorpusInfo",
    "Document",
    "SplitInfo",
    "build_corpus",
    "corpus",
    "corpus_info",
    "documents",
    "source_files",
    "split_of",
]

SPLITS: tuple[str, ...] = ("train", "validation", "test")
"""The splits, in the order :func:`corpus_info` reports them."""

LEFT_OUT: frozenset[str] = frozenset(
    {"tkinter", "turtle", "turtledemo", "idlelib", "lib2to3", "distutils", "ensurepip"}
)
"""Standard-library packages left out: distributions ship them apart (or they need a display)."""

_TEST_DIRECTORIES = frozenset({"test", "tests", "idle_test"})
_TOPICS = "pydoc_data"
_VALIDATION_BUCKET = 90  # buckets 0-89 of 100 are the training split
_TEST_BUCKET = 95  # 90-94 validation, 95-99 test


@dataclass(frozen=True)
class Document:
    """One document of the corpus: a module's docstrings or a pydoc topic.

    Attributes:
        name: ``"module:<dotted name>"`` or ``"topic:<topic>"``; it alone decides the split.
        text: the document's text (no leading or trailing blank lines).
    """

    name: str
    text: str

    @property
    def split(self) -> str:
        """The split the document belongs to (:func:`split_of` of its name)."""
        return split_of(self.name)


@dataclass(frozen=True)
class SplitInfo:
    """The size and fingerprint of one split's text.

    Attributes:
        documents: how many documents the split holds.
        num_bytes: the length of its text in UTF-8 bytes (what bits per byte divide by).
        sha256: the SHA-256 of that UTF-8 text, in hex: equal hashes, equal texts.
    """

    documents: int
    num_bytes: int
    sha256: str


@dataclass(frozen=True)
class CorpusInfo:
    """What :func:`corpus` built, on this interpreter: printable in a chapter, checkable in a test.

    Attributes:
        python_version: the interpreter's version, e.g. ``"3.11.7"``; the corpus depends on it.
        files_read: the standard-library source files parsed.
        skipped: the files that did not parse, as paths relative to the standard library.
        modules: the documents made of a module's docstrings.
        topics: the documents made of a pydoc topic.
        train, validation, test: each split's :class:`SplitInfo`.
    """

    python_version: str
    files_read: int
    skipped: tuple[str, ...]
    modules: int
    topics: int
    train: SplitInfo
    validation: SplitInfo
    test: SplitInfo

    def split(self, name: str) -> SplitInfo:
        """The :class:`SplitInfo` of the split ``name`` (one of :data:`SPLITS`)."""
        return getattr(self, _check_split(name))

    def __str__(self) -> str:
        lines = [
            f"Python {self.python_version}: {self.files_read} files read, "
            f"{len(self.skipped)} skipped; {self.modules} modules and {self.topics} topics",
            f"{'split':<12}{'documents':>10}{'bytes':>12}  sha256",
        ]
        for name in SPLITS:
            info = self.split(name)
            lines.append(
                f"{name:<12}{info.documents:>10}{info.num_bytes:>12,}  {info.sha256[:16]}..."
            )
        return "\n".join(lines)


def _check_split(split: object) -> str:
    """Return ``split`` if it names a split; ``TypeError``/``ValueError`` listing them else."""
    valid = ", ".join(repr(name) for name in SPLITS)
    if not isinstance(split, str):
        raise TypeError(f"split must be a str, one of {valid}; got {type(split).__name__}")
    if split not in SPLITS:
        raise ValueError(f"split must be one of {valid}; got {split!r}")
    return split


def split_of(name: str) -> str:
    """The split of the document called ``name``, from the SHA-256 of the name alone.

    The hash modulo 100 is the document's bucket: 0-89 ``"train"``, 90-94 ``"validation"``,
    95-99 ``"test"``. It depends on nothing else (not on the other documents, nor on the
    Python version), so a new module never moves another one between splits.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    bucket = int(hashlib.sha256(name.encode("utf-8")).hexdigest(), 16) % 100
    if bucket < _VALIDATION_BUCKET:
        return "train"
    return "validation" if bucket < _TEST_BUCKET else "test"


def _stdlib() -> Path:
    """The directory of the running interpreter's standard library."""
    return Path(sysconfig.get_paths()["stdlib"])


def source_files(root: Path | str | None = None) -> list[Path]:
    """The standard library's own source files under ``root``, sorted (see the module's rule).

    Args:
        root: the standard library's directory; by default the running interpreter's.

    Returns:
        The ``.py`` files of the modules in :data:`sys.stdlib_module_names`, without test
        directories, :data:`LEFT_OUT` and ``pydoc_data``, sorted by their path under ``root``.
    """
    root = _stdlib() if root is None else Path(root)
    kept = []
    for entry in root.iterdir():  # site-packages, however large, is never walked
        top = entry.name.removesuffix(".py")
        if top not in sys.stdlib_module_names or top in LEFT_OUT or top == _TOPICS:
            continue
        if entry.is_dir():
            kept += [
                path
                for path in entry.rglob("*.py")
                if _TEST_DIRECTORIES.isdisjoint(path.relative_to(root).parts[:-1])
            ]
        elif entry.suffix == ".py":
            kept.append(entry)
    return sorted(kept, key=lambda path: path.relative_to(root).parts)


def _module_name(relative: Path) -> str:
    """``json/decoder.py`` -> ``json.decoder``; ``json/__init__.py`` -> ``json``."""
    parts = relative.with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _docstring(node: ast.AST) -> str | None:
    """The cleaned docstring of a module, class or function node; ``None`` if it has none."""
    text = ast.get_docstring(node, clean=False)
    if not text or not text.strip():
        return None
    # a lone surrogate (written "\udc80" in the source) cannot be UTF-8: keep it as written
    return inspect.cleandoc(text).encode("utf-8", "backslashreplace").decode("utf-8")


def _owned_docstrings(body: list[ast.stmt], prefix: str) -> Iterator[tuple[str, str]]:
    """``(qualified name, docstring)`` of the classes and functions in ``body``, depth first,
    in source order (methods and nested functions under their owner's name)."""
    for node in body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{prefix}{node.name}"
            text = _docstring(node)
            if text is not None:
                yield name, text
            yield from _owned_docstrings(node.body, f"{name}.")


def _module_text(module: str, tree: ast.Module) -> str | None:
    """A module's document text: its name, its docstring, then its owners' headed docstrings."""
    sections = [f"{owner}\n{text}" for owner, text in _owned_docstrings(tree.body, "")]
    docstring = _docstring(tree)
    if docstring is None and not sections:
        return None
    head = module if docstring is None else f"{module}\n{docstring}"
    return "\n\n".join([head, *sections])


@contextlib.contextmanager
def _cycle_collector_paused() -> Iterator[None]:
    """Pause Python's cycle collector while the block runs.

    Parsing makes millions of short-lived objects, and every so many of them the collector
    walks all the objects the process holds: with torch imported, building took 4.5 s of CPU
    time, 2.7 s with the collector paused (as without torch). Syntax trees hold no reference
    cycles, so nothing is left behind.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _parse(path: Path) -> ast.Module | None:
    """The syntax tree of a source file, or ``None`` if it does not parse."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes warn; -W error must not skip files
            return ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError, OSError):  # ValueError: a null byte in the source
        return None


def _topics(root: Path) -> dict[str, str]:
    """The pydoc topics (``help("assert")``), read from ``pydoc_data/topics.py`` unimported."""
    path = root / _TOPICS / "topics.py"
    tree = _parse(path)
    for node in [] if tree is None else tree.body:
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["topics"]:
            return ast.literal_eval(node.value)
    raise RuntimeError(
        f"expected the pydoc topics as 'topics = {{...}}' in {path}; this Python has none there"
    )


@dataclass(frozen=True)
class Corpus:
    """A built corpus: its documents, the text of each split, and its :class:`CorpusInfo`."""

    documents: tuple[Document, ...]
    texts: Mapping[str, str]
    info: CorpusInfo

    def text(self, split: str) -> str:
        """The text of the split ``split``: its documents in name order, joined by blank lines."""
        return self.texts[_check_split(split)]


def build_corpus(root: Path | str | None = None) -> Corpus:
    """Read the docstrings and topics of the standard library under ``root`` into a corpus.

    Args:
        root: the standard library's directory; by default the running interpreter's
            (``sysconfig.get_paths()["stdlib"]``). :func:`corpus` builds from that, once.

    Returns:
        The :class:`Corpus`. Nothing is imported: the files are parsed.
    """
    root = _stdlib() if root is None else Path(root)
    files = source_files(root)
    if not files:
        raise RuntimeError(
            f"found no standard-library source (.py files) under {root}: the corpus is read "
            "from it, and this Python (embedded or frozen?) does not ship it"
        )
    docs, skipped = [], []
    with _cycle_collector_paused():
        for path in files:
            tree = _parse(path)
            if tree is None:
                skipped.append(path.relative_to(root).as_posix())
                continue
            module = _module_name(path.relative_to(root))
            text = _module_text(module, tree)
            if text is not None:
                docs.append(Document(f"module:{module}", text))
        topics = [Document(f"topic:{name}", t.strip()) for name, t in _topics(root).items()]
    docs = sorted([*docs, *topics], key=lambda doc: doc.name)
    texts = {name: "\n\n".join(d.text for d in docs if d.split == name) for name in SPLITS}
    splits = {
        name: SplitInfo(
            documents=sum(d.split == name for d in docs),
            num_bytes=len(texts[name].encode("utf-8")),
            sha256=hashlib.sha256(texts[name].encode("utf-8")).hexdigest(),
        )
        for name in SPLITS
    }
    info = CorpusInfo(
        python_version=platform.python_version(),
        files_read=len(files) - len(skipped),
        skipped=tuple(skipped),
        modules=len(docs) - len(topics),
        topics=len(topics),
        **splits,
    )
    return Corpus(tuple(docs), MappingProxyType(texts), info)


@functools.cache
def _built() -> Corpus:
    """The running interpreter's corpus, built on first use and kept for the process."""
    return build_corpus()


def corpus(split: str) -> str:
    """The text of one split of the standard-library corpus, built from this interpreter.

    Args:
        split: ``"train"``, ``"validation"`` or ``"test"``.

    Returns:
        The split's documents in the order of their names, joined by blank lines. The same
        interpreter always gives the same text (:func:`corpus_info` has its SHA-256); it is
        built on the first call, in a few seconds, and kept for the process.
    """
    return _built().text(split)


def corpus_info() -> CorpusInfo:
    """The Python version, documents, bytes and SHA-256 of each split, and the files skipped."""
    return _built().info


def documents(split: str | None = None) -> tuple[Document, ...]:
    """The corpus's documents in the order of their names: all of them, or one split's."""
    docs = _built().documents
    if split is None:
        return docs
    split = _check_split(split)
    return tuple(doc for doc in docs if doc.split == split)
