"""Specification of answer isolation (issue 28): one answer, one clean process.

Each answer runs in processes forked from a fork server that never reads an answer, its
inputs or its results; a hidden case runs in a process of its own; results cross as bounded
messages; the process running an answer can neither start another nor reach the
interpreter's objects behind its back. The attacks below are the ones a hostile class tried:
each runs in ``course-grade`` (bubblewrap, one worker, so that every answer runs after the
others in the same fork server) and, where it concerns the student's own check, in ``check``.
"""

from __future__ import annotations

import os
import secrets
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from test_grading import (
    MODEL_ENCODING,
    SEED,
    code,
    document,
    encoding_doing,
    grade,
    results,
    write,
)

from course_lib.answers import engine, judging
from course_lib.exercises import evaluate, get_exercise
from course_lib.grading.sandbox import Job, Sandbox, Worker
from solutions import SOLUTIONS

MARKER = f"victim-secret-{secrets.token_hex(8)}"  # in the victim's source, nowhere else
REFUSED = "checks and grading do not allow"
NEEDS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="reads another process's memory")

# ----------------------------------------------------------------------------- answers

VICTIM = MODEL_ENCODING.replace(
    "def positional_encoding", f"SECRET = {MARKER!r}\n\n\ndef positional_encoding", 1
)

SEARCHES_FRAMES_AND_MODULES = """
import sys
found = []
seen = set()
def look(value, depth):
    if id(value) in seen or depth > 4:
        return
    seen.add(id(value))
    if isinstance(value, str) and "victim" + "-secret-" in value:
        found.append(value)
    elif type(value) is dict:
        for item in list(value.values())[:2000]:
            look(item, depth + 1)
    elif type(value) in (list, tuple):
        for item in list(value)[:2000]:
            look(item, depth + 1)
frame = sys._getframe()
while frame is not None:
    look(frame.f_locals, 0)
    look(frame.f_globals, 0)
    frame = frame.f_back
for module in list(sys.modules.values()):
    look(getattr(module, "__dict__", {}), 1)
if found:
    raise RuntimeError("stolen: " + found[0])
"""

READS_OWN_MEMORY = """
with open("/proc/self/mem", "rb") as memory:
    memory.read(1)
"""

GC_ROUTE = """
import gc
gc.get_objects()
"""

CTYPES_ROUTE = """
import ctypes
ctypes.CDLL(None).shmget(1234, 4096, 0o1000 | 0o600)
"""

FORGES_BYTECODE = """
def template():
    return 0
template.__code__.replace(co_consts=())
"""

READS_REFS_BY_A_FOLDER = """
import os, torch
folder = os.open(os.path.dirname(torch.__file__), os.O_RDONLY)
os.open("_refs/__init__.py", os.O_RDONLY, dir_fd=folder)
"""

READS_MEMORY_BY_A_FOLDER = """
import os
root = os.open("/", os.O_RDONLY)
os.open("proc/self/mem", os.O_RDONLY, dir_fd=root)
"""

LEAVES_A_FILE = """
import os
if os.path.exists("/tmp/left-by-a-classmate"):
    with open("/tmp/left-by-a-classmate") as note:
        if note.read() != "{name}":
            raise RuntimeError("found a classmate's file")
with open("/tmp/left-by-a-classmate", "w") as note:
    note.write("{name}")
"""

SEES_OTHER_CASES = """
import sys
frame = sys._getframe()
tasks = []
while frame is not None:
    task = frame.f_locals.get("task")
    if isinstance(task, dict) and "calls" in task:
        tasks.append(task)
    frame = frame.f_back
calls = tasks[0]["calls"] if tasks else []
if any(call.get("alone") for call in calls) and len(calls) > 1:
    raise RuntimeError(f"saw {len(calls)} cases, hidden ones among them")
"""

SURROGATE_CLASS = """
import os
def positional_encoding(max_len, d_model):
    if os.environ.get("HOME", "").startswith("/tmp/case-"):
        return type("evil" + chr(0xD800), (), {})()
    raise NotImplementedError
"""


def forges(size: int, count: int) -> str:
    """An answer that writes ``count`` well-formed messages of ``size`` bytes to the result
    channel (descriptor 3) before returning."""
    return f"""
    import json, os, struct
    payload = json.dumps({{"event": "call", "index": 0, "status": "raised",
                          "error": "x" * {size}}}).encode()
    for _ in range({count}):
        os.write(3, struct.pack(">Q", len(payload)) + payload)
    """


# ----------------------------------------------------------------------------- one batch


@pytest.fixture(scope="module")
def batch(tmp_path_factory) -> dict:
    """Hostile answers and a victim, graded once with one worker."""
    root = tmp_path_factory.mktemp("isolation")
    inbox, out = root / "in", root / "out"
    inbox.mkdir()
    answers = {
        "aaa.victim": code(VICTIM),
        "thief-frames": encoding_doing(SEARCHES_FRAMES_AND_MODULES),
        "thief-memory": encoding_doing(READS_OWN_MEMORY),
        "gc": encoding_doing(GC_ROUTE),
        "ctypes": encoding_doing(CTYPES_ROUTE),
        "bytecode": encoding_doing(FORGES_BYTECODE),
        "refs-by-folder": encoding_doing(READS_REFS_BY_A_FOLDER),
        "memory-by-folder": encoding_doing(READS_MEMORY_BY_A_FOLDER),
        "file-1": encoding_doing(LEAVES_A_FILE.format(name="file-1")),
        "file-2": encoding_doing(LEAVES_A_FILE.format(name="file-2")),
        "hidden": encoding_doing(SEES_OTHER_CASES),
        "surrogate": code(SURROGATE_CLASS),
        "forges-many": encoding_doing(forges(30 * 2**20, 16)),
        "forges-one": encoding_doing(forges(40 * 2**20, 1)),
        "forges-long-error": encoding_doing(forges(8 * 2**20, 1)),
    }
    for student, answer in answers.items():
        write(inbox, student, document(student, [answer]))
    started = time.monotonic()
    # what the answers can reach is tested here, not time limits: one only a hang reaches
    # (a thief that searches every module took 10 s of eight cases on a busy machine)
    status, printed = grade(
        inbox, "--out", out, "--seed", SEED, "--jobs", 1, "--timeout", 60, "--quiet"
    )
    return {
        "status": status,
        "printed": printed,
        "results": results(out),
        "out": out,
        "seconds": time.monotonic() - started,
    }


def row(batch: dict, student: str):
    return batch["results"][(student, "positional-encoding")]


def test_the_batch_finishes_whatever_the_answers_do(batch):
    assert batch["status"] == 0, batch["printed"]
    assert row(batch, "aaa.victim")["status"] == "ok"


def test_an_answer_finds_nothing_of_a_classmate_in_its_frames_or_modules(batch):
    result = row(batch, "thief-frames")
    assert result["status"] == "ok", result["message"]
    assert MARKER not in result["message"]


def test_an_answer_cannot_open_its_own_memory(batch):
    result = row(batch, "thief-memory")
    assert result["status"] == "error"
    assert f"{REFUSED} opening '/proc/self/mem'" in result["message"]


@pytest.mark.parametrize(
    ("student", "what"),
    [
        ("gc", "gc.get_objects"),
        ("ctypes", "ctypes"),
        ("bytecode", "building a code object"),
        ("refs-by-folder", "opening '_refs/__init__.py' (a file of a module the exercise"),
        ("memory-by-folder", "opening 'proc/self/mem' (the files of processes"),
    ],
)
def test_reaching_behind_the_code_is_refused_with_a_message(batch, student, what):
    result = row(batch, student)
    assert result["status"] == "error" and result["points"] == 0
    assert f"{REFUSED} {what}" in result["message"], result["message"]


@pytest.mark.parametrize("student", ["file-1", "file-2"])
def test_a_file_left_in_tmp_is_gone_for_the_next_answer(batch, student):
    result = row(batch, student)
    assert result["status"] == "ok", result["message"]


def test_a_hidden_case_runs_in_a_process_that_holds_no_other_case(batch):
    result = row(batch, "hidden")
    assert result["status"] == "ok", result["message"]


def test_a_surrogate_in_a_returned_type_name_is_that_students_failure_only(batch):
    result = row(batch, "surrogate")
    assert result["status"] in ("fail", "error") and result["points"] == 0


@pytest.mark.parametrize(
    ("student", "message"),
    [
        ("forges-many", "the code sent more than"),
        ("forges-one", "is longer than"),
    ],
)
def test_forged_result_messages_are_capped_before_they_are_kept(batch, student, message):
    result = row(batch, student)
    assert result["status"] == "error" and result["points"] == 0
    assert message in result["checks"], result["checks"][:2000]


def test_the_gradebook_and_reports_stay_small_whatever_the_answers_send(batch):
    out: Path = batch["out"]
    assert (out / "gradebook.sqlite").stat().st_size < 4 * 2**20
    for csv_file in out.glob("*.csv"):
        assert csv_file.stat().st_size < 2**20, csv_file
    for page in (out / "feedback").glob("*.html"):
        assert page.stat().st_size < 2**20, page


# ----------------------------------------------------------------------------- the fork server


def memory_holds(pid: int, needle: bytes) -> bool:
    """Whether the readable memory of process ``pid`` contains ``needle`` (root only)."""
    with open(f"/proc/{pid}/maps") as maps:
        regions = []
        for line in maps:
            fields = line.split()
            start, end = (int(x, 16) for x in fields[0].split("-"))
            if fields[1].startswith("r") and end - start < 2**30:
                regions.append((start, end))
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as memory:
        for start, end in regions:
            try:
                memory.seek(start)
                if needle in memory.read(end - start):
                    return True
            except (OSError, OverflowError, ValueError):
                continue
    return False


def victim_task(marker: str) -> dict:
    exercise = get_exercise("positional-encoding")
    source = MODEL_ENCODING.replace(
        "def positional_encoding", f"SECRET = {marker!r}\n\n\ndef positional_encoding", 1
    )
    answer = {"function": "positional_encoding", "source": source}
    prepared = judging.prepare(exercise, SEED)
    return judging.make_task(exercise, answer, prepared, exercise.timeout)


@NEEDS_ROOT
def test_the_grading_fork_server_holds_nothing_of_an_answer_it_ran():
    worker = Worker(Sandbox.create("bwrap"), 0)
    marker = f"fork-server-probe-{secrets.token_hex(8)}"
    try:
        outcomes = worker.run(Job("victim", [victim_task(marker)], 30.0))
        assert outcomes[0].status == "done"
        assert "SECRET" not in str(outcomes[0].messages)
        assert memory_holds(worker.pid, b"/opt/course-grade")  # the probe reads its memory
        assert not memory_holds(worker.pid, marker.encode())
    finally:
        worker.stop()


@NEEDS_ROOT
def test_the_checks_fork_server_holds_nothing_of_an_answer_it_checked():
    marker = f"check-probe-{secrets.token_hex(8)}"
    task = victim_task(marker)
    outcome = engine.run_locally(task, 30)
    assert outcome.status == "done"
    server = engine.local_engine().process.pid
    assert memory_holds(server, b"runner.py")
    assert not memory_holds(server, marker.encode())


# ----------------------------------------------------------------------------- the check


def finds_the_expected_values(max_len, d_model):

    for name, module in list(sys.modules.items()):
        if name.startswith("course_lib"):
            reference = getattr(module, "sinusoidal_positional_encoding", None)
            if reference is not None:
                return reference(max_len, d_model)
    return torch.zeros(max_len, d_model)


def test_a_check_runs_the_answer_where_no_expected_value_or_course_lib_is_loaded():
    import course_lib.positional  # noqa: F401  (loaded in the notebook's process)

    result = evaluate("positional-encoding", finds_the_expected_values, record=False)
    assert not result.passed
    assert "entries differ" in str(result) or "differ by more" in str(result)


def test_the_check_and_grading_refuse_the_same_things_with_the_same_messages():
    exercise = get_exercise("positional-encoding")
    source = textwrap.dedent(
        """
        def positional_encoding(max_len, d_model):
            import gc
            gc.get_objects()
        """
    )
    verdict = judging.run_locally(
        exercise,
        {"function": "positional_encoding", "source": source},
        seed=exercise.seed,
        timeout=exercise.timeout,
    )
    assert verdict.status == "error"
    assert f"{REFUSED} gc.get_objects" in verdict.checks[1].message


def test_a_check_of_a_correct_answer_still_passes_after_a_hostile_one():
    evaluate("positional-encoding", finds_the_expected_values, record=False)
    assert evaluate("positional-encoding", SOLUTIONS["positional-encoding"], record=False).passed


def test_public_calls_share_a_process_and_each_hidden_call_runs_alone_after_them():
    exercise = get_exercise("positional-encoding")
    public = judging.prepare(exercise, exercise.seed)
    graded = judging.prepare(exercise, SEED)
    assert not any(call["alone"] for call in public.calls)
    alone = [call["alone"] for call in graded.calls]
    assert any(alone) and not all(alone)
    groups = engine._groups(graded.calls)
    assert groups[0] == [index for index, hidden in enumerate(alone) if not hidden]
    assert groups[1:] == [[index] for index, hidden in enumerate(alone) if hidden]
