"""What the process running one case of an answer may not do, enforced for good.

The answer runner (:mod:`course_lib.exercises._runner`) forks a fresh process for every case
of every answer. Before the answer's code runs, that process confines itself, in two layers
that nothing running in it can remove:

1. **An audit hook** (:pep:`578`, :func:`sys.addaudithook`): Python calls it before every
   sensitive operation, and a hook cannot be removed once added. It refuses, with a message
   that says what was refused:

   - reaching the interpreter's objects behind the code's back: ``gc.get_objects``,
     ``gc.get_referrers`` and ``gc.get_referents``;
   - rewriting a function's body (setting ``__code__``), which could undo a refusal;
   - ``ctypes`` (loading libraries, reading or writing memory, calling C);
   - starting a process (``os.fork``, ``os.exec*``, ``os.posix_spawn``, ``os.system``,
     ``subprocess``, ``pty.spawn``);
   - opening the memory of a process (``/proc/<pid>/mem`` and its relatives);
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
import os
import platform
import re
import struct
import sys
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
MEMORY_FILES = re.compile(r"^/proc/(self|thread-self|\d+)(/task/\d+)?/(mem|pagemap|map_files)")

# --------------------------------------------------------------------------- the audit hook


def _refusal(what: str) -> RuntimeError:
    return RuntimeError(REFUSED_MESSAGE.format(what=what))


def _opened_path(path: object) -> str:
    """The absolute, resolved form of a path given to ``open`` (``""`` for a descriptor)."""
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str):
        return ""
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return os.path.abspath(path)


def _module_files(prefixes: tuple[str, ...]) -> tuple[str, ...]:
    """The files of the loaded modules named by ``prefixes``, as path prefixes: a package's
    folder (``.../torch/_refs/``), a module's source and its compiled files."""
    found = set()
    for name, module in list(sys.modules.items()):
        if not any(name == p or name.startswith(p + ".") for p in prefixes):
            continue
        path = getattr(module, "__file__", None)
        if not isinstance(path, str):
            continue
        path = os.path.realpath(path)
        folder, file_name = os.path.split(path)
        stem = file_name.split(".")[0]
        if stem == "__init__":
            found.add(folder + os.sep)
        else:
            found.add(os.path.join(folder, stem) + ".")
            found.add(os.path.join(folder, "__pycache__", stem) + ".")
    return tuple(sorted(found))


def install_audit_hook(refused_modules: Iterable[str] = ()) -> None:
    """Add the audit hook described above; ``refused_modules`` are name prefixes that may
    not be loaded again (a prefix ``"torch._refs"`` refuses ``torch._refs`` and its
    submodules): neither imported afresh nor reloaded, nor their files read.

    The hook keeps no state that code could change: its settings are bound as default
    arguments, and a hook cannot be removed or reached (``gc`` is refused).
    """
    prefixes = tuple(refused_modules)
    files = _module_files(prefixes)

    def hook(
        event: str,
        args: tuple,
        _prefixes: tuple[str, ...] = prefixes,
        _process: MappingProxyType = MappingProxyType(dict(PROCESS_EVENTS)),
        _gc: tuple[str, ...] = GC_EVENTS,
        _memory: re.Pattern = MEMORY_FILES,
        _refusal: Callable[[str], RuntimeError] = _refusal,
        _opened: Callable[[object], str] = _opened_path,
        _files: tuple[str, ...] = files,
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
        if event == "open" and args:
            path = _opened(args[0])
            if _memory.match(path):
                raise _refusal(f"opening {args[0]!r} (the memory of a process)")
            if path.startswith(_files):
                raise _refusal(f"loading {path} again (a module the exercise refuses)")

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
