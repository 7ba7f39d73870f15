"""The built book in a real browser: Debian's Chromium, driven by Playwright, with no network.

The book (built once per session, see ``book_html`` in conftest.py) is served over HTTP on
127.0.0.1. Every request that is not to that server is aborted and recorded, so a page passes
only if it works offline. Each page of the table of contents is loaded once; what the browser saw
(console errors, failed requests, typeset math, rendered widgets, images, links, element ids) is
recorded and checked by the tests below, and a full-page screenshot is saved under
``_build/screenshots/`` for review.

Pages are also looked at as readers see them (issue 18): at 1366 x 768 (a laptop) and 390 x 844
(a phone), in the light theme and in the dark one (set as the theme button sets it), with
scrollbars shown as Linux and Windows show them. Nothing may be clipped without a scrollbar, no
page may scroll sideways on the phone, no two text boxes of a widget may overlap, and widget
text and captions must contrast with their background at least 4.5:1 (WCAG AA). Each such look
is one page load, shared by all the tests that use it; its screenshot is
``_build/screenshots/<page>@<width>x<height>-<theme>.jpg``.

Where Chromium is missing these tests are skipped with the reason, except in CI (``CI`` set),
where they fail: ``.ci/run`` installs Debian's ``chromium`` package.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import re
import threading
import time
import urllib.error
import urllib.request
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
# Waits in the browser are for a condition (widgets drawn, maths typeset, requests answered),
# never for a stretch of quiet; this limit only ends a wait that would hang, and is long enough
# for a machine whose two cores are both busy with other work (issue 29).
RENDER_TIMEOUT_MS = 120_000


@dataclass(frozen=True)
class Look:
    """A window size and a colour theme of the book ("light" or "dark")."""

    width: int
    height: int
    theme: str = "light"

    def __str__(self) -> str:
        return f"{self.width}x{self.height}-{self.theme}"


LAPTOP = Look(1366, 768)
PHONE = Look(390, 844)
LOOKS = [LAPTOP, PHONE, Look(1366, 768, "dark"), Look(390, 844, "dark")]
PHONE_LOOKS = [look for look in LOOKS if look.width == PHONE.width]
MIN_CONTRAST = 4.5  # WCAG 2 AA, normal text

# How pydata-sphinx-theme's theme button stores the reader's choice (it reads it back, before the
# page is drawn, in an inline script of every page): set before any page script runs, so that
# the page and its widgets are drawn in that theme from the start.
THEME_INIT_JS = """(theme) => {
  localStorage.setItem("mode", theme);
  localStorage.setItem("theme", theme);
}"""

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
    pending: set = field(default_factory=set)  # requests sent and not yet answered
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

# What a reader would see wrong in the layout, collected after the page is drawn:
# - clipped: boxes whose content reaches past their right edge while they clip it (overflow
#   hidden or clip), or scroll it with no scrollbar drawn. The content is the boxes of the
#   element's descendants, not looking into nested boxes that clip or scroll on their own, nor
#   into MathJax's copy of each formula for screen readers (clipped to nothing by design);
# - pageWidth/viewportWidth and wide: the elements that make the page wider than the window
#   (they reach past its right edge while their parent does not, and nothing clips them);
# - overlaps: pairs of text boxes of one widget that overlap. The text boxes are the lines of
#   each text (from its Range), each control (input, button, select, slider handle, readout) and
#   each typeset formula; a box is not compared with the box it sits in;
# - texts: each text of a widget, an HTML output (the progress table) or a caption, its colour
#   and its background, composited (alpha and opacity) through every ancestor down from the
#   page's own background;
# - tables: each table's scroll box and how far (px) it scrolls sideways;
# - radios: for each group of radio buttons, rows that overlap and labels whose text runs out;
# - theme: the theme the page is drawn in.
LAYOUT_JS = """async () => {
  await document.fonts.ready;  // then two frames: the layout with the fonts in place
  await new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
  const short = (element) => {
    const parts = [];
    for (let e = element; e && e !== document.body && parts.length < 4; e = e.parentElement) {
      let part = e.tagName.toLowerCase();
      if (e.id && !/^[0-9a-f-]{20,}$/.test(e.id)) part += "#" + e.id;
      else if (e.classList.length) part += "." + [...e.classList].slice(0, 2).join(".");
      parts.unshift(part);
    }
    return parts.join(" > ");
  };
  const text = (element) => element.textContent.trim().replace(/\\s+/g, " ").slice(0, 60);
  const drawn = (rect) => rect.width > 0 && rect.height > 0;
  const clips = (element) => getComputedStyle(element).overflowX !== "visible";
  const hiddenMath = (element) => element.closest("mjx-assistive-mml") !== null;

  const reach = (box) => {
    let right = -Infinity;
    const walk = (node) => {
      for (const child of node.children) {
        if (child.tagName === "MJX-ASSISTIVE-MML") continue;
        const rect = child.getBoundingClientRect();
        if (drawn(rect) && getComputedStyle(child).visibility !== "hidden") {
          right = Math.max(right, rect.right);
        }
        if (!clips(child)) walk(child);
      }
    };
    walk(box);
    return right;
  };
  const clipping = (element) => {
    if (element.clientWidth === 0 || element.scrollWidth <= element.clientWidth + 1) return null;
    if (!clips(element) || hiddenMath(element)) return null;
    const style = getComputedStyle(element);
    const inner = element.getBoundingClientRect().left + element.clientLeft + element.clientWidth;
    const by = reach(element) - inner;
    if (by <= 1) return null;
    const scrollbar = element.offsetHeight - element.clientHeight
      - parseFloat(style.borderTopWidth) - parseFloat(style.borderBottomWidth);
    if (["auto", "scroll"].includes(style.overflowX) && scrollbar > 0) return null;
    return {element: short(element), overflow: style.overflowX, by: Math.round(by),
            text: text(element)};
  };
  // A box that scrolls is sometimes measured, on a loaded machine, in the moment before
  // Chromium draws its scrollbar: what clips is looked at again once the page has settled.
  const suspects = [...document.querySelectorAll("body *")].filter((e) => clipping(e) !== null);
  if (suspects.length) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    await new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
  }
  const clipped = suspects.map(clipping).filter((found) => found !== null);

  const viewportWidth = document.documentElement.clientWidth;
  const wide = [];
  for (const element of document.querySelectorAll("body *")) {
    const rect = element.getBoundingClientRect();
    if (!drawn(rect) || rect.right <= viewportWidth + 1 || hiddenMath(element)) continue;
    const parent = element.parentElement.getBoundingClientRect();
    if (parent.right > viewportWidth + 1) continue;
    let clippedAbove = false;
    for (let e = element.parentElement; e && e !== document.body; e = e.parentElement) {
      const style = getComputedStyle(e);
      if (style.overflowX !== "visible" || style.position === "fixed") clippedAbove = true;
    }
    if (clippedAbove || getComputedStyle(element).position === "fixed") continue;
    wide.push({element: short(element), right: Math.round(rect.right), text: text(element)});
  }

  const widgets = [...document.querySelectorAll(".widget-subarea")];
  const textNodes = (root) => {
    const found = [];
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (node.textContent.trim() === "" || hiddenMath(node.parentElement)) continue;
      if (getComputedStyle(node.parentElement).visibility === "hidden") continue;
      found.push(node);
    }
    return found;
  };

  const CONTROLS = "input:not([type=hidden]), button, select, textarea, .widget-readout, "
    + ".noUi-handle, mjx-container";
  const overlaps = [];
  widgets.forEach((root, index) => {
    const boxes = [];
    for (const control of root.querySelectorAll(CONTROLS)) {
      if (hiddenMath(control) || control.closest("mjx-container") !== control
          && control.closest("mjx-container") !== null) continue;
      const rect = control.getBoundingClientRect();
      if (drawn(rect)) boxes.push({owner: control, rect: rect, what: short(control)});
    }
    for (const node of textNodes(root)) {
      if (node.parentElement.closest("mjx-container")) continue;
      const range = document.createRange();
      range.selectNodeContents(node);
      for (const rect of range.getClientRects()) {
        if (drawn(rect)) {
          const words = node.textContent.trim().slice(0, 40);
          boxes.push({owner: node.parentElement, rect: rect,
                      what: `${short(node.parentElement)} "${words}"`});
        }
      }
    }
    for (let i = 0; i < boxes.length; i++) {
      for (let j = i + 1; j < boxes.length; j++) {
        const [a, b] = [boxes[i], boxes[j]];
        if (a.owner === b.owner || a.owner.contains(b.owner) || b.owner.contains(a.owner)) continue;
        const across = Math.min(a.rect.right, b.rect.right) - Math.max(a.rect.left, b.rect.left);
        const down = Math.min(a.rect.bottom, b.rect.bottom) - Math.max(a.rect.top, b.rect.top);
        if (across > 1 && down > 1) {
          overlaps.push({widget: index, a: a.what, b: b.what,
                         by: [Math.round(across), Math.round(down)]});
        }
      }
    }
  });

  const rgba = (css) => {
    const numbers = (css.match(/[0-9.]+/g) || []).map(Number);
    if (css.startsWith("color(srgb")) {
      return [numbers[0] * 255, numbers[1] * 255, numbers[2] * 255, numbers[3] ?? 1];
    }
    return [numbers[0], numbers[1], numbers[2], numbers[3] ?? 1];
  };
  const over = (top, bottom) => {  // top composited over an opaque bottom
    const alpha = top[3];
    return [0, 1, 2].map((i) => top[i] * alpha + bottom[i] * (1 - alpha)).concat([1]);
  };
  const luminance = (color) => {
    const [r, g, b] = color.slice(0, 3).map((value) => {
      const c = value / 255;
      return c <= 0.04045 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const css = (color) => "#" + color.slice(0, 3)
    .map((value) => Math.round(value).toString(16).padStart(2, "0")).join("");
  const texts = [];
  const outputs = [...document.querySelectorAll(".cell_output .text_html")];
  const captions = [...document.querySelectorAll("figcaption, caption, .caption-text")];
  for (const root of [...widgets, ...outputs, ...captions]) {
    for (const node of textNodes(root)) {
      const owner = node.parentElement;
      if (!drawn(owner.getBoundingClientRect())) continue;
      const chain = [];
      for (let e = owner; e; e = e.parentElement) chain.unshift(e);
      let background = [255, 255, 255, 1];
      let opacity = 1;
      for (const e of chain) {
        const style = getComputedStyle(e);
        opacity *= parseFloat(style.opacity);
        background = over(rgba(style.backgroundColor), background);
      }
      const color = rgba(getComputedStyle(owner).color);
      const foreground = over([...color.slice(0, 3), color[3] * opacity], background);
      const [light, dark] = [luminance(foreground), luminance(background)]
        .sort((x, y) => y - x);
      texts.push({element: short(owner), text: node.textContent.trim().slice(0, 40),
                  color: css(foreground), background: css(background),
                  ratio: Math.round((light + 0.05) / (dark + 0.05) * 100) / 100});
    }
  }

  const radios = [...document.querySelectorAll(".widget-radio-box")].map((box) => {
    const labels = [...box.querySelectorAll("label")];
    const rects = labels.map((label) => label.getBoundingClientRect());
    return {
      labels: labels.map((label) => label.textContent.trim()),
      overlapping: labels.slice(1)
        .filter((label, i) => rects[i].bottom > rects[i + 1].top + 0.5)
        .map((label) => label.textContent.trim()),
      overflowing: labels
        .filter((label) => label.scrollHeight > label.clientHeight + 1
                        || label.scrollWidth > label.clientWidth + 1)
        .map((label) => label.textContent.trim()),
    };
  });

  const tables = [...document.querySelectorAll("div.pst-scrollable-table-container")]
    .map((box) => ({table: text(box), by: box.scrollWidth - box.clientWidth}));

  return {
    clipped: clipped,
    tables: tables,
    pageWidth: document.documentElement.scrollWidth,
    viewportWidth: viewportWidth,
    wide: wide,
    overlaps: overlaps,
    texts: texts,
    radios: radios,
    theme: document.documentElement.dataset.theme,
  };
}"""


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
FONTS_LOADED_JS = "() => document.fonts.ready.then(() => document.fonts.status)"

# Loads every font face the page's style sheets declare, used on this page or not (a browser
# fetches a face only when some text needs it, e.g. when a widget shows an icon), and returns
# the families of those that fail; the failed requests themselves are recorded by the visit.
DECLARED_FONTS_JS = """
async () => {
  const faces = [...document.fonts];
  const results = await Promise.allSettled(faces.map((face) => face.load()));
  const failed = faces.filter((face, i) => results[i].status === "rejected");
  return {
    declared: [...new Set(faces.map((face) => face.family))],
    failed: [...new Set(failed.map((face) => `${face.family} ${face.style} ${face.weight}`))],
  };
}
"""


def wait_for_requests(page, visit: Visit) -> None:
    """Wait until every request the page has sent is answered (or refused), however long the
    machine takes; a page still asking after RENDER_TIMEOUT_MS is recorded as an error."""
    deadline = time.monotonic() + RENDER_TIMEOUT_MS / 1000
    while visit.pending:
        if time.monotonic() > deadline:
            unanswered = sorted(request.url for request in visit.pending)
            visit.errors.append(f"requests still unanswered: {unanswered}")
            return
        page.wait_for_timeout(50)  # lets Playwright deliver the page's events


def main_thread_seconds(devtools) -> float:
    """The processor time the page's main thread has used so far (Chrome's ThreadTime)."""
    metrics = devtools.send("Performance.getMetrics")["metrics"]
    (seconds,) = [m["value"] for m in metrics if m["name"] == "ThreadTime"]
    return seconds


def goto_measured(context, page, url: str) -> dict[str, float]:
    """Load ``url`` in ``page`` up to its load event: ``processor_ms``, the processor time the
    page's main thread spent from navigation to just after the load event, and ``event_ms``,
    the milliseconds from navigation to the end of the load event."""
    devtools = context.new_cdp_session(page)
    devtools.send("Performance.enable")
    before = main_thread_seconds(devtools)
    page.goto(url, wait_until="load")
    processor_ms = (main_thread_seconds(devtools) - before) * 1000
    devtools.detach()
    event_ms = page.evaluate("() => performance.getEntriesByType('navigation')[0].loadEventEnd")
    return {"processor_ms": processor_ms, "event_ms": event_ms}


class BrowserBook:
    """The book served on 127.0.0.1 and one headless Chromium; each page is visited once."""

    def __init__(
        self,
        html: Path,
        screenshots: Path = SCREENSHOTS,
        visits: dict[tuple[str, Look], Visit] | None = None,
    ) -> None:
        """Serve ``html``; screenshots go to ``screenshots``, emptied of an earlier run's when
        ``visits`` (what earlier books of this session saw, to be shared) is empty."""
        self.html = html
        self.screenshots = screenshots
        handler = functools.partial(QuietHandler, directory=str(html))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.visits: dict[tuple[str, Look], Visit] = {} if visits is None else visits
        # the folder shows this run only: what earlier runs left goes (not what another
        # worker of this run already wrote)
        started = float(os.environ.get("COURSE_LIB_RUN_STARTED", "inf"))
        for old in [*screenshots.glob("*.png"), *screenshots.glob("*.jpg")]:
            with contextlib.suppress(FileNotFoundError):
                if old.stat().st_mtime < started:
                    old.unlink()
        self.playwright = sync_playwright().start()
        args = [*CHROMIUM_ARGS]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args.append("--no-sandbox")  # Chromium refuses to start its sandbox as root
        # Playwright hides scrollbars in headless Chromium; readers see them.
        self.browser = self.playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=args, ignore_default_args=["--hide-scrollbars"]
        )

    def close(self) -> None:
        self.browser.close()
        self.playwright.stop()
        self.server.shutdown()
        self.server.server_close()

    def url(self, name: str) -> str:
        return f"{self.base}{name}.html"

    def new_page(self, visit: Visit, width: int = 1280, height: int = 900, theme: str = "light"):
        """A page in a fresh context that aborts (and records) every request off 127.0.0.1,
        in the book's light or dark ``theme``."""
        context = self.browser.new_context(viewport={"width": width, "height": height})
        context.add_init_script(f"({THEME_INIT_JS})({json.dumps(theme)})")

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
            visit.pending.discard(request)
            if request.url.startswith(self.base):  # the others are the blocked ones
                visit.failed.append(f"{request.url}: {request.failure}")

        def response(response):
            if response.status >= 400:
                visit.failed.append(f"{response.url}: HTTP {response.status}")

        page.on("console", console)
        page.on("pageerror", lambda error: visit.errors.append(f"uncaught: {error}"))
        page.on("request", lambda request: visit.pending.add(request))
        page.on("requestfinished", lambda request: visit.pending.discard(request))
        page.on("requestfailed", request_failed)
        page.on("response", response)
        return context, page

    def visit(self, name: str, width: int = 1366, height: int = 768, theme: str = "light") -> Visit:
        """Load a page once per window size and theme, wait until its widgets and maths are
        drawn, and record what the browser saw (``facts``) and a full-page screenshot."""
        look = Look(width, height, theme)
        if (name, look) in self.visits:
            return self.visits[name, look]
        visit = Visit(name=name, url=self.url(name))
        context, page = self.new_page(visit, width, height, theme)
        try:
            if look == LAPTOP:  # measured there only: Chrome's metrics slow a page by a tenth
                visit.facts["load"] = goto_measured(context, page, visit.url)
            else:
                page.goto(visit.url, wait_until="load")
            try:
                page.wait_for_function(WIDGETS_RENDERED_JS, timeout=RENDER_TIMEOUT_MS)
            except PlaywrightTimeout:  # the checks below say which widgets are missing
                visit.errors.append(f"widgets not rendered within {RENDER_TIMEOUT_MS} ms")
            visit.facts["mathjax_state"] = page.evaluate(MATHJAX_DONE_JS)
            page.evaluate(FONTS_LOADED_JS)
            if look == LAPTOP:  # the faces a page declares are the same in every look
                visit.facts["fonts"] = page.evaluate(DECLARED_FONTS_JS)
            wait_for_requests(page, visit)
            page.wait_for_function(IMAGES_LOADED_JS, timeout=RENDER_TIMEOUT_MS)
            visit.facts.update(page.evaluate(COLLECT_JS))
            visit.facts.update(page.evaluate(LAYOUT_JS))
            visit.facts["figure_images"] = page.evaluate(FIGURE_IMAGES_JS)
            self.screenshots.mkdir(parents=True, exist_ok=True)
            # JPEG: a tall page's PNG takes seconds to encode, and there are four looks per page.
            visit.screenshot = self.screenshots / f"{name.replace('/', '__')}@{look}.jpg"
            page.screenshot(path=str(visit.screenshot), full_page=True, type="jpeg", quality=80)
        finally:
            context.close()
        self.visits[name, look] = visit
        return visit

    def search(self, query: str) -> list[dict]:
        """Run the book's own search page; the results as {href, text}."""
        visit = Visit(name=f"search:{query}", url=f"{self.base}search.html?q={query}")
        context, page = self.new_page(visit)
        try:
            page.goto(visit.url, wait_until="load")
            page.wait_for_selector("#search-results p.search-summary", timeout=RENDER_TIMEOUT_MS)
            page.screenshot(path=str(self.screenshots / f"search-{query}.png"), full_page=True)
            results = page.eval_on_selector_all(
                "#search-results ul.search li a",
                "links => links.map(a => ({href: a.href, text: a.textContent}))",
            )
        finally:
            context.close()
        assert not (visit.errors or visit.failed or visit.blocked), visit
        return results


def widget_state(html: Path, name: str) -> dict:
    """The widget state stored in a built page ({} when it has no widgets)."""
    soup = BeautifulSoup((html / f"{name}.html").read_text(encoding="utf-8"), "html.parser")
    script = soup.find("script", type=WIDGET_STATE)
    return json.loads(script.string)["state"] if script else {}


def reachable_models(state: dict, roots: list[str], shown_only: bool = False) -> dict:
    """The models the displayed views hold, following IPY_MODEL_ references; with
    ``shown_only``, only the selected child of a ``Stack`` (the one the page renders: an
    explorer's other stored states wait for their control)."""
    found: dict = {}
    stack = list(roots)
    while stack:
        model_id = stack.pop()
        if model_id in found or model_id not in state:
            continue
        found[model_id] = model = state[model_id]
        fields = dict(model["state"])
        if shown_only and model["model_name"] == "StackModel":
            children, chosen = fields.pop("children", []), fields.get("selected_index")
            stack += [children[chosen][len("IPY_MODEL_") :]] if chosen is not None else []
        stack += re.findall(r"IPY_MODEL_([0-9a-f]{32})", json.dumps(fields))
    return found


@pytest.mark.parametrize("name", PAGES)
def test_page_loads_offline_without_console_errors_or_failed_requests(book, name):
    visit = book.visit(name)
    assert not visit.blocked, f"{name} asked the network for {visit.blocked}"
    assert not visit.failed, f"{name}: failed requests {visit.failed}"
    assert not visit.errors, f"{name}: {visit.errors}"
    assert visit.screenshot is not None and visit.screenshot.stat().st_size > 0


@pytest.mark.parametrize("name", PAGES)
def test_every_font_face_the_page_declares_loads(book, name):
    """Icons and symbols the page has not drawn yet included: a widget's icon font once
    loaded from a folder the book does not serve, which only showed when a slow machine
    happened to draw an icon before the visit ended."""
    fonts = book.visit(name).facts["fonts"]
    assert fonts["declared"], f"{name} declares no font face"
    assert not fonts["failed"], f"{name}: font faces that do not load: {fonts['failed']}"


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
    shown = reachable_models(state, [view["model"] for view in facts["views"]], shown_only=True)
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


CHOICE_PAGES = sorted(
    {f"chapters/{e.chapter}" for e in list_exercises() if isinstance(e, ChoiceExercise)}
)


@pytest.mark.parametrize("width, height", [(1366, 768), (390, 844), (1920, 1080)])
@pytest.mark.parametrize("name", CHOICE_PAGES)
def test_every_radio_option_has_a_row_of_its_own_that_holds_its_text(book, name, width, height):
    boxes = book.visit(name, width, height).facts["radios"]
    assert boxes, f"{name}: no radio buttons rendered"
    for box in boxes:
        assert not box["overlapping"], f"{name} at {width} px: rows overlap {box}"
        assert not box["overflowing"], f"{name} at {width} px: text runs out of its row {box}"


def looked_at(book: BrowserBook, name: str, look: Look) -> dict:
    """The facts of a page seen in ``look``, after checking it is drawn in that theme."""
    facts = book.visit(name, look.width, look.height, look.theme).facts
    assert facts["theme"] == look.theme, f"{name} at {look}: drawn in the {facts['theme']} theme"
    return facts


def listing(items: list[dict]) -> str:
    return "\n".join(f"  {item}" for item in items)


@pytest.mark.parametrize("look", LOOKS, ids=str)
@pytest.mark.parametrize("name", PAGES)
def test_no_element_clips_its_content_without_a_scrollbar(book, name, look):
    clipped = looked_at(book, name, look)["clipped"]
    assert not clipped, (
        f"{name} at {look}: {len(clipped)} boxes cut off their content (by px) with no "
        f"scrollbar:\n{listing(clipped)}"
    )


@pytest.mark.parametrize("look", PHONE_LOOKS, ids=str)
def test_the_instructors_tables_fit_a_phone_without_scrolling(book, look):
    tables = looked_at(book, "instructors", look)["tables"]
    assert tables, "instructors: no tables found"
    scrolling = [table for table in tables if table["by"] > 0]
    assert not scrolling, f"instructors at {look}: tables scroll sideways:\n{listing(scrolling)}"


@pytest.mark.parametrize("look", PHONE_LOOKS, ids=str)
@pytest.mark.parametrize("name", PAGES)
def test_no_page_scrolls_sideways_on_a_phone(book, name, look):
    facts = looked_at(book, name, look)
    assert facts["pageWidth"] <= facts["viewportWidth"], (
        f"{name} at {look}: the page is {facts['pageWidth']} px wide in a "
        f"{facts['viewportWidth']} px window, made wider by:\n{listing(facts['wide'])}"
    )


@pytest.mark.parametrize("look", LOOKS, ids=str)
@pytest.mark.parametrize("name", PAGES)
def test_no_two_text_boxes_of_a_widget_overlap(book, name, look):
    overlaps = looked_at(book, name, look)["overlaps"]
    assert not overlaps, (
        f"{name} at {look}: {len(overlaps)} pairs of overlapping text boxes (by px across, "
        f"down) in widgets:\n{listing(overlaps[:20])}"
    )


@pytest.mark.parametrize("look", LOOKS, ids=str)
@pytest.mark.parametrize("name", PAGES)
def test_text_of_widgets_html_outputs_and_captions_contrasts_at_least_4_5_to_1(book, name, look):
    low = [text for text in looked_at(book, name, look)["texts"] if text["ratio"] < MIN_CONTRAST]
    assert not low, (
        f"{name} at {look}: {len(low)} texts of widgets, HTML outputs or captions below "
        f"{MIN_CONTRAST}:1 against their background:\n{listing(low[:20])}"
    )
