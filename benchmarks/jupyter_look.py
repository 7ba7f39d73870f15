"""Look at course_lib's widgets in JupyterLab and Classic Notebook, with ipywidgets 8 and 7.7.

Not a test (the test suite never runs it): it starts a Jupyter server from a virtual
environment OUTSIDE the repository, opens a notebook of the course's widgets there (every kind
of exercise widget and two explorers, or a chapter you name), runs all its cells in Chromium,
takes a screenshot at each width and measures what a reader would see:

- every radio option has a row of its own that holds its radio button (no overlap);
- no widget reaches past the right edge of its output area (nothing cut off on a phone);
- the widgets' maths is typeset (no ``$`` left in their visible text);
- the lowest contrast of widget text on its background (dark themes: 4.5:1 is the aim).

Set up the environments once (torch 2.13.0 comes from the CPU wheel pip finds):

    python3 -m venv /tmp/jl8
    /tmp/jl8/bin/pip install "jupyterlab>=4,<5" "notebook>=7,<8" nbclassic "ipywidgets>=8,<9" \
        torch==2.13.0 -e .
    python3 -m venv /tmp/jl7
    /tmp/jl7/bin/pip install notebook==6.5.7 ipywidgets==7.7.1 widgetsnbextension==3.6.6 \
        jupyterlab_widgets==1.1.1 "jupyterlab>=3.6,<4" torch==2.13.0 -e .

Then, with the repository's own environment (it has Playwright; Chromium is /usr/bin/chromium):

    .venv/bin/python benchmarks/jupyter_look.py --venv /tmp/jl8 --ui lab --theme dark
    .venv/bin/python benchmarks/jupyter_look.py --venv /tmp/jl8 --ui nbclassic
    .venv/bin/python benchmarks/jupyter_look.py --venv /tmp/jl7 --ui lab --theme light
    .venv/bin/python benchmarks/jupyter_look.py --venv /tmp/jl7 --ui classic
    .venv/bin/python benchmarks/jupyter_look.py --venv /tmp/jl8 \\
        --notebook chapters/self-attention.ipynb

``--ui classic`` is Notebook 6.5 (ipywidgets 7.7), ``nbclassic`` the classic interface served
beside Notebook 7 (ipywidgets 8); Classic has no dark theme. Screenshots go to
``_build/jupyter_look/`` (``--out``), one per width, named after the environment, interface and
theme; the measurements are printed, one line per width.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
WIDTHS = (1024, 1366, 1920, 390)

GALLERY_CELLS = [
    "import os\nos.environ['COURSE_LIB_HOME'] = 'progress'\n"
    "import ipywidgets\nprint('ipywidgets', ipywidgets.__version__)",
    "from course_lib.exercises import ask, check, hint, progress",
    'ask("add-norm-order")',
    'ask("glance-architecture")',
    'ask("mha-parameter-count")',
    'check("mha-parameter-count", 787968)',
    "def split_heads(x, num_heads):\n    return x.reshape(x.size(0), num_heads, x.size(1), -1)\n"
    'check("split-heads", split_heads)',
    'def merge_heads(x):\n    raise NotImplementedError\ncheck("merge-heads", merge_heads)',
    'hint("mha-parameter-count")\nhint("mha-parameter-count")',
    'progress("multi-head-attention")',
    "from course_lib.explorers.attention import attention_explorer\n"
    "attention_explorer(num_heads=4)",
    "from course_lib.explorers.at_work import RecipeExplorer\nRecipeExplorer()",
]

# What the page shows, measured in the browser: overlaps, overflow, maths, contrast.
MEASURE_JS = """
() => {
  const outputs = [...document.querySelectorAll('.jp-OutputArea-output, .output_subarea')];
  const widgets = outputs.flatMap((o) => [...o.querySelectorAll('.jupyter-widgets')]);
  const radios = [...document.querySelectorAll('.widget-radio-box')];
  let overlaps = 0, detached = 0;
  for (const box of radios) {
    const labels = [...box.querySelectorAll('label')].map((l) => [l, l.getBoundingClientRect()]);
    for (let i = 1; i < labels.length; i++) {
      if (labels[i][1].top < labels[i - 1][1].bottom - 1) overlaps++;
    }
    for (const [label, rect] of labels) {
      const input = label.querySelector('input');
      const r = input && input.getBoundingClientRect();
      if (!r || r.top < rect.top - 1 || r.bottom > rect.bottom + 1) detached++;
    }
  }
  let overflowing = 0;
  const overflows = new Set();
  for (const o of outputs) {
    const right = o.getBoundingClientRect().right;
    for (const w of o.querySelectorAll('.jupyter-widgets')) {
      const rect = w.getBoundingClientRect();
      if (rect.width > 0 && rect.right > right + 1) {
        overflowing++;
        overflows.add([...w.classList].filter((c) => c.startsWith('widget-')).join('.'));
      }
    }
  }
  const texts = [...document.querySelectorAll(
    '.widget-htmlmath, .widget-label, .widget-label-basic, .widget-html')];
  const dollars = texts.filter((t) => /\\$[^$\\s][^$]*\\$/.test(t.innerText)).length;
  const typeset = document.querySelectorAll(
    '.jupyter-widgets mjx-container, .jupyter-widgets .MathJax, .jupyter-widgets .MathJax_CHTML,'
    + ' .jupyter-widgets .MathJax_SVG').length;
  function rgb(text) {  // 0..255 channels; Chromium writes a color-mix() as color(srgb 0..1)
    const m = text.match(/[\\d.]+/g);
    if (!m) return [0, 0, 0, 0];
    const values = m.map(Number);
    return text.startsWith('color(') ? values.map((v, i) => (i < 3 ? v * 255 : v)) : values;
  }
  function luminance([r, g, b]) {
    const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  }
  function background(el) {
    for (let e = el; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c.length < 4 || c[3] > 0.5) return c;
    }
    return [255, 255, 255];
  }
  let lowest = 99, worst = '';
  for (const w of widgets) {
    for (const el of w.querySelectorAll('*')) {
      const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
      if (!own || el.getClientRects().length === 0) continue;
      const a = luminance(rgb(getComputedStyle(el).color)), b = luminance(background(el));
      const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
      if (ratio < lowest) { lowest = ratio; worst = el.textContent.trim().slice(0, 40); }
    }
  }
  return {radios: radios.length, overlaps, detached, widgets: widgets.length, overflowing,
          overflows: [...overflows],
          dollars, typeset, lowest: Math.round(lowest * 100) / 100, worst};
}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gallery(folder: Path) -> Path:
    """A notebook of the course's widgets: every exercise widget kind and two explorers."""
    notebook = nbformat.v4.new_notebook()
    # A chapter's text comes first, with maths, as in the book: JupyterLab 3 loads MathJax
    # only when some output or text needs it, and ipywidgets 7 typesets only once it has.
    opening = nbformat.v4.new_markdown_cell("The course's widgets, with $d_{model}$ maths.")
    notebook.cells = [opening, *(nbformat.v4.new_code_cell(code) for code in GALLERY_CELLS)]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}  # fmt: skip
    path = folder / "widget-gallery.ipynb"
    nbformat.write(notebook, path)
    return path


def settings(folder: Path, theme: str) -> Path:
    """JupyterLab user settings: the theme, and every cell rendered (no windowing)."""
    base = folder / "settings"
    theme_name = "JupyterLab Dark" if theme == "dark" else "JupyterLab Light"
    files = {
        "@jupyterlab/apputils-extension/themes.jupyterlab-settings": {"theme": theme_name},
        "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false"},
    }
    for name, value in files.items():
        path = base / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
    return base


def start_server(
    venv: Path, ui: str, folder: Path, port: int, token: str, theme: str, library: str | None
):
    """The Jupyter server of ``venv`` for ``ui``, serving ``folder`` on 127.0.0.1."""
    jupyter = str(venv / "bin" / "jupyter")
    common = ["--no-browser", "--ip=127.0.0.1", f"--port={port}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # a container's root
        common.append("--allow-root")
    if ui == "classic":  # Notebook 6.5
        command = [jupyter, "notebook", *common, f"--NotebookApp.token={token}",
                   f"--notebook-dir={folder}"]  # fmt: skip
    else:
        app = "lab" if ui == "lab" else "nbclassic"
        command = [jupyter, app, *common, f"--ServerApp.token={token}",
                   f"--ServerApp.root_dir={folder}"]  # fmt: skip
        if ui == "lab":
            command.append(f"--LabApp.user_settings_dir={settings(folder, theme)}")
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(folder / "config"),
        "JUPYTER_RUNTIME_DIR": str(folder / "runtime"),
    }
    if library:  # another course_lib, first on the kernel's path (e.g. an older commit's)
        env["PYTHONPATH"] = str(Path(library).resolve())
    log = open(folder / "server.log", "w")
    server = subprocess.Popen(command, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server
        except OSError:
            time.sleep(0.5)
    server.kill()
    raise RuntimeError(f"the server did not start; see {folder / 'server.log'}")


def notebook_url(ui: str, port: int, token: str, name: str) -> str:
    if ui == "lab":
        return f"http://127.0.0.1:{port}/lab/tree/{name}?token={token}"
    prefix = "/nbclassic" if ui == "nbclassic" else ""
    return f"http://127.0.0.1:{port}{prefix}/notebooks/{name}?token={token}"


def run_all(page, ui: str) -> None:
    """Run every cell and wait until the kernel is idle again."""
    if ui == "lab":
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
        page.wait_for_function(
            "() => document.querySelector('.jp-Notebook-ExecutionIndicator, "
            ".jp-KernelStatus') !== null || true"
        )
        time.sleep(3)  # the kernel starts
        side = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current")
        if side.count():  # close the file browser: the notebook gets the page's width
            side.first.click()
        page.click(".jp-Notebook")
        page.keyboard.press("Escape")
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        page.wait_for_function(  # no cell waits or runs, and the last one has run
            "() => { const prompts = [...document.querySelectorAll("
            "'.jp-CodeCell .jp-InputArea-prompt')].map((p) => p.textContent);"
            " return prompts.length > 0 && !prompts.some((p) => p.includes('*'))"
            " && /\\d/.test(prompts[prompts.length - 1]); }",
            timeout=300_000,
        )
    else:
        page.wait_for_function("() => window.Jupyter && Jupyter.notebook && "
                               "Jupyter.notebook.kernel && Jupyter.notebook.kernel.is_connected()",
                               timeout=120_000)  # fmt: skip
        time.sleep(5)  # the widgets extension registers its comm target (else: no widgets)
        page.evaluate("() => Jupyter.notebook.execute_all_cells()")
        page.wait_for_function(
            "() => Jupyter.notebook.get_cells().filter((c) => c.cell_type === 'code')"
            ".every((c) => c.input_prompt_number "
            "&& c.input_prompt_number !== '*')",
            timeout=300_000,
        )
    time.sleep(5)  # the widgets render and MathJax typesets


def look(args: argparse.Namespace) -> None:
    from playwright.sync_api import sync_playwright

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="jupyter-look-"))
    if args.notebook:
        notebook = folder / Path(args.notebook).name
        shutil.copy(args.notebook, notebook)
    else:
        notebook = gallery(folder)
    version = subprocess.run([str(Path(args.venv) / "bin" / "python"), "-c",
                              "import ipywidgets; print(ipywidgets.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    port, token = free_port(), secrets.token_hex(16)
    server = start_server(Path(args.venv), args.ui, folder, port, token, args.theme, args.library)
    label = f"{args.label}ipywidgets{version}-{args.ui}-{args.theme}-{notebook.stem}"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM)
            page = browser.new_page(viewport={"width": 1366, "height": args.height})
            page.goto(notebook_url(args.ui, port, token, notebook.name))
            try:
                run_all(page, args.ui)
            except Exception:
                page.screenshot(path=str(out / f"{label}-failed.png"))
                raise
            for width in args.widths:
                page.set_viewport_size({"width": width, "height": args.height})
                time.sleep(2)
                shot = out / f"{label}-{width}.png"
                page.screenshot(path=str(shot))
                print(label, width, json.dumps(page.evaluate(MEASURE_JS)), shot.name)
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--venv", required=True, help="the environment with Jupyter, e.g. /tmp/jl8")
    parser.add_argument("--ui", choices=("lab", "classic", "nbclassic"), default="lab")
    parser.add_argument("--theme", choices=("light", "dark"), default="light")
    parser.add_argument("--notebook", help="a notebook to open instead of the widget gallery")
    parser.add_argument("--widths", type=lambda s: [int(w) for w in s.split(",")],
                        default=list(WIDTHS))  # fmt: skip
    parser.add_argument("--height", type=int, default=4000, help="tall: the whole notebook shows")
    parser.add_argument("--out", default=str(ROOT / "_build" / "jupyter_look"))
    parser.add_argument("--library", help="a folder holding another course_lib to look at, "
                        "e.g. `git archive main course_lib | tar -x -C /tmp/before`")  # fmt: skip
    parser.add_argument("--label", default="", help="prefix of the screenshots' names")
    args = parser.parse_args(argv)
    if args.ui != "lab" and args.theme == "dark":
        parser.error("Classic Notebook has no dark theme; use --ui lab")
    look(args)


if __name__ == "__main__":
    sys.exit(main())
