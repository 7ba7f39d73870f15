"""The course runs where students run it: a plain install of course_lib, ipywidgets 7.7.

nbval runs every chapter in the kernel of a student's environment (``tasks.STUDENT_KERNEL``,
made by ``tasks.student_environment``): a fresh virtual environment, without the system's
site-packages, that holds what Google Colab has (Colab's Python where this machine has it, a
newer torch than the book's pin, ipywidgets 7.7.1, transformers and a
Jupyter kernel) and course_lib from a wheel built from the repository; each kernel starts in
an empty folder outside the repository. So one execution of a chapter checks both that it
runs top to bottom as a student runs it and that its outputs are the stored ones. These tests
check that the kernel nbval uses is that environment.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from packaging.version import Version
from test_project import pinned

from conftest import ROOT
from tasks import (
    STUDENT_KERNEL,
    STUDENT_PYTHON,
    STUDENT_TORCH,
    find_python,
    notebook_client,
    student_python,
)

# Run in the student's kernel: where it found its packages and where it runs.
REPORT = """\
import json, os, sys
import course_lib, ipywidgets, torch
import course_lib.exercises, course_lib.explorers, course_lib.families
print(json.dumps({"prefix": sys.prefix, "course_lib": course_lib.__file__,
      "transformers": "transformers" in sys.modules,
      "ipywidgets": ipywidgets.__version__, "torch": torch.__version__, "cwd": os.getcwd(),
      "path": sys.path, "home": os.environ.get("COURSE_LIB_HOME"),
      "python": "{}.{}".format(*sys.version_info)}))"""
# What the project's environment has for its tests and a student's does not.
PROJECT_ONLY = ("nbval", "pytest", "jupyter_book", "playwright", "sphinx", "myst_nb")


@pytest.fixture(scope="module")
def student_venv() -> Path:
    return student_python().parent.parent


@pytest.fixture(scope="module")
def seen(student_venv) -> dict:
    """What a kernel of the student's environment reports about itself."""
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(REPORT)])
    notebook_client(notebook, timeout=300, kernel_name=STUDENT_KERNEL).execute()
    (output,) = notebook.cells[0].outputs
    return json.loads(output["text"])


def test_nbval_runs_the_chapters_in_the_students_kernel(pytestconfig):
    assert pytestconfig.getoption("nbval_kernel_name") == STUDENT_KERNEL


def test_the_students_kernel_runs_the_students_python(seen, student_venv):
    assert Path(seen["prefix"]).resolve() == student_venv.resolve()


def test_course_lib_comes_from_the_installed_wheel_not_the_repository(seen, student_venv):
    course_lib = Path(seen["course_lib"]).resolve()
    assert course_lib.is_relative_to(student_venv.resolve()), course_lib
    assert "site-packages" in course_lib.parts, "course_lib should be installed, not editable"
    paths = [Path(seen["cwd"], entry).resolve() for entry in seen["path"]]
    assert not any(path.is_relative_to(ROOT) for path in paths), paths


def test_importing_course_lib_does_not_import_transformers(seen):
    # Colab has transformers, and so has the student's environment; course_lib uses it only
    # where a function converts a model, and never depends on it
    assert seen["transformers"] is False


def test_the_kernel_has_colabs_ipywidgets(seen):
    assert seen["ipywidgets"] == "7.7.1"


def test_the_kernel_has_a_newer_torch_than_the_books_pin_as_colab_has(seen):
    # the newest that installs on this machine kind: nbval compares what every chapter
    # computes with it against the outputs stored from the pinned torch
    torch = Version(Version(seen["torch"]).public)
    assert torch == Version(STUDENT_TORCH) > pinned()["torch"]


def test_the_kernel_runs_colabs_python_where_the_machine_has_it(seen):
    wanted = STUDENT_PYTHON if find_python(STUDENT_PYTHON) else "{}.{}".format(*sys.version_info)
    assert seen["python"] == wanted


def test_each_kernel_starts_in_an_empty_folder_outside_the_repository_with_no_progress(seen):
    cwd = Path(seen["cwd"]).resolve()
    assert not cwd.is_relative_to(ROOT)
    assert Path(seen["home"]).parent.resolve() == cwd
    assert not Path(seen["home"]).exists() or not any(Path(seen["home"]).iterdir())


@pytest.mark.parametrize("name", PROJECT_ONLY)
def test_a_package_only_the_projects_tests_use_is_not_in_the_students_environment(
    student_venv, name
):
    found = subprocess.run(
        [student_venv / "bin" / "python", "-c", f"import {name}"], capture_output=True
    )
    assert found.returncode != 0, f"{name} is importable: it would hide a missing dependency"
