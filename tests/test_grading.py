"""Specification of the grader (``course-grade``): sandbox, bad input, gradebook, CSV, overrides.

Most cases are graded together, in one batch (``batch``), as an instructor would grade a
folder: every bad file and every misbehaving answer in it must get its own status and
message, while everything else in the same batch is still graded.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import io
import json
import os
import shutil
import socket
import sqlite3
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
import torch

import course_lib
from conftest import ROOT, book_config
from course_lib.answers.runner import TableScorer, decode_argument, encode_argument
from course_lib.answers.source import function_source
from course_lib.exercises import get_exercise, list_exercises
from course_lib.exercises.submission import content_hash
from course_lib.grading import cli
from course_lib.grading._progress import ProgressBar
from course_lib.grading.gradebook import Gradebook
from course_lib.grading.inputs import read_submission_file
from course_lib.grading.sandbox import WORKER_IN_SANDBOX, Sandbox, SandboxUnavailable
from solutions import SOLUTIONS
from tasks import notebook_client

SEED = 918_273
PUBLIC = get_exercise("positional-encoding")
MODEL_ENCODING = function_source(SOLUTIONS["positional-encoding"]).text
MODEL_ROTATION = function_source(SOLUTIONS["pe-offset-rotation"]).text
EXERCISES = [
    "positional-encoding",
    "pe-worked-example",
    "pe-doubled-index-bug",
    "pe-offset-rotation",
]


# ----------------------------------------------------------------------------- submissions


def local_result(passed: bool = True) -> dict:
    """What the student's own check recorded; the grader must ignore it."""
    return {
        "status": "passed" if passed else "failed",
        "checks_passed": int(passed),
        "checks_total": 1,
        "checked_utc": "2026-11-20T09:00:00Z",
        "checks": [{"name": "x", "status": "pass" if passed else "fail", "message": "local"}],
        "output": "",
    }


def entry(exercise_id: str, answer: dict, kind: str | None = None) -> dict:
    exercise = get_exercise(exercise_id)
    return {
        "id": exercise_id,
        "chapter": exercise.chapter,
        "kind": kind or exercise.kind,
        "points": exercise.points,
        "answer": answer,
        "result": local_result(),
    }


def code(source: str, function: str = "positional_encoding", exercise="positional-encoding"):
    return entry(exercise, {"function": function, "source": textwrap.dedent(source)})


def encoding_doing(body: str) -> dict:
    """The model encoding, with ``body`` run first in the function on every call."""
    lines = MODEL_ENCODING.splitlines()
    where = next(i for i, line in enumerate(lines) if line.startswith("def positional_encoding"))
    body = textwrap.indent(textwrap.dedent(body).strip(), "    ")
    return code("\n".join([*lines[: where + 1], body, *lines[where + 1 :]]) + "\n")


def document(student: str, entries: list[dict], created: str = "2026-11-20T10:00:00Z") -> dict:
    data = {
        "format": "course-lib-submission",
        "schema_version": 1,
        "course_lib_version": course_lib.__version__,
        "python_version": "3.11.7",
        "torch_version": "2.13.0",
        "student_id": student,
        "created_utc": created,
        "exercises": entries,
    }
    data["sha256"] = content_hash(data)
    return data


def write(folder: Path, student: str, data: dict | bytes, stamp: str = "20261120T100000Z") -> Path:
    path = folder / f"submission-{student}-{stamp}.json"
    path.write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode())
    return path


def everything_right() -> list[dict]:
    return [
        code(MODEL_ENCODING),
        entry("pe-worked-example", {"value": [0.909, -0.416, 0.02, 1.0]}),
        entry("pe-doubled-index-bug", {"choice": "b"}),
        code(MODEL_ROTATION, "offset_matrix", "pe-offset-rotation"),
    ]


def hard_coded_public_checks() -> str:
    tables = {c.args: PUBLIC.reference(*c.args).tolist() for c in PUBLIC.cases(PUBLIC.seed)}
    return (
        f"import torch\n\nTABLES = {tables!r}\n\n"
        "def positional_encoding(max_len, d_model):\n"
        "    return torch.tensor(TABLES.get((max_len, d_model), [[0.0] * d_model] * max_len))\n"
    )


def grade(*args: str | Path) -> tuple[int, str]:
    """Run ``course-grade`` in this process; its exit status and what it printed."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        status = cli.main([str(a) for a in args])
    return status, printed.getvalue()


def read_csv(path: Path) -> dict[str, dict[str, str]]:
    """The rows of a CSV file by student, without the ``(max points)`` row of grades.csv."""
    with open(path, newline="", encoding="utf-8") as stream:
        rows = {row["student_id"]: row for row in csv.DictReader(stream)}
    rows.pop("(max points)", None)
    return rows


def results(out: Path) -> dict[tuple[str, str], sqlite3.Row]:
    db = sqlite3.connect(out / "gradebook.sqlite")
    db.row_factory = sqlite3.Row
    rows = db.execute(
        "SELECT s.student_id, r.* FROM results r JOIN submissions s USING (sha256)"
    ).fetchall()
    db.close()
    return {(r["student_id"], r["exercise_id"]): r for r in rows}


def sandbox_processes() -> list[str]:
    """Processes still running from a grading sandbox (workers and what they started)."""
    found = []
    for entry_ in os.listdir("/proc"):
        if entry_.isdigit():
            with contextlib.suppress(OSError):
                command = Path(f"/proc/{entry_}/cmdline").read_bytes().replace(b"\0", b" ")
                if WORKER_IN_SANDBOX.encode() in command or b"worker.py {" in command:
                    found.append(f"{entry_}: {command[:120]!r}")
    return found


# ----------------------------------------------------------------------------- one batch


class Batch:
    """A folder of good, bad and hostile submissions, graded once by ``course-grade``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.inbox = root / "inbox"
        self.out = root / "out"
        self.inbox.mkdir()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0)
        port = self.server.getsockname()[1]
        secrets = [self.inbox, self.out / "gradebook.sqlite", ROOT / "course_lib", ROOT / "tests"]
        self.secrets = secrets
        add = self.add
        add("correct", everything_right())
        add("hard-coded", [code(hard_coded_public_checks())])
        add(
            "reference",
            [
                code(
                    """
                    from course_lib.positional import sinusoidal_positional_encoding

                    def positional_encoding(max_len, d_model):
                        return sinusoidal_positional_encoding(max_len, d_model)
                    """
                )
            ],
        )
        add(
            "sneaky-reference",
            [
                code(
                    """
                    import importlib

                    def positional_encoding(max_len, d_model):
                        found = importlib.import_module("course" + "_lib.positional")
                        return found.sinusoidal_positional_encoding(max_len, d_model)
                    """
                )
            ],
        )
        add("loops", [encoding_doing("while True:\n    pass"), *everything_right()[1:]])
        add("sleeps", [encoding_doing("import time\ntime.sleep(600)")])
        add("loops-when-defined", [code("while True:\n    pass\n")])
        add("allocates", [encoding_doing("hoard = [0] * 10**11")])
        add(
            "allocates-slowly",
            [encoding_doing("hoard = []\nwhile True:\n    hoard.append(bytearray(2**27))")],
        )
        add("forks", [encoding_doing("import os\nwhile True:\n    os.fork()")])
        add(
            "leaves-a-process",
            [
                encoding_doing(
                    """
                    import os, time
                    if os.fork() == 0:
                        os.setsid()
                        time.sleep(600)
                    """
                )
            ],
        )
        add("writes-big-file", [encoding_doing("open('big', 'wb').write(b'0' * 2**26)")])
        add(
            "reads-and-deletes",
            [
                encoding_doing(
                    f"""
                    import os, shutil
                    paths = {[str(p) for p in secrets]!r}
                    print("visible:", [os.path.exists(p) for p in paths])
                    for path in paths:
                        shutil.rmtree(path, ignore_errors=True)
                    print("home:", os.listdir(os.path.expanduser("~")))
                    """
                )
            ],
        )
        add(
            "network",
            [
                encoding_doing(
                    f"""
                    import socket
                    try:
                        socket.create_connection(("127.0.0.1", {port}), timeout=2)
                        print("connected")
                    except OSError as error:
                        print("no connection:", error)
                    """
                )
            ],
        )
        add("prints", [encoding_doing("print('x' * 10**7)")])
        add("floods-stdout", [encoding_doing("import os\nos.write(1, b'y' * 2**25)")])
        add("exits", [encoding_doing("import sys\nsys.exit(3)")])
        add("ends-process", [encoding_doing("import os\nos._exit(7)")])
        add(
            "kills-worker",
            [encoding_doing("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)")],
        )
        add(
            "stub",
            [code("def positional_encoding(max_len, d_model):\n    raise NotImplementedError\n")],
        )
        add("syntax-error", [code("def positional_encoding(max_len, d_model)\n    return 1\n")])
        lost = {"function": "f", "source": None, "note": "defined with a lambda"}
        add("no-source", [entry("positional-encoding", lost)])
        add("misnamed", [code(MODEL_ENCODING, function="my_encoding")])
        add("wrong-signature", [code("def positional_encoding(n):\n    return n\n")])
        add("numpy", [code("import numpy\n\ndef positional_encoding(max_len, d_model):\n"
                           "    return numpy.zeros((max_len, d_model))\n")])  # fmt: skip
        add("huge-result", [code("import torch\n\ndef positional_encoding(max_len, d_model):\n"
                                 "    return torch.zeros(3000, 1000)\n")])  # fmt: skip
        add("other-kind", [entry("pe-doubled-index-bug", {"value": [1.0]}, kind="value")])
        add("unknown-exercise", [{**entry("pe-doubled-index-bug", {"choice": "b"}), "id": "gone"}])
        wrong = everything_right()
        wrong[0] = code(MODEL_ENCODING.replace("torch.sin(angle)", "torch.cos(angle)"))
        add("claims-passed", wrong)  # its local results all say "passed"
        # files that are not valid submissions
        valid = json.dumps(document("truncated", everything_right())).encode()
        write(self.inbox, "truncated", valid[: len(valid) // 2])
        write(self.inbox, "malformed", b"{'student_id': 'malformed'}")
        write(self.inbox, "not-utf8", b'{"format": "\xff\xfe"}')
        write(self.inbox, "nested", b"[" * 100_000)
        old = document("old-version", everything_right())
        old["schema_version"] = 2
        write(self.inbox, "old-version", old)
        incomplete = document("incomplete", everything_right())
        del incomplete["torch_version"]
        incomplete["sha256"] = content_hash(incomplete)
        write(self.inbox, "incomplete", incomplete)
        edited = document("edited", everything_right())
        edited["exercises"][2]["answer"]["choice"] = "a"
        write(self.inbox, "edited", edited)
        write(self.inbox, "path-like", document("../../../../tmp/graded", everything_right()))
        write(self.inbox, "huge", b" " * (6 * 2**20) + json.dumps(document("huge", [])).encode())
        os.mkfifo(self.inbox / "a-fifo.json")

    def add(self, student: str, entries: list[dict]) -> None:
        write(self.inbox, student, document(student, entries))

    def run(self) -> None:
        self.status, self.printed = grade(
            self.inbox, "--out", self.out, "--seed", SEED, "--timeout", 2, "--jobs", 2,
            "--quiet",
        )  # fmt: skip
        self.grades = read_csv(self.out / "grades.csv")
        self.results = results(self.out)
        with contextlib.suppress(BlockingIOError):
            self.connection = self.server.accept()
        self.server.close()

    def result(self, student: str, exercise_id: str = "positional-encoding") -> sqlite3.Row:
        return self.results[(student, exercise_id)]


@pytest.fixture(scope="module")
def batch(tmp_path_factory) -> Batch:
    graded = Batch(tmp_path_factory.mktemp("batch"))
    graded.run()
    return graded


def test_the_batch_finishes_with_status_0_despite_every_bad_input(batch):
    assert batch.status == 0, batch.printed
    assert "Read 39 files (39 new): 29 valid, 10 invalid." in batch.printed


def test_a_correct_submission_earns_every_point(batch):
    row = batch.grades["correct"]
    assert [row[e] for e in EXERCISES] == ["4", "2", "2", "3"]
    assert row["total"] == "11" and row["notes"] == ""
    assert batch.result("correct")["message"] == "all 8 checks passed"


def test_hard_coding_the_public_checks_earns_nothing(batch):
    row = batch.result("hard-coded")
    assert row["status"] == "fail" and row["points"] == 0
    checks = json.loads(row["checks"])
    public = [c for c in checks if c["name"] in {k.label for k in PUBLIC.cases(PUBLIC.seed)}]
    assert all(c["status"] == "pass" for c in public)  # the public checks pass...
    assert any(c["name"].startswith("random") and c["status"] == "fail" for c in checks)


def test_the_grading_seed_draws_inputs_the_student_never_saw(batch):
    labels = {c["name"] for c in json.loads(batch.result("correct")["checks"])}
    public = {c.label for c in PUBLIC.cases(PUBLIC.seed)}
    assert {c.label for c in PUBLIC.cases(SEED)} <= labels
    assert labels - public - {"signature"}, "no unseen input was graded"


@pytest.mark.parametrize("student", ["reference", "sneaky-reference"])
def test_calling_course_libs_reference_scores_zero_with_a_message(batch, student):
    row = batch.result(student)
    assert row["status"] == "error" and row["points"] == 0
    assert "uses course_lib" in row["message"] and "scores 0" in row["message"]


@pytest.mark.parametrize(
    ("student", "status", "message"),
    [
        ("loops", "timeout", "stopped after 2 s, the time limit"),
        ("sleeps", "timeout", "stopped after 2 s"),
        ("loops-when-defined", "timeout", "while the source was defined"),
        ("allocates", "error", "MemoryError (checks and grading let the code use about 1024 MB"),
        ("forks", "error", "checks and grading do not allow starting a process (os.fork)"),
        ("writes-big-file", "error", "File too large"),
        ("floods-stdout", "error", "File too large"),
        ("exits", "error", "SystemExit: 3"),
        ("ends-process", "error", "ended (exit code 7)"),
        ("kills-worker", "error", "stopped the grading process"),
        ("stub", "error", "raises NotImplementedError"),
        ("syntax-error", "invalid", "not valid Python (line 1)"),
        ("no-source", "invalid", "no source: defined with a lambda"),
        ("misnamed", "invalid", "my_encoding is not defined in the submitted source"),
        ("wrong-signature", "fail", "must accept (max_len, d_model); it takes (n)"),
        ("numpy", "fail", "got numpy.ndarray; convert it with torch.from_numpy"),
        ("huge-result", "fail", "expected shape (3, 4), got (3000, 1000)"),
        ("claims-passed", "fail", "entries differ"),
    ],
)
def test_misbehaving_code_gets_a_status_and_a_clear_message(batch, student, status, message):
    row = batch.result(student)
    assert (row["status"], row["points"]) == (status, 0), row["message"]
    assert message in row["message"]
    assert batch.grades[student]["positional-encoding"] == "0"


def test_slow_unbounded_allocation_is_stopped_by_a_limit(batch):
    row = batch.result("allocates-slowly")
    assert row["status"] in ("error", "timeout") and row["points"] == 0
    assert "MemoryError" in row["message"] or "time limit" in row["message"]


def test_the_other_exercises_of_a_looping_submission_are_still_graded(batch):
    assert [batch.grades["loops"][e] for e in EXERCISES] == ["0", "2", "2", "3"]


def test_code_that_prints_megabytes_is_graded_and_its_output_truncated(batch):
    row = batch.result("prints")
    assert row["status"] == "ok"
    assert len(row["output"]) < 5000 and "more characters not shown" in row["output"]


def test_code_cannot_see_or_delete_the_graders_files(batch):
    row = batch.result("reads-and-deletes")
    assert "visible: [False, False, False, False]" in row["output"]
    assert row["status"] == "ok"  # it did no harm, and its answer is right
    assert all(path.exists() for path in batch.secrets)


def test_code_has_no_network(batch):
    row = batch.result("network")
    assert "no connection" in row["output"]
    assert "connected" not in row["output"].splitlines()
    assert not hasattr(batch, "connection")


def test_code_runs_in_a_fresh_empty_folder_with_a_minimal_environment(batch):
    assert "home: []" in batch.result("reads-and-deletes")["output"]


def test_an_answer_cannot_leave_a_process_and_none_of_the_sandbox_survives_the_batch(batch):
    row = batch.result("leaves-a-process")
    assert row["status"] == "error" and "starting a process (os.fork)" in row["message"]
    assert sandbox_processes() == []


def test_an_answer_of_the_wrong_kind_or_to_an_unknown_exercise_is_invalid(batch):
    assert batch.result("other-kind", "pe-doubled-index-bug")["status"] == "invalid"
    assert "no exercise 'gone'" in batch.result("unknown-exercise", "gone")["message"]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("truncated", "not a readable JSON file"),
        ("malformed", "not a readable JSON file"),
        ("not-utf8", "not a readable JSON file"),
        ("nested", "not a readable JSON file"),
        ("old-version", "schema_version 2 is not supported"),
        ("incomplete", "'torch_version' is a required property"),
        ("edited", "does not match its sha256"),
        ("path-like", "does not follow the submission schema at student_id"),
        ("huge", "larger than a submission can be (5 MB)"),
        ("a-fifo.json", "not a regular file"),
    ],
)
def test_a_bad_file_is_reported_with_a_clear_message(batch, name, message):
    db = sqlite3.connect(batch.out / "gradebook.sqlite")
    rows = db.execute(
        "SELECT s.status, s.message, s.student_id FROM submissions s "
        "JOIN submission_files f USING (sha256) WHERE f.path LIKE ?",
        (f"%/{name}" if name.endswith(".json") else f"%/submission-{name}-2026%",),
    ).fetchall()
    db.close()
    assert len(rows) == 1 and rows[0][0] == "invalid" and message in rows[0][1], rows
    assert f"invalid: {batch.inbox}/" in batch.printed


def test_a_student_whose_only_file_is_bad_gets_a_row_saying_why(batch):
    row = batch.grades["truncated"]
    assert row["total"] == "0" and row["positional-encoding"] == ""
    assert row["notes"].startswith("no valid submission: ") and "JSON" in row["notes"]


def test_a_student_id_that_looks_like_a_path_is_never_used(batch):
    assert not any("tmp/graded" in student for student in batch.grades)
    assert not Path("/tmp/graded").exists()


def test_the_csv_has_a_row_per_student_a_column_per_exercise_and_the_total(batch):
    with open(batch.out / "grades.csv", newline="") as stream:
        header = next(csv.reader(stream))
    every_exercise = [exercise.id for exercise in list_exercises()]
    assert header == [
        "student_id",
        *every_exercise,
        "total",
        "files",
        "submitted_utc",
        "submission",
        "notes",
        "similar",
    ]
    assert list(batch.grades) == sorted(batch.grades)
    for row in batch.grades.values():
        assert int(row["total"]) == sum(int(row[e] or 0) for e in every_exercise)


# ----------------------------------------------------------------------------- rules


def small_batch(folder: Path) -> None:
    """Two students, choice and value answers only (no code to run)."""
    choice = entry("pe-doubled-index-bug", {"choice": "b"})
    write(folder, "ana", document("ana", [choice], "2026-11-20T10:00:00Z"))
    write(folder, "ben", document("ben", [{**choice, "answer": {"choice": "a"}}]))


# ----------------------------------------------------------------------------- every exercise


def test_the_model_answer_to_every_code_exercise_of_the_course_earns_its_points(tmp_path):
    exercises = [e for e in list_exercises() if e.kind == "code"]
    entries = [
        code(function_source(SOLUTIONS[e.id]).text, SOLUTIONS[e.id].__name__, e.id)
        for e in exercises
    ]
    (tmp_path / "in").mkdir()
    write(tmp_path / "in", "model", document("model", entries))
    assert grade(tmp_path / "in", "--out", tmp_path / "out", "--seed", SEED, "--quiet")[0] == 0
    graded = results(tmp_path / "out")
    for exercise in exercises:
        row = graded["model", exercise.id]
        assert (row["status"], row["points"]) == ("ok", exercise.points), dict(row)


@pytest.mark.parametrize(
    "body",
    [
        "return torch.nn.functional.layer_norm(x, x.shape[-1:], gain, bias, eps)",
        "norm = torch.nn.LayerNorm(x.size(-1), eps=eps)\n"
        "            with torch.no_grad():\n"
        "                norm.weight.copy_(gain)\n"
        "                norm.bias.copy_(bias)\n"
        "            return norm(x).detach()",
    ],
    ids=["function", "module"],
)
def test_a_torch_function_the_exercise_does_not_allow_scores_zero_at_grading(tmp_path, body):
    source = f"""
        import torch

        def layer_norm(x, gain, bias, eps):
            {body}
        """
    (tmp_path / "in").mkdir()
    write(
        tmp_path / "in", "blocked", document("blocked", [code(source, "layer_norm", "layer-norm")])
    )
    assert grade(tmp_path / "in", "--out", tmp_path / "out", "--seed", SEED, "--quiet")[0] == 0
    row = results(tmp_path / "out")["blocked", "layer-norm"]
    assert (row["status"], row["points"]) == ("error", 0), dict(row)
    assert "called torch.nn.functional.layer_norm, which the check does not allow" in row["message"]


ATTENTION_RETURNING = {
    "only-output": ("return weights @ value", "expected a tuple (output, weights), got"),
    "three-parts": ("return weights @ value, weights, 0", "of 2 parts, got 3"),
    "a-string": ("return weights @ value, 'weights'", "weights: expected a torch.Tensor, got str"),
    "transposed": ("return weights @ value, weights.transpose(-2, -1)", "weights: expected"),
}


@pytest.mark.parametrize("returned", ATTENTION_RETURNING)
def test_a_tuple_result_is_compared_part_by_part_with_the_students_own_messages(tmp_path, returned):
    statement, message = ATTENTION_RETURNING[returned]
    source = f"""
        import math
        import torch

        def attention(query, key, value, mask=None):
            scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            {statement}
        """
    entries = [code(source, "attention", "scaled-dot-product-attention")]
    (tmp_path / "in").mkdir()
    write(tmp_path / "in", "tuples", document("tuples", entries))
    assert grade(tmp_path / "in", "--out", tmp_path / "out", "--seed", SEED, "--quiet")[0] == 0
    row = results(tmp_path / "out")["tuples", "scaled-dot-product-attention"]
    assert row["status"] == "fail" and row["points"] == 0
    assert message in row["message"], row["message"]


def test_a_table_scorer_argument_crosses_into_the_sandbox_as_its_two_tables():
    draw = torch.Generator().manual_seed(0)
    scorer = TableScorer(torch.randn(3, 5, 5, generator=draw), torch.randn(5, 5, generator=draw))
    encoded = json.loads(json.dumps(encode_argument(scorer)))  # what the worker reads
    assert set(encoded) == {"scorer"}
    assert set(encoded["scorer"]) == {"by_position", "by_start"}
    rebuilt = decode_argument(encoded)
    ids = torch.tensor([[1, 4], [3, 0]])
    assert isinstance(rebuilt, TableScorer) and torch.equal(rebuilt(ids), scorer(ids))


def test_a_table_scorer_with_a_bad_table_is_refused_when_rebuilt():
    encoded = encode_argument(TableScorer(torch.zeros(2, 3, 3), torch.zeros(3, 3)))
    encoded["scorer"]["by_start"]["shape"] = [1, 9]
    with pytest.raises(ValueError, match="by_start must be"):
        decode_argument(encoded)


GREEDY_ANSWERS = {  # (a first statement, a statement after each step, status)
    "right": ("pass", "pass", "ok"),
    "never-stops": ("pass", "finished = finished & False", "fail"),
    "calls-course-lib": ("import course_lib", "pass", "error"),
}


@pytest.mark.parametrize("answer", GREEDY_ANSWERS)
def test_greedy_decoding_is_graded_with_the_table_model_inside_the_sandbox(tmp_path, answer):
    first, after_step, status = GREEDY_ANSWERS[answer]
    source = f"""
        import torch

        def greedy_decode(model, prompt, eos_id, max_new_tokens):
            {first}
            ids = prompt
            finished = torch.zeros(ids.size(0), dtype=torch.bool)
            for _ in range(max_new_tokens):
                token = model(ids).argmax(dim=-1).masked_fill(finished, 0)
                ids = torch.cat([ids, token[:, None]], dim=1)
                finished = finished | (token == eos_id)
                {after_step}
                if finished.all():
                    break
            return ids
        """
    entries = [code(source, "greedy_decode", "greedy-decoding")]
    (tmp_path / "in").mkdir()
    write(tmp_path / "in", "decoder", document("decoder", entries))
    assert grade(tmp_path / "in", "--out", tmp_path / "out", "--seed", SEED, "--quiet")[0] == 0
    row = results(tmp_path / "out")["decoder", "greedy-decoding"]
    points = get_exercise("greedy-decoding").points if status == "ok" else 0
    assert (row["status"], row["points"]) == (status, points), dict(row)


def test_running_again_changes_nothing_and_grades_nothing(tmp_path):
    (tmp_path / "in").mkdir()
    small_batch(tmp_path / "in")
    assert grade(tmp_path / "in", "--out", tmp_path / "out", "--seed", SEED)[0] == 0
    first = (tmp_path / "out" / "grades.csv").read_bytes()
    graded = results(tmp_path / "out")
    status, printed = grade(tmp_path / "in", "--out", tmp_path / "out", "--quiet")
    assert status == 0 and "Graded 0 submissions" in printed and "(0 new)" in printed
    assert (tmp_path / "out" / "grades.csv").read_bytes() == first
    assert {k: tuple(v) for k, v in results(tmp_path / "out").items()} == {
        k: tuple(v) for k, v in graded.items()
    }


def test_the_newest_submission_of_a_student_counts(tmp_path):
    (tmp_path / "in").mkdir()
    choice = entry("pe-doubled-index-bug", {"choice": "b"})
    wrong = {**choice, "answer": {"choice": "a"}}
    write(tmp_path / "in", "ana", document("ana", [wrong], "2026-11-21T08:00:00Z"), "1")
    write(tmp_path / "in", "ana", document("ana", [choice], "2026-11-21T08:00:00.5Z"), "2")
    write(tmp_path / "in", "ana", document("ana", [wrong], "2026-11-20T23:59:59.999999Z"), "3")
    grade(tmp_path / "in", "--out", tmp_path / "out", "--seed", SEED, "--quiet")
    assert read_csv(tmp_path / "out" / "grades.csv")["ana"]["pe-doubled-index-bug"] == "2"


def test_submissions_written_at_the_same_time_are_ordered_by_their_hash(tmp_path):
    (tmp_path / "in").mkdir()
    choice = entry("pe-doubled-index-bug", {"choice": "b"})
    files = [
        write(tmp_path / "in", "ana", document("ana", [{**choice, "answer": {"choice": c}}]), c)
        for c in "ab"
    ]
    grade(tmp_path / "in", "--out", tmp_path / "out", "--seed", SEED, "--quiet")
    newest = max(files, key=lambda p: read_submission_file(p).sha256)
    expected = (
        "2" if json.loads(newest.read_text())["exercises"][0]["answer"]["choice"] == "b" else "0"
    )
    assert read_csv(tmp_path / "out" / "grades.csv")["ana"]["pe-doubled-index-bug"] == expected


def test_a_later_run_adds_new_files_to_the_gradebook(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    small_batch(tmp_path / "a")
    write(
        tmp_path / "b", "cleo", document("cleo", [entry("pe-doubled-index-bug", {"choice": "B"})])
    )
    grade(tmp_path / "a", "--out", tmp_path / "out", "--seed", SEED, "--quiet")
    printed = grade(tmp_path / "b", "--out", tmp_path / "out", "--quiet")[1]
    assert "Graded 1 submission " in printed
    assert set(read_csv(tmp_path / "out" / "grades.csv")) == {"ana", "ben", "cleo"}


def test_an_override_wins_over_the_graded_points_until_it_is_removed(tmp_path):
    (tmp_path / "in").mkdir()
    small_batch(tmp_path / "in")
    out = tmp_path / "out"
    grade(tmp_path / "in", "--out", out, "--seed", SEED, "--quiet")
    status, printed = grade(
        "override", "--out", out, "ben", "pe-doubled-index-bug", "1", "--reason", "argued well"
    )
    assert status == 0, printed
    row = read_csv(out / "grades.csv")["ben"]
    assert row["pe-doubled-index-bug"] == "1" and row["total"] == "1"
    assert "pe-doubled-index-bug set by hand: argued well" in row["notes"]
    grade(tmp_path / "in", "--out", out, "--quiet")  # grading again keeps the override
    grade("regrade", "--out", out, "--quiet")
    assert read_csv(out / "grades.csv")["ben"]["pe-doubled-index-bug"] == "1"
    grade("override", "--out", out, "ben", "pe-doubled-index-bug", "--remove")
    assert read_csv(out / "grades.csv")["ben"]["pe-doubled-index-bug"] == "0"
    db = sqlite3.connect(out / "gradebook.sqlite")
    assert db.execute("SELECT points, reason FROM override_log ORDER BY id").fetchall() == [
        (1, "argued well"),
        (None, ""),
    ]


def test_an_override_for_a_student_with_no_result_for_that_exercise_counts(tmp_path):
    (tmp_path / "in").mkdir()
    small_batch(tmp_path / "in")
    out = tmp_path / "out"
    grade(tmp_path / "in", "--out", out, "--seed", SEED, "--quiet")
    grade("override", "--out", out, "ana", "pe-worked-example", "2", "--reason", "on paper")
    row = read_csv(out / "grades.csv")["ana"]
    assert (row["pe-worked-example"], row["total"]) == ("2", "4")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["anna", "pe-doubled-index-bug", "1", "--reason", "x"], "did you mean ana"),
        (["ana", "pe-doubled-index", "1", "--reason", "x"], "did you mean 'pe-doubled-index-bug'"),
        (["ana", "pe-doubled-index-bug", "3", "--reason", "x"], "between 0 and 2, got 3"),
        (["ana", "pe-doubled-index-bug", "1"], "say why with --reason"),
        (["ana", "pe-doubled-index-bug"], "give either POINTS or --remove"),
        (["ana", "pe-doubled-index-bug", "--remove"], "has no override"),
        (["../ana", "pe-doubled-index-bug", "1", "--reason", "x"], "looks like a path"),
    ],
)
def test_a_bad_override_is_refused_with_a_message(tmp_path, arguments, message):
    (tmp_path / "in").mkdir()
    small_batch(tmp_path / "in")
    grade(tmp_path / "in", "--out", tmp_path / "out", "--seed", SEED, "--quiet")
    status, printed = grade("override", "--out", tmp_path / "out", *arguments)
    assert status == 2 and message in printed


def test_the_first_grading_needs_a_seed_and_later_ones_reuse_it(tmp_path):
    (tmp_path / "in").mkdir()
    small_batch(tmp_path / "in")
    status, printed = grade(tmp_path / "in", "--out", tmp_path / "out")
    assert status == 2 and "choose a grading seed the first time, e.g. --seed" in printed
    assert grade(tmp_path / "in", "--out", tmp_path / "out", "--seed", SEED, "--quiet")[0] == 0
    status, printed = grade(tmp_path / "in", "--out", tmp_path / "out", "--seed", 5)
    assert status == 2 and f"was graded with the seed {SEED}" in printed
    assert "course-grade regrade --out" in printed
    status, printed = grade(tmp_path / "in", "--out", tmp_path / "out", "--quiet")
    assert status == 0 and f"with seed {SEED}" in printed


def test_a_public_seed_of_an_exercise_is_refused(tmp_path):
    (tmp_path / "in").mkdir()
    small_batch(tmp_path / "in")
    status, printed = grade(tmp_path / "in", "--out", tmp_path / "out", "--seed", PUBLIC.seed)
    assert status == 2 and "is the public seed of 'positional-encoding'" in printed


def test_regrade_with_a_new_seed_runs_every_code_answer_again(tmp_path):
    (tmp_path / "in").mkdir()
    write(tmp_path / "in", "ana", document("ana", [code(hard_coded_public_checks())]))
    out = tmp_path / "out"
    grade(tmp_path / "in", "--out", out, "--seed", SEED, "--quiet")
    before = json.loads(results(out)[("ana", "positional-encoding")]["checks"])
    status, printed = grade("regrade", "--out", out, "--seed", 31337, "--quiet")
    assert status == 0 and "Graded 1 submission" in printed and "seed 31337" in printed
    after = json.loads(results(out)[("ana", "positional-encoding")]["checks"])
    assert {c["name"] for c in after} != {c["name"] for c in before}
    assert sqlite3.connect(out / "gradebook.sqlite").execute(
        "SELECT value FROM meta WHERE key = 'seed'"
    ).fetchone() == ("31337",)


def test_wall_clock_a_submission_has_a_time_limit_for_all_its_code_together(tmp_path):
    (tmp_path / "in").mkdir()
    loop = "while True:\n    pass"
    rotation = code(
        MODEL_ROTATION.replace("    m = torch", "    while True:\n        pass\n    m = torch", 1),
        "offset_matrix",
        "pe-offset-rotation",
    )
    write(tmp_path / "in", "ana", document("ana", [encoding_doing(loop), rotation]))
    out = tmp_path / "out"
    grade(tmp_path / "in", "--out", out, "--seed", SEED, "--timeout", 2,
          "--submission-timeout", 3, "--quiet")  # fmt: skip
    first, second = (
        results(out)[("ana", e)] for e in ("positional-encoding", "pe-offset-rotation")
    )
    assert first["status"] == "timeout" and "stopped after 2 s" in first["message"]
    assert second["status"] == "timeout"
    assert "the submission's code reached its time limit of 3 s" in second["message"]
    assert second["seconds"] < 1.9


def test_an_interrupted_run_keeps_what_it_graded_and_the_next_run_grades_the_rest(
    tmp_path, monkeypatch
):
    (tmp_path / "in").mkdir()
    small_batch(tmp_path / "in")
    out = tmp_path / "out"
    save = Gradebook.save_grades

    def save_once_then_interrupt(book, *args, **kwargs):
        if book.graded_submissions():
            raise KeyboardInterrupt
        save(book, *args, **kwargs)

    monkeypatch.setattr(Gradebook, "save_grades", save_once_then_interrupt)
    status, printed = grade(tmp_path / "in", "--out", out, "--seed", SEED, "--quiet")
    assert status == 130 and "the submissions graded so far are kept" in printed
    monkeypatch.undo()
    assert len(results(out)) == 1
    status, printed = grade(tmp_path / "in", "--out", out, "--quiet")
    assert status == 0 and "Graded 1 submission " in printed
    assert len(results(out)) == 2


def test_a_missing_path_stops_before_anything_is_graded(tmp_path):
    status, printed = grade(tmp_path / "nowhere", "--out", tmp_path / "out", "--seed", SEED)
    assert status == 2 and "nowhere: no such file or folder" in printed
    assert not (tmp_path / "out").exists()


def test_without_bubblewrap_the_grader_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on this PATH
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        Sandbox.create("bwrap")
    (tmp_path / "in").mkdir()
    write(tmp_path / "in", "ana", document("ana", everything_right()))
    status, printed = grade(tmp_path / "in", "--out", tmp_path / "out", "--seed", SEED)
    assert status == 2 and "bubblewrap (bwrap) is not installed" in printed
    assert "--sandbox none" in printed
    assert not results(tmp_path / "out")  # nothing was graded half-way


def test_a_worker_that_cannot_start_stops_the_run_without_recording_errors(tmp_path, monkeypatch):
    def broken(self, index, folder):
        return [sys.executable, "-c", "import sys; print('no torch here', file=sys.stderr)"], {}

    monkeypatch.setattr(Sandbox, "worker_command", broken)
    (tmp_path / "in").mkdir()
    write(tmp_path / "in", "ana", document("ana", everything_right()))
    status, printed = grade(tmp_path / "in", "--out", tmp_path / "out", "--seed", SEED)
    assert status == 2 and "a grading worker did not start" in printed
    assert "no torch here" in printed and "run the command again" in printed
    assert not results(tmp_path / "out")


def test_without_a_sandbox_code_still_runs_under_the_same_limits(tmp_path):
    (tmp_path / "in").mkdir()
    write(tmp_path / "in", "ana", document("ana", everything_right()))
    write(tmp_path / "in", "ben", document("ben", [encoding_doing("import os\nos.fork()\n" * 20)]))
    out = tmp_path / "out"
    status, printed = grade(
        tmp_path / "in", "--out", out, "--seed", SEED, "--sandbox", "none", "--quiet"
    )
    assert status == 0, printed
    assert "warning: --sandbox none" in printed
    assert read_csv(out / "grades.csv")["ana"]["total"] == "11"
    assert "starting a process (os.fork)" in results(out)[("ben", "positional-encoding")]["message"]


# ----------------------------------------------------------------------------- round trip

NOTEBOOK = [
    "from course_lib.exercises import check, submit\nimport torch",
    MODEL_ENCODING,
    'check("positional-encoding", positional_encoding)',
    "def offset_matrix(offset, d_model):\n    return torch.eye(d_model)",
    'check("pe-offset-rotation", offset_matrix)',
    'check("pe-doubled-index-bug", "b")',
    'check("pe-worked-example", "0.909, -0.416, 0.020, 1.000")',
    "path = submit('ana.perez', folder={folder!r})",
]


def test_round_trip_from_a_notebook_to_the_csv(tmp_path):
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    cells = [nbformat.v4.new_code_cell(c.format(folder=str(inbox))) for c in NOTEBOOK]
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook_client(notebook, kernel_name="python3", timeout=120).execute()
    (path,) = inbox.glob("submission-ana.perez-*.json")
    command = [sys.executable, "-m", "course_lib.grading", str(inbox), "--out", str(out),
               "--seed", str(SEED), "--quiet"]  # fmt: skip
    finished = __import__("subprocess").run(command, capture_output=True, text=True)
    assert finished.returncode == 0, finished.stderr
    created = json.loads(path.read_text())["created_utc"]
    assert len(created) == len("2026-11-22T10:15:30.123456Z")
    sha = read_submission_file(path).sha256
    # Every exercise of the course has a column; those not submitted stay empty.
    points = {"positional-encoding": "4", "pe-worked-example": "2",
              "pe-doubled-index-bug": "2", "pe-offset-rotation": "0"}  # fmt: skip
    # A first row gives what each exercise is worth.
    ids = [exercise.id for exercise in list_exercises()]
    worth = [str(exercise.points) for exercise in list_exercises()]
    total = sum(exercise.points for exercise in list_exercises())
    assert (out / "grades.csv").read_text() == (
        f"student_id,{','.join(ids)},total,files,submitted_utc,submission,notes,similar\n"
        f"(max points),{','.join(worth)},{total},,,,,\n"
        f"ana.perez,{','.join(points.get(i, '') for i in ids)},8,1,{created},{sha},"
        "pe-offset-rotation: fail,\n"
    )


# ----------------------------------------------------------------------------- the command


def test_the_command_is_declared_as_a_console_script():
    tomllib = pytest.importorskip("tomllib", reason="Python 3.11 reads TOML (tasks.py compat)")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["course-grade"] == "course_lib.grading.cli:main"
    script = Path(sys.executable).parent / "course-grade"
    assert shutil.which(str(script)), "reinstall course_lib: python3 tasks.py setup"


def test_the_instructors_page_installs_from_the_repository_of_the_book_config():
    url = book_config()["repository"]["url"]
    assert f'pip install "course-lib @ git+{url}"' in (ROOT / "instructors.md").read_text()


def test_the_jobs_default_to_the_cpu_count():
    options = cli.build_parsers()["grade"].parse_args(["x", "--out", "y"])
    assert options.jobs == len(os.sched_getaffinity(0))


def test_the_progress_bar_writes_a_line_per_tenth_outside_a_terminal():
    stream = io.StringIO()
    bar = ProgressBar(20, stream=stream)
    for _ in range(20):
        bar.update()
    bar.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 10 and lines[-1].startswith("grading 20/20 [") and "100%" in lines[-1]


def test_created_times_with_fewer_decimals_sort_correctly():
    from course_lib.grading.inputs import normalise_utc

    assert normalise_utc("2026-11-20T10:00:00Z") < normalise_utc("2026-11-20T10:00:00.5Z")
    assert normalise_utc("2026-11-20T10:00:00.5Z") == "2026-11-20T10:00:00.500000Z"
    assert dt.datetime.fromisoformat(normalise_utc("2026-11-20T10:00:00Z").replace("Z", "+00:00"))
