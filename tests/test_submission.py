"""Specification of progress, hints and submission files."""

from __future__ import annotations

import json
import os
import sys
import types

import jsonschema
import pytest
import torch

import course_lib
from conftest import ROOT
from course_lib.answers.source import function_source
from course_lib.exercises import (
    SubmissionError,
    evaluate,
    get_exercise,
    hint,
    list_exercises,
    progress,
    progress_file,
    read_submission,
    submit,
)
from course_lib.exercises import submission as submission_module
from solutions import SOLUTIONS

model_encoding = SOLUTIONS["positional-encoding"]  # carried with wrong answers

SCHEMA = submission_module.schema()
BASE = 10000.0


def row_of(exercise_id: str) -> dict:
    """The progress row of one exercise (rows follow the course's reading order)."""
    return next(row for row in progress().rows if row["id"] == exercise_id)


def encoding_with_helpers(max_len, d_model):
    """A correct answer that leans on a helper, a constant and imports from other cells."""
    return _fill(_angles(max_len, d_model), d_model)


def _angles(max_len, d_model):
    pair = torch.arange(d_model // 2)
    return torch.arange(max_len)[:, None] * BASE ** (-2 * pair / d_model)


def _fill(angle, d_model):
    pe = torch.zeros(angle.shape[0], d_model)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
    return pe


def answer_everything() -> None:
    for exercise_id, answer in SOLUTIONS.items():
        assert evaluate(exercise_id, answer).passed


# ----------------------------------------------------------------------------- progress


def test_progress_lists_every_exercise_of_the_course_as_not_attempted_at_first():
    rows = progress().rows
    assert [r["id"] for r in rows] == [e.id for e in list_exercises()]
    assert {r["status"] for r in rows} == {"not attempted"}
    assert progress().score == 0 and progress().points == sum(e.points for e in list_exercises())


def test_progress_shows_the_last_result_attempts_and_score():
    evaluate("pe-doubled-index-bug", "a")
    evaluate("pe-doubled-index-bug", "b")
    row = next(r for r in progress().rows if r["id"] == "pe-doubled-index-bug")
    assert row["status"] == "passed" and row["attempts"] == 2 and row["score"] == 2
    text = str(progress("positional-encoding"))
    assert "pe-doubled-index-bug  choice  2/2     passed" in text
    assert text.endswith("1 of 4 exercises passed, 2 of 11 points")
    assert "<table" in progress()._repr_html_()


def test_progress_is_kept_in_course_lib_home(course_lib_home):
    evaluate("pe-doubled-index-bug", "b")
    assert progress_file() == course_lib_home / "progress.json"
    saved = json.loads(progress_file().read_text())
    assert saved["exercises"]["pe-doubled-index-bug"]["answer"] == {"choice": "b"}


def test_an_unreadable_progress_file_is_moved_aside_not_lost(course_lib_home):
    course_lib_home.mkdir()
    progress_file().write_text("{ this is not json")
    with pytest.warns(RuntimeWarning, match="could not be read"):
        evaluate("pe-doubled-index-bug", "b")
    aside = list(course_lib_home.glob("progress.unreadable-*.json"))
    assert len(aside) == 1 and aside[0].read_text() == "{ this is not json"
    assert row_of("pe-doubled-index-bug")["status"] == "passed"


def test_progress_writes_leave_no_temporary_files(course_lib_home):
    for _ in range(3):
        evaluate("pe-doubled-index-bug", "b")
    assert sorted(p.name for p in course_lib_home.iterdir()) == ["progress.json", "progress.lock"]


def test_hints_are_revealed_one_at_a_time_and_remembered(capsys):
    exercise = get_exercise("positional-encoding")
    first = hint("positional-encoding")
    assert first.texts == exercise.hints[:1]
    assert "1 of 3 shown" in capsys.readouterr().out
    assert hint("positional-encoding").texts == exercise.hints[:2]
    for _ in range(5):
        last = hint("positional-encoding")
    assert last.texts == exercise.hints
    assert "That was the last hint." in str(last)
    assert row_of("positional-encoding")["hints"] == 3


# ----------------------------------------------------------------------------- submission


def test_a_submission_round_trips_and_follows_the_schema(tmp_path):
    answer_everything()
    path = submit("ana.perez", tmp_path)
    data = read_submission(path)
    jsonschema.Draft202012Validator(SCHEMA).validate(json.loads(path.read_text()))
    assert data["student_id"] == "ana.perez"
    assert data["schema_version"] == 1
    assert data["course_lib_version"] == course_lib.__version__
    assert data["torch_version"] == torch.__version__
    assert data["python_version"] == ".".join(map(str, sys.version_info[:3]))
    assert data["created_utc"].endswith("Z")
    assert [e["id"] for e in data["exercises"]] == [e.id for e in list_exercises()]
    assert all(e["result"]["status"] == "passed" for e in data["exercises"])
    assert data["sha256"] == submission_module.content_hash(data)


def test_a_submission_holds_the_source_of_each_function_ready_to_run(tmp_path):
    assert evaluate("positional-encoding", encoding_with_helpers).passed
    data = read_submission(submit("s1234567", tmp_path))
    (entry,) = data["exercises"]
    assert entry["answer"]["function"] == "encoding_with_helpers"
    namespace: dict = {}
    exec(entry["answer"]["source"], namespace)  # no other cell, no test module needed
    table = namespace["encoding_with_helpers"](5, 6)
    assert torch.allclose(table, model_encoding(5, 6), atol=1e-6)
    assert "BASE = 10000.0" in entry["answer"]["source"]
    assert "import torch" in entry["answer"]["source"]


def test_function_source_reads_imports_constants_and_helpers_in_order():
    source, missing = function_source(encoding_with_helpers)
    assert missing == ()
    assert source.index("import torch") < source.index("BASE = ")
    assert source.index("def _angles") < source.index("def encoding_with_helpers")


def test_only_attempted_exercises_are_submitted_with_their_last_result(tmp_path):
    evaluate("pe-worked-example", "1, 2, 3, 4")
    data = read_submission(submit("ana", tmp_path))
    (entry,) = data["exercises"]
    assert entry["id"] == "pe-worked-example"
    assert entry["answer"] == {"value": [1.0, 2.0, 3.0, 4.0]}
    assert entry["result"]["status"] == "failed"
    assert entry["result"]["checks_total"] == 5


def test_a_submission_can_be_limited_to_one_chapter(tmp_path):
    answer_everything()
    data = read_submission(submit("ana", tmp_path, chapter="positional-encoding"))
    assert {e["chapter"] for e in data["exercises"]} == {"positional-encoding"}


def test_submitting_with_nothing_checked_is_refused_clearly(tmp_path):
    with pytest.raises(SubmissionError, match="nothing to submit: no exercise has been checked"):
        submit("ana", tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_submission_never_overwrites_an_earlier_one(tmp_path):
    evaluate("pe-doubled-index-bug", "b")
    first = submit("ana", tmp_path)
    second = submit("ana", tmp_path)
    assert first != second and first.exists() and second.exists()
    content = b"{}"
    one = submission_module._write_new(tmp_path, "same-name", content)
    two = submission_module._write_new(tmp_path, "same-name", content)
    assert (one.name, two.name) == ("same-name.json", "same-name-2.json")
    assert not list(tmp_path.glob(".submission-*"))  # no temporary file left behind


def test_the_file_name_holds_the_student_id_and_utc_time(tmp_path):
    evaluate("pe-doubled-index-bug", "b")
    path = submit("ana.perez", tmp_path)
    assert path.parent == tmp_path
    assert path.name.startswith("submission-ana.perez-2")
    assert path.name.endswith("Z.json")


def test_submit_creates_the_folder_and_refuses_a_file_in_its_place(tmp_path):
    evaluate("pe-doubled-index-bug", "b")
    assert submit("ana", tmp_path / "new" / "folder").parent == tmp_path / "new" / "folder"
    (tmp_path / "file").write_text("")
    with pytest.raises(SubmissionError, match="is not a folder"):
        submit("ana", tmp_path / "file")


@pytest.mark.parametrize(
    "student_id, message",
    [
        ("", "student_id is empty"),
        ("   ", "student_id is empty"),
        ("../../etc/passwd", "looks like a path"),
        ("ana/perez", "looks like a path"),
        ("ana\\perez", "looks like a path"),
        (".hidden", "looks like a path"),
        ("~ana", "looks like a path"),
        ("ana\nperez", "contains control characters"),
        ("ana\x00", "contains control characters"),
        ("ana perez", "contains the characters ' '"),
        ("a" * 101, "student_id is 101 characters long"),
        ("-ana", "contains a character in the wrong place"),
        (12345, "student_id must be text, got int"),
    ],
)
def test_an_unsafe_student_id_is_refused_with_a_clear_message(tmp_path, student_id, message):
    evaluate("pe-doubled-index-bug", "b")
    with pytest.raises(SubmissionError, match=r"use 1 to 100 letters|must be text") as error:
        submit(student_id, tmp_path / "out")
    assert message in str(error.value)
    assert not (tmp_path / "out").exists()


def test_on_colab_the_file_is_offered_for_download(tmp_path, monkeypatch):
    downloaded = []
    files = types.SimpleNamespace(download=downloaded.append)
    colab = types.ModuleType("google.colab")
    colab.files = files  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "google", types.ModuleType("google"))
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    evaluate("pe-doubled-index-bug", "b")
    path = submit("ana", tmp_path)
    assert downloaded == [str(path)]


def test_outside_colab_nothing_is_downloaded(tmp_path, capsys):
    evaluate("pe-doubled-index-bug", "b")
    path = submit("ana", tmp_path)
    assert capsys.readouterr().out == f"Wrote {path}: 1 exercises, 1 passed locally.\n"


# ----------------------------------------------------------------------------- reading


def written(tmp_path):
    evaluate("pe-doubled-index-bug", "b")
    return submit("ana", tmp_path)


def test_the_schema_is_a_valid_json_schema_and_is_versioned():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["properties"]["schema_version"] == {"const": submission_module.SCHEMA_VERSION}


def test_reading_a_truncated_file_says_so(tmp_path):
    path = written(tmp_path)
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(SubmissionError, match="not a readable JSON file"):
        read_submission(path)


def test_reading_a_changed_file_fails_its_hash(tmp_path):
    path = written(tmp_path)
    data = json.loads(path.read_text())
    data["exercises"][0]["result"]["checks_passed"] = 1
    data["student_id"] = "bob"
    path.write_text(json.dumps(data))
    with pytest.raises(SubmissionError, match="does not match its sha256"):
        read_submission(path)


def test_reading_a_file_of_another_version_or_kind_is_refused(tmp_path):
    path = written(tmp_path)
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "schema_version": 2}))
    with pytest.raises(SubmissionError, match="schema_version 2 is not supported"):
        read_submission(path)
    path.write_text(json.dumps({"hello": "world"}))
    with pytest.raises(SubmissionError, match="not a course_lib submission"):
        read_submission(path)


def test_reading_a_file_that_breaks_the_schema_names_the_place(tmp_path):
    path = written(tmp_path)
    data = json.loads(path.read_text())
    data["exercises"][0]["kind"] = "essay"
    data["sha256"] = submission_module.content_hash(data)
    path.write_text(json.dumps(data))
    with pytest.raises(SubmissionError, match="schema at exercises/0/kind"):
        read_submission(path)


def test_reading_a_huge_file_is_refused_without_loading_it(tmp_path):
    path = tmp_path / "huge.json"
    with open(path, "wb") as stream:
        stream.truncate(submission_module.MAX_SUBMISSION_BYTES + 1)
    with pytest.raises(SubmissionError, match="larger than a submission can be"):
        read_submission(path)


def test_a_submission_file_is_plain_utf8_json_readable_without_course_lib(tmp_path):
    path = written(tmp_path)
    data = json.loads(path.read_bytes().decode("utf-8"))
    assert data["format"] == "course-lib-submission"
    assert os.path.getsize(path) < 50_000


TABLE = torch.zeros(4, 4)


def reads_a_global_tensor(max_len, d_model):
    return TABLE[:max_len, :d_model]


def test_a_function_that_reads_a_global_tensor_is_recorded_with_a_note(tmp_path, capsys):
    evaluate("positional-encoding", reads_a_global_tensor)
    (entry,) = read_submission(submit("ana", tmp_path))["exercises"]
    assert "Note on positional-encoding: reads_a_global_tensor reads TABLE" in (
        capsys.readouterr().out
    )
    assert "return TABLE[:max_len, :d_model]" in entry["answer"]["source"]
    assert "reads TABLE, defined elsewhere" in entry["answer"]["note"]


def test_the_example_in_the_book_page_is_a_valid_submission(tmp_path):
    page = (ROOT / "exercises.md").read_text(encoding="utf-8")
    example = page.split("```json\n", 1)[1].split("\n```", 1)[0]
    path = tmp_path / "example.json"
    path.write_text(example, encoding="utf-8")
    assert read_submission(path)["schema_version"] == submission_module.SCHEMA_VERSION


# ----------------------------------------------------------------------------- odd answers


def make_scaled(scale):
    def scaled(max_len, d_model):
        return scale * model_encoding(max_len, d_model)

    return scaled


INF = float("inf")


def uses_infinity(max_len, d_model):
    return model_encoding(max_len, d_model).clamp(-INF, INF)


def with_a_lambda_in_a_dict(max_len, d_model):
    ops = {
        "angle": lambda p, w: p * w,
    }
    pair = torch.arange(d_model // 2)
    angle = ops["angle"](torch.arange(max_len)[:, None], BASE ** (-2 * pair / d_model))
    return _fill(angle, d_model)


def codificación(max_len, d_model):
    return model_encoding(max_len, d_model)


def test_a_closure_is_recorded_with_a_note_about_its_free_variables(tmp_path):
    evaluate("positional-encoding", make_scaled(1.0))
    (entry,) = read_submission(submit("ana", tmp_path))["exercises"]
    assert "scaled reads scale, defined elsewhere" in entry["answer"]["note"]


def test_a_non_finite_constant_is_not_written_as_broken_python():
    source, missing = function_source(uses_infinity)
    assert "INF = inf" not in source
    assert "INF" in missing


def test_a_lambda_inside_the_function_does_not_stop_the_source():
    source, missing = function_source(with_a_lambda_in_a_dict)
    assert '"angle": lambda p, w: p * w' in source and missing == ()


def test_parameters_named_like_notebook_globals_are_not_written_as_constants():
    def encoding(max_len, d_model):
        return model_encoding(max_len, d_model)

    globals()["d_model"] = 512  # as a chapter cell would leave it
    try:
        source, _ = function_source(encoding)
    finally:
        del globals()["d_model"]
    assert "d_model = 512" not in source


def test_a_function_with_a_non_ascii_name_can_be_submitted(tmp_path):
    assert evaluate("positional-encoding", codificación).passed
    (entry,) = read_submission(submit("ana", tmp_path))["exercises"]
    assert entry["answer"]["function"] == "codificación"


@pytest.mark.parametrize(
    "answer",
    ["nan, 1, 2, 3", "1e400, 0, 0, 0", ", ".join(["1"] * 10_001)],
)
def test_a_value_answer_that_json_cannot_hold_as_numbers_is_kept_as_text(tmp_path, answer):
    evaluate("pe-worked-example", answer)
    path = submit("ana", tmp_path)
    (entry,) = read_submission(path)["exercises"]
    assert entry["answer"]["value"] is None
    assert entry["answer"]["text"] == answer[:200]
    assert "NaN" not in path.read_text() and "Infinity" not in path.read_text()


def test_a_long_choice_is_recorded_cut_to_the_schema_limit(tmp_path):
    evaluate("pe-doubled-index-bug", "line 4 " * 100)
    (entry,) = read_submission(submit("ana", tmp_path))["exercises"]
    assert len(entry["answer"]["choice"]) == 200


def test_a_damaged_record_is_left_out_of_the_submission_with_a_message(tmp_path, capsys):
    evaluate("pe-doubled-index-bug", "b")
    evaluate("pe-worked-example", "1, 2, 3, 4")
    saved = json.loads(progress_file().read_text())
    del saved["exercises"]["pe-worked-example"]["result"]["checks"]
    progress_file().write_text(json.dumps(saved))
    (entry,) = read_submission(submit("ana", tmp_path))["exercises"]
    assert entry["id"] == "pe-doubled-index-bug"
    assert "Left out pe-worked-example: its record" in capsys.readouterr().out


def test_a_progress_file_of_the_wrong_shape_is_moved_aside(course_lib_home):
    course_lib_home.mkdir()
    progress_file().write_text(json.dumps({"exercises": {"positional-encoding": 5}}))
    with pytest.warns(RuntimeWarning, match="is not an object"):
        rows = progress().rows
    assert rows[0]["status"] == "not attempted"
    assert len(list(course_lib_home.glob("progress.unreadable-*.json"))) == 1


def test_two_unreadable_files_in_the_same_second_are_both_kept(course_lib_home):
    course_lib_home.mkdir()
    for text in ("first", "second"):
        progress_file().write_text(text)
        with pytest.warns(RuntimeWarning):
            progress()
    kept = sorted(p.read_text() for p in course_lib_home.glob("progress.unreadable-*"))
    assert kept == ["first", "second"]


def test_reading_a_file_with_nan_is_refused(tmp_path):
    path = written(tmp_path)
    path.write_text(path.read_text().replace('"attempts": 1', '"attempts": NaN'))
    with pytest.raises(SubmissionError, match="NaN is not a JSON number"):
        read_submission(path)


def test_the_repr_of_hints_does_not_reveal_hidden_ones():
    shown = hint("positional-encoding")
    assert repr(shown) == "<1 of 3 hints of 'positional-encoding'>"
