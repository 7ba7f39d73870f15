"""The course runs where students run it: a plain install of course_lib, ipywidgets 7.7.

A fresh virtual environment (no system site-packages, so a dependency course_lib forgets to
declare is missing there too) gets what Google Colab has — torch, ipywidgets 7.7.1 and a Jupyter
kernel — and course_lib from a wheel built from the repository (a non-editable install: only
what the wheel holds is there). Every chapter is then copied to a folder outside the repository
and executed top to bottom in that environment, as a student who opened it in Colab would.
Two chapters run at a time, each kernel on one thread (the machines have two cores), the
longest first; each chapter is still its own test.

pip's download cache is used; nothing else is shared with the project's own .venv.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import ROOT, chapter_notebooks

IPYWIDGETS_7 = ROOT / "requirements-ipywidgets7.txt"
# The last cell added to each executed copy: where the kernel found its packages.
REPORT_CELL = """\
import json, sys
import course_lib, ipywidgets, torch
print("STUDENT-ENV " + json.dumps({"prefix": sys.prefix, "course_lib": course_lib.__file__,
      "ipywidgets": ipywidgets.__version__, "torch": torch.__version__}))"""
# Runs in the student environment: nbclient executes the copy with that environment's kernel
# (tasks.notebook_client is nbclient with a fix, and imports nothing of the repository).
RUNNER = """\
import sys, nbformat
source, workdir, repository = sys.argv[1:4]
sys.path.insert(0, repository)
from tasks import notebook_client
sys.path.remove(repository)
notebook = nbformat.read(source, as_version=4)
notebook.cells.append(nbformat.v4.new_code_cell(sys.stdin.read()))
notebook_client(notebook, timeout=600, kernel_name="python3",
                resources={"metadata": {"path": workdir}}).execute()
for output in notebook.cells[-1].outputs:
    print(output.get("text", ""), end="")
"""


def pins() -> dict[str, str]:
    pinned = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        name, _, version = line.split("#")[0].strip().partition("==")
        if version:
            pinned[name.lower()] = version
    return pinned


def pip(python: Path, *args: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check",
         *args],
        capture_output=True, text=True, timeout=1200, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert result.returncode == 0, f"pip {' '.join(args)} failed:\n{result.stderr[-4000:]}"


@pytest.fixture(scope="module")
def student_env(tmp_path_factory) -> Path:
    """A fresh virtual environment with Colab's ipywidgets and course_lib from its wheel."""
    work = tmp_path_factory.mktemp("student")
    # The wheel is built from a copy of exactly what the package is made of.
    source = work / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "course_lib", source / "course_lib", ignore=shutil.ignore_patterns("__pycache__")
    )
    wheels = work / "wheels"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
         "--wheel-dir", str(wheels), str(source)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (wheel,) = wheels.glob("course_lib-*.whl")

    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    pinned = pins()
    pip(
        python, "install", "--no-compile", "--progress-bar", "off",
        f"torch=={pinned['torch']}",  # Colab brings its own torch; this machine's is 2.13.0
        "-r", str(IPYWIDGETS_7),
        f"ipykernel=={pinned['ipykernel']}", f"nbclient=={pinned['nbclient']}",
        str(wheel),
    )  # fmt: skip
    return python


def run_chapter(python: Path, notebook: Path, workdir: Path) -> dict:
    """Execute a copy of the chapter in workdir with the student environment's kernel."""
    copy = workdir / notebook.name
    shutil.copy2(notebook, copy)
    # Nothing of the project's own environment: no PYTHONPATH, no .venv on PATH.
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("PYTHON") and key != "VIRTUAL_ENV"
    }
    env["PATH"] = os.pathsep.join(
        entry
        for entry in env.get("PATH", "").split(os.pathsep)
        if entry and not Path(entry).resolve().is_relative_to(ROOT)
    )
    env["COURSE_LIB_HOME"] = str(workdir / "progress")
    env["PYTHONHASHSEED"] = "0"
    env["OMP_NUM_THREADS"] = "1"  # two kernels share the two cores
    result = subprocess.run(
        [str(python), "-c", RUNNER, str(copy), str(workdir), str(ROOT)],
        input=REPORT_CELL, capture_output=True, text=True, cwd=workdir, env=env, timeout=1800,
    )  # fmt: skip
    assert result.returncode == 0, (
        f"{notebook.name} failed in the student environment:\n{result.stderr[-6000:]}"
    )
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("STUDENT-ENV ")]
    return json.loads(line.removeprefix("STUDENT-ENV "))


# The chapters that take longest start first, so that the two at a time end together.
LONGEST_FIRST = ["feed-forward-and-norm", "training-recipe", "training-a-translator"]
PARALLEL = 2


@pytest.fixture(scope="module")
def student_runs(student_env, tmp_path_factory):
    """Every chapter started in the student environment, PARALLEL at a time: a Future per
    chapter of what its kernel saw (``run_chapter``), and the folder it ran in."""
    notebooks = sorted(
        chapter_notebooks(),
        key=lambda path: LONGEST_FIRST.index(path.stem) if path.stem in LONGEST_FIRST else 99,
    )
    with ThreadPoolExecutor(PARALLEL) as pool:
        runs: dict[str, tuple[Future, Path]] = {}
        for notebook in notebooks:
            workdir = tmp_path_factory.mktemp(notebook.stem) / "outside-the-repository"
            workdir.mkdir()
            future = pool.submit(run_chapter, student_env, notebook, workdir)
            runs[notebook.stem] = (future, workdir)
        yield runs
        for future, _ in runs.values():
            future.cancel()


@pytest.mark.parametrize("notebook", chapter_notebooks(), ids=lambda path: path.stem)
def test_chapter_runs_from_a_plain_install_with_ipywidgets_7(student_env, student_runs, notebook):
    future, workdir = student_runs[notebook.stem]
    assert not workdir.resolve().is_relative_to(ROOT)
    seen = future.result()
    venv = student_env.parent.parent
    assert Path(seen["prefix"]).resolve() == venv.resolve(), "the kernel ran another Python"
    course_lib = Path(seen["course_lib"]).resolve()
    assert course_lib.is_relative_to(venv.resolve()), f"course_lib came from {course_lib}"
    assert "site-packages" in course_lib.parts, "course_lib should be installed, not editable"
    assert seen["ipywidgets"] == "7.7.1"
