"""Shared facts about the repository for the tests: where things are and what _config.yml says."""

from __future__ import annotations

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
    """Every file of _toc.yml (without suffix), in reading order, root first."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [chapter["file"] for chapter in part.get("chapters", [])]
    return files


def chapter_notebooks() -> list[Path]:
    return sorted(CHAPTERS.glob("*.ipynb"))


def read_notebook(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def run_cells_in_kernel(cells: list[str], folder: Path) -> nbformat.NotebookNode:
    """Run code cells in a fresh python3 kernel (in ``folder``), storing the widget state."""
    from nbclient import NotebookClient

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = NotebookClient(notebook, kernel_name="python3", timeout=120, store_widget_state=True,
                            resources={"metadata": {"path": str(folder)}})  # fmt: skip
    client.execute()
    return notebook


@pytest.fixture(params=chapter_notebooks(), ids=lambda path: path.stem)
def notebook_path(request) -> Path:
    return request.param


@pytest.fixture(autouse=True)
def course_lib_home(tmp_path, monkeypatch) -> Path:
    """Each test function gets its own empty progress folder (``COURSE_LIB_HOME``)."""
    home = tmp_path / "course-lib-home"
    monkeypatch.setenv("COURSE_LIB_HOME", str(home))
    return home
