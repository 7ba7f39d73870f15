"""How an answer to a code exercise is judged: the same steps in a student's check and in
grading.

A code answer is judged from what a submission carries, its recorded answer
(``{"function", "source", ...}``, see
:meth:`course_lib.exercises.CodeExercise.answer_record`), never from the live function in
the notebook:

1. :func:`refusal`: an answer that cannot run on its own is refused before anything runs (no
   source, a source that is not Python, one that imports ``course_lib``, or one that reads
   values from the notebook that the submission cannot carry), with a message that says how
   to fix it;
2. :func:`make_task`: the source, the inputs of a seed and what the exercise forbids become a
   task for the answer runner (:mod:`course_lib.answers.runner`), which runs it in a
   limited child process: a forked one in the student's check, one inside a grading
   worker's sandbox in grading;
3. :func:`interpret`: the runner's outcome becomes a :class:`Verdict`, each returned value
   compared with the reference by :func:`~course_lib.answers.compare.compare_results`.

Grading draws the random inputs from the instructor's seed instead of the public one; every
other step is the one the student's check takes.
"""

from __future__ import annotations

import ast
import dataclasses
import math
import multiprocessing
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from course_lib.answers import engine, runner
from course_lib.answers.compare import compare_results
from course_lib.answers.records import STATUSES, Case, Check, Outcome, Verdict

__all__ = [
    "STATUSES",
    "WHOLE_ANSWER_CHECKS",
    "CodeSpec",
    "Prepared",
    "Verdict",
    "blocked_functions",
    "course_lib_imports",
    "interpret",
    "judge",
    "make_task",
    "prepare",
    "refusal",
    "run_locally",
]

COURSE_LIB_USED = (
    "the code uses course_lib ({detail}); graded answers must compute the result "
    "themselves, so this exercise scores 0"
)
COURSE_LIB_ERROR = re.compile(r"No module named '?course_lib")
MAX_STORED_OUTPUT = 10_000
MAX_REPORTED = 2_000  # characters of an error text reported by the code's process
CHECK_STATUS = {"fail": "fail", "invalid": "fail", "error": "error", "timeout": "timeout"}
# Checks about the answer as a whole, not about one input: their messages quote no input.
WHOLE_ANSWER_CHECKS = ("signature", "source", "definition", "run", "result")


class CodeSpec(Protocol):
    """What judging needs to know of a code exercise
    (:class:`course_lib.exercises.CodeExercise` is one): the function asked for, how its
    inputs are drawn and its results compared, what it may not use."""

    id: str
    function: str
    parameters: tuple[str, ...]
    outputs: tuple[str, ...]
    seed: int
    atol: float
    rtol: float
    dtypes: tuple[torch.dtype, ...]
    blocked: tuple[Callable, ...]
    blocked_ops: tuple[str, ...]

    def cases(self, seed: int) -> Sequence[Case]: ...

    def reference(self, *args: Any, **kwargs: Any) -> Any: ...


def judge(checks: list[Check], **extra: Any) -> Verdict:
    """All or nothing: ``ok`` when every check passed; else the status of the worst check."""
    failed = [c for c in checks if not c.passed]
    if not failed:
        message = "the check passed" if len(checks) == 1 else f"all {len(checks)} checks passed"
        return Verdict("ok", message, tuple(checks), **extra)
    kinds = {c.status for c in failed}
    status = "timeout" if "timeout" in kinds else "error" if "error" in kinds else "fail"
    worst = [c for c in failed if c.status == status]
    # a recognised mistake explains the others: name it first (the instructor's summary too)
    first = next((c for c in worst if c.name == "known mistake"), worst[0])
    message = f"{len(failed)} of {len(checks)} checks did not pass; {first.name}: {first.message}"
    return Verdict(status, message, tuple(checks), **extra)


def _single(status: str, name: str, message: str, **extra: Any) -> Verdict:
    """A verdict reached before any input was checked: one check, named ``name``."""
    return Verdict(status, message, (Check(name, CHECK_STATUS[status], message),), **extra)


# --------------------------------------------------------------------------- before running


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


def refusal(exercise: CodeSpec, answer: dict[str, Any]) -> Verdict | None:
    """The verdict on an answer that cannot or must not run; ``None`` to run it."""
    source = answer.get("source")
    function = answer.get("function") or exercise.function
    if source is None:
        note = answer.get("note") or "the source could not be recorded"
        message = f"the submission has no source: {note}"
        return _single("invalid", "source", message)
    missing = answer.get("missing") or []
    if missing:
        names = ", ".join(missing)
        message = (
            f"{function} reads {names}, defined elsewhere in the notebook with a value that "
            "cannot be written into the submission, so the submitted code would not run on "
            f"its own. Compute {names} inside {function} (or in a helper function defined "
            "with def), then check again"
        )
        return _single("fail", "source", message)
    try:
        imports = course_lib_imports(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        where = f" (line {error.lineno})" if getattr(error, "lineno", None) else ""
        return _single("invalid", "source", f"the source is not valid Python{where}: {error}")
    if imports:
        message = COURSE_LIB_USED.format(detail="; ".join(imports[:3]))
        return _single("error", "source", message)
    return None


def blocked_functions(exercise: CodeSpec) -> list[list[str]]:
    """``[module, qualified name]`` of each Python function the exercise does not allow,
    outside ``course_lib`` (e.g. ``torch.nn.functional.layer_norm``): ``course_lib`` itself
    cannot be imported where answers run."""
    found = []
    for function in exercise.blocked:
        module = getattr(function, "__module__", None) or ""
        if module and module != "course_lib" and not module.startswith("course_lib."):
            found.append([module, function.__qualname__])
    return found


@dataclass
class Prepared:
    """The inputs of a code exercise for one seed, their expected results and their calls.

    A call on an input that the student's own check does not run (one drawn from a grading
    seed) is marked ``"alone"``: it runs in a process of its own, which holds no other
    case's inputs; the public cases share one process."""

    cases: list[Case]
    expected: list[Any]
    calls: list[dict[str, Any]]


def _same_arguments(a: object, b: object) -> bool:
    """Whether two arguments of a case are equal (tensors entry by entry)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.shape == b.shape
            and a.dtype == b.dtype
            and bool(torch.equal(a, b))
        )
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        pairs = zip(a, b, strict=False)
        return len(a) == len(b) and all(_same_arguments(x, y) for x, y in pairs)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_arguments(a[k], b[k]) for k in a)
    if type(a) is not type(b):
        return False
    if hasattr(a, "__dict__") and type(a).__eq__ is object.__eq__:  # e.g. a scorer: its data
        return _same_arguments(vars(a), vars(b))
    try:
        return bool(a == b)
    except Exception:  # an object without a meaningful ==: not known to be the same
        return False


def public_cases(exercise: CodeSpec, cases: list[Case]) -> list[bool]:
    """For each case, whether the student's own check runs it too (same label, same
    arguments, with the exercise's public seed)."""
    public = {case.label: case for case in exercise.cases(exercise.seed)}
    shown = []
    for case in cases:
        seen = public.get(case.label)
        shown.append(
            seen is not None
            and _same_arguments(seen.args, case.args)
            and _same_arguments(seen.kwargs, case.kwargs)
        )
    return shown


def prepare(exercise: CodeSpec, seed: int) -> Prepared:
    """The cases of ``exercise`` drawn with ``seed``, the reference's results, the calls."""
    cases = list(exercise.cases(seed))
    expected = [exercise.reference(*c.args, **c.kwargs) for c in cases]
    public = public_cases(exercise, cases) if seed != exercise.seed else [True] * len(cases)
    calls = [
        {
            "args": [runner.encode_argument(a) for a in c.args],
            "kwargs": {k: runner.encode_argument(v) for k, v in c.kwargs.items()},
            "alone": not shown,
        }
        for c, shown in zip(cases, public, strict=True)
    ]
    return Prepared(cases, expected, calls)


def make_task(
    exercise: CodeSpec,
    answer: dict[str, Any],
    prepared: Prepared,
    timeout: float,
    limits: dict[str, int] | None = None,
) -> dict[str, Any]:
    """The answer runner's task for ``answer`` on the inputs of ``prepared``."""
    return {
        "exercise": exercise.id,
        "blocked": blocked_functions(exercise),
        "blocked_ops": list(exercise.blocked_ops),
        "source": answer["source"],
        "function": answer["function"],
        "parameters": list(exercise.parameters),
        "calls": prepared.calls,
        "timeout": timeout,
        "limits": dict(limits or runner.DEFAULT_LIMITS),
    }


# --------------------------------------------------------------------------- after running


def interpret(
    exercise: CodeSpec,
    prepared: Prepared,
    outcome: Outcome,
    limit: float,
    submission_limit: float | None = None,
) -> Verdict:
    """The verdict on a code answer from what the runner reported; a malformed report is
    the code's doing (the runner only relays it)."""
    try:
        return _interpret(exercise, prepared, outcome, limit, submission_limit)
    except Exception as error:
        return _single("error", "result", f"the code's results could not be read ({error})")


def _reported(text: object) -> str:
    """A text the code's process reported (an error), cut to ``MAX_REPORTED`` characters:
    that process is the code's, so the text may be anything."""
    text = str(text)
    if len(text) > MAX_REPORTED:
        return f"{text[:MAX_REPORTED]}... ({len(text) - MAX_REPORTED} more characters)"
    return text


def _output(outcome: Outcome, messages: list[dict[str, Any]]) -> str:
    output = outcome.output[:MAX_STORED_OUTPUT]
    dropped = next((m.get("dropped") for m in messages if m.get("event") == "done"), 0)
    if isinstance(dropped, int) and dropped > 0:
        output += f"\n... ({dropped} more characters not shown)"
    return output


def _interpret(
    exercise: CodeSpec,
    prepared: Prepared,
    outcome: Outcome,
    limit: float,
    submission_limit: float | None,
) -> Verdict:
    status = outcome.status
    messages = [m for m in outcome.messages if isinstance(m, dict)]
    extra = {"output": _output(outcome, messages), "seconds": outcome.seconds}
    if status == "skipped":
        limit_text = "" if submission_limit is None else f" of {submission_limit:g} s"
        message = (
            f"not run: the submission's code used up its time limit{limit_text} on earlier "
            "exercises"
        )
        return _single("timeout", "run", message, **extra)
    if status in ("worker lost", "worker error"):
        what = outcome.exit
        if status == "worker lost":
            message = (
                f"the code stopped the grading process that ran it ({what}); this "
                "happens when code kills or suspends its parent process"
            )
        else:
            message = f"the grader failed while running this code ({what}); regrade it"
        return _single("error", "run", message, **extra)
    load = next((m for m in messages if m.get("event") == "load"), None)
    failed = next((m for m in messages if m.get("event") == "failed"), None)
    stopped = _stop_message(outcome, limit, submission_limit)
    if load is None:
        if failed is not None:
            message = f"the code could not be run ({_reported(failed.get('error'))})"
            return _single("error", "definition", message, **extra)
        kind = "timeout" if status == "timeout" else "error"
        return _single(kind, "definition", f"{stopped} while the source was defined", **extra)
    error = _reported(load.get("error", ""))
    if load.get("status") == "missing":
        return _single("invalid", "definition", error, **extra)
    if load.get("status") == "signature":
        return judge([Check("signature", "fail", error)], **extra)
    if load.get("status") != "ok":
        if COURSE_LIB_ERROR.search(error):
            return _single("error", "definition", COURSE_LIB_USED.format(detail=error), **extra)
        message = f"running the source to define {exercise.function} raised {error}"
        return _single("error", "definition", message, **extra)
    calls = {
        m.get("index"): m
        for m in messages
        if m.get("event") == "call" and isinstance(m.get("index"), int)
    }
    checks = [Check("signature", "pass", f"accepts ({', '.join(exercise.parameters)})")]
    stopped_at = len(calls) if outcome.stopped_at is None else outcome.stopped_at
    for index, case in enumerate(prepared.cases):
        call = calls.get(index)
        if call is None:
            if index == stopped_at:
                kind = "timeout" if status == "timeout" else "error"
                checks.append(Check(case.label, kind, stopped))
            else:
                checks.append(Check(case.label, "error", "not run: an earlier case stopped"))
            continue
        checks.append(_case_check(exercise, case, prepared.expected[index], call))
    stub = bool(calls) and all(c.get("status") == "not implemented" for c in calls.values())
    for check in checks:
        if check.status == "error" and COURSE_LIB_ERROR.search(check.message):
            message = COURSE_LIB_USED.format(detail=check.message)
            return Verdict("error", message, tuple(checks), **extra)
    verdict = judge(checks, **extra)
    return dataclasses.replace(verdict, not_attempted=True) if stub else verdict


def _stop_message(outcome: Outcome, limit: float, submission_limit: float | None) -> str:
    if outcome.status == "timeout":
        if outcome.submission_limit and submission_limit is not None:
            return (
                f"stopped: the submission's code reached its time limit of {submission_limit:g} s"
            )
        if outcome.abandoned:
            return (
                f"no result within {limit:g} s, the time limit (it keeps running in the "
                "background: restart the kernel if the notebook becomes slow)"
            )
        return f"stopped after {limit:g} s, the time limit (is there a loop that never ends?)"
    exit_text = outcome.exit or "it ended"
    advice = ""
    if "SIGXCPU" in exit_text:
        advice = f": it used more than {math.ceil(limit) + 1} s of CPU time"
    elif "SIGKILL" in exit_text:
        advice = ": it was killed (too much memory or CPU time?)"
    return f"the process running the code ended ({exit_text}){advice}"


def _case_check(exercise: CodeSpec, case: Case, expected: Any, call: dict[str, Any]) -> Check:
    status = call.get("status")
    if status == "not implemented":
        return Check(case.label, "error", "raises NotImplementedError (the exercise's stub)")
    if status != "returned":
        return Check(case.label, "error", _reported(call.get("error", "raised an error")))
    value = call.get("value")
    if not isinstance(value, dict):
        return Check(case.label, "error", "the returned value could not be read")
    unsent = _unsent_part(exercise, expected, value)
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


def _unsent_part(exercise: CodeSpec, expected: Any, value: dict[str, Any]) -> str:
    """Why a result fails whose tensor entries were not sent back, or ``""``."""
    if value.get("kind") == "tensor" and value.get("data") is None:
        if isinstance(expected, tuple):
            return ""  # compared as a tensor where a tuple is expected: that message
        return _unsent(exercise, expected, value)
    items = value.get("items")
    if value.get("kind") != "tuple" or not isinstance(expected, tuple):
        return ""
    if not isinstance(items, list) or len(items) != len(expected):
        return ""
    names = exercise.outputs or tuple(f"part {i}" for i in range(len(expected)))
    for name, want, item in zip(names, expected, items, strict=True):
        if isinstance(item, dict) and item.get("kind") == "tensor" and item.get("data") is None:
            return f"{name}: {_unsent(exercise, want, item)}"
    return ""


def _unsent(exercise: CodeSpec, expected: torch.Tensor, value: dict[str, Any]) -> str:
    """Why a tensor whose entries were not sent back fails (its shape or its dtype)."""
    shape = tuple(value.get("shape") or ())
    if shape != tuple(expected.shape):
        return f"expected shape {tuple(expected.shape)}, got {shape}"
    names = " or ".join(str(d).removeprefix("torch.") for d in exercise.dtypes)
    return f"expected dtype {names}, got {value.get('dtype')}"


def _decoded(value: dict[str, Any]) -> object:
    """What the student's function returned, rebuilt from the runner's description: tensors
    and tuples as themselves; any other object as a stand-in of the same type name, so that
    the comparison says what came."""
    kind = value.get("kind")
    if kind == "tensor":
        return runner.decode_tensor(value) if value.get("data") is not None else torch.empty(0)
    if kind == "tuple":
        return tuple(_decoded(item) for item in value["items"])
    module, name = str(value.get("module"))[:100], str(value.get("type"))[:100]
    return type(name.rsplit(".", 1)[-1], (), {"__module__": module, "__qualname__": name})()


# --------------------------------------------------------------------------- the student's check


def can_fork() -> bool:
    """True where answers run in a child process that can be limited and stopped."""
    return (
        hasattr(os, "fork")
        and sys.platform != "win32"
        and "fork" in multiprocessing.get_all_start_methods()
    )


def run_locally(
    exercise: CodeSpec, answer: dict[str, Any], *, seed: int, timeout: float
) -> Verdict:
    """Judge a recorded answer here, as grading judges it: the student's check."""
    refused = refusal(exercise, answer)
    if refused is not None:
        return refused
    prepared = prepare(exercise, seed)
    task = make_task(exercise, answer, prepared, timeout)
    if can_fork():
        outcome = engine.run_locally(task, timeout)
    else:
        outcome = engine.run_in_thread(task, time.monotonic() + timeout)
    return interpret(exercise, prepared, outcome, timeout)
