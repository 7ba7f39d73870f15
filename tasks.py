#!/usr/bin/env python3
"""The course's single entry point. Needs only Python >= 3.10 to start.

    python3 tasks.py book      build the HTML book into _build/html (warnings are errors)
    python3 tasks.py test      run every test: ruff, library tests, nbval, the book build
    python3 tasks.py execute   re-execute chapter notebooks in place (all, or the paths given)
    python3 tasks.py setup     only create or update the virtual environment
    python3 tasks.py compat    the library's tests with the oldest and the newest torch
                               (--build-only: only make their environments)
    python3 tasks.py clean     remove _build

Every command first creates or updates the virtual environment .venv from the pinned
requirements.txt and installs course_lib into it (editable), then runs inside it. The
environment is reinstalled only when requirements.txt, pyproject.toml or the Python version
changed. Set COURSE_VENV to use another folder for the environment. It also installs the
browser libraries the book serves (MathJax, RequireJS, the Jupyter widgets HTML manager) into
node_modules/ with `npm ci` from package-lock.json, again only when that file changed.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("COURSE_VENV", ROOT / ".venv")).resolve()
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
VENV_PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")
STAMP = VENV / ".course-stamp"
WIDGETS_7 = VENV / "ipywidgets-7.7"  # ipywidgets 7.7 alone, for tests that put it on PYTHONPATH
CHAPTERS = ROOT / "chapters"
NODE_MODULES = ROOT / "node_modules"
NODE_STAMP = NODE_MODULES / ".course-stamp"
MIN_PYTHON = (3, 10)
# How every chapter computes when its outputs are stored (`execute`) and when nbval runs it again
# (`test`): PyTorch's AVX2 kernels, MKL's AVX2 branch in its reproducible mode (the same bits
# on every x86-64 processor with AVX2, whatever the number of threads) and one thread per
# kernel. A model trained for a few hundred steps amplifies a difference in the last bit of one
# matrix product into other printed numbers: without these, a processor with AVX-512 and one
# without printed different accuracies for the same seed (issue 29). The tests run with them
# too (conftest.py), the student-install test included: a test's verdict may not depend on
# the processor it ran on.
NUMERICS = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_CBWR": "AVX2,STRICT",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


def say(message: str) -> None:
    print(f"[tasks] {message}", flush=True)


def run(*command: str | Path, **kwargs) -> None:
    """Run a command inside the environment; stop with its exit code if it fails."""
    env = os.environ.copy()
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(VENV)
    env.setdefault("PYTHONHASHSEED", "0")
    env.setdefault("HF_HUB_OFFLINE", "1")  # nothing from the Hugging Face hub at test time
    env.pop("PYTHONHOME", None)
    result = subprocess.run([str(part) for part in command], cwd=ROOT, env=env, **kwargs)
    if result.returncode != 0:
        say(f"failed ({result.returncode}): {' '.join(str(p) for p in command)}")
        sys.exit(result.returncode)


def _fingerprint() -> str:
    digest = hashlib.sha256()
    for name in ("requirements.txt", "requirements-ipywidgets7.txt", "pyproject.toml"):
        digest.update((ROOT / name).read_bytes())
    digest.update(sys.version.encode())
    return digest.hexdigest()


def setup() -> None:
    """Create .venv if needed and install the pinned requirements and course_lib into it."""
    if sys.version_info < MIN_PYTHON:
        sys.exit(f"Python >= {'.'.join(map(str, MIN_PYTHON))} is needed, this is {sys.version}")
    if in_venv():
        return
    install_browser_libraries()
    fingerprint = _fingerprint()
    if VENV_PYTHON.exists() and STAMP.exists() and STAMP.read_text() == fingerprint:
        return
    if VENV_PYTHON.exists() and _venv_python_version() != sys.version_info[:2]:
        say(f"recreating {VENV}: it was made with another Python than {sys.version.split()[0]}")
        shutil.rmtree(VENV)
    if not VENV_PYTHON.exists():
        say(f"creating the virtual environment {VENV}")
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    say("installing the pinned requirements (requirements.txt) and course_lib")
    pip = (VENV_PYTHON, "-m", "pip", "--disable-pip-version-check")
    run(*pip, "install", "--progress-bar", "off", "-r", "requirements.txt")
    run(*pip, "install", "--no-deps", "--no-build-isolation", "--editable", ".")
    run(*pip, "check")
    say(f"installing ipywidgets 7.7 (what Colab ships) for the widget tests into {WIDGETS_7}")
    shutil.rmtree(WIDGETS_7, ignore_errors=True)
    run(*pip, "install", "--progress-bar", "off", "--no-deps", "--target", WIDGETS_7,
        "-r", "requirements-ipywidgets7.txt")  # fmt: skip
    STAMP.write_text(fingerprint)


def install_browser_libraries() -> None:
    """npm ci the libraries the book serves itself (package-lock.json) when the lock changed."""
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        digest.update((ROOT / name).read_bytes())
    fingerprint = digest.hexdigest()
    if NODE_STAMP.exists() and NODE_STAMP.read_text() == fingerprint:
        return
    npm = shutil.which("npm")
    if npm is None:
        sys.exit(
            "npm (Node.js) is needed to install MathJax and the widget manager that the book "
            "serves: install it (Debian/Ubuntu: apt-get install nodejs npm) and run again"
        )
    say("installing MathJax, RequireJS and the widget manager (package-lock.json) with npm ci")
    command = [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
    result = subprocess.run(command, cwd=ROOT, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        sys.exit(f"npm ci failed ({result.returncode})")
    NODE_STAMP.write_text(fingerprint)


def _venv_python_version() -> tuple[int, int] | None:
    """(major, minor) of the Python that made .venv, from its pyvenv.cfg."""
    config = VENV / "pyvenv.cfg"
    if not config.exists():
        return None
    for line in config.read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() in ("version", "version_info"):
            major, minor = value.strip().split(".")[:2]
            return int(major), int(minor)
    return None


def in_venv() -> bool:
    return Path(sys.prefix).resolve() == VENV


def book(extra: list[str]) -> None:
    """Build the HTML book from the outputs stored in the notebooks, warnings as errors."""
    setup()
    started = time.perf_counter()
    run(BIN / "jupyter-book", "build", ".", "--all", "--warningiserror", "--keep-going", *extra)
    say(f"book built in {time.perf_counter() - started:.0f} s: {ROOT / '_build' / 'html'}")


# One pytest-xdist worker per core, each test group (conftest.py) on one worker, the groups in
# the order conftest.py gives them; the 15 slowest tests printed at the end of every run.
# Options given after `test` come later and win (`tasks.py test -n 0` runs in one process).
PARALLEL = ("-n", "auto", "--dist", "loadgroup", "--no-loadscope-reorder", "--durations=15")


def test(extra: list[str]) -> None:
    """Lint, then run the whole pytest suite (library, nbval over chapters/, book build)."""
    setup()
    started = time.perf_counter()
    run(VENV_PYTHON, "-m", "ruff", "check", ".")
    run(VENV_PYTHON, "-m", "ruff", "format", "--check", ".")
    run(VENV_PYTHON, "-m", "pytest", *PARALLEL, *extra)
    say(f"all tests passed in {time.perf_counter() - started:.0f} s")


# ------------------------------------------------------------ the student's environment
# nbval runs every chapter in the environment a student meets on Google Colab (conftest.py):
# a fresh virtual environment with what course_lib's wheel declares and what Colab has besides
# (STUDENT_HAS, ipywidgets 7.7), whose kernel starts in an empty folder outside the
# repository. One execution of a chapter is both checks: it runs top to bottom as a student
# runs it, and nbval compares its outputs with the stored ones.
STUDENT_KERNEL = "course-student"
# What Colab has beside ipywidgets 7.7 (at the versions of requirements.txt): transformers is
# there too, and the chapters that compare a model with it print that comparison.
STUDENT_HAS = ("ipykernel", "transformers")
# Colab's Python where this machine has it (else the Python running tasks.py), and Colab ships
# its own torch, newer than the book's pin: the student's environment has the newest torch that
# installs on this machine kind. nbval compares its outputs with the ones stored from the pinned
# torch, so every chapter is shown to compute the same on both (issue 31).
STUDENT_PYTHON = "3.12"
STUDENT_TORCH = "2.14.1"
# Pins that ipywidgets 7.7 and the newer torch replace: the rest of requirements.txt constrains
# the student's environment (the same versions as .venv: outputs compared by nbval do not drift
# with a release of numpy or matplotlib).
NOT_STUDENT_PINS = {
    "ipywidgets", "widgetsnbextension", "jupyterlab-widgets", "jupyterlab_widgets", "torch",
}  # fmt: skip
KERNEL_SCRIPT = """#!/bin/sh
# A chapter's kernel as a student gets it: an empty folder outside the repository, nothing of
# the project's environment on the paths, an empty progress store.
work=$(mktemp -d {template}) || exit 1
cd "$work" || exit 1
unset PYTHONPATH PYTHONHOME PYTHONSTARTUP VIRTUAL_ENV
PATH={path}
COURSE_LIB_HOME="$work/progress"
PYTHONHASHSEED=0
export PATH COURSE_LIB_HOME PYTHONHASHSEED
exec {python} -m ipykernel_launcher -f "$1"
"""


def student_environment(folder: Path) -> Path:
    """Build the student's environment in ``folder`` and its kernel spec; its python.

    The kernel is found as ``STUDENT_KERNEL`` with ``folder / "jupyter"`` on JUPYTER_PATH.
    Takes about a minute (pip's download cache is used); nothing is shared with .venv.
    """
    wheel = build_wheel(folder)
    constraints = folder / "constraints.txt"
    constraints.write_text(student_constraints())
    pip = (sys.executable, "-m", "pip", "--disable-pip-version-check")
    venv = folder / "venv"
    _quiet(find_python(STUDENT_PYTHON) or sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    _quiet(*pip, "--python", python, "install", "--no-compile", "--progress-bar", "off",
           "-c", constraints, "-r", ROOT / "requirements-ipywidgets7.txt", *STUDENT_HAS,
           f"torch=={STUDENT_TORCH}", wheel)  # fmt: skip
    path = os.pathsep.join(
        entry
        for entry in os.environ.get("PATH", "").split(os.pathsep)
        if entry and not Path(entry).resolve().is_relative_to(ROOT)
    )
    script = folder / "kernel.sh"
    template, path, python_ = (
        shlex.quote(str(v)) for v in (folder / "chapter.XXXXXX", path, python)
    )
    script.write_text(KERNEL_SCRIPT.format(template=template, path=path, python=python_))
    script.chmod(0o755)
    spec = folder / "jupyter" / "kernels" / STUDENT_KERNEL
    spec.mkdir(parents=True)
    kernel = {
        "argv": [str(script), "{connection_file}"],
        "display_name": "Python 3 (a student's plain install, ipywidgets 7.7)",
        "language": "python",
    }
    (spec / "kernel.json").write_text(json.dumps(kernel, indent=1))
    return python


def student_constraints() -> str:
    """requirements.txt's pins but those of NOT_STUDENT_PINS, as a pip constraints file."""
    return "\n".join(
        line
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if "==" in line and line.split("==")[0].strip().lower() not in NOT_STUDENT_PINS
    )


@functools.cache
def find_python(version: str) -> Path | None:
    """A Python ``version`` ("3.12") that runs and has venv: on PATH as ``python3.12``, or
    installed by pyenv (whose shims answer only for the version selected); None if absent.
    Looked for once per process (every test process computes ``student_fingerprint``)."""
    name = f"python{version}"
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    found = [shutil.which(name), *sorted(pyenv.glob(f"versions/{version}.*/bin/{name}"))[::-1]]
    for candidate in filter(None, found):
        check = [candidate, "-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"]
        result = subprocess.run(check, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if result.returncode == 0 and result.stdout.strip() == version:
            return Path(candidate)
    return None


def student_folder() -> Path:
    """Where the student's environment of this test run is (COURSE_LIB_STUDENT_DIR)."""
    return Path(os.environ["COURSE_LIB_STUDENT_DIR"]) / "built"


def student_kernels() -> Path:
    """The folder to put on JUPYTER_PATH for nbval to find ``STUDENT_KERNEL``."""
    return student_folder() / "jupyter"


@functools.cache
def student_python() -> Path:
    """The python of the student's environment of this test run, built by the first process
    that asks (the others wait on a file lock), unless one made of the same files is there
    (COURSE_LIB_STUDENT_MADE_OF: ``student_fingerprint`` when the run started)."""
    from filelock import FileLock

    folder = student_folder()
    if STUDENT_FAILED:  # said once, not tried again for every cell
        raise RuntimeError(STUDENT_FAILED[0])
    with FileLock(folder.parent / "lock"):
        stamp = folder / "made-of.txt"
        made_of = os.environ["COURSE_LIB_STUDENT_MADE_OF"]
        if not (stamp.exists() and stamp.read_text() == made_of):
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            try:
                student_environment(folder)
            except Exception as error:
                STUDENT_FAILED.append(f"the student's environment was not built: {error}")
                raise
            stamp.write_text(made_of)
        return folder / "venv" / "bin" / "python"


STUDENT_FAILED: list[str] = []


def student_fingerprint() -> str:
    """What the student's environment is made of: course_lib's files and the requirements."""
    digest = hashlib.sha256()
    for path in sorted((ROOT / "course_lib").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    for name in ("pyproject.toml", "requirements.txt", "requirements-ipywidgets7.txt"):
        digest.update((ROOT / name).read_bytes())
    digest.update(KERNEL_SCRIPT.encode() + sys.version.encode())
    digest.update(f"{find_python(STUDENT_PYTHON)} torch=={STUDENT_TORCH}".encode())
    return digest.hexdigest()


def _quiet(*command: str | Path) -> None:
    """Run a command; on failure raise with the end of what it printed."""
    result = subprocess.run(
        [str(part) for part in command], capture_output=True, text=True, timeout=1200,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(str(p) for p in command)} failed:\n{result.stderr[-4000:]}")


def execute(paths: list[str]) -> None:
    """Re-execute notebooks in place (inside the environment), storing outputs and widget state."""
    setup()
    if not in_venv():
        run(VENV_PYTHON, __file__, "execute", *paths)
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the kernels download nothing either
    notebooks = [Path(p).resolve() for p in paths] or sorted(CHAPTERS.glob("*.ipynb"))
    for path in notebooks:
        seconds = execute_notebook(path)
        say(f"executed {path.relative_to(ROOT)} in {seconds:.1f} s")


def execute_notebook(path: Path, timeout: int = 300) -> float:
    """Run one notebook top to bottom with a fresh kernel and write it back; return seconds."""
    import nbformat

    notebook, seconds = run_notebook(path, timeout)
    notebook = merge_adjacent_streams(notebook)
    notebook = stable_widget_ids(notebook, salt=path.stem)
    nbformat.validate(notebook)
    nbformat.write(notebook, path)
    return seconds


def run_notebook(path: Path, timeout: int = 300):
    """Run one notebook top to bottom with a fresh kernel: (executed notebook, seconds).

    The file is not changed. The seconds include starting the kernel (benchmarks/budgets.py).
    """
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    client = notebook_client(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=True,
        record_timing=False,
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="course-lib-home-") as home:
        # A fresh, empty progress store: the stored notebook shows every exercise unanswered.
        # The explorers are built for the book: every state a reader can reach is stored
        # (course_lib/explorers/base.py).
        settings = {"COURSE_LIB_HOME": home, "COURSE_EXPLORERS": "book", **NUMERICS}
        previous = {name: os.environ.get(name) for name in settings}
        os.environ.update(settings)
        try:
            client.execute()
        finally:
            for name, value in previous.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    return notebook, time.perf_counter() - started


def notebook_client(notebook, **options):
    """An nbclient ``NotebookClient`` for ``notebook`` that does not miss a cell's reply.

    nbclient 0.11 answers Output widgets by sending comm messages on the shell channel while
    it waits on that same channel for the cell's execute_reply. With asyncio ZeroMQ sockets
    such a send can swallow the wake-up for the arriving reply, which then sits unread until
    the cell's timeout ends (nbclient issue 312): a chapter with an explorer widget took 600 s
    instead of 7 s about once in twenty runs. Waiting on the shell channel a second at a time
    (``wait_in_slices``) finds such a reply within a second.
    """
    from nbclient import NotebookClient

    class Client(NotebookClient):
        async def async_start_new_kernel_client(self):
            kernel_client = await super().async_start_new_kernel_client()
            channel = kernel_client.shell_channel
            channel.get_msg = wait_in_slices(channel.get_msg)
            return kernel_client

    return Client(notebook, **options)


def wait_in_slices(get_msg, slice_seconds: float = 1.0):
    """Wrap an async ``get_msg(timeout)`` to wait at most ``slice_seconds`` per call.

    The wrapper keeps the meaning of ``timeout`` (None waits for ever; else ``queue.Empty``
    once it has passed) but asks the socket again every ``slice_seconds``, and every new ask
    sees a message whose wake-up was lost.
    """
    import queue

    async def get_msg_in_slices(timeout: float | None = None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = slice_seconds if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                return await get_msg(timeout=min(slice_seconds, left))
            except queue.Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    return get_msg_in_slices


def merge_adjacent_streams(notebook):
    """Store what a cell prints to one stream in a row as one output, however it arrived.

    The kernel flushes stdout on a timer, so under load one print can reach the notebook as
    several stream messages; merging them makes the stored file the same whatever the load.
    Only neighbours are merged: nbclient's own ``coalesce_streams`` also joins a print made
    after a figure to one made before it, which would move text above the figure.
    """
    for cell in notebook.cells:
        merged = []
        for output in cell.get("outputs", []):
            previous = merged[-1] if merged else None
            if (
                output.get("output_type") == "stream"
                and previous is not None
                and previous.get("output_type") == "stream"
                and previous.get("name") == output.get("name")
            ):
                previous["text"] += output["text"]
            else:
                merged.append(output)
        if "outputs" in cell:
            cell["outputs"] = merged
    return notebook


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
MODEL_REF = re.compile(r"IPY_MODEL_([0-9a-f]{32})")


def stable_widget_ids(notebook, salt: str):
    """Rename the random widget model ids so that re-executing a notebook gives the same file.

    Models are numbered in a fixed order: depth-first from the widgets that the cells display,
    in cell order, following the ``IPY_MODEL_`` references inside each model's state; models
    that nothing displayed come last, ordered by their content with each reference to a
    displayed model written as its place in that order.
    """
    import nbformat

    state = notebook.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    if not state:
        return notebook
    order: list[str] = []

    def visit(model_id: str) -> None:
        if model_id in order or model_id not in state:
            return
        order.append(model_id)
        text = json.dumps(state[model_id]["state"], sort_keys=True)
        for referenced in MODEL_REF.findall(text):
            visit(referenced)

    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get(WIDGET_VIEW)
            if view:
                visit(view["model_id"])
    # The others (an explorer's links, say) by their content, each reference written as the
    # displayed model's place: links that differ only in what they link stay apart, and
    # renaming a renamed notebook changes nothing.
    place = {model_id: index for index, model_id in enumerate(order)}
    rest = sorted(
        (model_id for model_id in state if model_id not in order),
        key=lambda model_id: MODEL_REF.sub(
            lambda match: f"#{place.get(match.group(1), '')}",
            json.dumps(state[model_id], sort_keys=True),
        ),
    )
    renamed = {
        old: hashlib.sha256(f"{salt}:{index}".encode()).hexdigest()[:32]
        for index, old in enumerate(order + rest)
    }
    text = nbformat.writes(notebook)
    text = re.sub("|".join(renamed), lambda match: renamed[match.group()], text)
    notebook = nbformat.reads(text, as_version=4)
    widget_state = notebook.metadata["widgets"][WIDGET_STATE]
    widget_state["state"] = {
        key: widget_state["state"][key] for key in sorted(widget_state["state"])
    }
    return notebook


# ------------------------------------------------------------ other versions (compat)
# The README promises Python >= 3.10 and torch >= 2.4; the book is pinned at torch 2.13 on 3.11,
# and nbval runs the chapters with the newest torch (the student's environment above). `compat`
# runs the library's tests, against course_lib installed from its wheel, in two fresh
# environments outside the repository: the oldest promised torch on the oldest promised Python,
# and the newest torch on Colab's Python. Each has ipywidgets 8 and, as .venv, ipywidgets 7.7
# for the kernels of the widget tests. The tests of the trained claims run in both.


@dataclass(frozen=True)
class Versions:
    """One environment of `compat`: its name, the Python it wants, what it pins."""

    name: str
    python: str
    pins: tuple[str, ...]
    constrained: bool  # also pinned to requirements.txt's versions (numpy, matplotlib, ...)
    leaves_out: tuple[str, ...] = ()  # test modules not run here
    markers: str = ""  # pytest's -m: the marked tests run here


# What the oldest torch is not asked to do. The refusals that keep a built-in out of an
# exercise's answer are written for the torch a course is given with: before 2.13 some of
# their routes do not exist and a few other routes go unrefused (measured with 2.4, 2.6 and
# 2.8). A trained claim is asserted for the pinned torch and the newest (issue 31).
COMPAT = (
    # NumPy 1, as pyproject.toml allows; transformers 5 needs a newer torch
    Versions(
        "oldest",
        "3.10",
        ("torch==2.4.0", "numpy<2", "transformers<5"),
        constrained=False,
        leaves_out=("test_refusals.py", "test_forbidden_routes.py"),
        markers="not claims and not book_states",
    ),
    Versions(
        "newest",
        STUDENT_PYTHON,
        (f"torch=={STUDENT_TORCH}", "transformers"),
        constrained=True,
        markers="not book_states",
    ),
)
# What the library's tests need beside course_lib and ipywidgets 7.7.
TEST_TOOLS = ("pytest", "pytest-xdist", "pyyaml", "nbformat", "nbclient", "ipykernel",
              "filelock", "packaging", "tokenizers")  # fmt: skip
# The library's tests that `compat` runs: those of the model components, data, tokenization,
# training, the answers engine and its refusals, the exercises and their widgets (in kernels
# with ipywidgets 7.7 and 8) and the trained claims (marked `claims`). Left to the pinned env of
# `tasks.py test`: the repository, the notebooks, the built book, the student's environment,
# the explorers' book states (built when a chapter is executed, with the pinned torch; the
# chapter modules mark theirs `book_states`) and the
# instructor's grading (which runs on the instructor's machine); within the 10 minutes CI gives.
NOT_LIBRARY_TESTS = {
    "test_book.py", "test_browser.py", "test_browser_explorers.py", "test_browser_figures.py",
    "test_browser_widgets.py", "test_figures.py", "test_notebook_runner.py", "test_notebooks.py",
    "test_package_layers.py", "test_project.py", "test_student_install.py",
    "test_attention_explorer.py", "test_explorers.py", "test_generation_widgets.py",
    "test_layer_widgets.py", "test_recipe_widgets.py", "test_widgets.py",
    "test_check_equals_grading.py", "test_grading.py", "test_grading_answers.py",
    "test_grading_hostile_storage.py", "test_grading_isolation.py", "test_grading_reports.py",
    "test_grading_robustness.py",
}  # fmt: skip


def library_tests(leaves_out: tuple[str, ...] = ()) -> list[Path]:
    tests = sorted((ROOT / "tests").glob("test_*.py"))
    return [p for p in tests if p.name not in NOT_LIBRARY_TESTS and p.name not in leaves_out]


def compat(extra: list[str]) -> None:
    """Run the library's tests in the environments of COMPAT; print what ran and its time.

    ``tasks.py compat newest -k rotary`` runs one environment, and passes the rest to pytest.
    The environments are made in a temporary folder, or in COURSE_COMPAT_DIR, where they are
    kept and used again while their pins are the same (course_lib is installed afresh).
    ``tasks.py compat --build-only`` only makes them (in COURSE_COMPAT_DIR): `.ci/run` does
    that while the tests of `tasks.py test` run, since making them is mostly downloading.
    """
    setup()
    if not in_venv():  # pip, setuptools and the numerics of the project's environment
        run(VENV_PYTHON, __file__, "compat", *extra)
        return
    os.environ.update(NUMERICS)
    build_only = "--build-only" in extra
    extra = [e for e in extra if e != "--build-only"]
    chosen = [v for v in COMPAT if extra[:1] == [v.name]] or list(COMPAT)
    extra = extra[1:] if extra[:1] == [chosen[0].name] else extra
    started = time.perf_counter()
    kept = os.environ.get("COURSE_COMPAT_DIR")
    if build_only and not kept:
        sys.exit("compat --build-only: set COURSE_COMPAT_DIR, the folder to keep them in")
    with tempfile.TemporaryDirectory(prefix="course-compat-") as temporary:
        work = Path(kept or temporary)
        work.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(work / "wheels", ignore_errors=True)
        shutil.rmtree(work / "source", ignore_errors=True)
        wheel = build_wheel(work)
        if build_only:
            for versions in chosen:
                _, seconds = timed(compat_environment, work / versions.name, versions, wheel)
                say(f"{versions.name}: environment ready in {seconds:.0f} s")
            return
        (work / "installed_course_lib.py").write_text(INSTALLED_FIRST)
        # one environment is built (mostly downloads) while the tests of the last one run
        builder = ThreadPoolExecutor(max_workers=1)
        built = [builder.submit(timed, compat_environment, work / v.name, v, wheel) for v in chosen]
        for versions, building in zip(chosen, built, strict=True):
            python, seconds = building.result()
            begun = time.perf_counter()
            report = subprocess.run(
                [python, "-c", COMPAT_REPORT], cwd=work, capture_output=True, text=True,
                check=True, stdin=subprocess.DEVNULL,
            ).stdout.strip()  # fmt: skip
            say(f"{versions.name}: {report}; built in {seconds:.0f} s")
            command = [python, "-m", "pytest", "-q", "-p", "installed_course_lib", "-p",
                       "no:cacheprovider", "-o", "addopts=", "--rootdir", ROOT, "-c",
                       ROOT / "pyproject.toml", *PARALLEL, "-m", versions.markers,
                       *library_tests(versions.leaves_out), *extra]  # fmt: skip
            env = {**os.environ, "PYTHONHASHSEED": "0", "HF_HUB_OFFLINE": "1"}
            env.pop("PYTHONPATH", None)
            result = subprocess.run([str(c) for c in command], cwd=work, env=env,
                                    stdin=subprocess.DEVNULL)  # fmt: skip
            seconds = time.perf_counter() - begun
            limits = [f"without {', '.join(versions.leaves_out)}"] if versions.leaves_out else []
            limits += [f"with -m '{versions.markers}'"] if versions.markers else []
            if limits:
                say(f"{versions.name}: ran {' and '.join(limits)}")
            if result.returncode != 0:
                say(f"compat: the library's tests failed with the {versions.name} versions")
                builder.shutdown(cancel_futures=True)  # a build under way ends first
                sys.exit(result.returncode)
            say(f"{versions.name}: the library's tests passed in {seconds:.0f} s")
    say(f"compat passed in {time.perf_counter() - started:.0f} s")


# Printed by each environment of `compat`: what it runs, and that course_lib is the wheel's.
COMPAT_REPORT = """\
import sys, torch, numpy, ipywidgets, course_lib
assert "site-packages" in course_lib.__file__, course_lib.__file__
print(f"Python {sys.version.split()[0]}, torch {torch.__version__}, numpy {numpy.__version__}, "
      f"ipywidgets {ipywidgets.__version__} (7.7.1 in the widget tests' kernels), "
      f"course_lib from {course_lib.__file__}")"""


# A pytest plugin (`-p`) that each test process of `compat` loads before the repository's
# conftest.py puts the repository first on sys.path: course_lib is the installed one.
INSTALLED_FIRST = """\
import course_lib

assert "site-packages" in course_lib.__file__, course_lib.__file__
"""


def build_wheel(folder: Path) -> Path:
    """course_lib's wheel, built in ``folder`` from a copy of what the package is."""
    source = folder / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "course_lib", source / "course_lib", ignore=shutil.ignore_patterns("__pycache__")
    )
    wheels = folder / "wheels"
    pip = (sys.executable, "-m", "pip", "--disable-pip-version-check")
    _quiet(*pip, "wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", wheels, source)
    (wheel,) = wheels.glob("course_lib-*.whl")
    return wheel


def timed(function, *args):
    """(``function(*args)``, the seconds it took)."""
    started = time.perf_counter()
    return function(*args), time.perf_counter() - started


def compat_environment(folder: Path, versions: Versions, wheel: Path) -> Path:
    """A virtual environment in ``folder`` for ``versions``, made unless one with the same
    pins is there, with course_lib's ``wheel`` installed afresh; its python."""
    python = folder / "bin" / "python"
    stamp = folder / "made-of.txt"
    pip = (sys.executable, "-m", "pip", "--disable-pip-version-check", "--python", python,
           "install", "--no-compile", "--progress-bar", "off")  # fmt: skip
    if not (stamp.exists() and stamp.read_text() == repr(versions)):
        shutil.rmtree(folder, ignore_errors=True)
        base = find_python(versions.python)
        if base is None:
            say(f"{versions.name}: Python {versions.python} is not on this machine; using "
                f"{sys.version.split()[0]}")  # fmt: skip
            base = Path(sys.executable)
        _quiet(base, "-m", "venv", "--without-pip", folder)
        constraints = folder / "constraints.txt"
        constraints.write_text(student_constraints() if versions.constrained else "")
        _quiet(*pip, "-c", constraints, "ipywidgets", *versions.pins, *TEST_TOOLS, wheel)
        # the widget tests' kernels put ipywidgets 7.7 first on their path, as in .venv
        _quiet(*pip, "--no-deps", "--target", folder / WIDGETS_7.name,
               "-r", ROOT / "requirements-ipywidgets7.txt")  # fmt: skip
        stamp.write_text(repr(versions))
    else:
        _quiet(*pip, "--no-deps", "--force-reinstall", wheel)
    return python


def clean() -> None:
    shutil.rmtree(ROOT / "_build", ignore_errors=True)
    say("removed _build")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = ["book", "test", "execute", "setup", "compat", "clean"]
    parser.add_argument("command", choices=commands)
    parser.add_argument("args", nargs=argparse.REMAINDER, help="passed on (pytest, notebooks)")
    options = parser.parse_args(argv)
    if options.command == "book":
        book(options.args)
    elif options.command == "test":
        test(options.args)
    elif options.command == "execute":
        execute(options.args)
    elif options.command == "compat":
        compat(options.args)
    elif options.command == "setup":
        setup()
        say(f"environment ready: {VENV}")
    else:
        clean()


if __name__ == "__main__":
    main(sys.argv[1:])
