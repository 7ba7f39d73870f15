"""Argument checks shared by the modules, with messages that say what was expected and what came."""

from __future__ import annotations

import math
import operator
from typing import Any


def integer(name: str, value: object) -> int:
    """Return ``value`` as an ``int``; ``TypeError`` naming the argument for anything else.

    Accepts ``int``, NumPy integers and 0-d integer tensors; refuses ``bool`` and floats.
    """
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got the bool {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(
            f"{name} must be an integer, got {value!r} of type {type(value).__name__}"
        ) from None


def positive_int(name: str, value: object, *, even: bool = False) -> int:
    """Return ``value`` as an ``int`` if it is a positive (and, if asked, even) integer.

    Raises ``TypeError`` for non-integers (``bool`` and floats included) and ``ValueError`` for
    zero, negative or odd values, naming the argument and the value that came.
    """
    number = integer(name, value)
    if number <= 0:
        raise ValueError(f"{name} must be a positive integer, got {number}")
    if even and number % 2:
        raise ValueError(
            f"{name} must be even (sine and cosine come in pairs), got {number}; "
            f"use {number - 1} or {number + 1}"
        )
    return number


def base_value(value: object) -> float:
    """Return the wavelength base as a float; it must be a finite number greater than 1."""
    try:
        base = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise TypeError(f"base must be a number, got {value!r}") from None
    if not math.isfinite(base) or base <= 1.0:
        raise ValueError(
            f"base must be a finite number greater than 1 (the paper uses 10000), got {value!r}"
        )
    return base


def probability(name: str, value: object) -> float:
    """Return ``value`` as a float in ``[0, 1)`` (a dropout probability); ``ValueError`` else."""
    try:
        p = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a probability in [0, 1), got {value!r}") from None
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1), got {value!r}")
    return p


def shape_of(value: object) -> object:
    """What an error message says came: a tensor's shape as a tuple, else the type's name."""
    import torch

    return tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__


def sequences(name: str, x: object, d_model: int) -> None:
    """Raise unless ``x`` is a floating-point ``(batch, length, d_model)`` tensor with at least
    one position."""
    import torch

    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 3 or x.size(-1) != d_model:
        hint = "; add a batch axis with .unsqueeze(0)" if x.dim() == 2 else ""
        if x.dim() == 3 and not x.is_floating_point():
            hint = "; token ids go through an embedding first"
        raise ValueError(
            f"{name} must have shape (batch, length, d_model={d_model}), got {tuple(x.shape)}{hint}"
        )
    if x.size(1) == 0:
        raise ValueError(f"{name} must hold at least one position, got {tuple(x.shape)}")
    floating(name, x)


# --------------------------------------------------------------------------- tensors
# These take ``value: Any``: they are the checks that find out what it is.


def check_tensor(name: str, value: Any) -> None:
    """Raise ``TypeError`` unless ``value`` is a ``torch.Tensor``, naming what came instead."""
    import torch

    if not isinstance(value, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor, got {type(value).__name__}; use torch.tensor(...)"
        )


def floating(name: str, value: Any) -> None:
    """Raise unless ``value`` is a real floating-point tensor (float16/32/64, bfloat16)."""
    import torch

    check_tensor(name, value)
    if not value.is_floating_point():
        hint = ""
        if not (value.is_complex() or value.dtype == torch.bool):
            hint = "; token ids go through an embedding first, other numbers convert with .float()"
        raise TypeError(f"{name} must be a floating-point tensor, got {value.dtype}{hint}")


def integer_ids(name: str, value: Any) -> None:
    """Raise unless ``value`` is a tensor of integer ids (not float, complex or bool)."""
    import torch

    check_tensor(name, value)
    if value.is_floating_point() or value.is_complex() or value.dtype == torch.bool:
        raise TypeError(f"{name} must be an integer tensor of ids (torch.long), got {value.dtype}")


def module_dtype(name: str, value: Any, module: Any) -> None:
    """Raise unless the floating-point tensor ``value`` has the dtype of ``module``'s weights.

    A float32 module given float64 input would fail deep inside a matrix product; the message
    names both dtypes and both cures. Skipped under ``torch.autocast``, where a module meets
    inputs of another precision on purpose.
    """
    floating(name, value)
    # the first weight, without next(..., None), which torch.compile before 2.5 cannot trace
    for weight in module.parameters():  # noqa: B007
        break
    else:
        return
    if value.dtype == weight.dtype or autocast_enabled(value):
        return
    cure = {"torch.float64": ".double()", "torch.float32": ".float()"}
    convert = cure.get(str(value.dtype), f".to({value.dtype})")
    raise TypeError(
        f"{name} is {value.dtype} but the weights of this {type(module).__name__} are "
        f"{weight.dtype}: convert the module ({convert} on it) or the input "
        f"({name}.to({weight.dtype}))"
    )


def autocast_enabled(value: Any) -> bool:
    """Whether ``torch.autocast`` is on for ``value``'s device (mixed dtypes are expected)."""
    import torch

    try:
        return torch.is_autocast_enabled(value.device.type)
    except TypeError:  # torch < 2.4 takes no device type
        return torch.is_autocast_enabled() or torch.is_autocast_cpu_enabled()
