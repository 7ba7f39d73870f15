"""Where a student's answers, results and hints are kept between sessions.

One JSON file, ``progress.json``, in the folder named by the environment variable
``COURSE_LIB_HOME`` (default: ``~/.course_lib``). Every change re-reads the file under a lock
and replaces it atomically, so two notebooks open at once do not undo each other's work, and
a crash never leaves half a file (a temporary file left by a process killed while writing is
removed by the next write). A file that cannot be read is moved aside (never deleted) and a
fresh one is started, with a warning that says where the old one went. A folder where nothing
can be written (read-only, full) raises :class:`ProgressNotSaved`, which says what to do.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["ProgressNotSaved", "home", "load", "progress_file", "update"]

FORMAT = 1


class ProgressNotSaved(OSError):
    """The progress file could not be written; the message says why and what to do."""


def home() -> Path:
    """The folder of the progress file: ``$COURSE_LIB_HOME`` or ``~/.course_lib``."""
    configured = os.environ.get("COURSE_LIB_HOME", "").strip()
    return Path(configured).expanduser() if configured else Path.home() / ".course_lib"


def progress_file() -> Path:
    return home() / "progress.json"


def _empty() -> dict[str, Any]:
    return {"format": FORMAT, "exercises": {}}


@contextlib.contextmanager
def _locked(folder: Path, *, required: bool = True) -> Iterator[bool]:
    """Hold the folder's lock; yields whether it is held. Without ``required``, a lock file
    that cannot be made (a read-only folder) means reading without the lock."""
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks; writes are still atomic
        yield False
        return
    try:
        handle = open(folder / "progress.lock", "a+")
    except OSError:
        if required:
            raise
        yield False
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _remove_stale_temporary_files(folder: Path) -> None:
    """Remove temporary files that a writer killed mid-write left: a writer holds the lock
    for as long as its temporary file exists, so under the lock no living writer has one."""
    for path in folder.glob(".progress-*.tmp"):
        with contextlib.suppress(OSError):
            path.unlink()


def _not_saved(path: Path, error: OSError) -> ProgressNotSaved:
    reason = error.strerror or str(error)
    return ProgressNotSaved(
        error.errno,
        f"your progress could not be saved in {path} ({reason}). The result shown is not "
        "lost for this session, but submit() takes only saved answers: point "
        "COURSE_LIB_HOME to a folder you can write to, with free space (for example "
        "os.environ['COURSE_LIB_HOME'] = 'course_lib_progress'), and check again",
    )


def _read(path: Path) -> dict[str, Any]:
    if not path.exists():
        return _empty()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        _check_structure(data)
        return data
    except (ValueError, UnicodeDecodeError) as error:
        aside = _free_name(path.parent, f"progress.unreadable-{time.strftime('%Y%m%d-%H%M%S')}")
        path.replace(aside)
        warnings.warn(
            f"{path} could not be read ({error}); it was moved to {aside} and a new progress "
            "file was started",
            RuntimeWarning,
            stacklevel=3,
        )
        return _empty()


def _check_structure(data: object) -> None:
    """``ValueError`` unless ``data`` has the shape this module writes."""
    if not isinstance(data, dict) or not isinstance(data.get("exercises"), dict):
        raise ValueError("not a course_lib progress file")
    for exercise_id, entry in data["exercises"].items():
        if not isinstance(entry, dict):
            raise ValueError(f"the entry of {exercise_id!r} is not an object")
        for key in ("attempts", "hints_shown"):
            if not isinstance(entry.get(key, 0), int):
                raise ValueError(f"{exercise_id}: {key} is not a whole number")
        for key in ("answer", "result"):
            if not isinstance(entry.get(key, {}), dict):
                raise ValueError(f"{exercise_id}: {key} is not an object")


def _free_name(folder: Path, stem: str) -> Path:
    """``folder/stem.json``, or ``stem-2.json``, ... : a name no file has yet."""
    candidate, number = folder / f"{stem}.json", 1
    while candidate.exists():
        number += 1
        candidate = folder / f"{stem}-{number}.json"
    return candidate


def load() -> dict[str, Any]:
    """The whole progress record: ``{"format": 1, "exercises": {id: {...}}}``."""
    path = progress_file()
    if not path.exists():
        return _empty()
    with _locked(path.parent, required=False):
        return _read(path)


def update(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Apply ``change`` to the record in place and write it back atomically; return it.

    Raises:
        ProgressNotSaved: the folder cannot be written (read-only, full, not a folder).
    """
    path = progress_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(path.parent) as locked:
            if locked:
                _remove_stale_temporary_files(path.parent)
            data = _read(path)
            change(data)
            _write(path, data)
    except ProgressNotSaved:
        raise
    except OSError as error:
        raise _not_saved(path, error) from None
    return data


def _write(path: Path, data: dict[str, Any]) -> None:
    temporary = None
    try:
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".progress-", suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            json.dump(data, stream, indent=1, sort_keys=True)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        raise
