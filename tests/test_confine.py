"""Specification of the confinement of a process that runs an answer (``_confine``): the
kernel's filter and Python's audit hook each refuse on their own, for good.

Every test runs the confinement in a forked child (it cannot be undone, by design) and reads
what happened there through a pipe.
"""

from __future__ import annotations

import ctypes
import errno
import json
import json.tool  # loaded before a child refuses loading it again
import os
import platform
import sys
import threading

import pytest

from course_lib.answers import _confine

LINUX_FILTER = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.machine() not in _confine.REFUSED_CALLS,
    reason="the seccomp filter is for Linux on x86-64 and AArch64",
)
SYSCALLS = _confine.REFUSED_CALLS.get(platform.machine(), (0, {}, 0, 0))[1]


def in_child(work, *, seccomp: bool = False, hook: bool = False, modules=()) -> object:
    """Run ``work()`` in a forked child after the asked confinement; its JSON result, or
    ``{"raised": ...}``."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(reader)
        try:
            if seccomp:
                assert _confine.install_seccomp()
            if hook:
                _confine.install_audit_hook(modules)
            try:
                result = work()
            except BaseException as error:
                result = {"raised": f"{type(error).__name__}: {error}"}
            os.write(writer, json.dumps(result).encode())
        finally:
            os._exit(0)
    os.close(writer)
    data = b""
    while chunk := os.read(reader, 65536):
        data += chunk
    os.close(reader)
    os.waitpid(pid, 0)
    return json.loads(data)


def libc_call(name: str, *args: int):
    def work():
        libc = ctypes.CDLL(None, use_errno=True)
        value = getattr(libc, name)(*args)
        return [value, ctypes.get_errno()]

    return work


def raw_syscall(number: int, *args: int):
    def work():
        libc = ctypes.CDLL(None, use_errno=True)
        return [libc.syscall(number, *args), ctypes.get_errno()]

    return work


# ----------------------------------------------------------------------------- the kernel


@LINUX_FILTER
def test_the_filter_refuses_fork_in_the_kernel():
    assert in_child(lambda: os.fork(), seccomp=True) == {
        "raised": "PermissionError: [Errno 1] Operation not permitted"
    }


@LINUX_FILTER
def test_the_filter_refuses_running_a_program_in_the_kernel():
    result = in_child(lambda: os.execv("/bin/true", ["true"]), seccomp=True)
    assert result == {"raised": "PermissionError: [Errno 1] Operation not permitted"}


@LINUX_FILTER
def test_the_filter_refuses_system_v_shared_memory_even_through_ctypes():
    value, error = in_child(libc_call("shmget", 4242, 4096, 0o1000 | 0o600), seccomp=True)
    assert (value, error) == (-1, errno.EPERM)


@LINUX_FILTER
@pytest.mark.parametrize("name", ["msgget", "semget", "ptrace", "keyctl", "unshare", "mount"])
def test_the_filter_refuses_what_could_outlive_or_escape_the_process(name):
    value, error = in_child(raw_syscall(SYSCALLS[name], 0, 0, 0, 0), seccomp=True)
    assert (value, error) == (-1, errno.EPERM)


@LINUX_FILTER
@pytest.mark.skipif(platform.machine() != "x86_64", reason="the x32 ABI is x86-64's")
def test_the_filter_refuses_the_x32_abis_numbers():
    x32_getpid = _confine.X32_SYSCALL_BIT + 39
    assert in_child(raw_syscall(x32_getpid), seccomp=True) == [-1, errno.EPERM]


@LINUX_FILTER
def test_threads_still_start_under_the_filter():
    def work():
        found = []
        thread = threading.Thread(target=lambda: found.append(os.getpid()))
        thread.start()
        thread.join()
        return found == [os.getpid()]

    assert in_child(work, seccomp=True) is True


@LINUX_FILTER
def test_ordinary_system_calls_still_work_under_the_filter(tmp_path):
    def work():
        path = tmp_path / "note.txt"
        path.write_text("kept")
        return [path.read_text(), os.getpid() > 0, len(os.listdir(tmp_path))]

    assert in_child(work, seccomp=True) == ["kept", True, 1]


def test_an_unknown_architecture_gets_no_filter_rather_than_a_wrong_one():
    assert _confine.seccomp_program("sparc64") is None


# ----------------------------------------------------------------------------- the audit hook

HOOK_REFUSES = {
    "gc.get_objects": (lambda: __import__("gc").get_objects(), "gc.get_objects"),
    "gc.get_referrers": (lambda: __import__("gc").get_referrers(os), "gc.get_referrers"),
    "ctypes": (lambda: ctypes.CDLL(None).getpid(), "ctypes"),
    "os.system": (lambda: os.system("true"), "running a program (os.system)"),
    "subprocess": (
        lambda: __import__("subprocess").run(["true"]),
        "starting a process (subprocess)",
    ),
    "os.posix_spawn": (
        lambda: os.posix_spawn("/bin/true", ["true"], {}),
        "starting a process (os.posix_spawn)",
    ),
    "own memory": (lambda: open("/proc/self/mem", "rb"), "opening '/proc/self/mem'"),
    "memory of pid": (lambda: open(f"/proc/{os.getpid()}/mem", "rb"), "the files of processes"),
    "a folder of /proc": (lambda: os.open("/proc/self", os.O_RDONLY), "the files of processes"),
    "memory by dir_fd": (
        lambda: os.open("self/mem", os.O_RDONLY, dir_fd=os.open("/proc", os.O_RDONLY)),
        "the files of processes",
    ),
    "memory below the root": (
        lambda: os.open("proc/self/mem", os.O_RDONLY, dir_fd=os.open("/", os.O_RDONLY)),
        "'proc/self/mem' (the files of processes",
    ),
    "code.replace": (
        lambda: compile("x = 1", "s", "exec").replace(co_consts=()),
        "building a code object",
    ),
    "types.FunctionType": (
        lambda: type(lambda: 0)(compile("0", "s", "eval"), {}),
        "building a function from a code object",
    ),
    "marshal": (
        lambda: __import__("marshal").loads(__import__("marshal").dumps(1)),
        "loading code with marshal",
    ),
    "chdir": (lambda: os.chdir("/"), "changing the working folder"),
    "symlink": (lambda: os.symlink("/proc/self", "/tmp/x"), "making a link"),
}


@pytest.mark.parametrize("route", HOOK_REFUSES)
def test_the_audit_hook_refuses_with_a_message(route):
    work, message = HOOK_REFUSES[route]
    result = in_child(work, hook=True)
    assert result["raised"].startswith(f"RuntimeError: {_confine.REFUSED_MESSAGE[:30]}")
    assert message in result["raised"]


def test_the_audit_hook_refuses_rewriting_a_functions_code():
    def work():
        def refused():
            raise RuntimeError("refused")

        refused.__code__ = (lambda: "undone").__code__

    result = in_child(work, hook=True)
    assert "rewriting a function's code (__code__)" in result["raised"]


def test_the_audit_hook_refuses_loading_a_refused_module_again():
    def work():
        import importlib
        import json.tool

        return importlib.reload(json.tool) is not None

    result = in_child(work, hook=True, modules=("json.tool",))
    assert (
        "tool.cpython" in result["raised"]
        and "(a file of a module the exercise refuses)" in result["raised"]
    )


def test_the_audit_hook_refuses_reading_a_refused_modules_source():
    def work():
        with open(json.tool.__file__) as source:
            return source.read()[:10]

    result = in_child(work, hook=True, modules=("json.tool",))
    assert "(a file of a module the exercise refuses)" in result["raised"]


def test_the_audit_hook_refuses_a_refused_modules_file_by_a_folder_descriptor():
    folder, name = os.path.split(json.__file__)

    def work():
        return os.open("tool.py", os.O_RDONLY, dir_fd=os.open(folder, os.O_RDONLY))

    assert name == "__init__.py"
    result = in_child(work, hook=True, modules=("json.tool",))
    assert "'tool.py' (a file of a module the exercise refuses)" in result["raised"]


def test_a_module_not_loaded_before_is_still_imported_from_its_cached_bytecode():
    def work():
        sys.modules.pop("colorsys", None)
        import colorsys

        return list(colorsys.rgb_to_hsv(1.0, 0.0, 0.0))

    assert in_child(work, hook=True) == [0.0, 1.0, 1.0]


def test_the_audit_hook_refuses_a_refused_module_removed_from_sys_modules():
    def work():
        del sys.modules["json.tool"]
        __import__("json.tool")

    result = in_child(work, hook=True, modules=("json.tool",))
    assert "loading json.tool again" in result["raised"]


def test_the_audit_hook_lets_ordinary_code_run():
    def work():
        import collections
        import math

        point = collections.namedtuple("Point", "x y")(3, 4)
        return [math.hypot(point.x, point.y), sys._getframe().f_code.co_name]

    assert in_child(work, hook=True) == [5.0, "work"]


def test_the_audit_hook_cannot_be_found_through_gc_to_be_changed():
    def work():
        import gc

        return [len([o for o in gc.get_objects() if getattr(o, "__name__", "") == "hook"])]

    assert "gc.get_objects" in in_child(work, hook=True)["raised"]


def test_marshal_in_a_function_named_like_the_import_systems_is_refused_for_other_bytes():
    import importlib.util

    genuine = importlib.util.cache_from_source(json.tool.__file__)

    def work():
        namespace: dict = {}
        source = (
            "import marshal\n"
            "def _compile_bytecode(data, bytecode_path):\n"
            "    return marshal.loads(data)\n"
        )
        exec(compile(source, "<frozen importlib._bootstrap_external>", "exec"), namespace)
        forged = __import__("marshal").dumps(compile("1", "s", "eval"))
        return namespace["_compile_bytecode"](forged, genuine) is not None

    assert os.path.exists(genuine)
    assert "loading code with marshal" in in_child(work, hook=True)["raised"]
