"""Exercises of the chapter "Feed-forward, residuals and layer normalization"
(``chapters/feed-forward-and-norm.ipynb``)."""

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

CHAPTER = "feed-forward-and-norm"


def _layer_norm_cases(seed: int) -> list[Case]:
    fixed = torch.Generator().manual_seed(0)
    d = 8
    ones, zeros = torch.ones(d), torch.zeros(d)
    tokens = torch.randn(2, 3, d, generator=fixed) * 3 + 1
    gain, bias = 1 + 0.5 * torch.randn(d, generator=fixed), torch.randn(d, generator=fixed)
    constant = torch.full((1, 2, 4), 2.5)
    cases = [
        Case("one token [1, 2, 3, 6], gain 1, bias 0, eps 0.0",
             (torch.tensor([[1.0, 2.0, 3.0, 6.0]]), torch.ones(4), torch.zeros(4), 0.0)),
        Case("(2, 3, 8): 2 sentences of 3 tokens, gain 1, bias 0", (tokens, ones, zeros, 1e-5)),
        Case("the same tokens with a learned gain and bias", (tokens, gain, bias, 1e-5)),
        Case("a large eps = 0.5 (where it goes matters)", (tokens, gain, bias, 0.5)),
        Case("tokens whose features are all equal (variance 0)",
             (constant, torch.ones(4), torch.arange(4.0), 1e-5)),
        Case("d_model = 2, a single token", (torch.tensor([[3.0, -1.0]]), torch.ones(2),
                                             torch.zeros(2), 1e-5)),
    ]  # fmt: skip
    draw = torch.Generator().manual_seed(seed)
    for _ in range(3):
        batch, length, d_model = (
            int(torch.randint(low, high, (), generator=draw))
            for low, high in ((1, 4), (1, 7), (2, 33))
        )
        x = torch.randn(batch, length, d_model, generator=draw) * 2 - 1
        g = 1 + 0.5 * torch.randn(d_model, generator=draw)
        b = torch.randn(d_model, generator=draw)
        eps = (1e-5, 1e-3, 0.1)[int(torch.randint(0, 3, (), generator=draw))]
        label = f"random: ({batch}, {length}, {d_model}), eps = {eps:g}"
        cases.append(Case(label, (x, g, b, eps)))
    return cases


def _reference_layer_norm(
    x: torch.Tensor, gain: torch.Tensor, bias: torch.Tensor, eps: float
) -> torch.Tensor:
    return F.layer_norm(x, (x.size(-1),), gain, bias, eps)


LAYER_NORM = register(
    CodeExercise(
        id="layer-norm",
        chapter=CHAPTER,
        title="Layer normalization by hand",
        points=3,
        function="layer_norm",
        parameters=("x", "gain", "bias", "eps"),
        reference=_reference_layer_norm,
        cases=_layer_norm_cases,
        seed=2306,
        atol=1e-4,
        rtol=1e-4,
        blocked=(F.layer_norm,),
        blocked_ops=NORMALIZATION,
        hints=(
            "Every token is normalised on its own: the mean and the variance are taken over the "
            "last axis, the $d_{model}$ features of that token (`keepdim=True` keeps the shapes "
            "broadcastable).",
            "The variance divides by $d_{model}$, not $d_{model} - 1$: `x.var(dim=-1, "
            "unbiased=False)`, or the mean of the squared deviations.",
            "eps goes inside the square root, added to the variance: (x - mean) / "
            "$\\sqrt{\\mathrm{var} + \\epsilon}$. Then multiply by gain and add bias, feature by "
            "feature.",
        ),
    )
)


ADD_NORM_ORDER = register(
    ChoiceExercise(
        id="add-norm-order",
        chapter=CHAPTER,
        title="Which order is the paper's?",
        points=2,
        question=(
            "Each line combines a sublayer (attention or feed-forward), a residual connection, "
            "dropout and a LayerNorm. Which one is a sublayer connection of the original "
            "Transformer (Vaswani et al., 2017), the Add & Norm of the lectures' equations?"
        ),
        options=(
            Option(
                "a",
                "`x = norm(x + dropout(sublayer(x)))`",
                "Right: the sublayer's output, after dropout, is added to its input, and the sum "
                "is normalised: $\\mathrm{LayerNorm}(x + \\mathrm{Sublayer}(x))$, post-norm. It is "
                "`nn.TransformerEncoderLayer`'s default (`norm_first=False`) and course_lib's.",
            ),
            Option(
                "b",
                "`x = x + dropout(sublayer(norm(x)))`",
                "No: that is pre-norm (`norm_first=True`), the order of GPT-2 and of the "
                "Annotated Transformer's code. It normalises the sublayer's input and leaves the "
                "sum unnormalised, so a stack of such layers needs a final LayerNorm.",
            ),
            Option(
                "c",
                "`x = norm(x) + dropout(sublayer(norm(x)))`",
                "No: here the residual path itself goes through the norm, so the input is not "
                "passed on unchanged (and not normalised either, as the sum is not). Neither "
                "post-norm nor pre-norm does that.",
            ),
            Option(
                "d",
                "`x = x + norm(dropout(sublayer(x)))`",
                "No: this normalises only the update. The sum x + ... is never normalised, so "
                "nothing keeps the residual stream's size in check, as the paper's Add & Norm "
                "does.",
            ),
        ),
        answer="a",
        hints=(
            "Read the encoder layer's first equation, U = LayerNorm(X + MultiHeadAttention(X)), "
            "from the inside out: what is computed first, and what is done last?",
            "In the paper's order, the very last operation of every sublayer connection is the "
            "LayerNorm.",
        ),
    )
)


def _post_pre() -> torch.Tensor:
    """x = [2, 0, 1, 1], Sublayer(h) = 2h, gain 1, bias 0, eps 0: post-norm then pre-norm."""
    x = torch.tensor([2.0, 0.0, 1.0, 1.0], dtype=torch.float64)

    def norm(h: torch.Tensor) -> torch.Tensor:
        return (h - h.mean()) / h.var(unbiased=False).sqrt()

    return torch.cat([norm(x + 2 * x), x + 2 * norm(x)])


def _swapped() -> torch.Tensor:
    post, pre = _post_pre().split(4)
    return torch.cat([pre, post])


def _unbiased() -> torch.Tensor:
    x = torch.tensor([2.0, 0.0, 1.0, 1.0], dtype=torch.float64)

    def norm(h: torch.Tensor) -> torch.Tensor:
        return (h - h.mean()) / h.std()  # divides by d - 1

    return torch.cat([norm(x + 2 * x), x + 2 * norm(x)])


def _no_residual() -> torch.Tensor:
    x = torch.tensor([2.0, 0.0, 1.0, 1.0], dtype=torch.float64)
    norm = (x - x.mean()) / x.var(unbiased=False).sqrt()
    return torch.cat([norm, 2 * norm])


ADD_NORM_BY_HAND = register(
    ValueExercise(
        id="add-norm-by-hand",
        chapter=CHAPTER,
        title="Post-norm and pre-norm by hand",
        points=2,
        question=(
            "A token's vector is $x = [2, 0, 1, 1]$, and a (toy) sublayer doubles its input: "
            "$\\mathrm{Sublayer}(h) = 2h$. With a LayerNorm of gain 1, bias 0 and "
            "$\\epsilon = 0$, compute the post-norm output "
            "$\\mathrm{LayerNorm}(x + \\mathrm{Sublayer}(x))$ and then the pre-norm output "
            "$x + \\mathrm{Sublayer}(\\mathrm{LayerNorm}(x))$: eight numbers, post-norm's four "
            "first."
        ),
        expected=_post_pre,
        atol=5e-3,
        entry_names=tuple(
            f"{order} entry {j}" for order in ("post-norm", "pre-norm") for j in range(4)
        ),
        mistakes=(
            Mistake(
                _swapped,
                "the two orders are swapped: post-norm normalises the sum "
                "$x + \\mathrm{Sublayer}(x)$ (its output has mean 0 and standard deviation 1), "
                "pre-norm adds the sublayer's output to $x$ unnormalised",
            ),
            Mistake(
                _unbiased,
                "the variance of LayerNorm divides by $d = 4$, not by $d - 1 = 3$ "
                "(the default of `torch.std`)",
            ),
            Mistake(
                _no_residual,
                "the residual is missing: both orders add x back, "
                "before the norm (post-norm) or after the sublayer (pre-norm)",
            ),
        ),
        hints=(
            "Post-norm: $x + 2x = 3x = [6, 0, 3, 3]$. Its mean is 3; its variance, dividing by "
            "4, is $(9 + 9 + 0 + 0) / 4$.",
            "Pre-norm: first $\\mathrm{LayerNorm}(x)$: mean 1, variance "
            "$(1 + 1 + 0 + 0) / 4 = 0.5$. Double it and add $x$.",
        ),
    )
)
