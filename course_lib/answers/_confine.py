"""What the process running one case of an answer may not do, enforced for good.

The answer runner (:mod:`course_lib.answers.runner`) forks a fresh process for every case
of every answer. Before the answer's code runs, that process confines itself, in two layers
that nothing running in it can remove:

1. **An audit hook** (:pep:`578`, :func:`sys.addaudithook`): Python calls it before every
   sensitive operation, and a hook cannot be removed once added. It refuses, with a message
   that says what was refused:

   - reaching the interpreter's objects behind the code's back: ``gc.get_objects``,
     ``gc.get_referrers`` and ``gc.get_referents``;
   - rewriting a function's body (setting ``__code__``), which could undo a refusal, and
     making code the compiler did not check (``types.CodeType``, ``code.replace``,
     ``types.FunctionType``, ``marshal``): forged bytecode reads and writes any memory,
     which would undo everything. The import system may still load a module's cached
     bytecode, when it is byte for byte the file of the Python installation or its packages
     that the import system names;
   - ``ctypes`` (loading libraries, reading or writing memory, calling C);
   - starting a process (``os.fork``, ``os.exec*``, ``os.posix_spawn``, ``os.system``,
     ``subprocess``, ``pty.spawn``);
   - opening the files of processes (``/proc``, with a process's memory), also by a path
     relative to a folder opened before, changing the working folder, and making links;
   - loading afresh a module whose Python code computes what an exercise forbids
     (``torch._refs``, ``torch._decomp``, ...: they are loaded, and refused, before the answer
     runs) or ``course_lib``.

2. **A seccomp filter** (Linux, x86-64 and AArch64): the kernel refuses the system calls that
   start a process or a program (``fork``, ``vfork``, ``clone`` without ``CLONE_THREAD``,
   ``execve``), that read or write another process (``ptrace``, ``process_vm_readv``), and
   that make state which outlives the process (System V shared memory, semaphores and message
   queues, POSIX message queues, keyrings), and those that could leave the filter behind
   (``io_uring``, ``bpf``, new namespaces, ``mount``). Threads may still be started. This
   holds whatever the code does in Python or in C, ``ctypes`` included.

This file uses only the standard library; it is copied beside the runner into the grading
sandbox, where ``course_lib`` does not exist.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import struct
import sys
import sysconfig  # here, before a grading worker drops to a user that may not read it
from collections.abc import Callable, Iterable
from types import MappingProxyType

__all__ = ["REFUSED_MESSAGE", "confine", "install_audit_hook", "install_seccomp"]

REFUSED_MESSAGE = "checks and grading do not allow {what}"

PROCESS_EVENTS = {
    "os.fork": "starting a process (os.fork)",
    "os.forkpty": "starting a process (os.forkpty)",
    "os.exec": "running a program (os.exec*)",
    "os.posix_spawn": "starting a process (os.posix_spawn)",
    "os.spawn": "starting a process (os.spawn*)",
    "os.system": "running a program (os.system)",
    "subprocess.Popen": "starting a process (subprocess)",
    "pty.spawn": "starting a process (pty.spawn)",
    "os.startfile": "starting a program (os.startfile)",
}
GC_EVENTS = ("gc.get_objects", "gc.get_referrers", "gc.get_referents")
CODE_EVENTS = {  # ways to make code that the compiler did not check, and ways around paths
    "code.__new__": "building a code object (types.CodeType, code.replace)",
    "function.__new__": "building a function from a code object (types.FunctionType)",
    "marshal.load": "loading code with marshal",
    "os.chdir": "changing the working folder",
    "os.symlink": "making a link (os.symlink)",
    "os.link": "making a link (os.link)",
}

# --------------------------------------------------------------------------- the audit hook


def _refusal(what: str) -> RuntimeError:
    return RuntimeError(REFUSED_MESSAGE.format(what=what))


PROCESS_NAMES = frozenset({"proc", "self", "thread-self", "mem", "pagemap", "map_files"})


def _resolved(path: str) -> str:
    """``path`` made absolute against the working folder, links resolved."""
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return os.path.abspath(path)


@functools.lru_cache(maxsize=4)
def module_files(prefixes: tuple[str, ...]) -> tuple[tuple[str, ...], frozenset[str]]:
    """Where the loaded modules named by ``prefixes`` live: path prefixes (a package's folder
    with and without its final ``/``, a module's source and compiled files without their
    extension) and the last names of those paths, to recognise a relative path. Computed
    once per fork server (see :func:`course_lib.answers.runner.serve`), not per case."""
    found, names = set(), set()
    for name, module in list(sys.modules.items()):
        if not any(name == p or name.startswith(p + ".") for p in prefixes):
            continue
        path = getattr(module, "__file__", None)
        if not isinstance(path, str):
            continue
        folder, file_name = os.path.split(os.path.realpath(path))
        stem = file_name.split(".")[0]
        if stem == "__init__":
            found.update((folder, folder + os.sep))
            names.add(os.path.basename(folder))
        else:
            found.add(os.path.join(folder, stem) + ".")
            found.add(os.path.join(folder, "__pycache__", stem) + ".")
            names.add(stem + ".")
    return tuple(sorted(found)), frozenset(names)


@functools.lru_cache(maxsize=1)
def trusted_roots() -> tuple[str, ...]:
    """The folders of the Python installation and its packages (read-only in grading).
    Computed once, by the fork server before it drops to a user of its own."""
    found = {os.path.realpath(p) for p in sysconfig.get_paths().values() if p}
    found.update(os.path.realpath(p) for p in (sys.prefix, sys.base_prefix) if p)
    for path in sys.path:
        if path and os.path.isdir(path) and "-packages" in path:
            found.add(os.path.realpath(path))
    return tuple(sorted(p.rstrip(os.sep) + os.sep for p in found))


def genuine_bytecode(data: object, roots: tuple[str, ...]) -> bool:
    """Whether ``marshal.loads(data)`` is the import system loading a cached module: its
    caller is importlib's ``_compile_bytecode``, and ``data`` is the file it names (a
    ``.pyc`` under ``roots``) after its 16-byte header, byte for byte."""
    frame = sys._getframe(2)  # 0: here, 1: the hook, 2: the caller of marshal.loads
    if frame.f_code.co_name != "_compile_bytecode":
        return False
    path = frame.f_locals.get("bytecode_path")
    if not isinstance(path, str) or not path.endswith(".pyc"):
        return False
    path = os.path.realpath(path)
    if not path.startswith(roots):
        return False
    try:
        with open(path, "rb") as cached:
            return cached.read()[16:] == bytes(data)
    except (OSError, TypeError, ValueError):
        return False


def path_refusal(
    path: object, files: tuple[str, ...] = (), names: frozenset[str] = frozenset()
) -> str:
    """Why opening ``path`` is refused, or ``""``.

    A path is judged as resolved against the working folder, and, when it is relative, by
    its own parts too: relative to a folder opened before (``dir_fd``), it cannot be
    resolved here. Refused: the files of processes (``/proc``: their memory among them) and
    the files of the modules in ``files`` (``names`` are their last names)."""
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str):
        return ""  # a descriptor: what it names was opened, and judged, before
    resolved = _resolved(path)
    parts = [p for p in os.path.normpath(path).split(os.sep) if p not in ("", ".", "..")]
    relative = not os.path.isabs(path)
    if (
        resolved == "/proc"
        or resolved.startswith("/proc/")
        or (relative and any(p in PROCESS_NAMES or p.isdigit() for p in parts))
    ):
        return f"opening {path!r} (the files of processes, their memory among them)"
    if (
        resolved.startswith(files)
        or resolved + os.sep in files
        or (relative and any(p in names or p.startswith(tuple(names)) for p in parts))
    ):
        return f"opening {path!r} (a file of a module the exercise refuses)"
    return ""


def install_audit_hook(refused_modules: Iterable[str] = ()) -> None:
    """Add the audit hook described above; ``refused_modules`` are name prefixes that may
    not be loaded again (a prefix ``"torch._refs"`` refuses ``torch._refs`` and its
    submodules): neither imported afresh nor reloaded, nor their files read.

    The hook keeps no state that code could change: its settings are bound as default
    arguments, and a hook cannot be removed or reached (``gc`` is refused).
    """
    prefixes = tuple(refused_modules)
    files, names = module_files(prefixes)
    roots = trusted_roots()

    def hook(
        event: str,
        args: tuple,
        _prefixes: tuple[str, ...] = prefixes,
        _process: MappingProxyType = MappingProxyType(dict(PROCESS_EVENTS)),
        _gc: tuple[str, ...] = GC_EVENTS,
        _code: MappingProxyType = MappingProxyType(dict(CODE_EVENTS)),
        _refusal: Callable[[str], RuntimeError] = _refusal,
        _path: Callable[..., str] = path_refusal,
        _files: tuple[str, ...] = files,
        _names: frozenset[str] = names,
        _roots: tuple[str, ...] = roots,
        _genuine: Callable[[object, tuple[str, ...]], bool] = genuine_bytecode,
    ) -> None:
        if event in _process:
            raise _refusal(_process[event])
        if event in _gc:
            raise _refusal(f"{event} (reaching objects behind the code's back)")
        if event.startswith("ctypes."):
            raise _refusal("ctypes")
        if event == "object.__setattr__" and len(args) > 1 and args[1] == "__code__":
            raise _refusal("rewriting a function's code (__code__)")
        if event == "import" and args and isinstance(args[0], str):
            name = args[0]
            for prefix in _prefixes:
                if name == prefix or name.startswith(prefix + "."):
                    raise _refusal(f"loading {name} again")
        if event in _code:
            raise _refusal(_code[event])
        if event == "marshal.loads" and not (args and _genuine(args[0], _roots)):
            raise _refusal("loading code with marshal (only the import system may)")
        if event == "open" and args:
            why = _path(args[0], _files, _names)
            if why:
                raise _refusal(why)

    sys.addaudithook(hook)


# --------------------------------------------------------------------------- seccomp

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_KILL_PROCESS = 0x80000000
CLONE_THREAD = 0x00010000
X32_SYSCALL_BIT = 0x40000000
BPF_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
BPF_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
BPF_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
BPF_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
BPF_RET_K = 0x06  # BPF_RET | BPF_K
OFFSET_NR, OFFSET_ARCH, OFFSET_ARG0 = 0, 4, 16  # in struct seccomp_data (little-endian)

# System calls refused with EPERM (ENOSYS for clone3, so that threads fall back to clone,
# whose flags the filter can read), by architecture: (audit arch, numbers).
REFUSED_CALLS = {
    "x86_64": (
        0xC000003E,
        {
            "fork": 57, "vfork": 58, "execve": 59, "execveat": 322, "ptrace": 101,
            "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438,
            "kcmp": 312, "shmget": 29, "shmat": 30, "shmctl": 31, "semget": 64,
            "semop": 65, "semctl": 66, "semtimedop": 220, "msgget": 68, "msgsnd": 69,
            "msgrcv": 70, "msgctl": 71, "mq_open": 240, "mq_unlink": 241, "add_key": 248,
            "request_key": 249, "keyctl": 250, "unshare": 272, "setns": 308, "mount": 165,
            "userfaultfd": 323, "perf_event_open": 298, "bpf": 321, "io_uring_setup": 425,
            "io_uring_enter": 426, "io_uring_register": 427,
        },
        56,  # clone
        435,  # clone3
    ),
    "aarch64": (
        0xC00000B7,
        {
            "execve": 221, "execveat": 281, "ptrace": 117, "process_vm_readv": 270,
            "process_vm_writev": 271, "pidfd_getfd": 438, "kcmp": 272, "shmget": 194,
            "shmctl": 195, "shmat": 196, "semget": 190, "semctl": 191, "semtimedop": 192,
            "semop": 193, "msgget": 186, "msgctl": 187, "msgrcv": 188, "msgsnd": 189,
            "mq_open": 180, "mq_unlink": 181, "add_key": 217, "request_key": 218,
            "keyctl": 219, "unshare": 97, "setns": 268, "mount": 40, "userfaultfd": 282,
            "perf_event_open": 241, "bpf": 280, "io_uring_setup": 425, "io_uring_enter": 426,
            "io_uring_register": 427,
        },
        220,  # clone
        435,  # clone3
    ),
}  # fmt: skip


def _statement(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def seccomp_program(machine: str) -> bytes | None:
    """The classic-BPF program of the filter for ``machine`` (``platform.machine()``), or
    ``None`` for an architecture it does not know."""
    if machine not in REFUSED_CALLS:
        return None
    arch, refused, clone, clone3 = REFUSED_CALLS[machine]
    allow = _statement(BPF_RET_K, SECCOMP_RET_ALLOW)
    eperm = _statement(BPF_RET_K, SECCOMP_RET_ERRNO | errno.EPERM)
    enosys = _statement(BPF_RET_K, SECCOMP_RET_ERRNO | errno.ENOSYS)
    kill = _statement(BPF_RET_K, SECCOMP_RET_KILL_PROCESS)
    numbers = sorted(set(refused.values()))
    program = [
        _statement(BPF_LD_W_ABS, OFFSET_ARCH),
        _statement(BPF_JEQ_K, arch, jt=1),  # another ABI (i386 on x86-64): kill
        kill,
        _statement(BPF_LD_W_ABS, OFFSET_NR),
    ]
    if machine == "x86_64":  # the x32 ABI's numbers: refused as a whole
        program += [_statement(BPF_JGE_K, X32_SYSCALL_BIT, jf=1), eperm]
    # One test per refused number: the last statements are [eperm] [clone3 check] ...
    tail = [
        _statement(BPF_JEQ_K, clone3, jf=1),
        enosys,
        _statement(BPF_JEQ_K, clone, jf=3),
        _statement(BPF_LD_W_ABS, OFFSET_ARG0),
        _statement(BPF_JSET_K, CLONE_THREAD, jt=1),
        eperm,
        allow,
    ]
    eperm_index = len(tail) - 2  # counted from the start of the tail
    tests = []
    for position, number in enumerate(numbers):
        to_eperm = len(numbers) - position - 1 + eperm_index
        tests.append(_statement(BPF_JEQ_K, number, jt=to_eperm))
    return b"".join(program + tests + tail)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_seccomp() -> bool:
    """Install the filter on this process (and the threads it starts later); ``True`` when
    it was installed, ``False`` where the system has no seccomp or its architecture is not
    known here. Sets ``no_new_privs`` first, as an unprivileged filter needs."""
    if not sys.platform.startswith("linux"):
        return False
    program = seccomp_program(platform.machine())
    if program is None:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        return False
    return True


def confine(refused_modules: Iterable[str] = ()) -> bool:
    """Both layers, the kernel's first; returns whether the seccomp filter is in place."""
    filtered = install_seccomp()
    install_audit_hook(refused_modules)
    return filtered
