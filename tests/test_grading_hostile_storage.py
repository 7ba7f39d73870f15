"""Specification of what grading stores and writes when students are hostile: nothing an answer
returns or prints can stop grading or bloat its files, a submission whose results cannot be
stored is that student's error, ids match their rule over the whole text, a forged time cannot
win, and no CSV cell runs as a formula.

These tests grade choice and value answers (no code runs) or call the gradebook directly, so
they check the storage side without the sandbox.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import sqlite3
from pathlib import Path

import jsonschema
import pytest
from test_grading import document, entry, grade, read_csv, results, write

from course_lib.answers import Check, Outcome
from course_lib.exercises import SubmissionError, get_exercise
from course_lib.exercises import submission as submission_module
from course_lib.grading import batch as batch_module
from course_lib.grading.gradebook import MAX_CHECKS, Gradebook
from course_lib.grading.grader import Grade, Grader
from course_lib.grading.inputs import SubmissionFile, read_submission_file
from course_lib.grading.report import write_reports
from course_lib.grading.text import (
    CHECK_MESSAGE_LIMIT,
    MESSAGE_LIMIT,
    OUTPUT_LIMIT,
    csv_text,
    inert,
    storable,
    terminal_safe,
)

SEED = 918_273
EVIL = "evil" + chr(0xD800)
CALC = "\r=cmd|' /C calc'!A0\r"  # the cell of issue 28
# Choice exercises worth 7 points together (2 + 2 + 2 + 1).
SEVEN = ("glance-architecture", "pe-doubled-index-bug", "teacher-forcing", "aas-flash-saves")


def right(exercise_id: str) -> dict:
    return entry(exercise_id, {"choice": get_exercise(exercise_id).answer})


def wrong(exercise_id: str) -> dict:
    exercise = get_exercise(exercise_id)
    other = next(key for key in exercise.keys() if key != exercise.answer)
    return entry(exercise_id, {"choice": other})


def run(inbox: Path, out: Path) -> tuple[int, str]:
    return grade(inbox, "--out", out, "--seed", SEED, "--quiet")


def gradebook_with_a_file(path: Path, sha: str = "a" * 64, student: str = "ana") -> Gradebook:
    """A gradebook holding one valid file of ``student`` (results need their submission)."""
    book = Gradebook(path)
    book.add_file(SubmissionFile(f"/in/{student}.json", sha, 10, True, "", student,
                                 "2026-11-20T10:00:00.000000Z", "{}"))  # fmt: skip
    return book


def stored(book: Gradebook, sha: str = "a" * 64) -> sqlite3.Row:
    return book.db.execute("SELECT * FROM results WHERE sha256 = ?", (sha,)).fetchone()


# ----------------------------------------------------------------------------- storing text


def test_a_message_with_a_lone_surrogate_is_saved_escaped_instead_of_stopping_grading(tmp_path):
    # Before issue 28: UnicodeEncodeError ... surrogates not allowed, in save_grades.
    with gradebook_with_a_file(tmp_path / "g.sqlite") as book:
        checks = (Check("case", "fail", f"expected a tensor, got {EVIL}"),)
        book.save_grades("a" * 64, [Grade("positional-encoding", "fail", 0, 4, f"got {EVIL}",
                                          checks, f"printed {EVIL}")], SEED)  # fmt: skip
        row = stored(book)
    assert row["message"] == "got evil\\ud800"
    assert json.loads(row["checks"])[0]["message"] == "expected a tensor, got evil\\ud800"
    assert row["output"] == "printed evil\\ud800"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (EVIL, "evil\\ud800"),
        ("a\x00b", "a\\x00b"),
        ("a\x1b[2Jb", "a\\x1b[2Jb"),
        ("a\x7fb\x85c", "a\\x7fb\\x85c"),
        ("a\u202eb\u2066c", "a\\u202eb\\u2066c"),
        ("a\u2028b", "a\\u2028b"),
        ("one\ntwo\tthree\r", "one\\ntwo\\tthree\\r"),
    ],
)
def test_storable_text_has_every_control_character_and_surrogate_escaped(text, kept):
    assert storable(text) == kept
    storable(text).encode("utf-8")  # SQLite, CSV and HTML take it


def test_storable_text_of_several_lines_keeps_line_feeds_and_tabs_and_turns_returns_into_them():
    assert storable("a\tb\nc\r\nd\re\x00", lines=True) == "a\tb\nc\nd\ne\\x00"


def test_storable_text_longer_than_its_limit_is_cut_with_a_note_of_how_much_was_cut():
    cut = storable("x" * 5000, 100)
    assert len(cut) <= 100 and cut.startswith("xxx")
    kept = len(cut) - len(" ... [NNNN more characters cut]")
    assert cut.endswith(f" ... [{5000 - kept} more characters cut]")
    assert storable("x" * 100, 100) == "x" * 100


def test_escapes_count_towards_the_limit_and_are_never_cut_in_half():
    cut = storable("\x00" * 5000, 100)
    assert len(cut) <= 100
    assert re.fullmatch(r"(\\x00)+ \.\.\. \[\d+ more characters cut\]", cut)


def test_forged_megabytes_of_messages_and_output_make_a_small_gradebook(tmp_path):
    huge = "A" * 32 * 2**20
    with gradebook_with_a_file(tmp_path / "g.sqlite") as book:
        checks = tuple(Check(f"case {i}", "fail", huge) for i in range(3))
        book.save_grades("a" * 64, [Grade("positional-encoding", "fail", 0, 4, huge, checks,
                                          huge)], SEED)  # fmt: skip
        row = stored(book)
        assert len(row["message"]) <= MESSAGE_LIMIT and "more characters cut" in row["message"]
        assert len(row["output"]) <= OUTPUT_LIMIT
        messages = [c["message"] for c in json.loads(row["checks"])]
        assert all(len(m) <= CHECK_MESSAGE_LIMIT for m in messages)
    assert (tmp_path / "g.sqlite").stat().st_size < 2**20


def test_more_checks_than_are_kept_end_in_one_entry_counting_the_rest(tmp_path):
    checks = tuple(Check(f"case {i}", "pass" if i < 250 else "fail", "m") for i in range(300))
    with gradebook_with_a_file(tmp_path / "g.sqlite") as book:
        book.save_grades("a" * 64, [Grade("positional-encoding", "fail", 0, 4, "x", checks)], SEED)
        kept = json.loads(stored(book)["checks"])
    assert len(kept) == MAX_CHECKS
    assert kept[-1] == {
        "name": "(more checks)",
        "status": "fail",
        "message": f"{300 - MAX_CHECKS + 1} more checks were not stored (50 of them did not pass)",
    }


def test_a_time_that_is_not_a_finite_number_is_stored_as_zero_seconds(tmp_path):
    with gradebook_with_a_file(tmp_path / "g.sqlite") as book:
        book.save_grades("a" * 64, [Grade("positional-encoding", "ok", 4, 4, "x",
                                          seconds=float("nan"))], SEED)  # fmt: skip
        assert stored(book)["seconds"] == 0.0


def test_a_file_name_that_is_not_utf8_is_recorded_and_printed_escaped(tmp_path):
    inbox = tmp_path / "in"
    inbox.mkdir()
    name = os.fsdecode(b"submission-\xff\x1b[2J.json")  # holds a surrogate: '\udcff'
    (inbox / name).write_bytes(b"not json")
    status, printed = run(inbox, tmp_path / "out")
    assert status == 0, printed
    assert "\\udcff\\x1b[2J.json" in printed and "\x1b" not in printed
    db = sqlite3.connect(tmp_path / "out" / "gradebook.sqlite")
    (path,) = db.execute("SELECT path FROM submission_files").fetchone()
    db.close()
    assert path.endswith("submission-\\udcff\\x1b[2J.json")


def test_terminal_safe_text_has_surrogates_escaped():
    assert terminal_safe(EVIL) == "evil\\ud800"


def test_an_answer_whose_message_holds_a_surrogate_is_graded_and_every_report_written(
    tmp_path, monkeypatch
):
    """A grade holding what an answer made (its messages, its result's type name) reaches the
    gradebook, the CSV files and the feedback pages; the run ends with status 0."""
    judged = Grader.grade_answer

    def hostile(self, exercise, answer):
        found = judged(self, exercise, answer)
        return Grade(found.exercise_id, found.status, found.points, found.max_points,
                     f"{EVIL}\x00{CALC}", (Check(EVIL, "pass", EVIL),), EVIL)  # fmt: skip

    monkeypatch.setattr(Grader, "grade_answer", hostile)
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    write(inbox, "ana", document("ana", [right("pe-doubled-index-bug")]))
    write(inbox, "ben", document("ben", [right("pe-doubled-index-bug")]))
    status, printed = run(inbox, out)
    assert status == 0, printed
    rows = read_csv(out / "grades.csv")
    assert rows["ana"]["pe-doubled-index-bug"] == rows["ben"]["pe-doubled-index-bug"] == "2"
    results = list(csv.DictReader(open(out / "results.csv", newline="", encoding="utf-8")))
    assert [r["message"] for r in results] == ["evil\\ud800\\x00\n=cmd|' /C calc'!A0\n"] * 2
    page = (out / "feedback" / "ana.html").read_text(encoding="utf-8")
    assert "evil\\ud800" in page


# ----------------------------------------------------------------------------- failing to store


def fail_for(student: str, monkeypatch, *, every_time: bool = False) -> None:
    """Make saving the results of ``student``'s submission fail (the first time only, or
    every time)."""
    save = Gradebook.save_grades
    failed = []

    def saving(self, sha256, grades, seed):
        grades = list(grades)
        if self.file_of(sha256)[0] == student and (every_time or not failed):
            failed.append(sha256)
            raise sqlite3.OperationalError(f"cannot store {EVIL}")
        return save(self, sha256, grades, seed)

    monkeypatch.setattr(Gradebook, "save_grades", saving)


def graded_class(tmp_path: Path) -> tuple[Path, Path, Path]:
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    write(inbox, "ana", document("ana", [right("pe-doubled-index-bug")]))
    victim = write(inbox, "ben", document("ben", [right("pe-doubled-index-bug")]))
    write(inbox, "cleo", document("cleo", [right("pe-doubled-index-bug")]))
    return inbox, out, victim


def test_results_that_cannot_be_stored_are_that_students_error_naming_the_file(
    tmp_path, monkeypatch
):
    inbox, out, victim = graded_class(tmp_path)
    fail_for("ben", monkeypatch)
    status, printed = run(inbox, out)
    assert status == 0, printed
    rows = read_csv(out / "grades.csv")
    assert rows["ana"]["pe-doubled-index-bug"] == rows["cleo"]["pe-doubled-index-bug"] == "2"
    assert rows["ben"]["pe-doubled-index-bug"] == "0"
    assert "pe-doubled-index-bug: error" in rows["ben"]["notes"]
    rows = {r["student_id"]: r for r in csv.DictReader(open(out / "results.csv", newline=""))}
    message = rows["ben"]["message"]
    assert rows["ben"]["status"] == "error"
    assert f"the results of {victim} (student ben) could not be stored" in message
    assert "OperationalError: cannot store evil\\ud800" in message


def test_a_line_naming_the_file_is_printed_when_results_cannot_be_stored(tmp_path, monkeypatch):
    inbox, out, victim = graded_class(tmp_path)
    fail_for("ben", monkeypatch)
    _, printed = run(inbox, out)
    assert f"course-grade: the results of {victim} (student ben) could not be stored" in printed
    assert "1 submission whose results could not be stored:" in printed
    assert EVIL not in printed


def test_every_report_is_written_for_everyone_when_one_students_results_cannot_be_stored(
    tmp_path, monkeypatch
):
    inbox, out, _ = graded_class(tmp_path)
    fail_for("ben", monkeypatch)
    run(inbox, out)
    for name in ("grades.csv", "results.csv", "summary.csv", "canvas.csv", "moodle.csv"):
        assert (out / name).exists(), name
    assert sorted(p.name for p in (out / "feedback").iterdir()) == [
        "ana.html",
        "ben.html",
        "cleo.html",
    ]


def test_results_that_cannot_be_stored_even_as_an_error_are_graded_by_the_next_run(
    tmp_path, monkeypatch
):
    inbox, out, victim = graded_class(tmp_path)
    with monkeypatch.context() as patch:
        fail_for("ben", patch, every_time=True)
        status, printed = run(inbox, out)
    assert status == 0, printed
    assert "nor an error in their place" in printed and str(victim) in printed
    assert read_csv(out / "grades.csv")["ben"]["notes"] == "not graded yet"
    status, printed = run(inbox, out)
    assert status == 0 and read_csv(out / "grades.csv")["ben"]["pe-doubled-index-bug"] == "2"


def test_a_result_the_grader_cannot_judge_is_that_submissions_error(tmp_path, monkeypatch):
    class Pool:  # hands every code answer an outcome at once, running nothing
        def __init__(self, sandbox, workers):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

        def run(self, work, done, starting):
            for job in work:
                done(job, [Outcome("done") for _ in job.tasks])

    def interpret(self, exercise, outcome):
        raise TypeError(f"cannot judge {EVIL}")

    monkeypatch.setattr(batch_module, "WorkerPool", Pool)
    monkeypatch.setattr(Grader, "interpret", interpret)
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    source = "def positional_encoding(max_len, d_model):\n    return None\n"
    code = entry("positional-encoding", {"function": "positional_encoding", "source": source})
    write(inbox, "ana", document("ana", [code, right("pe-doubled-index-bug")]))
    status, printed = grade(inbox, "--out", out, "--seed", SEED, "--quiet", "--sandbox", "none")
    assert status == 0, printed
    found = results(out)
    assert found["ana", "pe-doubled-index-bug"]["status"] == "ok"
    assert found["ana", "positional-encoding"]["status"] == "error"
    assert found["ana", "positional-encoding"]["message"].startswith(
        "the grader could not judge what the code returned (TypeError: cannot judge evil\\ud800"
    )


# ----------------------------------------------------------------------------- student ids


def test_a_file_whose_student_id_ends_in_a_line_feed_is_invalid_with_a_clear_reason(tmp_path):
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(document("tam.victim\n", [right("pe-doubled-index-bug")])))
    record = read_submission_file(path)
    assert not record.valid and record.student_id is None
    assert "student_id 'tam.victim\\n' contains control characters ['\\n']" in record.message


def test_an_id_with_a_trailing_line_feed_gives_no_second_student_row_and_no_page(tmp_path):
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    write(inbox, "tam.victim", document("tam.victim", [right("pe-doubled-index-bug")]))
    (inbox / "forged.json").write_text(
        json.dumps(document("tam.victim\n", [wrong("pe-doubled-index-bug")]))
    )
    status, printed = run(inbox, out)
    assert status == 0, printed
    assert list(read_csv(out / "grades.csv")) == ["tam.victim"]
    assert [p.name for p in (out / "feedback").iterdir()] == ["tam.victim.html"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("student_id", "tam.victim\n"),
        ("created_utc", "2026-11-20T10:00:00Z\n"),
        ("sha256", "a" * 64 + "\n"),
    ],
)
def test_the_schema_patterns_hold_over_the_whole_text(field, value):
    data = document("ana", [right("pe-doubled-index-bug")])
    data[field] = value
    errors = list(jsonschema.Draft202012Validator(submission_module.schema()).iter_errors(data))
    assert any(list(e.absolute_path) == [field] for e in errors), errors


def test_the_schema_pattern_of_an_exercise_id_holds_over_the_whole_text():
    data = document("ana", [{**right("pe-doubled-index-bug"), "id": "pe-doubled-index-bug\n"}])
    errors = list(jsonschema.Draft202012Validator(submission_module.schema()).iter_errors(data))
    assert any(list(e.absolute_path) == ["exercises", 0, "id"] for e in errors), errors


def test_validating_a_student_id_refuses_a_trailing_line_feed():
    with pytest.raises(SubmissionError, match="contains control characters"):
        submission_module.validate_student_id("tam.victim\n")
    assert submission_module.STUDENT_ID.fullmatch("tam.victim\n") is None


def test_a_file_name_with_a_trailing_line_feed_names_no_student(tmp_path):
    path = tmp_path / "submission-tam.victim-20261120T100000Z.json\n"
    path.write_bytes(b"not json")
    assert read_submission_file(path).student_id is None


@pytest.mark.parametrize("created", ["9999-99-99T00:00:00Z", "2026-02-30T10:00:00Z"])
def test_a_file_whose_time_is_no_real_date_is_invalid(tmp_path, created):
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(document("ana", [right("pe-doubled-index-bug")], created)))
    record = read_submission_file(path)
    assert not record.valid and "created_utc is not a real date and time" in record.message


# ----------------------------------------------------------------------------- times


def test_forged_files_dated_in_the_past_never_beat_a_students_genuine_newer_file(tmp_path):
    """Issue 28: two forged files of 2000-01-01 and 2000-01-02 beside today's genuine one made
    the genuine one "out of line" and the forged wrong answers counted (0 instead of 7)."""
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    today = "2026-11-20T10:00:00Z"
    write(inbox, "ana", document("ana", [right(e) for e in SEVEN], today), "1")
    for day, name in (("2000-01-01T00:00:00Z", "2"), ("2000-01-02T00:00:00Z", "3")):
        write(inbox, "ana", document("ana", [wrong(e) for e in SEVEN], day), name)
    status, printed = run(inbox, out)
    assert status == 0, printed
    row = read_csv(out / "grades.csv")["ana"]
    assert [row[e] for e in SEVEN] == ["2", "2", "2", "1"] and row["total"] == "7"
    assert "flagged" not in row["notes"] and row["submitted_utc"].startswith("2026-11-20")


def test_a_files_flag_depends_on_that_file_alone(tmp_path):
    def flags(book: Gradebook) -> dict[str, str | None]:
        return {r["created_utc"][:10]: r["flag"] for r in book.flags()}

    with Gradebook(tmp_path / "g.sqlite") as book:
        for n, created in enumerate(["2026-11-18", "2026-11-19", "2026-11-20"]):
            book.add_file(SubmissionFile(f"/in/{n}", f"{n}" * 64, 1, True, "", "ana",
                                         f"{created}T10:00:00.000000Z", "{}"))  # fmt: skip
        before = flags(book)
        for n, created in enumerate(["2000-01-01", "2000-01-02", "2999-01-01"], start=3):
            book.add_file(SubmissionFile(f"/in/{n}", f"{n}" * 64, 1, True, "", "ana",
                                         f"{created}T10:00:00.000000Z", "{}"))  # fmt: skip
        after = flags(book)
    assert before == {"2026-11-18": None, "2026-11-19": None, "2026-11-20": None}
    assert after == {**before, "2000-01-01": None, "2000-01-02": None, "2999-01-01": "future"}


def test_a_file_dated_in_the_future_is_flagged_and_loses_to_an_older_genuine_file(tmp_path):
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    write(inbox, "ana", document("ana", [right(e) for e in SEVEN], "2026-11-20T10:00:00Z"), "1")
    write(inbox, "ana", document("ana", [wrong(e) for e in SEVEN], "2999-01-01T00:00:00Z"), "2")
    status, printed = run(inbox, out)
    assert status == 0, printed
    row = read_csv(out / "grades.csv")["ana"]
    assert row["total"] == "7"
    assert "2999-01-01T00:00:00.000000Z" in row["notes"] and "a time in the future" in row["notes"]


def test_a_file_minutes_ahead_of_the_grader_is_not_flagged_but_one_beyond_is(tmp_path):
    with Gradebook(tmp_path / "g.sqlite") as book:
        for n, created in enumerate(["2026-11-20T10:09:00", "2026-11-20T10:11:00"]):
            book.add_file(SubmissionFile(f"/in/{n}", f"{n}" * 64, 1, True, "", "ana",
                                         f"{created}.000000Z", "{}"))  # fmt: skip
        book.db.execute("UPDATE submissions SET added_utc = '2026-11-20T10:00:00.000000Z'")
        assert [r["flag"] for r in book.flags()] == [None, "future"]


def test_a_stored_time_sqlite_cannot_read_as_a_date_is_flagged(tmp_path):
    # Files read now cannot have one (they are invalid); a gradebook from before may.
    with Gradebook(tmp_path / "g.sqlite") as book:
        book.add_file(SubmissionFile("/in/x", "x" * 64, 1, True, "", "ana",
                                     "9999-99-99T00:00:00.000000Z", "{}"))  # fmt: skip
        assert [r["flag"] for r in book.flags()] == ["future"]


# ----------------------------------------------------------------------------- CSV


def read_back(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def test_the_carriage_return_formula_of_issue_28_reads_back_quoted_and_inert():
    text = csv_text([["a", CALC, "b"]])
    (row,) = read_back(text)
    assert row[0] == "a" and row[2] == "b"
    assert not row[1].strip().startswith("=") and row[1].startswith("'")
    assert text.startswith('a,"') and "\r" not in text


@pytest.mark.parametrize(
    "cell", [" =1+1", "\n=1+1", "\r\n@SUM(A1)", "  \t -2+3", "\u200b=1", "＝1", " + 1"]
)
def test_a_formula_after_leading_whitespace_or_a_line_break_is_made_inert(cell):
    assert inert(cell) == "'" + cell
    (row,) = read_back(csv_text([[cell]]))
    assert row[0].startswith("'")


@pytest.mark.parametrize("cell", ["one\ntwo", "one\ttwo", "one\rtwo", 'say "hi"', "a,b"])
def test_a_cell_with_a_line_break_a_tab_a_quote_or_a_comma_is_quoted(cell):
    text = csv_text([[cell, "x"]])
    assert text.startswith('"')
    assert read_back(text) == [[storable(cell, lines=True), "x"]]


def test_ordinary_cells_and_numbers_are_written_as_they_are():
    assert csv_text([["ana.perez", 4, None, "1+1", "a b"]]) == "ana.perez,4,,1+1,a b\n"


def test_every_csv_file_the_grader_writes_has_no_live_formula_and_no_raw_carriage_return(
    tmp_path,
):
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    write(inbox, "ana", document("ana", [right("pe-doubled-index-bug")]))
    folder = inbox / "\r=HYPERLINK(1)\r"  # bob's only file is bad: its path is in his notes
    folder.mkdir()
    write(folder, "bob", b"not json")
    status, printed = run(inbox, out)
    assert status == 0, printed
    status, printed = grade(
        "override", "--out", out, "ana", "pe-doubled-index-bug", "1", "--reason", CALC
    )
    assert status == 0, printed
    files = sorted(out.glob("*.csv"))
    assert [p.name for p in files] == [
        "canvas.csv",
        "grades.csv",
        "moodle.csv",
        "results.csv",
        "similar.csv",
        "summary.csv",
    ]
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert "\r" not in text, path
        for row in read_back(text):
            for cell in row:
                assert not re.match(r"[\s\u200b]*[=+\-@]", cell), (path, cell)
    rows = {r["student_id"]: r for r in csv.DictReader(open(out / "results.csv", newline=""))}
    assert rows["ana"]["override_reason"] == "'=cmd|' /C calc'!A0"  # the reason is stripped
    assert "\\r=HYPERLINK(1)\\r/submission-bob" in read_csv(out / "grades.csv")["bob"]["notes"]


def test_an_override_reason_with_a_surrogate_is_stored(tmp_path):
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    write(inbox, "ana", document("ana", [right("pe-doubled-index-bug")]))
    run(inbox, out)
    status, printed = grade(
        "override", "--out", out, "ana", "pe-doubled-index-bug", "1", "--reason", EVIL
    )
    assert status == 0, printed
    with Gradebook(out / "gradebook.sqlite") as book:
        assert book.override("ana", "pe-doubled-index-bug")["reason"] == "evil\\ud800"
        write_reports(book, out)
