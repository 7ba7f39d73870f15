"""course_lib's widgets as the book shows them: maths typeset, colours for both themes, nothing
spilling out of a phone's width.

The chapters' stored widgets are only as new as their last execution, so these tests render
widgets made now: a kernel runs the exercise widgets and an explorer, and their state and views
go into a copy of a built chapter page (same scripts, styles, MathJax and widget manager), which
Chromium loads from the book's own server, offline, as in ``test_browser.py``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_browser import (
    PAGES,
    RENDER_TIMEOUT_MS,
    WIDGETS_RENDERED_JS,
    BrowserBook,
    Visit,
)

from conftest import WIDGET_STATE, WIDGET_VIEW, OpenBrowser, run_cells_in_kernel
from course_lib._html import contrast_ratio

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TEMPLATE = "chapters/self-attention"  # a chapter page with widgets, holding the page's scripts
PAGE = "chapters/widgets-made-now"

CELLS = [
    "from course_lib.exercises import ask, check, hint",
    'ask("add-norm-order")',
    'ask("mha-parameter-count")',
    'check("mha-parameter-count", 787968)',
    'check("mha-parameter-count", 1050624)',
    'hint("mha-parameter-count")',
    "from course_lib.explorers.at_work import RecipeExplorer\nRecipeExplorer()",
    "from course_lib.explorers.attention import attention_explorer\nattention_explorer()",
]

# Waits for MathJax to have started and finished what the widget manager gave it.
MATHJAX_IDLE_JS = """async () => {
  for (let i = 0; i < 200 && !(window.MathJax && window.MathJax.startup
                               && window.MathJax.startup.promise); i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await window.MathJax.startup.promise;
  await new Promise((resolve) => setTimeout(resolve, 300));
  await window.MathJax.startup.promise;
}"""

MATHS_JS = """() => {
  const roots = [...document.querySelectorAll('.widget-subarea')];
  const texts = roots.flatMap((root) => [...root.querySelectorAll(
    '.widget-htmlmath, .widget-label, .widget-label-basic')]);
  return {
    texts: texts.length,
    typeset: roots.reduce((n, root) => n + root.querySelectorAll('mjx-container').length, 0),
    untypeset: texts.map((t) => t.innerText).filter((t) => /\\$[^$]+\\$/.test(t)),
    errors: roots.flatMap((root) => [...root.querySelectorAll('mjx-merror')])
      .map((e) => e.getAttribute('data-mjx-error') || e.textContent),
  };
}"""

# Every element coloured by a status colour: its text, colour and the background behind it.
# Colours come as 0..255 channels (Chromium writes a color-mix() result as color(srgb 0..1)).
COLOURS_JS = """() => {
  const rgb = (text) => {
    const values = text.match(/[\\d.]+/g).map(Number);
    return text.startsWith('color(') ? values.map((v, i) => (i < 3 ? v * 255 : v)) : values;
  };
  const background = (el) => {
    for (let e = el; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c.length === 3 || c[3] > 0.5) return c.slice(0, 3);
    }
    return rgb(getComputedStyle(document.body).backgroundColor).slice(0, 3);
  };
  return [...document.querySelectorAll('.widget-subarea [style*="color-mix"]')]
    .filter((el) => el.textContent.trim() !== '')
    .map((el) => ({text: el.textContent.trim().slice(0, 30),
                   color: rgb(getComputedStyle(el).color).slice(0, 3),
                   background: background(el)}));
}"""

OVERFLOW_JS = """() => [...document.querySelectorAll('.widget-subarea')].flatMap((area) => {
  const right = area.getBoundingClientRect().right;
  return [...area.querySelectorAll('.jupyter-widgets')]
    .filter((w) => w.getBoundingClientRect().width > 0
                   && w.getBoundingClientRect().right > right + 1)
    .map((w) => w.className);
})"""


def with_widgets(template: str, state: dict, views: list[dict]) -> str:
    """``template`` (a built page) showing ``views`` of ``state`` instead of its own widgets."""
    state_script = re.compile(rf'(<script type="{re.escape(WIDGET_STATE)}">)(.*?)(</script>)', re.S)
    assert state_script.search(template), "the template page stores no widget state"
    page = state_script.sub(lambda m: m.group(1) + json.dumps(state) + m.group(3), template)
    page = re.sub(rf'<script type="{re.escape(WIDGET_VIEW)}">.*?</script>', "", page, flags=re.S)
    shown = "".join(
        f'<div class="cell_output docutils container"><script type="{WIDGET_VIEW}">'
        f"{json.dumps(view)}</script></div>"
        for view in views
    )
    article = '<article class="bd-article">'
    assert article in page, "the template page has no article"
    return page.replace(article, article + shown, 1)


@pytest.fixture(scope="module")
def widgets_book(
    browser: OpenBrowser, book_html: Path, tmp_path_factory
) -> Iterator[tuple[BrowserBook, int, int]]:
    """The book (the session's, served from ``book_html``) with one more page: the widgets of
    ``CELLS``, made now in a kernel (with Chromium closed: see ``OpenBrowser``); with it, how
    many views the page shows and how many ``$...$`` their texts and labels hold."""
    assert TEMPLATE in PAGES
    browser.close()
    folder = tmp_path_factory.mktemp("widgets-made-now")
    setup = f"import os\nos.environ['COURSE_LIB_HOME'] = {str(folder / 'home')!r}"
    notebook = run_cells_in_kernel([setup, *CELLS], folder)
    outputs = [output for cell in notebook.cells for output in cell.outputs]
    errors = [o for o in outputs if o.output_type == "error"]
    assert not errors, f"{errors[0].ename}: {errors[0].evalue}" if errors else ""
    views = [o.data[WIDGET_VIEW] for o in outputs if WIDGET_VIEW in o.get("data", {})]
    state = notebook.metadata["widgets"][WIDGET_STATE]
    template = (book_html / f"{TEMPLATE}.html").read_text(encoding="utf-8")
    made = book_html / f"{PAGE}.html"  # removed afterwards: the book's own pages stay as built
    made.write_text(with_widgets(template, state, views), "utf-8")
    try:
        yield browser.get(), len(views), maths_in(state)
    finally:
        made.unlink()


def look(book: BrowserBook, width: int, theme: str, script: str):
    """Open the page at ``width`` in ``theme`` and return what ``script`` finds there."""
    visit = Visit(name=f"{PAGE}@{width}-{theme}", url=book.url(PAGE))
    context, page = book.new_page(visit, width, 900)
    try:
        page.add_init_script(f"localStorage.setItem('mode', '{theme}')")  # the theme button's
        page.goto(visit.url, wait_until="load")
        page.wait_for_function(WIDGETS_RENDERED_JS, timeout=RENDER_TIMEOUT_MS)
        page.evaluate(MATHJAX_IDLE_JS)
        assert page.evaluate("document.documentElement.dataset.theme") == theme
        found = page.evaluate(script)
    finally:
        context.close()
    assert not visit.errors and not visit.failed and not visit.blocked, visit
    return found


def maths_in(state: dict) -> int:
    """How many ``$...$`` the stored values and descriptions of ``state``'s models hold."""
    texts = [
        model["state"].get(key) or ""
        for model in state["state"].values()
        for key in ("value", "description")
        if isinstance(model["state"].get(key), str)
    ]
    return sum(len(re.findall(r"\$[^$]+\$", text)) for text in texts)


def test_the_widgets_made_now_all_render(widgets_book):
    book, views, _ = widgets_book
    assert views == len(CELLS) - 1  # every cell but the import shows one widget
    assert look(book, 1366, "light", "() => document.querySelectorAll('.widget-radio').length")


def test_widget_labels_and_texts_typeset_their_maths(widgets_book):
    book, _, written = widgets_book
    maths = look(book, 1366, "light", MATHS_JS)
    assert written >= 10  # the prompt, feedback, hints and explorers' labels hold maths
    assert maths["typeset"] == written, maths
    assert maths["untypeset"] == [], f"maths left as $...$ text: {maths['untypeset']}"
    assert maths["errors"] == [], maths["errors"]


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_pass_and_fail_colours_stay_readable_and_keep_their_hue_in_the_books(widgets_book, theme):
    book, _, _ = widgets_book
    coloured = look(book, 1366, theme, COLOURS_JS)
    for item in coloured:
        ratio = contrast_ratio(item["color"], item["background"])
        assert ratio >= 4.5, f"{theme}: {item} has contrast {ratio:.2f}"
    failed = [item["color"] for item in coloured if item["text"].startswith("FAILED")]
    passed = [item["color"] for item in coloured if item["text"].startswith("PASSED")]
    assert failed and all(red > max(green, blue) for red, green, blue in failed), coloured
    assert passed and all(green > max(red, blue) for red, green, blue in passed), coloured


@pytest.mark.parametrize("width", [390, 1366, 1920])
def test_no_widget_reaches_past_the_page_at(widgets_book, width):
    book, _, _ = widgets_book
    assert look(book, width, "light", OVERFLOW_JS) == []
