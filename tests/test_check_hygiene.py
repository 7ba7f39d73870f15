"""A student's check cannot hurt the notebook: output is capped however it is written, every
process an answer starts ends with the check, and the progress folder failing loses nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from course_lib.exercises import _store, check, evaluate, hint, progress, progress_file
from solutions import SOLUTIONS

model_encoding = SOLUTIONS["positional-encoding"]  # carried with the answers below
ROOT = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- output


def floods_the_file_descriptors(max_len, d_model):
    if max_len == 3:  # the first case only: the limit on files counts all cases together
        os.write(1, b"y" * 5 * 2**20)
        os.write(2, b"z" * 2**20)
        for _ in range(3):
            os.write(1, b"w" * 2**20)
    return model_encoding(max_len, d_model)


def test_output_written_straight_to_the_file_descriptors_is_capped_like_print(capfd):
    result = evaluate("positional-encoding", floods_the_file_descriptors)
    printed = capfd.readouterr()
    assert result.passed, str(result)
    assert len(printed.out) + len(printed.err) < 2_000  # nothing reached the notebook's cell
    assert result.output.startswith("y" * 1000)
    assert "more bytes not shown" in result.output and len(result.output) < 20_000


def writes_a_file_past_the_limit(max_len, d_model):
    with open("big", "wb") as big:
        big.write(b"0" * 2**25)
    return model_encoding(max_len, d_model)


def test_a_file_past_the_size_limit_is_an_error_as_in_grading():
    result = evaluate("positional-encoding", writes_a_file_past_the_limit)
    assert result.checks[1].status == "error"
    assert "File too large" in result.checks[1].message


# ----------------------------------------------------------------------------- processes


STARTS_A_PROCESS = {
    "fork": "import os\nos.fork()",
    "subprocess": "import subprocess\nsubprocess.run(['true'])",
    "system": "import os\nos.system('true')",
    "posix_spawn": "import os\nos.posix_spawn('/bin/true', ['true'], {})",
    "exec": "import os\nos.execv('/bin/true', ['true'])",
}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="seccomp is Linux's")
@pytest.mark.parametrize("route", STARTS_A_PROCESS)
def test_an_answer_cannot_start_a_process_in_its_check(route):
    body = "\n    ".join(STARTS_A_PROCESS[route].splitlines())
    source = f"def positional_encoding(max_len, d_model):\n    {body}\n"
    answer = {"function": "positional_encoding", "source": source}
    from course_lib.answers.judging import run_locally
    from course_lib.exercises import get_exercise

    exercise = get_exercise("positional-encoding")
    verdict = run_locally(exercise, answer, seed=exercise.seed, timeout=exercise.timeout)
    assert verdict.status == "error"
    assert "checks and grading do not allow" in verdict.checks[1].message
    assert "process" in verdict.checks[1].message or "program" in verdict.checks[1].message


def uses_threads(max_len, d_model):
    import threading

    found = []
    worker = threading.Thread(target=lambda: found.append(model_encoding(max_len, d_model)))
    worker.start()
    worker.join()
    return found[0]


def test_an_answer_may_still_start_threads():
    assert evaluate("positional-encoding", uses_threads).passed


def test_a_check_leaves_no_scratch_folder_behind(tmp_path, monkeypatch):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    evaluate("positional-encoding", floods_the_file_descriptors)
    assert list(scratch.iterdir()) == []


# ----------------------------------------------------------------------------- progress folder


def test_a_progress_folder_that_cannot_be_made_warns_and_still_shows_the_result(
    tmp_path, monkeypatch, capsys
):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("COURSE_LIB_HOME", str(blocker / "progress"))
    with pytest.warns(RuntimeWarning, match="your progress could not be saved in"):
        result = check("positional-encoding", model_encoding)
    assert result.passed
    assert "positional-encoding: passed" in capsys.readouterr().out
    assert progress().score == 0  # nothing was saved, and reading says so quietly


@pytest.mark.parametrize(
    "error",
    [OSError(30, "Read-only file system"), OSError(28, "No space left on device")],
    ids=["read-only", "full"],
)
def test_a_read_only_or_full_progress_folder_warns_with_what_to_do(error, monkeypatch):
    def refuse(*args, **kwargs):
        raise error

    monkeypatch.setattr(_store.tempfile, "mkstemp", refuse)
    with pytest.warns(RuntimeWarning, match="COURSE_LIB_HOME") as caught:
        result = evaluate("pe-doubled-index-bug", "b")
    assert result.passed
    assert error.strerror in str(caught[0].message)


def test_a_hint_is_shown_when_the_progress_folder_cannot_be_written(monkeypatch):
    monkeypatch.setattr(_store, "_write", lambda *args: (_ for _ in ()).throw(OSError(28, "full")))
    with pytest.warns(RuntimeWarning, match="could not be saved"):
        shown = hint("positional-encoding")
    assert shown.shown == 1


def test_an_interrupted_write_leaves_no_temporary_file(course_lib_home, monkeypatch):
    evaluate("pe-doubled-index-bug", "b")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(_store.json, "dump", interrupted)
    with pytest.raises(KeyboardInterrupt):
        evaluate("pe-doubled-index-bug", "a")
    assert sorted(p.name for p in course_lib_home.iterdir()) == ["progress.json", "progress.lock"]


WRITER = """
import json, time
from course_lib.exercises import _store, evaluate
real_dump = json.dump
def slow_dump(*args, **kwargs):
    print("writing", flush=True)
    time.sleep(60)
_store.json.dump = slow_dump
evaluate("pe-doubled-index-bug", "b")
"""


def test_a_temporary_file_of_a_writer_killed_mid_write_is_removed_by_the_next_write(
    course_lib_home,
):
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert writer.stdout.readline() == "writing\n"
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    assert list(course_lib_home.glob(".progress-*.tmp"))
    evaluate("pe-doubled-index-bug", "b")
    assert not list(course_lib_home.glob(".progress-*.tmp"))
    assert json.loads(progress_file().read_text())["exercises"]["pe-doubled-index-bug"]


def test_the_blocks_and_limits_of_a_check_stay_in_its_child_process():
    evaluate("positional-encoding", floods_the_file_descriptors)
    assert torch.get_num_threads() >= 1 and "course_lib.positional" in sys.modules
    import resource

    assert resource.getrlimit(resource.RLIMIT_FSIZE)[0] == resource.RLIM_INFINITY
