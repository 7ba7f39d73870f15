"""Specification of which answers count (``course-grade``): every file of a student is graded,
and for each exercise the newest answer counts; files with suspicious times never win."""

from __future__ import annotations

import csv
import sqlite3
from pathlib import Path

from test_grading import (
    MODEL_ENCODING,
    SEED,
    code,
    document,
    entry,
    everything_right,
    grade,
    read_csv,
    write,
)

from course_lib.grading.gradebook import FORMAT_VERSION, Gradebook
from course_lib.grading.inputs import read_submission_file

RIGHT = {e["id"]: e for e in everything_right()}
WRONG_ENCODING = code(MODEL_ENCODING.replace("torch.sin(angle)", "torch.cos(angle)"))
WRONG_CHOICE = entry("pe-doubled-index-bug", {"choice": "a"})


def run(inbox: Path, out: Path, *more: str) -> dict[str, dict[str, str]]:
    """Grade ``inbox`` into ``out``; the rows of grades.csv."""
    status, printed = grade(inbox, "--out", out, "--seed", SEED, "--quiet", *more)
    assert status == 0, printed
    return read_csv(out / "grades.csv")


def counted(out: Path) -> dict[tuple[str, str], tuple[str, str | None]]:
    """(student, exercise): (the SHA-256 of the file the counted answer came from, its flag)."""
    db = sqlite3.connect(out / "gradebook.sqlite")
    rows = db.execute("SELECT student_id, exercise_id, sha256, flag FROM counted_answers")
    found = {(s, e): (sha, flag) for s, e, sha, flag in rows}
    db.close()
    return found


def test_answers_submitted_chapter_by_chapter_all_count(tmp_path):
    inbox = tmp_path / "in"
    inbox.mkdir()
    write(
        inbox, "ana", document("ana", [RIGHT["positional-encoding"]], "2026-11-20T10:00:00Z"), "1"
    )
    write(inbox, "ana", document("ana", [RIGHT["pe-worked-example"]], "2026-11-21T10:00:00Z"), "2")
    write(inbox, "ana", document("ana", [RIGHT["pe-offset-rotation"]], "2026-11-22T10:00:00Z"), "3")
    row = run(inbox, tmp_path / "out")["ana"]
    assert (row["positional-encoding"], row["pe-worked-example"], row["pe-offset-rotation"]) == (
        "4",
        "2",
        "3",
    )
    assert row["total"] == "9" and row["files"] == "3"
    assert "3 files combined" in row["notes"] and "superseded" not in row["notes"]


def test_an_improved_resubmission_that_omits_other_exercises_keeps_them(tmp_path):
    inbox = tmp_path / "in"
    inbox.mkdir()
    first = [WRONG_ENCODING, RIGHT["pe-doubled-index-bug"], RIGHT["pe-worked-example"]]
    write(inbox, "ana", document("ana", first, "2026-11-20T10:00:00Z"), "1")
    write(
        inbox, "ana", document("ana", [RIGHT["positional-encoding"]], "2026-11-21T10:00:00Z"), "2"
    )
    row = run(inbox, tmp_path / "out")["ana"]
    assert [
        row[e] for e in ("positional-encoding", "pe-doubled-index-bug", "pe-worked-example")
    ] == [
        "4",
        "2",
        "2",
    ]
    assert "positional-encoding: 1 answer(s) superseded by the file of 2026-11-21" in row["notes"]
    assert "positional-encoding: fail" not in row["notes"]


def test_a_newer_wrong_answer_replaces_an_older_right_one(tmp_path):
    inbox = tmp_path / "in"
    inbox.mkdir()
    write(inbox, "ana", document("ana", [RIGHT["pe-doubled-index-bug"]], "2026-11-20T10:00:00Z"))
    write(inbox, "ana", document("ana", [WRONG_CHOICE], "2026-11-21T10:00:00Z"), "2")
    assert run(inbox, tmp_path / "out")["ana"]["pe-doubled-index-bug"] == "0"


def test_files_written_at_the_same_time_are_combined_and_ties_go_to_the_larger_hash(tmp_path):
    inbox = tmp_path / "in"
    inbox.mkdir()
    paths = [
        write(inbox, "ana", document("ana", [answer, RIGHT["pe-worked-example"]]), name)
        for answer, name in ((RIGHT["pe-doubled-index-bug"], "1"), (WRONG_CHOICE, "2"))
    ]
    write(inbox, "ana", document("ana", [RIGHT["pe-offset-rotation"]]), "3")
    row = run(inbox, tmp_path / "out")["ana"]
    newest = max(paths, key=lambda p: read_submission_file(p).sha256)
    assert row["pe-doubled-index-bug"] == ("2" if newest == paths[0] else "0")
    assert (row["pe-worked-example"], row["pe-offset-rotation"]) == ("2", "3")
    again = run(inbox, tmp_path / "again")["ana"]
    assert again["pe-doubled-index-bug"] == row["pe-doubled-index-bug"]


def test_the_same_file_twice_counts_once(tmp_path):
    inbox = tmp_path / "in"
    (inbox / "copy").mkdir(parents=True)
    data = document("ana", [RIGHT["pe-doubled-index-bug"]])
    write(inbox, "ana", data)
    write(inbox / "copy", "ana", data)
    row = run(inbox, tmp_path / "out")["ana"]
    assert (row["pe-doubled-index-bug"], row["files"], row["notes"]) == ("2", "1", "")


def test_a_forged_file_from_the_future_does_not_replace_a_students_work(tmp_path):
    inbox = tmp_path / "in"
    inbox.mkdir()
    write(inbox, "ana", document("ana", everything_right(), "2026-11-20T10:00:00Z"))
    forged = document("ana", [WRONG_ENCODING, WRONG_CHOICE], "2999-01-01T00:00:00Z")
    write(inbox, "ana", forged, "29990101T000000Z")
    out = tmp_path / "out"
    row = run(inbox, out)["ana"]
    assert row["total"] == "11"
    assert "2999-01-01T00:00:00.000000Z" in row["notes"] and "is flagged" in row["notes"]
    assert "a time in the future" in row["notes"]
    assert counted(out)["ana", "positional-encoding"][1] is None


def test_a_flagged_files_answers_count_where_no_other_file_answers(tmp_path):
    inbox = tmp_path / "in"
    inbox.mkdir()
    write(inbox, "ana", document("ana", [RIGHT["pe-doubled-index-bug"]], "2026-11-20T10:00:00Z"))
    late = document("ana", [WRONG_CHOICE, RIGHT["pe-worked-example"]], "2999-01-01T00:00:00Z")
    write(inbox, "ana", late, "2")
    out = tmp_path / "out"
    row = run(inbox, out)["ana"]
    assert (row["pe-doubled-index-bug"], row["pe-worked-example"]) == ("2", "2")
    assert counted(out)["ana", "pe-worked-example"][1] == "future"
    assert "pe-worked-example: only the flagged file of 2999-01-01" in row["notes"]


def test_a_newer_file_wins_however_far_it_is_from_the_students_other_files(tmp_path):
    # Issue 28: a file's time is never judged against the others' (a rule that did so let two
    # forged files dated 2000 make a genuine newer file lose); only a future time is flagged.
    inbox = tmp_path / "in"
    inbox.mkdir()
    write(inbox, "ana", document("ana", [RIGHT["pe-doubled-index-bug"]], "2025-01-01T10:00:00Z"))
    write(inbox, "ana", document("ana", [RIGHT["pe-worked-example"]], "2025-01-02T10:00:00Z"), "2")
    write(inbox, "ana", document("ana", [WRONG_CHOICE], "2026-11-20T10:00:00Z"), "3")
    out = tmp_path / "out"
    row = run(inbox, out)["ana"]
    assert (row["pe-doubled-index-bug"], row["pe-worked-example"]) == ("0", "2")
    assert "flagged" not in row["notes"]


def test_two_files_far_apart_are_not_flagged(tmp_path):
    inbox = tmp_path / "in"
    inbox.mkdir()
    write(inbox, "ana", document("ana", [WRONG_CHOICE], "2025-01-01T10:00:00Z"))
    write(
        inbox, "ana", document("ana", [RIGHT["pe-doubled-index-bug"]], "2026-11-20T10:00:00Z"), "2"
    )
    row = run(inbox, tmp_path / "out")["ana"]
    assert row["pe-doubled-index-bug"] == "2" and "flagged" not in row["notes"]


def test_every_valid_file_of_a_student_is_graded(tmp_path):
    inbox = tmp_path / "in"
    inbox.mkdir()
    write(inbox, "ana", document("ana", [WRONG_ENCODING], "2026-11-20T10:00:00Z"))
    write(
        inbox, "ana", document("ana", [RIGHT["positional-encoding"]], "2026-11-21T10:00:00Z"), "2"
    )
    out = tmp_path / "out"
    run(inbox, out)
    db = sqlite3.connect(out / "gradebook.sqlite")
    statuses = db.execute(
        "SELECT r.status FROM results r JOIN submissions s USING (sha256) ORDER BY s.created_utc"
    ).fetchall()
    assert statuses == [("fail",), ("ok",)]


def test_the_gradebook_records_the_file_each_counted_answer_came_from(tmp_path):
    inbox = tmp_path / "in"
    inbox.mkdir()
    one = write(
        inbox, "ana", document("ana", [RIGHT["pe-doubled-index-bug"]], "2026-11-20T10:00:00Z")
    )
    two = write(
        inbox, "ana", document("ana", [RIGHT["pe-worked-example"]], "2026-11-21T10:00:00Z"), "2"
    )
    out = tmp_path / "out"
    run(inbox, out)
    found = counted(out)
    assert found["ana", "pe-doubled-index-bug"][0] == read_submission_file(one).sha256
    assert found["ana", "pe-worked-example"][0] == read_submission_file(two).sha256
    with open(out / "results.csv", newline="") as stream:
        rows = {row["exercise_id"]: row["submission"] for row in csv.DictReader(stream)}
    assert rows["pe-worked-example"] == read_submission_file(two).sha256


def test_regrading_a_student_runs_every_file_of_theirs_again(tmp_path):
    inbox = tmp_path / "in"
    inbox.mkdir()
    write(inbox, "ana", document("ana", [RIGHT["pe-doubled-index-bug"]], "2026-11-20T10:00:00Z"))
    write(inbox, "ana", document("ana", [RIGHT["pe-worked-example"]], "2026-11-21T10:00:00Z"), "2")
    write(inbox, "ben", document("ben", [WRONG_CHOICE]))
    out = tmp_path / "out"
    run(inbox, out)
    status, printed = grade("regrade", "--out", out, "ana", "--quiet")
    assert status == 0 and "Graded 2 submissions" in printed


def test_an_override_still_wins_over_the_counted_answer(tmp_path):
    inbox = tmp_path / "in"
    inbox.mkdir()
    write(inbox, "ana", document("ana", [RIGHT["pe-doubled-index-bug"]], "2026-11-20T10:00:00Z"))
    write(inbox, "ana", document("ana", [WRONG_CHOICE], "2026-11-21T10:00:00Z"), "2")
    out = tmp_path / "out"
    run(inbox, out)
    grade("override", "--out", out, "ana", "pe-doubled-index-bug", "1", "--reason", "appeal")
    assert read_csv(out / "grades.csv")["ana"]["pe-doubled-index-bug"] == "1"


FORMAT_1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE exercises (id TEXT PRIMARY KEY, chapter TEXT NOT NULL, kind TEXT NOT NULL,
    title TEXT NOT NULL, points INTEGER NOT NULL, position INTEGER NOT NULL);
CREATE TABLE students (student_id TEXT PRIMARY KEY, first_seen_utc TEXT NOT NULL);
CREATE TABLE submissions (sha256 TEXT PRIMARY KEY, student_id TEXT, created_utc TEXT,
    status TEXT NOT NULL, message TEXT NOT NULL, size INTEGER NOT NULL, content TEXT,
    added_utc TEXT NOT NULL);
CREATE TABLE submission_files (sha256 TEXT NOT NULL, path TEXT NOT NULL,
    seen_utc TEXT NOT NULL, PRIMARY KEY (sha256, path));
CREATE TABLE gradings (sha256 TEXT PRIMARY KEY, seed INTEGER NOT NULL,
    graded_utc TEXT NOT NULL, course_lib_version TEXT NOT NULL);
CREATE TABLE results (sha256 TEXT NOT NULL, exercise_id TEXT NOT NULL, status TEXT NOT NULL,
    points INTEGER NOT NULL, max_points INTEGER NOT NULL, message TEXT NOT NULL,
    checks TEXT NOT NULL, output TEXT NOT NULL, seconds REAL NOT NULL,
    PRIMARY KEY (sha256, exercise_id));
CREATE TABLE overrides (student_id TEXT NOT NULL, exercise_id TEXT NOT NULL,
    points INTEGER NOT NULL, reason TEXT NOT NULL, set_utc TEXT NOT NULL,
    PRIMARY KEY (student_id, exercise_id));
CREATE TABLE override_log (id INTEGER PRIMARY KEY, student_id TEXT NOT NULL,
    exercise_id TEXT NOT NULL, points INTEGER, reason TEXT NOT NULL, set_utc TEXT NOT NULL);
CREATE VIEW counted_submissions AS SELECT student_id, sha256, created_utc FROM submissions;
CREATE VIEW final_grades AS SELECT student_id FROM students;
INSERT INTO students VALUES ('ana', '2026-11-20T10:00:00.000000Z');
INSERT INTO exercises VALUES ('pe-doubled-index-bug', 'positional-encoding', 'choice', 'x', 2, 0);
INSERT INTO submissions VALUES ('aa', 'ana', '2026-11-20T10:00:00.000000Z', 'valid', '', 1,
    '{}', '2026-11-20T11:00:00.000000Z');
INSERT INTO gradings VALUES ('aa', 5, '2026-11-20T11:00:00.000000Z', '0.1');
INSERT INTO results VALUES ('aa', 'pe-doubled-index-bug', 'ok', 2, 2, 'the check passed', '[]',
    '', 0.0);
PRAGMA user_version = 1;
"""


def test_a_gradebook_of_format_1_opens_with_the_rules_of_this_one(tmp_path):
    path = tmp_path / "gradebook.sqlite"
    db = sqlite3.connect(path)
    db.executescript(FORMAT_1)
    db.close()
    with Gradebook(path) as book:
        (row,) = book.final_grades()
        assert (row["student_id"], row["points"], row["sha256"], row["superseded"]) == (
            "ana",
            2,
            "aa",
            0,
        )
        assert book.db.execute("PRAGMA user_version").fetchone()[0] == FORMAT_VERSION == 2
