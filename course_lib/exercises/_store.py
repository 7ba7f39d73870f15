"""Where a student's answers, results and hints are kept between sessions.

One JSON file, ``progress.json``, in the folder named by the environment variable
``COURSE_LIB_HOME`` (default: ``~/.course_lib``). Every change re-reads the file under a lock
and replaces it atomically, so two notebooks open at once do not undo each other's work, and
a crash never leaves half a file. A file that cannot be read is moved aside (never deleted)
and a fresh one is started, with a warning that says where the old one went.
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

__all__ = ["home", "load", "progress_file", "update"]

FORMAT = 1


def home() -> Path:
    """The folder of the progress file: ``$COURSE_LIB_HOME`` or ``~/.course_lib``."""
    configured = os.environ.get("COURSE_LIB_HOME", "").strip()
    return Path(configured).expanduser() if configured else Path.home() / ".course_lib"


def progress_file() -> Path:
    return home() / "progress.json"


def _empty() -> dict[str, Any]:
    return {"format": FORMAT, "exercises": {}}


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks; writes are still atomic
        yield
        return
    with open(folder / "progress.lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


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
    with _locked(path.parent):
        return _read(path)


def update(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Apply ``change`` to the record in place and write it back atomically; return it."""
    path = progress_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path.parent):
        data = _read(path)
        change(data)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".progress-", suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                json.dump(data, stream, indent=1, sort_keys=True)
                stream.flush()
                os.fsync(stream.fileno())
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
    return data
