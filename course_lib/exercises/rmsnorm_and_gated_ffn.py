"""Exercises of the chapter "RMSNorm and gated feed-forward layers"
(``chapters/rmsnorm-and-gated-ffn.ipynb``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from course_lib.answers import NORMALIZATION, Case
from course_lib.exercises._registry import (
    ChoiceExercise,
    CodeExercise,
    Mistake,
    Option,
    ValueExercise,
    register,
)
from course_lib.feedforward import swiglu_hidden_size
from course_lib.normalization import rms_norm

CHAPTER = "rmsnorm-and-gated-ffn"


# --------------------------------------------------------------------------- RMSNorm


def _rms_norm_cases(seed: int) -> list[Case]:
    fixed = torch.Generator().manual_seed(0)
    tokens = torch.randn(2, 3, 8, generator=fixed) * 3 + 1
    gain = 1 + 0.5 * torch.randn(8, generator=fixed)
    cases = [
        Case("one token [3, 4], gain 1, eps 0.0 (rms = sqrt(12.5))",
             (torch.tensor([[3.0, 4.0]]), torch.ones(2), 0.0)),
        Case("(2, 3, 8): 2 sentences of 3 tokens, gain 1", (tokens, torch.ones(8), 1e-6)),
        Case("the same tokens with a learned gain", (tokens, gain, 1e-6)),
        Case("a large eps = 0.5 (where it goes matters)", (tokens, gain, 0.5)),
        Case("tokens of zeros (eps keeps them finite)",
             (torch.zeros(1, 2, 4), torch.ones(4), 1e-6)),
        Case("tokens with a large mean, [10, 11, 12, 13]",
             (torch.tensor([[10.0, 11.0, 12.0, 13.0]]), torch.ones(4), 1e-6)),
    ]  # fmt: skip
    draw = torch.Generator().manual_seed(seed)
    for _ in range(3):
        batch, length, d_model = (
            int(torch.randint(low, high, (), generator=draw))
            for low, high in ((1, 4), (1, 7), (2, 33))
        )
        x = torch.randn(batch, length, d_model, generator=draw) * 2 + 0.5
        g = 1 + 0.5 * torch.randn(d_model, generator=draw)
        eps = (1e-6, 1e-5, 0.1)[int(torch.randint(0, 3, (), generator=draw))]
        cases.append(Case(f"random: ({batch}, {length}, {d_model}), eps = {eps:g}", (x, g, eps)))
    return cases


def _reference_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return rms_norm(x, weight, eps)


_TORCH_RMS_NORM = (F.rms_norm,) if hasattr(F, "rms_norm") else ()

RMS_NORM = register(
    CodeExercise(
        id="rms-norm",
        chapter=CHAPTER,
        title="RMSNorm by hand",
        points=3,
        function="rms_norm",
        parameters=("x", "weight", "eps"),
        reference=_reference_rms_norm,
        cases=_rms_norm_cases,
        seed=2019,
        atol=1e-4,
        rtol=1e-4,
        blocked=(rms_norm, F.layer_norm, *_TORCH_RMS_NORM),
        blocked_ops=NORMALIZATION,
        hints=(
            "Every token is normalised on its own: the mean of the squares is taken over the "
            "last axis, its $d_{model}$ features (`keepdim=True` keeps the shape "
            "broadcastable).",
            "Nothing is subtracted: RMSNorm divides $x$ by "
            "$\\sqrt{\\frac{1}{d}\\sum_j x_j^2 + \\epsilon}$, with $\\epsilon$ inside the "
            "root, and multiplies by the gain.",
            "`x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight`.",
        ),
    )
)


# --------------------------------------------------------------------------- SwiGLU


def _swiglu_cases(seed: int) -> list[Case]:
    fixed = torch.Generator().manual_seed(1)

    def weights(d_model: int, d_ff: int, generator: torch.Generator) -> tuple:
        scale = d_model**-0.5
        w1 = torch.randn(d_model, d_ff, generator=generator) * scale
        w3 = torch.randn(d_model, d_ff, generator=generator) * scale
        w2 = torch.randn(d_ff, d_model, generator=generator) * d_ff**-0.5
        return w1, w3, w2

    eye = torch.eye(2)
    cases = [
        Case("one token [1, -2], W = V = W_2 = identity (d_ff = 2)",
             (torch.tensor([[1.0, -2.0]]), eye, eye, eye)),
        Case("(2, 5, 8) with d_ff = 20", (torch.randn(2, 5, 8, generator=fixed) * 2,
                                          *weights(8, 20, fixed))),
        Case("one position, d_model = 4, d_ff = 3 (narrower than d_model)",
             (torch.randn(1, 4, generator=fixed), *weights(4, 3, fixed))),
    ]  # fmt: skip
    draw = torch.Generator().manual_seed(seed)
    for _ in range(3):
        batch, length, d_model, d_ff = (
            int(torch.randint(low, high, (), generator=draw))
            for low, high in ((1, 4), (1, 7), (2, 17), (2, 41))
        )
        x = torch.randn(batch, length, d_model, generator=draw) * 2
        label = f"random: ({batch}, {length}, {d_model}), d_ff = {d_ff}"
        cases.append(Case(label, (x, *weights(d_model, d_ff, draw))))
    return cases


def _reference_swiglu(
    x: torch.Tensor, w1: torch.Tensor, w3: torch.Tensor, w2: torch.Tensor
) -> torch.Tensor:
    return (F.silu(x @ w1) * (x @ w3)) @ w2


SWIGLU = register(
    CodeExercise(
        id="swiglu",
        chapter=CHAPTER,
        title="The SwiGLU feed-forward network",
        points=3,
        function="swiglu",
        parameters=("x", "w1", "w3", "w2"),
        reference=_reference_swiglu,
        cases=_swiglu_cases,
        seed=2020,
        atol=1e-4,
        rtol=1e-4,
        hints=(
            "Rows are vectors, as in Shazeer's paper: `x @ w1` and `x @ w3` are both "
            "`(..., d_ff)`, and `@ w2` brings the result back to `(..., d_model)`.",
            "Swish with $\\beta = 1$ is $z \\, \\sigma(z)$ (`torch.sigmoid`, or `F.silu`). "
            "It goes on `x @ w1` only; `x @ w3` stays linear.",
            "`(F.silu(x @ w1) * (x @ w3)) @ w2`: the product is taken feature by feature, "
            "before the last matrix.",
        ),
    )
)


# --------------------------------------------------------------------------- the hidden size

_D_MODEL, _MULTIPLE_OF = 1024, 256


def _sizes(hidden: int, matrices: int = 3) -> torch.Tensor:
    return torch.tensor([hidden, matrices * _D_MODEL * hidden], dtype=torch.float64)


def _hidden_size_answer() -> torch.Tensor:
    return _sizes(swiglu_hidden_size(_D_MODEL, _MULTIPLE_OF))


HIDDEN_SIZE = register(
    ValueExercise(
        id="swiglu-hidden-size",
        chapter=CHAPTER,
        title="Llama's hidden size",
        points=2,
        question=(
            "A Llama-style model has $d_{model} = 1024$ and, as in Meta's code, "
            "`multiple_of = 256` and no `ffn_dim_multiplier`. What is the hidden size of its "
            "SwiGLU network, and how many parameters does that network have (no biases)? "
            "Give the two numbers separated by a comma."
        ),
        expected=_hidden_size_answer,
        atol=0.5,
        entry_names=("hidden size", "parameters"),
        mistakes=(
            Mistake(
                lambda: _sizes(4 * _D_MODEL),
                "that is the ReLU network's $4 d_{model}$: a gated network has three matrices, "
                "so its hidden size is cut to 2/3 of $4 d_{model}$ to keep the parameters "
                "(then rounded up to a multiple of 256)",
            ),
            Mistake(
                lambda: _sizes(2560),
                "$\\lfloor 8 \\cdot 1024 / 3 \\rfloor = 2730$ was rounded down to 2560; "
                "Llama's code rounds up to the next multiple of 256",
            ),
            Mistake(
                lambda: _sizes(2730),
                "2730 is $\\lfloor 2/3 \\cdot 4 \\cdot 1024 \\rfloor$ before the rounding: "
                "Meta's code then rounds it up to a multiple of `multiple_of` = 256",
            ),
            Mistake(
                lambda: _sizes(swiglu_hidden_size(_D_MODEL, _MULTIPLE_OF), matrices=2),
                "the hidden size is right, but the count has two matrices: a gated network "
                "has three, $W$ and $V$ of $d_{model} \\times d_{ff}$ and $W_2$ of "
                "$d_{ff} \\times d_{model}$",
            ),
        ),
        hints=(
            "Start from $4 d_{model} = 4096$, take two thirds and drop the fraction, as "
            "`int(2 * 4096 / 3)` does.",
            "Round up to the next multiple of 256: `256 * ((h + 255) // 256)`.",
            "Three matrices, each with $d_{model} \\cdot d_{ff}$ entries.",
        ),
    )
)


# --------------------------------------------------------------------------- a shifted input

SHIFTED_INPUT = register(
    ChoiceExercise(
        id="rmsnorm-shifted-input",
        chapter=CHAPTER,
        title="A shifted input",
        points=2,
        question=(
            "Every feature of a token vector $x$ (with $d_{model} > 1$ features, not all "
            "equal) is increased by the same constant $c = 5$. What happens to the outputs of "
            "LayerNorm (gain 1, bias 0) and of RMSNorm (gain 1)?"
        ),
        options=(
            Option(
                "a",
                "Neither output changes: both norms are invariant to shifting their input.",
                "No: only LayerNorm subtracts the mean. RMSNorm divides by the root mean "
                "square, which grows with the shift, so its output moves towards "
                "$(1, 1, \\dots, 1)$.",
            ),
            Option(
                "b",
                "LayerNorm's output does not change; RMSNorm's does.",
                "Right: LayerNorm subtracts the mean, so the shift cancels. RMSNorm has no "
                "centring: $x + c$ has a larger root mean square and a common component, and "
                "for large $c$ its output tends to $(1, \\dots, 1)$. This is the re-centring "
                "invariance that Zhang and Sennrich give up.",
            ),
            Option(
                "c",
                "RMSNorm's output does not change; LayerNorm's does.",
                "The other way round: RMSNorm is invariant to scaling the input (both are), "
                "but only LayerNorm is invariant to shifting it, since only it subtracts the "
                "mean.",
            ),
            Option(
                "d",
                "Both outputs change, since both divide by a statistic of the input that the "
                "shift changes.",
                "LayerNorm divides by the standard deviation, which a shift does not change "
                "(and it subtracts the mean, which the shift does change, by exactly $c$). "
                "Only RMSNorm's output changes.",
            ),
        ),
        answer="b",
        hints=(
            "Compute both on a small vector: `F.layer_norm(x, (4,))` and "
            "`course_lib.normalization.rms_norm(x)` for `x` and `x + 5`.",
            "Which of the two subtracts the mean? What does a shift do to the mean, and what "
            "does it do to the standard deviation?",
        ),
    )
)
