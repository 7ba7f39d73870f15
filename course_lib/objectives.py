"""Training the model families: masked tokens (BERT), next tokens (GPT), labels (fine-tuning).

Each objective is a loss on one batch, handed to :func:`course_lib.training.fit`, the course's
one training loop:

- masked-token prediction (:func:`train_masked_lm`): some input tokens of an
  :class:`~course_lib.families.EncoderOnlyModel` are replaced by ``<mask>``
  (:func:`mask_tokens`, afresh for every batch), and the loss counts the hidden tokens only;
- next-token prediction (:func:`train_causal_lm`): a
  :class:`~course_lib.families.DecoderOnlyModel` predicts every next token, the teacher
  forcing of the encoder-decoder without a source;
- fine-tuning (:func:`train_classifier`): a :class:`~course_lib.families.SequenceClassifier`
  (the head and the encoder under it) learns one label per sequence.

Shapes: ``ids`` is ``(N, L)`` token ids, padded; ``labels`` is ``(N,)`` class ids.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from course_lib._checks import integer, integer_ids, probability, shape_of
from course_lib._devices import uniform, values_checkable
from course_lib.families import DecoderOnlyModel, EncoderOnlyModel, SequenceClassifier
from course_lib.training import TrainingHistory, fit, sequence_loss, teacher_forcing

__all__ = ["mask_tokens", "train_causal_lm", "train_classifier", "train_masked_lm"]


# --------------------------------------------------------------------------- pre-training


def mask_tokens(
    ids: Tensor,
    mask_id: int,
    fraction: float = 0.15,
    generator: torch.Generator | None = None,
    pad_id: int = 0,
    keep: tuple[int, ...] = (),
) -> tuple[Tensor, Tensor]:
    """Hide some tokens for masked-token prediction.

    Every real token (not ``pad_id``, not in ``keep``) is chosen with probability
    ``fraction``, and at least one per sequence; the chosen tokens are replaced by
    ``mask_id``. (BERT replaces only 80% of them by ``<mask>``, 10% by a random token and
    leaves 10% as they are, so that the model also learns about unmasked inputs; here all are
    masked.)

    Args:
        ids: ``(batch, L)`` token ids.
        mask_id: the id of ``<mask>``.
        fraction: the share of tokens to hide.
        generator: the random generator of the choice, on any device (the draws are made
            on its device and moved to that of ``ids``).
        pad_id: the padding id, never chosen.
        keep: other ids never chosen (e.g. ``<bos>``).

    Returns:
        ``(inputs, labels)``: ``inputs`` is ``ids`` with the chosen tokens replaced by
        ``mask_id``; ``labels`` holds the original ids at the chosen positions and ``pad_id``
        everywhere else (so the loss counts the hidden tokens only).
    """
    integer_ids("ids", ids)
    fraction = probability("fraction", fraction)
    candidates = ids != pad_id
    for token in keep:
        candidates &= ids != token
    if values_checkable(ids) and not candidates.any(dim=1).all():
        raise ValueError("every sequence needs at least one token that may be masked")
    noise = uniform(ids.shape, generator, ids.device)
    chosen = candidates & (noise < fraction)
    # at least one per sequence: the candidate with the smallest noise
    first = noise.masked_fill(~candidates, 2.0).argmin(dim=1)
    chosen[torch.arange(ids.size(0), device=ids.device), first] = True
    inputs = ids.masked_fill(chosen, mask_id)
    labels = ids.masked_fill(~chosen, pad_id)
    return inputs, labels


def train_masked_lm(
    model: EncoderOnlyModel,
    ids: Tensor,
    mask_id: int,
    fraction: float = 0.15,
    **settings: Any,
) -> TrainingHistory:
    """Train a BERT-like model to fill in masked tokens; every batch is masked afresh.

    Args:
        model: the :class:`~course_lib.families.EncoderOnlyModel`.
        ids: ``(N, L)`` token ids, padded with ``model.pad_id``.
        mask_id: the id of ``<mask>``.
        fraction: the share of tokens hidden (see :func:`mask_tokens`).
        settings: ``epochs``, ``batch_size``, ``learning_rate``, ``seed`` ... of
            :func:`course_lib.training.fit`.
    """
    pad_id = 0 if model.pad_id is None else model.pad_id
    draws = torch.Generator().manual_seed(integer("seed", settings.get("seed", 0)))

    def batch_loss(batch: Tensor) -> Tensor:
        inputs, labels = mask_tokens(batch, mask_id, fraction, draws, pad_id)
        return sequence_loss(model(inputs), labels, pad_id)  # the hidden tokens only

    return fit(model, (ids,), batch_loss, **settings)


def train_causal_lm(model: DecoderOnlyModel, ids: Tensor, **settings: Any) -> TrainingHistory:
    """Train a GPT-like model to predict every next token of ``ids`` ``(N, L)`` (sequences
    ``<bos> ... <eos>``, padded): the teacher forcing of the encoder-decoder, without a source.

    Args:
        model: the :class:`~course_lib.families.DecoderOnlyModel`.
        ids: ``(N, L)`` token ids.
        settings: the keyword arguments of :func:`course_lib.training.fit`.
    """

    def batch_loss(batch: Tensor) -> Tensor:
        inputs, labels = teacher_forcing(batch)
        return sequence_loss(model(inputs), labels, model.pad_id)

    return fit(model, (ids,), batch_loss, **settings)


# --------------------------------------------------------------------------- fine-tuning


def train_classifier(
    model: SequenceClassifier, ids: Tensor, labels: Tensor, **settings: Any
) -> TrainingHistory:
    """Train a :class:`~course_lib.families.SequenceClassifier` (head and encoder) on
    labelled sequences.

    Args:
        model: the classifier.
        ids: ``(N, L)`` token ids, padded with the encoder's ``pad_id``.
        labels: ``(N,)`` class ids in ``[0, num_classes)``.
        settings: ``epochs``, ``batch_size``, ``learning_rate``, ``seed`` ... of
            :func:`course_lib.training.fit`.
    """
    if not isinstance(model, SequenceClassifier):
        raise TypeError(f"model must be a SequenceClassifier, got {type(model).__name__}")
    if not isinstance(ids, Tensor) or ids.dim() != 2:
        raise ValueError(f"ids must be a (N, L) tensor of token ids, got {shape_of(ids)}")
    if not isinstance(labels, Tensor) or labels.shape != ids.shape[:1]:
        raise ValueError(f"labels must be a ({ids.size(0)},) tensor, got {shape_of(labels)}")
    classes = model.head.out_features
    outside = values_checkable(labels) and bool((labels < 0).any() or (labels >= classes).any())
    if labels.dtype.is_floating_point or outside:
        raise ValueError(f"labels must be integer class ids in [0, {classes})")

    def batch_loss(batch_ids: Tensor, batch_labels: Tensor) -> Tensor:
        return F.cross_entropy(model(batch_ids), batch_labels)

    return fit(model, (ids, labels), batch_loss, **settings)
