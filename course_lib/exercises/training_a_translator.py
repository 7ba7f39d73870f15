"""Exercises of the chapter "Training a translator" (``chapters/training-a-translator.ipynb``)."""

from __future__ import annotations

import torch

from course_lib.answers import Case
from course_lib.exercises._registry import ChoiceExercise, CodeExercise, Option, register
from course_lib.training import sequence_loss, teacher_forcing

CHAPTER = "training-a-translator"
PAD, BOS, EOS = 0, 1, 2


def _targets(draw: torch.Generator, lengths: list[int], vocab_size: int) -> torch.Tensor:
    """``<bos> ... <eos>`` rows with ``lengths`` real tokens between them, padded with 0."""
    width = max(lengths) + 2
    ids = torch.full((len(lengths), width), PAD)
    for row, length in enumerate(lengths):
        words = torch.randint(3, vocab_size, (length,), generator=draw)
        ids[row, : length + 2] = torch.cat([torch.tensor([BOS]), words, torch.tensor([EOS])])
    return ids


def _loss_case(label: str, draw: torch.Generator, lengths: list[int], vocab_size: int) -> Case:
    tgt_ids = _targets(draw, lengths, vocab_size)
    logits = torch.randn(len(lengths), tgt_ids.size(1) - 1, vocab_size, generator=draw) * 2
    return Case(label, (logits, tgt_ids, PAD))


def _loss_cases(seed: int) -> list[Case]:
    fixed = torch.Generator().manual_seed(3)
    cases = [
        _loss_case("one sentence of 2 words, no padding", fixed, [2], 6),
        _loss_case("two sentences of 1 and 4 words (padding)", fixed, [1, 4], 7),
        _loss_case("three sentences of 3, 1 and 5 words", fixed, [3, 1, 5], 9),
    ]
    draw = torch.Generator().manual_seed(seed)
    for _ in range(3):
        batch = int(torch.randint(2, 7, (), generator=draw))
        vocab_size = int(torch.randint(5, 40, (), generator=draw))
        lengths = torch.randint(1, 9, (batch,), generator=draw).tolist()
        label = f"random: {batch} sentences of {lengths} words, vocabulary {vocab_size}"
        cases.append(_loss_case(label, draw, lengths, vocab_size))
    return cases


def _reference_loss(logits, tgt_ids, pad_id):
    _, labels = teacher_forcing(tgt_ids)
    return sequence_loss(logits, labels, pad_id)


TEACHER_FORCING_LOSS = register(
    CodeExercise(
        id="teacher-forcing-loss",
        chapter=CHAPTER,
        title="The loss of teacher forcing",
        points=3,
        function="teacher_forcing_loss",
        parameters=("logits", "tgt_ids", "pad_id"),
        reference=_reference_loss,
        cases=_loss_cases,
        seed=7101,
        atol=1e-5,
        rtol=1e-5,
        blocked=(sequence_loss, teacher_forcing),
        hints=(
            "logits has one position fewer than tgt_ids: it was computed from the decoder "
            "input tgt_ids[:, :-1]. The label of position t is the next token, tgt_ids[:, t + 1].",
            "The loss at one position is $-\\log "
            "\\mathrm{softmax}(\\mathrm{logits})_{\\mathrm{label}}$: "
            "`torch.log_softmax(logits, dim=-1)` and `.gather(-1, labels[..., None])`.",
            "Positions whose label is pad_id do not count: average over the real labels of "
            "the whole batch (sum the losses where labels != pad_id, divide by their number).",
            "F.cross_entropy(..., ignore_index=pad_id) does all of this if you give it one row "
            "of scores per position, (batch * (L - 1), vocab_size), and as many labels.",
        ),
    )
)


HELD_OUT = register(
    ChoiceExercise(
        id="held-out-numbers",
        chapter=CHAPTER,
        title="What the held-out numbers measure",
        points=2,
        question=(
            "The translator is trained on 8,500 of the numbers 0..9999 and scored on 1,000 "
            "others that it never saw. Why is its exact match on those 1,000 the number to "
            "report, rather than its exact match on the 8,500 training numbers?"
        ),
        options=(
            Option(
                "a",
                "It shows whether the model learned the rules that build a Spanish name from "
                "its parts, rather than a table of the names it was shown.",
                "Right: a model with enough weights can memorise 8,500 pairs; only numbers it "
                "never saw tell whether it composes names it was never shown.",
            ),
            Option(
                "b",
                "Scoring 1,000 numbers is faster than scoring 8,500.",
                "Faster, yes, but that is not why: a score on training data says nothing about "
                "new inputs, however long it takes to compute.",
            ),
            Option(
                "c",
                "The held-out numbers are harder: they contain the irregular forms.",
                "No: the split is random, so both parts have irregular forms in about the same "
                "proportion. The difference is that the model has never seen the held-out ones.",
            ),
            Option(
                "d",
                "On training numbers the exact match cannot be measured: teacher forcing gives "
                "the model the correct Spanish tokens as input.",
                "No: teacher forcing is how the model is trained. Translating, even a training "
                "number, is generation: the model reads only its own earlier tokens, so the "
                "exact match can be measured on any number. It just says little on training "
                "numbers, which the model may have memorised.",
            ),
        ),
        answer="a",
        hints=(
            "What could a model do with the training numbers that it cannot do with numbers "
            "it has never seen?",
        ),
    )
)
