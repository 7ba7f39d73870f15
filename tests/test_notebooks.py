"""Every chapter notebook is committed executed, starts with the setup cell, and renders well.

nbval (run on chapters/ by the same pytest command) re-executes each notebook and compares the
outputs with the stored ones; these tests check what nbval cannot: how the stored notebook is
built.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import json
import re
import subprocess
import sys
import types

import pytest

from conftest import (
    ROOT,
    WIDGET_STATE,
    WIDGET_VIEW,
    book_config,
    chapter_notebooks,
    read_notebook,
    toc_files,
)

FORMATTER_DIRECTIVE = re.compile(r"#\s*fmt:\s*(skip|off|on)\b")
# Characters of a line of library code that show_source displays without sideways scrolling:
# its output block in a 1366 x 768 window of Chromium holds 86 (measured on the built book).
SHOWN_CODE_COLUMN = 86
SETUP_URL = re.compile(r'^    REPO = "(?P<url>https://[^"\s]+)"$', flags=re.MULTILINE)
ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")


def code_cells(notebook):
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def text_of(output) -> str:
    if output.output_type == "stream":
        return output.text
    return "".join(str(value) for key, value in output.get("data", {}).items() if "text" in key)


def test_there_is_at_least_one_chapter():
    assert chapter_notebooks(), "chapters/ holds no notebooks"


def test_every_chapter_notebook_is_in_the_table_of_contents():
    listed = set(toc_files())
    missing = [p.name for p in chapter_notebooks() if f"chapters/{p.stem}" not in listed]
    assert not missing, f"add these notebooks to _toc.yml: {missing}"


def test_the_course_map_has_a_box_for_every_chapter_in_the_tables_order():
    """Figure 1.7 draws the chapters from a list written in its cell: it must not drift from
    _toc.yml (it once lacked the training-recipe chapter)."""
    notebook = read_notebook(ROOT / "chapters" / "transformers-at-a-glance.ipynb")
    (cell,) = [c for c in code_cells(notebook) if "draw_course_map(" in c.source]
    assignment = next(
        node
        for node in ast.parse(cell.source).body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "course"
    )
    boxes = [title for title, _ in ast.literal_eval(assignment.value)]
    chapters = [
        read_notebook(ROOT / f"{entry}.ipynb").cells[0].source.splitlines()[0].lstrip("# ")
        for entry in toc_files()
        if (ROOT / f"{entry}.ipynb").is_file()
    ]
    assert len(boxes) == len(chapters), f"the map has {boxes}, the book has {chapters}"
    assert boxes[0] == chapters[0]


def test_every_table_of_contents_entry_exists():
    for entry in toc_files():
        candidates = [ROOT / f"{entry}{suffix}" for suffix in (".md", ".ipynb")]
        assert any(path.exists() for path in candidates), f"_toc.yml lists {entry}, not found"


def test_first_code_cell_is_the_setup_cell_that_imports_course_lib(notebook_path):
    first = code_cells(read_notebook(notebook_path))[0]
    assert first.source.lstrip().startswith("# Setup"), "the first code cell must be the setup cell"
    assert "import course_lib" in first.source
    assert SETUP_URL.search(first.source), "the setup cell must name the repository in REPO"


def test_setup_cell_installs_from_the_repository_url_of_the_book_config(notebook_path):
    first = code_cells(read_notebook(notebook_path))[0]
    url = SETUP_URL.search(first.source)["url"]
    assert url == book_config()["repository"]["url"]


def test_setup_cell_installs_nothing_where_course_lib_is_importable(notebook_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError(f"the setup cell tried to run {args}")

    monkeypatch.setattr(subprocess, "check_call", refuse)
    first = code_cells(read_notebook(notebook_path))[0]
    namespace: dict = {}
    exec(compile(first.source, "setup-cell", "exec"), namespace)
    assert isinstance(namespace["course_lib"], types.ModuleType)


def test_setup_cell_pip_installs_the_repository_where_course_lib_is_missing(
    notebook_path, monkeypatch
):
    import course_lib

    calls = []

    def fake_pip(command, *args, **kwargs):
        calls.append(command)
        monkeypatch.setitem(sys.modules, "course_lib", course_lib)  # "installed" now
        return 0

    monkeypatch.setitem(sys.modules, "course_lib", None)  # import course_lib now fails
    monkeypatch.setattr(subprocess, "check_call", fake_pip)
    first = code_cells(read_notebook(notebook_path))[0]
    namespace: dict = {}
    exec(compile(first.source, "setup-cell", "exec"), namespace)
    url = book_config()["repository"]["url"]
    assert calls == [[sys.executable, "-m", "pip", "install", "--quiet", f"course-lib @ git+{url}"]]
    assert namespace["course_lib"] is course_lib


def skipped(cell) -> bool:
    """A cell that only a reader runs (it downloads): nbclient, nbval and the book skip it."""
    return "skip-execution" in cell.metadata.get("tags", [])


def test_notebook_is_stored_executed_in_order(notebook_path):
    cells = [
        c for c in code_cells(read_notebook(notebook_path)) if c.source.strip() and not skipped(c)
    ]
    counts = [cell.execution_count for cell in cells]
    assert None not in counts, "some code cells were never executed; run `tasks.py execute`"
    assert counts == list(range(1, len(cells) + 1)), f"not run top to bottom once: {counts}"


def test_stored_outputs_hold_no_errors_unless_the_cell_expects_one(notebook_path):
    for index, cell in enumerate(code_cells(read_notebook(notebook_path))):
        expected = "raises-exception" in cell.metadata.get("tags", [])
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert expected or not errors, f"code cell {index} stored an error: {errors[0].ename}"


def test_stored_outputs_hold_no_stderr_and_no_memory_addresses(notebook_path):
    for index, cell in enumerate(code_cells(read_notebook(notebook_path))):
        for output in cell.outputs:
            assert output.get("name") != "stderr", f"code cell {index} wrote to stderr"
            found = ADDRESS.search(text_of(output))
            assert not found, f"code cell {index} printed the address {found.group()}"


def test_widget_cells_store_their_state_and_skip_output_comparison(notebook_path):
    notebook = read_notebook(notebook_path)
    widget_cells = [
        cell for cell in code_cells(notebook)
        if any(WIDGET_VIEW in output.get("data", {}) for output in cell.outputs)
    ]  # fmt: skip
    for cell in widget_cells:
        assert "nbval-ignore-output" in cell.metadata.get("tags", []), cell.source
    if widget_cells:
        state = notebook.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
        for cell in widget_cells:
            for output in cell.outputs:
                if WIDGET_VIEW in output.get("data", {}):
                    assert output.data[WIDGET_VIEW]["model_id"] in state


def test_every_figure_is_numbered_with_a_caption_and_alt_text(notebook_path):
    for index, cell in enumerate(code_cells(read_notebook(notebook_path))):
        if not any("image/png" in output.get("data", {}) for output in cell.outputs):
            continue
        options = cell.metadata.get("mystnb", {})
        figure, image = options.get("figure", {}), options.get("image", {})
        assert figure.get("name", "").startswith("fig-"), f"code cell {index}: figure name"
        assert figure.get("caption"), f"code cell {index}: figure caption"
        assert len(image.get("alt", "")) > 20, f"code cell {index}: describe the figure in alt"


def test_figure_names_are_unique_across_the_book():
    names = [
        cell.metadata["mystnb"]["figure"]["name"]
        for path in chapter_notebooks()
        for cell in code_cells(read_notebook(path))
        if "figure" in cell.metadata.get("mystnb", {})
    ]
    assert len(names) == len(set(names)), names


@pytest.mark.parametrize("path", chapter_notebooks(), ids=lambda path: path.stem)
def test_notebook_runs_on_the_python3_kernel(path):
    assert read_notebook(path).metadata["kernelspec"]["name"] == "python3"


def test_printed_lines_fit_the_text_column_of_the_book(notebook_path):
    for index, cell in enumerate(code_cells(read_notebook(notebook_path))):
        for output in cell.outputs:
            if output.output_type == "stream":
                long = [line for line in output.text.splitlines() if len(line) > 88]
                assert not long, f"code cell {index} printed {len(long[0])} characters"


def test_no_cell_carries_a_formatter_directive(notebook_path):
    for index, cell in enumerate(code_cells(read_notebook(notebook_path))):
        found = FORMATTER_DIRECTIVE.search(cell.source)
        assert not found, f"code cell {index} has {found.group(0)!r}: lay it out for ruff"


def shown_library_code(notebook_path) -> list[tuple[int, str]]:
    """(cell index, code) of every library source the chapter shows with show_source; the
    stored output is the library's current code (nbval compares it on every run)."""
    shown = []
    for index, cell in enumerate(code_cells(read_notebook(notebook_path))):
        if "show_source(" in cell.source:
            for output in cell.outputs:
                if output.output_type == "execute_result":
                    shown.append((index, output.data["text/plain"]))
    return shown


def test_library_code_a_chapter_shows_carries_no_formatter_directive(notebook_path):
    for index, code in shown_library_code(notebook_path):
        found = FORMATTER_DIRECTIVE.search(code)
        assert not found, f"code cell {index} shows library code with {found.group(0)!r}"


def test_library_code_a_chapter_shows_fits_the_code_column_at_1366_px(notebook_path):
    for index, code in shown_library_code(notebook_path):
        wide = [line for line in code.splitlines() if len(line) > SHOWN_CODE_COLUMN]
        assert not wide, f"code cell {index} shows lines wider than the column: {wide}"


def test_widget_model_ids_are_the_stable_ones_tasks_execute_writes(notebook_path):
    spec = importlib.util.spec_from_file_location("tasks", ROOT / "tasks.py")
    tasks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tasks)
    notebook = read_notebook(notebook_path)
    renamed = tasks.stable_widget_ids(read_notebook(notebook_path), salt=notebook_path.stem)
    assert renamed == notebook, "execute the notebook with `python3 tasks.py execute`"


def test_what_a_cell_prints_in_a_row_is_stored_as_one_stream_output(notebook_path):
    for index, cell in enumerate(code_cells(read_notebook(notebook_path))):
        streams = [o.get("name") if o.output_type == "stream" else None for o in cell.outputs]
        for first, second in itertools.pairwise(streams):
            assert not (first and first == second), (
                f"code cell {index} stores one printout as several {first} outputs (split by "
                "the kernel's timing); execute the notebook with `python3 tasks.py execute`"
            )


def test_stored_exercises_show_the_unanswered_state(notebook_path):
    """The book shows what a student sees first: nothing checked, nothing chosen."""
    notebook = read_notebook(notebook_path)
    state = notebook.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for cell in code_cells(notebook):
        if not re.match(r'^(check|ask)\("[a-z0-9-]+"', cell.source):
            continue
        (view,) = [o.data[WIDGET_VIEW] for o in cell.outputs if WIDGET_VIEW in o.get("data", {})]
        pending = [view["model_id"]]
        seen = []
        while pending:  # the displayed box and every widget inside it
            model = state[pending.pop()]
            seen.append(model)
            pending += re.findall(r"IPY_MODEL_([0-9a-f]{32})", json.dumps(model["state"]))
        texts = json.dumps([m["state"] for m in seen])
        if cell.source.startswith("check("):
            assert "Not attempted yet" in texts, cell.source
        else:
            answers = [m["state"] for m in seen if m["model_name"] in ("RadioButtonsModel",
                                                                       "TextModel")]  # fmt: skip
            assert answers and all(a.get("index") is None and not a.get("value")
                                   for a in answers), cell.source  # fmt: skip
        assert "PASSED" not in texts and "FAILED" not in texts


def test_cells_that_download_are_skipped_by_the_tests_and_the_book(notebook_path):
    """Nothing is downloaded when a chapter is executed or tested: a cell that loads from the
    Hugging Face hub is tagged to be skipped (nbclient, jupyter-book, nbval) and stored
    without outputs."""
    for index, cell in enumerate(code_cells(read_notebook(notebook_path))):
        if re.search(r"from_pretrained\(\s*[\"']", cell.source):  # a model named on the hub
            tags = cell.metadata.get("tags", [])
            assert {"skip-execution", "nbval-skip"} <= set(tags), f"code cell {index}: {tags}"
            assert not cell.outputs and cell.execution_count is None, f"code cell {index}"


def test_no_chapter_says_its_explorer_shows_only_a_stored_state_in_the_book(notebook_path):
    """The explorers move in the HTML book (issue 20): no text may send readers to Colab for
    that."""
    frozen = re.compile(r"initial state only|shows? (its|their) (initial|stored) state", re.I)
    for index, cell in enumerate(read_notebook(notebook_path).cells):
        if cell.cell_type == "markdown":
            assert not frozen.search(cell.source), f"cell {index}: {frozen.search(cell.source)[0]}"
