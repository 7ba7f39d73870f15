"""Run a student's function on a list of inputs without letting it hang or crash the kernel.

Where the operating system can fork (Linux, macOS), the calls run in a forked child process:
it sees the notebook's functions and imports as they are, and the parent stops it with
``kill`` when the time is up. The child sends back, one call at a time, what each call
returned (pickled) or the error it raised, so a check can say which input was too slow.
Elsewhere (Windows) the calls run in a daemon thread, which can be abandoned but not stopped.

This protects the student's kernel from mistakes; it is not a security boundary (grading
untrusted submissions is done by the instructor's grader, in its own sandbox).
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import os
import pickle
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["Call", "Outcome", "run_calls"]

MAX_OUTPUT = 4000  # characters of printed output kept
MAX_RESULT_BYTES = 64 * 2**20  # a pickled result larger than this is not sent back


@dataclass(frozen=True)
class Call:
    """Positional and keyword arguments of one call."""

    args: tuple = ()
    kwargs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    """What one call did.

    ``status`` is ``"returned"`` (``value`` holds the result), ``"raised"`` (``error`` says
    what and where), ``"not implemented"`` (the function raised ``NotImplementedError``: the
    exercise's stub), ``"timeout"`` (stopped after the time limit), ``"crashed"`` (the
    process died) or ``"unsendable"`` (the result cannot be passed back).
    """

    status: str
    value: Any = None
    error: str = ""


class _CappedText(io.TextIOBase):
    """A text stream that keeps the first ``MAX_OUTPUT`` characters and counts the rest."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.kept = 0
        self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        room = MAX_OUTPUT - self.kept
        self.parts.append(text[:room])
        self.kept += min(len(text), room)
        self.dropped += max(0, len(text) - room)
        return len(text)

    def text(self) -> str:
        more = f"\n... ({self.dropped} more characters not shown)" if self.dropped else ""
        return "".join(self.parts) + more


def _where(error: BaseException, func: Callable) -> str:
    """``"line 4 of positional_encoding: angle = ..."`` for the student's deepest frame."""
    filename = getattr(getattr(func, "__code__", None), "co_filename", None)
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == filename]
    if not frames:
        return ""
    frame = frames[-1]
    line = f": {frame.line.strip()}" if frame.line else ""
    return f" (line {frame.lineno} of {frame.name}{line})"


def _describe_error(error: BaseException, func: Callable) -> str:
    text = str(error).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(error).__name__}{': ' + first if first else ''}{_where(error, func)}"


def _call(func: Callable, call: Call) -> Outcome:
    try:
        value = func(*call.args, **call.kwargs)
    except NotImplementedError:
        return Outcome("not implemented", error="the function raises NotImplementedError")
    except BaseException as error:  # SystemExit and KeyboardInterrupt too
        return Outcome("raised", error=_describe_error(error, func))
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().clone()
    return Outcome("returned", value=value)


def _encode(outcome: Outcome) -> bytes:
    try:
        data = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as error:  # any object may fail to pickle
        kind = type(outcome.value).__name__
        return pickle.dumps(Outcome("unsendable", error=f"returned a {kind} ({error})"))
    if len(data) > MAX_RESULT_BYTES:
        size = len(data) / 2**20
        return pickle.dumps(Outcome("unsendable", error=f"returned {size:.0f} MB of data"))
    return data


def _block(functions: Sequence[Callable]) -> None:
    """Make each function raise when called (in the child only): the reference is off limits."""
    for function in functions:
        name = function.__name__
        source = (
            "def blocked(*args, **kwargs):\n"
            f"    raise RuntimeError('this exercise asks you to write the computation yourself; "
            f"your code called course_lib\\'s {name}, which the check does not allow')\n"
        )
        namespace: dict = {}
        exec(source, namespace)
        function.__code__ = namespace["blocked"].__code__


def _child(
    func: Callable, calls: Sequence[Call], blocked: Sequence[Callable], connection: Any
) -> None:
    torch.set_num_threads(1)  # no thread pool in the child: nothing to deadlock after fork
    _block(blocked)
    captured = _CappedText()
    with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
        for call in calls:
            outcome = _call(func, call)
            connection.send_bytes(_encode(outcome))
    connection.send_bytes(pickle.dumps(captured.text()))
    connection.close()


def _run_forked(
    func: Callable, calls: Sequence[Call], timeout: float, blocked: Sequence[Callable]
) -> tuple[list[Outcome], str]:
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(func, calls, blocked, sender), daemon=True)
    with warnings.catch_warnings():  # Python >= 3.12 warns about forking a threaded process
        warnings.simplefilter("ignore", DeprecationWarning)
        process.start()
    sender.close()
    outcomes: list[Outcome] = []
    output = ""
    deadline = time.monotonic() + timeout
    try:
        while len(outcomes) < len(calls):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not receiver.poll(remaining):
                outcomes.append(Outcome("timeout", error=f"no result within {timeout:g} s"))
                break
            try:
                outcomes.append(pickle.loads(receiver.recv_bytes()))
            except (EOFError, OSError):
                process.join(1)
                code = process.exitcode
                outcomes.append(Outcome("crashed", error=_exit_message(code)))
                break
        else:
            if receiver.poll(max(0.0, deadline - time.monotonic()) + 1.0):
                output = pickle.loads(receiver.recv_bytes())
    finally:
        if process.is_alive():
            process.kill()
        process.join()
        receiver.close()
    return outcomes, output


def _exit_message(code: int | None) -> str:
    if code is not None and code < 0:
        return f"the process running the function was killed by signal {-code}"
    return f"the function ended the process running it (exit code {code})"


def _run_threaded(
    func: Callable, calls: Sequence[Call], timeout: float
) -> tuple[list[Outcome], str]:
    outcomes: list[Outcome] = []

    def work() -> None:
        for call in calls:
            outcomes.append(_call(func, call))

    captured = _CappedText()
    worker = threading.Thread(target=work, daemon=True)
    with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
        worker.start()
        worker.join(timeout)
    done = list(outcomes)
    if worker.is_alive():
        done.append(
            Outcome(
                "timeout",
                error=f"no result within {timeout:g} s (it keeps running in the background: "
                "restart the kernel if the notebook becomes slow)",
            )
        )
    return done, captured.text()


def can_fork() -> bool:
    """True where calls run in a child process that can be stopped."""
    return hasattr(os, "fork") and "fork" in multiprocessing.get_all_start_methods()


def run_calls(
    func: Callable,
    calls: Sequence[Call],
    *,
    timeout: float = 10.0,
    blocked: Sequence[Callable] = (),
) -> tuple[list[Outcome], str]:
    """Call ``func`` on each of ``calls`` in turn, within ``timeout`` seconds in all.

    Returns the outcome of every call made (the list is shorter than ``calls`` when one timed
    out or crashed: that one is last) and what the function printed, truncated.

    Args:
        func: the student's function.
        calls: the arguments of each call.
        timeout: wall-clock seconds for all the calls together.
        blocked: functions the student's code may not call (they raise inside the child).
    """
    if not callable(func):
        raise TypeError(f"expected a function, got {type(func).__name__}")
    if timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if can_fork() and sys.platform != "win32":
        return _run_forked(func, calls, timeout, blocked)
    return _run_threaded(func, calls, timeout)
