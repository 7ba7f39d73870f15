"""Finding and reading submission files, whatever state they arrive in.

Every file becomes a :class:`SubmissionFile`: valid (the document, checked against the
submission schema, its version and its checksum) or invalid with a message saying why. Nothing
here raises for a bad file, so one broken file never stops a batch.

A file is known by the SHA-256 of its bytes, computed here: the gradebook keys submissions by
it, so reading the same file again (from another folder, or in a second run) adds nothing. A
path that gives no bytes (a FIFO, a device, an empty file, a dangling link, no permission) is
known by its absolute path and the reason instead, so each such path has a row of its own
with its own reason, and reading it again adds nothing either.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import hashlib
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from course_lib.exercises.submission import (
    MAX_SUBMISSION_BYTES,
    SubmissionError,
    parse_submission,
    validate_student_id,
)

__all__ = ["SubmissionFile", "find_submission_files", "read_submission_file"]

# Both are matched over the whole text (fullmatch): `$` would also match before a final "\n".
FILE_NAME = re.compile(r"submission-(?P<student>.+)-\d{8}T\d{6,12}Z(-\d+)?\.json")
UTC = re.compile(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,6}))?Z")


@dataclass(frozen=True)
class SubmissionFile:
    """One file as the grader read it.

    Attributes:
        path: where it was read.
        sha256: SHA-256 (hex) of its bytes, the submission's key in the gradebook. For a file
            larger than a submission may be, of its size and first bytes.
        size: its size in bytes.
        valid: whether it is a readable submission of a supported version.
        message: why it is invalid (``""`` when valid).
        student_id: the student, from the document, or for an invalid file from the document
            or the file name when either holds a usable id; else ``None``.
        created_utc: when ``submit`` wrote it, with six decimals (valid files only).
        content: the file's text (valid files only).
    """

    path: str
    sha256: str
    size: int
    valid: bool
    message: str = ""
    student_id: str | None = None
    created_utc: str | None = None
    content: str | None = None


def find_submission_files(paths: Iterable[str | os.PathLike]) -> tuple[list[Path], list[str]]:
    """The files to read: each path that is a file, and the ``*.json`` files inside each
    folder (recursively, skipping hidden files and folders, not following links to folders).

    Returns the files in a stable order, without repeats, and a message for each path that
    does not exist.
    """
    found: dict[str, Path] = {}
    missing = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            for folder, folders, files in os.walk(path):
                folders[:] = sorted(f for f in folders if not f.startswith("."))
                for name in sorted(files):
                    if name.lower().endswith(".json") and not name.startswith("."):
                        candidate = Path(folder) / name
                        found.setdefault(os.path.abspath(candidate), candidate)
        elif path.exists() or path.is_symlink():
            found.setdefault(os.path.abspath(path), path)
        else:
            missing.append(f"{path}: no such file or folder")
    return list(found.values()), missing


def normalise_utc(text: str) -> str:
    """``2026-11-22T10:15:30.5Z`` as ``2026-11-22T10:15:30.500000Z``: times with six decimals
    sort correctly as text.

    Raises:
        ValueError: ``text`` is not such a time, or not a real one (``2026-13-45T99:00:00Z``,
            which would sort after every true time and which SQLite cannot read as a date).
    """
    match = UTC.fullmatch(text)
    if not match:
        raise ValueError(f"not a UTC time: {text!r}")
    try:
        dt.datetime.strptime(match[1], "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        raise ValueError(f"not a real date and time: {text!r}") from None
    return f"{match[1]}.{(match[2] or '').ljust(6, '0')}Z"


class Unreadable(Exception):
    """A path that gives no bytes to read; the message says why, in a few words."""


UNREADABLE_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe), not a regular file",
    stat.S_IFCHR: "a character device, not a regular file",
    stat.S_IFBLK: "a block device, not a regular file",
    stat.S_IFSOCK: "a socket, not a regular file",
    stat.S_IFDIR: "a folder, not a regular file",
}


def _open_error(path: Path, error: OSError) -> str:
    """Why ``path`` could not be opened, in words (a dangling link says where it leads)."""
    if error.errno == errno.ENOENT and path.is_symlink():
        try:
            return f"a link to a missing file ({os.readlink(path)})"
        except OSError:
            return "a link to a missing file"
    if error.errno == errno.ELOOP:
        return "a link that leads back to itself (too many levels of links)"
    if error.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    with contextlib.suppress(OSError):
        kind = stat.S_IFMT(os.stat(path).st_mode)
        if kind in UNREADABLE_KINDS:  # a socket, or a device with no driver (ENXIO)
            return UNREADABLE_KINDS[kind]
    if error.errno == errno.ENOENT:
        return "no such file (removed while it was being read?)"
    return error.strerror or str(error)


def _read_bytes(path: Path) -> tuple[bytes, int]:
    """At most one byte more than a submission may have, and the file's size. Only regular
    files are read (a FIFO or a device is refused, not waited on).

    Raises:
        Unreadable: the path gives nothing to read (not a regular file, empty, a dangling
            link, no permission...).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as error:
        raise Unreadable(_open_error(path, error)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = stat.S_IFMT(info.st_mode)
            raise Unreadable(UNREADABLE_KINDS.get(kind, f"not a regular file (type {kind:o})"))
        with os.fdopen(os.dup(fd), "rb") as stream:
            content = stream.read(MAX_SUBMISSION_BYTES + 1)
    except OSError as error:
        raise Unreadable(error.strerror or str(error)) from None
    finally:
        os.close(fd)
    if not content:
        raise Unreadable("an empty file (0 bytes)")
    return content, info.st_size


def unreadable_key(path: Path, reason: str) -> str:
    """The gradebook key of a path that could not be read: one per path and reason (the same
    path read again is the same row; two unreadable paths are two rows)."""
    return hashlib.sha256(f"unreadable:{os.path.abspath(path)}:{reason}".encode()).hexdigest()


def _student_hint(path: Path, data: Any) -> str | None:
    """A student id for an invalid file: from its document, or from its file name."""
    candidates = []
    if isinstance(data, dict):
        candidates.append(data.get("student_id"))
    match = FILE_NAME.fullmatch(path.name)
    if match:
        candidates.append(match["student"])
    for candidate in candidates:
        try:
            return validate_student_id(candidate)
        except SubmissionError:
            continue
    return None


def read_submission_file(path: str | os.PathLike) -> SubmissionFile:
    """Read and check one file; an invalid file gives ``valid=False`` and a message."""
    path = Path(path)
    try:
        content, size = _read_bytes(path)
    except Unreadable as error:
        reason = str(error)
        message = f"{path}: not read: {reason}"
        key = unreadable_key(path, reason)
        return SubmissionFile(str(path), key, 0, False, message, _student_hint(path, None))
    if size > MAX_SUBMISSION_BYTES or len(content) > MAX_SUBMISSION_BYTES:
        size = max(size, len(content))
        digest = hashlib.sha256(f"too large:{size}:".encode() + content).hexdigest()
        message = (
            f"{path}: {size / 2**20:.1f} MB is larger than a submission can be "
            f"({MAX_SUBMISSION_BYTES / 2**20:.0f} MB); it was not read"
        )
        return SubmissionFile(str(path), digest, size, False, message, _student_hint(path, None))
    digest = hashlib.sha256(content).hexdigest()
    try:
        data = parse_submission(content, str(path))
        try:
            created = normalise_utc(data["created_utc"])
        except ValueError as error:
            raise SubmissionError(f"{path}: created_utc is {error}") from None
    except SubmissionError as error:
        return SubmissionFile(
            str(path), digest, size, False, str(error), _student_hint(path, _loose_json(content))
        )
    except Exception as error:  # a document no check foresaw: still only this file's problem
        message = f"{path}: could not be checked ({type(error).__name__}: {error})"
        return SubmissionFile(str(path), digest, size, False, message, _student_hint(path, None))
    return SubmissionFile(
        str(path),
        digest,
        size,
        True,
        "",
        data["student_id"],
        created,
        content.decode("utf-8"),
    )


def _loose_json(content: bytes) -> Any:
    """The JSON document in ``content`` if there is one, else ``None`` (never raises)."""
    import json

    try:
        return json.loads(content.decode("utf-8"))
    except Exception:
        return None
