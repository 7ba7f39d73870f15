"""The trusted side of running answers: a fork server, and the cases it runs for us.

:class:`Engine` starts a fork server (:func:`course_lib.answers.runner.serve`: a Python
process that imports torch once) and runs a task, an answer with all its inputs, in fresh
processes: one for the public cases (the inputs the student's own check runs too) and one
for each hidden case (an input drawn from the grading seed). For each it writes that part of
the task to a file, makes a pipe for the results and a file for printed output, passes the
three descriptors to the fork server, which forks a process without reading them, and reads
the results here while it runs. So nothing of an answer ever passes through the fork server,
and no process running an answer holds another answer, a hidden case's inputs other than its
own, or the values its results are compared with (those stay in this process).

What comes back is bounded before it is kept: each message at most ``MAX_CHILD_MESSAGE``
bytes, all messages of one case at most ``MAX_CASE_BYTES``, counted as they arrive; a case
that sends more is stopped and reported as such. Printed output is read from its file, at
most a few times ``MAX_OUTPUT`` bytes.

The student's check uses one fork server per notebook kernel (:func:`local_engine`, started
at the first check, outside any sandbox); grading one per worker, inside bubblewrap
(:mod:`course_lib.grading.sandbox`). :meth:`Engine.run_task` gives the same record in both,
an :class:`~course_lib.answers.records.Outcome` (``done``, ``timeout`` or ``crashed``; its
messages ``load``, a ``call`` per input and ``done``, or ``failed``).

Where the system cannot fork (Windows), :func:`run_in_thread` runs the same steps in a
thread of the calling process, without the limits: it can abandon a call, not stop it.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from course_lib.answers import runner
from course_lib.answers.records import Outcome
from course_lib.answers.runner import (
    HEADER,
    MAX_CHILD_MESSAGE,
    MAX_OUTPUT,
    ProtocolError,
    receive_frame,
    send_frame,
)

__all__ = ["Engine", "EngineLost", "local_engine", "run_in_thread", "run_locally"]

MAX_CASE_BYTES = 48 * 2**20  # all the messages of one case, counted as they arrive
STARTUP_TIMEOUT = 120.0  # seconds for a fork server to import torch and say it is ready
SLACK = 15.0  # seconds a fork server may need beyond a case's time limit to report
STOP_CHECK = 0.2  # seconds between two looks at whether the fork server was stopped
DRAIN_SECONDS = 2.0  # seconds to read what an ended case left in its pipe
ENGINE_FOLDER = Path(runner.__file__).resolve().parent
SERVER = "the process that runs the answers"


class EngineLost(RuntimeError):
    """The fork server died, was stopped, or stopped answering; the message says which."""


class _Frames:
    """Messages read from a case's result pipe, each at most ``limit`` bytes, all together
    at most ``total``; ``problem`` says why reading stopped early."""

    def __init__(self, limit: int = MAX_CHILD_MESSAGE, total: int = MAX_CASE_BYTES) -> None:
        self.limit, self.total = limit, total
        self.buffer = bytearray()
        self.received = 0
        self.messages: list[dict[str, Any]] = []
        self.problem = ""

    def feed(self, data: bytes) -> bool:
        """Take ``data``; ``False`` once the case sent more than it may (or garbage)."""
        self.received += len(data)
        if self.received > self.total:
            self.problem = f"the code sent more than {self.total} bytes of results"
            self.buffer.clear()
            return False
        self.buffer += data
        while len(self.buffer) >= HEADER.size:
            (size,) = HEADER.unpack_from(self.buffer)
            if size > self.limit:
                self.problem = f"a message of {size} bytes is longer than {self.limit}"
                self.buffer.clear()
                return False
            if len(self.buffer) < HEADER.size + size:
                break
            payload = bytes(self.buffer[HEADER.size : HEADER.size + size])
            del self.buffer[: HEADER.size + size]
            try:
                message = json.loads(payload.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError):
                self.problem = "the code sent something that is not a message"
                return False
            if isinstance(message, dict):
                self.messages.append(message)
        return True


def _groups(calls: list[dict[str, Any]]) -> list[list[int]]:
    """The numbers of the calls each process runs, in the order they run: first every call
    that the student's check runs too, in one process; then each call marked ``"alone"`` (an
    input drawn from the grading seed) in a process of its own. So no process holds a hidden
    input but its own, and no hidden case runs before a public one. A task without calls
    gets one process, which defines the source."""
    shared = [index for index, call in enumerate(calls) if not call.get("alone")]
    alone = [[index] for index, call in enumerate(calls) if call.get("alone")]
    groups = ([shared] if shared else []) + alone
    return groups or [[]]


def _first(messages: list[dict[str, Any]], event: str) -> dict[str, Any] | None:
    return next((m for m in messages if m.get("event") == event), None)


def _output(fd: int, skip: int) -> tuple[str, int]:
    """What a case printed (after its first ``skip`` bytes), cut to ``MAX_OUTPUT``
    characters, and how many bytes were left out."""
    try:
        size = os.fstat(fd).st_size
        data = os.pread(fd, MAX_OUTPUT * 4, skip)
    except OSError:
        return "", 0
    text = data.decode("utf-8", "backslashreplace")[:MAX_OUTPUT]
    return text, max(0, size - skip - len(text.encode("utf-8", "backslashreplace")))


class Engine:
    """A fork server (started by :meth:`start`) and the cases it runs.

    Args:
        argv: the fork server's command line (``python -I -S .../runner.py CONFIG``, maybe
            inside bwrap).
        env: its environment.
        log: a file for what it prints (its standard error).
    """

    def __init__(self, argv: list[str], env: dict[str, str], log: Any = None) -> None:
        self.argv, self.env, self.log = argv, env, log
        self.process: subprocess.Popen | None = None
        self.control: socket.socket | None = None
        self.ready: dict[str, Any] = {}

    # ----------------------------------------------------------------- process

    def start(self) -> None:
        """Start the fork server and wait until it has imported torch.

        Raises:
            EngineLost: it did not start (the message has the reason).
        """
        self.stop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.process = subprocess.Popen(
                self.argv,
                stdin=theirs.fileno(),
                stdout=subprocess.DEVNULL,
                stderr=self.log if self.log is not None else subprocess.DEVNULL,
                env=self.env,
                start_new_session=True,
            )
        finally:
            theirs.close()
        self.control = ours
        try:
            ready = self._report(time.monotonic() + STARTUP_TIMEOUT, None)
        except EngineLost as error:
            self.stop()
            raise EngineLost(f"the process that runs answers did not start ({error})") from None
        if not isinstance(ready, dict) or ready.get("ready") is not True:
            self.stop()
            raise EngineLost(f"the process that runs answers said {ready!r} instead of ready")
        self.ready = ready

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """End the fork server (its case processes end with it)."""
        if self.control is not None:
            with contextlib.suppress(OSError):
                self.control.close()
            self.control = None
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                self.process.kill()
            self.process.wait()
            self.process = None

    def _receive(self) -> Any:
        """The fork server's next message, which has begun to arrive."""
        assert self.control is not None
        try:
            message, _ = receive_frame(self.control)
        except (OSError, ProtocolError) as error:
            raise EngineLost(f"{SERVER} ended ({error})") from None
        if message is None:
            raise EngineLost(f"{SERVER} ended")
        return message

    def _report(self, deadline: float, stopped: Callable[[], bool] | None) -> Any:
        """The fork server's next message, waiting until ``deadline`` at most, and looking
        every ``STOP_CHECK`` seconds whether it was stopped."""
        assert self.control is not None
        sent = time.monotonic()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise EngineLost(f"{SERVER} stopped answering")
            if select.select([self.control], [], [], min(STOP_CHECK, remaining))[0]:
                return self._receive()
            if stopped is not None and stopped():
                raise EngineLost(_STOPPED.format(seconds=time.monotonic() - sent))

    # ----------------------------------------------------------------- cases

    def run_task(
        self, task: dict[str, Any], deadline: float, stopped: Callable[[], bool] | None = None
    ) -> Outcome:
        """Run ``task`` (an answer and all its inputs), in a process per group of calls
        (:func:`_groups`), until ``deadline`` (``time.monotonic()``); return its
        :class:`~course_lib.answers.records.Outcome`: ``done``, ``timeout`` or ``crashed``.

        ``stopped()`` says whether the fork server is stopped (a signal from the code).

        Raises:
            EngineLost: the fork server died, was stopped or stopped answering; start it
                again before the next task.
        """
        started = time.monotonic()
        calls = task["calls"]
        merged: list[dict[str, Any]] = []
        texts: list[str] = []
        left_out = dropped = 0
        status, exit_text, skip = "done", "", 0
        stopped_at = None
        for number, indices in enumerate(_groups(calls)):
            seconds = deadline - time.monotonic()
            if seconds <= 0:
                status, stopped_at = "timeout", indices[0] if indices else None
                break
            part = {**task, "calls": [calls[i] for i in indices], "indices": indices}
            messages, report, problem, output_fd = self._run_case(part, seconds, stopped)
            try:
                text, more = _output(output_fd, skip if number else 0)
            finally:
                os.close(output_fd)
            texts.append(text)
            left_out += more
            load = _first(messages, "load")
            failed = _first(messages, "failed")
            if number == 0 and load is not None:
                merged.append(load)
                printed = load.get("printed")
                skip = printed if isinstance(printed, int) and printed >= 0 else 0
            if failed is not None:
                if number == 0:
                    merged.append(failed)
                else:
                    status, exit_text = "crashed", str(failed.get("error", ""))[:500]
                    stopped_at = indices[0]
                break
            if load is not None and load.get("status") != "ok" and number:
                error = load.get("error", "defining the source failed")  # unlike the first time
                merged += [
                    {"event": "call", "index": i, "status": "raised", "error": error}
                    for i in indices
                ]
                continue
            if load is None or load.get("status") != "ok":
                if load is None:
                    status, exit_text = self._ended(report, problem)
                break
            results = {
                m["index"]: m
                for m in reversed(messages)
                if m.get("event") == "call" and m.get("index") in indices
            }
            merged += [results[i] for i in indices if i in results]
            if len(results) < len(indices):
                status, exit_text = self._ended(report, problem)
                stopped_at = next(i for i in indices if i not in results)
                break
            done = _first(messages, "done")
            if done is not None and isinstance(done.get("dropped"), int):
                dropped += max(0, done["dropped"])
        else:
            merged.append({"event": "done", "dropped": dropped})
        self._clean(deadline, stopped)
        output = "".join(texts)
        if len(output) > MAX_OUTPUT:
            left_out += len(output[MAX_OUTPUT:].encode("utf-8", "backslashreplace"))
            output = output[:MAX_OUTPUT]
        if left_out:
            output += f"\n... ({left_out} more bytes not shown)"
        return Outcome(
            status,
            tuple(merged),
            output=output,
            seconds=round(time.monotonic() - started, 3),
            exit=exit_text if status == "crashed" else "",
            stopped_at=stopped_at,
        )

    def _clean(self, deadline: float, stopped: Callable[[], bool] | None) -> None:
        """Have the fork server remove what the task's cases left (their folders, what they
        put in the sandbox's ``/tmp``, any process), and wait until it has."""
        assert self.control is not None
        try:
            send_frame(self.control, {"clean": True})
        except OSError as error:
            raise EngineLost(f"{SERVER} could not be reached ({error})") from None
        while True:
            report = self._report(max(deadline, time.monotonic()) + SLACK, stopped)
            if isinstance(report, dict) and report.get("cleaned"):
                return

    @staticmethod
    def _ended(report: dict[str, Any], problem: str) -> tuple[str, str]:
        """The task's status and exit text after a case that gave no result."""
        if problem:
            return "crashed", problem
        if report.get("ended") == "timeout":
            return "timeout", ""
        return "crashed", str(report.get("exit", "it ended"))[:500]

    def _run_case(
        self, case: dict[str, Any], seconds: float, stopped: Callable[[], bool] | None
    ) -> tuple[list[dict[str, Any]], dict[str, Any], str, int]:
        """Run one case; its messages, the fork server's report, why its results were cut
        short (or ``""``), and the descriptor of its output file (the caller closes it)."""
        if not self.running or self.control is None:
            raise EngineLost(f"{SERVER} is not running")
        task_file = tempfile.TemporaryFile()
        with tempfile.TemporaryFile() as output_file:  # unlinked: only the descriptor stays
            output_fd = os.dup(output_file.fileno())
        reader, writer = os.pipe()
        frames = _Frames()
        try:
            task_file.write(json.dumps(case, separators=(",", ":")).encode("utf-8"))
            task_file.flush()
            request = {"run": {"seconds": seconds}}
            try:
                send_frame(self.control, request, [task_file.fileno(), writer, output_fd])
            except OSError as error:
                raise EngineLost(f"{SERVER} could not be reached ({error})") from None
            os.close(writer)
            writer = -1
            report = self._collect(reader, frames, time.monotonic() + seconds + SLACK, stopped)
            self._drain(reader, frames)
        except BaseException:
            os.close(output_fd)
            raise
        finally:
            task_file.close()
            os.close(reader)
            if writer >= 0:
                os.close(writer)
        return frames.messages, report, frames.problem, output_fd

    def _collect(
        self,
        reader: int,
        frames: _Frames,
        deadline: float,
        stopped: Callable[[], bool] | None,
    ) -> dict[str, Any]:
        """Read results while the case runs, until the fork server reports its end."""
        assert self.control is not None
        sent = time.monotonic()
        reading = True
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise EngineLost(f"{SERVER} stopped answering")
            watched = [self.control, reader] if reading else [self.control]
            ready = select.select(watched, [], [], min(STOP_CHECK, remaining))[0]
            if reader in ready:
                data = os.read(reader, 2**20)
                if not data or not frames.feed(data):
                    reading = False
                    if frames.problem:  # too much: stop the case now
                        with contextlib.suppress(OSError):
                            send_frame(self.control, {"kill": True})
            if self.control in ready:
                report = self._receive()
                if not isinstance(report, dict):
                    raise EngineLost(f"{SERVER} sent {str(report)[:200]!r}")
                return report
            if not ready and stopped is not None and stopped():
                raise EngineLost(_STOPPED.format(seconds=time.monotonic() - sent))

    @staticmethod
    def _drain(reader: int, frames: _Frames) -> None:
        """Read what the ended case left in its pipe (its writers are gone)."""
        if frames.problem:
            return
        deadline = time.monotonic() + DRAIN_SECONDS
        while time.monotonic() < deadline:
            if not select.select([reader], [], [], max(0.0, deadline - time.monotonic()))[0]:
                return
            data = os.read(reader, 2**20)
            if not data or not frames.feed(data):
                return


_STOPPED = (
    "it was stopped with SIGSTOP or another stop signal, so it could not finish; the grader "
    "noticed after {seconds:.1f} s and replaced it"
)

# --------------------------------------------------------------------------- the student's


_LOCAL: dict[str, Any] = {}
_LOCAL_LOCK = threading.Lock()


def _local_command(folder: str) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of a fork server for this interpreter's checks."""
    for name in runner.ENGINE_FILES:  # copies, away from the rest of course_lib
        shutil.copyfile(ENGINE_FOLDER / name, Path(folder) / name)
    sys_path = [p for p in sys.path if p and os.path.isdir(p)]
    config = {
        "sys_path": sys_path,
        "tmp": tempfile.gettempdir(),
        "isolate": False,
        "pid_namespace": False,
        "private_tmp": False,
    }
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    script = str(Path(folder) / "runner.py")
    return [sys.executable, "-I", "-S", script, json.dumps(config)], env


def _stop_local() -> None:
    engine = _LOCAL.pop("engine", None)
    if engine is not None and _LOCAL.get("pid") == os.getpid():
        engine.stop()
    folder = _LOCAL.pop("folder", None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def local_engine() -> Engine:
    """The fork server of this process's checks, started at the first call (about as long
    as importing torch) and again whenever it is gone."""
    with _LOCAL_LOCK:
        engine = _LOCAL.get("engine")
        if engine is not None and _LOCAL.get("pid") == os.getpid() and engine.running:
            return engine
        if _LOCAL.get("pid") != os.getpid():  # a forked copy of the notebook: not ours
            _LOCAL.clear()
        _stop_local()
        folder = tempfile.mkdtemp(prefix="course-lib-checks-")
        argv, env = _local_command(folder)
        engine = Engine(argv, env)
        engine.start()
        if not _LOCAL.get("registered"):
            atexit.register(_stop_local)
        _LOCAL.update(engine=engine, folder=folder, pid=os.getpid(), registered=True)
        return engine


def run_locally(task: dict[str, Any], seconds: float) -> Outcome:
    """Run ``task`` for a student's check, within ``seconds`` counted from when the fork
    server is ready: starting it (the first check of a kernel, about as long as importing
    torch, far longer on a busy machine) is not the answer's time. An interrupt (Ctrl-C)
    ends the fork server and the case with it, and a lost fork server is started again for
    the next check."""
    engine = local_engine()
    try:
        return engine.run_task(task, time.monotonic() + seconds)
    except EngineLost as error:
        _stop_local()
        return Outcome("crashed", exit=str(error))
    except BaseException:
        _stop_local()
        raise


def run_in_thread(task: dict[str, Any], deadline: float) -> Outcome:
    """The engine's work where the system cannot fork: the same steps in a daemon thread of
    this process, with the same blocks while it runs, but no resource limits. A call still
    running at ``deadline`` is abandoned (``abandoned=True``), not stopped."""
    captured = runner.CappedText(None)
    messages: list[dict[str, Any]] = []

    def work() -> None:
        try:
            runner.run_calls(task, messages.append, captured, task["limits"])
        except BaseException as error:
            messages.append({"event": "failed", "error": f"{type(error).__name__}: {error}"})

    started = time.monotonic()
    undo = runner.guard_in_thread(task)
    try:
        worker = threading.Thread(target=work, daemon=True)
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            worker.start()
            worker.join(max(0.0, deadline - time.monotonic()))
    finally:
        undo()
    return Outcome(
        "timeout" if worker.is_alive() else "done",
        tuple(messages),
        output=captured.text(),
        seconds=round(time.monotonic() - started, 3),
        abandoned=worker.is_alive(),
    )
