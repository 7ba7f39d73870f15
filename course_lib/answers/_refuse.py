"""Refuse, for good, the built-in computations that an exercise asks students to write
themselves, in the process that is about to run one case of an answer.

Some exercises ask for a computation by hand (a layer norm, an RMS norm, attention, an
embedding lookup). They name Python functions the answer may not call (``blocked``, e.g.
``torch.nn.functional.layer_norm``) and PyTorch operators it may not reach by any route
(``blocked_ops``, e.g. ``aten::layer_norm``, see :mod:`course_lib.answers.forbidden`).
:func:`refuse_for_good` makes every route to them raise ``RuntimeError`` with
:func:`blocked_message`'s text, permanently: the process dies after the case, so nothing is
ever undone, and nothing that could undo a refusal is kept where Python can reach it (no
saved code, no ``torch.library.Library``, no undo function in any frame or module).

What is refused, and how:

1. **Each blocked Python function** gets a body that raises, in place, so that every alias
   and every caller (``nn.LayerNorm`` calls ``F.layer_norm``) meets it; the functions it
   wraps (``__wrapped__``, and the decorated original held in a decorator's closure) get one
   too, so that unwrapping finds no original. A builtin is replaced in its owner.
2. **Each blocked operator**, in every overload (``_native_batch_norm_legit.no_stats`` as
   well as ``.default``), gets a kernel that raises at every dispatch key where it has one:
   backends (``CPU``, ``CUDA``, ``QuantizedCPU``, ``SparseCPU``, ``NestedTensorCPU``...), alias
   keys (``CompositeImplicitAutograd``, ``CompositeExplicitAutograd``, ``Autograd``),
   ``FuncTorchBatched`` (``vmap``), ``Tracer``, ``Autocast*`` and ``Meta`` too: several Meta
   kernels are Python decompositions that compute real values when redispatched to with real
   tensors. Since every route into the dispatcher (a Python alias, ``torch.ops``,
   ``redispatch``, excluded dispatch keys, a ``__torch_dispatch__`` subclass, ``vmap``) ends at
   one of these keys, every route ends at a refusal. The kernels are registered through a
   C++ library object (``torch._C._dispatch_library``) that is given one extra reference
   and then dropped: no Python object refers to it, it is not tracked by ``gc``, and no
   registry of ``torch.library`` knows it, so nothing can destroy it; another registration
   on top of it can only shadow it, never reach the original kernel beneath.
3. **The Python implementations of each blocked operator** get a body that raises in place:
   the entries of every decomposition table (``torch._decomp``'s, ``torch._meta_registrations``',
   the forward-AD ones), the Python kernels of its overloads (``OpOverload.py_kernels``), the
   ``torch._refs`` functions of the same name, and the helpers and Python relatives listed in
   :data:`PYTHON_RELATIVES` (``torch._refs._normalize``, ``F.multi_head_attention_forward``,
   flex attention's math implementation, ...). A function that also serves an operator that
   is not blocked is left alone.
4. **TorchScript's executors**, whenever an operator is blocked: the static runtime and the
   JIT's fused MKLDNN and oneDNN kernels run built-in kernels directly, outside the
   dispatcher where the refusals live, so calling compiled TorchScript (scripted or traced
   functions and modules, the static runtime, the lite interpreter, ``_jit_interpret_graph``)
   is refused (:data:`JIT_EXECUTORS`).

:func:`preload`, called once in the process that forks the case processes, imports every
module that holds a Python implementation of a refusable computation (so that the answer
cannot load a fresh, unrefused copy: :data:`FRESH_IMPORTS_REFUSED` names the module prefixes a
case process must refuse to load afresh) and computes, for every operator, the overloads and
dispatch keys that have a kernel, so that :func:`refuse_for_good` only registers.

This file uses only the standard library and torch, and never imports ``course_lib``: it is
copied beside the answer runner into the grading sandbox, where ``course_lib`` does not exist.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import re
import sys
import types
import warnings
from collections.abc import Callable, Iterable
from typing import Any

__all__ = [
    "FRESH_IMPORTS_REFUSED",
    "JIT_EXECUTORS",
    "LIBRARY_FILE",
    "PYTHON_RELATIVES",
    "blocked_message",
    "preload",
    "refuse_for_good",
]

FRESH_IMPORTS_REFUSED = (  # module prefixes a case process may not load afresh
    "torch._refs",  # Python references of operators (torch._refs.native_layer_norm)
    "torch._decomp",  # decomposition tables (native_batch_norm, embedding, sdpa for CPU ...)
    "torch._prims",  # primitives behind torch._refs; reloading re-registers them
    "torch._prims_common",
    "torch._meta_registrations",  # Meta kernels, some of them decompositions
    "torch._higher_order_ops.flex_attention",  # math_attention: attention in Python
    "torch.nn.functional",  # multi_head_attention_forward, local_response_norm
    "torch.nn.attention.flex_attention",
    "torch.nn.attention.experimental",
    "torch.ao.nn.quantizable",  # a MultiheadAttention computed in Python
    "torch._native.ops.norm",  # fused RMSNorm kernels in Python (CUDA)
    "torch._vendor.quack",
    "torch._inductor",  # its decompositions and lowerings
    "torch.testing._internal",  # reference implementations of the operators
    "torch.sparse._triton_ops",
)

PRELOADED = (  # what preload imports: everything refuse_for_good may have to refuse
    "torch._refs",
    "torch._refs.nn.functional",
    "torch._refs.linalg",
    "torch._refs.special",
    "torch._refs.fft",
    "torch._refs._conversions",
    "torch._decomp",
    "torch._decomp.decompositions",
    "torch._decomp.decompositions_for_jvp",
    "torch._decomp.decompositions_for_rng",
    "torch._prims",
    "torch._prims.context",
    "torch._prims.executor",
    "torch._prims_common",
    "torch._meta_registrations",
    "torch._higher_order_ops.flex_attention",
    "torch.nn.functional",
    "torch.ao.nn.quantizable.modules.activation",
    "torch._functorch.predispatch",
    "torch._native.ops.norm.rmsnorm_impl",
)

FIRST_USE_IMPORTS = (  # what torch imports the first time it is used, not when imported
    # torch._check (called by torch's Python functions and decompositions) imports the
    # symbolic shapes and with them sympy: about 1 s, which every case process would
    # otherwise spend again out of its time limit (6 to 10 s on a busy machine)
    "torch.fx.experimental.symbolic_shapes",
)

PYTHON_RELATIVES: dict[str, tuple[tuple[str, str], ...]] = {
    # Python functions that compute what an operator computes, refused with it: helpers of
    # its decompositions, and Python implementations that do not call the operator.
    "aten::native_layer_norm": (("torch._refs", "_normalize"),),
    "aten::native_group_norm": (("torch._refs", "_normalize"),),
    "aten::native_batch_norm": (("torch._decomp.decompositions", "native_batch_norm_helper"),),
    "aten::_native_batch_norm_legit": (
        ("torch._decomp.decompositions", "native_batch_norm_helper"),
    ),
    "aten::rms_norm": (  # over every feature, a local response norm is an RMS norm
        ("torch.nn.functional", "local_response_norm"),
    ),
    "aten::_fused_rms_norm": (
        ("torch._native.ops.norm.rmsnorm_impl", "_fused_rms_norm_impl"),
        ("torch._native.ops.norm.rmsnorm_impl", "_fused_rms_norm_backward_impl"),
    ),
    "aten::scaled_dot_product_attention": (
        ("torch.nn.functional", "multi_head_attention_forward"),  # by hand if need_weights
        ("torch._higher_order_ops.flex_attention", "math_attention"),
        ("torch._higher_order_ops.flex_attention", "_math_attention_inner"),
        ("torch._higher_order_ops.flex_attention", "sdpa_dense"),
        ("torch._higher_order_ops.flex_attention", "sdpa_dense_backward"),
        ("torch.ao.nn.quantizable.modules.activation", "MultiheadAttention._forward_impl"),
    ),
}

JIT_EXECUTORS = (  # [owner, attribute]: what runs TorchScript, refused with any operator
    ("torch._C", "ScriptFunction.__call__"),
    ("torch._C", "ScriptMethod.__call__"),
    ("torch._C", "StaticModule.__call__"),
    ("torch._C", "StaticModule.runAsync"),
    ("torch._C", "StaticModule.benchmark"),
    ("torch._C", "StaticModule.benchmark_individual_ops"),
    ("torch._C", "LiteScriptModule.forward"),
    ("torch._C", "LiteScriptModule.run_method"),
    ("torch._C", "LiteScriptModule.find_method"),
    ("torch._C", "_jit_interpret_graph"),
    ("torch._C", "_jit_to_static_module"),
    ("torch._C", "_fuse_to_static_module"),
)

LIBRARY_FILE = "<refused>"  # where the refusing kernels say they were registered
DUMP_KEY = re.compile(r"^(\w+)(?:\[alias\])?(?: \(inactive\))?: ")

_PLAN: dict[str, tuple[tuple[str, str], ...]] = {}  # "aten::x": ((overload, key), ...)
_IMPLEMENTATIONS: dict[str, list[Any]] = {}  # "aten::x": Python functions that compute it
_USERS: dict[int, set[str]] = {}  # id of such a function: the operators it serves
_REFUSING_CODE: dict[int, types.CodeType] = {}  # number of free variables: a raising body


def blocked_message(name: str) -> str:
    """What a call to a function the exercise does not allow raises."""
    return (
        "this exercise asks you to write the computation yourself; your code called "
        f"{name}, which the check does not allow"
    )


# --------------------------------------------------------------------------- preloading


def preload() -> None:
    """Import what the refusals need and every module that holds a Python implementation of
    a refusable computation, then note, for every operator, where it has kernels and which
    Python functions compute it. Call once, in the process that forks case processes."""
    import ctypes  # noqa: F401  (refuse_for_good keeps its library with it)

    import torch

    for name in PRELOADED + FIRST_USE_IMPORTS:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    with contextlib.suppress(Exception):  # vmap's Python decompositions, loaded on first use
        sys.modules["torch._functorch.predispatch"].lazy_load_decompositions()
    for qualified in torch._C._dispatch_get_all_op_names():
        base = qualified.split(".")[0]
        _PLAN[base] = (*_PLAN.get(base, ()), *_kernels(qualified))
    _note_implementations()
    for free in range(16):  # the closures of decorators, compiled once here
        _refusing_code(free)


def _kernels(qualified: str) -> list[tuple[str, str]]:
    """``(overload, dispatch key)`` for every kernel registered for one overload
    (``"aten::native_layer_norm.out"``), alias keys included."""
    import torch

    overload = qualified.split("::", 1)[1]
    found = []
    for line in torch._C._dispatch_dump(qualified).splitlines():
        match = DUMP_KEY.match(line)
        if match and match.group(1) not in ("name", "schema", "debug"):
            key = match.group(1)
            with contextlib.suppress(RuntimeError):  # a key this build cannot name
                torch._C._dispatch_has_kernel_for_dispatch_key(qualified, key)
                if (overload, key) not in found:
                    found.append((overload, key))
    return found


def _operator_tables() -> list[dict[Any, Any]]:
    """Every dict in a loaded torch module whose keys are operators (decomposition tables,
    Meta tables, the forward-AD table ...), nested ones included."""
    import torch

    tables: list[dict[Any, Any]] = []
    with warnings.catch_warnings():  # deprecated module attributes warn when looked at
        warnings.simplefilter("ignore")
        pending = [
            value
            for name, module in list(sys.modules.items())
            if name.startswith("torch") and module is not None
            for value in list(vars(module).values())
            if isinstance(value, dict)
        ]
    seen: set[int] = set()
    while pending:
        table = pending.pop()
        if id(table) in seen:
            continue
        seen.add(id(table))
        for key, value in list(table.items())[:50]:
            if isinstance(key, torch._ops.OpOverload):
                tables.append(table)
                break
            if isinstance(value, dict) and not isinstance(key, type):
                pending.append(value)
    return tables


def _note_implementations() -> None:
    """Fill :data:`_IMPLEMENTATIONS` and :data:`_USERS` from the operator tables and the
    Python kernels (for dispatch keys, modes and functorch transforms) of every operator
    overload torch has looked up."""
    import torch

    def note(operator: Any, function: Any) -> None:
        if isinstance(operator, torch._ops.OpOverload) and callable(function):
            if isinstance(function, torch._ops.OperatorBase):
                return  # another operator: refused in the dispatcher if it is blocked
            base = operator._schema.name
            functions = _IMPLEMENTATIONS.setdefault(base, [])
            if all(f is not function for f in functions):
                functions.append(function)
            _USERS.setdefault(id(function), set()).add(base)

    for table in _operator_tables():
        for operator, function in list(table.items()):
            note(operator, function)
    for namespace in list(vars(torch.ops).values()):
        if not isinstance(namespace, torch._ops._OpNamespace):
            continue
        for packet in list(vars(namespace).values()):
            if isinstance(packet, torch._ops.OpOverloadPacket):
                for overload in list(vars(packet).values()):
                    if isinstance(overload, torch._ops.OpOverload):
                        for table_name in ("py_kernels", "python_key_table", "functorch_table"):
                            for function in list(getattr(overload, table_name, {}).values()):
                                note(overload, function)


# --------------------------------------------------------------------------- refusing


def refuse_for_good(blocked: list[list[str]], blocked_ops: list[str]) -> None:
    """Make every route to the ``blocked`` Python functions (``[module, qualified name]``)
    and to the ``blocked_ops`` operators (``"aten::layer_norm"``) raise, for the rest of this
    process, leaving nothing that could undo it. Call in the process that runs the answer,
    before the answer; :func:`preload` first (in its parent) keeps this quick."""
    for module_name, qualname in blocked:
        _refuse_named(module_name, qualname, blocked_message(f"{module_name}.{qualname}"))
    bases = list(dict.fromkeys(name.split(".")[0] for name in blocked_ops))
    if not bases:
        return
    _refuse_kernels(bases)
    _refuse_implementations(bases)
    for owner, attribute in JIT_EXECUTORS:
        message = blocked_message(f"TorchScript ({owner}.{attribute})")
        _refuse_named(owner, attribute, message, missing_ok=True)


def _refuse_named(
    module_name: str, qualname: str, message: str, *, missing_ok: bool = False
) -> None:
    """Refuse the function ``qualname`` of module ``module_name`` in place, or, for a
    builtin, replace it in its owner by a function that raises ``message``."""
    try:
        owner: Any = sys.modules.get(module_name) or importlib.import_module(module_name)
        *path, name = qualname.split(".")
        for part in path:
            owner = getattr(owner, part)
        function = getattr(owner, name)
    except (ImportError, AttributeError):
        if missing_ok:
            return
        raise
    if not _refuse_in_place(function, message):
        setattr(owner, name, _refuser(message))


def _refuse_kernels(bases: Iterable[str]) -> None:
    """Register a raising kernel for every overload of each operator, at every dispatch key
    where it has a kernel, in libraries that nothing in Python refers to."""
    import torch

    libraries: dict[str, Any] = {}
    with warnings.catch_warnings():  # "Overriding a previously registered kernel ..."
        warnings.simplefilter("ignore")
        for base in bases:
            if "::" not in base:
                continue
            plan = _PLAN.get(base)
            if plan is None:  # not preloaded: look now
                overloads = [
                    name
                    for name in torch._C._dispatch_get_all_op_names()
                    if name.split(".")[0] == base
                ]
                plan = tuple(pair for name in overloads for pair in _kernels(name))
            namespace, name = base.split("::", 1)
            refuse = _refuser(blocked_message(f"torch.ops.{namespace}.{name}"))
            for overload, key in plan:
                if namespace not in libraries:
                    libraries[namespace] = torch._C._dispatch_library(
                        "IMPL", namespace, "", LIBRARY_FILE, 0
                    )
                    _keep_forever(libraries[namespace])
                libraries[namespace].impl(overload, key, refuse, False)
    libraries.clear()


def _keep_forever(library: Any) -> None:
    """Give ``library`` a reference that no Python object holds, so that it (and the
    kernels it registered) outlives every name for it and cannot be reached again."""
    import ctypes

    ctypes.pythonapi.Py_IncRef(ctypes.py_object(library))


def _refuse_implementations(bases: list[str]) -> None:
    """Refuse in place the Python functions that compute the operators ``bases``: their
    table entries and Python kernels, ``torch._refs`` functions of their names, and
    :data:`PYTHON_RELATIVES`."""
    if not _IMPLEMENTATIONS:
        _note_implementations()
    chosen = set(bases)
    for base in bases:
        for function in _IMPLEMENTATIONS.get(base, ()):
            if _USERS.get(id(function), set()) <= chosen:
                _refuse_in_place(function, blocked_message(_describe(function)))
        name = base.split("::", 1)[-1]
        for module_name in ("torch._refs", "torch._refs.nn.functional"):
            module = sys.modules.get(module_name)
            for candidate in {name, name.lstrip("_")}:
                function = getattr(module, candidate, None)
                if isinstance(function, types.FunctionType):
                    _refuse_in_place(function, blocked_message(f"{module_name}.{candidate}"))
        for module_name, qualname in PYTHON_RELATIVES.get(base, ()):
            message = blocked_message(f"{module_name}.{qualname}")
            _refuse_named(module_name, qualname, message, missing_ok=True)


def _describe(function: Any) -> str:
    """``module.qualified_name`` of a function, as a student would call it."""
    module = getattr(function, "__module__", None) or "?"
    return f"{module}.{getattr(function, '__qualname__', repr(function))}"


def _refuser(message: str) -> Callable[..., Any]:
    """A fresh function that raises ``RuntimeError(message)`` whatever it is given."""

    def refuse(*args: Any, _message: str = message, **kwargs: Any) -> Any:
        raise RuntimeError(_message)

    return refuse


def _refusing_code(free: int) -> types.CodeType:
    """The code of a function that raises ``RuntimeError(_message)``, with ``free`` free
    variables (unused), so that it fits a closure of that size."""
    code = _REFUSING_CODE.get(free)
    if code is None:
        cells = [f"_cell{i}" for i in range(free)]
        lines = ["def outer():", *(f"    {cell} = None" for cell in cells)]
        lines += ["    def refuse(*args, _message='', **kwargs):"]
        lines += ["        raise RuntimeError(_message)"]
        if cells:  # never runs; makes the cells free variables of refuse
            lines += [f"        ({', '.join(cells)},)"]
        lines += ["    return refuse"]
        namespace: dict[str, Any] = {}
        exec(compile("\n".join(lines), "<refused>", "exec"), namespace)
        code = namespace["outer"]().__code__
        _REFUSING_CODE[free] = code
    return code


def _refuse_in_place(function: Any, message: str) -> bool:
    """Give ``function``, and every function it wraps, a body that raises ``message``.

    Follows ``__wrapped__`` and, in a decorator's closure, the decorated original (a
    function of the same name). Returns False when ``function`` itself could not be changed
    (a builtin), for the caller to replace it where it is found."""
    if isinstance(function, (types.MethodType, staticmethod, classmethod)):
        function = function.__func__
    pending = [function]
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, types.FunctionType):
            closure = current.__closure__ or ()
            current.__code__ = _refusing_code(len(closure))
            current.__defaults__ = None
            current.__kwdefaults__ = {"_message": message}
            for cell in closure:
                with contextlib.suppress(ValueError):  # an empty cell
                    inner = cell.cell_contents
                    if isinstance(inner, types.FunctionType):
                        if inner.__name__ == current.__name__:
                            pending.append(inner)
        elif isinstance(current, functools.partial):
            current.__setstate__((_refuser(message), (), {}, None))
        wrapped = None
        with contextlib.suppress(Exception):  # objects whose __getattr__ refuses dunders
            wrapped = current.__dict__.get("__wrapped__")
        if wrapped is not None:
            pending.append(wrapped)
    return isinstance(function, (types.FunctionType, functools.partial))
