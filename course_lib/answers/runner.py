"""How an answer to a code exercise runs: one process per case, for the student's check and
the grader alike.

An answer is run from what a submission carries: the source of the student's function (with
the imports, constants and helpers it uses), defined in a fresh namespace, called on the
inputs of the exercise. The same code does this in the notebook, when a student runs
``check``, and in grading, inside bubblewrap: so an answer gets the same verdict in both.

This file uses only the standard library and torch, and never imports ``course_lib``: in
grading it runs as a script inside a sandbox where ``course_lib`` does not exist, with its two
companions beside it (:mod:`~course_lib.answers._confine`, what a case may not do, and
:mod:`~course_lib.answers._refuse`, the computations an exercise forbids).

**One answer, one clean process.** The script is a *fork server* (:func:`serve`): a process
that imports torch once and then, for each *case* (one call of the answer on one input), forks
a process that runs it and dies. The fork server never reads an answer, its inputs or its
results: a request carries only a time limit and three file descriptors, opened by the
trusted side (:mod:`course_lib.answers.engine`), which it passes on unread: the task (the
source and that one case's inputs), a pipe for the results, a file for printed output. So
every case process is a copy of a process that has seen no student's code or data, holds no
expected value and no other case's inputs, and shares nothing with the cases before it. The
case process (:func:`_case_child`)

1. limits itself (memory, CPU time, threads, file size, open files), moves into a fresh
   empty folder, and sends what is written to its standard output and error, by ``print``
   or straight to the descriptors, to the output file;
2. refuses ``course_lib`` and, for good, every route to the computations the exercise
   forbids (``_refuse.refuse_for_good``: nothing is kept that could undo it);
3. confines itself (``_confine.confine``): an audit hook and a seccomp filter refuse starting
   processes, ``gc`` and ``ctypes``, rewriting code and reloading refused modules;
4. defines the source and calls the function on its one input, sending back the result as
   JSON of numbers (never a pickle).

The fork server kills a case process at its time limit and, in grading, cleans up after it
in a process of its own. Arguments cross as JSON too: tensors with their entries, plain JSON
values, and one kind of model, :class:`TableScorer` (the next-token scorer of the decoding
exercises), sent as its two tables and rebuilt with torch alone.

Where the system cannot fork (Windows), :func:`course_lib.answers.engine.run_in_thread` runs
the same steps in a thread of the calling process, without the limits: it can abandon a
call, not stop it.
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import importlib
import importlib.abc
import inspect
import io
import json
import linecache
import math
import os
import platform
import select
import shutil
import signal
import socket
import struct
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from typing import Any

try:  # POSIX; imported here, before a grading worker drops to a user that may not read them
    import fcntl
    import resource
except ImportError:  # Windows: answers run in a thread (engine.run_in_thread)
    fcntl = resource = None  # type: ignore[assignment]

if __package__:  # imported as part of course_lib (the grader, a student's notebook)
    from course_lib.answers import _confine, _refuse
else:  # run as a script (the fork server): its two companions were put beside it
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _confine  # type: ignore[no-redef]
    import _refuse  # type: ignore[no-redef]

HEADER = struct.Struct(">Q")
MAX_MESSAGE = 64 * 2**20  # bytes of the task a case process reads
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
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
CONTROL_SIZE = 4096  # bytes of one control message between the grader and a fork server
ENGINE_FILES = ("runner.py", "_confine.py", "_refuse.py")  # what a fork server runs
REFUSED_MODULES = (*_refuse.FRESH_IMPORTS_REFUSED, "course_lib")  # never loaded afresh
DEFAULT_LIMITS = {"memory_mb": 1024, "processes": 8, "file_mb": 16}  # per task, everywhere
OPERATOR_KEYS = (  # dispatch keys whose kernels a blocked operator loses (Meta: shapes only)
    "CompositeImplicitAutograd",
    "CompositeExplicitAutograd",
    "CompositeExplicitAutogradNonFunctional",
    "CPU",
    "CUDA",
)


# --------------------------------------------------------------------------- messages


class ProtocolError(Exception):
    """A message was malformed, too large, or the other side went away."""


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
            raise ValueError(f"a {tensor.layout} tensor on the {tensor.device} device")
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


class CappedText(io.TextIOBase):
    """Standard output and error of the answer: the first ``MAX_OUTPUT`` characters go to the
    file descriptor ``sink`` as they come (so they survive a kill), or are kept here when
    ``sink`` is ``None``; the rest is only counted."""

    def __init__(self, sink: int | None) -> None:
        self.sink = sink
        self.parts: list[str] = []
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
            if self.sink is None:
                self.parts.append(kept)
            else:
                with contextlib.suppress(OSError):
                    os.write(self.sink, kept.encode("utf-8", "backslashreplace"))
        self.dropped += len(text) - len(kept)
        return len(text)

    def text(self) -> str:
        """What was kept (with ``sink=None``)."""
        return "".join(self.parts).encode("utf-8", "backslashreplace").decode("utf-8")


def _where(error: BaseException) -> str:
    """``" (line 4 of positional_encoding: angle = ...)"``: where in the submitted code the
    error came from, the line counted from the ``def`` (line 1), as in the student's cell."""
    found = [
        (frame, lineno)
        for frame, lineno in traceback.walk_tb(error.__traceback__)
        if frame.f_code.co_filename == SOURCE_NAME
    ]
    if not found:
        return ""
    frame, lineno = found[-1]
    text = linecache.getline(SOURCE_NAME, lineno).strip()
    shown = f": {text}" if text else ""
    if frame.f_code.co_name == "<module>":
        return f" (line {lineno} of the submitted source{shown})"
    return f" (line {lineno - frame.f_code.co_firstlineno + 1} of {frame.f_code.co_name}{shown})"


def describe_error(error: BaseException, limits: dict[str, Any]) -> str:
    """``"ValueError: ... (line 4 of f: ...)"`` with advice for limits the code ran into."""
    try:
        lines = str(error).strip().splitlines()
    except BaseException:  # an exception whose text cannot be made
        lines = []
    first = lines[0][:500] if lines else ""
    note = ""
    if isinstance(error, MemoryError) or "allocate" in first:
        note = f" (checks and grading let the code use about {limits['memory_mb']} MB of memory)"
    elif "forked subprocess" in first:  # CUDA cannot start again after fork
        note = " (the check runs your code in a forked process, on the CPU: keep tensors there)"
    elif isinstance(error, BlockingIOError) or (
        isinstance(error, OSError) and error.errno in (11, 27)
    ):
        note = (
            f" (checks and grading allow at most {limits['processes']} more processes or "
            f"threads and files of at most {limits['file_mb']} MB)"
        )
    text = f"{type(error).__name__}{': ' + first if first else ''}{note}{_where(error)}"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _send(fd: int, data: dict[str, Any]) -> None:
    """Write one message to ``fd``; a result too large to send becomes an error."""
    payload = json.dumps(data, separators=(",", ":")).encode("utf-8", "backslashreplace")
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
    """Set the child's resource limits (soft and hard, so the code cannot raise them).

    A limit that this system does not have or cannot measure (no ``/proc`` on macOS) is
    left as it is."""

    def cap(kind: int, soft: int, hard: int | None = None) -> None:
        hard = soft if hard is None else hard
        _, ceiling = resource.getrlimit(kind)
        if ceiling != resource.RLIM_INFINITY:
            soft, hard = min(soft, ceiling), min(hard, ceiling)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(kind, (soft, hard))

    cap(resource.RLIMIT_CORE, 0)
    cap(resource.RLIMIT_CPU, cpu_seconds, cpu_seconds + 1)  # SIGXCPU, then SIGKILL
    cap(resource.RLIMIT_FSIZE, limits["file_mb"] * 2**20)
    cap(resource.RLIMIT_NOFILE, 64)
    if os.path.isdir("/proc/self"):
        cap(resource.RLIMIT_NPROC, _count_tasks(os.getuid()) + limits["processes"])
        cap(resource.RLIMIT_AS, _vm_size() + limits["memory_mb"] * 2**20)


def _prctl(option: int, value: int) -> bool:
    """``prctl(option, value)`` on Linux; ``False`` where it is not available or failed."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _read_task(fd: int) -> dict[str, Any]:
    """The task the grader wrote to the file ``fd`` for this case (JSON)."""
    size = os.fstat(fd).st_size
    if size > MAX_MESSAGE:
        raise ProtocolError(f"a task of {size} bytes is longer than {MAX_MESSAGE}")
    data = os.pread(fd, size, 0)
    task = json.loads(data.decode("utf-8"))
    if not isinstance(task, dict):
        raise ProtocolError("the task is not a JSON object")
    return task


def _case_child(fds: list[int], config: dict[str, Any], workdir: str) -> None:
    """Run one case of one answer in this freshly forked process; never returns.

    ``fds`` are the three files the grader passed for it: the task to read, the channel for
    results (a pipe to the grader) and the file for printed output. The fork server holds
    nothing of any answer, so neither does this process, but its own task.
    """
    task_fd, result_fd, output_fd = fds
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the fork server gone: so is the case
        os.setpgid(0, 0)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a too large file: an error, not death
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        task = _read_task(task_fd)
        # Standard input from /dev/null, output to the output file, results on descriptor 3,
        # nothing else open (the fork server's channel, the task's file).
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
        captured = CappedText(1)
        sys.stdout = sys.stderr = captured
        sys.stdin = io.StringIO()
        sys.meta_path.insert(0, _NoCourseLib())
        _refuse.refuse_for_good(task.get("blocked", []), task.get("blocked_ops", []))
        _confine.confine(REFUSED_MODULES)
        run_calls(task, lambda message: _send(3, message), captured, limits)
    except BaseException as error:  # the grader reports what happened
        with contextlib.suppress(BaseException):
            _send(3, {"event": "failed", "error": f"{type(error).__name__}: {error}"[:2000]})
    finally:
        os._exit(0)


def _printed_bytes() -> int | None:
    """Bytes written so far to the output file (descriptor 1), or ``None``."""
    try:
        return os.fstat(1).st_size
    except OSError:
        return None


class _NoCourseLib(importlib.abc.MetaPathFinder):
    """Refuses to import ``course_lib``: answers compute their results themselves. (Inside the
    grading sandbox course_lib is not there at all; this also holds in a student's check.)"""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "course_lib" or name.startswith("course_lib."):
            raise ModuleNotFoundError(
                f"No module named {name!r} (checks and grading do not allow course_lib)",
                name=name,
            )


GRADING_PACKAGES = ("torch", "numpy")  # what answers may import beside the standard library
IMPORT_RULE = "answers may import the standard library, torch and numpy, as grading does"


def importable_in_grading(module: str) -> bool:
    """Whether an answer may import ``module``: the standard library, torch and NumPy are
    there wherever answers run; a student's own modules and other packages are not."""
    top = module.split(".")[0]
    return top in sys.stdlib_module_names or top in GRADING_PACKAGES


def _submission_builtins() -> dict[str, Any]:
    """The builtins of the submission's namespace, whose ``import`` statements may reach
    only what grading has (a notebook has imported much more, which a forked check sees)."""
    real_import = builtins.__import__

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and not importable_in_grading(name):
            top = name.split(".")[0]
            if top == "course_lib":
                reason = "checks and grading do not allow course_lib"
            else:
                reason = IMPORT_RULE
            raise ModuleNotFoundError(f"No module named {top!r} ({reason})", name=top)
        return real_import(name, globals, locals, fromlist, level)

    namespace = dict(vars(builtins))
    namespace["__import__"] = guarded_import
    return namespace


blocked_message = _refuse.blocked_message  # one wording for every route, in every place


def _refuser(message: str) -> Callable[..., Any]:
    def refuse(*args: Any, _message: str = message, **kwargs: Any) -> Any:
        raise RuntimeError(_message)

    return refuse


def _block(blocked: list[list[str]]) -> Callable[[], None]:
    """Make each ``[module, qualified name]`` function raise when called; return an undo.

    A Python function gets a new body, so that every path to it (``F.layer_norm`` itself,
    an alias of it, or ``nn.LayerNorm``, which calls it) raises; a builtin is replaced in its
    owner (its other aliases are caught by :func:`_block_operators`).
    """
    undo: list[Callable[[], None]] = []
    for module_name, qualname in blocked:
        owner: Any = importlib.import_module(module_name)
        *path, name = qualname.split(".")
        for part in path:
            owner = getattr(owner, part)
        function = getattr(owner, name)
        message = blocked_message(f"{module_name}.{qualname}")
        refuse = _refuser(message)
        try:
            saved = (function.__code__, function.__defaults__, function.__kwdefaults__)
            function.__code__ = refuse.__code__  # has no closure: fits any function without one
            function.__defaults__ = None
            function.__kwdefaults__ = {"_message": message}
        except (AttributeError, TypeError, ValueError):  # a builtin, or a closure
            setattr(owner, name, refuse)
            undo.append(lambda owner=owner, name=name, function=function: setattr(
                owner, name, function))  # fmt: skip
        else:
            undo.append(lambda function=function, saved=saved: _restore(function, saved))

    def restore() -> None:
        for step in reversed(undo):
            step()

    return restore


def _restore(function: Any, saved: tuple) -> None:
    function.__code__, function.__defaults__, function.__kwdefaults__ = saved


def _block_operators(operators: list[str]) -> Any:
    """Make each PyTorch operator (``"aten::layer_norm"``) raise, however it is reached.

    Every route to an operator, ``torch.layer_norm``, ``torch.ops.aten.layer_norm``, a
    Python alias, a module that calls it, goes through PyTorch's dispatcher: this registers a
    kernel that raises in place of each of its kernels. Returns the ``torch.library.Library``
    holding them (they are removed when it is destroyed); ``None`` when nothing is blocked.
    """
    if not operators:
        return None
    import torch

    library = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():  # "Overriding a previously registered kernel ..."
        warnings.simplefilter("ignore")
        for qualified in operators:
            name = qualified.removeprefix("aten::")
            refuse = _refuser(blocked_message(f"torch.ops.aten.{name.split('.')[0]}"))
            for key in OPERATOR_KEYS:
                try:
                    if torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", key):
                        library.impl(name, refuse, key)
                except RuntimeError:  # an operator this PyTorch does not have
                    break
    return library


def run_calls(
    task: dict[str, Any],
    send: Callable[[dict[str, Any]], None],
    captured: CappedText,
    limits: dict[str, Any],
) -> None:
    """Define the source in a fresh namespace and call the function on the task's inputs,
    sending a message for each step. The caller has refused what the exercise forbids.

    The calls are numbered ``task["indices"]`` (a process of the engine gets the public
    calls, or one hidden call, with their numbers; the thread fallback gets them all, from
    0)."""
    source = task["source"]
    linecache.cache[SOURCE_NAME] = (len(source), None, source.splitlines(True), SOURCE_NAME)
    namespace: dict[str, Any] = {
        "__name__": "__submission__",
        "__builtins__": _submission_builtins(),
    }
    try:
        exec(compile(source, SOURCE_NAME, "exec"), namespace)
    except BaseException as error:
        send({"event": "load", "status": "raised", "error": describe_error(error, limits)})
        return
    function = namespace.get(task["function"])
    if not callable(function):
        what = "is not defined" if function is None else "is not a function"
        error = f"{task['function']} {what} in the submitted source"
        send({"event": "load", "status": "missing", "error": error})
        return
    try:
        inspect.signature(function).bind(*task["parameters"])
    except TypeError:
        wanted = ", ".join(task["parameters"])
        error = f"the function must accept ({wanted}); it takes {inspect.signature(function)}"
        send({"event": "load", "status": "signature", "error": error})
        return
    except ValueError:  # no signature (a builtin): let the calls decide
        pass
    send({"event": "load", "status": "ok", "printed": _printed_bytes()})
    indices = task.get("indices") or range(len(task["calls"]))
    for index, call in zip(indices, task["calls"], strict=True):
        args = [decode_argument(a) for a in call["args"]]
        kwargs = {k: decode_argument(v) for k, v in call["kwargs"].items()}
        message: dict[str, Any] = {"event": "call", "index": index}
        try:
            value = function(*args, **kwargs)
        except BaseException as error:  # SystemExit and KeyboardInterrupt too
            status = "not implemented" if type(error) is NotImplementedError else "raised"
            message.update(status=status, error=describe_error(error, limits))
        else:
            try:
                message.update(status="returned", value=encode_value(value))
            except Exception as error:  # meta tensors, exotic layouts, failing __len__ ...
                error_text = f"returned a value that cannot be read ({error})"
                message.update(status="raised", error=error_text)
        send(message)
    send({"event": "done", "dropped": captured.dropped})


def guard_in_thread(task: dict[str, Any]) -> Callable[[], None]:
    """For :func:`course_lib.answers.engine.run_in_thread` only, where answers run in the
    caller's own process: refuse ``course_lib`` and block what the task forbids until the
    returned undo is called.
    (A case process refuses for good instead, with :func:`_refuse.refuse_for_good`.)"""
    finder = _NoCourseLib()
    sys.meta_path.insert(0, finder)
    restore = _block(task.get("blocked", []))
    library = _block_operators(task.get("blocked_ops", []))

    def undo() -> None:
        destroy = getattr(library, "_destroy", None)  # else its finaliser removes the kernels
        if destroy is not None:
            destroy()
        restore()
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(finder)

    return undo


# --------------------------------------------------------------------------- the parent


def _vm_size() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def process_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state, ppid, pgrp, session,
    ...), or ``None`` when there is no such process (or no ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def processes() -> dict[int, list[str]]:
    """Every visible process: its pid and the fields of its ``stat`` (``{}`` without
    ``/proc``)."""
    found = {}
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if entry.isdigit() and (fields := process_stat(int(entry))) is not None:
                found[int(entry)] = fields
    return found


def descendants(root: int, table: dict[int, list[str]] | None = None) -> list[int]:
    """The processes below ``root`` (zombies included), nearest first."""
    table = processes() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, fields in table.items():
        children.setdefault(int(fields[1]), []).append(pid)
    found, todo = [], sorted(children.get(root, []))
    while todo:
        pid = todo.pop(0)
        found.append(pid)
        todo += sorted(children.get(pid, []))
    return found


def _kill_until_none(find: Callable[[], list[int]], pause: float) -> None:
    """Kill the processes ``find`` returns, again and again, until it returns none (a
    process may start others while it is being killed); at most 100 rounds."""
    for _ in range(100):
        found = find()
        if not found:
            return
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(pause)


def _remove_tree(path: str) -> None:
    def allow(function, target, _info) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(target), 0o700)
            os.chmod(target, 0o700)
        with contextlib.suppress(OSError):
            function(target)

    with contextlib.suppress(OSError):
        shutil.rmtree(path, onerror=allow)


# --------------------------------------------------------------------------- the fork server


def send_frame(sock: socket.socket, data: object, fds: list[int] = ()) -> None:
    """Send one small JSON message, with an 8-byte length in front and file descriptors
    attached to its first byte, on a Unix stream socket."""
    payload = json.dumps(data, separators=(",", ":")).encode("utf-8")
    if len(payload) > CONTROL_SIZE:
        raise ProtocolError(f"a control message of {len(payload)} bytes is too long")
    frame = HEADER.pack(len(payload)) + payload
    sent = socket.send_fds(sock, [frame], list(fds)) if fds else sock.send(frame)
    if sent < len(frame):
        sock.sendall(frame[sent:])


def _receive_exactly(sock: socket.socket, size: int, max_fds: int) -> tuple[bytes, list[int]]:
    """``size`` bytes from ``sock`` and the descriptors that came with them (fewer bytes
    only at the end of the channel)."""
    data, fds = b"", []
    while len(data) < size:
        if max_fds:
            chunk, more, _, _ = socket.recv_fds(sock, size - len(data), max_fds)
            fds += more
        else:
            chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data, fds


def receive_frame(sock: socket.socket, max_fds: int = 0) -> tuple[Any, list[int]]:
    """One message (``None`` at the end of the channel) and the descriptors it carried."""
    header, fds = _receive_exactly(sock, HEADER.size, max_fds)
    try:
        if len(header) < HEADER.size:
            if header:
                raise ProtocolError("the channel closed in the middle of a message")
            for fd in fds:
                os.close(fd)
            return None, []
        (size,) = HEADER.unpack(header)
        if size > CONTROL_SIZE:
            raise ProtocolError(f"a control message of {size} bytes is too long")
        payload, _ = _receive_exactly(sock, size, 0)
        if len(payload) < size:
            raise ProtocolError("the channel closed in the middle of a message")
        return json.loads(payload.decode("utf-8")), fds
    except (ProtocolError, UnicodeDecodeError, ValueError) as error:
        for fd in fds:
            os.close(fd)
        if isinstance(error, ProtocolError):
            raise
        raise ProtocolError(f"a control message is not JSON ({error})") from None


def _wait_for(pid: int, seconds: float, control: socket.socket) -> tuple[str, int]:
    """Wait until the case process ``pid`` ends, ``seconds`` pass (``"timeout"``) or the
    grader says ``kill`` (``"killed"``); return how it ended and its wait status (after
    killing it, when it had not ended)."""
    deadline = time.monotonic() + seconds
    pidfd = None
    with contextlib.suppress(AttributeError, OSError):
        pidfd = os.pidfd_open(pid)
    how = "ended"
    try:
        while True:
            done, wait_status = os.waitpid(pid, os.WNOHANG)
            if done:
                return how, wait_status
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                how = "timeout"
                break
            watched = [control] if pidfd is None else [control, pidfd]
            ready = select.select(watched, [], [], min(remaining, 0.005 if pidfd is None else 1))
            if control in ready[0]:
                request, _ = receive_frame(control)
                how = "killed" if request is not None else "gone"
                break
    finally:
        if pidfd is not None:
            os.close(pidfd)
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)
    _, wait_status = os.waitpid(pid, 0)
    return how, wait_status


def _clean_up(config: dict[str, Any], workdirs: list[str]) -> None:
    """Remove what the cases of a task left: their processes, their folders and, in a
    sandbox's private ``/tmp``, everything they added. In grading this runs in a process
    forked for it, so that the fork server never holds what a case left (file names
    included); the folders are the fork server's own names."""
    if not config.get("isolate"):
        for workdir in workdirs:
            _remove_tree(workdir)
        return
    pid = os.fork()
    if pid == 0:
        try:
            if config.get("pid_namespace"):
                spared = (1, os.getpid(), os.getppid())  # init, this cleaner, the fork server
                _kill_until_none(
                    lambda: [
                        p
                        for p, fields in processes().items()
                        if p not in spared and fields[0] != "Z"
                    ],
                    0.01,
                )
            for workdir in workdirs:
                _remove_tree(workdir)
            if config.get("private_tmp"):
                _clear_folder(config["tmp"], keep=frozenset(config.get("tmp_entries", ())))
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def _serve_case(
    control: socket.socket,
    request: dict[str, Any],
    fds: list[int],
    config: dict[str, Any],
    workdirs: list[str],
) -> None:
    """Fork a process for one case in a fresh folder (added to ``workdirs``), wait for it
    within its seconds, report how it ended. A student's check removes the folder at once;
    grading cleans up when the grader says the task is over (``{"clean": true}``): the cases
    of one task are one student's, and a hidden case runs after every public one."""
    started = time.monotonic()
    try:
        seconds = float(request["seconds"])
        if len(fds) != 3:
            raise ProtocolError(f"a case needs 3 files, got {len(fds)}")
        workdir = tempfile.mkdtemp(prefix="case-", dir=config["tmp"])
        workdirs.append(workdir)
        os.chmod(workdir, 0o700)
        with warnings.catch_warnings():  # Python >= 3.12 warns about forking a threaded process
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            control.close()
            _case_child(fds, config, workdir)
    finally:
        for fd in fds:
            os.close(fd)
    how, wait_status = _wait_for(pid, seconds, control)
    if not config.get("isolate"):
        _clean_up(config, workdirs)
        workdirs.clear()
    report = {
        "ended": how,
        "exit": _exit_description(wait_status, ""),
        "seconds": round(time.monotonic() - started, 3),
    }
    if how != "gone":
        send_frame(control, report)


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


def serve(control: socket.socket, config: dict[str, Any]) -> int:
    """The fork server's life: import torch once, then fork a process for every case the
    grader asks for, until the channel closes.

    It holds nothing of any answer: a request carries only a time limit and three file
    descriptors (the task, the result channel, the output file) that it passes on without
    reading them, and it learns nothing back but how the case process ended. Every case
    process is thus a copy of a process that has seen no student's code or data.

    ``config``: ``uid`` (drop to it after importing, when the grader runs as root), ``tmp``
    (where case folders are made), ``isolate`` (clean up in a process of its own),
    ``pid_namespace`` and ``private_tmp`` (the sandbox's: kill every other process, empty
    ``/tmp`` after each case).
    """
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    import numpy  # noqa: F401  (imported once here, not in every case)
    import torch

    torch.set_num_threads(1)
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(1)
    torch.zeros(4).sin().sum()  # lazy initialisation happens here, once, not in each case
    _refuse.preload()
    _confine.trusted_roots()  # read now: the user below may not read the installation's paths
    _confine.module_files(REFUSED_MODULES)  # once here, inherited by every case process
    if config.get("uid") is not None:
        _drop_privileges(config["uid"])
    _prctl(PR_SET_DUMPABLE, 0)  # cases cannot read this process's memory
    config["tmp_entries"] = sorted(os.listdir(config["tmp"])) if config.get("private_tmp") else []
    send_frame(
        control,
        {
            "ready": True,
            "uid": os.getuid(),
            "torch": torch.__version__,
            "python": sys.version.split()[0],
            "seccomp": _confine.seccomp_program(platform.machine()) is not None,
        },
    )
    workdirs: list[str] = []
    while True:
        request, fds = receive_frame(control, max_fds=3)
        if request is None:
            _clean_up(config, workdirs)
            return 0
        if isinstance(request, dict) and "run" in request:
            _serve_case(control, request["run"], fds, config, workdirs)
            continue
        for fd in fds:
            os.close(fd)
        if isinstance(request, dict) and request.get("clean"):
            _clean_up(config, workdirs)
            workdirs.clear()
            send_frame(control, {"cleaned": True})
        # else "kill" after its case ended: nothing to do


def main(argv: list[str]) -> int:
    """``python -I -S runner.py CONFIG``: the fork server, its channel on descriptor 0."""
    config = json.loads(argv[1])
    sys.path[:0] = [path for path in config.get("sys_path", []) if path not in sys.path]
    control = socket.socket(fileno=os.dup(0))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)  # nothing printed may look like a message
    return serve(control, config)


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


if __name__ == "__main__":
    sys.exit(main(sys.argv))
