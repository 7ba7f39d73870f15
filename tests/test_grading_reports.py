"""Specification of what ``course-grade`` writes for people: grades.csv, the class summary,
the Canvas and Moodle exports, similar answers, feedback pages, and how they are protected."""

from __future__ import annotations

import csv
import inspect
import math
import re
import stat
from pathlib import Path

import pytest
import torch
from test_grading import (
    MODEL_ROTATION,
    SEED,
    code,
    document,
    encoding_doing,
    entry,
    everything_right,
    grade,
    hard_coded_public_checks,
    read_csv,
    write,
)

from course_lib.answers.compare import _number
from course_lib.answers.judging import judge
from course_lib.answers.source import function_source
from course_lib.exercises import evaluate, get_exercise, list_exercises
from course_lib.grading.feedback import public_labels
from course_lib.grading.gradebook import Gradebook
from course_lib.grading.report import inert
from course_lib.grading.similarity import normalised_source, others
from solutions import SOLUTIONS

RIGHT = {e["id"]: e for e in everything_right()}
MODEL_LAYER_NORM = function_source(SOLUTIONS["layer-norm"]).text
STUB = "def positional_encoding(max_len, d_model):\n    raise NotImplementedError\n"
RENAMED_ROTATION = (
    MODEL_ROTATION.replace("offset_matrix", "rotation")
    .replace("offset", "k")
    .replace("d_model", "size")
    .replace("\n", "  # my own work\n", 1)
)
CODE_EXERCISES = ("positional-encoding", "pe-offset-rotation", "layer-norm")


def layer_norm(body: str) -> dict:
    return code(f"def layer_norm(x, gain, bias, eps):\n    {body}\n", "layer_norm", "layer-norm")


def read_rows(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as stream:
        return list(csv.reader(stream))


class Class:
    """A class graded once: files handed in chapter by chapter, wrong, hostile and copied
    answers, and an override."""

    def __init__(self, root: Path) -> None:
        self.inbox, self.out = root / "in", root / "out"
        self.inbox.mkdir()
        add = self.add
        add("ana", [RIGHT["positional-encoding"]], "2026-11-20T10:00:00Z")
        add("ana", [RIGHT["pe-doubled-index-bug"], entry("pe-worked-example", {"value": [1.0]})],
            "2026-11-21T10:00:00Z")  # fmt: skip
        add("ana", [RIGHT["pe-offset-rotation"]], "2026-11-22T10:00:00Z")
        add("ana", [RIGHT["pe-worked-example"]], "2026-11-23T10:00:00Z")
        add("ben", [code(hard_coded_public_checks()), layer_norm("return x")])
        add("cleo", [code(RENAMED_ROTATION, "rotation", "pe-offset-rotation")])
        add("dan", [encoding_doing("raise ValueError(f'{float(max_len):+.6g} <b>bold</b>')")])
        add("eve", [code(STUB), layer_norm("return x * gain + bias")])
        add("fay", [code(STUB)])
        add("gus", [code(MODEL_LAYER_NORM, "layer_norm", "layer-norm")])
        self.status, self.printed = grade(self.inbox, "--out", self.out, "--seed", SEED, "--quiet")
        grade("override", "--out", self.out, "fay", "positional-encoding", "1",
              "--reason", "=HYPERLINK(\"http://x\")")  # fmt: skip
        self.grades = read_csv(self.out / "grades.csv")

    def add(self, student: str, entries: list[dict], created: str = "2026-11-20T10:00:00Z"):
        write(self.inbox, student, document(student, entries, created), created[:10])

    def feedback(self, student: str) -> str:
        return (self.out / "feedback" / f"{student}.html").read_text()


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> Class:
    return Class(tmp_path_factory.mktemp("class"))


# ----------------------------------------------------------------------------- grades.csv


def test_grades_csv_starts_with_a_row_of_the_maximum_points(graded):
    header, maxima = read_rows(graded.out / "grades.csv")[:2]
    exercises = list_exercises()
    assert maxima[0] == "(max points)"
    assert maxima[1 : len(exercises) + 1] == [str(e.points) for e in exercises]
    assert maxima[header.index("total")] == str(sum(e.points for e in exercises))


def test_grades_csv_says_how_many_files_were_combined_and_what_was_superseded(graded):
    row = graded.grades["ana"]
    assert row["files"] == "4" and row["total"] == "11"
    assert "4 files combined" in row["notes"]
    assert "pe-worked-example: 1 answer(s) superseded by the file of 2026-11-23" in row["notes"]
    assert len(row["submission"].split()) == 4


def test_the_terminal_report_has_a_class_summary_and_the_combined_files(graded):
    assert graded.status == 0, graded.printed
    assert "Class summary" in graded.printed
    assert "  positional-encoding: 5 answered, 1 passed, mean 0.8 of 4" in graded.printed
    assert "ana: 4 files combined; superseded: pe-worked-example" in graded.printed


# ----------------------------------------------------------------------------- summary.csv


def test_the_summary_gives_answers_passes_mean_points_and_common_failures(graded):
    rows = {r["exercise_id"]: r for r in csv.DictReader(open(graded.out / "summary.csv"))}
    row = rows["layer-norm"]
    assert (row["students"], row["answered"], row["passed"], row["mean_points"]) == (
        "7",
        "3",
        "1",
        f"{get_exercise('layer-norm').points / 3:.2f}",
    )
    assert row["failure_1_count"] == "2" and row["failure_1"].startswith("fail: ")
    assert re.search(r"\d", row["failure_1"]) is None  # numbers are replaced by #
    assert rows["glance-architecture"]["answered"] == "0"


# ----------------------------------------------------------------------------- exports


def test_the_canvas_export_has_the_columns_and_the_points_possible_row_canvas_reads(graded):
    rows = read_rows(graded.out / "canvas.csv")
    chapters = list(dict.fromkeys(e.chapter for e in list_exercises()))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *chapters]
    assert rows[1][0].strip() == "Points Possible"
    assert rows[1][5 + chapters.index("positional-encoding")] == "11"
    ana = next(r for r in rows if r[2] == "ana")
    assert ana[:5] == ["ana", "", "ana", "ana", ""]
    assert ana[5 + chapters.index("positional-encoding")] == "11"
    assert ana[5] == ""  # no answer in that chapter: empty, not 0


def test_the_moodle_export_has_an_id_column_and_a_column_per_chapter(graded):
    rows = read_rows(graded.out / "moodle.csv")
    chapters = list(dict.fromkeys(e.chapter for e in list_exercises()))
    assert rows[0] == ["ID number", *chapters]
    assert [r[0] for r in rows[1:]] == sorted(graded.grades)
    ana = next(r for r in rows if r[0] == "ana")
    assert ana[1 + chapters.index("positional-encoding")] == "11"


# ----------------------------------------------------------------------------- similar code


def test_code_identical_after_renaming_and_comments_is_listed_as_similar(graded):
    rows = list(csv.DictReader(open(graded.out / "similar.csv")))
    pairs = {(r["exercise_id"], r["student_id"], r["same_as"]) for r in rows}
    assert ("pe-offset-rotation", "ana", "cleo") in pairs
    assert ("pe-offset-rotation", "cleo", "ana") in pairs
    assert graded.grades["cleo"]["similar"] == "pe-offset-rotation: ana"
    assert graded.grades["cleo"]["pe-offset-rotation"] == "3"  # nothing is deducted


def test_the_students_of_a_similar_group_share_its_key(graded):
    rows = [r for r in csv.DictReader(open(graded.out / "similar.csv"))]
    keys = {r["group"] for r in rows if r["exercise_id"] == "pe-offset-rotation"}
    assert len(keys) == 1


def test_a_large_group_of_similar_answers_is_counted_not_listed():
    students = [f"s{i:02d}" for i in range(12)]
    assert others(students, "s00") == ["11 other students"]
    assert others(students[:3], "s00") == ["s01", "s02"]


def test_stubs_are_never_listed_as_similar(graded):
    assert graded.grades["fay"]["similar"] == ""
    assert normalised_source(STUB) is None
    assert normalised_source("def f(x):\n    '''doc'''\n    ...\n") is None


def test_normalising_keeps_what_the_code_does():
    one = normalised_source("import torch\ndef f(a):\n    return torch.sin(a) + len(a)\n")
    two = normalised_source("import torch\ndef g(b):  # hi\n    return torch.sin(b) + len(b)\n")
    other = normalised_source("import torch\ndef g(b):\n    return torch.cos(b) + len(b)\n")
    assert one == two != other
    assert normalised_source("def (") is None


def test_how_a_module_is_imported_does_not_hide_a_copy():
    plain = normalised_source("import torch\ndef f(a):\n    return torch.sin(a)\n")
    aliased = normalised_source("import torch as T\ndef g(b):\n    return T.sin(b)\n")
    other = normalised_source("import numpy as T\ndef g(b):\n    return T.sin(b)\n")
    assert plain == aliased != other


# ----------------------------------------------------------------------------- feedback


def test_every_student_gets_a_self_contained_feedback_page(graded):
    pages = sorted(p.stem for p in (graded.out / "feedback").glob("*.html"))
    assert pages == sorted(graded.grades)
    for student in pages:
        page = graded.feedback(student)
        assert page.startswith("<!DOCTYPE html>") and "<style>" in page
        assert not re.search(r"https?:|<script|<link|src=", page), student


def test_feedback_says_where_each_answer_came_from_and_what_it_replaced(graded):
    page = graded.feedback("ana")
    course_points = sum(exercise.points for exercise in list_exercises())
    assert f"11 of {course_points} points" in page
    assert "answer from your file written at 2026-11-23T10:00:00.000000Z" in page
    assert "it replaces 1 other answer(s) of yours to this exercise" in page


def test_feedback_escapes_the_students_text(graded):
    page = graded.feedback("dan")
    assert "&lt;b&gt;bold&lt;/b&gt;" in page and "<b>bold</b>" not in page


def test_feedback_shows_an_override_without_its_reason(graded):
    page = graded.feedback("fay")
    assert "points set by your instructor" in page and "HYPERLINK" not in page


def numbers(value: object) -> set[str]:
    """Every entry of the tensors in ``value`` as the grader's messages write numbers."""
    if isinstance(value, torch.Tensor):
        return {_number(float(v)) for v in value.detach().reshape(-1).double().tolist()}
    if isinstance(value, (tuple, list)):
        return set().union(*(numbers(v) for v in value)) if value else set()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {_number(float(value))}
    return set()


def case_numbers(exercise, cases) -> set[str]:
    found = set()
    for case in cases:
        found |= numbers(case.args) | numbers(exercise.reference(*case.args, **case.kwargs))
    return found


def secrets() -> tuple[set[str], list[str]]:
    """The grading seed's hidden inputs and results as messages would write their numbers
    (those that no public case has too), their labels, and the references' sources."""
    hidden_numbers, texts = set(), []
    for exercise_id in CODE_EXERCISES:
        exercise = get_exercise(exercise_id)
        public = list(exercise.cases(exercise.seed))
        labels = {c.label for c in public}
        hidden = [c for c in exercise.cases(SEED) if c.label not in labels]
        assert hidden
        hidden_numbers |= case_numbers(exercise, hidden) - case_numbers(exercise, public)
        texts += [c.label for c in hidden]
        texts.append(inspect.getsource(exercise.reference))
    return hidden_numbers, texts


def test_no_feedback_page_shows_a_hidden_input_or_the_reference(graded):
    hidden_numbers, texts = secrets()
    assert len(hidden_numbers) > 100
    for page in (graded.out / "feedback").glob("*.html"):
        text = page.read_text()
        shown = set(re.findall(r"[-+]\d[\d.e+-]*", text))
        assert not shown & hidden_numbers, (page.name, sorted(shown & hidden_numbers)[:5])
        assert not [t for t in texts if t in text], page.name


def test_the_hidden_cases_of_a_failed_answer_say_only_what_kind_of_mistake(graded):
    page = graded.feedback("ben")
    assert "hidden case 1" in page and "wrong values" in page
    assert "max_len=3, d_model=4 (the worked example)" in page  # public cases keep their name


# ----------------------------------------------------------------------------- protection


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"])
def test_a_csv_cell_starting_like_a_formula_is_made_inert(start):
    assert inert(f"{start}1+1") == f"'{start}1+1"
    assert inert("1+1") == "1+1" and inert(5) == 5


def test_an_override_reason_that_looks_like_a_formula_is_inert_in_the_csv(graded):
    rows = list(csv.DictReader(open(graded.out / "results.csv")))
    reason = next(r["override_reason"] for r in rows if r["student_id"] == "fay")
    assert reason == '\'=HYPERLINK("http://x")'


def test_the_gradebook_and_every_report_are_readable_by_their_owner_only(graded):
    files = [p for p in graded.out.rglob("*") if p.is_file() and p.name != ".course-grade.lock"]
    assert len(files) > 10
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stat.S_IMODE((graded.out / "feedback").stat().st_mode) == 0o700


def test_the_gradebooks_journal_is_readable_by_its_owner_only(tmp_path):
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        book.db.execute("BEGIN IMMEDIATE")
        book.db.execute("INSERT INTO meta (key, value) VALUES ('x', 'y')")
        journal = tmp_path / "gradebook.sqlite-journal"
        assert journal.exists() and stat.S_IMODE(journal.stat().st_mode) == 0o600
        book.db.execute("ROLLBACK")


def test_fixed_cases_whose_arguments_are_objects_keep_their_names():
    exercise = get_exercise("greedy-decoding")
    fixed = {c.label for c in exercise.cases(exercise.seed) if not c.label.startswith("random")}
    assert fixed and public_labels(exercise, SEED) == fixed


def test_grading_the_same_files_again_rewrites_every_report_byte_for_byte(graded):
    files = sorted(
        p for p in graded.out.rglob("*") if p.is_file() and p.suffix in (".csv", ".html")
    )
    before = {p: p.read_bytes() for p in files}
    status, printed = grade(graded.inbox, "--out", graded.out, "--quiet")
    assert status == 0 and "Graded 0 submissions" in printed
    assert {p: p.read_bytes() for p in files} == before


def test_student_text_in_the_terminal_summary_cannot_drive_the_terminal(tmp_path):
    inbox = tmp_path / "in"
    inbox.mkdir()
    write(inbox, "ana", document("ana", [encoding_doing("raise ValueError('\\x1b[2J\\x07')")]))
    status, printed = grade(inbox, "--out", tmp_path / "out", "--seed", SEED, "--quiet")
    summary = printed[printed.index("Class summary") :]
    assert status == 0 and "ValueError" in summary
    assert "\x1b" not in summary and "\\x1b[#J\\x07" in summary  # numbers read #


def test_an_existing_gradebook_is_made_readable_by_its_owner_only(tmp_path):
    path = tmp_path / "gradebook.sqlite"
    Gradebook(path).close()
    path.chmod(0o644)
    Gradebook(path).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_feedback_shows_why_a_whole_answer_was_refused_as_the_check_said(tmp_path):
    (tmp_path / "in").mkdir()
    reads_a_tensor = {
        "function": "positional_encoding",
        "source": "import torch\n\ndef positional_encoding(max_len, d_model):\n"
        "    return BASE[:max_len, :d_model]\n",
        "missing": ["BASE"],
    }
    broken = "def layer_norm(x, gain, bias, eps)\n    return x\n"
    entries = [
        entry("positional-encoding", reads_a_tensor),
        code(broken, "layer_norm", "layer-norm"),
    ]
    write(tmp_path / "in", "hal", document("hal", entries))
    grade(tmp_path / "in", "--out", tmp_path / "out", "--seed", SEED, "--quiet")
    page = (tmp_path / "out" / "feedback" / "hal.html").read_text()
    assert "positional_encoding reads BASE, defined elsewhere in the notebook" in page
    assert "the source is not valid Python (line 1)" in page
    assert "hidden case 1" not in page


def test_student_ids_differing_only_in_capitals_are_pointed_out(tmp_path):
    (tmp_path / "in").mkdir()
    for student in ("ana.perez", "Ana.Perez"):
        write(tmp_path / "in", student, document(student, [RIGHT["pe-doubled-index-bug"]]))
    status, printed = grade(tmp_path / "in", "--out", tmp_path / "out", "--seed", SEED, "--quiet")
    assert status == 0
    assert "Student ids that differ only in capitals (graded as different students) (1):" in (
        printed
    )
    assert "  Ana.Perez and ana.perez" in printed


def test_the_lock_file_is_readable_by_its_owner_only(graded):
    assert stat.S_IMODE((graded.out / ".course-grade.lock").stat().st_mode) == 0o600


# ----------------------------------------------------------------------------- known mistakes

SWAPPED = [math.cos(2), math.sin(2), math.cos(0.02), math.sin(0.02)]  # sine and cosine
IN_DEGREES = [math.sin(math.radians(a)) if j % 2 == 0 else math.cos(math.radians(a))
              for j, a in enumerate((2, 2, 0.02, 0.02))]  # fmt: skip


def test_a_recognised_mistake_is_named_first_in_the_verdict():
    result = evaluate("pe-worked-example", ", ".join(f"{v:.3f}" for v in SWAPPED), record=False)
    verdict = judge(list(result.checks))
    assert verdict.status == "fail"
    assert "did not pass; known mistake: sine and cosine are swapped" in verdict.message


def test_the_class_summary_counts_each_recognised_mistake_apart(tmp_path):
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    for student, value in (("ana", SWAPPED), ("ben", SWAPPED), ("cleo", IN_DEGREES)):
        answer = entry("pe-worked-example", {"value": value})
        write(inbox, student, document(student, [answer]))
    status, printed = grade(inbox, "--out", out, "--seed", SEED, "--quiet")
    assert status == 0, printed
    rows = {r["exercise_id"]: r for r in csv.DictReader(open(out / "summary.csv"))}
    row = rows["pe-worked-example"]
    assert row["failure_1_count"] == "2" and "sine and cosine are swapped" in row["failure_1"]
    assert row["failure_2_count"] == "1" and "in degrees" in row["failure_2"]
