"""Discretization: turning a continuous signal into a sequence of tokens from a vocabulary.

A Transformer for text reads token ids, indices into a vocabulary. A continuous signal such as
audio can be brought into the same form (one option among others: ViT and Wav2Vec 2.0 also
feed continuous patches and frames through a linear projection):

1. **frame** it: cut it into short, possibly overlapping windows (:func:`frame_signal`);
2. **learn a codebook**: ``k`` representative frames found by k-means (:func:`kmeans`);
3. **encode**: replace every frame by the id of its nearest codebook entry
   (:meth:`Codebook.encode`); the token sequence is the discrete version of the signal;
4. **decode** and **overlap-add** to hear what the tokens keep (:meth:`Codebook.decode`,
   :func:`overlap_add`), and measure the loss with :func:`reconstruction_snr`.

Everything is deterministic: random draws come from a seeded ``torch.Generator``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from course_lib._checks import integer, positive_int, shape_of
from course_lib._devices import multinomial

__all__ = [
    "Codebook",
    "frame_signal",
    "kmeans",
    "overlap_add",
    "reconstruction_snr",
    "synthesis_window",
    "synthetic_signal",
]

# The tones of the synthetic signal, in Hz: a glide and a melody of four notes.
GLIDE_HZ = (30.0, 90.0)
MELODY_HZ = (110.0, 165.0, 132.0, 220.0)
NOTE_SECONDS = 0.5
NOISE_LEVEL = 0.02


def _tensor(name: str, value: object, dims: int) -> Tensor:
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if value.dim() != dims:
        raise ValueError(f"{name} must be {dims}-D, got shape {tuple(value.shape)}")
    return value


def _floating(name: str, value: Tensor) -> Tensor:
    if not value.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got {value.dtype}")
    return value


# --- a signal to discretize -----------------------------------------------------------------


def synthetic_signal(num_samples: int = 4000, sample_rate: int = 1000, seed: int = 0) -> Tensor:
    """A stand-in for audio: a few tones whose pitch changes over time, plus a little noise.

    The signal is the sum of

    - a glide whose pitch rises linearly from 30 Hz to 90 Hz over the whole signal;
    - a melody that changes note every 0.5 s, cycling through 110, 165, 132 and 220 Hz
      (the phase is continuous, so note changes do not click);
    - both under a slow swell of the loudness (0.5 Hz), and
    - Gaussian noise of standard deviation 0.02 drawn from ``torch.Generator().manual_seed(seed)``.

    Only the noise depends on ``seed``; the same arguments always give the same samples.

    Args:
        num_samples: length of the signal, a positive integer.
        sample_rate: samples per second; above 440 so that the 220 Hz note is not aliased.
        seed: seed of the noise.

    Returns:
        Tensor of shape ``(num_samples,)``, float32, with values roughly in ``[-1, 1]``.
    """
    num_samples = positive_int("num_samples", num_samples)
    sample_rate = positive_int("sample_rate", sample_rate)
    seed = integer("seed", seed)
    nyquist_needs = 2 * max(MELODY_HZ)
    if sample_rate <= nyquist_needs:
        raise ValueError(
            f"sample_rate must be above {nyquist_needs:g} Hz to hold the {max(MELODY_HZ):g} Hz "
            f"note without aliasing, got {sample_rate}"
        )
    t = torch.arange(num_samples, dtype=torch.float64) / sample_rate  # seconds
    duration = num_samples / sample_rate
    start, stop = GLIDE_HZ
    # The phase is the integral of the frequency: f(t) = start + (stop - start) t / duration.
    glide = torch.sin(2 * math.pi * (start * t + (stop - start) * t**2 / (2 * duration)))
    notes = torch.tensor(MELODY_HZ, dtype=torch.float64)
    note = (t / NOTE_SECONDS).long() % len(MELODY_HZ)
    melody = torch.sin(2 * math.pi * torch.cumsum(notes[note], dim=0) / sample_rate)
    swell = 0.75 + 0.25 * torch.sin(2 * math.pi * 0.5 * t)
    generator = torch.Generator().manual_seed(seed)
    noise = torch.randn(num_samples, generator=generator, dtype=torch.float64)
    return (swell * (0.6 * glide + 0.3 * melody) + NOISE_LEVEL * noise).float()


# --- frames ---------------------------------------------------------------------------------


def frame_signal(signal: Tensor, frame_length: int, hop: int) -> Tensor:
    """Cut a 1-D signal into frames of ``frame_length`` samples, one every ``hop`` samples.

    Frame ``f`` is ``signal[f * hop : f * hop + frame_length]``. Frames overlap when
    ``hop < frame_length``. Trailing samples that do not fill a whole frame are left out: all
    samples are covered exactly when ``hop`` divides ``len(signal) - frame_length``.

    Args:
        signal: tensor of shape ``(num_samples,)``.
        frame_length: samples per frame, at most ``num_samples``.
        hop: samples between the starts of consecutive frames, at least 1.

    Returns:
        A new tensor of shape ``(num_frames, frame_length)`` with
        ``num_frames = 1 + (num_samples - frame_length) // hop``.

    Raises:
        ValueError: for a signal that is not 1-D, ``hop < 1``, ``frame_length < 1`` or a frame
            longer than the signal.
    """
    signal = _tensor("signal", signal, 1)
    frame_length = positive_int("frame_length", frame_length)
    hop = positive_int("hop", hop)
    if frame_length > signal.numel():
        raise ValueError(
            f"frame_length={frame_length} is longer than the signal ({signal.numel()} samples)"
        )
    return signal.unfold(0, frame_length, hop).clone()


def synthesis_window(frame_length: int, *, dtype: torch.dtype = torch.float32) -> Tensor:
    """The taper :func:`overlap_add` weighs frames with: a Hann window with no zero ends.

    ``w[n] = sin(pi * (n + 1) / (frame_length + 1)) ** 2`` for ``n = 0 .. frame_length - 1``,
    the Hann window of length ``frame_length + 2`` without its two zero end points. It is
    strictly positive, so every sample a frame covers gets a non-zero weight.

    Returns:
        Tensor of shape ``(frame_length,)``.
    """
    frame_length = positive_int("frame_length", frame_length)
    n = torch.arange(1, frame_length + 1, dtype=torch.float64)
    return (torch.sin(math.pi * n / (frame_length + 1)) ** 2).to(dtype)


def overlap_add(frames: Tensor, hop: int, length: int | None = None) -> Tensor:
    """Put frames back together into a signal: the inverse of :func:`frame_signal`.

    Each output sample is the weighted average of the frame samples that cover it::

        y[t] = sum_f w[t - f*hop] * frames[f, t - f*hop]  /  sum_f w[t - f*hop]

    with ``w`` the :func:`synthesis_window` (a Hann taper) and both sums over the frames
    that cover ``t``. Dividing by the summed window makes the weights of every sample add up
    to 1, for any ``hop`` and frame length. Hence for ``frames = frame_signal(x, L, hop)``
    the result equals ``x`` (up to rounding) wherever a frame covers it, which is everywhere
    when ``hop`` divides ``len(x) - L``. The taper matters for frames that were changed
    (for example decoded from a codebook): where frames disagree, each one counts most at its
    centre and fades out at its edges, which avoids steps at frame boundaries.

    Args:
        frames: floating-point tensor of shape ``(num_frames, frame_length)``.
        hop: the hop the frames were cut with, at least 1.
        length: length of the result; at least the covered length
            ``(num_frames - 1) * hop + frame_length`` (the default). Samples that no frame
            covers (past the last frame, or in gaps when ``hop > frame_length``) are 0.

    Returns:
        Tensor of shape ``(length,)``, the dtype of ``frames``.
    """
    frames = _floating("frames", _tensor("frames", frames, 2))
    hop = positive_int("hop", hop)
    num_frames, frame_length = frames.shape
    covered = (num_frames - 1) * hop + frame_length
    if length is None:
        length = covered
    length = positive_int("length", length)
    if length < covered:
        raise ValueError(
            f"length must be at least {covered}, the samples that {num_frames} frames of "
            f"{frame_length} with hop {hop} cover, got {length}"
        )
    window = synthesis_window(frame_length, dtype=frames.dtype).to(frames.device)
    starts = torch.arange(num_frames, device=frames.device) * hop
    index = (starts[:, None] + torch.arange(frame_length, device=frames.device)).reshape(-1)
    total = frames.new_zeros(length).index_add_(0, index, (frames * window).reshape(-1))
    weight = frames.new_zeros(length).index_add_(0, index, window.repeat(num_frames))
    return torch.where(weight > 0, total / weight.clamp_min(torch.finfo(frames.dtype).tiny), 0.0)


# --- k-means --------------------------------------------------------------------------------


def _squared_distances(points: Tensor, centroids: Tensor) -> Tensor:
    """``(n, k)`` squared Euclidean distances, computed exactly (no matrix-product shortcut)."""
    return torch.cdist(points, centroids, compute_mode="donot_use_mm_for_euclid_dist") ** 2


def _nearest(points: Tensor, centroids: Tensor) -> Tensor:
    """Index of the nearest centroid of each point (the lowest index on ties), shape ``(n,)``."""
    return _squared_distances(points, centroids).argmin(dim=1)


def _kmeans_plus_plus(points: Tensor, k: int, generator: torch.Generator) -> Tensor:
    """k-means++ seeding: the first centroid uniformly, each next one with probability
    proportional to its squared distance to the nearest centroid chosen so far."""
    n = points.size(0)
    chosen = [int(torch.randint(n, (1,), generator=generator))]
    closest = _squared_distances(points, points[chosen]).squeeze(1)  # (n,)
    for _ in range(1, k):
        if closest.sum() > 0:
            weights = closest.double()
        else:  # every point already coincides with a centroid: any point will do
            weights = torch.ones(n, dtype=torch.float64, device=points.device)
        index = int(multinomial(weights, 1, generator))  # drawn on the generator's device
        chosen.append(index)
        closest = torch.minimum(
            closest, _squared_distances(points, points[index : index + 1])[:, 0]
        )
    return points[chosen].clone()


def _update_centroids(points: Tensor, assignments: Tensor, centroids: Tensor) -> Tensor:
    """Move every centroid to the mean of its points; re-seed those that have none.

    A centroid without points is moved onto the point that is farthest from its own
    centroid (the worst-served point), a different point for each empty cluster.
    """
    k = centroids.size(0)
    counts = torch.bincount(assignments, minlength=k)  # (k,)
    sums = torch.zeros_like(centroids).index_add_(0, assignments, points)
    updated = sums / counts.clamp_min(1)[:, None].to(points.dtype)
    empty = (counts == 0).nonzero().flatten()
    if empty.numel():
        error = ((points - centroids[assignments]) ** 2).sum(dim=1)  # (n,)
        worst = error.argsort(descending=True, stable=True)[: empty.numel()]
        updated[empty] = points[worst]
    return updated


def kmeans(
    points: Tensor,
    k: int,
    iterations: int = 50,
    seed: int = 0,
    *,
    init: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Group points into ``k`` clusters with Lloyd's k-means algorithm, in torch.

    1. Seed the centroids with k-means++ from ``torch.Generator().manual_seed(seed)`` (or take
       ``init``).
    2. Assign every point to its nearest centroid.
    3. Move every centroid to the mean of its points; a centroid left without points is
       re-seeded on the point farthest from its centroid.
    4. Repeat 2-3 until no assignment changes, or ``iterations`` updates have been made.

    The same arguments always give the same result.

    Args:
        points: floating-point tensor of shape ``(n, d)``.
        k: number of clusters, ``1 <= k <= n``.
        iterations: the most centroid updates to make, a positive integer.
        seed: seed of the k-means++ initialisation.
        init: optional starting centroids of shape ``(k, d)``, instead of k-means++.

    Returns:
        ``(centroids, assignments)``: centroids of shape ``(k, d)`` and, of shape ``(n,)``
        (int64), the index of the centroid nearest to each point (the lowest index on ties).

    Raises:
        ValueError: if ``points`` is not 2-D, ``k > n``, ``init`` has the wrong shape or
            the points are not finite.
        TypeError: if ``points`` is not a floating-point tensor.
    """
    points = _floating("points", _tensor("points", points, 2))
    k = positive_int("k", k)
    iterations = positive_int("iterations", iterations)
    seed = integer("seed", seed)
    n, d = points.shape
    if k > n:
        raise ValueError(f"k={k} clusters need at least {k} points, got {n}")
    if not torch.isfinite(points).all():
        raise ValueError("points must be finite, got NaN or infinite values")
    if init is None:
        centroids = _kmeans_plus_plus(points, k, torch.Generator().manual_seed(seed))
    else:
        if not isinstance(init, Tensor) or init.shape != (k, d):
            shape = shape_of(init)
            raise ValueError(f"init must be a tensor of shape (k, d) = ({k}, {d}), got {shape}")
        centroids = init.to(points).clone()
    assignments = _nearest(points, centroids)
    for _ in range(iterations):
        centroids = _update_centroids(points, assignments, centroids)
        updated = _nearest(points, centroids)
        if torch.equal(updated, assignments):
            break
        assignments = updated
    return centroids, assignments


# --- the codebook ---------------------------------------------------------------------------


@dataclass(eq=False)
class Codebook:
    """A vocabulary of frames: token id ``i`` stands for the frame ``centroids[i]``.

    Build one from data with :meth:`Codebook.fit`.

    Attributes:
        centroids: tensor of shape ``(vocab_size, frame_length)``, one entry per token id.
    """

    centroids: Tensor

    def __post_init__(self) -> None:
        _floating("centroids", _tensor("centroids", self.centroids, 2))

    @classmethod
    def fit(cls, frames: Tensor, k: int, seed: int = 0, iterations: int = 50) -> Codebook:
        """Learn a codebook of ``k`` entries from frames of shape ``(num_frames, frame_length)``
        with :func:`kmeans`."""
        centroids, _ = kmeans(frames, k, iterations=iterations, seed=seed)
        return cls(centroids)

    @property
    def vocab_size(self) -> int:
        """Number of token ids, ``k``."""
        return self.centroids.size(0)

    @property
    def frame_length(self) -> int:
        """Samples per frame."""
        return self.centroids.size(1)

    def encode(self, frames: Tensor) -> Tensor:
        """Token id of the nearest entry for every frame.

        Args:
            frames: floating-point tensor of shape ``(..., frame_length)``.

        Returns:
            int64 tensor of shape ``(...)`` with values in ``0 .. vocab_size - 1``.
        """
        flat = self._flat_frames(frames)  # (n, frame_length)
        squared = _squared_distances(flat, self.centroids)  # (n, vocab_size)
        return squared.argmin(dim=1).reshape(frames.shape[:-1])  # the nearest

    def _flat_frames(self, frames: Tensor) -> Tensor:
        """Check ``frames`` ``(..., frame_length)`` and flatten it to ``(n, frame_length)``."""
        if not isinstance(frames, Tensor):
            raise TypeError(f"frames must be a torch.Tensor, got {type(frames).__name__}")
        _floating("frames", frames)
        if frames.dim() < 1 or frames.size(-1) != self.frame_length:
            raise ValueError(
                f"frames must have frame_length={self.frame_length} samples in the last "
                f"dimension, got shape {tuple(frames.shape)}"
            )
        return frames.reshape(-1, self.frame_length).to(self.centroids)

    def decode(self, ids: Tensor) -> Tensor:
        """The entry each token id stands for.

        Args:
            ids: integer tensor of shape ``(...)`` with values in ``0 .. vocab_size - 1``.

        Returns:
            Tensor of shape ``(..., frame_length)``.
        """
        if not isinstance(ids, Tensor):
            raise TypeError(f"ids must be a torch.Tensor, got {type(ids).__name__}")
        if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
            raise TypeError(f"ids must be an integer tensor, got {ids.dtype}")
        if ids.numel() and (ids.min() < 0 or ids.max() >= self.vocab_size):
            raise ValueError(
                f"token ids must be in 0..{self.vocab_size - 1}, got values from "
                f"{int(ids.min())} to {int(ids.max())}"
            )
        return self.centroids[ids.long()]


def reconstruction_snr(original: Tensor, reconstructed: Tensor) -> float:
    """Signal-to-noise ratio of a reconstruction, in decibels.

    ``10 * log10(sum(original**2) / sum((original - reconstructed)**2))``, in float64: every
    +10 dB divides the energy of the error by 10; ``inf`` for a perfect reconstruction.

    Raises:
        ValueError: if the shapes differ or ``original`` is all zeros.
    """
    for name, value in (("original", original), ("reconstructed", reconstructed)):
        if not isinstance(value, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if original.shape != reconstructed.shape:
        raise ValueError(
            f"original and reconstructed must have the same shape, got {tuple(original.shape)} "
            f"and {tuple(reconstructed.shape)}"
        )
    signal = original.double()
    power = float((signal**2).sum())
    if power == 0.0:
        raise ValueError("original is all zeros: its signal-to-noise ratio is undefined")
    error = float(((signal - reconstructed.double()) ** 2).sum())
    return math.inf if error == 0.0 else 10.0 * math.log10(power / error)
