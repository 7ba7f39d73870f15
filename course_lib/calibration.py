"""Calibration: is a model right as often as it is sure?

A classifier that predicts its most probable class with probability ``c`` (its *confidence*)
is calibrated when, among all the predictions it makes with confidence ``c``, a share ``c`` is
right, for every ``c``. Equal means (mean confidence = accuracy) follow from that, but do not
imply it: a model can be too sure of some predictions and not sure enough of others, and the
two can cancel in the means.

Following Guo et al. (2017), the predictions are sorted into ``M`` bins of equal width by their
confidence, ``B_m = ((m - 1) / M, m / M]``, and each bin's accuracy is set against its mean
confidence (:func:`reliability_bins`; drawn, one bar a bin, that is a *reliability diagram*).
The expected calibration error weighs the gaps by the share of predictions in each bin
(:func:`expected_calibration_error`)::

    ECE = sum_m |B_m| / n * |accuracy(B_m) - confidence(B_m)|

0 for a calibrated model (up to the width of the bins), at most 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from course_lib._checks import check_tensor, floating, positive_int

__all__ = ["ReliabilityBin", "expected_calibration_error", "reliability_bins"]


@dataclass(frozen=True)
class ReliabilityBin:
    """The predictions whose confidence lies in ``(low, high]``.

    Attributes:
        low, high: the bin's edges.
        count: how many predictions fell in it.
        confidence: their mean confidence.
        accuracy: the share of them that were right.
    """

    low: float
    high: float
    count: int
    confidence: float
    accuracy: float

    @property
    def gap(self) -> float:
        """``accuracy - confidence``: positive where the model is not sure enough."""
        return self.accuracy - self.confidence


def _check_predictions(confidence: Tensor, correct: Tensor) -> tuple[Tensor, Tensor]:
    floating("confidence", confidence)
    check_tensor("correct", correct)
    if correct.dtype != torch.bool:
        raise TypeError(f"correct must be a bool tensor (True where right), got {correct.dtype}")
    if confidence.shape != correct.shape:
        raise ValueError(
            "confidence and correct must have the same shape, got "
            f"{tuple(confidence.shape)} and {tuple(correct.shape)}"
        )
    if confidence.numel() == 0:
        raise ValueError("there are no predictions to bin (empty tensors)")
    confidence = confidence.detach().flatten().double().cpu()
    if not bool(((confidence > 0) & (confidence <= 1)).all()):
        low, high = confidence.min().item(), confidence.max().item()
        raise ValueError(f"confidence must lie in (0, 1], got values from {low} to {high}")
    return confidence, correct.detach().flatten().cpu()


def reliability_bins(
    confidence: Tensor, correct: Tensor, num_bins: int = 10
) -> list[ReliabilityBin]:
    """Sort predictions into ``num_bins`` bins of equal width by their confidence.

    Args:
        confidence: ``(*)`` the probability each prediction gave its chosen class, in (0, 1].
        correct: ``(*)`` bool, True where the chosen class was the right one.
        num_bins: ``M``, the number of bins of width ``1 / M``.

    Returns:
        The non-empty bins, from the least confident to the most.

    Raises:
        TypeError: if ``confidence`` is not floating point or ``correct`` not bool.
        ValueError: for shapes that differ, no predictions, or a confidence outside (0, 1].
    """
    confidence, correct = _check_predictions(confidence, correct)
    num_bins = positive_int("num_bins", num_bins)
    # bin m (from 0) holds (m / M, (m + 1) / M]: ceil(c * M) - 1; c = 1 in the last
    index = (confidence * num_bins).ceil().long().clamp(1, num_bins) - 1  # (n,)
    bins = []
    for m in range(num_bins):
        chosen = index == m
        count = int(chosen.sum())
        if count:
            bins.append(
                ReliabilityBin(
                    low=m / num_bins,
                    high=(m + 1) / num_bins,
                    count=count,
                    confidence=confidence[chosen].mean().item(),
                    accuracy=correct[chosen].double().mean().item(),
                )
            )
    return bins


def expected_calibration_error(confidence: Tensor, correct: Tensor, num_bins: int = 10) -> float:
    """``sum_m |B_m| / n * |accuracy(B_m) - confidence(B_m)|`` over :func:`reliability_bins`.

    Args and Raises: as :func:`reliability_bins`.
    """
    bins = reliability_bins(confidence, correct, num_bins)
    total = sum(b.count for b in bins)
    return sum(b.count / total * abs(b.gap) for b in bins)
