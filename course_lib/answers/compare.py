"""Compare a student's tensor with the expected one, and say precisely how they differ."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = [
    "Comparison",
    "compare_results",
    "compare_tensors",
    "describe_type",
    "not_a_tensor",
]


@dataclass(frozen=True)
class Comparison:
    """The verdict of :func:`compare_tensors`: ``ok`` and a message for the student."""

    ok: bool
    message: str


def describe_type(value: object) -> str:
    """A short name for the type of ``value``: ``numpy.ndarray``, ``list``, ``NoneType``."""
    kind = type(value)
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def not_a_tensor(module: str, name: str) -> str:
    """The message for a result of type ``module.name`` where a tensor was expected."""
    shown = name if module == "builtins" else f"{module}.{name}"
    message = f"expected a torch.Tensor, got {shown}"
    if module == "numpy" or module.startswith("numpy."):
        message += "; convert it with torch.from_numpy(...)"
    elif module == "builtins" and name in ("list", "tuple"):
        message += "; build it with torch.tensor(...) or torch operations"
    elif module == "builtins" and name == "NoneType":
        message += " (did the function forget to return its result?)"
    return message


def _index(flat: int, shape: torch.Size) -> str:
    """The multi-index ``[i, j]`` of entry ``flat`` of a tensor of ``shape``."""
    parts = []
    for size in reversed(shape):
        parts.append(flat % size)
        flat //= size
    return "[" + ", ".join(str(p) for p in reversed(parts)) + "]"


def _number(value: float) -> str:
    return f"{value:+.6g}" if abs(value) >= 1e-4 or value == 0 else f"{value:+.3e}"


def _entry(value: float, boolean: bool) -> str:
    return str(bool(value)) if boolean else _number(value)


def compare_tensors(
    expected: Tensor,
    got: object,
    *,
    atol: float,
    rtol: float = 0.0,
    expected_dtypes: tuple[torch.dtype, ...] = (torch.float32, torch.float64),
) -> Comparison:
    """Compare ``got`` with ``expected``: ``|got - expected| <= atol + rtol * |expected|``.

    The message names the first thing that is wrong, in this order: the type (a
    ``torch.Tensor`` is needed), the shape, the dtype, NaN or infinite entries, then the values:
    how many entries are off, the first one (its index, expected and obtained values) and the
    largest error. When everything agrees it gives the largest error and the tolerance.

    Args:
        expected: the reference tensor.
        got: what the student's code returned.
        atol, rtol: absolute and relative tolerance.
        expected_dtypes: accepted dtypes; the first is the one named in messages.
    """
    if not isinstance(got, Tensor):
        return Comparison(False, not_a_tensor(type(got).__module__, type(got).__qualname__))
    shape, got_shape = tuple(expected.shape), tuple(got.shape)
    if got_shape != shape:
        message = f"expected shape {shape}, got {got_shape}"
        if len(shape) == 2 and got_shape == shape[::-1]:
            message += " (rows and columns are swapped: is the result transposed?)"
        return Comparison(False, message)
    if got.dtype not in expected_dtypes:
        names = " or ".join(str(d).removeprefix("torch.") for d in expected_dtypes)
        dtype = str(got.dtype).removeprefix("torch.")
        hint = ""
        if expected_dtypes == (torch.bool,):
            hint = " (a mask is a tensor of True and False: create it with dtype=torch.bool)"
        return Comparison(False, f"expected dtype {names}, got {dtype}{hint}")
    got64 = got.detach().to(device="cpu", dtype=torch.float64)
    want = expected.detach().to(device="cpu", dtype=torch.float64)
    finite = torch.isfinite(got64)
    if not bool(finite.all()):
        bad = (~finite).reshape(-1)
        first = int(bad.nonzero()[0])
        return Comparison(
            False,
            f"{int(bad.sum())} of {bad.numel()} entries are NaN or infinite; the first is "
            f"{_index(first, got.shape)} = {float(got64.reshape(-1)[first])}",
        )
    error = (got64 - want).abs()
    wrong = (error > atol + rtol * want.abs()).reshape(-1)
    if not bool(wrong.any()):
        largest = float(error.max()) if error.numel() else 0.0
        return Comparison(
            True,
            f"all {error.numel()} entries match (largest error {largest:.1e}, tolerance {atol:g})",
        )
    first = int(wrong.nonzero()[0])
    flat_want, flat_got = want.reshape(-1), got64.reshape(-1)
    boolean = expected.dtype == torch.bool
    message = (
        f"{int(wrong.sum())} of {wrong.numel()} entries "
        + ("differ" if boolean else f"differ by more than the tolerance {atol:g}")
        + f"; first at {_index(first, got.shape)}: expected "
        f"{_entry(float(flat_want[first]), boolean)}, got {_entry(float(flat_got[first]), boolean)}"
    )
    if not boolean:
        worst = int(error.reshape(-1).argmax())
        message += (
            f"; largest error {float(error.reshape(-1)[worst]):.4g} at {_index(worst, got.shape)}"
        )
    return Comparison(False, message)


def compare_results(
    expected: Tensor | tuple[Tensor, ...],
    got: object,
    *,
    names: tuple[str, ...] = (),
    atol: float,
    rtol: float = 0.0,
    expected_dtypes: tuple[torch.dtype, ...] = (torch.float32, torch.float64),
) -> Comparison:
    """Compare a function's result with the expected one: a tensor, or a tuple of tensors.

    A tuple result (such as attention's ``(output, weights)``) must come back as a tuple (or
    list) of as many tensors, in the same order; each part is compared with
    :func:`compare_tensors` and named in the message by ``names``.

    Args:
        expected: the reference tensor, or tuple of tensors.
        got: what the student's code returned.
        names: the parts' names, one per tensor of a tuple result.
        atol, rtol, expected_dtypes: as in :func:`compare_tensors`, for every part.
    """
    if not isinstance(expected, tuple):
        return compare_tensors(expected, got, atol=atol, rtol=rtol, expected_dtypes=expected_dtypes)
    names = names or tuple(f"part {i}" for i in range(len(expected)))
    if len(names) != len(expected):
        raise ValueError(f"{len(expected)} parts need {len(expected)} names, got {names}")
    wanted = f"a tuple ({', '.join(names)})"
    if not isinstance(got, (tuple, list)):
        message = f"expected {wanted}, got {describe_type(got)}"
        if isinstance(got, Tensor):
            message += f"; return all {len(names)}: return {', '.join(names)}"
        elif got is None:
            message += " (did the function forget to return its result?)"
        return Comparison(False, message)
    if len(got) != len(expected):
        return Comparison(False, f"expected {wanted} of {len(expected)} parts, got {len(got)}")
    verdicts = [
        compare_tensors(want, have, atol=atol, rtol=rtol, expected_dtypes=expected_dtypes)
        for want, have in zip(expected, got, strict=True)
    ]
    failed = [f"{name}: {v.message}" for name, v in zip(names, verdicts, strict=True) if not v.ok]
    if failed:
        return Comparison(False, "; ".join(failed))
    return Comparison(
        True, "; ".join(f"{name}: {v.message}" for name, v in zip(names, verdicts, strict=True))
    )
