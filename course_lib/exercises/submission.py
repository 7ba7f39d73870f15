"""Submission files: what ``submit`` writes and what a grader reads.

A submission is one JSON document (UTF-8) described by the JSON Schema
``course_lib/exercises/schemas/submission-1.schema.json``; see the book's "Exercises and
submissions" page. Its ``sha256`` is the SHA-256 of the document without that field,
serialised canonically: ``json.dumps(data, sort_keys=True, separators=(",", ":"),
ensure_ascii=False).encode("utf-8")``. The hash detects damage in transit, not tampering:
graders re-run everything.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import platform
import re
import sys
import tempfile
import unicodedata
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import torch

import course_lib
from course_lib.exercises import _store
from course_lib.exercises._registry import list_exercises

__all__ = [
    "SCHEMA_VERSION",
    "SubmissionError",
    "content_hash",
    "parse_submission",
    "read_submission",
    "schema",
    "submit",
    "validate_student_id",
]

SCHEMA_VERSION = 1
FORMAT = "course-lib-submission"
STUDENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}")  # over the whole id: fullmatch
MAX_SUBMISSION_BYTES = 5 * 2**20


class SubmissionError(ValueError):
    """A submission cannot be written or read; the message says why."""


@cache
def schema(version: int = SCHEMA_VERSION) -> dict[str, Any]:
    """The JSON Schema of submission files of this ``version``."""
    name = f"submission-{version}.schema.json"
    try:
        folder = resources.files("course_lib.exercises").joinpath("schemas")
        text = folder.joinpath(name).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SubmissionError(f"no schema for submission version {version!r}") from None
    return json.loads(text)


def content_hash(data: dict[str, Any]) -> str:
    """SHA-256 (hex) of ``data`` without its ``sha256`` field, in canonical JSON."""
    body = {key: value for key, value in data.items() if key != "sha256"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def validate_student_id(student_id: object) -> str:
    """Return ``student_id`` if it is safe to use in a file name; else a ``SubmissionError``.

    Allowed: 1 to 100 characters, letters, digits and ``. _ @ + -``, starting with a letter or
    digit (``ana.perez``, ``s1234567``, ``ana@uni.edu``), and nothing else: the rule holds
    over the whole text (``"ana.perez\n"`` is refused for its line feed).
    """
    if not isinstance(student_id, str):
        raise SubmissionError(f"student_id must be text, got {type(student_id).__name__}")
    rules = (
        "use 1 to 100 letters, digits and . _ @ + -, starting with a letter or digit, "
        "e.g. 'ana.perez' or 's1234567'"
    )
    if not student_id.strip():
        raise SubmissionError(f"student_id is empty; {rules}")
    if "/" in student_id or "\\" in student_id or student_id.startswith((".", "~")):
        raise SubmissionError(f"student_id {student_id!r} looks like a path; {rules}")
    control = [c for c in student_id if unicodedata.category(c).startswith("C")]
    if control:
        raise SubmissionError(
            f"student_id {student_id!r} contains control characters {control!r}; {rules}"
        )
    if len(student_id) > 100:
        raise SubmissionError(f"student_id is {len(student_id)} characters long; {rules}")
    if not STUDENT_ID.fullmatch(student_id):
        bad = sorted({c for c in student_id if not re.match(r"[A-Za-z0-9._@+-]", c)})
        what = f"the characters {''.join(bad)!r}" if bad else "a character in the wrong place"
        raise SubmissionError(f"student_id {student_id!r} contains {what}; {rules}")
    return student_id


def _versions() -> dict[str, str]:
    return {
        "course_lib_version": course_lib.__version__,
        "python_version": platform.python_version(),
        "torch_version": torch.__version__,
        "platform": platform.platform(terse=True),
    }


def build_submission(student_id: str, chapter: str | None = None) -> dict[str, Any]:
    """The submission document for the exercises recorded so far (of ``chapter``, if given)."""
    student_id = validate_student_id(student_id)
    recorded = _store.load()["exercises"]
    exercises = []
    for exercise in list_exercises(chapter):
        entry = recorded.get(exercise.id, {})
        if "answer" not in entry or "result" not in entry:
            continue
        item = {
            "id": exercise.id,
            "chapter": exercise.chapter,
            "kind": exercise.kind,
            "points": exercise.points,
            "answer": entry["answer"],
            "result": entry["result"],
            "attempts": entry.get("attempts", 1),
            "hints_shown": entry.get("hints_shown", 0),
        }
        problem = _first_error(item, "#/$defs/exercise")
        if problem:
            print(
                f"Left out {exercise.id}: its record in {_store.progress_file()} is damaged "
                f"({problem}); check it again to include it."
            )
            continue
        exercises.append(item)
    if not exercises:
        where = f" of chapter {chapter!r}" if chapter else ""
        raise SubmissionError(
            f"there is nothing to submit: no exercise{where} has been checked yet in this "
            f"environment (progress is kept in {_store.progress_file()}); run check(...) on "
            "your answers first"
        )
    created = dt.datetime.now(dt.timezone.utc)
    data: dict[str, Any] = {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        **_versions(),
        "student_id": student_id,
        "created_utc": created.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "exercises": exercises,
    }
    data["sha256"] = content_hash(data)
    problem = _first_error(data)
    if problem:  # a bug in course_lib, not the student's doing: say so rather than write it
        raise SubmissionError(f"course_lib built a submission its own schema rejects: {problem}")
    return data


def _first_error(data: object, definition: str | None = None) -> str:
    """The first way ``data`` breaks the schema (or one of its ``$defs``), or ``""``."""
    from jsonschema import Draft202012Validator

    rules = schema() if definition is None else {"$defs": schema()["$defs"], "$ref": definition}
    errors = sorted(Draft202012Validator(rules).iter_errors(data), key=lambda e: e.path)
    if not errors:
        return ""
    where = "/".join(str(p) for p in errors[0].absolute_path) or "(top level)"
    return f"at {where}: {errors[0].message}"


def _write_new(folder: Path, stem: str, content: bytes) -> Path:
    """Write ``content`` to a new file ``stem.json`` (or ``stem-2.json``, ...) atomically.

    The bytes go to a temporary file first, flushed to disk, which is then hard-linked under
    its final name: the link fails rather than replace an existing file, and a reader never
    sees a partial file. Where hard links are not supported, the file is created exclusively.
    """
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".submission-", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(content)
            stream.flush()
            os.fsync(stream.fileno())
        for attempt in range(1, 1000):
            target = folder / (f"{stem}.json" if attempt == 1 else f"{stem}-{attempt}.json")
            try:
                os.link(temporary, target)
                return target
            except FileExistsError:
                continue
            except OSError:  # no hard links on this file system
                try:
                    with open(target, "xb") as stream:
                        stream.write(content)
                    return target
                except FileExistsError:
                    continue
        raise SubmissionError(f"could not find a free file name for {stem} in {folder}")
    finally:
        os.unlink(temporary)


def _offer_download(path: Path) -> None:
    """On Colab, start the browser download of ``path`` (the file stays on the runtime too)."""
    if "google.colab" not in sys.modules:
        return
    try:
        from google.colab import files  # type: ignore[import-not-found]

        files.download(str(path))
    except Exception as error:  # the file is written; say how to fetch it by hand
        print(f"Could not start the download ({error}); fetch {path} from the Files panel.")


def submit(student_id: str, folder: str | os.PathLike = ".", *, chapter: str | None = None) -> Path:
    """Write your answers and results to a new submission file and return its path.

    The file, ``submission-<student_id>-<UTC time>.json`` in ``folder`` (created if missing),
    holds every exercise you have checked (of ``chapter`` only, if given): for code exercises
    the source of your function and what it uses, for the others your answer, each with the
    last local result. Earlier submission files are never overwritten. On Colab the file is
    also downloaded by your browser; hand it in as your course tells you.

    Raises:
        SubmissionError: for an empty or unsafe ``student_id``, or when nothing was checked.
    """
    data = build_submission(student_id, chapter)
    content = (json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False) + "\n").encode()
    if len(content) > MAX_SUBMISSION_BYTES:
        raise SubmissionError(
            f"the submission would be {len(content) / 2**20:.1f} MB; at most "
            f"{MAX_SUBMISSION_BYTES / 2**20:.0f} MB is accepted"
        )
    target = Path(folder).expanduser()
    if target.exists() and not target.is_dir():
        raise SubmissionError(f"{target} exists and is not a folder")
    target.mkdir(parents=True, exist_ok=True)
    stamp = data["created_utc"].replace("-", "").replace(":", "").replace(".", "")
    path = _write_new(target, f"submission-{data['student_id']}-{stamp}", content)
    passed = sum(e["result"]["status"] == "passed" for e in data["exercises"])
    print(f"Wrote {path}: {len(data['exercises'])} exercises, {passed} passed locally.")
    for entry in data["exercises"]:
        if entry["answer"].get("note"):
            print(f"Note on {entry['id']}: {entry['answer']['note']}")
    _offer_download(path)
    return path


def _not_json(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def read_submission(path: str | os.PathLike) -> dict[str, Any]:
    """Read a submission file and check it: size, JSON, schema, version and ``sha256``.

    Raises:
        SubmissionError: saying what is wrong, with the file name.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_SUBMISSION_BYTES:
            raise SubmissionError(
                f"{path}: {size / 2**20:.1f} MB is larger than a submission "
                f"can be ({MAX_SUBMISSION_BYTES / 2**20:.0f} MB)"
            )
        content = path.read_bytes()
    except OSError as error:
        raise SubmissionError(f"{path}: not a readable JSON file ({error})") from None
    return parse_submission(content, str(path))


def parse_submission(content: bytes, name: str = "submission") -> dict[str, Any]:
    """Check the bytes of a submission file (JSON, format, version, schema, ``sha256``) and
    return the document; ``name`` starts the messages.

    Raises:
        SubmissionError: saying what is wrong.
    """
    try:
        data = json.loads(content.decode("utf-8"), parse_constant=_not_json)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise SubmissionError(f"{name}: not a readable JSON file ({error})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise SubmissionError(f"{name}: not a course_lib submission (no 'format': '{FORMAT}')")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise SubmissionError(
            f"{name}: schema_version {version!r} is not supported "
            f"(this course_lib reads version {SCHEMA_VERSION})"
        )
    if "student_id" in data:  # a bad id is said in its own words, before the schema's
        try:
            validate_student_id(data["student_id"])
        except SubmissionError as error:
            raise SubmissionError(
                f"{name}: does not follow the submission schema at student_id: {error}"
            ) from None
    problem = _first_error(data)
    if problem:
        raise SubmissionError(f"{name}: does not follow the submission schema {problem}")
    if content_hash(data) != data["sha256"]:
        raise SubmissionError(
            f"{name}: the content does not match its sha256 (the file was "
            "changed or damaged after it was written)"
        )
    return data
