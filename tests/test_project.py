"""The project's own files pin the environment and declare the package as the course needs."""

import ast
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from conftest import ROOT, book_config


def pinned() -> dict[str, Version]:
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            requirement = Requirement(line)
            (spec,) = requirement.specifier  # exactly one specifier...
            assert spec.operator == "==", f"{line}: pin it with =="  # ...and it is a pin
            pins[requirement.name.lower().replace("_", "-")] = Version(spec.version)
    return pins


def test_requirements_pin_torch_2_13_0():
    assert pinned()["torch"] == Version("2.13.0")


def test_requirements_pin_jupyter_book_1():
    assert Version("1.0.4") <= pinned()["jupyter-book"] < Version("2")


def test_requirements_hold_the_tools_the_tests_use():
    for name in ("nbval", "nbclient", "sphinxcontrib-bibtex", "ipywidgets", "pytest", "ruff"):
        assert name in pinned(), name


def test_package_declares_its_runtime_ranges():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "course-lib"
    assert project["requires-python"] == ">=3.10"
    dependencies = {Requirement(d).name: Requirement(d).specifier for d in project["dependencies"]}
    assert set(dependencies) == {"torch", "numpy", "matplotlib", "ipywidgets", "jsonschema"}
    # 2.4 is the oldest torch the library's tests pass with (tasks.py compat runs them there):
    # before it, the answers engine cannot install its refusals and torch.compile breaks graphs
    assert dependencies["torch"].contains("2.4.0") and not dependencies["torch"].contains("2.3.1")
    assert dependencies["ipywidgets"].contains("7.7.1")
    assert dependencies["ipywidgets"].contains("8.1.5")
    assert not dependencies["ipywidgets"].contains("9.0.0")


def test_readme_installs_from_the_repository_url_of_the_book_config():
    url = book_config()["repository"]["url"]
    assert f'pip install "course-lib @ git+{url}"' in (ROOT / "README.md").read_text()


def test_the_built_package_holds_every_module_and_the_submission_schema(tmp_path):
    """What `pip install git+...` (Colab) gets: subpackages and data files included."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
         "--wheel-dir", str(tmp_path), str(ROOT)],
        check=True, capture_output=True,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("course_lib-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "course_lib").rglob("*")
        if path.suffix in (".py", ".json") and "__pycache__" not in path.parts
    }
    assert modules <= names, sorted(modules - names)
    assert "course_lib/exercises/schemas/submission-1.schema.json" in names
    assert "course_lib/checkpoints/number_translator.pt" in names


def test_readme_chapter_table_has_a_row_for_every_chapter():
    lines = (ROOT / "README.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| Chapter | Notebook |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(line)
    for notebook in sorted((ROOT / "chapters").glob("*.ipynb")):
        name = f"`chapters/{notebook.name}`"
        assert any(name in row for row in rows), f"README's chapter table lacks {name}"


# A test asserts on elapsed time when it subtracts two readings of a clock, compares the
# seconds a grade recorded.
ELAPSED = re.compile(r"(monotonic|perf_counter)\(\) - |\[\"seconds\"\] <", re.MULTILINE)


def test_a_test_that_asserts_on_elapsed_time_says_wall_clock_in_its_name():
    unnamed = []
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                body = "\n".join(lines[node.lineno - 1 : node.end_lineno])
                if ELAPSED.search(body) and "wall_clock" not in node.name:
                    unnamed.append(f"{path.name}::{node.name}")
    assert unnamed == []


def test_the_test_command_runs_on_every_core_and_prints_the_slowest_tests():
    import tasks

    assert tasks.PARALLEL[:4] == ("-n", "auto", "--dist", "loadgroup")
    assert "--durations=15" in tasks.PARALLEL


@pytest.fixture
def group_of(pytestconfig):
    """``group_of`` of the repository's conftest.py, as pytest loaded it (the name
    ``conftest`` is tests/conftest.py's)."""
    (module,) = [
        plugin
        for plugin in pytestconfig.pluginmanager.get_plugins()
        if Path(getattr(plugin, "__file__", None) or "/") == ROOT / "conftest.py"
    ]
    return module.group_of


def test_the_tests_of_one_page_of_the_book_are_one_group_whatever_their_module(group_of):
    page = "chapters/rotary-positions"
    ids = [
        f"tests/test_book.py::test_chapter_embeds_the_stored_widget_state[{page}]",
        f"tests/test_browser.py::test_no_element_clips_its_content[{page}-390x844-dark]",
        f"tests/test_browser.py::test_every_radio_option_has_a_row_of_its_own[{page}-1920-1080]",
        f"tests/test_browser_explorers.py::test_wall_clock_stored_states[{page}]",
    ]
    assert {group_of(nodeid) for nodeid in ids} == {f"book:{page}"}
    assert group_of("tests/test_browser.py::test_page_loads[intro]") == "book:intro"
    assert group_of("tests/test_book.py::test_x[chapters/decoder]") != f"book:{page}"


def test_the_books_tests_of_no_one_page_are_the_group_book(group_of):
    for nodeid in (
        "tests/test_book.py::test_every_table_of_contents_entry_has_a_page",
        "tests/test_book.py::test_book_serves_mathjax_and_the_widget_manager_itself[/mathjax/x.js]",
        "tests/test_browser.py::test_the_instructors_tables_fit_a_phone_without_scrolling[390]",
    ):
        assert group_of(nodeid) == "book", nodeid


def test_a_notebooks_cells_are_one_group_and_another_module_is_its_own(group_of):
    assert group_of("chapters/decoder.ipynb::Cell 3") == "chapters/decoder.ipynb"
    assert group_of("tests/test_grading.py::test_x[a-1]") == "tests/test_grading.py"
