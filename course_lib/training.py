"""Training an encoder-decoder Transformer with teacher forcing.

A target sentence ``<bos> y_1 ... y_n <eos>`` gives the decoder its input and its labels by
a shift of one (:func:`teacher_forcing`):

    decoder input:  <bos>  y_1  ...  y_n
    labels:          y_1   y_2  ...  <eos>

so position ``t`` is asked for token ``t + 1`` while it sees the true tokens ``0..t``: every
position is trained in one forward pass, the causal mask keeping each from seeing its label.
The loss is the cross-entropy of the labels, averaged over the real tokens of the batch
(padding does not count, :func:`sequence_loss`).

The paper's training recipe (Vaswani et al., 2017, sections 5.3 and 5.4) adds:

- label smoothing (:func:`smoothed_targets`, :func:`label_smoothed_loss`): the target of a
  position with label ``y`` among ``K`` classes is ``(1 - eps) * onehot(y) + eps / K``, and
  the loss ``-sum_k target_k * log p_k`` can go no lower than the entropy of that target
  (:func:`smoothed_loss_minimum`);
- the learning-rate schedule (:func:`transformer_schedule`,
  :func:`transformer_scheduler`)::

      lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5),  step = 1, 2, ...

  a linear rise for ``warmup`` steps to ``(d_model * warmup)^-0.5``, then a decay as
  ``1 / sqrt(step)``.

:func:`fit` is the training loop (shuffled mini-batches, Adam with a learning rate that
rises linearly and then decays, :func:`warmup_then_decay`; seeded, on a chosen number of CPU
threads, with an optional progress bar), and :func:`train_seq2seq` uses it with that loss.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib._checks import (
    floating,
    integer,
    integer_ids,
    positive_int,
    probability,
    shape_of,
)
from course_lib._devices import device_of, threads, values_checkable

__all__ = [
    "ProgressBar",
    "TrainingHistory",
    "fit",
    "label_smoothed_loss",
    "sequence_loss",
    "smoothed_loss_minimum",
    "smoothed_targets",
    "teacher_forcing",
    "threads",
    "train_seq2seq",
    "transformer_schedule",
    "transformer_scheduler",
    "warmup_then_decay",
]


def _check_targets(tgt_ids: object) -> None:
    if not isinstance(tgt_ids, Tensor) or tgt_ids.dim() != 2 or tgt_ids.size(1) < 2:
        shape = shape_of(tgt_ids)
        raise ValueError(
            f"tgt_ids must be a (batch, L) tensor with L >= 2 (<bos> ... <eos>), got {shape}"
        )
    integer_ids("tgt_ids", tgt_ids)


def _check_logits(logits: Tensor, labels: Tensor) -> None:
    floating("logits", logits)
    integer_ids("labels", labels)
    if logits.dim() != 3 or labels.shape != logits.shape[:2]:
        raise ValueError(
            "logits must be (batch, L, vocab_size) and labels (batch, L), got "
            f"{tuple(logits.shape)} and {tuple(labels.shape)}"
        )


def _check_labels(labels: Tensor, vocab_size: int, ignore: int | None) -> None:
    """Raise unless some label counts (is not ``ignore``) and every one that counts is a
    class of the logits, ``[0, vocab_size)``: the loss is a mean over the labels that count."""
    if not values_checkable(labels):
        return
    counted = labels != ignore if ignore is not None else torch.ones_like(labels, dtype=torch.bool)
    if not counted.any():
        raise ValueError(
            f"every label is the padding id {ignore}, so no position counts and the mean loss "
            "over the real tokens would be 0/0 (NaN); the labels are the targets shifted by "
            "one (teacher_forcing), with padding only after <eos>; is pad_id right?"
        )
    outside = counted & ((labels < 0) | (labels >= vocab_size))
    if outside.any():
        where = tuple(int(i) for i in outside.nonzero()[0])
        raise IndexError(
            f"label {int(labels[where])} at position {where} is outside [0, "
            f"vocab_size={vocab_size}), the classes of the logits' last axis; "
            f"{int(outside.sum())} label(s) are out of range"
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
    label_smoothing: float = 0.0,
) -> Tensor:
    """Cross-entropy of the labels under the logits, averaged over the real tokens.

    Args:
        logits: ``(batch, L, vocab_size)``, the model's scores at every position.
        labels: ``(batch, L)``, the correct next tokens, ``pad_id`` where there is none.
        pad_id: positions whose label is ``pad_id`` do not count; ``None`` counts every one.
        label_smoothing: ``eps`` in [0, 1): compare with the smoothed target of
            :func:`smoothed_targets` instead of the one-hot label (0: plain cross-entropy).

    Returns:
        A scalar: ``-mean log softmax(logits)[label]`` over the positions that count, so a
        batch of long sentences weighs each token alike, whatever the padding.

    Raises:
        IndexError: for a label that counts but is not a class, outside ``[0, vocab_size)``.
        ValueError: if no label counts (every one is ``pad_id``): a mean over no token is
            0/0. PyTorch returns NaN, and 0 would look like a perfect model; either would
            hide the likely mistake (labels that are not the shifted targets, or the wrong
            ``pad_id``).
    """
    _check_logits(logits, labels)
    ignore = -100 if pad_id is None else integer("pad_id", pad_id)
    _check_labels(labels, logits.size(-1), ignore)
    smoothing = _check_smoothing(label_smoothing)
    scores = logits.flatten(0, 1)  # (batch * L, vocab_size): a row per position
    return F.cross_entropy(
        scores,
        labels.flatten(),
        ignore_index=ignore,
        label_smoothing=smoothing,
    )


def _check_smoothing(epsilon: object) -> float:
    epsilon = probability("label_smoothing", epsilon)
    if epsilon == 1.0:
        raise ValueError("label_smoothing must be below 1 (1 would ignore the labels), got 1.0")
    return epsilon


def _check_class_ids(labels: Tensor, num_classes: int) -> None:
    integer_ids("labels", labels)
    if not values_checkable(labels) or not labels.numel():
        return
    if labels.min() < 0 or labels.max() >= num_classes:
        raise ValueError(f"labels must be in [0, {num_classes}), got values outside")


def smoothed_targets(
    labels: Tensor, num_classes: int, epsilon: float, dtype: torch.dtype | None = None
) -> Tensor:
    """The label-smoothed target distribution: ``(1 - eps) * onehot(label) + eps / K``.

    Every one of the ``K = num_classes`` classes, the correct one included, gets ``eps / K``;
    the correct one gets ``1 - eps`` on top. This is the form of Szegedy et al. (2016) and of
    ``F.cross_entropy(..., label_smoothing=eps)``. tensor2tensor's ``smoothing_cross_entropy``
    gives the correct class ``1 - eps`` and every other ``eps / (K - 1)``: the same target as
    this one with ``eps * K / (K - 1)`` in place of ``eps``.

    Args:
        labels: integer class ids of any shape ``(*)``, each in ``[0, num_classes)``.
        num_classes: ``K``.
        epsilon: ``eps`` in [0, 1).
        dtype: of the result, on the labels' device; ``None`` means PyTorch's default dtype.

    Returns:
        ``(*, K)``: a distribution per label (rows sum to 1).
    """
    num_classes = positive_int("num_classes", num_classes)
    epsilon = _check_smoothing(epsilon)
    _check_class_ids(labels, num_classes)
    dtype = dtype or torch.get_default_dtype()
    one_hot = F.one_hot(labels, num_classes).to(dtype)  # (*, classes)
    return (1 - epsilon) * one_hot + epsilon / num_classes


def label_smoothed_loss(
    logits: Tensor, labels: Tensor, epsilon: float, pad_id: int | None = 0
) -> Tensor:
    """Cross-entropy against the smoothed targets, averaged over the real tokens.

        loss = mean over positions with label != pad_id of  -sum_k target_k * log p_k

    with ``target = smoothed_targets(label, K, eps)`` and ``p = softmax(logits)``: the same
    number as ``sequence_loss(logits, labels, pad_id, label_smoothing=eps)``, written out.

    Args:
        logits: ``(batch, L, K)``; labels: ``(batch, L)``; epsilon: ``eps`` in [0, 1);
        pad_id: positions whose label is ``pad_id`` do not count (``None``: all count).

    Raises:
        IndexError, ValueError: as :func:`sequence_loss`.
    """
    _check_logits(logits, labels)
    _check_labels(labels, logits.size(-1), pad_id)
    if pad_id is None:
        real = torch.ones_like(labels, dtype=torch.bool)
    else:
        real = labels != pad_id
    log_p = torch.log_softmax(logits, dim=-1)  # (batch, L, classes)
    classes = labels.masked_fill(~real, 0)  # any class at padding: it does not count
    num_classes = logits.size(-1)
    # (batch, L, classes)
    target = smoothed_targets(classes, num_classes, epsilon, log_p.dtype)
    loss = -(target * log_p).sum(dim=-1)  # (batch, L): one value per position
    return (loss * real).sum() / real.sum()  # the mean over the real positions


def smoothed_loss_minimum(num_classes: int, epsilon: float) -> float:
    """The lowest value of the label-smoothed loss: the entropy of the smoothed target.

    ``-sum_k q_k log p_k`` over distributions ``p`` is smallest at ``p = q`` (Gibbs'
    inequality), where it is the entropy ``H(q)``. With ``q`` = ``1 - eps + eps/K`` on the
    label and ``eps/K`` on each of the other ``K - 1`` classes::

        H(q) = -(1 - eps + eps/K) log(1 - eps + eps/K) - (K - 1) (eps/K) log(eps/K)

    which is 0 only for ``eps = 0``.
    """
    k = positive_int("num_classes", num_classes)
    epsilon = _check_smoothing(epsilon)
    high, low = 1 - epsilon + epsilon / k, epsilon / k
    entropy = 0.0 - high * math.log(high)  # 0.0, not -0.0, when eps = 0
    if low > 0:
        entropy -= (k - 1) * low * math.log(low)
    return entropy


def transformer_schedule(step: int, d_model: int, warmup_steps: int = 4000) -> float:
    """The paper's learning rate at training step ``step`` (counted from 1), section 5.3:

        lrate = d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)

    It rises linearly for ``warmup_steps`` steps, peaks at ``step = warmup_steps`` with
    ``(d_model * warmup_steps)^-0.5`` (about 7.0e-4 for 512 and 4000), then decays as
    ``1 / sqrt(step)``.
    """
    step = positive_int("step", step)
    d_model = positive_int("d_model", d_model)
    warmup_steps = positive_int("warmup_steps", warmup_steps)
    return d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def transformer_scheduler(
    optimizer: torch.optim.Optimizer, d_model: int, warmup_steps: int = 4000
) -> torch.optim.lr_scheduler.LambdaLR:
    """A ``LambdaLR`` that sets the learning rate to :func:`transformer_schedule` times the
    optimizer's ``lr`` (give the optimizer ``lr=1.0`` for the paper's rates).

    ``LambdaLR`` counts its calls from 0; the paper counts steps from 1, so the ``n``-th
    optimizer step (``n = 0, 1, ...``) runs at the rate of paper step ``n + 1``. Call
    ``scheduler.step()`` after every ``optimizer.step()``.
    """
    d_model = positive_int("d_model", d_model)
    warmup_steps = positive_int("warmup_steps", warmup_steps)

    def factor(calls: int) -> float:
        return transformer_schedule(calls + 1, d_model, warmup_steps)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


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


AUTOCAST_DTYPES = (torch.bfloat16, torch.float16)
"""The values of ``fit(autocast=...)`` besides ``None``."""

_PURE_FLOAT16 = (
    "the model's parameters are float16, and Adam cannot train them in float16: its eps "
    "(1e-8) and the squares of small gradients round to 0 (float16 holds nothing between 0 "
    "and 6e-8), an update divides by 0, and the loss is NaN after one step. Keep the "
    "parameters float32 (model.float()) and train with mixed precision, "
    "fit(..., autocast=torch.float16) (with loss scaling) or autocast=torch.bfloat16; or "
    "convert the model to bfloat16 (model.to(torch.bfloat16)), which has float32's range"
)


def _check_precision(model: nn.Module, autocast: object) -> torch.dtype | None:
    """``autocast`` if it suits ``model``'s parameters; refuses pure float16 training."""
    if autocast is not None and autocast not in AUTOCAST_DTYPES:
        raise ValueError(
            f"autocast must be None, torch.bfloat16 or torch.float16, got {autocast!r}"
        )
    dtypes = {p.dtype for p in model.parameters() if p.requires_grad}
    if torch.float16 in dtypes:
        raise TypeError(_PURE_FLOAT16)
    if autocast is not None and dtypes - {torch.float32}:
        raise TypeError(
            f"autocast={autocast} computes in {autocast} while the parameters stay float32, "
            f"but the model's parameters are {sorted(map(str, dtypes))}; convert it with "
            "model.float() first"
        )
    return autocast  # type: ignore[return-value]


def _grad_scaler(device_type: str) -> Any:
    if hasattr(torch.amp, "GradScaler"):  # torch >= 2.3
        return torch.amp.GradScaler(device_type)
    if device_type == "cuda":
        return torch.cuda.amp.GradScaler()
    raise ValueError(
        "autocast=torch.float16 needs loss scaling, which torch < 2.3 offers on CUDA only; "
        "use autocast=torch.bfloat16"
    )


class _Precision:
    """The number format of :func:`fit`: the parameters' own, or mixed precision.

    With ``autocast`` (bfloat16 or float16) the forward pass and the loss run under
    ``torch.autocast`` on the model's device: matrix products in the half precision, the
    parameters, their gradients and Adam's state in float32. float16 spans only 6e-8 to
    65504, so small gradients would round to 0: the loss is multiplied by a large factor
    before the backward pass and the gradients divided by it before the step
    (``GradScaler``, which also skips a step whose gradients overflowed). bfloat16 has the
    range of float32 and needs no scaling.
    """

    def __init__(self, model: nn.Module, autocast: object) -> None:
        self.device = device_of(model)
        self.dtype = _check_precision(model, autocast)
        self.scaler = _grad_scaler(self.device.type) if self.dtype == torch.float16 else None

    def forward(self) -> contextlib.AbstractContextManager:
        """The context of the forward pass and the loss."""
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)

    def scale(self, loss: Tensor) -> Tensor:
        """The loss to differentiate: scaled up under float16 autocast."""
        return loss if self.scaler is None else self.scaler.scale(loss)

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        """``optimizer.step()``, on unscaled gradients."""
        if self.scaler is None:
            optimizer.step()
            return
        self.scaler.step(optimizer)  # skipped if a gradient is inf or NaN
        self.scaler.update()


def _batch(data: tuple[Tensor, ...], rows: Tensor, device: torch.device) -> list[Tensor]:
    """The ``rows`` of every tensor of ``data``, on ``device`` (the data may stay elsewhere)."""
    return [t[rows.to(t.device)].to(device) for t in data]


def _check_loss(loss: object) -> Tensor:
    """``loss`` if it is what ``backward()`` needs: a 0-d floating-point tensor."""
    if not isinstance(loss, Tensor) or not loss.dtype.is_floating_point:
        raise TypeError(f"batch_loss must return a floating-point tensor, got {loss!r:.80}")
    if loss.dim() != 0:
        raise ValueError(
            f"batch_loss must return one number (a 0-d tensor, e.g. a mean over the batch), "
            f"got a tensor of shape {tuple(loss.shape)}; reduce it with .mean() or .sum()"
        )
    return loss


def _loss_value(loss: Tensor) -> float:
    """The loss as a number; NaN on the ``meta`` device, which has shapes and no values."""
    return math.nan if loss.device.type == "meta" else loss.item()


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
    schedule: Callable[[torch.optim.Optimizer, int], Any] | None = None,
    adam_eps: float = 1e-8,
    autocast: torch.dtype | None = None,
) -> TrainingHistory:
    """The training loop: shuffled mini-batches, a loss, its gradient, an Adam step.

    Every epoch visits the examples in a new random order, ``batch_size`` at a time; for each
    mini-batch ``batch_loss(*rows)`` gives the loss (``rows`` are the batch's rows of every
    tensor in ``data``), and Adam (betas 0.9 and 0.98, as in the original paper) takes one
    step at the learning rate of :func:`warmup_then_decay`. The model is left in ``eval()``
    mode. The data may stay on the CPU: each mini-batch goes to the device of the model's
    parameters.

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
        schedule: ``schedule(optimizer, total_steps)`` returns the learning-rate scheduler,
            stepped after every optimizer step (``None``: :func:`warmup_then_decay` with
            ``warmup_fraction``); e.g. ``lambda opt, total: transformer_scheduler(opt, 64)``
            with ``learning_rate=1.0`` for the paper's schedule.
        adam_eps: Adam's ``eps`` (PyTorch's default 1e-8; the paper used 1e-9).
        autocast: ``None`` to compute in the parameters' dtype, or ``torch.bfloat16`` or
            ``torch.float16`` for mixed precision: the loss is computed under
            ``torch.autocast`` on the model's device while the parameters stay float32,
            with loss scaling for float16 (see :class:`_Precision`).

    Returns:
        The :class:`TrainingHistory` (on the ``meta`` device, whose tensors have no values,
        every loss is NaN).

    Raises:
        TypeError: for a model with float16 parameters, which Adam turns into NaN after one
            step (train float32 parameters with ``autocast=torch.float16`` instead, or
            bfloat16 ones).
    """
    data = _check_data(data)
    precision = _Precision(model, autocast)  # refuses float16 parameters
    count = data[0].size(0)
    epochs = positive_int("epochs", epochs)
    batch_size = positive_int("batch_size", batch_size)
    steps_per_epoch = math.ceil(count / batch_size)
    total = epochs * steps_per_epoch
    optimizer = torch.optim.Adam(
        model.parameters(),
        lr=learning_rate,
        betas=(0.9, 0.98),
        eps=adam_eps,
    )
    if schedule is None:
        scheduler = warmup_then_decay(optimizer, total, warmup_fraction)
    else:
        scheduler = schedule(optimizer, total)
    if progress is True:
        progress = ProgressBar(total).update
    order = torch.Generator().manual_seed(integer("seed", seed))
    history = TrainingHistory(steps_per_epoch=steps_per_epoch)
    started = time.perf_counter()
    gpus = [precision.device] if precision.device.type == "cuda" else []
    with threads(num_threads), torch.random.fork_rng(devices=gpus):
        torch.manual_seed(seed)  # dropout draws, if any
        model.train()
        for epoch in range(epochs):
            permutation = torch.randperm(count, generator=order)
            epoch_loss = 0.0
            for number, start in enumerate(range(0, count, batch_size)):
                rows = permutation[start : start + batch_size]
                batch = _batch(data, rows, precision.device)
                with precision.forward():
                    loss = _check_loss(batch_loss(*batch))
                optimizer.zero_grad()
                precision.scale(loss).backward()
                precision.step(optimizer)
                scheduler.step()
                value = _loss_value(loss)
                history.step_losses.append(value)
                epoch_loss += value
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
    label_smoothing: float = 0.0,
    **settings: Any,
) -> TrainingHistory:
    """Train an encoder-decoder ``model(src_ids, decoder_input) -> logits`` with teacher
    forcing: :func:`fit` with the loss below.

    Args:
        model: e.g. a :class:`course_lib.transformer.Transformer`.
        src_ids: ``(N, L_s)`` source ids.
        tgt_ids: ``(N, L_t)`` target ids ``<bos> ... <eos>``, padded with ``pad_id``.
        pad_id: the targets' padding id, left out of the loss.
        label_smoothing: ``eps`` of :func:`sequence_loss` (0: none).
        settings: ``epochs``, ``batch_size``, ``learning_rate`` and the other keyword
            arguments of :func:`fit`.
    """
    _check_pairs(src_ids, tgt_ids)

    def batch_loss(src: Tensor, tgt: Tensor) -> Tensor:
        decoder_input, labels = teacher_forcing(tgt)  # shifted by one
        logits = model(src, decoder_input)  # every position in one pass
        return sequence_loss(logits, labels, pad_id, label_smoothing)

    return fit(model, (src_ids, tgt_ids), batch_loss, **settings)
