"""Generating sequences with a trained model: greedy decoding, beam search and sampling.

Every function here generates from a *next-token scorer*: a callable that takes the ids so
far, ``(batch, t)``, and returns the scores (logits) of the token that comes next,
``(batch, vocab_size)``. That is all a decoding method needs to know about a model:

- :class:`TranslationScorer` wraps an encoder-decoder :class:`~course_lib.transformer.Transformer`
  and one batch of source sentences: it encodes them once, then decodes the target prefix at
  every call, either recomputing the whole prefix or, with a key/value cache
  (:mod:`course_lib.cache`), feeding only the new token;
- for a decoder-only model, ``lambda ids: model(ids)[:, -1]`` is a scorer.

Generation is autoregressive: one call of the scorer per new token, each token appended to
the input of the next call. A sequence that has produced ``eos_id`` is finished; from then
on it receives ``pad_id``, and generation stops when every sequence is finished or after
``max_new_tokens`` tokens.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from course_lib._checks import floating, integer, positive_int, shape_of
from course_lib._devices import multinomial, values_checkable
from course_lib.transformer import Transformer

__all__ = [
    "BeamSearchResult",
    "NextTokenScorer",
    "TranslationScorer",
    "beam_search",
    "greedy_decode",
    "sample",
    "step_times",
]

NextTokenScorer = Callable[[Tensor], Tensor]
"""``(batch, t)`` ids -> ``(batch, vocab_size)`` scores of the next token."""


# --------------------------------------------------------------------------- checks


def _check_prompt(prompt: object) -> Tensor:
    if not isinstance(prompt, Tensor) or prompt.dim() != 2 or prompt.size(1) == 0:
        shape = shape_of(prompt)
        raise ValueError(
            "prompt must be a (batch, t) tensor of token ids with t >= 1 (for translation "
            f"a column of <bos> ids), got {shape}"
        )
    if prompt.is_floating_point() or prompt.dtype == torch.bool:
        raise TypeError(f"prompt must hold integer token ids, got {prompt.dtype}")
    return prompt.long()


def _next_scores(
    model: NextTokenScorer, ids: Tensor, eos_id: int | None = None, pad_id: int | None = None
) -> Tensor:
    """The scorer's output for ``ids`` (no gradients: nothing is trained here), checked to be
    ``(batch, vocab_size)`` with ``eos_id`` and ``pad_id`` in the vocabulary, and a token to
    choose in every row."""
    with torch.no_grad():
        scores = model(ids)
    if not isinstance(scores, Tensor) or scores.dim() != 2 or scores.size(0) != ids.size(0):
        shape = shape_of(scores)
        raise ValueError(
            f"the scorer must return next-token scores of shape (batch={ids.size(0)}, "
            f"vocab_size), got {shape}; for a model that returns (batch, t, vocab_size) "
            "use lambda ids: model(ids)[:, -1]"
        )
    floating("the scorer's scores", scores)
    vocab_size = scores.size(-1)
    for name, token in (("eos_id", eos_id), ("pad_id", pad_id)):
        if token is not None and not 0 <= token < vocab_size:
            raise ValueError(
                f"{name} must be a token id in [0, vocab_size={vocab_size}) of the scorer's "
                f"vocabulary, got {token}"
            )
    _check_some_token_possible(scores)
    return scores


def _check_some_token_possible(scores: Tensor) -> None:
    """Raise if a row of ``scores`` has a NaN or gives every token -inf: nothing to choose."""
    if not values_checkable(scores):
        return
    bad = scores.isnan().any(dim=-1) | (scores == -math.inf).all(dim=-1)
    if bad.any():
        rows = bad.nonzero()[:, 0].tolist()
        raise ValueError(
            f"the scorer's scores leave no token to choose in sequence(s) {rows[:5]} of the "
            "batch: every score is -inf, or one is NaN; check the model and its masks"
        )


def _settings(eos_id: int | None, max_new_tokens: int, pad_id: int) -> tuple:
    eos_id = None if eos_id is None else integer("eos_id", eos_id)
    return eos_id, positive_int("max_new_tokens", max_new_tokens), integer("pad_id", pad_id)


def _append(ids: Tensor, token: Tensor, finished: Tensor, eos_id, pad_id) -> tuple:
    """Append ``token`` (``pad_id`` for finished sequences); mark those that end now."""
    token = token.masked_fill(finished, pad_id)
    ids = torch.cat([ids, token[:, None]], dim=1)
    if eos_id is not None:
        finished = finished | (token == eos_id)
    return ids, finished


# --------------------------------------------------------------------------- greedy


def greedy_decode(
    model: NextTokenScorer,
    prompt: Tensor,
    eos_id: int | None,
    max_new_tokens: int,
    pad_id: int = 0,
) -> Tensor:
    """Generate by taking the highest-scoring token at every step.

    Args:
        model: a next-token scorer, ``(batch, t)`` ids -> ``(batch, vocab_size)`` scores.
        prompt: ``(batch, t0)`` ids to continue, e.g. a column of ``<bos>`` ids.
        eos_id: the end-of-sequence id; ``None`` to always generate ``max_new_tokens``.
        max_new_tokens: the most tokens to append.
        pad_id: what a finished sequence receives.

    Returns:
        ``(batch, t0 + n)``: the prompt followed by the ``n <= max_new_tokens`` generated
        tokens, ``n`` being the step at which the last sequence finished.
    """
    ids = _check_prompt(prompt)
    eos_id, max_new_tokens, pad_id = _settings(eos_id, max_new_tokens, pad_id)
    finished = torch.zeros(ids.size(0), dtype=torch.bool, device=ids.device)
    for _ in range(max_new_tokens):
        scores = _next_scores(model, ids, eos_id, pad_id)  # (batch, vocab_size)
        next_token = scores.argmax(dim=-1)  # the best token of each sequence
        ids, finished = _append(ids, next_token, finished, eos_id, pad_id)
        if finished.all():
            break
    return ids


# --------------------------------------------------------------------------- beam search


class BeamSearchResult(NamedTuple):
    """The hypotheses beam search kept, best first."""

    sequences: Tensor  # (batch, beam_width, t0 + n) ids, prompt included
    scores: Tensor  # (batch, beam_width): each sequence's total log-probability


def _log_probabilities(
    model: NextTokenScorer, ids: Tensor, width: int, eos_id: int | None, pad_id: int
) -> Tensor:
    """``log_softmax`` of the scorer's output; the beam may not be wider than the vocabulary."""
    log_p = F.log_softmax(_next_scores(model, ids, eos_id, pad_id).float(), dim=-1)
    if width > log_p.size(-1):
        raise ValueError(f"beam_width={width} is larger than the vocabulary ({log_p.size(-1)})")
    return log_p


def _reorder(model: NextTokenScorer, index: Tensor) -> None:
    """Tell a scorer that keeps state per sequence (a cache) which rows survive."""
    reorder = getattr(model, "reorder", None)
    if reorder is not None:
        reorder(index)


def beam_search(
    model: NextTokenScorer,
    prompt: Tensor,
    eos_id: int | None,
    max_new_tokens: int,
    beam_width: int = 4,
    pad_id: int = 0,
) -> BeamSearchResult:
    """Keep the ``beam_width`` most probable sequences at every step, not only the best one.

    At each step every kept sequence (hypothesis) is extended by every token; of the
    ``beam_width * vocab_size`` candidates, the ``beam_width`` with the highest total
    log-probability ``sum_t log p(y_t | y_<t, x)`` survive. A finished hypothesis (it ended
    with ``eos_id``) stays a candidate with its score unchanged, extended by ``pad_id``.
    Greedy decoding is beam search with ``beam_width=1``.

    ``model`` may have a method ``reorder(index)``: it is called with the batch rows that
    survive a step (a :class:`TranslationScorer` reorders its cache). Each sequence of the
    prompt is repeated ``beam_width`` times first, through ``reorder`` as well.

    Args:
        model: a next-token scorer (see :func:`greedy_decode`).
        prompt: ``(batch, t0)`` ids to continue.
        eos_id: the end-of-sequence id, or ``None``.
        max_new_tokens: the most tokens to append.
        beam_width: the number of hypotheses kept per sequence.
        pad_id: what finished hypotheses receive.

    Returns:
        :class:`BeamSearchResult`: ``sequences`` ``(batch, beam_width, t0 + n)`` and their
        ``scores`` ``(batch, beam_width)``, sorted best first. Total log-probabilities favour
        short sequences; for this course's short outputs that is no problem.
    """
    ids = _check_prompt(prompt)
    eos_id, max_new_tokens, pad_id = _settings(eos_id, max_new_tokens, pad_id)
    width = positive_int("beam_width", beam_width)
    batch, device = ids.size(0), ids.device
    rows = torch.arange(batch, device=device).repeat_interleave(width)
    _reorder(model, rows)
    ids = ids[rows]  # (batch * width, t0): every sequence width times
    # Only the first copy is alive at the start, so that the copies do not
    # all pick the same tokens: the others start at log-probability -inf.
    scores = torch.full((batch, width), -math.inf, device=device)
    scores[:, 0] = 0.0
    finished = torch.zeros(batch * width, dtype=torch.bool, device=device)
    first_row = torch.arange(batch, device=device)[:, None] * width
    for _ in range(max_new_tokens):
        # (batch * width, V)
        log_p = _log_probabilities(model, ids, width, eos_id, pad_id)
        vocab_size = log_p.size(-1)
        log_p[finished] = -math.inf  # a finished hypothesis gets pad only,
        log_p[finished, pad_id] = 0.0  # and its score stays the same
        candidates = scores.reshape(-1, 1) + log_p  # (batch * width, V)
        candidates = candidates.reshape(batch, width * vocab_size)
        scores, best = candidates.topk(width, dim=-1)  # best first
        parent = best // vocab_size  # the hypothesis each survivor extends
        token = (best % vocab_size).reshape(-1)
        survivors = (first_row + parent).reshape(-1)
        _reorder(model, survivors)
        ids, finished = ids[survivors], finished[survivors]
        ids, finished = _append(ids, token, finished, eos_id, pad_id)
        if finished.all():
            break
    return BeamSearchResult(ids.reshape(batch, width, -1), scores)


# --------------------------------------------------------------------------- sampling


def _check_temperature(temperature: object) -> float:
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise TypeError(f"temperature must be a number, got {temperature!r}")
    if not (temperature > 0 and math.isfinite(temperature)):
        raise ValueError(
            f"temperature must be a positive number, got {temperature!r} (for the most "
            "likely token at every step use greedy_decode)"
        )
    return float(temperature)


def sample(
    model: NextTokenScorer,
    prompt: Tensor,
    eos_id: int | None,
    max_new_tokens: int,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
    pad_id: int = 0,
) -> Tensor:
    """Generate by drawing every token from ``softmax(scores / temperature)``.

    A temperature below 1 sharpens the distribution towards the most likely tokens (near 0
    it becomes greedy decoding); above 1 it flattens it, and unlikely tokens are drawn more
    often.

    Args:
        model: a next-token scorer (see :func:`greedy_decode`).
        prompt: ``(batch, t0)`` ids to continue.
        eos_id: the end-of-sequence id, or ``None``.
        max_new_tokens: the most tokens to append.
        temperature: a positive number; the scores are divided by it.
        generator: the random generator of the draws (seed it for reproducible samples), on
            any device: the draws are made on its device, so one seed draws the same numbers
            wherever the model is.
        pad_id: what finished sequences receive.

    Returns:
        ``(batch, t0 + n)``, as :func:`greedy_decode`.
    """
    ids = _check_prompt(prompt)
    eos_id, max_new_tokens, pad_id = _settings(eos_id, max_new_tokens, pad_id)
    temperature = _check_temperature(temperature)
    finished = torch.zeros(ids.size(0), dtype=torch.bool, device=ids.device)
    for _ in range(max_new_tokens):
        scores = _next_scores(model, ids, eos_id, pad_id).float()
        probabilities = torch.softmax(scores / temperature, dim=-1)
        drawn = multinomial(probabilities, 1, generator)  # on the generator's device
        next_token = drawn[:, 0]
        ids, finished = _append(ids, next_token, finished, eos_id, pad_id)
        if finished.all():
            break
    return ids


# --------------------------------------------------------------------------- translation


class TranslationScorer:
    """The next-token scorer of an encoder-decoder Transformer for one batch of sources.

    The sources are encoded once, when the scorer is made. Each call decodes the target
    prefix ``ids`` and returns the scores of the token after its last position:

    - without a cache, the whole prefix goes through the decoder at every step, so step
      ``t`` computes ``t`` positions, all but one of them again;
    - with a cache (``use_cache=True``), only the positions not fed before go through the
      decoder; the keys and values of the earlier ones come from the cache.

    Both give the same scores (up to rounding), hence the same tokens.

    Args:
        model: the trained :class:`~course_lib.transformer.Transformer` (put it in ``eval()``
            mode first, or dropout changes every call).
        src_ids: ``(batch, L_s)`` source ids, padded with the model's ``pad_id``.
        use_cache: keep a key/value cache between calls.

    Attributes:
        positions_computed: the number of target positions (per sequence) that have gone
            through the decoder so far, to count the work.
    """

    def __init__(self, model: Transformer, src_ids: Tensor, use_cache: bool = True) -> None:
        if not isinstance(model, Transformer):
            raise TypeError(f"model must be a course_lib Transformer, got {type(model).__name__}")
        self.model = model
        with torch.no_grad():
            self.src_mask = model.source_mask(src_ids)
            self.memory = model.encode(src_ids, self.src_mask)  # (batch, L_s, d_model)
        self.cache = model.new_cache() if use_cache else None
        self.positions_computed = 0

    def __call__(self, ids: Tensor) -> Tensor:
        """``(batch, t)`` target ids so far -> ``(batch, tgt_vocab_size)`` next-token scores
        (computed without gradients)."""
        with torch.no_grad():
            return self._scores(ids)

    def _scores(self, ids: Tensor) -> Tensor:
        if self.cache is None:  # recompute every position of the prefix
            logits = self.model.decode(ids, self.memory, self.src_mask)
            self.positions_computed += ids.size(1)
            return logits[:, -1]
        done = self.cache.length  # positions whose keys and values are cached
        known = self.cache.ids
        if ids.size(1) <= done or (known is not None and not torch.equal(ids[:, :done], known)):
            raise ValueError(
                f"a cached scorer continues the ids it was given before: expected "
                f"{done} known ids followed by new ones, got ids of shape {tuple(ids.shape)} "
                "that do not start with them (make a new TranslationScorer for new sequences)"
            )
        new = ids[:, done:]  # usually the one token appended since the last call
        logits = self.model.decode(new, self.memory, self.src_mask, cache=self.cache)
        self.positions_computed += new.size(1)
        return logits[:, -1]

    def reorder(self, index: Tensor) -> None:
        """Keep the sequences ``index`` (beam search calls this): memory, mask and cache."""
        self.memory = self.memory.index_select(0, index)
        if self.src_mask is not None:
            self.src_mask = self.src_mask.index_select(0, index)
        if self.cache is not None:
            self.cache.reorder(index)


def step_times(model: NextTokenScorer, prompt: Tensor, num_tokens: int) -> list[float]:
    """Generate ``num_tokens`` tokens greedily (no early stop) and time every step.

    Returns:
        ``num_tokens`` wall-clock times in seconds: step ``t`` is the call of the scorer on
        the ``t`` ids so far plus the choice of the next token. Run it on one CPU thread
        (:func:`course_lib.training.threads`) for steadier numbers.
    """
    ids = _check_prompt(prompt)
    times = []
    for _ in range(positive_int("num_tokens", num_tokens)):
        started = time.perf_counter()
        next_token = _next_scores(model, ids).argmax(dim=-1)
        times.append(time.perf_counter() - started)
        ids = torch.cat([ids, next_token[:, None]], dim=1)
    return times
