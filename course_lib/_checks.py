"""Argument checks shared by the modules, with messages that say what was expected and what came."""

from __future__ import annotations

import math
import operator


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
    """Raise unless ``x`` is a ``(batch, length, d_model)`` tensor with at least one position."""
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
