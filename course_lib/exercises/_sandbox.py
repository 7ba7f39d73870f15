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
import math
import multiprocessing
import os
import pickle
import re
import sys
import tempfile
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

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
    """A text stream that keeps the first ``MAX_OUTPUT`` characters and counts the rest.

    With a ``sink`` (a binary file), the kept text is also written there at once, so that the
    parent can read what a process printed even after it had to be killed.
    """

    def __init__(self, sink: BinaryIO | None = None) -> None:
        self.parts: list[str] = []
        self.kept = 0
        self.dropped = 0
        self.sink = sink

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        room = MAX_OUTPUT - self.kept
        kept = printable(text[:room])
        self.parts.append(kept)
        self.kept += min(len(text), room)
        self.dropped += max(0, len(text) - room)
        if self.sink is not None and kept:
            self.sink.write(kept.encode("utf-8"))
            self.sink.flush()
        return len(text)

    def text(self) -> str:
        return "".join(self.parts) + _dropped_note(self.dropped)


def _dropped_note(dropped: int) -> str:
    return f"\n... ({dropped} more characters not shown)" if dropped else ""


def printable(text: str) -> str:
    """``text`` with anything that cannot be encoded as UTF-8 (lone surrogates) escaped."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


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
    note = ""
    if isinstance(error, MemoryError) or "allocate" in first:
        note = f" (the check lets your code use about {memory_allowance() / 2**30:.0f} GB)"
    elif "forked subprocess" in first:  # CUDA cannot start again after fork
        note = " (the check runs your code in a forked process, on the CPU: keep tensors there)"
    described = f"{type(error).__name__}{': ' + first if first else ''}{note}"
    return printable(described + _where(error, func))


def _call(func: Callable, call: Call) -> Outcome:
    try:
        value = func(*call.args, **call.kwargs)
    except BaseException as error:  # SystemExit and KeyboardInterrupt too
        if type(error) is NotImplementedError:  # the stub (not its subclasses, e.g. for input())
            return Outcome("not implemented", error="the function raises NotImplementedError")
        return Outcome("raised", error=_describe_error(error, func))
    try:
        if isinstance(value, torch.Tensor):
            value = _readable(value)
        elif isinstance(value, (tuple, list)):  # e.g. attention's (output, weights)
            parts = [_readable(v) if isinstance(v, torch.Tensor) else v for v in value]
            value = tuple(parts) if isinstance(value, tuple) else parts
    except Exception as error:  # meta tensors, exotic layouts
        return Outcome("raised", error=f"returned a tensor that cannot be read ({error})")
    return Outcome("returned", value=value)


def _readable(tensor: torch.Tensor) -> torch.Tensor:
    """A detached CPU copy, which pickles (a tensor in an autograd graph does not)."""
    return tensor.detach().cpu().clone()


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
        module = getattr(function, "__module__", "") or ""
        owner = "course_lib\\'s " if module.startswith("course_lib") else f"{module}."
        source = (
            "def blocked(*args, **kwargs):\n"
            f"    raise RuntimeError('this exercise asks you to write the computation yourself; "
            f"your code called {owner}{name}, which the check does not allow')\n"
        )
        namespace: dict = {}
        exec(source, namespace)
        function.__code__ = namespace["blocked"].__code__


def memory_allowance() -> int:
    """Bytes of memory a checked function may allocate: half the RAM, at most 4 GiB."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return 4 * 2**30
    return min(4 * 2**30, physical // 2)


def _limit_memory() -> None:
    """Cap the child's address space at its current size plus :func:`memory_allowance`.

    Linux only (elsewhere the limit is not enforced and nothing is set): an allocation past
    the cap fails at once with an error, instead of pushing the machine into swap or getting
    the whole runtime killed.
    """
    try:
        import resource

        status = Path("/proc/self/status").read_text()
    except (ImportError, OSError):
        return
    found = re.search(r"^VmSize:\s+(\d+) kB", status, flags=re.MULTILINE)
    if not found:
        return
    limit = int(found[1]) * 1024 + memory_allowance()
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _quiet_displays() -> None:
    """Drop rich output (``display``, inline figures) in the child: a forked process cannot
    send it to the notebook, and ipykernel would log every attempt."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None and getattr(shell, "display_pub", None) is not None:
        shell.display_pub.publish = lambda *args, **kwargs: None


def _child(
    func: Callable,
    calls: Sequence[Call],
    blocked: Sequence[Callable],
    connection: Any,
    unused_end: Any,
    sink: BinaryIO,
) -> None:
    unused_end.close()  # the parent's end: without it, a stuck reader would never see EOF
    me = os.getpid()
    torch.set_num_threads(1)  # no thread pool in the child: nothing to deadlock after fork
    _block(blocked)
    _limit_memory()
    _quiet_displays()
    captured = _CappedText(sink)
    with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
        for call in calls:
            outcome = _call(func, call)
            if os.getpid() != me:  # the student's code forked: the copy stops here
                os._exit(0)
            connection.send_bytes(_encode(outcome))
    connection.send_bytes(pickle.dumps(captured.dropped))
    connection.close()


def _run_forked(
    func: Callable, calls: Sequence[Call], timeout: float, blocked: Sequence[Callable]
) -> tuple[list[Outcome], str]:
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    sink = tempfile.TemporaryFile()
    process = context.Process(
        target=_child, args=(func, calls, blocked, sender, receiver, sink), daemon=True
    )
    with warnings.catch_warnings():  # Python >= 3.12 warns about forking a threaded process
        warnings.simplefilter("ignore", DeprecationWarning)
        process.start()
    sender.close()
    outcomes: list[Outcome] = []
    dropped = 0
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
                dropped = pickle.loads(receiver.recv_bytes())
    finally:
        if process.is_alive():
            process.kill()
        process.join()
        receiver.close()
        with sink:
            sink.seek(0)
            output = sink.read().decode("utf-8", "replace")
    return outcomes, output + _dropped_note(dropped)


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


def check_timeout(timeout: object) -> float:
    """``timeout`` as seconds: a number above 0 and at most an hour; else ``ValueError``."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise ValueError(f"timeout must be a number of seconds, got {timeout!r}")
    if not (math.isfinite(timeout) and 0 < timeout <= 3600):
        raise ValueError(
            f"timeout must be a positive number of seconds, at most 3600, got {timeout!r}"
        )
    return float(timeout)


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
    check_timeout(timeout)
    if can_fork() and sys.platform != "win32":
        return _run_forked(func, calls, timeout, blocked)
    return _run_threaded(func, calls, timeout)
