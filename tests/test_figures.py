"""Every figure stored in a chapter is readable in the book: drawn through the book's style
(``course_lib.plotting.use_book_figures``, called by the setup cell), which records in each PNG
output's metadata the figure's natural width and its smallest text, and that text is at least
9 CSS px high as shown in the book's column at a 1366-pixel-wide window.

Figures are read from the cells' outputs and from the Output widgets in the stored widget state
(the explorers' figures). tests/test_browser_figures.py checks the same in the built book.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from pathlib import Path

from conftest import WIDGET_STATE, chapter_notebooks, read_notebook
from course_lib.plotting import BOOK_COLUMN_PX, MIN_TEXT_PX, displayed_text_px

PNG = "image/png"


@dataclass(frozen=True)
class StoredFigure:
    """One PNG output stored in a chapter notebook and the metadata stored with it."""

    chapter: str
    place: str  # "code cell 12" or "Output widget <model id>"
    png: bytes
    metadata: dict

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.png).hexdigest()

    @property
    def natural_width(self) -> int:
        return int.from_bytes(self.png[16:20], "big")  # the PNG's IHDR chunk

    @property
    def smallest_text_px(self) -> float | None:
        return self.metadata.get("smallest_text_px")

    def describe(self) -> str:
        return f"{self.chapter}, {self.place}"


def _figures_in(outputs: list, chapter: str, place: str) -> list[StoredFigure]:
    figures = []
    for output in outputs:
        if PNG in output.get("data", {}):
            png = base64.b64decode(output["data"][PNG])
            metadata = dict(output.get("metadata", {}).get(PNG, {}))
            figures.append(StoredFigure(chapter, place, png, metadata))
    return figures


def stored_figures(path: Path) -> list[StoredFigure]:
    """Every PNG figure of a chapter: cell outputs in order, then the Output widgets' figures."""
    notebook = read_notebook(path)
    figures = []
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    for index, cell in enumerate(code):
        figures += _figures_in(cell.outputs, path.stem, f"code cell {index}")
    state = notebook.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for model_id, model in sorted(state.items()):
        if model["model_name"] == "OutputModel":
            outputs = model["state"].get("outputs", [])
            figures += _figures_in(outputs, path.stem, f"Output widget {model_id}")
    return figures


def all_stored_figures() -> list[StoredFigure]:
    return [figure for path in chapter_notebooks() for figure in stored_figures(path)]


def test_the_chapters_store_figures_in_cells_and_in_output_widgets():
    places = {figure.place.split()[0] for figure in all_stored_figures()}
    assert places == {"code", "Output"}


def test_every_stored_figure_was_drawn_through_the_book_style(notebook_path):
    for figure in stored_figures(notebook_path):
        assert figure.smallest_text_px is not None, (
            f"{figure.describe()}: a figure without the book's metadata; the setup cell's "
            "use_book_figures() must run before it is drawn"
        )
        assert figure.metadata.get("natural_width_px") == figure.natural_width, figure.describe()


def test_every_stored_figure_text_is_at_least_9_px_in_the_book_column(notebook_path):
    for figure in stored_figures(notebook_path):
        if figure.smallest_text_px is None:
            continue  # reported by the test above
        shown = displayed_text_px(figure.smallest_text_px, figure.natural_width, BOOK_COLUMN_PX)
        assert shown >= MIN_TEXT_PX, (
            f"{figure.describe()}: the figure is {figure.natural_width} px wide, so its "
            f"smallest text ({figure.smallest_text_px} px) is shown {shown:.1f} px high in the "
            f"book's {BOOK_COLUMN_PX}-px column (at least {MIN_TEXT_PX:g} px needed)"
        )
