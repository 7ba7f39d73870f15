"""The records the answers engine takes and gives: a case, a check, an outcome, a verdict.

An answer to a code exercise goes through three records, in this order:

1. :class:`Case`: one input of the exercise (the arguments, and the label its check is shown
   under);
2. :class:`Outcome`: what running the answer on every case reported, before anything is
   judged: how the run ended (:data:`OUTCOME_STATUSES`), the messages of the processes that
   ran it (``load``, a ``call`` per case and ``done``, or ``failed``), what it printed;
3. :class:`Verdict`: what the answer earned, a status of :data:`STATUSES`, from the
   :class:`Check` of each case.

A student's check and grading build the same records with the same code; only where the
answer runs differs (a fork server per notebook kernel, or one inside a grading sandbox).
This module uses the standard library alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CHECK_STATUSES",
    "OUTCOME_STATUSES",
    "STATUSES",
    "Case",
    "Check",
    "Outcome",
    "Verdict",
    "check_status",
]

CHECK_STATUSES = ("pass", "fail", "error", "timeout")
STATUSES = ("ok", "fail", "timeout", "error", "invalid")
# done: every case ran (or the source could not be defined); timeout: the time limit came
# first; crashed: a process running the answer died; skipped: the submission's time was used
# up before this answer ran; worker lost / worker error: the grading worker died, or the
# grader failed (grading only).
OUTCOME_STATUSES = ("done", "timeout", "crashed", "skipped", "worker lost", "worker error")


def check_status(status: object, allowed: tuple[str, ...]) -> None:
    """Refuse a record's ``status`` that is not one of ``allowed``."""
    if status not in allowed:
        raise ValueError(f"status must be one of {allowed}, got {status!r}")


@dataclass(frozen=True)
class Case:
    """One input of a code exercise: the arguments and a label shown as the check's name."""

    label: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Check:
    """The outcome of one check: its name, ``pass``/``fail``/``error``/``timeout`` and why."""

    name: str
    status: str
    message: str

    def __post_init__(self) -> None:
        check_status(self.status, CHECK_STATUSES)

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "status": self.status, "message": self.message}


@dataclass(frozen=True)
class Outcome:
    """What running an answer reported, before it is judged.

    Attributes:
        status: how the run ended, one of :data:`OUTCOME_STATUSES`.
        messages: what the processes that ran the answer sent, in order (``{"event": "load",
            ...}``, ``{"event": "call", "index": i, ...}`` per case, ``{"event": "done"}``,
            or ``{"event": "failed", ...}``). They come from the answer's own process: a
            reader checks each field before using it.
        output: what the answer printed (capped).
        seconds: how long the run took.
        exit: how a process ended when it died (``"crashed"``), or what happened to the
            grading worker (``"worker lost"``, ``"worker error"``).
        stopped_at: the index of the case that was running when the run stopped.
        abandoned: the call still runs in a thread it could not be stopped in (where the
            system cannot fork).
        submission_limit: the run was stopped by the submission's time limit rather than
            the exercise's.
    """

    status: str
    messages: tuple[dict[str, Any], ...] = ()
    output: str = ""
    seconds: float = 0.0
    exit: str = ""
    stopped_at: int | None = None
    abandoned: bool = False
    submission_limit: bool = False

    def __post_init__(self) -> None:
        check_status(self.status, OUTCOME_STATUSES)
        object.__setattr__(self, "messages", tuple(self.messages))


@dataclass(frozen=True)
class Verdict:
    """What an answer earned: a status of :data:`STATUSES`, a one-line message, the checks.

    ``not_attempted`` is true when every input raised ``NotImplementedError`` (the exercise's
    stub): a student's check then shows "not attempted", grading an error.
    """

    status: str
    message: str
    checks: tuple[Check, ...]
    output: str = ""
    seconds: float = 0.0
    not_attempted: bool = False

    def __post_init__(self) -> None:
        check_status(self.status, STATUSES)

    @property
    def ok(self) -> bool:
        return self.status == "ok"
