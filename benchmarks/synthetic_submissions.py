"""Synthetic submission files for the "Positional encoding" exercises, for benchmarks.

    python benchmarks/synthetic_submissions.py OUT_DIR [--count 200] [--seed 0]

writes ``count`` submission files, one per student, each a valid version-1 submission (with
its checksum) unless its kind is one of the broken files, in a realistic mix of what students
hand in: mostly correct answers written in different ways, plausible wrong answers, answers
that hard-code the public checks or call course_lib's reference, and a few that misbehave
(loop forever, allocate without bound, fork, print megabytes, exit, write files), plus
files that are not valid submissions at all. ``KINDS`` lists every kind with its share.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import textwrap
from pathlib import Path

import torch

import course_lib
from course_lib.exercises import get_exercise
from course_lib.exercises.submission import FORMAT, SCHEMA_VERSION, content_hash

HEADER = "import math\nimport torch\n\n"

CORRECT_ENCODINGS = [
    """
    def positional_encoding(max_len, d_model):
        position = torch.arange(max_len, dtype=torch.float32)[:, None]
        pair = torch.arange(d_model // 2, dtype=torch.float32)
        angle = position * 10000.0 ** (-2 * pair / d_model)
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(angle)
        pe[:, 1::2] = torch.cos(angle)
        return pe
    """,
    """
    def positional_encoding(max_len, d_model):
        pe = torch.zeros(max_len, d_model, dtype=torch.float64)
        for pos in range(max_len):
            for i in range(d_model // 2):
                angle = pos / 10000 ** (2 * i / d_model)
                pe[pos, 2 * i] = math.sin(angle)
                pe[pos, 2 * i + 1] = math.cos(angle)
        return pe
    """,
    """
    def positional_encoding(max_len, d_model):
        div = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        angle = torch.arange(max_len).unsqueeze(1) * div
        return torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(max_len, d_model)
    """,
]

WRONG_ENCODINGS = {
    "swapped sin and cos": """
    def positional_encoding(max_len, d_model):
        angle = torch.arange(max_len)[:, None] * 10000.0 ** (-torch.arange(0, d_model, 2) / d_model)
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2], pe[:, 1::2] = torch.cos(angle), torch.sin(angle)
        return pe
    """,
    "doubled index": """
    def positional_encoding(max_len, d_model):
        column = torch.arange(0, d_model, 2)
        angle = torch.arange(max_len)[:, None] * 10000.0 ** (-2 * column / d_model)
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
        return pe
    """,
    "positions from 1": """
    def positional_encoding(max_len, d_model):
        angle = torch.arange(1, max_len + 1)[:, None] * 10000.0 ** (
            -torch.arange(0, d_model, 2) / d_model)
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
        return pe
    """,
    "transposed": """
    def positional_encoding(max_len, d_model):
        angle = torch.arange(max_len)[:, None] * 10000.0 ** (-torch.arange(0, d_model, 2) / d_model)
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
        return pe.T
    """,
    "returns a list": """
    def positional_encoding(max_len, d_model):
        return [[0.0] * d_model for _ in range(max_len)]
    """,
}

CORRECT_ROTATION = """
def offset_matrix(offset, d_model):
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(d_model // 2):
        angle = offset * 10000.0 ** (-2 * i / d_model)
        c, s = math.cos(angle), math.sin(angle)
        m[2 * i, 2 * i], m[2 * i + 1, 2 * i] = c, s
        m[2 * i, 2 * i + 1], m[2 * i + 1, 2 * i + 1] = -s, c
    return m
"""

WRONG_ROTATION = """
def offset_matrix(offset, d_model):
    return torch.eye(d_model)
"""

MISBEHAVING = {
    "loops forever": "\n    while True:\n        pass\n",
    "allocates without bound": (
        "\n    hoard = []\n    while True:\n        hoard.append(bytearray(2**26))\n"
    ),
    "forks without end": "\n    import os\n    while True:\n        os.fork()\n",
    "prints megabytes": "\n    print('x' * 10**7)\n",
    "calls sys.exit": "\n    import sys\n    sys.exit(3)\n",
    "writes and deletes files": (
        "\n    import os, shutil\n    open('big.bin', 'wb').write(b'0' * 2**20)\n"
        "    shutil.rmtree('/tmp', ignore_errors=True)\n"
        "    shutil.rmtree(os.path.expanduser('~'), ignore_errors=True)\n"
    ),
}

# kind: share of the submissions
KINDS = {
    "correct": 0.50,
    "wrong": 0.20,
    "hard-coded public checks": 0.06,
    "calls course_lib": 0.06,
    "misbehaves": 0.12,
    "broken file": 0.03,
    "choice and value only": 0.03,
}


def _source(text: str) -> str:
    return HEADER + textwrap.dedent(text).strip() + "\n"


def _misbehaving(kind: str) -> str:
    """A correct encoding that first does something harmful."""
    body = textwrap.dedent(CORRECT_ENCODINGS[0]).strip().split("\n", 1)
    return HEADER + body[0] + MISBEHAVING[kind] + body[1] + "\n"


def _hard_coded() -> str:
    """An answer that returns the tables of the public checks, learnt by heart."""
    exercise = get_exercise("positional-encoding")
    tables = {}
    for case in exercise.cases(exercise.seed):
        table = exercise.reference(*case.args)
        tables[case.args] = [[round(x, 6) for x in row] for row in table.tolist()]
    return (
        HEADER
        + f"TABLES = {tables!r}\n\n"
        + "def positional_encoding(max_len, d_model):\n"
        + "    return torch.tensor(TABLES.get((max_len, d_model), [[0.0] * d_model] * max_len))\n"
    )


CALLS_COURSE_LIB = [
    """
    from course_lib.positional import sinusoidal_positional_encoding

    def positional_encoding(max_len, d_model):
        return sinusoidal_positional_encoding(max_len, d_model)
    """,
    """
    import importlib

    def positional_encoding(max_len, d_model):
        library = importlib.import_module("course" + "_lib.positional")
        return library.sinusoidal_positional_encoding(max_len, d_model)
    """,
]


def _result(passed: bool) -> dict:
    """A local result as the student's check recorded it (the grader ignores it)."""
    status = "pass" if passed else "fail"
    return {
        "status": "passed" if passed else "failed",
        "checks_passed": int(passed),
        "checks_total": 1,
        "checked_utc": "2026-11-20T10:00:00.000000Z",
        "checks": [{"name": "signature", "status": status, "message": "recorded locally"}],
        "output": "",
    }


def _entry(exercise_id: str, answer: dict, passed: bool = True) -> dict:
    exercise = get_exercise(exercise_id)
    return {
        "id": exercise.id,
        "chapter": exercise.chapter,
        "kind": exercise.kind,
        "points": exercise.points,
        "answer": answer,
        "result": _result(passed),
        "attempts": 1,
        "hints_shown": 0,
    }


def document(student_id: str, entries: list[dict], created: dt.datetime) -> dict:
    """A valid version-1 submission document, with its checksum."""
    data = {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "course_lib_version": course_lib.__version__,
        "python_version": "3.11.7",
        "torch_version": torch.__version__,
        "platform": "Linux",
        "student_id": student_id,
        "created_utc": created.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "exercises": entries,
    }
    data["sha256"] = content_hash(data)
    return data


def make_submission(kind: str, student_id: str, draw: random.Random) -> bytes:
    """The bytes of one submission file of ``kind`` (a key of ``KINDS``)."""
    created = dt.datetime(2026, 11, 20, tzinfo=dt.timezone.utc) + dt.timedelta(
        seconds=draw.randrange(86400)
    )
    choice = _entry("pe-doubled-index-bug", {"choice": draw.choice("abbb")})
    value = _entry("pe-worked-example", {"value": [0.909, -0.416, 0.02, 1.0]})
    rotation_source = CORRECT_ROTATION if draw.random() < 0.7 else WRONG_ROTATION
    rotation = _entry(
        "pe-offset-rotation", {"function": "offset_matrix", "source": _source(rotation_source)}
    )
    if kind == "correct":
        source = _source(draw.choice(CORRECT_ENCODINGS))
    elif kind == "wrong":
        source = _source(draw.choice(list(WRONG_ENCODINGS.values())))
    elif kind == "hard-coded public checks":
        source = _hard_coded()
    elif kind == "calls course_lib":
        source = _source(draw.choice(CALLS_COURSE_LIB))
    elif kind == "misbehaves":
        source = _misbehaving(draw.choice(list(MISBEHAVING)))
    elif kind == "choice and value only":
        return _dump(document(student_id, [value, choice], created))
    elif kind == "broken file":
        text = _dump(document(student_id, [value, choice], created))
        damage = draw.choice(["truncated", "not json", "edited", "version"])
        if damage == "truncated":
            return text[: len(text) // 2]
        if damage == "not json":
            return b"{this is not JSON"
        data = json.loads(text)
        if damage == "edited":
            data["exercises"][0]["result"]["status"] = "passed"
            data["exercises"][0]["answer"]["value"] = [1, 1, 1, 1]
        else:
            data["schema_version"] = 99
        return _dump(data)
    else:
        raise ValueError(f"unknown kind {kind!r}; kinds: {', '.join(KINDS)}")
    encoding = _entry("positional-encoding", {"function": "positional_encoding", "source": source})
    return _dump(document(student_id, [encoding, value, choice, rotation], created))


def _dump(data: dict) -> bytes:
    return (json.dumps(data, indent=1) + "\n").encode("utf-8")


def kinds_for(count: int, draw: random.Random) -> list[str]:
    """``count`` kinds in the proportions of ``KINDS`` (at least one of each), shuffled."""
    kinds = [k for k, share in KINDS.items() for _ in range(max(1, round(share * count)))]
    kinds = (kinds + ["correct"] * count)[:count]
    draw.shuffle(kinds)
    return kinds


def write_submissions(folder: str | Path, count: int = 200, seed: int = 0) -> dict[str, str]:
    """Write ``count`` submission files into ``folder``; return each file's kind by name."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    draw = random.Random(seed)
    written = {}
    for number, kind in enumerate(kinds_for(count, draw)):
        student = f"s{number:05d}"
        name = f"submission-{student}-20261120T100000000000Z.json"
        (folder / name).write_bytes(make_submission(kind, student, draw))
        written[name] = kind
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="folder to write the files into")
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args()
    written = write_submissions(options.out, options.count, options.seed)
    counts = {k: list(written.values()).count(k) for k in KINDS}
    print(f"wrote {len(written)} files to {options.out}: {counts}")


if __name__ == "__main__":
    main()
