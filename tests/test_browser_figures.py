"""Every figure of the built book is readable as Chromium shows it, on a laptop and a phone.

Each figure image of a chapter page (the cells' figures and the explorers' figures drawn by the
widget manager) is matched to the PNG stored in the chapter by the SHA-256 of its bytes; the
stored output metadata gives its natural width and its smallest text (see
tests/test_figures.py). The text as shown is that size times the image's rendered width over
its natural width, and must be at least 9 CSS px:

- at 1366 x 768, with the whole figure in view (no sideways scrolling);
- at 390 x 844 (a phone) too: a figure wider than the column is not shrunk below that, it
  scrolls sideways in its own box, which stays inside the window.

Screenshots of the phone pages go to ``_build/screenshots/figures/`` for review.
"""

from __future__ import annotations

import base64
import hashlib
import urllib.request

import pytest
from test_browser import (
    PAGES,
    RENDER_TIMEOUT_MS,
    WIDGETS_RENDERED_JS,
    BrowserBook,
    Visit,
    chromium_or_skip,
)
from test_figures import StoredFigure, stored_figures

from conftest import ROOT
from course_lib.plotting import MIN_TEXT_PX

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

CHAPTER_PAGES = [name for name in PAGES if (ROOT / f"{name}.ipynb").is_file()]
SCREENSHOTS = ROOT / "_build" / "screenshots" / "figures"
SIZES = [(1366, 768), (1280, 800), (390, 844)]
# Laptop windows at which every figure must be in view whole (shrunk a little where needed).
LAPTOPS = [(1366, 768, "light"), (1366, 768, "dark"), (1280, 800, "light")]

# Every image of the page's article that is a figure: a cell's output or an explorer's image.
FIGURE_IMAGES_JS = """() => {
  const scrollsSideways = (element) =>
    ["auto", "scroll"].includes(getComputedStyle(element).overflowX);
  return [...document.querySelectorAll("article img")]
    .filter((img) => img.closest("figure, .cell_output, .widget-output") !== null)
    .map((img) => {
      const box = img.getBoundingClientRect();
      let scroller = img.parentElement;
      while (scroller !== null && scroller !== document.body && !scrollsSideways(scroller)) {
        scroller = scroller.parentElement;
      }
      const frame = scroller !== null && scroller !== document.body
        ? scroller.getBoundingClientRect() : null;
      return {
        src: img.src,
        loaded: img.complete && img.naturalWidth > 0,
        naturalWidth: img.naturalWidth,
        width: box.width,
        right: box.right,
        scroller: frame === null ? null : {
          left: frame.left, right: frame.right,
          clientWidth: scroller.clientWidth, scrollWidth: scroller.scrollWidth,
        },
      };
    });
}"""
IMAGES_LOADED_JS = "() => [...document.images].every((img) => img.complete)"


@pytest.fixture(scope="module")
def figure_book(book_html):
    chromium_or_skip()
    browser_book = BrowserBook(book_html, SCREENSHOTS)
    try:
        yield browser_book
    finally:
        browser_book.close()


def image_bytes(src: str) -> bytes:
    """The bytes of an image as the page loaded it (a data: URL or a file of the book)."""
    if src.startswith("data:"):
        return base64.b64decode(src.split(",", 1)[1])
    with urllib.request.urlopen(src, timeout=30) as response:
        return response.read()


LAID_OUT: dict[tuple[str, int, str], list[dict]] = {}  # (page, width, theme) -> its images


def shown_figures(
    book: BrowserBook, name: str, width: int, height: int, theme: str = "light"
) -> list[dict]:
    """The figure images of a page as Chromium lays them out in a ``width`` x ``height`` window
    in ``theme`` (each page is loaded once per window size and theme)."""
    if (name, width, theme) not in LAID_OUT:
        LAID_OUT[name, width, theme] = _lay_out(book, name, width, height, theme)
    return LAID_OUT[name, width, theme]


def _lay_out(book: BrowserBook, name: str, width: int, height: int, theme: str) -> list[dict]:
    visit = Visit(name=f"{name}@{width}-{theme}", url=book.url(name))
    context, page = book.new_page(visit, width, height, theme)
    try:
        page.goto(visit.url, wait_until="load")
        page.wait_for_function(WIDGETS_RENDERED_JS, timeout=RENDER_TIMEOUT_MS)
        page.wait_for_function(IMAGES_LOADED_JS, timeout=RENDER_TIMEOUT_MS)
        images = page.evaluate(FIGURE_IMAGES_JS)
        images = [{**image, "window": width} for image in images]
        if width < 1000:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            shot = SCREENSHOTS / f"{name.replace('/', '__')}@{width}.png"
            page.screenshot(path=str(shot), full_page=True)
    finally:
        context.close()
    return images


def stored_by_hash(name: str) -> dict[str, StoredFigure]:
    return {figure.sha256: figure for figure in stored_figures(ROOT / f"{name}.ipynb")}


def text_px_as_shown(image: dict, figure: StoredFigure) -> float:
    assert figure.smallest_text_px is not None, f"{figure.describe()}: no text size stored"
    return image["width"] * figure.smallest_text_px / figure.natural_width


@pytest.mark.parametrize("width, height", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@pytest.mark.parametrize("name", CHAPTER_PAGES)
def test_every_figures_smallest_text_is_shown_at_least_9_px_high(figure_book, name, width,
                                                                  height):  # fmt: skip
    stored = stored_by_hash(name)
    images = shown_figures(figure_book, name, width, height)
    shown = set()
    for image in images:
        assert image["loaded"], f"{name}: {image['src'][:80]} did not load"
        digest = hashlib.sha256(image_bytes(image["src"])).hexdigest()
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
    figure_book, name, width, height, theme
):
    for image in shown_figures(figure_book, name, width, height, theme):
        frame = image["scroller"]
        where = f"{name} at {width} px, {theme}"
        assert image["right"] <= width, f"{where}: a figure runs out of the window: {image}"
        if frame is not None:
            assert frame["scrollWidth"] <= frame["clientWidth"], f"{where}: it scrolls {image}"


@pytest.mark.parametrize("name", CHAPTER_PAGES)
def test_on_a_phone_a_wide_figure_scrolls_in_its_own_box_inside_the_window(figure_book, name):
    for image in shown_figures(figure_book, name, 390, 844):
        if image["right"] <= 390:
            continue  # it fits
        frame = image["scroller"]
        assert frame is not None, f"{name}: a figure runs out of the window and cannot scroll"
        assert frame["left"] >= 0 and frame["right"] <= 390, f"{name}: its box is wider {frame}"
        assert frame["scrollWidth"] >= image["width"], f"{name}: {image}"
