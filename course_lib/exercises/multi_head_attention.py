"""Exercises of the chapter "Multi-head attention" (``chapters/multi-head-attention.ipynb``)."""

from __future__ import annotations

import torch

from course_lib.answers import Case
from course_lib.attention import MultiHeadAttention, merge_heads, split_heads
from course_lib.exercises._registry import CodeExercise, Mistake, ValueExercise, register

CHAPTER = "multi-head-attention"


def _counting(*shape: int) -> torch.Tensor:
    """0, 1, 2, ... in the given shape: easy to follow when printed."""
    total = 1
    for size in shape:
        total *= size
    return torch.arange(total, dtype=torch.float32).reshape(shape)


def _split_cases(seed: int) -> list[Case]:
    cases = [
        Case("x = 0, 1, 2, ... of shape (1, 2, 4), 2 heads", (_counting(1, 2, 4), 2)),
        Case("(2, 3, 12), 3 heads of 4 features", (_counting(2, 3, 12), 3)),
        Case("(2, 5, 8), 1 head (nothing to split)", (_counting(2, 5, 8), 1)),
        Case("(1, 4, 8), 8 heads of 1 feature", (_counting(1, 4, 8), 8)),
    ]
    draw = torch.Generator().manual_seed(seed)
    for _ in range(3):
        batch, length, heads, d_head = (
            int(torch.randint(low, high, (), generator=draw))
            for low, high in ((1, 4), (1, 10), (1, 9), (1, 9))
        )
        x = torch.randn(batch, length, heads * d_head, generator=draw)
        label = f"random: ({batch}, {length}, {heads * d_head}), {heads} heads"
        cases.append(Case(label, (x, heads)))
    return cases


def _reference_split(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    return split_heads(x, num_heads)


SPLIT_HEADS = register(
    CodeExercise(
        id="split-heads",
        chapter=CHAPTER,
        title="Split the features into heads",
        points=3,
        function="split_heads",
        parameters=("x", "num_heads"),
        reference=_reference_split,
        cases=_split_cases,
        seed=2202,
        atol=0.0,
        blocked=(split_heads, MultiHeadAttention.split_heads),
        hints=(
            "Head $m$ (counting from 0) owns the consecutive features $m \\, d_{head}, \\dots,$ "
            "$(m + 1) \\, d_{head} - 1$ of every position, with `d_head = d_model // num_heads`.",
            "`x.view(batch, L, num_heads, d_head)` cuts the last axis into `num_heads` slices of "
            "`d_head` features, in that order. Cutting it as `(d_head, num_heads)` would give "
            "head m every num_heads-th feature instead.",
            "The result must be `(batch, num_heads, L, d_head)`: swap the L and head axes with "
            "`.transpose(1, 2)`. Reshaping straight to `(batch, num_heads, L, d_head)` mixes "
            "positions into the heads.",
        ),
    )
)


def _merge_cases(seed: int) -> list[Case]:
    shapes = {
        (1, 2, 2, 3): "x = 0, 1, 2, ... of shape (1, 2, 2, 3): 2 heads, 2 positions",
        (2, 3, 4, 4): "(2, 3, 4, 4): 3 heads of 4 features",
        (2, 1, 5, 8): "(2, 1, 5, 8): 1 head",
        (1, 8, 4, 1): "(1, 8, 4, 1): 8 heads of 1 feature",
    }
    cases = [Case(label, (_counting(*shape),)) for shape, label in shapes.items()]
    draw = torch.Generator().manual_seed(seed)
    for _ in range(3):
        shape = tuple(
            int(torch.randint(low, high, (), generator=draw))
            for low, high in ((1, 4), (1, 9), (1, 10), (1, 9))
        )
        x = torch.randn(*shape, generator=draw)
        cases.append(Case(f"random: {shape}", (x,)))
    return cases


def _reference_merge(x: torch.Tensor) -> torch.Tensor:
    return merge_heads(x)


MERGE_HEADS = register(
    CodeExercise(
        id="merge-heads",
        chapter=CHAPTER,
        title="Concatenate the heads again",
        points=2,
        function="merge_heads",
        parameters=("x",),
        reference=_reference_merge,
        cases=_merge_cases,
        seed=2203,
        atol=0.0,
        blocked=(merge_heads, MultiHeadAttention.merge_heads),
        hints=(
            "The result holds, for every position, head 0's $d_{head}$ features, then head 1's, "
            "and so on: $\\mathrm{Concat}(\\mathrm{head}_1, \\dots, \\mathrm{head}_h)$ of the "
            "formula.",
            "First bring the positions in front of the heads: `x.transpose(1, 2)` is "
            "`(batch, L, num_heads, d_head)`. Then `.reshape(batch, L, num_heads * d_head)` puts "
            "the heads side by side.",
            "A reshape without the transpose keeps the numbers in memory order, head by head, "
            "and so puts head 0's positions where position 0's heads belong.",
        ),
    )
)


def _count(d_model: int, copies: int = 4, bias: bool = True) -> float:
    return float(copies * (d_model * d_model + (d_model if bias else 0)))


PARAMETER_COUNT = register(
    ValueExercise(
        id="mha-parameter-count",
        chapter=CHAPTER,
        title="Count the parameters of multi-head attention",
        points=2,
        question=(
            "How many trainable numbers (weights and biases of $W^Q$, $W^K$, $W^V$ and $W^O$) does "
            "`MultiHeadAttention(d_model=512, num_heads=8)` hold? Write the number without "
            "separators, like 123456."
        ),
        expected=lambda: torch.tensor([_count(512)], dtype=torch.float64),
        atol=0.5,
        entry_names=("number of parameters",),
        mistakes=(
            Mistake(
                lambda: torch.tensor([_count(512, bias=False)], dtype=torch.float64),
                "that counts the weights only: each of the four linear layers also has a bias "
                "of $d_{model}$ numbers",
            ),
            Mistake(
                lambda: torch.tensor([_count(512, copies=3)], dtype=torch.float64),
                "$W^O$ is missing: after the concatenation, the output projection is a fourth "
                "$d_{model} \\times d_{model}$ layer",
            ),
            Mistake(
                lambda: torch.tensor([8 * _count(512)], dtype=torch.float64),
                "the heads do not have full-size matrices each: head $m$ uses a "
                "$d_{model} \\times d_{model}/h$ slice, and the $h$ slices together make one "
                "$d_{model} \\times d_{model}$ matrix",
            ),
        ),
        hints=(
            "Each head projects to $d_{head} = 512 / 8 = 64$ features: $W_m^Q$ is $512 \\times "
            "64$. How big are the eight $W_m^Q$ together?",
            "$W^Q$, $W^K$, $W^V$ and $W^O$ are each $d_{model} \\times d_{model}$, plus a bias of "
            "$d_{model}$ each.",
        ),
    )
)
