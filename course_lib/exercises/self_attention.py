"""Exercises of the chapter "Self-attention" (``chapters/self-attention.ipynb``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from course_lib.answers import ATTENTION, Case
from course_lib.attention import (
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
)
from course_lib.exercises._registry import CodeExercise, Mistake, ValueExercise, register

CHAPTER = "self-attention"


def _normal(*shape: int, generator: torch.Generator) -> torch.Tensor:
    return torch.randn(*shape, generator=generator)


def _random_mask(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """A random bool mask with at least one allowed key in every query row."""
    mask = torch.rand(*shape, generator=generator) < 0.6
    first = torch.randint(0, shape[-1], shape[:-1], generator=generator)
    mask.scatter_(-1, first.unsqueeze(-1), True)
    return mask


def _attention_cases(seed: int) -> list[Case]:
    fixed = torch.Generator().manual_seed(0)
    q, k, v = (_normal(4, 8, generator=fixed) for _ in range(3))
    cross = tuple(_normal(2, n, d, generator=fixed) for n, d in ((3, 8), (5, 8), (5, 6)))
    x = _normal(2, 5, 8, generator=fixed)
    ids = torch.tensor([[5, 6, 7, 8, 9], [5, 6, 7, 0, 0]])
    heads = tuple(_normal(2, 4, 6, 16, generator=fixed) for _ in range(3))
    wide = tuple(_normal(5, 256, generator=fixed) for _ in range(3))
    hand = (
        torch.tensor([[1.0, 0.0]]),
        torch.tensor([[1.0, 0.0], [0.0, 1.0]]),
        torch.tensor([[10.0], [20.0]]),
    )
    cases = [
        Case("one query, two keys (the chapter's hand example)", hand),
        Case("4 tokens, d_k = 8, no mask", (q, k, v)),
        Case("cross-attention: batch 2, L_q = 3, L_k = 5, d_v = 6", cross),
        Case("causal mask, batch 2, 5 tokens", (x, x, x, causal_mask(5))),
        Case("padding mask of shape (batch, 1, L_k)", (x, x, x, padding_mask(ids, 0))),
        Case("4-D: (batch, heads, L, d_k) = (2, 4, 6, 16)", heads),
        Case("d_k = 256, where the scaling matters", wide),
    ]
    draw = torch.Generator().manual_seed(seed)
    for _ in range(3):
        batch, len_q, len_k, d_k, d_v = (
            int(torch.randint(low, high, (), generator=draw))
            for low, high in ((1, 4), (1, 9), (1, 9), (1, 33), (1, 17))
        )
        query = _normal(batch, len_q, d_k, generator=draw)
        key = _normal(batch, len_k, d_k, generator=draw)
        value = _normal(batch, len_k, d_v, generator=draw)
        label = f"random: batch {batch}, L_q = {len_q}, L_k = {len_k}, d_k = {d_k}, d_v = {d_v}"
        if bool(torch.rand((), generator=draw) < 0.5):
            mask = _random_mask((batch, len_q, len_k), draw)
            cases.append(Case(label + ", with a mask", (query, key, value, mask)))
        else:
            cases.append(Case(label, (query, key, value)))
    return cases


def _reference_attention(query, key, value, mask=None):
    return scaled_dot_product_attention(query, key, value, mask)


SCALED_DOT_PRODUCT_ATTENTION = register(
    CodeExercise(
        id="scaled-dot-product-attention",
        chapter=CHAPTER,
        title="Implement scaled dot-product attention",
        points=4,
        function="attention",
        parameters=("query", "key", "value", "mask"),
        reference=_reference_attention,
        cases=_attention_cases,
        seed=1706,
        atol=1e-4,
        rtol=1e-4,
        outputs=("output", "weights"),
        blocked=(scaled_dot_product_attention, F.multi_head_attention_forward),
        blocked_ops=ATTENTION,
        hints=(
            "The scores are query @ key.transpose(-2, -1): transpose the last two axes only, "
            "so the function works for any number of leading (batch, head) axes. Divide them "
            "by $\\sqrt{d_k}$, with $d_k$ = `query.size(-1)`.",
            "Where the mask is False, the score must become -inf before the softmax: "
            "scores.masked_fill(~mask, float('-inf')). Skip this step when mask is None.",
            "The softmax normalises over the keys, the last axis: `torch.softmax(scores, "
            "dim=-1)`. Return `weights @ value` and the weights themselves, as a tuple.",
        ),
    )
)


def _by_hand_expected() -> torch.Tensor:
    query = torch.tensor([[1.0, 1.0]], dtype=torch.float64)
    keys = torch.tensor([[1.0, 0.0], [0.0, 2.0], [-1.0, 1.0]], dtype=torch.float64)
    values = torch.tensor([[10.0], [20.0], [30.0]], dtype=torch.float64)
    output, weights = scaled_dot_product_attention(query, keys, values)
    return torch.cat([weights[0], output[0]])


def _weights_and_output(*scores: float) -> torch.Tensor:
    weights = torch.softmax(torch.tensor(scores, dtype=torch.float64), dim=0)
    output = weights @ torch.tensor([10.0, 20.0, 30.0], dtype=torch.float64)
    return torch.cat([weights, output.reshape(1)])


ATTENTION_BY_HAND = register(
    ValueExercise(
        id="attention-by-hand",
        chapter=CHAPTER,
        title="Attention weights by hand",
        points=2,
        question=(
            "One query $q = (1, 1)$ attends to three keys $k_1 = (1, 0)$, $k_2 = (0, 2)$, "
            "$k_3 = (-1, 1)$ with the values $v_1 = 10$, $v_2 = 20$, $v_3 = 30$ ($d_k = 2$). Give "
            "the three "
            "attention weights and then the output, rounded to 3 decimals and separated by commas."
        ),
        expected=_by_hand_expected,
        atol=1.5e-3,
        entry_names=("weight of k1", "weight of k2", "weight of k3", "output"),
        mistakes=(
            Mistake(
                lambda: _weights_and_output(1.0, 2.0, 0.0),
                "these are the weights without the scaling: divide the dot products by "
                "$\\sqrt{d_k} = \\sqrt{2}$ before the softmax",
            ),
            Mistake(
                lambda: _weights_and_output(0.5, 1.0, 0.0),
                "the dot products were divided by $d_k = 2$; the scaling divides by its square "
                "root, $\\sqrt{2}$",
            ),
            Mistake(
                lambda: torch.tensor([1 / 3, 2 / 3, 0.0, 50 / 3], dtype=torch.float64),
                "the scores were divided by their sum instead of going through the softmax; "
                "the softmax exponentiates first, so every weight is positive",
            ),
        ),
        hints=(
            "The dot products $q \\cdot k_j$ are 1, 2 and 0. Divide each by $\\sqrt{2}$ to get the "
            "scores.",
            "The softmax of scores s1, s2, s3 is exp(si) / (exp(s1) + exp(s2) + exp(s3)). The "
            "output is the weighted sum w1 * 10 + w2 * 20 + w3 * 30.",
        ),
    )
)
