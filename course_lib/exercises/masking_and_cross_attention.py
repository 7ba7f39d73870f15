"""Exercises of the chapter "Masking and cross-attention"
(``chapters/masking-and-cross-attention.ipynb``)."""

from __future__ import annotations

import torch

from course_lib.answers import Case
from course_lib.attention import causal_mask
from course_lib.exercises._registry import (
    ChoiceExercise,
    CodeExercise,
    Option,
    register,
)

CHAPTER = "masking-and-cross-attention"


def _causal_cases(seed: int) -> list[Case]:
    cases = [
        Case("size = 1 (a single token sees itself)", (1,)),
        Case("size = 2", (2,)),
        Case("size = 4", (4,)),
        Case("size = 7", (7,)),
    ]
    draw = torch.Generator().manual_seed(seed)
    for _ in range(3):
        size = int(torch.randint(1, 65, (), generator=draw))
        cases.append(Case(f"random: size = {size}", (size,)))
    return cases


def _reference_causal(size: int) -> torch.Tensor:
    return causal_mask(size)


CAUSAL_MASK = register(
    CodeExercise(
        id="causal-mask",
        chapter=CHAPTER,
        title="Build the causal mask",
        points=2,
        function="causal_mask",
        parameters=("size",),
        reference=_reference_causal,
        cases=_causal_cases,
        seed=2019,
        atol=0.0,
        dtypes=(torch.bool,),
        blocked=(causal_mask,),
        hints=(
            "Row i is query i, column j is key j. Query i may attend to keys 0, 1, ..., i: "
            "the entries on and below the diagonal are True.",
            "torch.ones(size, size, dtype=torch.bool) is all True; .tril() keeps the lower "
            "triangle including the diagonal and sets the rest to False.",
            "The course's masks say True where attention is allowed. PyTorch's "
            "nn.Transformer masks say the opposite (True, or -inf, where it is not).",
        ),
    )
)


DECODER_POSITIONS = register(
    ChoiceExercise(
        id="decoder-attention-positions",
        chapter=CHAPTER,
        title="Where a decoder token may look",
        points=2,
        question=(
            "An encoder-decoder Transformer is trained on a pair of sentences: a source of 6 "
            "tokens and a target of 4 tokens (no padding). The decoder processes the 4 target "
            "positions 0, 1, 2, 3 at once (teacher forcing). Which positions may the target "
            "token at position 2 attend to?"
        ),
        options=(
            Option(
                "a",
                "Masked self-attention: target positions 0, 1 and 2. Cross-attention: all 6 "
                "source positions.",
                "Right: the causal mask lets position 2 see itself and the earlier target "
                "tokens, and cross-attention has no causal mask: the whole source sentence is "
                "known before decoding starts.",
            ),
            Option(
                "b",
                "Masked self-attention: target positions 0 and 1. Cross-attention: all 6 "
                "source positions.",
                "Not quite: the causal mask keeps the diagonal, so a token attends to itself "
                "as well (row i of the mask is True at columns 0..i). Otherwise the first "
                "token would have nothing to attend to.",
            ),
            Option(
                "c",
                "Masked self-attention: target positions 0, 1 and 2. Cross-attention: source "
                "positions 0, 1 and 2.",
                "No: the causal mask belongs to the decoder's self-attention only. The source "
                "sentence is entirely known, so every decoder position may attend to every "
                "(non-padding) source position.",
            ),
            Option(
                "d",
                "Masked self-attention: target positions 0 to 3. Cross-attention: all 6 source "
                "positions.",
                "No: position 3 lies in the future of position 2. In training it is there "
                "(teacher forcing), but at generation time it does not exist yet, so the mask "
                "hides it.",
            ),
        ),
        answer="a",
        hints=(
            "Think of generation: when position 2 is computed, which target tokens exist, and "
            "which source tokens?",
            "The causal mask is lower-triangular including the diagonal, and only the "
            "decoder's self-attention uses it.",
        ),
    )
)
