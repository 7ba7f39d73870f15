"""Training an encoder-decoder Transformer with teacher forcing.

A target sentence ``<bos> y_1 ... y_n <eos>`` gives the decoder its input and its labels by
a shift of one (:func:`teacher_forcing`):

    decoder input:  <bos>  y_1  ...  y_n
    labels:          y_1   y_2  ...  <eos>

so position ``t`` is asked for token ``t + 1`` while it sees the true tokens ``0..t``: every
position is trained in one forward pass, the causal mask keeping each from seeing its label.
The loss is the cross-entropy of the labels, averaged over the real tokens of the batch
(padding does not count, :func:`sequence_loss`).

:func:`fit` is the training loop (shuffled mini-batches, Adam with a learning rate that
rises linearly and then decays, :func:`warmup_then_decay`; seeded, on a chosen number of CPU
threads, with an optional progress bar), and :func:`train_seq2seq` uses it with that loss.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib._checks import integer, positive_int, probability

__all__ = [
    "ProgressBar",
    "TrainingHistory",
    "fit",
    "sequence_loss",
    "teacher_forcing",
    "threads",
    "train_seq2seq",
    "warmup_then_decay",
]


def _check_targets(tgt_ids: object) -> None:
    if not isinstance(tgt_ids, Tensor) or tgt_ids.dim() != 2 or tgt_ids.size(1) < 2:
        shape = tuple(tgt_ids.shape) if isinstance(tgt_ids, Tensor) else type(tgt_ids).__name__
        raise ValueError(
            f"tgt_ids must be a (batch, L) tensor with L >= 2 (<bos> ... <eos>), got {shape}"
        )


def _check_logits(logits: Tensor, labels: Tensor) -> None:
    if logits.dim() != 3 or labels.shape != logits.shape[:2]:
        raise ValueError(
            "logits must be (batch, L, vocab_size) and labels (batch, L), got "
            f"{tuple(logits.shape)} and {tuple(labels.shape)}"
        )


def teacher_forcing(tgt_ids: Tensor) -> tuple[Tensor, Tensor]:
    """Cut target sentences into the decoder's input and its labels.

    Args:
        tgt_ids: ``(batch, L)`` ids ``<bos> y_1 ... y_n <eos>``, padded on the right.

    Returns:
        ``(decoder_input, labels)``, each ``(batch, L - 1)``: the ids without the last
        position, and the ids without the first. ``labels[:, t]`` is the token that
        position ``t`` of the decoder must predict.
    """
    _check_targets(tgt_ids)
    return tgt_ids[:, :-1], tgt_ids[:, 1:]


def sequence_loss(
    logits: Tensor,
    labels: Tensor,
    pad_id: int | None = 0,
) -> Tensor:
    """Cross-entropy of the labels under the logits, averaged over the real tokens.

    Args:
        logits: ``(batch, L, vocab_size)``, the model's scores at every position.
        labels: ``(batch, L)``, the correct next tokens, ``pad_id`` where there is none.
        pad_id: positions whose label is ``pad_id`` do not count; ``None`` counts every one.

    Returns:
        A scalar: ``-mean log softmax(logits)[label]`` over the positions that count, so a
        batch of long sentences weighs each token alike, whatever the padding.
    """
    _check_logits(logits, labels)
    ignore = -100 if pad_id is None else integer("pad_id", pad_id)
    scores = logits.flatten(0, 1)  # (batch * L, vocab_size): a row per position
    return F.cross_entropy(scores, labels.flatten(), ignore_index=ignore)


def warmup_then_decay(
    optimizer: torch.optim.Optimizer, total_steps: int, warmup_fraction: float = 0.1
) -> torch.optim.lr_scheduler.LambdaLR:
    """A schedule that raises the learning rate linearly from 0 over the first
    ``warmup_fraction`` of the steps, then lowers it linearly back to 0 at the last step.

    The warm-up keeps Adam's first, badly estimated steps small (the original paper warms up
    too, then decays as ``1/sqrt(step)``); the decay lets the weights settle at the end.
    """
    total_steps = positive_int("total_steps", total_steps)
    warmup = max(1, round(probability("warmup_fraction", warmup_fraction) * total_steps))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


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


class ProgressBar:
    """A progress bar for a training run: an ipywidgets bar in a notebook, lines elsewhere.

    Args:
        total: the number of steps.
        every: outside a notebook, print a line every ``every`` steps (and at the end).
    """

    def __init__(self, total: int, every: int = 100) -> None:
        self.total = positive_int("total", total)
        self.every = positive_int("every", every)
        self.bar = self.label = None
        with contextlib.suppress(ImportError, NameError):
            get_ipython()  # type: ignore[name-defined]  # noqa: F821 -- set in IPython only
            import ipywidgets as widgets
            from IPython.display import display

            self.bar = widgets.IntProgress(value=0, min=0, max=self.total, description="training")
            self.label = widgets.Label(value="")
            display(widgets.HBox([self.bar, self.label]))

    def update(self, step: int, epoch: int, loss: float, seconds: float) -> None:
        """Show that ``step`` steps are done; ``loss`` is the running mean of this epoch."""
        text = f"step {step}/{self.total}, epoch {epoch + 1}, loss {loss:.4f}, {seconds:.1f} s"
        if self.bar is not None:
            self.bar.value = step
            self.label.value = text
        elif step % self.every == 0 or step == self.total:
            print(text, flush=True)


@dataclass
class TrainingHistory:
    """What a training run did.

    Attributes:
        step_losses: the loss of every step, in order.
        epoch_losses: the mean loss of every epoch.
        seconds: wall-clock time of the run.
        steps_per_epoch: mini-batches per epoch.
    """

    step_losses: list[float] = field(default_factory=list)
    epoch_losses: list[float] = field(default_factory=list)
    seconds: float = 0.0
    steps_per_epoch: int = 0


def _check_data(data: Sequence[Tensor]) -> tuple[Tensor, ...]:
    data = tuple(data)
    if not data or not all(isinstance(t, Tensor) for t in data):
        raise TypeError("data must be a sequence of one or more tensors")
    if any(t.size(0) != data[0].size(0) for t in data):
        shapes = ", ".join(str(tuple(t.shape)) for t in data)
        raise ValueError(f"the tensors of data must have one row per example, got {shapes}")
    return data


def fit(
    model: nn.Module,
    data: Sequence[Tensor],
    batch_loss: Callable[..., Tensor],
    *,
    epochs: int,
    batch_size: int,
    learning_rate: float,
    warmup_fraction: float = 0.1,
    seed: int = 0,
    num_threads: int | None = 1,
    progress: bool | Callable[[int, int, float, float], None] = False,
) -> TrainingHistory:
    """The training loop: shuffled mini-batches, a loss, its gradient, an Adam step.

    Every epoch visits the examples in a new random order, ``batch_size`` at a time; for each
    mini-batch ``batch_loss(*rows)`` gives the loss (``rows`` are the batch's rows of every
    tensor in ``data``), and Adam (betas 0.9 and 0.98, as in the original paper) takes one
    step at the learning rate of :func:`warmup_then_decay`. The model is left in ``eval()``
    mode.

    Args:
        model: the module whose parameters are trained.
        data: tensors with one row per example, e.g. ``(src_ids, tgt_ids)``.
        batch_loss: called with the rows of one mini-batch, returns the scalar loss.
        epochs, batch_size: passes over the data and examples per step.
        learning_rate: the peak learning rate.
        warmup_fraction: share of the steps spent warming up.
        seed: seeds the order of the examples and every ``torch`` draw during training
            (dropout), without touching the global random state outside.
        num_threads: CPU threads during training (see :func:`threads`).
        progress: ``True`` for a :class:`ProgressBar`, or a function called after every
            step with ``(step, epoch, running_loss, seconds)``.

    Returns:
        The :class:`TrainingHistory`.
    """
    data = _check_data(data)
    count = data[0].size(0)
    epochs = positive_int("epochs", epochs)
    batch_size = positive_int("batch_size", batch_size)
    steps_per_epoch = math.ceil(count / batch_size)
    total = epochs * steps_per_epoch
    optimizer = torch.optim.Adam(
        model.parameters(), lr=learning_rate, betas=(0.9, 0.98)
    )  # fmt: skip
    schedule = warmup_then_decay(optimizer, total, warmup_fraction)
    if progress is True:
        progress = ProgressBar(total).update
    order = torch.Generator().manual_seed(integer("seed", seed))
    history = TrainingHistory(steps_per_epoch=steps_per_epoch)
    started = time.perf_counter()
    with threads(num_threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # dropout draws, if any
        model.train()
        for epoch in range(epochs):
            permutation = torch.randperm(count, generator=order)
            epoch_loss = 0.0
            for number, start in enumerate(range(0, count, batch_size)):
                rows = permutation[start : start + batch_size]
                loss = batch_loss(*(t[rows] for t in data))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                schedule.step()
                history.step_losses.append(loss.item())
                epoch_loss += loss.item()
                if progress:
                    step = epoch * steps_per_epoch + number + 1
                    seconds = time.perf_counter() - started
                    progress(step, epoch, epoch_loss / (number + 1), seconds)
            history.epoch_losses.append(epoch_loss / steps_per_epoch)
    model.eval()
    history.seconds = time.perf_counter() - started
    return history


def _check_pairs(src_ids: Tensor, tgt_ids: Tensor) -> None:
    if not isinstance(src_ids, Tensor) or not isinstance(tgt_ids, Tensor):
        raise TypeError("src_ids and tgt_ids must be tensors of token ids")
    if src_ids.dim() != 2 or tgt_ids.dim() != 2:
        raise ValueError(
            "src_ids and tgt_ids must be (N, L_s) and (N, L_t), got "
            f"{tuple(src_ids.shape)} and {tuple(tgt_ids.shape)}"
        )


def train_seq2seq(
    model: nn.Module,
    src_ids: Tensor,
    tgt_ids: Tensor,
    *,
    pad_id: int | None = 0,
    **settings: Any,
) -> TrainingHistory:
    """Train an encoder-decoder ``model(src_ids, decoder_input) -> logits`` with teacher
    forcing: :func:`fit` with the loss below.

    Args:
        model: e.g. a :class:`course_lib.transformer.Transformer`.
        src_ids: ``(N, L_s)`` source ids.
        tgt_ids: ``(N, L_t)`` target ids ``<bos> ... <eos>``, padded with ``pad_id``.
        pad_id: the targets' padding id, left out of the loss.
        settings: ``epochs``, ``batch_size``, ``learning_rate`` and the other keyword
            arguments of :func:`fit`.
    """
    _check_pairs(src_ids, tgt_ids)

    def batch_loss(src: Tensor, tgt: Tensor) -> Tensor:
        decoder_input, labels = teacher_forcing(tgt)  # shifted by one
        logits = model(src, decoder_input)  # every position in one pass
        return sequence_loss(logits, labels, pad_id)

    return fit(model, (src_ids, tgt_ids), batch_loss, **settings)
