"""Where students' code runs: grading workers, each inside a bubblewrap sandbox.

A worker (``_worker.py``) is a Python process that imports torch once and forks a limited
child for every code exercise of every submission it is given. Each worker runs inside its
own `bubblewrap <https://github.com/containers/bubblewrap>`_ (``bwrap``) sandbox, which sees:

- the system's ``/usr`` (and the ``/lib``, ``/bin`` links to it), the Python installation and
  the site-packages holding torch and NumPy, all read-only; ``course_lib`` itself is hidden
  (an empty folder is mounted over it when it is installed there);
- a private ``/proc`` (its own PID namespace), a minimal ``/dev``, and an empty ``/tmp`` of
  limited size, where each child gets a fresh working folder;
- no network (its own, empty network namespace), no other files: not the submissions, not
  the gradebook, not the instructor's home folder.

Unprivileged, bwrap makes a user namespace. Run as root, it does not (the user in the sandbox
would be root outside, for which the kernel does not count processes), and the worker drops
to a user id of its own instead, after importing torch. Either way the children run as a user
that has nothing outside the sandbox, under the resource limits set by the answer runner
(``course_lib/exercises/_runner.py``).

Without bwrap the grader refuses to run, unless told ``--sandbox none``: then workers are
plain subprocesses with the same limits and a fresh folder per child, but they can read what
the instructor's account can read (for code you trust, or machines without bwrap).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import select
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

from course_lib.exercises import _runner
from course_lib.exercises._runner import (
    ProtocolError,
    descendants,
    process_stat,
    processes,
    read_message,
    write_message,
)
from course_lib.grading import _worker

__all__ = ["Job", "Limits", "Sandbox", "SandboxUnavailable", "Worker", "WorkerPool"]

WORKER_FILE = Path(_worker.__file__).resolve()
RUNNER_FILE = Path(_runner.__file__).resolve()  # imported by the worker, from beside it
WORKER_IN_SANDBOX = "/opt/course-grade/worker.py"
SANDBOX_UID = 1000  # the user inside an unprivileged sandbox
ROOT_UID_BASE = 1_900_000_000  # user ids for workers started by root: unused by anything else
STARTUP_TIMEOUT = 120.0  # seconds for a worker to import torch and say it is ready
SLACK = 15.0  # seconds a running worker may need beyond the time limit of a task
STOP_CHECK = 0.2  # seconds between two looks at whether a worker was stopped (SIGSTOP)
MESSAGE_SECONDS = 10.0  # seconds for the rest of a message once its first bytes came
STOPPED = (
    "it was stopped with SIGSTOP or another stop signal, so it could not finish; the grader "
    "noticed after {seconds:.1f} s and replaced it"
)
SYSTEM_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
OPTIONAL_FLAGS = ("--disable-userns",)  # left out where the installed bwrap is too old
_JOB_IDS = itertools.count(1)
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

    memory_mb: int = _runner.DEFAULT_LIMITS["memory_mb"]
    processes: int = _runner.DEFAULT_LIMITS["processes"]
    file_mb: int = _runner.DEFAULT_LIMITS["file_mb"]
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
        args += ["--perms", "0755", "--dir", str(Path(WORKER_IN_SANDBOX).parent)]
        args += ["--ro-bind", str(WORKER_FILE), WORKER_IN_SANDBOX]
        runner = str(Path(WORKER_IN_SANDBOX).parent / _worker.RUNNER_NAME)
        args += ["--ro-bind", str(RUNNER_FILE), runner]
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
            "pid_namespace": self.kind == "bwrap",
            "private_tmp": self.kind == "bwrap",
        }
        if self.kind == "bwrap":
            argv = [*self._bwrap_argv(uid), "--", python, "-I", "-S", WORKER_IN_SANDBOX]
            return [*argv, json.dumps(config)], _minimal_environment("/tmp")
        script = Path(folder) / "worker.py"  # a copy: nothing of course_lib beside it
        shutil.copyfile(WORKER_FILE, script)
        shutil.copyfile(RUNNER_FILE, Path(folder) / _worker.RUNNER_NAME)
        os.chmod(folder, 0o755)
        for copied in (script, Path(folder) / _worker.RUNNER_NAME):
            os.chmod(copied, 0o644)
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
    """One worker process (in its sandbox), restarted when it fails."""

    def __init__(self, sandbox: Sandbox, index: int) -> None:
        self.sandbox = sandbox
        self.index = index
        self.process: subprocess.Popen | None = None
        self.folder: str | None = None
        self.starts = 0
        self.pid: int | None = None  # the Python process of the worker (in its sandbox)

    # ----------------------------------------------------------------- process

    def start(self) -> None:
        self.stop()
        self.folder = tempfile.mkdtemp(prefix=f"course-grade-{self.index}-")
        argv, env = self.sandbox.worker_command(self.index, self.folder)
        self.log = open(Path(self.folder) / "worker.log", "w+b")
        self.process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            env=env,
            cwd=self.folder,
            start_new_session=True,
        )
        self.starts += 1
        try:
            ready = read_message(
                self.process.stdout.fileno(), deadline=time.monotonic() + STARTUP_TIMEOUT
            )
        except (TimeoutError, ProtocolError) as error:
            log = self.log_tail()
            self.stop()
            raise WorkerFailure(f"a grading worker did not start ({error}): {log}") from None
        if not isinstance(ready, dict) or ready.get("ready") is not True:
            self.stop()
            raise WorkerFailure(f"a grading worker said {ready!r} instead of being ready")
        self.pid = self._find_worker_pid()

    def _find_worker_pid(self) -> int | None:
        """The pid of the worker's Python process: the process started, or in bwrap the
        first process below it that runs the worker's script."""
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
        if self.process is not None:
            # Without a sandbox, the child running an answer has a process group of its own
            # in the worker's session: kill the session, not only the worker's group.
            session = _session(self.process.pid) if self.sandbox.kind != "bwrap" else []
            for pid in session:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                self.process.kill()
            self.process.wait()
            for stream in (self.process.stdin, self.process.stdout):
                with contextlib.suppress(Exception):
                    stream.close()
            self.process = None
            self.pid = None
        if self.folder:
            with contextlib.suppress(Exception):
                self.log.close()
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    # ----------------------------------------------------------------- jobs

    def _exchange(self, task: dict[str, Any], timeout: float):
        """Run one task (with ``timeout`` seconds at most); return its outcome, or ``None``
        and what happened to the worker.

        The worker's state is looked at every ``STOP_CHECK`` seconds while the outcome has
        not come: a stopped worker is given up at once; one that runs but stays silent is
        given ``SLACK`` seconds beyond the time limit.
        """
        assert self.process is not None
        job_id = next(_JOB_IDS)
        sent = time.monotonic()
        try:
            write_message(self.process.stdin, {"id": job_id, "timeout": timeout, "tasks": [task]})
        except OSError as error:
            return None, f"the grading worker could not be reached ({error})"
        limit = sent + min(timeout, float(task.get("timeout", timeout))) + SLACK
        fd = self.process.stdout.fileno()
        outcome = None
        while True:
            now = time.monotonic()
            if now >= limit:
                return None, "the grading worker stopped answering"
            if not select.select([fd], [], [], min(STOP_CHECK, limit - now))[0]:
                if self.stopped():
                    return None, STOPPED.format(seconds=time.monotonic() - sent)
                continue
            try:
                message = read_message(fd, deadline=time.monotonic() + MESSAGE_SECONDS)
            except TimeoutError:
                return None, "the grading worker stopped in the middle of a message"
            except ProtocolError as error:
                return None, f"the grading worker ended ({error}; {self.log_tail(500)})"
            if not isinstance(message, dict):
                return None, "the grading worker sent something that is not a message"
            if outcome is None and message.get("task") == 0:
                outcome = message
            elif outcome is not None and message.get("done") == job_id:
                return outcome, None
            else:
                return None, f"the grading worker sent an unexpected message ({str(message)[:200]})"

    def run(self, job: Job, starting: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
        """The outcome of every task of ``job``, whatever happens to the worker.

        Tasks are sent one at a time; ``starting(index)`` is called before each is sent.
        When the worker dies, is stopped or stops answering during a task, that task's
        outcome says so (``"worker lost"``), the worker is restarted and the remaining tasks
        run on the new one. A task the worker itself failed on (``"worker error"``) is tried
        once more.

        Raises:
            WorkerFailure: the worker could not be started.
        """
        outcomes: list[dict[str, Any]] = []
        retried = False
        used = 0.0  # seconds the tasks took so far (starting workers not counted)
        while len(outcomes) < len(job.tasks):
            index = len(outcomes)
            remaining = job.timeout - used
            if remaining <= 0:
                skipped = {"status": "skipped", "messages": [], "output": ""}
                outcomes += [dict(skipped) for _ in job.tasks[index:]]
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
            outcome, failure = self._exchange(job.tasks[index], remaining)
            used += time.monotonic() - sent
            if outcome is not None and outcome.get("status") == "worker error" and not retried:
                retried = True  # the worker's own failure: once more, on a new one
                self.stop()
                continue
            if outcome is None:
                self.stop()
                outcome = {
                    "status": "worker lost",
                    "messages": [],
                    "output": "",
                    "exit": failure,
                    "seconds": round(time.monotonic() - sent, 3),
                }
            outcomes.append(outcome)
            retried = False
        return outcomes


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
        done: Callable[[Job, list[dict[str, Any]]], None],
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
                    outcomes = [
                        {
                            "status": "worker error",
                            "messages": [],
                            "output": "",
                            "exit": f"{type(error).__name__}: {error}",
                        }
                    ] * len(job.tasks)
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
