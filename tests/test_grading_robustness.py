"""Specification of the grader's robustness (issue 16, point 5): a hostile file cannot stall
or spoil grading.

Unreadable files each get their own row and true reason; student text cannot act on the
terminal; results are committed as each submission finishes; a worker stopped with SIGSTOP is
replaced within the time limit; code that kills the grader is recorded as such on the rerun.
The helpers that write submissions and run ``course-grade`` come from ``test_grading``.
"""

from __future__ import annotations

import os
import socket
import sqlite3
from pathlib import Path

import pytest
from test_grading import SEED, document, everything_right, grade, write

from course_lib.grading.inputs import read_submission_file
from course_lib.grading.text import terminal_safe

# ----------------------------------------------------------------------------- unreadable files


def make_fifo(folder: Path) -> Path:
    path = folder / "fifo.json"
    os.mkfifo(path)
    return path


def make_empty(folder: Path) -> Path:
    path = folder / "submission-ana-20261120T100000Z.json"
    path.write_bytes(b"")
    return path


def make_dangling_link(folder: Path) -> Path:
    path = folder / "dangling.json"
    path.symlink_to(folder / "gone.json")
    return path


def make_device_link(folder: Path) -> Path:
    path = folder / "device.json"
    path.symlink_to(os.devnull)
    return path


def make_socket(folder: Path) -> Path:
    path = folder / "socket.json"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.close()  # the socket file stays
    return path


def make_link_loop(folder: Path) -> Path:
    path = folder / "loop.json"
    path.symlink_to(path)
    return path


UNREADABLE = {
    "fifo": (make_fifo, "a FIFO (named pipe), not a regular file"),
    "empty": (make_empty, "an empty file (0 bytes)"),
    "dangling-link": (make_dangling_link, "a link to a missing file ("),
    "device": (make_device_link, "a character device, not a regular file"),
    "socket": (make_socket, "a socket, not a regular file"),
    "link-loop": (make_link_loop, "a link that leads back to itself"),
}


@pytest.mark.parametrize("kind", UNREADABLE)
def test_an_unreadable_file_is_invalid_with_its_true_reason(tmp_path, kind):
    make, reason = UNREADABLE[kind]
    record = read_submission_file(make(tmp_path))
    assert not record.valid and record.size == 0
    assert reason in record.message, record.message


def test_a_file_that_cannot_be_opened_says_permission_denied(tmp_path, monkeypatch):
    path = tmp_path / "secret.json"
    path.write_text("{}")

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "open", refuse)  # root may open anything: refuse as a file would
    record = read_submission_file(path)
    assert not record.valid and "permission denied" in record.message


def test_an_unreadable_file_named_for_a_student_is_that_students_invalid_file(tmp_path):
    path = tmp_path / "submission-ana-20261120T100000Z.json"
    os.mkfifo(path)
    assert read_submission_file(path).student_id == "ana"


def test_every_unreadable_file_gets_its_own_gradebook_row_and_reading_again_adds_none(tmp_path):
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    for make, _ in UNREADABLE.values():
        make(inbox)
    (inbox / "empty-too.json").write_bytes(b"")
    assert grade(inbox, "--out", out, "--seed", SEED, "--quiet")[0] == 0
    db = sqlite3.connect(out / "gradebook.sqlite")
    rows = db.execute(
        "SELECT f.path, s.message FROM submissions s JOIN submission_files f USING (sha256)"
    ).fetchall()
    assert len(rows) == len(UNREADABLE) + 1
    assert len({sha for (sha,) in db.execute("SELECT sha256 FROM submissions")}) == len(rows)
    for path, message in rows:
        assert message.startswith(f"{path}: not read: ")
    status, printed = grade(inbox, "--out", out, "--quiet")
    assert status == 0 and "(0 new)" in printed
    assert db.execute("SELECT COUNT(*) FROM submissions").fetchone()[0] == len(rows)
    db.close()


# ----------------------------------------------------------------------------- the terminal

UNSAFE_TEXT = {
    "escape sequence": ("clear\x1b[2J\x1b]52;c;aGk=\x07", "clear\\x1b[2J\\x1b]52;c;aGk=\\x07"),
    "carriage return": ("ok\rforged", "ok\\rforged"),
    "line feed": ("one\nGraded 0", "one\\nGraded 0"),
    "C1 control": ("csi\x9b2J", "csi\\x9b2J"),
    "delete": ("del\x7f", "del\\x7f"),
    "bidi override": ("txt.\u202egnp", "txt.\\u202egnp"),
    "bidi isolate": ("a\u2066b\u2069", "a\\u2066b\\u2069"),
}


@pytest.mark.parametrize("case", UNSAFE_TEXT)
def test_terminal_safe_shows_control_characters_escaped(case):
    text, shown = UNSAFE_TEXT[case]
    assert terminal_safe(text) == shown


def test_terminal_safe_keeps_ordinary_text_and_other_scripts_as_they_are():
    text = "ana.pérez: 'torch_version' is a required property — 名前 ñ \\x1b"
    assert terminal_safe(text) == text


def test_a_file_name_with_escape_sequences_is_printed_escaped(tmp_path):
    inbox = tmp_path / "in"
    inbox.mkdir()
    (inbox / "bad\x1b[2J\x1b]0;owned\x07\r\u202e.json").write_bytes(b"not json")
    status, printed = grade(inbox, "--out", tmp_path / "out", "--seed", SEED, "--quiet")
    assert status == 0
    assert "bad\\x1b[2J\\x1b]0;owned\\x07\\r\\u202e.json" in printed
    assert not {"\x1b", "\x07", "\r", "\u202e"} & set(printed)


def test_an_override_reason_is_echoed_escaped(tmp_path):
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    write(inbox, "ana", document("ana", everything_right()[1:3]))
    grade(inbox, "--out", out, "--seed", SEED, "--quiet")
    reason = "appeal\x1b[31m accepted"
    status, printed = grade("override", "--out", out, "ana", "pe-worked-example", "1",
                            "--reason", reason)  # fmt: skip
    assert status == 0 and "appeal\\x1b[31m accepted" in printed and "\x1b" not in printed
