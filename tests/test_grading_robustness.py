"""Specification of the grader's robustness (issue 16, point 5): a hostile file cannot stall
or spoil grading.

Unreadable files each get their own row and true reason; student text cannot act on the
terminal; results are committed as each submission finishes; a worker stopped with SIGSTOP is
replaced within the time limit; code that kills the grader is recorded as such on the rerun.
The helpers that write submissions and run ``course-grade`` come from ``test_grading``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_grading import (
    EXERCISES,
    SEED,
    document,
    encoding_doing,
    everything_right,
    grade,
    results,
    write,
)

from course_lib.answers.runner import descendants
from course_lib.grading.gradebook import Gradebook
from course_lib.grading.inprogress import run_is_gone
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


# ----------------------------------------------------------------------------- stopped workers

STOPPING = {
    "stops-worker": "import os, signal\nos.kill(os.getppid(), signal.SIGSTOP)",
    "stops-worker-group": "import os, signal\nos.killpg(os.getpgid(os.getppid()), signal.SIGSTOP)",
    "stops-everything": "import os, signal\nos.kill(-1, signal.SIGSTOP)",
}


@pytest.fixture(scope="module")
def stopped(tmp_path_factory) -> dict:
    """Submissions whose first code answer stops its worker, or itself; the second code
    answer is right. Graded with a time limit of 4 s per exercise."""
    root = tmp_path_factory.mktemp("stopped")
    inbox, out = root / "in", root / "out"
    inbox.mkdir()
    rest = everything_right()[1:]
    for student, body in STOPPING.items():
        write(inbox, student, document(student, [encoding_doing(body), *rest]))
    stops_itself = "import os, signal\nos.killpg(0, signal.SIGSTOP)"
    write(inbox, "stops-itself", document("stops-itself", [encoding_doing(stops_itself), *rest]))
    started = time.monotonic()
    status, printed = grade(inbox, "--out", out, "--seed", SEED, "--timeout", 4, "--jobs", 2,
                            "--quiet")  # fmt: skip
    return {"status": status, "printed": printed, "results": results(out),
            "seconds": time.monotonic() - started}  # fmt: skip


@pytest.mark.parametrize("student", STOPPING)
def test_wall_clock_a_worker_stopped_by_the_code_is_noticed_within_a_second_and_named(
    stopped, student
):
    row = stopped["results"][(student, "positional-encoding")]
    assert stopped["status"] == 0, stopped["printed"]
    assert row["status"] == "error" and row["points"] == 0
    assert "stopped the grading process that ran it" in row["message"]
    assert "SIGSTOP or another stop signal" in row["message"], row["message"]
    assert row["seconds"] < 1.0  # the time limit is 4 s


@pytest.mark.parametrize("student", STOPPING)
def test_the_other_answers_of_a_submission_that_stopped_its_worker_are_graded(stopped, student):
    graded = {e: stopped["results"][(student, e)]["status"] for e in EXERCISES[1:]}
    assert graded == dict.fromkeys(EXERCISES[1:], "ok")


def test_code_that_stops_itself_times_out_and_the_worker_goes_on(stopped):
    row = stopped["results"][("stops-itself", "positional-encoding")]
    assert row["status"] == "timeout" and "stopped after 4 s" in row["message"]
    assert stopped["results"][("stops-itself", "pe-offset-rotation")]["status"] == "ok"


# ----------------------------------------------------------------------------- killed graders


def start_grading(inbox: Path, out: Path, *options: object) -> subprocess.Popen:
    """``course-grade`` in a process of its own (so that a test can kill it), progress on
    standard error."""
    command = [sys.executable, "-m", "course_lib.grading", inbox, "--out", out, "--seed", SEED,
               "--jobs", 1, *options]  # fmt: skip
    return subprocess.Popen([str(c) for c in command], stderr=subprocess.PIPE, text=True)


def kill(grading: subprocess.Popen) -> list[int]:
    """Kill ``course-grade`` with SIGKILL, as an answer could; return the processes it had
    started (its workers), which it could not stop."""
    orphans = descendants(grading.pid)
    grading.kill()
    grading.wait()
    return orphans


def end(processes: list[int]) -> None:
    for pid in processes:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def wait_until(condition, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "waited in vain"
        time.sleep(0.05)


def marks(out: Path) -> list[tuple[str, str]]:
    """The gradebook's marks of code in progress: (sha256, exercise id)."""
    path = out / "gradebook.sqlite"
    if not path.exists():
        return []
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as db:
        with contextlib.suppress(sqlite3.OperationalError):  # no such table yet
            return db.execute("SELECT sha256, exercise_id FROM in_progress").fetchall()
    return []


def test_each_submission_is_committed_as_it_finishes_so_a_killed_run_keeps_them(tmp_path):
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    students = [f"s{i}" for i in range(8)]
    for student in students:
        write(inbox, student, document(student, everything_right()[:2]))
    grading = start_grading(inbox, out)
    line = ""
    while not line.startswith("grading 3/8"):  # a line per submission graded
        line = grading.stderr.readline()
        assert line, "course-grade ended before grading 3 submissions"
    end(kill(grading))
    graded = {student for (student, _) in results(out)}
    assert 3 <= len(graded) < len(students)
    assert len(results(out)) == 2 * len(graded)  # each graded submission has all its results


def test_wall_clock_an_answer_running_when_the_grader_was_killed_is_recorded_and_not_run_again(
    tmp_path,
):
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    write(inbox, "ana", document("ana", everything_right()))
    killer = document("killer", [encoding_doing("import time\ntime.sleep(600)"),
                                 *everything_right()[1:]])  # fmt: skip
    sha = read_submission_file(write(inbox, "killer", killer)).sha256
    grading = start_grading(inbox, out, "--quiet", "--timeout", 60)
    wait_until(lambda: (sha, "positional-encoding") in marks(out))
    orphans = kill(grading)  # as the answer could do without a sandbox
    started = time.monotonic()
    status, printed = grade(inbox, "--out", out, "--quiet")
    end(orphans)
    assert status == 0, printed
    assert time.monotonic() - started < 30  # the answer did not sleep again
    row = results(out)[("killer", "positional-encoding")]
    assert (row["status"], row["points"]) == ("error", 0)
    assert row["message"].startswith("the code killed or stopped the grader")
    assert "not run again: killer positional-encoding" in printed
    others = {e: results(out)[("killer", e)]["status"] for e in EXERCISES[1:]}
    assert others == dict.fromkeys(EXERCISES[1:], "ok")
    assert results(out)[("ana", "positional-encoding")]["status"] == "ok"
    assert marks(out) == []


def test_ctrl_c_removes_the_marks_so_the_next_run_grades_the_answers_normally(
    tmp_path, monkeypatch
):
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    for student in ("ana", "ben"):
        write(inbox, student, document(student, everything_right()[:1]))
    marked = []

    def interrupt(book, *args, **kwargs):
        marked.extend(book.running_marks())
        raise KeyboardInterrupt

    monkeypatch.setattr(Gradebook, "save_grades", interrupt)
    status, printed = grade(inbox, "--out", out, "--seed", SEED, "--quiet")
    monkeypatch.undo()
    assert status == 130 and marked, printed  # interrupted while an answer was marked
    assert marks(out) == []
    status, printed = grade(inbox, "--out", out, "--quiet")
    assert status == 0 and "not run again" not in printed
    assert {row["status"] for row in results(out).values()} == {"ok"}


def test_a_run_is_gone_when_its_process_is_gone_not_while_it_runs():
    program = "from course_lib.grading.inprogress import this_run; print(this_run(), flush=True)"
    other = subprocess.Popen([sys.executable, "-c", f"{program}; input()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    run = other.stdout.readline().strip()
    assert not run_is_gone(run)  # another grader, still running: its marks are its own
    other.communicate("")
    assert run_is_gone(run)


# ----------------------------------------------------------------------------- no sandbox

IDS = """
import os
w = os.getppid()
print("ids", os.getpid(), os.getpgid(0), os.getsid(0), w, os.getpgid(w), os.getsid(w))
"""
LEAVES_A_SLEEPER = """
import os, signal, subprocess
try:
    subprocess.Popen(["sleep", "{seconds}"])
except RuntimeError:
    pass
os.kill(os.getppid(), signal.SIGSTOP)
"""
UNSANDBOXED = {
    "ids": IDS,
    "kills-own-group": "import os, signal\nos.kill(0, signal.SIGKILL)",
    "kills-worker-group": "import os, signal\nos.killpg(os.getpgid(os.getppid()), signal.SIGKILL)",
}


@pytest.fixture(scope="module")
def unsandboxed(tmp_path_factory) -> dict:
    """Answers graded with ``--sandbox none`` (in this process: the grader is pytest)."""
    root = tmp_path_factory.mktemp("unsandboxed")
    inbox, out = root / "in", root / "out"
    inbox.mkdir()
    for student, body in UNSANDBOXED.items():
        write(inbox, student, document(student, [encoding_doing(body)]))
    seconds = f"600.{os.getpid()}{time.monotonic_ns() % 10**6}"  # a unique sleep to find
    leaves = LEAVES_A_SLEEPER.format(seconds=seconds)
    write(inbox, "stops-worker", document("stops-worker", [encoding_doing(leaves)]))
    status, printed = grade(inbox, "--out", out, "--seed", SEED, "--sandbox", "none",
                            "--jobs", 2, "--quiet")  # fmt: skip
    return {"status": status, "printed": printed, "results": results(out), "sleep": seconds}


def test_without_a_sandbox_each_worker_has_its_own_session_and_each_answer_its_own_group(
    unsandboxed,
):
    output = unsandboxed["results"][("ids", "positional-encoding")]["output"]
    child, group, session, worker, worker_group, worker_session = map(
        int, output.split("ids ")[1].split()[:6]
    )
    assert worker_session == worker_group == worker  # a session and group of its own
    assert group == child and session == worker  # the answer: its own group, in that session
    assert session != os.getsid(0) and group != os.getpgid(0)  # not the grader's


@pytest.mark.parametrize(
    ("student", "message"),
    [
        ("kills-own-group", "the process running the code ended (killed by SIGKILL)"),
        ("kills-worker-group", "the code stopped the grading process that ran it"),
    ],
)
def test_without_a_sandbox_an_answer_killing_its_group_or_its_workers_is_recorded_truly(
    unsandboxed, student, message
):
    assert unsandboxed["status"] == 0, unsandboxed["printed"]
    row = unsandboxed["results"][(student, "positional-encoding")]
    assert row["status"] == "error" and message in row["message"], row["message"]


def test_without_a_sandbox_a_stopped_worker_is_replaced_with_every_process_of_its_session(
    unsandboxed,
):
    row = unsandboxed["results"][("stops-worker", "positional-encoding")]
    assert "SIGSTOP or another stop signal" in row["message"]
    sleeping = []
    for entry in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            command = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            if command[:2] == [b"sleep", unsandboxed["sleep"].encode()]:
                sleeping.append(entry)
    assert sleeping == []
