"""Knowing, after the grader was killed, which answer was running: marks of code in progress.

Without a sandbox (``--sandbox none``) an answer can kill the grader itself (``kill -9`` on
its process, found in ``/proc``, or on every process of the account). Run again, the grader
would run that answer again and be killed again, every time. So before each code answer
runs, the grader records in the gradebook (committed) which submission, which exercise and
which run of the grader it is; the mark goes when the submission's results are saved, and
when the run ends in any way Python sees (finished, Ctrl-C, an error).

A mark left by a run whose process is gone was left by a run that was killed (or stopped
and killed) while that answer ran. The next run records that exercise as ``error`` with
:data:`KILLED_GRADER`, does not run it again, and grades the submission's other exercises
as usual. ``course-grade regrade`` of the student runs it again.
"""

from __future__ import annotations

import contextlib
import os
import secrets

from course_lib.answers import process_stat
from course_lib.grading.gradebook import Gradebook
from course_lib.grading.grader import Grade, Plan

__all__ = ["KILLED_GRADER", "InProgress", "run_is_gone", "this_run"]

KILLED_GRADER = (
    "the code killed or stopped the grader: an earlier run of the grader ended abruptly while "
    "this code was running, so it was not run again (regrading the student runs it again)"
)
_ACTIVE: set[str] = set()  # the runs of this process that are still going


def _boot_id() -> str:
    with contextlib.suppress(OSError), open("/proc/sys/kernel/random/boot_id") as boot:
        return boot.read().strip()
    return "unknown-boot"


def _start_time(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot), ``None`` if there is none."""
    fields = process_stat(pid)
    return fields[19] if fields is not None and len(fields) > 19 else None


def this_run() -> str:
    """A new run of the grader in this process: ``boot/pid/start time/token``."""
    pid = os.getpid()
    return f"{_boot_id()}/{pid}/{_start_time(pid)}/{secrets.token_hex(4)}"


def run_is_gone(run: str) -> bool:
    """Whether the run ``run`` (from :func:`this_run`) has ended: its process is gone (not
    running since this boot with the same start time), or it is this process but not one of
    its runs still going."""
    try:
        boot, pid_text, started, _ = run.split("/")
        pid = int(pid_text)
    except ValueError:
        return True
    if boot != _boot_id() or _start_time(pid) != started:
        return True
    return pid == os.getpid() and run not in _ACTIVE


class InProgress:
    """The marks of one run of the grader on ``book``.

    Made at the start of a run, it reads the marks that runs now gone left behind:
    :meth:`spare` takes their exercises out of a submission's plan, :meth:`starting` marks an
    answer about to run, :meth:`close` removes this run's marks.
    """

    def __init__(self, book: Gradebook) -> None:
        self.book = book
        self.run = this_run()
        self.killed: dict[str, set[str]] = {}
        for row in book.running_marks():
            if run_is_gone(row["run"]):
                self.killed.setdefault(row["sha256"], set()).add(row["exercise_id"])
        self.spared: list[tuple[str, str]] = []  # (sha256, exercise id) not run again

    def spare(self, sha256: str, plan: Plan) -> Plan:
        """``plan`` without the code answers that were running when an earlier run was
        killed: those are graded ``error`` with :data:`KILLED_GRADER` instead."""
        killed = self.killed.get(sha256, set())
        if not killed:
            return plan
        kept = Plan(list(plan.grades), [], [])
        for task, exercise in zip(plan.tasks, plan.exercises, strict=True):
            if exercise.id in killed:
                kept.grades.append(Grade(exercise.id, "error", 0, exercise.points, KILLED_GRADER))
                self.spared.append((sha256, exercise.id))
            else:
                kept.tasks.append(task)
                kept.exercises.append(exercise)
        return kept

    def starting(self, sha256: str, exercise_id: str) -> None:
        """Record (committed) that this run is about to run ``exercise_id`` of ``sha256``."""
        _ACTIVE.add(self.run)
        self.book.mark_running(sha256, exercise_id, self.run)

    def close(self) -> None:
        """Remove this run's marks: it ended in a way Python saw, so no answer killed it."""
        _ACTIVE.discard(self.run)
        self.book.clear_running(self.run)
