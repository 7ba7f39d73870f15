"""Device helpers: what course_lib creates beside a model goes where the model is.

A student may move a model to a GPU (Colab), to ``meta`` (shapes only, no values) or to
another dtype. Ids built from text, masks and random draws must then be made on the model's
device, and checks that read values must not run where there are none:

- :func:`device_of` -- the device of a module's parameters;
- :func:`values_checkable` -- whether a check may read a tensor's values (not on ``meta``,
  not while ``torch.compile`` traces, where a read would split the graph);
- :func:`uniform` and :func:`multinomial` -- random draws with a ``torch.Generator`` of any
  device: a generator belongs to one device, so the draw is made there and moved, and one
  seed gives the same numbers whichever device the model is on;
- :func:`threads` -- how many CPU threads PyTorch uses inside a ``with`` block.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import Tensor, nn

try:
    from torch.compiler import is_compiling
except ImportError:  # torch < 2.3
    from torch._dynamo import is_compiling

from course_lib._checks import positive_int

__all__ = ["device_of", "multinomial", "threads", "uniform", "values_checkable"]


def device_of(module: nn.Module) -> torch.device:
    """The device of ``module``'s first parameter (or buffer); the CPU if it has none."""
    for tensor in (*module.parameters(), *module.buffers()):
        return tensor.device
    return torch.device("cpu")


def values_checkable(value: Tensor) -> bool:
    """Whether a check may read the values of ``value``, not only its shape and dtype.

    Not on the ``meta`` device, which has no values, and not while ``torch.compile`` traces:
    reading a value there (``.item()``, ``if tensor.any():``) would break the graph in two.
    In eager mode on the CPU or a GPU, checks read values and their messages say what is
    wrong.
    """
    return value.device.type != "meta" and not is_compiling()


def _check_generator(generator: object) -> None:
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(
            f"generator must be a torch.Generator (e.g. torch.Generator().manual_seed(0)) or "
            f"None, got {generator!r} of type {type(generator).__name__}"
        )


def uniform(
    shape: tuple[int, ...], generator: torch.Generator | None, device: torch.device | str
) -> Tensor:
    """``torch.rand(shape)`` on ``device``, drawn from ``generator`` on its own device."""
    _check_generator(generator)
    if generator is None:
        return torch.rand(shape, device=device)
    return torch.rand(shape, generator=generator, device=generator.device).to(device)


def multinomial(
    probabilities: Tensor,
    num_samples: int,
    generator: torch.Generator | None,
    replacement: bool = False,
) -> Tensor:
    """``torch.multinomial(probabilities, num_samples, replacement)`` with ``generator`` of
    any device; the result is on the device of ``probabilities``."""
    _check_generator(generator)
    if generator is None or generator.device == probabilities.device:
        return torch.multinomial(probabilities, num_samples, replacement, generator=generator)
    if probabilities.device.type == "meta":  # no values to draw from: the shape is all there is
        return torch.multinomial(probabilities, num_samples, replacement)
    on_generator = probabilities.to(generator.device)
    drawn = torch.multinomial(on_generator, num_samples, replacement, generator=generator)
    return drawn.to(probabilities.device)


@contextlib.contextmanager
def threads(count: int | None) -> Iterator[None]:
    """Let PyTorch use ``count`` CPU threads inside the ``with`` block (``None``: unchanged).

    Small models train faster on one thread on a busy machine, and one thread makes the
    order of every floating-point sum, hence the result, the same from run to run.
    """
    previous = torch.get_num_threads()
    if count is not None:
        torch.set_num_threads(positive_int("threads", count))
    try:
        yield
    finally:
        torch.set_num_threads(previous)
