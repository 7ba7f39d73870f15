"""Why drop recurrence: an RNN must step through a sequence, self-attention sees it all at once.

A recurrent network computes ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)``: step
``t`` needs the result of step ``t - 1``, so a sequence of length ``L`` takes ``L`` steps one
after the other, however many processors are available. Self-attention computes every output
position from the whole input in a few matrix products, one sequential step for any length
(its work grows as ``L**2``, but all of it can run in parallel).

:func:`time_rnn_vs_attention` measures both on this machine, the RNN twice: as the Python loop
of :func:`rnn_stepwise` and as ``torch.nn.RNN``, whose loop runs inside PyTorch. The counts of
sequential steps and of arithmetic (:func:`rnn_matmul_flops`, :func:`attention_matmul_flops`)
it reports are exact; the times depend on the hardware and are for plotting
(:func:`course_lib.plotting.plot_rnn_vs_attention`), not for asserting.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial

import torch
from torch import Tensor, nn

from course_lib import _devices
from course_lib._checks import integer, positive_int, shape_of
from course_lib.attention import scaled_dot_product_attention

__all__ = [
    "attention_matmul_flops",
    "rnn_from_cell",
    "rnn_matmul_flops",
    "rnn_stepwise",
    "self_attention",
    "time_rnn_vs_attention",
]


def _initial_state(x: Tensor, cell: nn.RNNCell, h0: Tensor | None) -> Tensor:
    """Check the arguments of :func:`rnn_stepwise`; the state to start from."""
    if not isinstance(cell, nn.RNNCell):
        raise TypeError(f"cell must be an nn.RNNCell, got {type(cell).__name__}")
    if not isinstance(x, Tensor) or x.dim() != 3 or x.size(-1) != cell.input_size or not x.size(1):
        shape = shape_of(x)
        raise ValueError(
            f"expected inputs of shape (batch, seq >= 1, input_size={cell.input_size}), got {shape}"
        )
    batch = x.size(0)
    if h0 is None:
        return x.new_zeros(batch, cell.hidden_size)
    if h0.shape != (batch, cell.hidden_size):
        raise ValueError(
            f"expected h0 of shape (batch={batch}, hidden_size={cell.hidden_size}), "
            f"got {tuple(h0.shape)}"
        )
    return h0


def rnn_stepwise(
    x: Tensor,
    cell: nn.RNNCell,
    h0: Tensor | None = None,
) -> Tensor:
    """Run an RNN cell over a batch of sequences, one position after the other.

    The same as ``nn.RNN(batch_first=True)`` with the cell's weights, written as the explicit
    loop it stands for.

    Args:
        x: inputs of shape ``(batch, seq, input_size)``, ``seq >= 1``.
        cell: the recurrent cell, an ``nn.RNNCell(input_size, hidden_size)``.
        h0: initial hidden state of shape ``(batch, hidden_size)``; zeros if omitted.

    Returns:
        The hidden state after every position, shape ``(batch, seq, hidden_size)``.

    Raises:
        TypeError: if ``cell`` is not an ``nn.RNNCell``.
        ValueError: if ``x`` or ``h0`` has the wrong shape.
    """
    h = _initial_state(x, cell, h0)  # (batch, hidden_size)
    states = []
    for t in range(x.size(1)):  # step t needs the state of step t - 1
        h = cell(x[:, t], h)  # (batch, hidden_size)
        states.append(h)
    return torch.stack(states, dim=1)  # (batch, seq, hidden_size)


def self_attention(x: Tensor, w_q: nn.Linear, w_k: nn.Linear, w_v: nn.Linear) -> Tensor:
    """Single-head self-attention with learned projections, all positions at once.

    ``softmax(Q K^T / sqrt(d_k)) V`` with ``Q = w_q(x)``, ``K = w_k(x)``, ``V = w_v(x)``,
    computed by :func:`course_lib.attention.scaled_dot_product_attention`.

    Args:
        x: inputs of shape ``(batch, seq, d_model)``.
        w_q, w_k, w_v: the projections, each an ``nn.Linear(d_model, ...)``; ``w_q`` and
            ``w_k`` must have the same output size.

    Returns:
        Tensor of shape ``(batch, seq, d_v)``, ``d_v`` the output size of ``w_v``.
    """
    output, _ = scaled_dot_product_attention(w_q(x), w_k(x), w_v(x))
    return output


def rnn_matmul_flops(batch: int, length: int, input_size: int, hidden_size: int) -> int:
    """Floating-point operations of the matrix products in :func:`rnn_stepwise`.

    Every step multiplies ``x_t`` ``(batch, input_size)`` by ``W_ih^T`` and ``h_{t-1}``
    ``(batch, hidden_size)`` by ``W_hh^T``; a product of an ``(m, k)`` and a ``(k, n)``
    matrix costs ``2 m k n`` operations (one multiply and one add per term). So::

        length * 2 * batch * (input_size + hidden_size) * hidden_size

    Biases and ``tanh`` are left out, as in ``torch.utils.flop_counter.FlopCounterMode``,
    whose count this equals.
    """
    sizes = [positive_int(name, value) for name, value in (
        ("batch", batch), ("length", length), ("input_size", input_size),
        ("hidden_size", hidden_size),
    )]  # fmt: skip
    batch, length, input_size, hidden_size = sizes
    return length * 2 * batch * (input_size + hidden_size) * hidden_size


def attention_matmul_flops(batch: int, length: int, d_model: int, d_k: int, d_v: int) -> int:
    """Floating-point operations of the matrix products in :func:`self_attention`.

    The three projections cost ``2 * batch * length * d_model * (2 * d_k + d_v)``, the scores
    ``Q K^T`` ``2 * batch * length**2 * d_k`` and the weighted sum of the values
    ``2 * batch * length**2 * d_v``. The last two grow with the square of the length. Biases,
    the scaling and the softmax are left out, as in ``FlopCounterMode``, whose count this
    equals.
    """
    sizes = [positive_int(name, value) for name, value in (
        ("batch", batch), ("length", length), ("d_model", d_model), ("d_k", d_k), ("d_v", d_v),
    )]  # fmt: skip
    batch, length, d_model, d_k, d_v = sizes
    projections = 2 * batch * length * d_model * (2 * d_k + d_v)
    return projections + 2 * batch * length**2 * (d_k + d_v)


def _best_time(run: Callable[[], object], repeats: int) -> float:
    """Fastest of ``repeats`` timed calls, in seconds, after one untimed warm-up call."""
    run()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def rnn_from_cell(cell: nn.RNNCell) -> nn.RNN:
    """A one-layer, batch-first ``nn.RNN`` that shares the weights of ``cell``.

    It computes what :func:`rnn_stepwise` computes with ``cell``, with the loop over the
    positions inside PyTorch: ``rnn(x)[0] == rnn_stepwise(x, cell)`` for ``x`` of shape
    ``(batch, seq, input_size)``.
    """
    if not isinstance(cell, nn.RNNCell):
        raise TypeError(f"cell must be an nn.RNNCell, got {type(cell).__name__}")
    rnn = nn.RNN(cell.input_size, cell.hidden_size, nonlinearity=cell.nonlinearity,
                 batch_first=True)  # fmt: skip
    rnn.weight_ih_l0, rnn.weight_hh_l0 = cell.weight_ih, cell.weight_hh
    rnn.bias_ih_l0, rnn.bias_hh_l0 = cell.bias_ih, cell.bias_hh
    return rnn


def _measure(
    x: Tensor, cell: nn.RNNCell, rnn: nn.RNN, projections: list[nn.Linear], repeats: int
) -> dict[str, int | float]:
    """One row of :func:`time_rnn_vs_attention` for the batch ``x`` ``(batch, length, d)``."""
    batch, length, d_model = x.shape
    return {
        "length": length,
        "rnn_seconds": _best_time(partial(rnn_stepwise, x, cell), repeats),
        "rnn_builtin_seconds": _best_time(partial(rnn, x), repeats),
        "attention_seconds": _best_time(partial(self_attention, x, *projections), repeats),
        "rnn_sequential_steps": length,
        "attention_sequential_steps": 1,
        "rnn_flops": rnn_matmul_flops(batch, length, d_model, d_model),
        "attention_flops": attention_matmul_flops(batch, length, d_model, d_model, d_model),
    }


def time_rnn_vs_attention(
    lengths: Sequence[int],
    d_model: int = 64,
    batch: int = 8,
    repeats: int = 3,
    seed: int = 0,
    threads: int | None = None,
) -> list[dict[str, int | float]]:
    """Time one RNN pass against one self-attention pass, for sequences of growing length.

    For each length, the same random batch of shape ``(batch, length, d_model)`` goes through

    - an ``nn.RNNCell(d_model, d_model)`` stepping through the positions in a Python loop
      (:func:`rnn_stepwise`);
    - ``torch.nn.RNN`` with the same weights, the same computation with its loop inside
      PyTorch (no Python overhead per step, but still one step after the other);
    - self-attention with three ``nn.Linear(d_model, d_model)`` projections
      (:func:`self_attention`).

    Each pass is run once untimed (warm-up) and then ``repeats`` times; the fastest run counts
    (``time.perf_counter``, under ``torch.no_grad()``). Weights and inputs are drawn from
    ``seed`` without touching the global random state.

    ``threads`` sets how many CPU threads PyTorch may use while measuring (the previous
    setting is restored). On a machine whose cores are busy with other work, threads that
    wait for each other can make small operations many times slower at random; one thread
    gives both models the same single core and repeatable times.

    Args:
        lengths: the sequence lengths, positive integers.
        d_model: size of every position's vector.
        batch: sequences per batch.
        repeats: timed runs per measurement.
        seed: seed of the weights and the inputs.
        threads: CPU threads during the measurement; ``None`` leaves the setting as it is.

    Returns:
        One dict per length, in the given order, with the keys

        - ``length``;
        - ``rnn_seconds`` (the Python loop), ``rnn_builtin_seconds`` (``nn.RNN``) and
          ``attention_seconds``: the measured times;
        - ``rnn_sequential_steps`` (``= length``: one cell call after the other) and
          ``attention_sequential_steps`` (``= 1``: one pass over all positions);
        - ``rnn_flops`` and ``attention_flops``: the exact operation counts of their matrix
          products (:func:`rnn_matmul_flops`, :func:`attention_matmul_flops`).

    Raises:
        ValueError: if ``lengths`` is empty or holds a non-positive length.
    """
    if isinstance(lengths, (str, bytes)) or not isinstance(lengths, Sequence) or not lengths:
        raise ValueError(
            f"lengths must be a non-empty sequence of positive integers, got {lengths!r}"
        )
    lengths = [positive_int("length", length) for length in lengths]
    d_model = positive_int("d_model", d_model)
    batch = positive_int("batch", batch)
    repeats = positive_int("repeats", repeats)
    seed = integer("seed", seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        cell = nn.RNNCell(d_model, d_model)
        projections = [nn.Linear(d_model, d_model) for _ in range(3)]
        rnn = rnn_from_cell(cell)  # its own initialisation draws too
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randn(batch, max(lengths), d_model, generator=generator)
    with _devices.threads(threads), torch.no_grad():
        return [
            _measure(inputs[:, :length].contiguous(), cell, rnn, projections, repeats)
            for length in lengths
        ]
