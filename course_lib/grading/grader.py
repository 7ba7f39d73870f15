"""Grading one submission: what runs where, and what each outcome is worth.

Nothing written in a submission is trusted: its scores, local results, points and checksum
are ignored, every answer is checked again here. Choice and value answers are checked in the
grader's own process (they are data). The source of a code answer runs in a sandboxed worker
(:mod:`course_lib.grading.sandbox`) on the exercise's fixed inputs and on random inputs drawn
from the instructor's grading seed, which students never saw; only the values it returns come
back, and they are compared here with ``course_lib``'s reference.

Each exercise gets one status:

- ``ok``: every check passed; the exercise's points.
- ``fail``: the code ran (or the answer was read) and a check failed.
- ``timeout``: the code was stopped by a time limit.
- ``error``: the code raised, crashed, ran into a resource limit, or used ``course_lib``.
- ``invalid``: the answer cannot be graded (no source, a syntax error, no such function,
  an exercise of another kind or not in this course).

Points are all or nothing: an exercise earns its points when every check passes, else 0.
Partial credit per check would pay for answers that only reproduce the public checks.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from course_lib.exercises._compare import compare_results
from course_lib.exercises._registry import (
    Case,
    Check,
    CodeExercise,
    Exercise,
    UnknownExerciseError,
    get_exercise,
)
from course_lib.grading._worker import decode_tensor, encode_argument
from course_lib.grading.sandbox import Job, Limits

__all__ = ["STATUSES", "Grade", "Grader", "Settings"]

STATUSES = ("ok", "fail", "timeout", "error", "invalid")
COURSE_LIB_USED = (
    "the code uses course_lib ({detail}); graded answers must compute the result "
    "themselves, so this exercise scores 0"
)
COURSE_LIB_ERROR = re.compile(r"No module named '?course_lib")
MAX_STORED_OUTPUT = 10_000


@dataclass(frozen=True)
class Settings:
    """How code answers are run.

    Attributes:
        seed: the grading seed: the random inputs of code exercises are drawn from it.
        timeout: wall-clock seconds for all inputs of one code exercise; ``None``: each
            exercise's own limit (the one students' checks use, 10 s by default).
        submission_timeout: wall-clock seconds for all code exercises of one submission.
        limits: memory, processes and file size of the process running one exercise.
    """

    seed: int
    timeout: float | None = None
    submission_timeout: float = 60.0
    limits: Limits = field(default_factory=Limits)


@dataclass(frozen=True)
class Grade:
    """The result of one exercise of one submission."""

    exercise_id: str
    status: str
    points: int
    max_points: int
    message: str
    checks: tuple[Check, ...] = ()
    output: str = ""
    seconds: float = 0.0

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    def checks_json(self) -> str:
        return json.dumps([c.to_dict() for c in self.checks], ensure_ascii=False)


def _grade(exercise_id: str, max_points: int, checks: list[Check], **extra: Any) -> Grade:
    """All or nothing: the points when every check passed; the status of the worst check."""
    failed = [c for c in checks if not c.passed]
    if not failed:
        message = "the check passed" if len(checks) == 1 else f"all {len(checks)} checks passed"
        return Grade(exercise_id, "ok", max_points, max_points, message, tuple(checks), **extra)
    kinds = {c.status for c in failed}
    status = "timeout" if "timeout" in kinds else "error" if "error" in kinds else "fail"
    first = next(c for c in failed if c.status == status)
    message = f"{len(failed)} of {len(checks)} checks did not pass; {first.name}: {first.message}"
    return Grade(exercise_id, status, 0, max_points, message, tuple(checks), **extra)


def _invalid(exercise_id: str, max_points: int, message: str) -> Grade:
    return Grade(exercise_id, "invalid", 0, max_points, message)


def course_lib_imports(source: str) -> list[str]:
    """The lines of ``source`` that import ``course_lib`` (``SyntaxError`` if it is not
    Python)."""
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            modules = [node.module or ""]
        else:
            continue
        if any(m == "course_lib" or m.startswith("course_lib.") for m in modules):
            text = lines[node.lineno - 1].strip() if node.lineno <= len(lines) else ""
            found.append(f"line {node.lineno}: {text}")
    return found


@dataclass
class _Prepared:
    """The inputs of a code exercise for one seed, their expected results and their calls."""

    cases: list[Case]
    expected: list[torch.Tensor]
    calls: list[dict[str, Any]]


@dataclass
class Plan:
    """What grading one submission takes: grades known at once, and code to run."""

    grades: list[Grade]
    tasks: list[dict[str, Any]]
    exercises: list[CodeExercise]

    def job(self, key: Any, timeout: float) -> Job | None:
        return Job(key, self.tasks, timeout) if self.tasks else None


class Grader:
    """Grades submission documents with one set of :class:`Settings`."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._prepared: dict[str, _Prepared] = {}

    # ----------------------------------------------------------------- inputs

    def prepared(self, exercise: CodeExercise) -> _Prepared:
        """The cases of ``exercise`` for the grading seed, computed once per run."""
        if exercise.id not in self._prepared:
            cases = list(exercise.cases(self.settings.seed))
            expected = [exercise.reference(*c.args, **c.kwargs) for c in cases]
            calls = [
                {
                    "args": [encode_argument(a) for a in c.args],
                    "kwargs": {k: encode_argument(v) for k, v in c.kwargs.items()},
                }
                for c in cases
            ]
            self._prepared[exercise.id] = _Prepared(cases, expected, calls)
        return self._prepared[exercise.id]

    def timeout(self, exercise: CodeExercise) -> float:
        return self.settings.timeout if self.settings.timeout is not None else exercise.timeout

    # ----------------------------------------------------------------- planning

    def plan(self, document: dict[str, Any]) -> Plan:
        """Grade what needs no code run; make a task for each code answer to run."""
        plan = Plan([], [], [])
        seen: set[str] = set()
        for entry in document["exercises"]:
            exercise_id = entry["id"]
            if exercise_id in seen:  # a file written by submit never repeats an exercise
                continue
            seen.add(exercise_id)
            try:
                exercise = get_exercise(exercise_id)
            except UnknownExerciseError:
                plan.grades.append(
                    _invalid(exercise_id, 0, f"this course has no exercise {exercise_id!r}")
                )
                continue
            if entry["kind"] != exercise.kind:
                plan.grades.append(
                    _invalid(
                        exercise.id,
                        exercise.points,
                        f"the submission answers it as a {entry['kind']} exercise; in this "
                        f"course it is a {exercise.kind} exercise",
                    )
                )
                continue
            if isinstance(exercise, CodeExercise):
                decided = self._check_source(exercise, entry["answer"])
                if decided is not None:
                    plan.grades.append(decided)
                    continue
                plan.tasks.append(self._task(exercise, entry["answer"]))
                plan.exercises.append(exercise)
            else:
                plan.grades.append(self.grade_answer(exercise, entry["answer"]))
        return plan

    def grade_answer(self, exercise: Exercise, answer: dict[str, Any]) -> Grade:
        """A choice or value answer, checked here."""
        if exercise.kind == "choice":
            given: Any = answer.get("choice", "")
        else:
            given = answer.get("value")
            if given is None:
                given = answer.get("text", "")
        checks, _ = exercise.grade(given)
        if not checks:
            return _invalid(exercise.id, exercise.points, "the answer is empty")
        return _grade(exercise.id, exercise.points, checks)

    def _check_source(self, exercise: CodeExercise, answer: dict[str, Any]) -> Grade | None:
        """A grade for a code answer that cannot or must not run; ``None`` to run it."""
        source = answer.get("source")
        if source is None:
            note = answer.get("note") or "the source could not be recorded"
            return _invalid(exercise.id, exercise.points, f"the submission has no source: {note}")
        try:
            imports = course_lib_imports(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
            where = f" (line {error.lineno})" if getattr(error, "lineno", None) else ""
            return _invalid(
                exercise.id, exercise.points, f"the source is not valid Python{where}: {error}"
            )
        if imports:
            detail = "; ".join(imports[:3])
            return Grade(
                exercise.id, "error", 0, exercise.points, COURSE_LIB_USED.format(detail=detail)
            )
        return None

    def _task(self, exercise: CodeExercise, answer: dict[str, Any]) -> dict[str, Any]:
        return {
            "exercise": exercise.id,
            "blocked": blocked_outside_course_lib(exercise),
            "source": answer["source"],
            "function": answer["function"],
            "parameters": list(exercise.parameters),
            "calls": self.prepared(exercise).calls,
            "timeout": self.timeout(exercise),
            "limits": self.settings.limits.to_dict(),
        }

    # ----------------------------------------------------------------- outcomes

    def interpret(self, exercise: CodeExercise, outcome: dict[str, Any]) -> Grade:
        """The grade of a code answer from what the worker reported."""
        try:
            return self._interpret(exercise, outcome)
        except Exception as error:  # a malformed report: the code's doing, since the worker
            message = f"the grader could not read what the code returned ({error})"
            return Grade(exercise.id, "error", 0, exercise.points, message)

    def _interpret(self, exercise: CodeExercise, outcome: dict[str, Any]) -> Grade:
        prepared = self.prepared(exercise)
        limit = self.timeout(exercise)
        status = outcome.get("status")
        messages = [m for m in outcome.get("messages", []) if isinstance(m, dict)]
        output = str(outcome.get("output", ""))[:MAX_STORED_OUTPUT]
        dropped = next((m.get("dropped") for m in messages if m.get("event") == "done"), 0)
        if isinstance(dropped, int) and dropped > 0:
            output += f"\n... ({dropped} more characters not shown)"
        seconds = float(outcome.get("seconds") or 0.0)
        extra = {"output": output, "seconds": seconds}
        points = exercise.points
        if status == "skipped":
            message = (
                f"not run: the submission's code used up its time limit of "
                f"{self.settings.submission_timeout:g} s on earlier exercises"
            )
            return Grade(exercise.id, "timeout", 0, points, message, **extra)
        if status in ("worker lost", "worker error"):
            what = outcome.get("exit", "")
            if status == "worker lost":
                message = (
                    f"the code stopped the grading process that ran it ({what}); this "
                    "happens when code kills or suspends its parent process"
                )
            else:
                message = f"the grader failed while running this code ({what}); regrade it"
            return Grade(exercise.id, "error", 0, points, message, **extra)
        load = next((m for m in messages if m.get("event") == "load"), None)
        failed = next((m for m in messages if m.get("event") == "failed"), None)
        stopped = self._stop_message(outcome, limit)
        if load is None:
            if failed is not None:
                message = f"the grader could not run the code ({failed.get('error')})"
                return Grade(exercise.id, "error", 0, points, message, **extra)
            kind = "timeout" if status == "timeout" else "error"
            return Grade(
                exercise.id, kind, 0, points, f"{stopped} while the source was defined", **extra
            )
        error = str(load.get("error", ""))
        if load.get("status") == "missing":
            return Grade(exercise.id, "invalid", 0, points, error, **extra)
        if load.get("status") == "signature":
            checks = [Check("signature", "fail", error)]
            return _grade(exercise.id, points, checks, **extra)
        if load.get("status") != "ok":
            if COURSE_LIB_ERROR.search(error):
                message = COURSE_LIB_USED.format(detail=error)
                return Grade(exercise.id, "error", 0, points, message, **extra)
            message = f"running the source to define {exercise.function} raised {error}"
            return Grade(exercise.id, "error", 0, points, message, **extra)
        calls = {
            m.get("index"): m
            for m in messages
            if m.get("event") == "call" and isinstance(m.get("index"), int)
        }
        checks = [Check("signature", "pass", f"accepts ({', '.join(exercise.parameters)})")]
        for index, case in enumerate(prepared.cases):
            call = calls.get(index)
            if call is None:
                if index == len(calls):
                    kind = "timeout" if status == "timeout" else "error"
                    checks.append(Check(case.label, kind, stopped))
                else:
                    checks.append(Check(case.label, "error", "not run: an earlier case stopped"))
                continue
            checks.append(self._case_check(exercise, case, prepared.expected[index], call))
        for check in checks:
            if check.status == "error" and COURSE_LIB_ERROR.search(check.message):
                message = COURSE_LIB_USED.format(detail=check.message)
                return Grade(exercise.id, "error", 0, points, message, tuple(checks), **extra)
        return _grade(exercise.id, points, checks, **extra)

    def _stop_message(self, outcome: dict[str, Any], limit: float) -> str:
        if outcome.get("status") == "timeout":
            if outcome.get("submission_limit"):
                return (
                    f"stopped: the submission's code reached its time limit of "
                    f"{self.settings.submission_timeout:g} s"
                )
            return f"stopped after {limit:g} s, the time limit (is there a loop that never ends?)"
        exit_text = str(outcome.get("exit", "it ended"))
        advice = ""
        if "SIGXCPU" in exit_text:
            advice = f": it used more than {math.ceil(limit) + 1} s of CPU time"
        elif "SIGKILL" in exit_text:
            advice = ": it was killed (too much memory or CPU time?)"
        return f"the process running the code ended ({exit_text}){advice}"

    def _case_check(
        self, exercise: CodeExercise, case: Case, expected: torch.Tensor, call: dict[str, Any]
    ) -> Check:
        status = call.get("status")
        if status == "not implemented":
            return Check(case.label, "error", "raises NotImplementedError (the exercise's stub)")
        if status != "returned":
            return Check(case.label, "error", str(call.get("error", "raised an error")))
        value = call.get("value")
        if not isinstance(value, dict):
            return Check(case.label, "error", "the returned value could not be read")
        unsent = self._unsent_part(exercise, expected, value)
        if unsent:
            return Check(case.label, "fail", unsent)
        try:
            got = _decoded(value)
        except (KeyError, TypeError, ValueError):
            return Check(case.label, "error", "the returned value could not be read")
        verdict = compare_results(
            expected,
            got,
            names=exercise.outputs,
            atol=exercise.atol,
            rtol=exercise.rtol,
            expected_dtypes=exercise.dtypes,
        )
        return Check(case.label, "pass" if verdict.ok else "fail", verdict.message)

    def _unsent_part(
        self, exercise: CodeExercise, expected: torch.Tensor | tuple, value: dict[str, Any]
    ) -> str:
        """Why a result fails whose tensor entries were not sent back, or ``""``."""
        if value.get("kind") == "tensor" and value.get("data") is None:
            if isinstance(expected, tuple):
                return ""  # compared as a tensor where a tuple is expected: that message
            return self._unsent(exercise, expected, value)
        items = value.get("items")
        if value.get("kind") != "tuple" or not isinstance(expected, tuple):
            return ""
        if not isinstance(items, list) or len(items) != len(expected):
            return ""
        names = exercise.outputs or tuple(f"part {i}" for i in range(len(expected)))
        for name, want, item in zip(names, expected, items, strict=True):
            if isinstance(item, dict) and item.get("kind") == "tensor" and item.get("data") is None:
                return f"{name}: {self._unsent(exercise, want, item)}"
        return ""

    @staticmethod
    def _unsent(exercise: CodeExercise, expected: torch.Tensor, value: dict[str, Any]) -> str:
        """Why a tensor whose entries were not sent back fails (its shape or its dtype)."""
        shape = tuple(value.get("shape") or ())
        if shape != tuple(expected.shape):
            return f"expected shape {tuple(expected.shape)}, got {shape}"
        names = " or ".join(str(d).removeprefix("torch.") for d in exercise.dtypes)
        return f"expected dtype {names}, got {value.get('dtype')}"


def blocked_outside_course_lib(exercise: CodeExercise) -> list[list[str]]:
    """``[module, qualified name]`` of each function the exercise does not allow that the
    sandbox has (torch's, e.g. ``torch.nn.functional.layer_norm``); course_lib's own are
    missing there altogether."""
    found = []
    for function in exercise.blocked:
        module = getattr(function, "__module__", None) or ""
        if module and module != "course_lib" and not module.startswith("course_lib."):
            found.append([module, function.__qualname__])
    return found


def _decoded(value: dict[str, Any]) -> object:
    """What the student's function returned, rebuilt from the worker's description: tensors
    and tuples as themselves; any other object as a stand-in of the same type name, so that
    the comparison says what came exactly as the student's own check does."""
    kind = value.get("kind")
    if kind == "tensor":
        return decode_tensor(value) if value.get("data") is not None else torch.empty(0)
    if kind == "tuple":
        return tuple(_decoded(item) for item in value["items"])
    module, name = str(value.get("module"))[:100], str(value.get("type"))[:100]
    return type(name.rsplit(".", 1)[-1], (), {"__module__": module, "__qualname__": name})()


def grade_document(
    grader: Grader, document: dict[str, Any], run: Callable[[Job], list[dict[str, Any]]]
) -> list[Grade]:
    """Every grade of one submission, running its code with ``run`` (tests and tools)."""
    plan = grader.plan(document)
    grades = list(plan.grades)
    job = plan.job(None, grader.settings.submission_timeout)
    if job is not None:
        outcomes = run(job)
        grades += [grader.interpret(e, o) for e, o in zip(plan.exercises, outcomes, strict=True)]
    return grades
