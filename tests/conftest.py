"""Shared facts about the repository for the tests: where things are and what _config.yml says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ROOT / "chapters"

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
    from tasks import notebook_client

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = notebook_client(notebook, kernel_name="python3", timeout=timeout,
                             store_widget_state=True,
                             resources={"metadata": {"path": str(folder)}})  # fmt: skip
    client.execute()
    return notebook


@pytest.fixture(scope="session")
def book_html(tmp_path_factory) -> Path:
    """The book built once per test session into a temporary folder (never _build/): its html/."""
    out = tmp_path_factory.mktemp("book")
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    result = subprocess.run(
        [jupyter_book, "build", str(ROOT), "--path-output", str(out), "--all",
         "--warningiserror", "--keep-going"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, f"the book build failed:\n{result.stdout[-6000:]}"
    return out / "_build" / "html"


@pytest.fixture(params=chapter_notebooks(), ids=lambda path: path.stem)
def notebook_path(request) -> Path:
    return request.param


@pytest.fixture(autouse=True)
def course_lib_home(tmp_path, monkeypatch) -> Path:
    """Each test function gets its own empty progress folder (``COURSE_LIB_HOME``)."""
    home = tmp_path / "course-lib-home"
    monkeypatch.setenv("COURSE_LIB_HOME", str(home))
    return home
