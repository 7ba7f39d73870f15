"""Exercises of the chapter "Decoding and the cost of inference"
(``chapters/decoding-and-inference-cost.ipynb``).

The greedy-decoding exercise needs a model as an argument. A grader passes arguments into its
sandbox as tensors and JSON values only, so the model of this exercise is a
:class:`~course_lib.answers.runner.TableScorer`: a next-token scorer made of two tables,
which the grader sends as tensors and rebuilds on the other side. Students call it like any
scorer (``model(ids)`` -> ``(batch, vocab_size)``), and their function works unchanged with
the chapter's trained translator.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from course_lib.answers import ATTENTION, Case, TableScorer
from course_lib.attention import scaled_dot_product_attention
from course_lib.cache import KeyValueCache
from course_lib.decoding import beam_search, greedy_decode, sample
from course_lib.exercises._registry import (
    CodeExercise,
    Mistake,
    ValueExercise,
    register,
)

CHAPTER = "decoding-and-inference-cost"
PAD, BOS, EOS = 0, 1, 2


# --------------------------------------------------------------------------- greedy decoding


def _table_scorer(by_position: torch.Tensor, by_start: torch.Tensor) -> TableScorer:
    return TableScorer(by_position, by_start)


def _random_scorer(draw: torch.Generator, vocab_size: int, max_len: int):
    """Random scores; <pad> and <bos> are never chosen, <eos> a little more often than the
    other tokens, so that sequences end at different steps."""
    by_position = torch.randn(max_len, vocab_size, vocab_size, generator=draw)
    by_position[..., [PAD, BOS]] = -1e4
    by_position[..., EOS] += 0.5
    by_start = torch.randn(vocab_size, vocab_size, generator=draw)
    return _table_scorer(by_position, by_start)


def _chain_scorer():
    """From <bos>: 3 4 5 <eos>, whatever else; from token 6 first: 7 <eos>. Scores favour one
    token by 5, so the path is plain to follow by hand."""
    vocab_size, max_len = 8, 8
    by_position = torch.zeros(max_len, vocab_size, vocab_size)
    by_start = torch.zeros(vocab_size, vocab_size)
    for last, following in {BOS: 3, 3: 4, 4: 5, 5: EOS, 6: 7, 7: EOS, PAD: PAD}.items():
        by_position[:, last, following] = 5.0
    by_start[6, 5] = -10.0  # sequences that start with 6 never go through 5
    return _table_scorer(by_position, by_start)


def _greedy_cases(seed: int) -> list[Case]:
    chain = _chain_scorer()
    cases = [
        Case("one sequence: <bos> 3 4 5 <eos>", (chain, torch.tensor([[BOS]]), EOS, 6)),
        Case(
            "two sequences that end at different steps",
            (chain, torch.tensor([[BOS], [6]]), EOS, 6),
        ),
        Case("max_new_tokens = 2 stops before <eos>", (chain, torch.tensor([[BOS]]), EOS, 2)),
        Case("a prompt of two tokens", (chain, torch.tensor([[BOS, 4], [6, 7]]), EOS, 5)),
    ]
    draw = torch.Generator().manual_seed(seed)
    for _ in range(3):
        vocab_size = int(torch.randint(6, 13, (), generator=draw))
        batch = int(torch.randint(2, 6, (), generator=draw))
        start = int(torch.randint(1, 3, (), generator=draw))
        steps = int(torch.randint(3, 9, (), generator=draw))
        scorer = _random_scorer(draw, vocab_size, start + steps)
        prompt = torch.randint(3, vocab_size, (batch, start), generator=draw)
        cases.append(
            Case(
                f"random: {batch} sequences, vocabulary {vocab_size}, prompt of {start}, "
                f"max_new_tokens = {steps}",
                (scorer, prompt, EOS, steps),
            )
        )
    return cases


def _reference_greedy(model, prompt, eos_id, max_new_tokens):
    return greedy_decode(model, prompt, eos_id, max_new_tokens, pad_id=PAD)


GREEDY = register(
    CodeExercise(
        id="greedy-decoding",
        chapter=CHAPTER,
        title="Greedy decoding",
        points=4,
        function="greedy_decode",
        parameters=("model", "prompt", "eos_id", "max_new_tokens"),
        reference=_reference_greedy,
        cases=_greedy_cases,
        seed=7201,
        atol=0.0,
        dtypes=(torch.int64,),
        blocked=(greedy_decode, beam_search, sample),
        hints=(
            "Loop at most max_new_tokens times. In each step call model(ids) with all the ids "
            "so far, (batch, t), and take the argmax over the vocabulary, dim=-1.",
            "Append the chosen tokens as a new column: torch.cat([ids, token[:, None]], dim=1).",
            "Keep a bool tensor 'finished'. A finished sequence gets 0 (padding) instead of "
            "its argmax; after appending, mark the sequences whose token is eos_id.",
            "Stop as soon as every sequence is finished (finished.all()), so the result is "
            "only as long as it needs to be.",
        ),
    )
)


# --------------------------------------------------------------------------- the cache step


def _cache_case(
    label: str, draw: torch.Generator, batch: int, past: int, d_model: int, d_k: int
) -> Case:
    x = torch.randn(batch, 1, d_model, generator=draw)
    keys = torch.randn(batch, past, d_k, generator=draw)
    values = torch.randn(batch, past, d_k, generator=draw)
    weights = [torch.randn(d_model, d_k, generator=draw) / d_model**0.5 for _ in range(3)]
    return Case(label, (x, keys, values, *weights))


def _cache_cases(seed: int) -> list[Case]:
    fixed = torch.Generator().manual_seed(7)
    cases = [
        _cache_case("the first step: an empty cache (t = 0)", fixed, 1, 0, 4, 4),
        _cache_case("one sequence, 3 cached positions", fixed, 1, 3, 4, 4),
        _cache_case("two sequences, 5 cached positions, d_k != d_model", fixed, 2, 5, 6, 3),
    ]
    draw = torch.Generator().manual_seed(seed)
    for _ in range(3):
        batch = int(torch.randint(1, 5, (), generator=draw))
        past = int(torch.randint(0, 12, (), generator=draw))
        d_model = int(torch.randint(2, 17, (), generator=draw))
        d_k = int(torch.randint(2, 9, (), generator=draw))
        label = f"random: batch {batch}, {past} cached positions, d_model {d_model}, d_k {d_k}"
        cases.append(_cache_case(label, draw, batch, past, d_model, d_k))
    return cases


def _reference_cache_step(x, cached_keys, cached_values, w_q, w_k, w_v):
    cache = KeyValueCache()  # one head: (batch, 1, t, d_k)
    if cached_keys.size(1):
        cache.update(cached_keys[:, None], cached_values[:, None])
    keys, values = cache.update((x @ w_k)[:, None], (x @ w_v)[:, None])
    output, _ = scaled_dot_product_attention((x @ w_q)[:, None], keys, values)
    return output[:, 0], keys[:, 0], values[:, 0]


CACHE_STEP = register(
    CodeExercise(
        id="kv-cache-step",
        chapter=CHAPTER,
        title="One step of attention with a key/value cache",
        points=4,
        function="attend_with_cache",
        parameters=("x", "cached_keys", "cached_values", "w_q", "w_k", "w_v"),
        reference=_reference_cache_step,
        cases=_cache_cases,
        seed=7202,
        atol=1e-5,
        rtol=1e-4,
        outputs=("output", "keys", "values"),
        blocked=(
            scaled_dot_product_attention,
            KeyValueCache.update,
            F.multi_head_attention_forward,
        ),
        blocked_ops=ATTENTION,
        hints=(
            "Project the new token once: `q = x @ w_q`, `k = x @ w_k`, `v = x @ w_v`, each "
            "`(batch, 1, d_k)`.",
            "The new token's key and value go after the cached ones: `torch.cat([cached_keys, "
            "k], dim=1)` is `(batch, t + 1, d_k)`. Update the cache before attending, so that the "
            "token also attends to itself.",
            "Then ordinary attention of the one query over all $t + 1$ keys: "
            "$\\mathrm{softmax}(q K^T / \\sqrt{d_k}) \\, V$ over the cached keys $K$ and values "
            "$V$. No mask is needed: every cached position is in the past.",
        ),
    )
)


# --------------------------------------------------------------------------- counting work


DECODING_COST = register(
    ValueExercise(
        id="decoding-cost",
        chapter=CHAPTER,
        title="Positions computed without a cache",
        points=2,
        question=(
            "A decoder generates 20 tokens after <bos>, one per step, and no sequence ends "
            "early. Without a key/value cache, every step feeds all the tokens so far (<bos> "
            "and the tokens generated before) through the decoder. How many target positions "
            "go through the decoder in the 20 steps together? (With a cache the answer is 20.)"
        ),
        expected=lambda: torch.tensor([210.0], dtype=torch.float64),
        atol=0.5,
        entry_names=("positions",),
        mistakes=(
            Mistake(
                lambda: torch.tensor([400.0], dtype=torch.float64),
                "that counts 20 positions in every step; in the first step there is only "
                "<bos>, in the second <bos> and one token, and so on",
            ),
            Mistake(
                lambda: torch.tensor([231.0], dtype=torch.float64),
                "that counts one step too many: the 20th token is chosen from the output of "
                "a step that feeds 20 positions (<bos> and 19 tokens)",
            ),
            Mistake(
                lambda: torch.tensor([190.0], dtype=torch.float64),
                "that leaves out <bos>: step 1 already feeds one position, <bos> itself",
            ),
        ),
        hints=(
            "Step 1 feeds <bos> (1 position), step 2 feeds <bos> and the first token (2), ...",
            "1 + 2 + ... + n = n (n + 1) / 2.",
        ),
    )
)
