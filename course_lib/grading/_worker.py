"""The grading worker: runs inside the sandbox and calls students' functions.

This file is run as a script (``python -I -S _worker.py CONFIG``) inside the sandbox, where
``course_lib`` is *not* importable: it uses only the standard library and torch. The grader
imports it too, for the message format (:func:`read_message`, :func:`write_message`) and the
value codec (:func:`encode_value`, :func:`decode_tensor`), so both sides share one definition.

Life of a worker:

1. It imports torch once (about a second), limits torch to one thread, and, when the grader
   runs as root, drops to an unprivileged user id of its own.
2. It reads jobs from standard input: one job per submission, a list of tasks (one per code
   exercise: the source, the function's name, its parameters, the encoded arguments of every
   call, a time limit) and a time limit for the whole submission.
3. For each task it forks a child, which limits itself (memory, CPU time, processes, file
   size, open files), moves into a fresh empty working directory, sends what it prints to a
   file, defines the student's source in a fresh namespace and calls the function on each
   input in turn, sending back each result as JSON of numbers (never a pickle). Arguments
   arrive as JSON too: tensors with their entries, plain JSON values, and one kind of model,
   :class:`TableScorer` (the next-token scorer of the decoding exercises), sent as its two
   tables and rebuilt here with torch alone.
4. It waits for the child's messages until the task's time limit, kills the child's process
   group and, inside its own PID namespace, every other process the child left behind, then
   sends the task's outcome to the grader on standard output.

The child returns results only; the trusted grader compares them with the reference.
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import fcntl
import importlib.abc
import inspect
import io
import json
import linecache
import math
import os
import resource
import select
import shutil
import signal
import struct
import sys
import tempfile
import time
import traceback
from typing import Any, BinaryIO

HEADER = struct.Struct(">Q")
MAX_MESSAGE = 64 * 2**20  # bytes of one message between the grader and a worker
MAX_CHILD_MESSAGE = 32 * 2**20  # bytes of one message from a child to its worker
MAX_ENTRIES = 1_000_000  # entries of a returned tensor that are sent back
MAX_PARTS = 8  # items of a returned tuple that are described one by one
MAX_OUTPUT = 4000  # characters of printed output kept
SOURCE_NAME = "<submission>"
TENSOR_DTYPES = (
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "bool",
)
PR_SET_NO_NEW_PRIVS = 38
PR_SET_DUMPABLE = 4


# --------------------------------------------------------------------------- messages


class ProtocolError(Exception):
    """A message was malformed, too large, or the other side went away."""


def write_message(stream: BinaryIO, data: object) -> None:
    """Write ``data`` as JSON with an 8-byte length in front, and flush."""
    payload = json.dumps(data, separators=(",", ":")).encode("utf-8")
    stream.write(HEADER.pack(len(payload)) + payload)
    stream.flush()


def _read_exactly(fd: int, size: int, deadline: float | None) -> bytes:
    parts = []
    while size:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(size, 2**20))
        if not chunk:
            raise ProtocolError("the other side closed the channel")
        parts.append(chunk)
        size -= len(chunk)
    return b"".join(parts)


def read_message(fd: int, *, deadline: float | None = None, limit: int = MAX_MESSAGE) -> Any:
    """Read one message from the file descriptor ``fd``.

    Raises:
        TimeoutError: nothing complete arrived before ``deadline`` (``time.monotonic()``).
        ProtocolError: end of file, a message longer than ``limit`` bytes, or not JSON.
    """
    (size,) = HEADER.unpack(_read_exactly(fd, HEADER.size, deadline))
    if size > limit:
        raise ProtocolError(f"a message of {size} bytes is longer than {limit}")
    payload = _read_exactly(fd, size, deadline)
    try:
        return json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise ProtocolError(f"a message is not JSON ({error})") from None


# --------------------------------------------------------------------------- values


def encode_value(value: Any, *, nested: bool = False) -> dict[str, Any]:
    """JSON-ready description of a value: a tensor as its dtype, shape and entries.

    ``{"kind": "tensor", "dtype": "float32", "shape": [3, 4], "data": [...]}`` (``data`` is
    ``None`` when the tensor has more than ``MAX_ENTRIES`` entries or a dtype that is not
    sent); a tuple or list of up to ``MAX_PARTS`` values (such as attention's
    ``(output, weights)``) as ``{"kind": "tuple", "items": [...]}`` with each item described
    the same way, one level deep; ``{"kind": "object", "module": ..., "type": ...}`` for
    anything else.
    """
    import torch

    if isinstance(value, torch.Tensor):
        tensor = value.detach()
        if tensor.layout != torch.strided or tensor.device.type == "meta":
            raise ValueError(f"a {tensor.layout} tensor on {tensor.device} cannot be read")
        tensor = tensor.cpu()
        dtype = str(tensor.dtype).removeprefix("torch.")
        data = None
        if dtype in TENSOR_DTYPES and tensor.numel() <= MAX_ENTRIES:
            data = tensor.reshape(-1).tolist()
        return {"kind": "tensor", "dtype": dtype, "shape": list(tensor.shape), "data": data}
    if isinstance(value, (tuple, list)) and 0 < len(value) <= MAX_PARTS and not nested:
        return {"kind": "tuple", "items": [encode_value(item, nested=True) for item in value]}
    kind = type(value)
    return {"kind": "object", "module": kind.__module__, "type": kind.__qualname__}


def decode_tensor(data: dict[str, Any]):
    """The tensor described by ``encode_value``; ``ValueError`` if the description is bad."""
    import torch

    dtype, shape, entries = data.get("dtype"), data.get("shape"), data.get("data")
    if dtype not in TENSOR_DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(
        isinstance(n, int) and not isinstance(n, bool) and 0 <= n for n in shape
    ):
        raise ValueError(f"bad shape {shape!r}")
    if not isinstance(entries, list) or len(entries) != math.prod(shape):
        raise ValueError("the entries do not match the shape")
    kinds = (bool,) if dtype == "bool" else (int, float)
    if not all(isinstance(x, kinds) for x in entries):
        raise ValueError("the entries are not numbers of the dtype")
    return torch.tensor(entries, dtype=getattr(torch, dtype)).reshape(shape)


class TableScorer:
    """A next-token scorer given by two tables: the "model" of the decoding exercises.

    Arguments cross into the sandbox as tensors and JSON values only, so a model cannot be
    sent as it is; this one is sent as its two tables and rebuilt here with torch alone.
    Called with the ids so far, ``(batch, t)``, it returns the scores of the next token,
    ``(batch, vocab_size)``::

        scores[b] = by_position[t - 1, ids[b, t - 1]] + by_start[ids[b, 0]]

    so the scores depend on the last token, on how many tokens there are and on the first
    one, as a real model's depend on the whole prefix.

    Args:
        by_position: ``(max_len, vocab_size, vocab_size)`` float tensor.
        by_start: ``(vocab_size, vocab_size)`` float tensor.
    """

    def __init__(self, by_position, by_start) -> None:
        import torch

        if not isinstance(by_position, torch.Tensor) or not isinstance(by_start, torch.Tensor):
            raise TypeError("by_position and by_start must be tensors")
        if by_position.dim() != 3 or by_position.size(1) != by_position.size(2):
            raise ValueError(
                "by_position must be (max_len, vocab_size, vocab_size), got "
                f"{tuple(by_position.shape)}"
            )
        if tuple(by_start.shape) != tuple(by_position.shape[1:]):
            raise ValueError(
                f"by_start must be (vocab_size, vocab_size) = {tuple(by_position.shape[1:])}, "
                f"got {tuple(by_start.shape)}"
            )
        if not by_position.is_floating_point() or not by_start.is_floating_point():
            raise TypeError("by_position and by_start must hold floating-point scores")
        self.by_position = by_position
        self.by_start = by_start

    @property
    def vocab_size(self) -> int:
        return self.by_start.size(0)

    @property
    def max_len(self) -> int:
        return self.by_position.size(0)

    def __call__(self, ids):
        import torch

        if not isinstance(ids, torch.Tensor) or ids.dim() != 2:
            shape = tuple(ids.shape) if isinstance(ids, torch.Tensor) else type(ids).__name__
            raise ValueError(f"the model takes ids of shape (batch, t), got {shape}")
        if ids.is_floating_point() or ids.dtype == torch.bool:
            raise TypeError(f"the model takes integer token ids, got {ids.dtype}")
        length = ids.size(1)
        if not 1 <= length <= self.max_len:
            raise ValueError(
                f"the model takes 1 to {self.max_len} tokens per sequence, got {length}"
            )
        if ((ids < 0) | (ids >= self.vocab_size)).any():
            raise ValueError(f"token ids must be in [0, {self.vocab_size}), got {ids.tolist()}")
        ids = ids.long()
        return self.by_position[length - 1, ids[:, -1]] + self.by_start[ids[:, 0]]

    def __repr__(self) -> str:
        return f"TableScorer(vocab_size={self.vocab_size}, max_len={self.max_len})"


def encode_argument(value: Any) -> dict[str, Any]:
    """An argument of a call for the worker: a tensor with its entries, a
    :class:`TableScorer` as its two tables, or a JSON value."""
    import torch

    if isinstance(value, TableScorer):
        tables = {"by_position": value.by_position, "by_start": value.by_start}
        return {"scorer": {name: encode_argument(t)["tensor"] for name, t in tables.items()}}
    if isinstance(value, torch.Tensor):
        described = encode_value(value)
        if described["data"] is None:
            raise ValueError(
                f"cannot send a tensor of {value.numel()} entries, dtype {value.dtype}"
            )
        return {"tensor": described}
    json.dumps(value)  # TypeError for what JSON cannot carry
    return {"value": value}


def decode_argument(data: dict[str, Any]) -> Any:
    if "scorer" in data:
        tables = data["scorer"]
        return TableScorer(decode_tensor(tables["by_position"]), decode_tensor(tables["by_start"]))
    return decode_tensor(data["tensor"]) if "tensor" in data else data["value"]


# --------------------------------------------------------------------------- the child


class _CappedText(io.TextIOBase):
    """Standard output and error of the child: the first ``MAX_OUTPUT`` characters go to
    ``sink`` as they come (so they survive a kill), the rest is only counted."""

    def __init__(self, sink: int) -> None:
        self.sink = sink
        self.kept = 0
        self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        text = str(text)
        room = MAX_OUTPUT - self.kept
        kept = text[:room]
        if kept:
            self.kept += len(kept)
            with contextlib.suppress(OSError):
                os.write(self.sink, kept.encode("utf-8", "backslashreplace"))
        self.dropped += len(text) - len(kept)
        return len(text)


def _where(error: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == SOURCE_NAME]
    if not frames:
        return ""
    frame = frames[-1]
    line = f": {frame.line.strip()}" if frame.line else ""
    return f" (line {frame.lineno} of {frame.name}{line})"


def describe_error(error: BaseException, limits: dict[str, Any]) -> str:
    """``"ValueError: ... (line 4 of f: ...)"`` with advice for limits the code ran into."""
    try:
        lines = str(error).strip().splitlines()
    except BaseException:  # an exception whose text cannot be made
        lines = []
    first = lines[0][:500] if lines else ""
    note = ""
    if isinstance(error, MemoryError) or "allocate" in first:
        note = f" (grading lets the code use about {limits['memory_mb']} MB of memory)"
    elif isinstance(error, BlockingIOError) or (
        isinstance(error, OSError) and error.errno in (11, 27)
    ):
        note = (
            f" (grading allows at most {limits['processes']} more processes or threads and "
            f"files of at most {limits['file_mb']} MB)"
        )
    text = f"{type(error).__name__}{': ' + first if first else ''}{note}{_where(error)}"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _send(fd: int, data: dict[str, Any]) -> None:
    payload = json.dumps(data, separators=(",", ":")).encode("utf-8")
    if len(payload) > MAX_CHILD_MESSAGE:
        payload = json.dumps(
            {
                **{k: data[k] for k in ("event", "index") if k in data},
                "status": "raised",
                "error": f"the result is too large to send back ({len(payload)} bytes)",
            }
        ).encode("utf-8")
    data_out = HEADER.pack(len(payload)) + payload
    while data_out:
        written = os.write(fd, data_out)
        data_out = data_out[written:]


def _count_tasks(uid: int) -> int:
    """Processes and threads of user ``uid`` visible in /proc (what RLIMIT_NPROC counts)."""
    count = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as status:
                fields = dict(line.split(":", 1) for line in status if ":" in line)
        except OSError:
            continue
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            count += int(fields.get("Threads", "1"))
    return count


def _limit_child(limits: dict[str, Any], cpu_seconds: int) -> None:
    """Set the child's resource limits (soft and hard, so the code cannot raise them)."""

    def cap(kind: int, soft: int, hard: int | None = None) -> None:
        hard = soft if hard is None else hard
        _, ceiling = resource.getrlimit(kind)
        if ceiling != resource.RLIM_INFINITY:
            soft, hard = min(soft, ceiling), min(hard, ceiling)
        resource.setrlimit(kind, (soft, hard))

    cap(resource.RLIMIT_CORE, 0)
    cap(resource.RLIMIT_CPU, cpu_seconds, cpu_seconds + 1)  # SIGXCPU, then SIGKILL
    cap(resource.RLIMIT_FSIZE, limits["file_mb"] * 2**20)
    cap(resource.RLIMIT_NOFILE, 64)
    cap(resource.RLIMIT_NPROC, _count_tasks(os.getuid()) + limits["processes"])
    cap(resource.RLIMIT_AS, _vm_size() + limits["memory_mb"] * 2**20)


def _child(task: dict[str, Any], result_fd: int, output_fd: int, workdir: str) -> None:
    """Run one task in the forked child; never returns."""
    me = os.getpid()
    try:
        os.setpgid(0, 0)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a too large file: an error, not death
        # Standard input from /dev/null, output to the output file, results on descriptor 3,
        # nothing else open (the worker's channel to the grader above all).
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in (output_fd, result_fd)]
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(high[0], 1)
        os.dup2(high[0], 2)
        os.dup2(high[1], 3)
        os.closerange(4, 1 << 16)
        os.chdir(workdir)
        os.environ.clear()
        os.environ.update(
            {
                "HOME": workdir,
                "TMPDIR": workdir,
                "PATH": "/usr/bin:/bin",
                "LANG": "C.UTF-8",
                "OMP_NUM_THREADS": "1",
            }
        )
        tempfile.tempdir = workdir
        limits = task["limits"]
        _limit_child(limits, max(1, math.ceil(task["timeout"])) + 1)
        captured = _CappedText(1)
        sys.stdout = sys.stderr = captured
        sys.stdin = io.StringIO()
        _run_task(task, 3, captured, limits, me)
    except BaseException as error:  # the worker reports what happened
        with contextlib.suppress(BaseException):
            _send(3, {"event": "failed", "error": f"{type(error).__name__}: {error}"})
    finally:
        os._exit(0)


class _NoCourseLib(importlib.abc.MetaPathFinder):
    """Refuses to import ``course_lib``: graded code computes its answers itself. (Inside the
    sandbox course_lib is not there at all; this also holds without a sandbox.)"""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "course_lib" or name.startswith("course_lib."):
            raise ModuleNotFoundError(
                f"No module named {name!r} (grading does not allow course_lib)", name=name
            )


def blocked_message(name: str) -> str:
    """What a call to a function the exercise does not allow raises (the student's check says
    the same)."""
    return (
        "this exercise asks you to write the computation yourself; your code called "
        f"{name}, which the check does not allow"
    )


def _block(blocked: list[list[str]]) -> None:
    """Make each ``[module, qualified name]`` function raise when called, in this child only.

    A Python function gets a new body, so that every path to it (``F.layer_norm`` itself, or
    ``nn.LayerNorm``, which calls it) raises; a builtin is replaced in its owner.
    """
    for module_name, qualname in blocked:
        owner: Any = importlib.import_module(module_name)
        *path, name = qualname.split(".")
        for part in path:
            owner = getattr(owner, part)
        function = getattr(owner, name)
        message = blocked_message(f"{module_name}.{qualname}")

        def refuse(*args: Any, _message: str = message, **kwargs: Any) -> Any:
            raise RuntimeError(_message)

        try:
            function.__code__ = refuse.__code__  # has no closure: fits any function without one
            function.__defaults__ = None
            function.__kwdefaults__ = {"_message": message}
        except (AttributeError, TypeError, ValueError):  # a builtin, or a closure
            setattr(owner, name, refuse)


def _run_task(task, fd: int, captured: _CappedText, limits: dict[str, Any], me: int) -> None:
    sys.meta_path.insert(0, _NoCourseLib())
    _block(task.get("blocked", []))
    source = task["source"]
    linecache.cache[SOURCE_NAME] = (len(source), None, source.splitlines(True), SOURCE_NAME)
    namespace: dict[str, Any] = {"__name__": "__submission__", "__builtins__": builtins}
    try:
        exec(compile(source, SOURCE_NAME, "exec"), namespace)
    except BaseException as error:
        if os.getpid() != me:
            os._exit(0)
        _send(fd, {"event": "load", "status": "raised", "error": describe_error(error, limits)})
        return
    if os.getpid() != me:
        os._exit(0)
    function = namespace.get(task["function"])
    if not callable(function):
        what = "is not defined" if function is None else "is not a function"
        _send(
            fd,
            {
                "event": "load",
                "status": "missing",
                "error": f"{task['function']} {what} in the submitted source",
            },
        )
        return
    try:
        inspect.signature(function).bind(*task["parameters"])
    except TypeError:
        wanted = ", ".join(task["parameters"])
        _send(
            fd,
            {
                "event": "load",
                "status": "signature",
                "error": f"the function must accept ({wanted}); it takes "
                f"{inspect.signature(function)}",
            },
        )
        return
    except ValueError:  # no signature (a builtin): let the calls decide
        pass
    _send(fd, {"event": "load", "status": "ok"})
    for index, call in enumerate(task["calls"]):
        args = [decode_argument(a) for a in call["args"]]
        kwargs = {k: decode_argument(v) for k, v in call["kwargs"].items()}
        try:
            value = function(*args, **kwargs)
            if os.getpid() != me:
                os._exit(0)
            message = {
                "event": "call",
                "index": index,
                "status": "returned",
                "value": encode_value(value),
            }
        except BaseException as error:  # SystemExit and KeyboardInterrupt too
            if os.getpid() != me:
                os._exit(0)
            status = "not implemented" if type(error) is NotImplementedError else "raised"
            message = {
                "event": "call",
                "index": index,
                "status": status,
                "error": describe_error(error, limits),
            }
        _send(fd, message)
    _send(fd, {"event": "done", "dropped": captured.dropped})


# --------------------------------------------------------------------------- the worker


def _vm_size() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _kill_strays(child: int, pid_namespace: bool) -> None:
    """Kill the child's process group and, in our own PID namespace, every process but the
    namespace's init and this worker (a child may have started processes of its own)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child, signal.SIGKILL)
    if not pid_namespace:
        return
    me = os.getpid()
    for _ in range(100):
        alive = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) in (1, me):
                continue
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    state = stat.read().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state != "Z":  # a zombie is dead already; the namespace's init reaps it
                alive += 1
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(int(entry), signal.SIGKILL)
        if not alive:
            return
        time.sleep(0.01)


def _read_output(fd: int) -> str:
    """What the child printed (from the output file's descriptor: the child may have
    removed the file's name), truncated."""
    try:
        size = os.fstat(fd).st_size
        data = os.pread(fd, MAX_OUTPUT * 4, 0)
    except OSError:
        return ""
    text = data.decode("utf-8", "backslashreplace")
    extra = size - len(data)
    return text + (f"\n... ({extra} more bytes not shown)" if extra > 0 else "")


def _remove_tree(path: str) -> None:
    def allow(function, target, _info) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(target), 0o700)
            os.chmod(target, 0o700)
        with contextlib.suppress(OSError):
            function(target)

    with contextlib.suppress(OSError):
        shutil.rmtree(path, onerror=allow)


def run_task(task: dict[str, Any], deadline: float, config: dict[str, Any]) -> dict[str, Any]:
    """Fork a child for one task in a fresh folder, collect its messages until ``deadline``
    (``time.monotonic()``), clean up; return the outcome.

    Everything on disk that the task uses is made for it and removed after it: a child (which
    runs as the worker's user) may delete or lock it without harming later tasks.
    """
    scratch = tempfile.mkdtemp(prefix="task-", dir=config["tmp"])
    workdir = os.path.join(scratch, "work")
    os.mkdir(workdir, 0o700)
    output_path = os.path.join(scratch, "output.txt")
    output_fd = os.open(output_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    reader, writer = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(reader)
        _child(task, writer, output_fd, workdir)
    os.close(writer)
    messages: list[dict[str, Any]] = []
    status, problem = "crashed", ""
    try:
        while True:
            try:
                message = read_message(reader, deadline=deadline, limit=MAX_CHILD_MESSAGE)
            except TimeoutError:
                status = "timeout"
                break
            except ProtocolError as error:
                problem = "" if "closed" in str(error) else str(error)
                break
            if not isinstance(message, dict):
                problem = "the child sent something that is not a message"
                break
            messages.append(message)
            if message.get("event") in ("done", "failed") or (
                message.get("event") == "load" and message.get("status") != "ok"
            ):
                status = "done"
                break
    finally:
        os.close(reader)
        _kill_strays(pid, config["pid_namespace"])
        _, wait_status = os.waitpid(pid, 0)
    outcome = {
        "status": status,
        "messages": messages,
        "seconds": round(time.monotonic() - started, 3),
        "output": _read_output(output_fd),
    }
    os.close(output_fd)
    if status == "crashed":
        outcome["exit"] = _exit_description(wait_status, problem)
    _remove_tree(scratch)
    if config["private_tmp"]:
        _clear_folder(config["tmp"], keep=config["tmp_entries"])
    return outcome


def _exit_description(wait_status: int, problem: str) -> str:
    if problem:
        return problem
    if os.WIFSIGNALED(wait_status):
        number = os.WTERMSIG(wait_status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"killed by {name}"
    return f"exit code {os.WEXITSTATUS(wait_status)}"


def _clear_folder(folder: str, keep: frozenset[str] = frozenset()) -> None:
    """Remove everything in ``folder`` but the entries named in ``keep``."""
    try:
        entries = os.listdir(folder)
    except OSError:
        return
    for entry in entries:
        if entry in keep:
            continue
        path = os.path.join(folder, entry)
        if os.path.isdir(path) and not os.path.islink(path):
            _remove_tree(path)
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)


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
    write_message(
        channel_out,
        {
            "ready": True,
            "uid": os.getuid(),
            "torch": torch.__version__,
            "python": sys.version.split()[0],
            "memory": _vm_size(),
        },
    )
    while True:
        try:
            job = read_message(channel_in)
        except ProtocolError:
            return 0
        started = time.monotonic()
        submission_deadline = started + job["timeout"]
        for index, task in enumerate(job["tasks"]):
            now = time.monotonic()
            if now >= submission_deadline:
                outcome = {"status": "skipped", "messages": [], "seconds": 0.0, "output": ""}
            else:
                deadline = min(now + task["timeout"], submission_deadline)
                try:
                    outcome = run_task(task, deadline, config)
                except Exception as error:  # the worker's own failure: the grader retries
                    outcome = {
                        "status": "worker error",
                        "messages": [],
                        "seconds": 0.0,
                        "output": "",
                        "exit": f"{type(error).__name__}: {error}",
                    }
                outcome["submission_limit"] = deadline == submission_deadline
            write_message(channel_out, {"task": index, **outcome})
        write_message(channel_out, {"done": job["id"]})


if __name__ == "__main__":
    sys.exit(main(sys.argv))
