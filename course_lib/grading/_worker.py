"""The grading worker: runs inside the sandbox and runs students' answers.

This file is run as a script (``python -I -S worker.py CONFIG``) inside the sandbox, where
``course_lib`` is *not* importable: beside it lies the answer runner,
:mod:`course_lib.exercises._runner` (standard library and torch only), which it imports as a
plain module. Students' checks run answers with the same runner, so an answer gets the same
verdict in the notebook and here.

Life of a worker:

1. It imports torch once (about a second), limits torch to one thread, and, when the grader
   runs as root, drops to an unprivileged user id of its own.
2. It reads jobs from standard input: one job per submission, a list of tasks (one per code
   exercise, see the runner) and a time limit for the whole submission.
3. For each task the runner forks a limited child in a fresh folder, collects its results
   until the task's time limit and kills it with everything it started (inside the worker's
   own PID namespace, every other process); the worker sends the task's outcome to the
   grader on standard output.

The child returns results only; the trusted grader compares them with the reference.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import sys
import time

if __package__:  # imported by the grader, as part of course_lib
    from course_lib.exercises import _runner
else:  # run as a script in the sandbox: the runner was put beside this file
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _runner  # type: ignore[no-redef]

PR_SET_NO_NEW_PRIVS = 38
PR_SET_DUMPABLE = 4
RUNNER_NAME = "_runner.py"  # the runner's file name beside this one in the sandbox


def _drop_privileges(uid: int) -> None:
    """Become user ``uid`` (group ``uid``, no other groups), for good; then no setuid gains."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise OSError("could not change the user id")


def _run_job(job: dict, config: dict, channel_out) -> None:
    """Run every task of one job in turn, within its time limit; send each outcome."""
    started = time.monotonic()
    submission_deadline = started + job["timeout"]
    for index, task in enumerate(job["tasks"]):
        now = time.monotonic()
        if now >= submission_deadline:
            outcome = {"status": "skipped", "messages": [], "seconds": 0.0, "output": ""}
        else:
            deadline = min(now + task["timeout"], submission_deadline)
            try:
                outcome = _runner.run_task(task, deadline, config)
            except Exception as error:  # the worker's own failure: the grader retries
                outcome = {
                    "status": "worker error",
                    "messages": [],
                    "seconds": 0.0,
                    "output": "",
                    "exit": f"{type(error).__name__}: {error}",
                }
            outcome["submission_limit"] = deadline == submission_deadline
        _runner.write_message(channel_out, {"task": index, **outcome})
    _runner.write_message(channel_out, {"done": job["id"]})


def main(argv: list[str]) -> int:
    config = json.loads(argv[1])
    sys.path[:0] = [path for path in config["sys_path"] if path not in sys.path]
    channel_in = sys.stdin.buffer.fileno()
    channel_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    # Nothing the worker or its children print may reach the channel to the grader.
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    import torch

    torch.set_num_threads(1)
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(1)
    torch.zeros(4).sin().sum()  # lazy initialisation happens here, once, not in each child
    if config.get("uid") is not None:
        _drop_privileges(config["uid"])
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # children cannot read this process's memory
    # What the sandbox put in its /tmp (the way to a mounted folder, when the Python
    # installation lies under /tmp) stays; whatever a child adds is removed after it.
    config["tmp_entries"] = frozenset(os.listdir(config["tmp"]) if config["private_tmp"] else ())
    _runner.write_message(
        channel_out,
        {
            "ready": True,
            "uid": os.getuid(),
            "torch": torch.__version__,
            "python": sys.version.split()[0],
            "memory": _runner._vm_size(),
        },
    )
    while True:
        try:
            job = _runner.read_message(channel_in)
        except _runner.ProtocolError:
            return 0
        _run_job(job, config, channel_out)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
