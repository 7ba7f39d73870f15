"""Exercises of the chapter "The paper's training recipe" (``chapters/training-recipe.ipynb``)."""

from __future__ import annotations

import torch

from course_lib.answers import Case
from course_lib.exercises._registry import (
    ChoiceExercise,
    CodeExercise,
    Mistake,
    Option,
    ValueExercise,
    register,
)
from course_lib.training import (
    label_smoothed_loss,
    sequence_loss,
    smoothed_targets,
    transformer_schedule,
)

CHAPTER = "training-recipe"
PAD = 0


# ----------------------------------------------------------------------------- the schedule


def _reference_rates(steps, d_model, warmup_steps):
    rates = [transformer_schedule(int(s), d_model, warmup_steps) for s in steps.tolist()]
    return torch.tensor(rates, dtype=torch.float64)


def _schedule_cases(seed: int) -> list[Case]:
    cases = [
        Case(
            "steps 1, 2, 3 of the base model (d_model 512, warm-up 4000)",
            (torch.tensor([1, 2, 3]), 512, 4000),
        ),
        Case(
            "around the peak: steps 3999, 4000, 4001", (torch.tensor([3999, 4000, 4001]), 512, 4000)
        ),
        Case("long after the peak: 16000, 100000", (torch.tensor([16_000, 100_000]), 512, 4000)),
        Case(
            "the big model (d_model 1024), steps 1, 4000, 8000",
            (torch.tensor([1, 4000, 8000]), 1024, 4000),
        ),
    ]
    draw = torch.Generator().manual_seed(seed)
    for _ in range(3):
        d_model = 2 ** int(torch.randint(4, 11, (), generator=draw))
        warmup = int(torch.randint(10, 5000, (), generator=draw))
        steps = torch.randint(1, 3 * warmup, (6,), generator=draw)
        label = f"random: d_model {d_model}, warm-up {warmup}, steps {steps.tolist()}"
        cases.append(Case(label, (steps, d_model, warmup)))
    return cases


SCHEDULE = register(
    CodeExercise(
        id="transformer-schedule",
        chapter=CHAPTER,
        title="The paper's learning-rate schedule",
        points=3,
        function="learning_rates",
        parameters=("steps", "d_model", "warmup_steps"),
        reference=_reference_rates,
        cases=_schedule_cases,
        seed=7201,
        atol=1e-12,
        rtol=1e-6,
        dtypes=(torch.float64,),
        blocked=(transformer_schedule,),
        hints=(
            "$lrate = d_{model}^{-0.5} \\cdot \\min(step^{-0.5}, step \\cdot "
            "warmup\\_steps^{-1.5})$, for every step "
            "of the tensor at once.",
            "Steps count from 1, as in the paper: step 1 is the first update.",
            "Work in float64: steps.to(torch.float64), then torch.minimum of the two terms.",
        ),
    )
)


# ----------------------------------------------------------------------------- the smoothed loss


def _loss_case(label: str, draw: torch.Generator, batch: int, length: int, k: int, eps: float):
    logits = torch.randn(batch, length, k, generator=draw) * 2
    labels = torch.randint(1, k, (batch, length), generator=draw)
    if batch > 1:  # the last rows end early: padding
        cut = torch.randint(1, length + 1, (batch,), generator=draw)
        cut[0] = length
        labels = labels.masked_fill(torch.arange(length) >= cut[:, None], PAD)
    return Case(label, (logits, labels, eps, PAD))


def _smoothing_cases(seed: int) -> list[Case]:
    fixed = torch.Generator().manual_seed(5)
    cases = [
        _loss_case("one sentence of 3 tokens, 5 classes, eps 0.1", fixed, 1, 3, 5, 0.1),
        _loss_case("two sentences (padding), 6 classes, eps 0.1", fixed, 2, 4, 6, 0.1),
        _loss_case("three sentences, 4 classes, eps 0.3", fixed, 3, 5, 4, 0.3),
        _loss_case("eps 0: the plain cross-entropy", fixed, 2, 3, 7, 0.0),
    ]
    draw = torch.Generator().manual_seed(seed)
    for _ in range(3):
        batch = int(torch.randint(2, 6, (), generator=draw))
        length = int(torch.randint(2, 8, (), generator=draw))
        k = int(torch.randint(3, 30, (), generator=draw))
        eps = round(float(torch.rand((), generator=draw)) * 0.4, 2)
        label = f"random: {batch} sentences of up to {length} tokens, {k} classes, eps {eps}"
        cases.append(_loss_case(label, draw, batch, length, k, eps))
    return cases


SMOOTHED_LOSS = register(
    CodeExercise(
        id="label-smoothed-loss",
        chapter=CHAPTER,
        title="The label-smoothed loss",
        points=3,
        function="smoothed_loss",
        parameters=("logits", "labels", "epsilon", "pad_id"),
        reference=label_smoothed_loss,
        cases=_smoothing_cases,
        seed=7202,
        atol=1e-5,
        rtol=1e-5,
        blocked=(label_smoothed_loss, sequence_loss, smoothed_targets),
        hints=(
            "The target of a position is $1 - \\epsilon$ on its label plus "
            "$\\epsilon / |\\mathcal{V}|$ on every one of the $|\\mathcal{V}|$ classes, the "
            "label included ($\\epsilon$ is `epsilon`, $|\\mathcal{V}|$ is `logits.size(-1)`).",
            "The loss at a position is $-\\sum_k \\mathrm{target}_k \\log "
            "\\mathrm{softmax}(\\mathrm{logits})_k$; average it over "
            "the positions whose label is not `pad_id`.",
            "torch.nn.functional.one_hot(labels, logits.size(-1)) builds the one-hot part; "
            "F.cross_entropy(..., label_smoothing=epsilon) is allowed too, with the padding "
            "left out.",
        ),
    )
)


# ----------------------------------------------------------------------------- shared embeddings


def _numbers(*values: float):
    return lambda: torch.tensor(values, dtype=torch.float64)


SHARED_SAVING = register(
    ValueExercise(
        id="shared-embedding-saving",
        chapter=CHAPTER,
        title="What three-way sharing saves",
        points=2,
        question=(
            "The paper's base model has $d_{model} = 512$ and one vocabulary of 37,000 tokens for "
            "both languages. It uses one matrix for the source embedding, the target embedding "
            "and the weight of the pre-softmax linear layer. How many parameters does that "
            "save, compared with three separate matrices of the same shape (the output layer's "
            "bias is kept either way)?"
        ),
        expected=_numbers(2 * 37_000 * 512),
        atol=0.5,
        entry_names=("parameters",),
        mistakes=(
            Mistake(
                _numbers(37_000 * 512),
                "that is one matrix of $37{,}000 \\times 512$; three uses share one matrix, so two "
                "matrices are saved",
            ),
            Mistake(
                _numbers(3 * 37_000 * 512),
                "that is all three matrices; one of them is still needed, the one they share",
            ),
            Mistake(
                _numbers(2 * 37_000 * 512 + 37_000),
                "that counts the output layer's bias as saved; the question keeps the bias",
            ),
        ),
        hints=(
            "Each of the three matrices has one row of $d_{model}$ numbers per token.",
            "Three separate matrices, or one: how many fewer?",
        ),
    )
)


# ----------------------------------------------------------------------------- perplexity

SMOOTHING_PERPLEXITY = register(
    ChoiceExercise(
        id="smoothing-perplexity",
        chapter=CHAPTER,
        title="Why label smoothing hurts perplexity",
        points=2,
        question=(
            "The paper reports that label smoothing with $\\epsilon_{ls} = 0.1$ hurts perplexity "
            "but improves accuracy and BLEU. Why does it make the perplexity (the exponential of "
            "the plain cross-entropy on held-out data) worse?"
        ),
        options=(
            Option(
                "a",
                "The loss it trains is lowest when the model gives the correct token only "
                "$1 - \\epsilon_{ls} + \\epsilon_{ls}/|\\mathcal{V}|$ (with $|\\mathcal{V}|$ "
                "classes), so the model learns to be less sure of the correct token, and the "
                "plain cross-entropy, $-\\log p(\\text{correct})$, goes up.",
                "Right: the smoothed target is the best answer for the smoothed loss, and it "
                "gives the correct token less probability than a sure, correct model would.",
            ),
            Option(
                "b",
                "Label smoothing adds noise to the labels, so the model learns wrong tokens.",
                "No: the labels are not replaced; every position keeps its correct label and "
                "most of the weight on it. The model still ranks the correct token first when "
                "it can; it only stops pushing its probability to 1.",
            ),
            Option(
                "c",
                "Perplexity is computed with the smoothed targets, whose entropy is above 0.",
                "No: perplexity is measured against the real tokens, with the plain "
                "cross-entropy. It is the model's probabilities that change.",
            ),
            Option(
                "d",
                "Label smoothing turns dropout off, so the model overfits.",
                "No: the two are independent; the paper uses both, dropout 0.1 and "
                "$\\epsilon_{ls} = 0.1$.",
            ),
        ),
        answer="a",
        hints=("What distribution minimises the smoothed loss at one position?",),
    )
)
