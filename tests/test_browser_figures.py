"""Every figure of the built book is readable as Chromium shows it, on a laptop and a phone.

Each figure image of a chapter page (the cells' figures and the explorers' figures drawn by the
widget manager) is matched to the PNG stored in the chapter by the SHA-256 of its bytes; the
stored output metadata gives its natural width and its smallest text (see
tests/test_figures.py). The text as shown is that size times the image's rendered width over
its natural width, and must be at least 9 CSS px:

- at 1366 x 768 and 1280 x 800, with the whole figure in view (no sideways scrolling), also
  in the dark theme at 1366;
- at 390 x 844 (a phone) too: a figure wider than the column is not shrunk below that, it
  scrolls sideways in its own box, which stays inside the window.

The pages are the ones tests/test_browser.py visits (the session's ``book`` fixture, one load
per page and look, with its screenshots in ``_build/screenshots/``).
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from test_browser import PAGES, BrowserBook
from test_figures import StoredFigure, stored_figures

from conftest import ROOT
from course_lib.plotting import MIN_TEXT_PX

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

CHAPTER_PAGES = [name for name in PAGES if (ROOT / f"{name}.ipynb").is_file()]
SIZES = [(1366, 768), (1280, 800), (390, 844)]
# Laptop windows at which every figure must be in view whole (shrunk a little where needed).
LAPTOPS = [(1366, 768, "light"), (1366, 768, "dark"), (1280, 800, "light")]


def image_bytes(src: str, html: Path) -> bytes:
    """The bytes of an image as the page loaded it: a data: URL, or a file of the built book
    (read from ``html``: the visit may have been made by an earlier module's server)."""
    if src.startswith("data:"):
        return base64.b64decode(src.split(",", 1)[1])
    return (html / unquote(urlsplit(src).path).lstrip("/")).read_bytes()


def shown_figures(
    book: BrowserBook, name: str, width: int, height: int, theme: str = "light"
) -> list[dict]:
    """The figure images of a page as Chromium lays them out in a ``width`` x ``height`` window
    in ``theme`` (from the book's one visit of the page in that look)."""
    return book.visit(name, width, height, theme).facts["figure_images"]


def stored_by_hash(name: str) -> dict[str, StoredFigure]:
    return {figure.sha256: figure for figure in stored_figures(ROOT / f"{name}.ipynb")}


def text_px_as_shown(image: dict, figure: StoredFigure) -> float:
    assert figure.smallest_text_px is not None, f"{figure.describe()}: no text size stored"
    return image["width"] * figure.smallest_text_px / figure.natural_width


@pytest.mark.parametrize("width, height", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@pytest.mark.parametrize("name", CHAPTER_PAGES)
def test_every_figures_smallest_text_is_shown_at_least_9_px_high(book, name, width,
                                                                  height):  # fmt: skip
    stored = stored_by_hash(name)
    images = shown_figures(book, name, width, height)
    shown = set()
    for image in images:
        assert image["loaded"], f"{name}: {image['src'][:80]} did not load"
        digest = hashlib.sha256(image_bytes(image["src"], book.html)).hexdigest()
        figure = stored.get(digest)
        shown.add(digest)
        assert figure is not None, f"{name}: an image that no stored output holds: {image['src']}"
        assert image["naturalWidth"] == figure.natural_width
        text_px = text_px_as_shown(image, figure)
        assert text_px >= MIN_TEXT_PX, (
            f"{name} at {width} px: {figure.describe()} is shown {image['width']:.0f} px wide "
            f"(natural {figure.natural_width} px), so its smallest text is {text_px:.1f} px high"
        )
    missing = [f.describe() for digest, f in stored.items()
               if f.place.startswith("code cell") and digest not in shown]  # fmt: skip
    assert not missing, f"{name}: stored figures not found on the page: {missing}"


@pytest.mark.parametrize("width, height, theme", LAPTOPS, ids=[f"{w}-{t}" for w, _, t in LAPTOPS])
@pytest.mark.parametrize("name", CHAPTER_PAGES)
def test_on_a_laptop_every_figure_is_in_view_without_scrolling_sideways(
    book, name, width, height, theme
):
    for image in shown_figures(book, name, width, height, theme):
        frame = image["scroller"]
        where = f"{name} at {width} px, {theme}"
        assert image["right"] <= width, f"{where}: a figure runs out of the window: {image}"
        if frame is not None:
            assert frame["scrollWidth"] <= frame["clientWidth"], f"{where}: it scrolls {image}"


@pytest.mark.parametrize("name", CHAPTER_PAGES)
def test_on_a_phone_a_wide_figure_scrolls_in_its_own_box_inside_the_window(book, name):
    for image in shown_figures(book, name, 390, 844):
        if image["right"] <= 390:
            continue  # it fits
        frame = image["scroller"]
        assert frame is not None, f"{name}: a figure runs out of the window and cannot scroll"
        assert frame["left"] >= 0 and frame["right"] <= 390, f"{name}: its box is wider {frame}"
        assert frame["scrollWidth"] >= image["width"], f"{name}: {image}"
