"""Every explorer moves in the built book, with no kernel and no network (issue 20).

Each chapter page is loaded in Chromium from 127.0.0.1 (requests elsewhere are aborted and
recorded, as in tests/test_browser.py). For every explorer on the page, every control the reader
sees is moved to two other values (the last control first), as a reader moves it: a slider with
the arrow keys and then by dragging its handle, a menu by choosing an option, buttons by clicking
one (a control with two values is switched and switched back). After each move:

- each part of the explorer shows exactly one stored state, and that state's key (its CSS class
  ``course-key-<part>--<control>-<index>...``, see course_lib/explorers/base.py) names the
  indices the controls now show;
- what is shown is what the page's stored widget state holds for that key: the same PNG, or the
  same text (maths aside, which MathJax has typeset);
- something the explorer shows changed.

No console error may appear and no request may leave 127.0.0.1. The pages' sizes and load times
are checked against the issue's budgets (the load time against the
same page without its stored states).
"""

from __future__ import annotations

import json
import re
import time

import pytest
from bs4 import BeautifulSoup
from test_browser import (
    PAGES,
    RENDER_TIMEOUT_MS,
    WIDGETS_RENDERED_JS,
    Visit,
    goto_measured,
    reachable_models,
)

from conftest import ROOT, WIDGET_STATE, WIDGET_VIEW, read_notebook

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

CHAPTER_PAGES = [name for name in PAGES if (ROOT / f"{name}.ipynb").is_file()]
# A wait for a condition: only a control that never shows its state, or a hang, reaches it.
MOVE_TIMEOUT_MS = 60_000

# The built pages' sizes before issue 20 (bytes, the book built from c80e2b8): a page with its
# explorers' stored states may be at most 4 MB larger.
BYTES_BEFORE = {
    "chapters/decoder": 226_455,
    "chapters/decoding-and-inference-cost": 201_307,
    "chapters/encoder": 217_940,
    "chapters/feed-forward-and-norm": 310_579,
    "chapters/input-embeddings": 311_715,
    "chapters/masking-and-cross-attention": 263_352,
    "chapters/model-families": 226_381,
    "chapters/multi-head-attention": 323_702,
    "chapters/positional-encoding": 324_789,
    "chapters/self-attention": 246_796,
    "chapters/training-a-translator": 238_560,
    "chapters/training-recipe": 385_316,
    "chapters/transformers-at-a-glance": 378_715,
}
# A chapter written after issue 20 counts from the largest chapter page before it (about
# 386 kB): its text, figures and stored states may likewise add at most 4 MB.
NEW_PAGE_BEFORE = max(BYTES_BEFORE.values())
MORE_BYTES_ALLOWED = 4 * 1024 * 1024
# Issue 20 allowed a page with explorers 2 s to its load event, when the libraries every chapter
# page loads (widget manager, Font Awesome, MathJax) took 1.4-1.8 s of it on a quiet machine:
# the stored states could add up to about half. Issue 29 measures it against the same page
# without them, as the processor time of the page's main thread up to its load event (Chrome's
# ThreadTime): the time to the load event itself stretched with other work on the machine
# (ratios of 0.81 to 1.08 quiet, up to 1.57 with both workers of the test run in Chromium),
# its processor time hardly (encoder 1.00 and positional-encoding 1.09 quiet, 0.97 and 1.09
# with both cores busy-looped; the load event then came after 3.2 and 4.5 s).
LOAD_SLOWDOWN_ALLOWED = 1.5

# What Chromium shows of one explorer: its visible controls and its visible stored states.
EXPLORER_JS = """(index) => {
  const explorer = document.querySelectorAll('.course-explorer')[index];
  const shown = (el) => el.offsetParent !== null && !el.closest('.widget-stack-hidden');
  const named = (el, prefix) => [...el.classList].find((c) => c.startsWith(prefix));
  const controls = [...explorer.querySelectorAll('.course-control')].filter(shown).map((el) => {
    const select = el.querySelector('select');
    const buttons = [...el.querySelectorAll('button')];
    const readout = el.querySelector('.widget-readout');
    const kind = select ? 'menu' : (buttons.length ? 'buttons' : 'slider');
    return {
      name: named(el, 'course-control-').slice('course-control-'.length),
      classes: [...el.classList].filter((c) => c.startsWith('course-')),
      kind,
      selected: select ? select.selectedIndex : null,
      options: select ? select.options.length : buttons.length,
      active: buttons.findIndex((b) => b.classList.contains('mod-active')),
      readout: readout ? readout.textContent.trim() : null,
    };
  });
  const states = [...explorer.querySelectorAll('.course-state')].filter(shown).map((el) => {
    const copy = el.cloneNode(true);
    const hidden = 'mjx-container, mjx-assistive-mml, style, script';
    copy.querySelectorAll(hidden).forEach((m) => m.remove());
    const image = el.querySelector('img');
    return {
      key: named(el, 'course-key-'),
      image: image ? image.getAttribute('src') : null,
      text: copy.textContent,
    };
  });
  return {controls, states};
}"""


def explorer_pages() -> list[str]:
    """The chapter pages whose stored widget state holds an explorer."""
    found = []
    for name in CHAPTER_PAGES:
        state = stored_state_of(name)
        if any("course-explorer" in m["state"].get("_dom_classes", ()) for m in state.values()):
            found.append(name)
    return found


def stored_state_of(name: str) -> dict:
    notebook = read_notebook(ROOT / f"{name}.ipynb")
    return notebook.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})


def explorer_models(html: str) -> list[dict]:
    """For each explorer of a built page, in page order, the stored models it shows."""
    soup = BeautifulSoup(html, "html.parser")
    state = json.loads(soup.find("script", type=WIDGET_STATE).string)["state"]
    roots = [json.loads(s.string)["model_id"] for s in soup.find_all("script", type=WIDGET_VIEW)]
    explorers = []
    for root in roots:
        models = reachable_models(state, [root])
        ids = [i for i in models if "course-explorer" in models[i]["state"].get("_dom_classes", ())]
        explorers += [reachable_models(state, [i]) for i in ids]
    return explorers


def model_with(models: dict, classes: list[str]) -> dict:
    found = [m for m in models.values() if set(classes) <= set(m["state"].get("_dom_classes", ()))]
    assert len(found) == 1, f"{len(found)} stored models have the classes {classes}"
    return found[0]["state"]


def words(text: str) -> str:
    return " ".join(text.replace("\xa0", " ").split())


def stored_text(value: str) -> str:
    """An HTML part's text as the page shows it once MathJax has replaced its maths."""
    text = BeautifulSoup(value, "html.parser").get_text()
    return words(re.sub(r"\$[^$]*\$", " ", text))


def shown_text(text: str) -> str:
    return words(text)


class ExplorerOnPage:
    """One explorer of a loaded page, read and moved as a reader moves it."""

    def __init__(self, page, index: int, models: dict) -> None:
        self.page, self.index, self.models = page, index, models
        self.locator = page.locator(".course-explorer").nth(index)

    def look(self) -> dict:
        return self.page.evaluate(EXPLORER_JS, self.index)

    def index_of(self, control: dict) -> int:
        if control["kind"] == "menu":
            return control["selected"]
        if control["kind"] == "buttons":
            return control["active"]
        labels = model_with(self.models, control["classes"])["_options_labels"]
        assert control["readout"] in labels, f"{control['readout']!r} not in {labels}"
        return labels.index(control["readout"])

    def count(self, control: dict) -> int:
        if control["kind"] == "slider":
            return len(model_with(self.models, control["classes"])["_options_labels"])
        return control["options"]

    def move(self, control: dict, target: int, how: str) -> None:
        selector = "." + ".".join(control["classes"])
        element = self.locator.locator(selector).first
        element.scroll_into_view_if_needed()
        if control["kind"] == "menu":
            element.locator("select").select_option(index=target)
        elif control["kind"] == "buttons":
            element.locator("button").nth(target).click()
        elif how == "keys":
            handle = element.locator(".noUi-handle").first
            handle.focus()
            steps = target - self.index_of(control)
            for _ in range(abs(steps)):
                self.page.keyboard.press("ArrowRight" if steps > 0 else "ArrowLeft")
        else:  # drag the handle to the target's place on the track
            handle = element.locator(".noUi-handle").first
            track = element.locator(".noUi-target").first.bounding_box()
            box = handle.bounding_box()
            last = self.count(control) - 1
            x = track["x"] + track["width"] * target / last
            self.page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            self.page.mouse.down()
            self.page.mouse.move(x, box["y"] + box["height"] / 2, steps=8)
            self.page.mouse.up()

    def check(self, seen: dict) -> list[str]:
        """What is wrong with what the explorer shows (empty if every part shows the stored
        state for the indices its controls show)."""
        problems = []
        indices = {}
        for control in seen["controls"]:
            indices.setdefault(control["name"], self.index_of(control))
        parts: dict[str, list[dict]] = {}
        for state in seen["states"]:
            part, *pairs = state["key"][len("course-key-") :].split("--")
            parts.setdefault(part, []).append(state)
            for pair in pairs:
                name, index = pair.rsplit("-", 1)
                if indices.get(name) != int(index):
                    problems.append(f"{state['key']} shown while {name} shows {indices.get(name)}")
            stored = model_with(self.models, [state["key"]])
            if "outputs" in stored:
                png = stored["outputs"][0]["data"]["image/png"]
                if state["image"] != f"data:image/png;base64,{png}":
                    problems.append(f"{state['key']}: the image is not the stored one")
            elif stored_text(stored["value"]) != shown_text(state["text"]):
                problems.append(
                    f"{state['key']}: shows {shown_text(state['text'])[:120]!r}, stored "
                    f"{stored_text(stored['value'])[:120]!r}"
                )
        problems += [f"part {p} shows {len(s)} states" for p, s in parts.items() if len(s) != 1]
        return problems

    def wait_until_consistent(self, moved: str | None = None, target: int | None = None) -> dict:
        """What the explorer shows once control ``moved`` shows ``target`` and every part the
        stored state for the controls' indices (asserted when MOVE_TIMEOUT_MS has passed)."""
        deadline = time.monotonic() + MOVE_TIMEOUT_MS / 1000
        while True:
            seen = self.look()
            problems = self.check(seen)
            if moved is not None:
                control = next(c for c in seen["controls"] if c["name"] == moved)
                if self.index_of(control) != target:
                    problems.append(f"{moved} shows {self.index_of(control)}, not {target}")
            if not problems or time.monotonic() > deadline:
                assert not problems, problems
                return seen
            self.page.wait_for_timeout(50)


def shown_content(seen: dict) -> dict[str, tuple]:
    return {s["key"].split("--")[0]: (s["image"], shown_text(s["text"])) for s in seen["states"]}


def targets(current: int, count: int) -> list[int]:
    """Two other values, or the other one and back when there are two."""
    if count >= 3:
        return [(current + 1) % count, (current + 2) % count]
    return [1 - current, current]


EXPLORER_PAGES = explorer_pages()


def test_every_chapter_has_an_explorer():
    assert sorted(EXPLORER_PAGES) == sorted(CHAPTER_PAGES)


@pytest.mark.parametrize("name", EXPLORER_PAGES)
def test_every_control_of_every_explorer_moves_what_it_shows_to_the_stored_state(
    book, book_html, name
):
    models = explorer_models((book_html / f"{name}.html").read_text(encoding="utf-8"))
    visit = Visit(name=f"{name} (explorers moved)", url=book.url(name))
    context, page = book.new_page(visit, 1366, 900)
    moves = 0
    try:
        page.goto(visit.url, wait_until="load")
        page.wait_for_function(WIDGETS_RENDERED_JS, timeout=RENDER_TIMEOUT_MS)
        assert page.locator(".course-explorer").count() == len(models) >= 1
        for index, stored in enumerate(models):
            explorer = ExplorerOnPage(page, index, stored)
            seen = explorer.wait_until_consistent()
            # The last control first: a control whose options depend on an earlier one (the
            # targets of a source, say) is moved while its parents still show their first values.
            names = [control["name"] for control in seen["controls"]][::-1]
            for control_name in names:
                control = next(c for c in explorer.look()["controls"] if c["name"] == control_name)
                count = explorer.count(control)
                assert count >= 2, f"{name}: {control_name} offers {count} value"
                for how, target in zip(
                    ("keys", "drag"), targets(explorer.index_of(control), count), strict=True
                ):
                    control = next(c for c in explorer.look()["controls"]
                                   if c["name"] == control_name)  # fmt: skip
                    before = shown_content(seen)
                    explorer.move(control, target, how)
                    seen = explorer.wait_until_consistent(control_name, target)
                    assert shown_content(seen) != before, (
                        f"{name}: moving {control_name} to {target} changed nothing shown"
                    )
                    moves += 1
    finally:
        context.close()
    assert moves >= 2
    assert not visit.blocked, f"{name} asked the network for {visit.blocked}"
    assert not visit.errors, f"{name}: {visit.errors}"
    assert not visit.failed, f"{name}: failed requests {visit.failed}"


@pytest.mark.parametrize("name", CHAPTER_PAGES)
def test_a_page_with_its_stored_states_is_at_most_4_mb_larger_than_before(book_html, name):
    size = (book_html / f"{name}.html").stat().st_size
    before = BYTES_BEFORE.get(name, NEW_PAGE_BEFORE)
    assert size - before <= MORE_BYTES_ALLOWED, (
        f"{name} is {size:,} bytes, {size - before:,} more than before issue 20"
    )


def without_stored_states(html: str) -> str:
    """The page's HTML with its stored widget state emptied: the same text, figures, libraries
    and widget views, none of the models the views show."""
    soup = BeautifulSoup(html, "html.parser")
    script = soup.find("script", type=WIDGET_STATE)
    script.string = json.dumps({"version_major": 2, "version_minor": 0, "state": {}})
    return str(soup)


def load_cost(book, name: str, html: str) -> dict[str, float]:
    """Page ``name`` served as ``html`` (everything else it asks for comes from the book's
    server), loaded at 1366 x 768 in the light theme: see ``goto_measured``."""
    visit = Visit(name=f"{name} (load time)", url=book.url(name))
    context, page = book.new_page(visit, 1366, 768)
    try:
        page.route(visit.url, lambda route: route.fulfill(body=html, content_type="text/html"))
        return goto_measured(context, page, visit.url)
    finally:
        context.close()


@pytest.mark.parametrize("name", EXPLORER_PAGES)
def test_stored_states_cost_a_page_at_most_half_again_the_processor_time_to_its_load(book, name):
    """The page with its stored states against the same page without them, twice each in the
    same browser, the best of each compared. One load with the states is the page's visit at
    1366 x 768 in the light theme (the one the tests of test_browser.py check), the others are
    made here in turns."""
    html = (book.html / f"{name}.html").read_text(encoding="utf-8")
    emptied = without_stored_states(html)
    assert len(html) - len(emptied) > 10_000, f"{name} stores no explorer states"
    visited = book.visit(name).facts["load"]
    loads = {
        "without": [load_cost(book, name, emptied)],
        "with states": [visited, load_cost(book, name, html)],
    }
    loads["without"].append(load_cost(book, name, emptied))
    (cost, load_event), (cost_without, load_event_without) = (
        min((load["processor_ms"], load["event_ms"]) for load in loads[key])
        for key in ("with states", "without")
    )
    print(
        f"{name}: {cost:.0f} ms of processor time with states (load event after "
        f"{load_event:.0f} ms), {cost_without:.0f} without ({load_event_without:.0f} ms)"
    )
    assert cost / cost_without < LOAD_SLOWDOWN_ALLOWED, (
        f"{name}: the page's main thread worked {cost:.0f} ms up to the load event with the "
        f"stored states and {cost_without:.0f} ms without them ({cost / cost_without:.2f} "
        f"times; the load event came after {load_event:.0f} and {load_event_without:.0f} ms)"
    )
