#!/usr/bin/env python3
"""The course's single entry point. Needs only Python >= 3.10 to start.

    python3 tasks.py book      build the HTML book into _build/html (warnings are errors)
    python3 tasks.py test      run every test: ruff, library tests, nbval, the book build
    python3 tasks.py execute   re-execute chapter notebooks in place (all, or the paths given)
    python3 tasks.py setup     only create or update the virtual environment
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
STUDENT_HAS = ("torch", "ipykernel", "transformers")
# Pins that ipywidgets 7.7 replaces: the rest of requirements.txt constrains the student's
# environment (the same versions as .venv: outputs compared by nbval do not drift with a
# release of numpy or matplotlib).
NOT_STUDENT_PINS = {"ipywidgets", "widgetsnbextension", "jupyterlab-widgets", "jupyterlab_widgets"}
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
    source = folder / "source"  # the wheel is built from a copy of what the package is
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
    constraints = folder / "constraints.txt"
    constraints.write_text(
        "\n".join(
            line
            for line in (ROOT / "requirements.txt").read_text().splitlines()
            if "==" in line and line.split("==")[0].strip().lower() not in NOT_STUDENT_PINS
        )
    )
    venv = folder / "venv"
    _quiet(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    _quiet(*pip, "--python", python, "install", "--no-compile", "--progress-bar", "off",
           "-c", constraints, "-r", ROOT / "requirements-ipywidgets7.txt", *STUDENT_HAS,
           wheel)  # fmt: skip
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


def clean() -> None:
    shutil.rmtree(ROOT / "_build", ignore_errors=True)
    say("removed _build")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=["book", "test", "execute", "setup", "clean"])
    parser.add_argument("args", nargs=argparse.REMAINDER, help="passed on (pytest, notebooks)")
    options = parser.parse_args(argv)
    if options.command == "book":
        book(options.args)
    elif options.command == "test":
        test(options.args)
    elif options.command == "execute":
        execute(options.args)
    elif options.command == "setup":
        setup()
        say(f"environment ready: {VENV}")
    else:
        clean()


if __name__ == "__main__":
    main(sys.argv[1:])
