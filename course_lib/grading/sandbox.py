"""Where students' code runs in grading: fork servers, each inside a bubblewrap sandbox.

A grading worker is a fork server (:func:`course_lib.answers.runner.serve`): a Python
process that imports torch once and then forks a fresh process for every case (one input) of
every code answer, without ever reading an answer, its inputs or its results itself (the
grader passes it the descriptors of the case's task, result pipe and output file, see
:mod:`course_lib.answers.engine`). Each worker runs inside its own `bubblewrap
<https://github.com/containers/bubblewrap>`_ (``bwrap``) sandbox, which sees:

- the system's ``/usr`` (and the ``/lib``, ``/bin`` links to it), the Python installation and
  the site-packages holding torch and NumPy, all read-only; ``course_lib`` itself is hidden
  (an empty folder is mounted over it when it is installed there);
- a private ``/proc`` (its own PID namespace), a minimal ``/dev``, and an empty ``/tmp`` of
  limited size, where each case gets a fresh working folder and which is emptied after it;
- no network (its own, empty network namespace), no other files: not the submissions, not
  the gradebook, not the instructor's home folder.

Unprivileged, bwrap makes a user namespace. Run as root, it does not (the user in the sandbox
would be root outside, for which the kernel does not count processes), and the worker drops
to a user id of its own instead, after importing torch. Either way the case processes run as
a user that has nothing outside the sandbox, under the resource limits, refusals and
confinement of the answer runner (``course_lib/exercises/runner.py``).

Without bwrap the grader refuses to run, unless told ``--sandbox none``: then workers are
plain subprocesses with the same limits and a fresh folder per case, but they can read what
the instructor's account can read (for code you trust, or machines without bwrap).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from course_lib.answers import (
    DEFAULT_LIMITS,
    ENGINE_FILES,
    ENGINE_FOLDER,
    STOP_CHECK,
    Engine,
    EngineLost,
    Outcome,
    descendants,
    process_stat,
    processes,
)

__all__ = ["Job", "Limits", "Sandbox", "SandboxUnavailable", "Worker", "WorkerPool"]

ENGINE_IN_SANDBOX = "/opt/course-grade"
WORKER_IN_SANDBOX = f"{ENGINE_IN_SANDBOX}/runner.py"  # the fork server's script
SANDBOX_UID = 1000  # the user inside an unprivileged sandbox
ROOT_UID_BASE = 1_900_000_000  # user ids for workers started by root: unused by anything else
SYSTEM_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
OPTIONAL_FLAGS = ("--disable-userns",)  # left out where the installed bwrap is too old
INSTALL_HINT = (
    "Install it (Debian or Ubuntu: apt-get install bubblewrap; Fedora: dnf install "
    "bubblewrap), or, only for code you trust, grade without a sandbox: --sandbox none"
)


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot be used on this machine; the message says why and what to do."""


class WorkerFailure(RuntimeError):
    """A worker could not start, stopped answering, or ended."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of the process running one exercise of one submission.

    Attributes:
        memory_mb: address space it may add to the worker's (RLIMIT_AS).
        processes: processes or threads it may start (RLIMIT_NPROC above what exists).
        file_mb: largest file it may write (RLIMIT_FSIZE).
        tmp_mb: size of the sandbox's ``/tmp``, shared by the children of one worker in turn.
    """

    memory_mb: int = DEFAULT_LIMITS["memory_mb"]
    processes: int = DEFAULT_LIMITS["processes"]
    file_mb: int = DEFAULT_LIMITS["file_mb"]
    tmp_mb: int = 256

    def to_dict(self) -> dict[str, int]:
        return {"memory_mb": self.memory_mb, "processes": self.processes, "file_mb": self.file_mb}


@dataclass
class Job:
    """One submission's code exercises: a task each, and a wall-clock limit for them all."""

    key: Any
    tasks: list[dict[str, Any]]
    timeout: float


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def python_roots() -> list[str]:
    """Folders the worker needs to read: the Python installation, the environment, and the
    site-packages holding torch and NumPy (outside ``/usr``, which is mounted anyway)."""
    import numpy
    import torch

    candidates = [sys.base_prefix, sys.prefix, sys.exec_prefix, sys.base_exec_prefix]
    candidates += [os.path.dirname(os.path.dirname(m.__file__)) for m in (torch, numpy)]
    real = sorted({os.path.realpath(c) for c in candidates}, key=len)
    roots: list[str] = []
    for path in real:
        if not _inside(path, "/usr") and not any(_inside(path, r) for r in roots):
            roots.append(path)
    return roots


def worker_sys_path(roots: Iterable[str]) -> list[str]:
    """The grader's ``sys.path`` entries the worker can use: folders inside ``roots`` or
    ``/usr`` (the standard library, site-packages), never the current folder or a project."""
    roots = [*roots, "/usr"]
    paths = []
    for entry in sys.path:
        if not entry or not os.path.isdir(entry):
            continue
        real = os.path.realpath(entry)
        if any(_inside(real, r) for r in roots) and real not in paths:
            paths.append(real)
    return paths


def hidden_packages(roots: Iterable[str]) -> list[str]:
    """``course_lib``'s folder, where it lies inside a folder the sandbox shows."""
    import course_lib

    folder = os.path.realpath(os.path.dirname(course_lib.__file__))
    return [folder] if any(_inside(folder, r) for r in [*roots, "/usr"]) else []


def _minimal_environment(home: str) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
    }


@dataclass
class Sandbox:
    """How workers are started: ``kind`` is ``"bwrap"`` or ``"none"``."""

    kind: str = "bwrap"
    limits: Limits = field(default_factory=Limits)
    bwrap: str | None = None
    dropped_flags: tuple[str, ...] = ()

    @classmethod
    def create(cls, kind: str = "bwrap", limits: Limits | None = None) -> Sandbox:
        """Find bwrap and check that it can make a sandbox here; else ``SandboxUnavailable``."""
        limits = limits or Limits()
        if kind == "none":
            return cls("none", limits)
        if kind != "bwrap":
            raise ValueError(f"the sandbox is 'bwrap' or 'none', not {kind!r}")
        path = shutil.which("bwrap")
        if path is None:
            raise SandboxUnavailable(
                "bubblewrap (bwrap) is not installed; the grader runs students' code inside "
                f"it, away from your files and the network. {INSTALL_HINT}."
            )
        sandbox = cls("bwrap", limits, path)
        sandbox._probe()
        return sandbox

    def _probe(self) -> None:
        """Start an empty sandbox; drop optional flags that this bwrap does not know."""
        for _ in range(len(OPTIONAL_FLAGS) + 1):
            argv = [*self._bwrap_argv(uid=None), "--", "/usr/bin/true"]
            result = subprocess.run(
                argv, capture_output=True, text=True, env=_minimal_environment("/"), timeout=60
            )
            if result.returncode == 0:
                return
            unknown = [f for f in OPTIONAL_FLAGS if f"Unknown option {f}" in result.stderr]
            if not unknown:
                break
            self.dropped_flags += tuple(unknown)
        raise SandboxUnavailable(
            f"bubblewrap ({self.bwrap}) cannot create a sandbox on this machine: "
            f"{result.stderr.strip() or f'exit code {result.returncode}'}. Unprivileged user "
            "namespaces may be disabled (sysctl kernel.unprivileged_userns_clone=1, "
            f"user.max_user_namespaces > 0), or the grader runs in a container that forbids them. "
            f"{INSTALL_HINT.split(', or, ')[1].capitalize()}."
        )

    def _bwrap_argv(self, uid: int | None) -> list[str]:
        args = [self.bwrap or "bwrap", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        if os.geteuid() == 0:  # no user namespace: the worker drops to ``uid`` itself
            args += [
                "--unshare-ipc",
                "--unshare-pid",
                "--unshare-net",
                "--unshare-uts",
                "--unshare-cgroup-try",
            ]
            if uid is not None:
                args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        else:
            args += [
                "--unshare-all",
                "--unshare-user",
                "--disable-userns",
                "--uid",
                str(SANDBOX_UID),
                "--gid",
                str(SANDBOX_UID),
            ]
        args = [a for a in args if a not in self.dropped_flags]
        args += ["--ro-bind", "/usr", "/usr"]
        for name in SYSTEM_DIRS:
            path = f"/{name}"
            if os.path.islink(path):
                args += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                args += ["--ro-bind", path, path]
        args += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev"]
        args += ["--perms", "1777", "--size", str(self.limits.tmp_mb * 2**20), "--tmpfs", "/tmp"]
        roots = python_roots()
        made: set[str] = set()
        for root in roots:
            # Folders bwrap makes on the way to a mount are closed to other users (0700):
            # make them readable, for the worker that drops to a user of its own.
            for parent in reversed(Path(root).parents[:-1]):
                if str(parent) not in made:
                    made.add(str(parent))
                    args += ["--perms", "0755", "--dir", str(parent)]
            args += ["--ro-bind", root, root]
        for hidden in hidden_packages(roots):
            args += ["--tmpfs", hidden, "--remount-ro", hidden]
        args += ["--perms", "0755", "--dir", ENGINE_IN_SANDBOX]
        for name in ENGINE_FILES:
            args += ["--ro-bind", str(ENGINE_FOLDER / name), f"{ENGINE_IN_SANDBOX}/{name}"]
        args += ["--chdir", "/tmp", "--clearenv"]
        for key, value in _minimal_environment("/tmp").items():
            args += ["--setenv", key, value]
        return args

    def worker_command(self, index: int, folder: str) -> tuple[list[str], dict[str, str]]:
        """The command line and environment of worker number ``index``; ``folder`` is a
        private folder of the grader's for this worker (used without a sandbox)."""
        uid = None
        if os.geteuid() == 0:
            uid = ROOT_UID_BASE + (os.getpid() * 64 + index) % 100_000_000
        python = os.path.realpath(sys.executable)
        roots = python_roots()
        config = {
            "sys_path": worker_sys_path(roots),
            "uid": uid,
            "tmp": "/tmp",
            "isolate": True,
            "pid_namespace": self.kind == "bwrap",
            "private_tmp": self.kind == "bwrap",
        }
        if self.kind == "bwrap":
            argv = [*self._bwrap_argv(uid), "--", python, "-I", "-S", WORKER_IN_SANDBOX]
            return [*argv, json.dumps(config)], _minimal_environment("/tmp")
        for name in ENGINE_FILES:  # copies: nothing of course_lib beside them
            shutil.copyfile(ENGINE_FOLDER / name, Path(folder) / name)
            os.chmod(Path(folder) / name, 0o644)
        os.chmod(folder, 0o755)
        script = Path(folder) / "runner.py"
        config["tmp"] = tempfile.gettempdir()
        return [python, "-I", "-S", str(script), json.dumps(config)], _minimal_environment(folder)


def _session(session: int) -> list[int]:
    """The processes of a session (its leader's pid)."""
    return [pid for pid, fields in processes().items() if fields[3] == str(session)]


def _runs_worker(pid: int, script: str) -> bool:
    """Whether process ``pid`` is a worker: Python running ``script`` (not bwrap, whose
    arguments name the script too)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            argv = cmdline.read().split(b"\0")
    except OSError:
        return False
    python = os.path.realpath(sys.executable).encode()
    return argv[:4] == [python, b"-I", b"-S", script.encode()]


class Worker:
    """One worker, a fork server in its sandbox, restarted when it fails."""

    def __init__(self, sandbox: Sandbox, index: int) -> None:
        self.sandbox = sandbox
        self.index = index
        self.engine: Engine | None = None
        self.folder: str | None = None
        self.starts = 0
        self.pid: int | None = None  # the fork server's Python process (in its sandbox)

    # ----------------------------------------------------------------- process

    def start(self) -> None:
        self.stop()
        self.folder = tempfile.mkdtemp(prefix=f"course-grade-{self.index}-")
        argv, env = self.sandbox.worker_command(self.index, self.folder)
        self.log = open(Path(self.folder) / "worker.log", "w+b")
        self.engine = Engine(argv, env, self.log)
        self.starts += 1
        try:
            self.engine.start()
        except EngineLost as error:
            log = self.log_tail()
            self.stop()
            raise WorkerFailure(f"a grading worker did not start ({error}): {log}") from None
        self.pid = self._find_worker_pid()

    @property
    def process(self) -> subprocess.Popen | None:
        return self.engine.process if self.engine is not None else None

    def _find_worker_pid(self) -> int | None:
        """The pid of the fork server's Python process: the process started, or in bwrap
        the first process below it that runs the fork server's script."""
        assert self.process is not None
        if self.sandbox.kind != "bwrap":
            return self.process.pid
        below = [self.process.pid, *descendants(self.process.pid)]
        return next((pid for pid in below if _runs_worker(pid, WORKER_IN_SANDBOX)), None)

    def stopped(self) -> bool:
        """Whether the worker's Python process is stopped (state ``T``: SIGSTOP, SIGTSTP,
        SIGTTIN or SIGTTOU), so that it cannot go on until something continues it."""
        fields = process_stat(self.pid) if self.pid is not None else None
        return fields is not None and fields[0] == "T"

    def log_tail(self, size: int = 2000) -> str:
        with contextlib.suppress(Exception):
            self.log.flush()
            self.log.seek(0)
            text = self.log.read().decode("utf-8", "replace").strip()
            return text[-size:] or "(it printed nothing)"
        return "(no log)"

    def stop(self) -> None:
        if self.engine is not None and self.engine.process is not None:
            # Without a sandbox, a case process has a process group of its own in the
            # worker's session: kill the session, not only the worker's group.
            process = self.engine.process
            session = _session(process.pid) if self.sandbox.kind != "bwrap" else []
            for pid in session:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        if self.engine is not None:
            self.engine.stop()
            self.engine = None
            self.pid = None
        if self.folder:
            with contextlib.suppress(Exception):
                self.log.close()
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    @property
    def running(self) -> bool:
        return self.engine is not None and self.engine.running

    # ----------------------------------------------------------------- jobs

    def _exchange(self, task: dict[str, Any], remaining: float):
        """Run one task within ``remaining`` seconds of its submission's time (and its own
        limit); return its outcome, or ``None`` and what happened to the worker.

        While a case runs, the worker's state is looked at every ``STOP_CHECK`` seconds: a
        stopped worker is given up at once; one that runs but stays silent is given
        ``SLACK`` seconds beyond the time limit.
        """
        assert self.engine is not None
        limit = min(remaining, float(task.get("timeout", remaining)))
        try:
            outcome = self.engine.run_task(task, time.monotonic() + limit, self.stopped)
        except EngineLost as error:
            return None, str(error)
        by_submission = remaining < float(task.get("timeout", remaining))
        return dataclasses.replace(outcome, submission_limit=by_submission), None

    def run(self, job: Job, starting: Callable[[int], None] | None = None) -> list[Outcome]:
        """The outcome of every task of ``job``, whatever happens to the worker.

        Tasks are sent one at a time; ``starting(index)`` is called before each is sent.
        When the worker dies, is stopped or stops answering during a task, that task's
        outcome says so (``"worker lost"``), the worker is restarted and the remaining tasks
        run on the new one. A task the grader itself failed on (``"worker error"``) is
        tried once more.

        Raises:
            WorkerFailure: the worker could not be started.
        """
        outcomes: list[Outcome] = []
        retried = False
        used = 0.0  # seconds the tasks took so far (starting workers not counted)
        while len(outcomes) < len(job.tasks):
            index = len(outcomes)
            remaining = job.timeout - used
            if remaining <= 0:
                outcomes += [Outcome("skipped") for _ in job.tasks[index:]]
                break
            if starting is not None:
                starting(index)
            if not self.running:
                try:
                    self.start()
                except OSError as error:
                    message = f"a grading worker could not be started ({error})"
                    raise WorkerFailure(message) from None
            sent = time.monotonic()
            try:
                outcome, failure = self._exchange(job.tasks[index], remaining)
            except Exception as error:  # the grader's own failure: once more, on a new one
                outcome, failure = _worker_error(error), None
            used += time.monotonic() - sent
            if outcome is not None and outcome.status == "worker error" and not retried:
                retried = True
                self.stop()
                continue
            if outcome is None:
                self.stop()
                seconds = round(time.monotonic() - sent, 3)
                outcome = Outcome("worker lost", exit=failure or "", seconds=seconds)
            outcomes.append(outcome)
            retried = False
        return outcomes


def _worker_error(error: Exception) -> Outcome:
    return Outcome("worker error", exit=f"{type(error).__name__}: {error}")


class _Closed(Exception):
    """The pool was closed while a thread was driving a worker: the thread stops."""


class WorkerPool:
    """``size`` workers, started on first use, each driven by a thread of the grader."""

    def __init__(self, sandbox: Sandbox, size: int) -> None:
        if size < 1:
            raise ValueError(f"at least one worker is needed, got {size}")
        self.workers = [Worker(sandbox, index) for index in range(size)]
        self.closed = threading.Event()

    def run(
        self,
        jobs: list[Job],
        done: Callable[[Job, list[Outcome]], None],
        starting: Callable[[Job, int], None] | None = None,
    ) -> None:
        """Run every job; call ``done(job, outcomes)`` in this thread as each one finishes,
        and ``starting(job, index)``, also in this thread, before task ``index`` of a job is
        sent to a worker (the task waits until it returns).

        Raises:
            SandboxUnavailable: a worker could not start (the jobs not done yet stay undone).
        """
        if not jobs:
            return
        todo: queue.Queue = queue.Queue()
        for job in jobs:
            todo.put(job)
        events: queue.Queue = queue.Queue()

        def announce(job: Job, index: int) -> None:
            """In a driving thread: have ``starting`` called, and wait until it was."""
            if self.closed.is_set():
                raise _Closed
            if starting is None:
                return
            called = threading.Event()
            events.put(("starting", job, (index, called)))
            while not called.wait(STOP_CHECK):
                if self.closed.is_set():
                    raise _Closed

        def drive(worker: Worker) -> None:
            while not self.closed.is_set():
                try:
                    job = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    outcomes = worker.run(job, lambda index, job=job: announce(job, index))
                except _Closed:
                    return
                except WorkerFailure as error:  # no worker: nothing more can be graded
                    events.put(("failed", None, error))
                    return
                except Exception as error:  # never lose a job: report it as the grader's fault
                    outcomes = [_worker_error(error) for _ in job.tasks]
                events.put(("done", job, outcomes))

        threads = [
            threading.Thread(target=drive, args=(worker,), daemon=True)
            for worker in self.workers[: len(jobs)]
        ]
        for thread in threads:
            thread.start()
        unfinished = len(jobs)
        while unfinished:
            kind, job, detail = events.get()
            if kind == "failed":
                raise SandboxUnavailable(
                    f"{detail}. The submissions graded so far are kept; once the problem is "
                    "fixed, run the command again to grade the rest."
                )
            if kind == "starting":
                index, called = detail
                assert starting is not None
                starting(job, index)
                called.set()
            else:
                done(job, detail)
                unfinished -= 1
        for thread in threads:
            thread.join()

    def close(self) -> None:
        self.closed.set()
        for worker in self.workers:
            worker.stop()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
