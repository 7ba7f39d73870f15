"""The built book in a real browser: Debian's Chromium, driven by Playwright, with no network.

The book (built once per session, see ``book_html`` in conftest.py) is served over HTTP on
127.0.0.1. Every request that is not to that server is aborted and recorded, so a page passes
only if it works offline. Each page of the table of contents is loaded once; what the browser saw
(console errors, failed requests, typeset math, rendered widgets, images, links, element ids) is
recorded and checked by the tests below, and a full-page screenshot is saved under
``_build/screenshots/`` for review.

Where Chromium is missing these tests are skipped with the reason, except in CI (``CI`` set),
where they fail: ``.ci/run`` installs Debian's ``chromium`` package.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlsplit

import pytest
from bs4 import BeautifulSoup
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

from conftest import ROOT, WIDGET_STATE, WIDGET_VIEW, book_config, toc_files
from course_lib.exercises import ChoiceExercise, list_exercises

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

CHROMIUM = Path(os.environ.get("COURSE_CHROMIUM", "/usr/bin/chromium"))
SCREENSHOTS = ROOT / "_build" / "screenshots"
# Headless Chromium without the background connections it makes to Google's services.
CHROMIUM_ARGS = [
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--metrics-recording-only",
]
RENDER_TIMEOUT_MS = 30_000

PAGES = toc_files()
NOTEBOOK_PAGES = [name for name in PAGES if (ROOT / f"{name}.ipynb").is_file()]


def chromium_or_skip() -> None:
    if CHROMIUM.is_file():
        return
    reason = (
        f"Chromium is not installed at {CHROMIUM}: install Debian's `chromium` package "
        "(`.ci/run` does), or point COURSE_CHROMIUM at a Chromium binary"
    )
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the browser tests. {reason}")
    pytest.skip(reason)


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@dataclass
class Visit:
    """What the browser saw on one page."""

    name: str
    url: str
    errors: list[str] = field(default_factory=list)  # console errors and uncaught exceptions
    failed: list[str] = field(default_factory=list)  # failed requests and HTTP errors
    blocked: list[str] = field(default_factory=list)  # requests that left 127.0.0.1
    facts: dict = field(default_factory=dict)  # collected in the page by COLLECT_JS
    screenshot: Path | None = None


# Waits until the widget manager has rendered every widget view of the page.
WIDGETS_RENDERED_JS = f"""() => [...document.querySelectorAll('script[type="{WIDGET_VIEW}"]')]
  .every((script) => {{
    const area = script.previousElementSibling;
    return area !== null && area.classList.contains("widget-subarea")
      && area.childElementCount > 0;
  }})"""

# Waits for MathJax (when the page loads it) to finish typesetting, widget labels included.
MATHJAX_DONE_JS = """async () => {
  const mathjax = window.MathJax;
  if (mathjax === undefined) return "no MathJax";
  for (let i = 0; i < 200 && !(mathjax.startup && mathjax.startup.promise); i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  if (!(window.MathJax.startup && window.MathJax.startup.promise)) return "MathJax never started";
  await window.MathJax.startup.promise;
  return "typeset";
}"""

COLLECT_JS = f"""() => {{
  const visible = (element) => {{
    const box = element.getBoundingClientRect();
    return box.width > 0 && box.height > 0;
  }};
  const mathElements = [...document.querySelectorAll(".math")];
  const views = [...document.querySelectorAll('script[type="{WIDGET_VIEW}"]')].map((script) => {{
    const area = script.previousElementSibling;
    const rendered = area !== null && area.classList.contains("widget-subarea");
    return {{
      model: JSON.parse(script.textContent).model_id,
      rendered: rendered && area.childElementCount > 0,
      visible: rendered && visible(area),
      error: rendered && /Error displaying widget|Could not create/i.test(area.textContent),
    }};
  }});
  const widgetRoots = [...document.querySelectorAll(".widget-subarea")];
  const inWidgets = (selector) => widgetRoots
    .flatMap((root) => [...root.querySelectorAll(selector)]);
  const images = [...document.querySelectorAll("img")].map((img) => ({{
    src: img.getAttribute("src") || "",
    alt: img.getAttribute("alt"),
    inWidget: img.closest(".widget-subarea") !== null,
    inFigure: img.closest("figure") !== null,
    loaded: img.complete && img.naturalWidth > 0,
  }}));
  return {{
    mathjax: window.MathJax !== undefined && window.MathJax.version !== undefined
      ? window.MathJax.version : null,
    math: mathElements.length,
    mathUntypeset: mathElements.filter((el) => el.querySelector("mjx-container") === null)
      .map((el) => el.textContent.slice(0, 120)),
    mathErrors: [...document.querySelectorAll("mjx-merror")]
      .map((el) => el.getAttribute("data-mjx-error") || el.textContent.slice(0, 120)),
    // MathJax's noundefined package shows an unknown macro as red text instead of an error
    // (read from the MathML copy: the CHTML output draws its characters with CSS).
    mathUndefined: [...document.querySelectorAll('mjx-assistive-mml mtext[mathcolor="red"]')]
      .map((el) => el.textContent).filter((text) => text.startsWith("\\\\")),
    views: views,
    widgetOutputsWithContent: inWidgets(".widget-output")
      .filter((el) => el.textContent.trim() !== "" || el.querySelector("img") !== null).length,
    widgetImages: inWidgets(".widget-output img").filter((img) => img.naturalWidth > 0).length,
    widgetHtmlWithContent: inWidgets(".widget-html-content")
      .filter((el) => el.innerHTML.trim() !== "").length,
    figures: [...document.querySelectorAll("figure")].map((figure) => ({{
      images: figure.querySelectorAll("img").length,
      alts: [...figure.querySelectorAll("img")].map((img) => img.getAttribute("alt")),
    }})),
    images: images,
    links: [...document.querySelectorAll("a[href]")].map((a) => a.href),
    ids: [...document.querySelectorAll("[id], a[name]")].map((el) => el.id || el.name),
    title: document.title,
  }};
}}"""


class BrowserBook:
    """The book served on 127.0.0.1 and one headless Chromium; each page is visited once."""

    def __init__(self, html: Path) -> None:
        self.html = html
        handler = functools.partial(QuietHandler, directory=str(html))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}/"
        for old in SCREENSHOTS.glob("*.png"):  # the folder shows this run only
            old.unlink()
        self.playwright = sync_playwright().start()
        args = [*CHROMIUM_ARGS]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args.append("--no-sandbox")  # Chromium refuses to start its sandbox as root
        self.browser = self.playwright.chromium.launch(executable_path=str(CHROMIUM), args=args)
        self.visits: dict[str, Visit] = {}

    def close(self) -> None:
        self.browser.close()
        self.playwright.stop()
        self.server.shutdown()
        self.server.server_close()

    def url(self, name: str) -> str:
        return f"{self.base}{name}.html"

    def new_page(self, visit: Visit, width: int = 1280, height: int = 900):
        """A page in a fresh context that aborts (and records) every request off 127.0.0.1."""
        context = self.browser.new_context(viewport={"width": width, "height": height})

        def route(route):
            url = route.request.url
            if url.startswith(self.base):
                route.continue_()
            else:
                visit.blocked.append(url)
                route.abort("blockedbyclient")

        context.route("**/*", route)
        page = context.new_page()

        def console(message):
            if message.type == "error":
                where = message.location.get("url", "")
                visit.errors.append(f"console: {message.text} ({where})")

        def request_failed(request):
            if request.url.startswith(self.base):  # the others are the blocked ones
                visit.failed.append(f"{request.url}: {request.failure}")

        def response(response):
            if response.status >= 400:
                visit.failed.append(f"{response.url}: HTTP {response.status}")

        page.on("console", console)
        page.on("pageerror", lambda error: visit.errors.append(f"uncaught: {error}"))
        page.on("requestfailed", request_failed)
        page.on("response", response)
        return context, page

    def visit(self, name: str) -> Visit:
        if name in self.visits:
            return self.visits[name]
        visit = Visit(name=name, url=self.url(name))
        context, page = self.new_page(visit)
        try:
            page.goto(visit.url, wait_until="load")
            try:
                page.wait_for_function(WIDGETS_RENDERED_JS, timeout=RENDER_TIMEOUT_MS)
            except PlaywrightTimeout:  # the checks below say which widgets are missing
                visit.errors.append(f"widgets not rendered within {RENDER_TIMEOUT_MS} ms")
            visit.facts["mathjax_state"] = page.evaluate(MATHJAX_DONE_JS)
            page.wait_for_load_state("networkidle")
            visit.facts.update(page.evaluate(COLLECT_JS))
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            visit.screenshot = SCREENSHOTS / f"{name.replace('/', '__')}.png"
            page.screenshot(path=str(visit.screenshot), full_page=True)
        finally:
            context.close()
        self.visits[name] = visit
        return visit

    def search(self, query: str) -> list[dict]:
        """Run the book's own search page; the results as {href, text}."""
        visit = Visit(name=f"search:{query}", url=f"{self.base}search.html?q={query}")
        context, page = self.new_page(visit)
        try:
            page.goto(visit.url, wait_until="load")
            page.wait_for_selector("#search-results p.search-summary", timeout=RENDER_TIMEOUT_MS)
            page.screenshot(path=str(SCREENSHOTS / f"search-{query}.png"), full_page=True)
            results = page.eval_on_selector_all(
                "#search-results ul.search li a",
                "links => links.map(a => ({href: a.href, text: a.textContent}))",
            )
        finally:
            context.close()
        assert not (visit.errors or visit.failed or visit.blocked), visit
        return results


@pytest.fixture(scope="module")
def book(book_html) -> Iterator[BrowserBook]:
    chromium_or_skip()
    browser_book = BrowserBook(book_html)
    try:
        yield browser_book
    finally:
        browser_book.close()


def widget_state(html: Path, name: str) -> dict:
    """The widget state stored in a built page ({} when it has no widgets)."""
    soup = BeautifulSoup((html / f"{name}.html").read_text(encoding="utf-8"), "html.parser")
    script = soup.find("script", type=WIDGET_STATE)
    return json.loads(script.string)["state"] if script else {}


def reachable_models(state: dict, roots: list[str]) -> dict:
    """The models the displayed views show, following IPY_MODEL_ references."""
    found: dict = {}
    stack = list(roots)
    while stack:
        model_id = stack.pop()
        if model_id in found or model_id not in state:
            continue
        found[model_id] = state[model_id]
        stack += re.findall(r"IPY_MODEL_([0-9a-f]{32})", json.dumps(state[model_id]["state"]))
    return found


@pytest.mark.parametrize("name", PAGES)
def test_page_loads_offline_without_console_errors_or_failed_requests(book, name):
    visit = book.visit(name)
    assert not visit.blocked, f"{name} asked the network for {visit.blocked}"
    assert not visit.failed, f"{name}: failed requests {visit.failed}"
    assert not visit.errors, f"{name}: {visit.errors}"
    assert visit.screenshot is not None and visit.screenshot.stat().st_size > 0


@pytest.mark.parametrize("name", PAGES)
def test_every_math_element_is_typeset_without_errors(book, name):
    facts = book.visit(name).facts
    if facts["math"]:
        assert facts["mathjax"], f"{name} has {facts['math']} math elements but no MathJax"
        assert facts["mathjax_state"] == "typeset"
    assert not facts["mathUntypeset"], f"{name}: math left as text: {facts['mathUntypeset']}"
    assert not facts["mathErrors"], f"{name}: MathJax errors: {facts['mathErrors']}"
    assert not facts["mathUndefined"], f"{name}: undefined TeX macros {facts['mathUndefined']}"


@pytest.mark.parametrize("name", PAGES)
def test_every_widget_renders_its_stored_state(book, book_html, name):
    facts = book.visit(name).facts
    for view in facts["views"]:
        assert view["rendered"], f"{name}: widget {view['model']} was not rendered"
        assert view["visible"], f"{name}: widget {view['model']} renders as an empty box"
        assert not view["error"], f"{name}: widget {view['model']} shows an error"
    state = widget_state(book_html, name)
    shown = reachable_models(state, [view["model"] for view in facts["views"]])
    outputs = [
        model["state"].get("outputs", [])
        for model in shown.values()
        if model["model_name"] == "OutputModel"
    ]
    images = sum(1 for output in outputs for o in output if "image/png" in o.get("data", {}))
    html = [
        model
        for model in shown.values()
        if model["model_name"] == "HTMLModel" and model["state"].get("value")
    ]
    assert facts["widgetOutputsWithContent"] >= sum(1 for output in outputs if output), name
    assert facts["widgetImages"] >= images, f"{name}: an Output widget lost its figure"
    assert facts["widgetHtmlWithContent"] >= len(html), f"{name}: an HTML widget is empty"


@pytest.mark.parametrize("name", PAGES)
def test_every_figure_and_image_has_alt_text(book, name):
    facts = book.visit(name).facts
    for figure in facts["figures"]:
        assert figure["images"], f"{name}: a figure without an image"
        for alt in figure["alts"]:
            assert alt and alt.strip(), f"{name}: a figure image without alt text"
    for image in facts["images"]:
        assert image["loaded"], f"{name}: image {image['src'][:80]} did not load"
        if image["inWidget"]:
            continue  # drawn by the widget manager from the stored state, which has no alt
        alt = (image["alt"] or "").strip()
        assert alt, f"{name}: image {image['src'][:80]} has no alt text"
        assert alt != image["src"] and not alt.lower().endswith((".png", ".svg", ".jpg")), (
            f"{name}: image {image['src'][:80]} has its file name as alt text"
        )


def fetch(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, b""


@pytest.mark.parametrize("name", PAGES)
def test_internal_links_and_anchors_resolve(book, name):
    visit = book.visit(name)
    broken = []
    for link in sorted(set(visit.facts["links"])):
        if not link.startswith(book.base):
            continue  # external: not reachable here (the Colab link is checked on its own)
        target, fragment = urldefrag(link)
        path = unquote(urlsplit(target).path).lstrip("/") or "index.html"
        if target.rstrip("/") + "/" == book.base:
            path = "index.html"
        status, body = fetch(target)
        if status != 200:
            broken.append(f"{link}: HTTP {status}")
            continue
        if not fragment:
            continue
        page_name = path.removesuffix(".html")
        if page_name in PAGES:
            ids = set(book.visit(page_name).facts["ids"])
        else:
            soup = BeautifulSoup(body.decode("utf-8", "replace"), "html.parser")
            ids = {tag.get("id") for tag in soup.find_all(id=True)}
            ids |= {tag.get("name") for tag in soup.find_all("a", attrs={"name": True})}
        if unquote(fragment) not in ids:
            broken.append(f"{link}: no element with id {fragment!r} in {path}")
    assert not broken, f"{name}: broken links:\n" + "\n".join(broken)


def colab_url(name: str) -> str:
    repository = book_config()["repository"]
    owner_repo = repository["url"].removeprefix("https://github.com/").strip("/")
    folder = (repository.get("path_to_book") or "").strip("/")
    path = f"{folder}/{name}.ipynb" if folder else f"{name}.ipynb"
    return (
        f"https://colab.research.google.com/github/{owner_repo}/blob/{repository['branch']}/{path}"
    )


@pytest.mark.parametrize("name", NOTEBOOK_PAGES)
def test_colab_link_opens_this_chapters_notebook_in_the_repository(book, name):
    links = [link for link in book.visit(name).facts["links"] if "colab.research.google" in link]
    assert links == [colab_url(name)], f"{name}: Colab links {links}"
    assert (ROOT / f"{name}.ipynb").is_file()


def test_search_finds_the_positional_encoding_chapter_for_sinusoid(book):
    results = book.search("sinusoid")
    chapter = book.url("chapters/positional-encoding")
    hits = [result for result in results if result["href"].split("#")[0] == chapter]
    assert hits, f"searching 'sinusoid' gave {results}"
    assert any("Positional encoding" in hit["text"] for hit in hits), hits


RADIO_ROWS_JS = """() => [...document.querySelectorAll('.widget-radio-box')].map(box => {
    const labels = [...box.querySelectorAll('label')];
    const rects = labels.map(label => label.getBoundingClientRect());
    return {
        labels: labels.map(label => label.textContent.trim()),
        overlapping: labels.slice(1)
            .filter((label, i) => rects[i].bottom > rects[i + 1].top + 0.5)
            .map(label => label.textContent.trim()),
        overflowing: labels
            .filter(label => label.scrollHeight > label.clientHeight + 1
                          || label.scrollWidth > label.clientWidth + 1)
            .map(label => label.textContent.trim()),
    };
})"""
CHOICE_PAGES = sorted(
    {f"chapters/{e.chapter}" for e in list_exercises() if isinstance(e, ChoiceExercise)}
)


@pytest.mark.parametrize("width, height", [(1366, 768), (390, 844)])
@pytest.mark.parametrize("name", CHOICE_PAGES)
def test_every_radio_option_has_a_row_of_its_own_that_holds_its_text(book, name, width, height):
    visit = Visit(name=f"{name}@{width}", url=book.url(name))
    context, page = book.new_page(visit, width, height)
    try:
        page.goto(visit.url, wait_until="load")
        page.wait_for_function(WIDGETS_RENDERED_JS, timeout=RENDER_TIMEOUT_MS)
        boxes = page.evaluate(RADIO_ROWS_JS)
    finally:
        context.close()
    assert boxes, f"{name}: no radio buttons rendered"
    for box in boxes:
        assert not box["overlapping"], f"{name} at {width} px: rows overlap {box}"
        assert not box["overflowing"], f"{name} at {width} px: text runs out of its row {box}"
