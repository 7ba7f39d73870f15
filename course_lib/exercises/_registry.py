"""Exercises, their checks and the registry that holds every exercise of the course.

Three kinds of exercise:

- :class:`CodeExercise` -- implement a function; it is run on fixed and seeded random inputs
  and compared with ``course_lib``'s reference implementation within explicit tolerances;
- :class:`ChoiceExercise` -- pick one option; each option carries its own feedback;
- :class:`ValueExercise` -- give a number or a short vector, compared within a tolerance.

``Exercise.grade(answer)`` runs the checks and returns the list of :class:`Check` outcomes;
:func:`course_lib.exercises.check` wraps that into a :class:`Result`, shows it and records it.
"""

from __future__ import annotations

import datetime as dt
import difflib
import inspect
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import Tensor

from course_lib.answers import (
    Case,
    Check,
    SourceUnavailable,
    describe_type,
    function_source,
    run_locally,
)

__all__ = [
    "ChoiceExercise",
    "CodeExercise",
    "Exercise",
    "Mistake",
    "Option",
    "Result",
    "UnknownExerciseError",
    "ValueExercise",
    "check_timeout",
    "get_exercise",
    "list_exercises",
    "register",
]

EXERCISE_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
DEFAULT_TIMEOUT = 10.0
MAX_SOURCE = 200_000  # characters of a recorded function source (the schema's limit)
MAX_NUMBERS = 10_000  # numbers of a recorded value answer
MAX_TEXT = 200  # characters of a recorded choice, or of a value answer kept as text
STATUSES = ("passed", "failed", "not attempted")


# --------------------------------------------------------------------------- outcomes


@dataclass(frozen=True)
class Result:
    """The result of checking one answer to one exercise.

    Attributes:
        exercise_id: the exercise checked.
        status: ``"passed"`` (every check passed), ``"failed"`` or ``"not attempted"`` (the
            answer is still the stub, or empty).
        checks: the outcome of each check, in order.
        points: the points the exercise is worth.
        output: what the student's code printed while it was checked (truncated).
        checked_utc: when, as ISO 8601 UTC (``2026-11-22T10:15:30Z``).
    """

    exercise_id: str
    status: str
    checks: tuple[Check, ...]
    points: int
    output: str = ""
    checked_utc: str = field(default_factory=lambda: utc_now())

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def score(self) -> int:
        """Points earned by this local check: all of them if every check passed, else none."""
        return self.points if self.passed else 0

    @property
    def checks_passed(self) -> int:
        return sum(check.passed for check in self.checks)

    def summary(self) -> str:
        if self.status == "not attempted":
            return "not attempted yet"
        return f"{self.status}: {self.checks_passed} of {len(self.checks)} checks passed"

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "checks_passed": self.checks_passed,
            "checks_total": len(self.checks),
            "checked_utc": self.checked_utc,
            "checks": [check.to_dict() for check in self.checks],
            "output": self.output,
        }

    @classmethod
    def from_dict(cls, exercise_id: str, points: int, data: dict[str, Any]) -> Result:
        checks = tuple(Check(c["name"], c["status"], c["message"]) for c in data["checks"])
        return cls(
            exercise_id,
            data["status"],
            checks,
            points,
            data.get("output", ""),
            data["checked_utc"],
        )

    def __str__(self) -> str:
        lines = [f"{self.exercise_id}: {self.summary()}"]
        marks = {"pass": "ok  ", "fail": "FAIL", "error": "ERR ", "timeout": "TIME"}
        for check in self.checks:
            lines.append(f"  [{marks[check.status]}] {check.name}: {check.message}")
        if self.output:
            lines.append("  printed by your code:")
            lines += [f"    {line}" for line in self.output.splitlines()]
        return "\n".join(lines)


def check_timeout(timeout: object) -> float:
    """``timeout`` as seconds: a number above 0 and at most an hour; else ``ValueError``."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise ValueError(f"timeout must be a number of seconds, got {timeout!r}")
    if not (math.isfinite(timeout) and 0 < timeout <= 3600):
        raise ValueError(
            f"timeout must be a positive number of seconds, at most 3600, got {timeout!r}"
        )
    return float(timeout)


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# --------------------------------------------------------------------------- exercises


@dataclass(frozen=True, kw_only=True)
class Exercise:
    """What every exercise has.

    Attributes:
        id: stable kebab-case identifier, e.g. ``"positional-encoding"``.
        chapter: the chapter notebook's name (``chapters/<chapter>.ipynb``).
        title: a short title.
        points: what the exercise is worth when graded.
        hints: revealed one at a time by :func:`course_lib.exercises.hint`.
    """

    kind: ClassVar[str] = ""
    id: str
    chapter: str
    title: str
    points: int
    hints: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not EXERCISE_ID.match(self.id):
            raise ValueError(
                f"exercise ids are kebab-case (like 'positional-encoding'), got {self.id!r}"
            )
        if not isinstance(self.points, int) or self.points <= 0:
            raise ValueError(f"{self.id}: points must be a positive integer, got {self.points!r}")

    @property
    def checks(self) -> tuple[str, ...]:
        """The names of the checks an answer goes through, in order."""
        raise NotImplementedError

    def grade(
        self, answer: object, *, timeout: float | None = None, seed: int | None = None
    ) -> tuple[list[Check], str]:
        """Run the checks on ``answer``: the outcomes, and what the answer's code printed.

        ``timeout`` limits the run of a code answer (default: the exercise's own), ``seed``
        draws its random inputs (default: the exercise's public seed). An answer that is not
        attempted (the stub, ``None``) gives an empty list.
        """
        raise NotImplementedError

    def answer_record(self, answer: object) -> dict[str, Any]:
        """The answer as JSON-ready data for the progress file and the submission."""
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class CodeExercise(Exercise):
    """Implement a function; it must agree with the reference on every case.

    Attributes:
        function: the name and signature the student writes, e.g. ``"positional_encoding"``.
        parameters: the parameter names, in order (the student's function must accept them).
        reference: ``course_lib``'s own implementation, called with the same arguments; it
            returns a tensor, or a tuple of tensors (then ``outputs`` names the parts).
        cases: ``cases(seed)`` builds the inputs: fixed ones, and random ones drawn from a
            generator seeded with ``seed``. The student's check uses ``seed``; a grader
            passes a seed of its own, so the random inputs it uses are unseen.
        seed: the seed of the random inputs of the student's check.
        atol, rtol: tolerances of the comparison with the reference.
        dtypes: accepted dtypes of the result.
        blocked: Python functions the answer may not call (``course_lib``'s own cannot be
            imported where answers run anyway; torch's, such as ``F.layer_norm``, get a body
            that raises, whatever name they are reached by).
        blocked_ops: PyTorch operators the answer may not reach by any route, such as
            ``"aten::layer_norm"``: they raise in PyTorch's dispatcher (``torch.layer_norm``,
            ``torch.ops.aten.layer_norm``, ``nn.LayerNorm`` and every other alias).
        timeout: default wall-clock limit in seconds for all cases together.
        outputs: for a function that returns a tuple of tensors, the names of its parts in
            order, e.g. ``("output", "weights")``; each part is compared with the reference's.
    """

    kind: ClassVar[str] = "code"
    function: str
    parameters: tuple[str, ...]
    reference: Callable[..., Tensor | tuple[Tensor, ...]]
    cases: Callable[[int], Sequence[Case]]
    seed: int
    atol: float
    rtol: float = 0.0
    dtypes: tuple[torch.dtype, ...] = (torch.float32, torch.float64)
    blocked: tuple[Callable, ...] = ()
    blocked_ops: tuple[str, ...] = ()
    timeout: float = DEFAULT_TIMEOUT
    outputs: tuple[str, ...] = ()

    @property
    def checks(self) -> tuple[str, ...]:
        return ("signature", *(case.label for case in self.cases(self.seed)))

    def _signature_check(self, answer: object) -> Check:
        if not callable(answer):
            hint = f"pass the function itself: check({self.id!r}, {self.function})"
            return Check(
                "signature", "fail", f"expected a function, got {describe_type(answer)}; {hint}"
            )
        try:
            inspect.signature(answer).bind(*self.parameters)
        except TypeError:
            wanted = ", ".join(self.parameters)
            return Check(
                "signature",
                "fail",
                f"the function must accept ({wanted}); yours takes {inspect.signature(answer)}",
            )
        except ValueError:  # builtins without a signature: let the calls decide
            pass
        return Check("signature", "pass", f"accepts ({', '.join(self.parameters)})")

    def grade(
        self, answer: object, *, timeout: float | None = None, seed: int | None = None
    ) -> tuple[list[Check], str]:
        """Judge ``answer`` as grading judges it: from its recorded source, run on its own in
        a fresh namespace, in a limited child process (see
        :mod:`course_lib.answers.judging`)."""
        if answer is None:
            return [], ""
        signature = self._signature_check(answer)
        if not signature.passed:
            return [signature], ""
        limit = self.timeout if timeout is None else timeout
        verdict = run_locally(
            self,
            self.answer_record(answer),
            seed=self.seed if seed is None else seed,
            timeout=limit,
        )
        if verdict.not_attempted:
            return [], verdict.output
        checks = list(verdict.checks)
        if limit > self.timeout and verdict.seconds > self.timeout and verdict.status != "timeout":
            checks.append(self._grading_time_check(verdict.seconds))
        return checks, verdict.output

    def _grading_time_check(self, seconds: float) -> Check:
        """The check that an answer given more time than grading gives fails: it would be
        stopped there."""
        return Check(
            "grading's time limit",
            "timeout",
            f"the answer took {seconds:.1f} s in all; grading stops it after {self.timeout:g} "
            "s and it would earn nothing: make it faster (a larger timeout only lets you see "
            "its results)",
        )

    def answer_record(self, answer: object) -> dict[str, Any]:
        """``{"function": name, "source": text}``: the name of the student's function (which
        need not be ``self.function``) and a self-contained source defining it."""
        name = getattr(answer, "__name__", "")
        if not isinstance(name, str) or not name.isidentifier():
            return {"function": self.function, "source": None,
                    "note": "only functions defined with def can be submitted: define it "
                            "with def in a notebook cell, then check again"}  # fmt: skip
        try:
            source = function_source(answer)  # type: ignore[arg-type]
        except SourceUnavailable as error:
            return {"function": name, "source": None, "note": str(error)}
        except Exception as error:  # never lose the check's result over the source
            return {"function": name, "source": None,
                    "note": f"the source could not be collected ({type(error).__name__}: "
                            f"{error})"}  # fmt: skip
        if len(source.text) > MAX_SOURCE:
            return {"function": name, "source": None,
                    "note": f"the source is {len(source.text)} characters long, more than "
                            f"{MAX_SOURCE} (a large constant?)"}  # fmt: skip
        record: dict[str, Any] = {"function": name, "source": source.text}
        if source.missing:
            record["missing"] = list(source.missing)[:100]
            record["note"] = (
                f"{name} reads {', '.join(source.missing)}, defined elsewhere with a value "
                "that cannot be written out: the submitted code will not run on its own. "
                "Compute it inside the function and check again."
            )
        return record


@dataclass(frozen=True)
class Option:
    """One option of a choice exercise, with the feedback shown when it is chosen."""

    key: str
    text: str
    feedback: str


@dataclass(frozen=True, kw_only=True)
class ChoiceExercise(Exercise):
    """Pick one of ``options``; ``answer`` is the key of the right one."""

    kind: ClassVar[str] = "choice"
    question: str
    options: tuple[Option, ...]
    answer: str

    def __post_init__(self) -> None:
        super().__post_init__()
        keys = [option.key for option in self.options]
        if len(set(keys)) != len(keys) or self.answer not in keys:
            raise ValueError(f"{self.id}: option keys must be unique and include the answer")

    @property
    def checks(self) -> tuple[str, ...]:
        return ("choice",)

    def keys(self) -> list[str]:
        return [option.key for option in self.options]

    def grade(
        self, answer: object, *, timeout: float | None = None, seed: int | None = None
    ) -> tuple[list[Check], str]:
        if answer is None or answer == "":
            return [], ""
        key = str(answer).strip().lower().strip("()")
        chosen = {option.key: option for option in self.options}.get(key)
        if chosen is None:
            return [
                Check("choice", "fail", f"choose one of {', '.join(self.keys())}; got {answer!r}")
            ], ""
        status = "pass" if key == self.answer else "fail"
        return [Check("choice", status, f"({key}) {chosen.feedback}")], ""

    def answer_record(self, answer: object) -> dict[str, Any]:
        return {"choice": str(answer).strip().lower().strip("()")[:MAX_TEXT]}


@dataclass(frozen=True)
class Mistake:
    """A known wrong answer to a value exercise and the feedback that explains it."""

    value: Callable[[], Tensor]
    feedback: str


def parse_numbers(answer: object) -> Tensor:
    """Read ``answer`` as a flat float64 tensor: a number, a sequence, a tensor, an array, or
    text such as ``"0.909, -0.416"``. ``ValueError`` says what could not be read."""
    if isinstance(answer, str):
        pieces = [p for p in re.split(r"[\s,;\[\]()]+", answer.strip()) if p]
        if not pieces:
            raise ValueError("the answer is empty")
        try:
            return torch.tensor([float(p) for p in pieces], dtype=torch.float64)
        except ValueError:
            bad = next(p for p in pieces if not _is_float(p))
            raise ValueError(
                f"{bad!r} is not a number; write numbers separated by commas, like 0.5, -0.25"
            ) from None
    if isinstance(answer, bool):
        raise ValueError("expected numbers, got a bool")
    try:
        return torch.as_tensor(answer, dtype=torch.float64).reshape(-1)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(
            f"expected a number or a list of numbers, got {describe_type(answer)}"
        ) from None


def _count(size: int) -> str:
    return "1 number" if size == 1 else f"{size} numbers"


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True, kw_only=True)
class ValueExercise(Exercise):
    """Give a number or a short vector; every entry must be within ``atol`` of the answer.

    The feedback says which entries are right without giving away the others, and recognises
    known mistakes (``mistakes``) with a targeted explanation.
    """

    kind: ClassVar[str] = "value"
    question: str
    expected: Callable[[], Tensor]
    atol: float
    entry_names: tuple[str, ...] = ()
    mistakes: tuple[Mistake, ...] = ()

    @property
    def checks(self) -> tuple[str, ...]:
        return ("how many numbers", *self._names(self.expected().numel()))

    def _names(self, size: int) -> list[str]:
        return list(self.entry_names) if self.entry_names else [f"entry {j}" for j in range(size)]

    @property
    def answer_format(self) -> str:
        """What the answer box takes, for its placeholder: "one number" or "3 numbers, ..."."""
        size = self.expected().numel()
        if size == 1:
            return "one number"
        return f"{size} numbers separated by commas"

    def grade(
        self, answer: object, *, timeout: float | None = None, seed: int | None = None
    ) -> tuple[list[Check], str]:
        if answer is None or (isinstance(answer, str) and not answer.strip()):
            return [], ""
        expected = self.expected().to(torch.float64).reshape(-1)
        try:
            got = parse_numbers(answer)
        except ValueError as error:
            return [Check("how many numbers", "fail", str(error))], ""
        if got.numel() != expected.numel():
            message = f"expected {_count(expected.numel())}, got {got.numel()}"
            text = str(answer)
            grouped = re.search(r"(?<![\d.])[1-9]\d{0,2}(?:[, ]\d{3})+(?![\d.])", text)
            if isinstance(answer, str) and re.fullmatch(r"\s*\d{1,3}(,\d{3})+\s*", answer):
                plain = answer.replace(",", "").strip()
                message += f"; write the number without separators: {plain}"
            elif grouped and not re.search(r"(?<![\d.])0,\d", text):  # 0,5 is a decimal
                plain = re.sub(r"[, ]", "", grouped.group())
                message += (
                    f"; write every number without thousands separators: {plain}, "
                    f"not {grouped.group()}"
                )
            elif isinstance(answer, str) and re.search(r"\d,\d", answer):
                message += "; write decimals with a point (0.5, not 0,5)"
            return [Check("how many numbers", "fail", message)], ""
        checks = [Check("how many numbers", "pass", _count(got.numel()))]
        for name, want, have in zip(self._names(expected.numel()), expected, got, strict=True):
            if not math.isfinite(have):
                checks.append(Check(name, "fail", f"{float(have)} is not a finite number"))
            elif abs(float(have - want)) <= self.atol:
                checks.append(Check(name, "pass", f"{float(have):.10g} is right (±{self.atol:g})"))
            else:
                checks.append(
                    Check(
                        name,
                        "fail",
                        f"{float(have):.10g} is not right "
                        f"(answers within ±{self.atol:g} are accepted)",
                    )
                )
        for mistake in self.mistakes:
            wrong = mistake.value().to(torch.float64).reshape(-1)
            if not all(c.passed for c in checks) and torch.allclose(
                got, wrong, atol=self.atol, rtol=0
            ):
                checks.append(Check("known mistake", "fail", mistake.feedback))
                break
        return checks, ""

    def answer_record(self, answer: object) -> dict[str, Any]:
        """The numbers, or (when they cannot be read, are not finite or are too many) the
        answer's text."""
        try:
            numbers = parse_numbers(answer)
        except ValueError:
            numbers = None
        if numbers is None or numbers.numel() > MAX_NUMBERS or not bool(numbers.isfinite().all()):
            return {"value": None, "text": str(answer)[:MAX_TEXT]}
        return {"value": numbers.tolist()}


# --------------------------------------------------------------------------- registry

_REGISTRY: dict[str, Exercise] = {}


class UnknownExerciseError(LookupError):
    """No exercise has this id."""


def register(exercise: Exercise) -> Exercise:
    """Add ``exercise`` to the course; ids are unique."""
    if exercise.id in _REGISTRY and _REGISTRY[exercise.id] is not exercise:
        raise ValueError(f"an exercise with id {exercise.id!r} is already registered")
    _REGISTRY[exercise.id] = exercise
    return exercise


def list_exercises(chapter: str | None = None) -> tuple[Exercise, ...]:
    """Every exercise of the course in reading order, or those of one chapter."""
    exercises = tuple(_REGISTRY.values())
    if chapter is None:
        return exercises
    chosen = tuple(e for e in exercises if e.chapter == chapter)
    if not chosen:
        chapters = sorted({e.chapter for e in exercises})
        raise UnknownExerciseError(
            f"no exercises for chapter {chapter!r}; chapters with exercises: {', '.join(chapters)}"
        )
    return chosen


def get_exercise(exercise_id: str) -> Exercise:
    """The exercise with this id; ``UnknownExerciseError`` suggests close ids."""
    if isinstance(exercise_id, Exercise):
        return exercise_id
    try:
        return _REGISTRY[exercise_id]
    except (KeyError, TypeError):
        close = difflib.get_close_matches(str(exercise_id), list(_REGISTRY), n=3)
        suggestion = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise UnknownExerciseError(
            f"there is no exercise {exercise_id!r}{suggestion} (list_exercises() shows them all)"
        ) from None
