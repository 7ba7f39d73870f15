"""Shared facts and helpers for the tests: where things are, what _config.yml says, and how to
run widget cells in a kernel under ipywidgets 8 and 7.7."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
import yaml

from tasks import WIDGET_STATE, WIDGET_VIEW, notebook_client

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ROOT / "chapters"
WIDGETS_7 = Path(sys.prefix) / "ipywidgets-7.7"  # Colab's ipywidgets, installed by `tasks.py setup`

# The session's fresh progress folder (COURSE_LIB_HOME) is set by the conftest.py at the root.


def book_config() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))


def toc_files() -> list[str]:
    """Every file of _toc.yml (without suffix), in reading order, root first, sections included."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"]]

    def walk(entries: list[dict]) -> None:
        for entry in entries:
            if "file" in entry:
                files.append(entry["file"])
            walk(entry.get("sections", []))

    for part in toc.get("parts", []):
        walk(part.get("chapters", []))
    walk(toc.get("chapters", []))
    return files


def chapter_notebooks() -> list[Path]:
    return sorted(CHAPTERS.glob("*.ipynb"))


def read_notebook(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def run_cells_in_kernel(
    cells: list[str], folder: Path, timeout: int = 180
) -> nbformat.NotebookNode:
    """Run code cells in a fresh python3 kernel (in ``folder``), storing the widget state.

    Uses the project's ``tasks.notebook_client``, which does not miss a cell's reply while an
    Output widget talks to the kernel (nbclient issue 312).
    """
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = notebook_client(notebook, kernel_name="python3", timeout=timeout,
                             store_widget_state=True,
                             resources={"metadata": {"path": str(folder)}})  # fmt: skip
    client.execute()
    return notebook


def failed_messages(exercise_id: str, answer) -> str:
    """``name: message`` of every failed check of ``answer``, joined by `` | ``, after asserting
    that the answer failed and scored nothing."""
    from course_lib.exercises import evaluate

    result = evaluate(exercise_id, answer)
    assert result.status == "failed" and result.score == 0, str(result)
    return " | ".join(f"{c.name}: {c.message}" for c in result.checks if not c.passed)


def all_widgets(widget):
    """``widget`` and, depth first, every widget inside it."""
    yield widget
    for child in getattr(widget, "children", ()):
        yield from all_widgets(child)


def used_widget_types(widget) -> set[str]:
    """The class names of the widgets inside ``widget`` (its own class left out)."""
    return {type(w).__name__ for w in all_widgets(widget)} - {type(widget).__name__}


@dataclass(frozen=True)
class WidgetKernel:
    """The ipywidgets a test kernel imports, and the model version its stored state must carry."""

    name: str  # "8" (requirements.txt) or "7.7" (Colab's)
    controls_version: str  # of the @jupyter-widgets/controls models

    def check_version(self, printed: str) -> None:
        """``printed`` is what the kernel printed for ``ipywidgets.__version__``."""
        if self.name == "8":
            assert printed.startswith("8."), printed
        else:
            assert printed == "7.7.1\n", printed


@pytest.fixture(
    params=[WidgetKernel("8", "2.0.0"), WidgetKernel("7.7", "1.5.0")],
    ids=["ipywidgets-8", "ipywidgets-7.7-as-on-colab"],
)
def widget_kernel(request, monkeypatch) -> WidgetKernel:
    """Each kernel test runs twice: with ipywidgets 8, and with 7.7 first on the kernel's path."""
    if request.param.name == "7.7":
        missing = f"{WIDGETS_7} is missing: `python3 tasks.py setup` installs ipywidgets 7.7 there"
        assert (WIDGETS_7 / "ipywidgets").is_dir(), missing
        monkeypatch.setenv("PYTHONPATH", str(WIDGETS_7))
    return request.param


@dataclass(frozen=True)
class RenderedCells:
    """What a kernel run of widget cells left in its notebook."""

    notebook: nbformat.NotebookNode
    outputs: list  # every output of every cell, in order
    views: list[dict]  # the widget views the cells displayed, in order
    models: dict[str, dict]  # the stored widget state: model id -> model

    def model_names(self) -> set[str]:
        return {m["model_name"] for m in self.models.values()}

    def values(self) -> str:
        """The ``value`` of every stored model, as one JSON text to search."""
        return json.dumps([m["state"].get("value") for m in self.models.values()])

    def figures_stored(self) -> list[bool]:
        """For each Output widget: whether its stored outputs hold a PNG figure."""
        return [
            any("image/png" in out.get("data", {}) for out in m["state"].get("outputs", []))
            for m in self.models.values()
            if m["model_name"] == "OutputModel"
        ]


def render_in_kernel(cells: list[str], folder: Path, kernel: WidgetKernel) -> RenderedCells:
    """Run widget ``cells`` in a fresh kernel; the first must print ``ipywidgets.__version__``.

    Checks what every such test needs: no cell raised, the kernel imported ``kernel``'s
    ipywidgets, every displayed view has its model stored, and every controls model carries
    ``kernel.controls_version`` (what a page's widget manager reads to render it).
    """
    notebook = run_cells_in_kernel(cells, folder)
    outputs = [o for cell in notebook.cells for o in cell.outputs]
    errors = [o for o in outputs if o.output_type == "error"]
    assert not errors, f"{errors[0].ename}: {errors[0].evalue}" if errors else ""
    kernel.check_version(notebook.cells[0].outputs[0].text)
    models = notebook.metadata["widgets"][WIDGET_STATE]["state"]
    views = [o.data[WIDGET_VIEW] for o in outputs if WIDGET_VIEW in o.get("data", {})]
    assert all(view["model_id"] in models for view in views)
    versions = {m["model_module_version"] for m in models.values()
                if m["model_module"] == "@jupyter-widgets/controls"}  # fmt: skip
    assert versions == {kernel.controls_version}
    return RenderedCells(notebook, outputs, views, models)


@pytest.fixture(scope="session")
def book_html(tmp_path_factory) -> Path:
    """The book built once per test run into a temporary folder (never _build/): its html/.

    Under pytest-xdist the first worker that needs it builds it in the folder the workers
    share and the others wait for it (a file lock), so that the pages' tests can run on
    every worker (conftest.py at the root groups them by page)."""
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the run's folder, above each worker's own
    out, failed = shared / "book", shared / "book-build-failed.txt"
    html = out / "_build" / "html"
    with FileLock(shared / "book.lock"):
        if failed.exists():
            pytest.fail(failed.read_text(), pytrace=False)
        if not (html / "index.html").exists():
            out.mkdir(exist_ok=True)
            jupyter_book = Path(sys.executable).parent / "jupyter-book"
            result = subprocess.run(
                [jupyter_book, "build", str(ROOT), "--path-output", str(out), "--all",
                 "--warningiserror", "--keep-going"],
                capture_output=True, text=True, timeout=600,
            )  # fmt: skip
            if result.returncode != 0:
                failed.write_text(f"the book build failed:\n{result.stdout[-6000:]}")
                pytest.fail(failed.read_text(), pytrace=False)
    return html


@pytest.fixture(scope="session")
def browser_visits() -> dict:
    """What Chromium saw on each page in each look, kept for the session: the browser test
    modules share it, so each page is loaded once per look."""
    return {}


class OpenBrowser:
    """The built book served on 127.0.0.1 and one headless Chromium, opened when a test asks
    for it and kept while the tests that use it follow one another: the pages' tests of four
    modules run page by page (conftest.py at the root groups them), and starting Chromium at
    each change of module cost about a second, 80 times a run. It is closed before a test that
    does not use it (``pytest_runtest_teardown``): the sync Playwright it runs keeps an event
    loop going, in which a kernel's asyncio.run cannot start."""

    def __init__(self, html: Path, visits: dict) -> None:
        self.html, self.visits = html, visits
        self.book = None

    def get(self):
        from test_browser import BrowserBook

        if self.book is not None and not self.book.browser.is_connected():
            self.close()  # it crashed or was closed: the test gets a new one
        if self.book is None:
            self.book = BrowserBook(self.html, visits=self.visits)
        return self.book

    def close(self) -> None:
        if self.book is not None:
            book, self.book = self.book, None
            book.close()


_open_browsers: list[OpenBrowser] = []


@pytest.fixture(scope="session")
def browser(book_html: Path, browser_visits: dict):
    """The session's ``OpenBrowser`` (Chromium started on first use)."""
    from test_browser import chromium_or_skip

    chromium_or_skip()
    opened = OpenBrowser(book_html, browser_visits)
    _open_browsers.append(opened)
    yield opened
    opened.close()


@pytest.fixture
def book(browser: OpenBrowser):
    """The built book served on 127.0.0.1 and one headless Chromium (see ``OpenBrowser``)."""
    return browser.get()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    yield
    if nextitem is None or "browser" not in getattr(nextitem, "fixturenames", ()):
        for opened in _open_browsers:
            opened.close()


@pytest.fixture(params=chapter_notebooks(), ids=lambda path: path.stem)
def notebook_path(request) -> Path:
    return request.param


@pytest.fixture(autouse=True)
def course_lib_home(tmp_path, monkeypatch) -> Path:
    """Each test function gets its own empty progress folder (``COURSE_LIB_HOME``)."""
    home = tmp_path / "course-lib-home"
    monkeypatch.setenv("COURSE_LIB_HOME", str(home))
    return home
