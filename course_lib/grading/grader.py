"""Grading one submission: what runs where, and what each outcome is worth.

Nothing written in a submission is trusted: its scores, local results, points and checksum
are ignored, every answer is checked again here. Choice and value answers are checked in the
grader's own process (they are data). The source of a code answer is judged by the steps of
:mod:`course_lib.answers.judging`, the ones a student's check takes: it runs in a
sandboxed worker (:mod:`course_lib.grading.sandbox`) on the exercise's fixed inputs and on
random inputs drawn from the instructor's grading seed, which students never saw; only the
values it returns come back, and they are compared here with ``course_lib``'s reference.

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

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from course_lib import answers
from course_lib.answers import STATUSES, Check, Outcome, Prepared, Verdict, check_status
from course_lib.exercises import CodeExercise, Exercise, UnknownExerciseError, get_exercise
from course_lib.grading.sandbox import Job, Limits

__all__ = ["STATUSES", "Grade", "Grader", "Settings"]


@dataclass(frozen=True)
class Settings:
    """How code answers are run.

    Attributes:
        seed: the grading seed: the random inputs of code exercises are drawn from it.
        timeout: wall-clock seconds for all inputs of one code exercise; ``None``: each
            exercise's own limit (the one students' checks use, 10 s by default).
        submission_timeout: wall-clock seconds for all code exercises of one submission;
            ``None``: the sum of their own limits, so that an answer that passed its check
            within its limit is never cut short by the answers before it.
        limits: memory, processes and file size of the process running one exercise.
    """

    seed: int
    timeout: float | None = None
    submission_timeout: float | None = None
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
        check_status(self.status, STATUSES)

    @classmethod
    def of(cls, exercise: Exercise, verdict: Verdict) -> Grade:
        """The grade a verdict earns: all the exercise's points when ``ok``, else none."""
        points = exercise.points if verdict.ok else 0
        return cls(exercise.id, verdict.status, points, exercise.points, verdict.message,
                   verdict.checks, verdict.output, verdict.seconds)  # fmt: skip

    def checks_json(self) -> str:
        return json.dumps([c.to_dict() for c in self.checks], ensure_ascii=False)


def _invalid(exercise_id: str, max_points: int, message: str) -> Grade:
    return Grade(exercise_id, "invalid", 0, max_points, message)


@dataclass
class Plan:
    """What grading one submission takes: grades known at once, and code to run."""

    grades: list[Grade]
    tasks: list[dict[str, Any]]
    exercises: list[CodeExercise]

    def job(self, key: Any, timeout: float | None) -> Job | None:
        """The code to run, within ``timeout`` seconds in all (``None``: the sum of the
        tasks' own limits)."""
        if not self.tasks:
            return None
        total = timeout if timeout is not None else sum(t["timeout"] for t in self.tasks)
        return Job(key, self.tasks, total)


class Grader:
    """Grades submission documents with one set of :class:`Settings`."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._prepared: dict[str, Prepared] = {}

    # ----------------------------------------------------------------- inputs

    def prepared(self, exercise: CodeExercise) -> Prepared:
        """The cases of ``exercise`` for the grading seed, computed once per run."""
        if exercise.id not in self._prepared:
            self._prepared[exercise.id] = answers.prepare(exercise, self.settings.seed)
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
                refused = answers.refusal(exercise, entry["answer"])
                if refused is not None:
                    plan.grades.append(Grade.of(exercise, refused))
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
        return Grade.of(exercise, answers.judge(checks))

    def _task(self, exercise: CodeExercise, answer: dict[str, Any]) -> dict[str, Any]:
        prepared = self.prepared(exercise)
        limits = self.settings.limits.to_dict()
        return answers.make_task(exercise, answer, prepared, self.timeout(exercise), limits)

    # ----------------------------------------------------------------- outcomes

    def interpret(self, exercise: CodeExercise, outcome: Outcome) -> Grade:
        """The grade of a code answer from what the worker reported."""
        verdict = answers.interpret(
            exercise,
            self.prepared(exercise),
            outcome,
            self.timeout(exercise),
            self.settings.submission_timeout,
        )
        return Grade.of(exercise, verdict)


def grade_document(
    grader: Grader, document: dict[str, Any], run: Callable[[Job], list[Outcome]]
) -> list[Grade]:
    """Every grade of one submission, running its code with ``run`` (tests and tools)."""
    plan = grader.plan(document)
    grades = list(plan.grades)
    job = plan.job(None, grader.settings.submission_timeout)
    if job is not None:
        outcomes = run(job)
        grades += [grader.interpret(e, o) for e, o in zip(plan.exercises, outcomes, strict=True)]
    return grades
