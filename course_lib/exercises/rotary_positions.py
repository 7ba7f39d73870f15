"""Exercises of the chapter "Rotary positions" (``chapters/rotary-positions.ipynb``)."""

from __future__ import annotations

import math

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
from course_lib.positional import (
    angular_frequencies,
    offset_rotation,
    sinusoidal_positional_encoding,
)
from course_lib.rotary import rotary_cos_sin, rotate, rotation_matrix

CHAPTER = "rotary-positions"


def _rotate_cases(seed: int) -> list[Case]:
    def vectors(length: int, d: int, draw: torch.Generator) -> torch.Tensor:
        return torch.randn(length, d, generator=draw)

    fixed = torch.Generator().manual_seed(0)
    cases = [
        Case("d=2, position 0 (no turn)", (torch.tensor([[1.0, 2.0]]), torch.tensor([0]))),
        Case(
            "d=4, positions 0, 1, 2",
            (vectors(3, 4, fixed), torch.arange(3)),
        ),
        Case(
            "d=8, positions 5, 6, 7 (after a cache of 5)",
            (vectors(3, 8, fixed), torch.arange(5, 8)),
        ),
        Case(
            "d=64, positions 0, 9, 100, 250 (slow pairs matter)",
            (vectors(4, 64, fixed), torch.tensor([0, 9, 100, 250])),
        ),
    ]
    draw = torch.Generator().manual_seed(seed)
    for _ in range(3):
        length = int(torch.randint(1, 13, (), generator=draw))
        d = 2 * int(torch.randint(1, 33, (), generator=draw))
        positions = torch.randint(0, 200, (length,), generator=draw)
        cases.append(
            Case(
                f"random: {length} vectors of d={d}, positions up to {int(positions.max())}",
                (vectors(length, d, draw), positions),
            )
        )
    return cases


def _reference_rotate(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    return rotate(x, positions)


ROTATE = register(
    CodeExercise(
        id="rope-rotate",
        chapter=CHAPTER,
        title="Rotate queries and keys by their positions",
        points=4,
        function="rope",
        parameters=("x", "positions"),
        reference=_reference_rotate,
        cases=_rotate_cases,
        seed=2021,
        atol=1e-4,
        rtol=1e-4,
        blocked=(
            rotate,
            rotary_cos_sin,
            rotation_matrix,
            offset_rotation,
            angular_frequencies,
            sinusoidal_positional_encoding,
        ),
        hints=(
            "Pair $i$ holds the features $2i$ and $2i + 1$ and turns by the angle "
            "$m \\omega_i$, with $\\omega_i = 10000^{-2i/d}$ and $i = 0, 1, \\dots, d/2 - 1$. "
            "Build the angles of every vector and pair at once: `positions[:, None] * omega`, "
            "shape `(L, d // 2)`.",
            "Take the two coordinates of every pair apart with `x[:, 0::2]` and `x[:, 1::2]`. "
            "A point $(a, b)$ turned counter-clockwise by $\\theta$ becomes "
            "$(a \\cos\\theta - b \\sin\\theta,\\ a \\sin\\theta + b \\cos\\theta)$.",
            "Write the two new coordinates back into the even and odd columns of a new tensor "
            "(`out[:, 0::2] = ...`), or stack them on a last axis and flatten it.",
        ),
    )
)


def _by_hand() -> torch.Tensor:
    query = torch.tensor([[1.0, 0.0, 0.0, 1.0]], dtype=torch.float64)
    return rotate(query, torch.tensor([2]))[0]


def _vector(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


BY_HAND = register(
    ValueExercise(
        id="rope-by-hand",
        chapter=CHAPTER,
        title="A query rotated by hand",
        points=2,
        question=(
            "The query $q = (1, 0, 0, 1)$ ($d = 4$, base 10000) stands at position $m = 2$. "
            "What is $q R_2$, the query after the rotation? Give its four entries, rounded to 3 "
            "decimals and separated by commas."
        ),
        expected=_by_hand,
        atol=1.5e-3,
        entry_names=("entry 0", "entry 1", "entry 2", "entry 3"),
        mistakes=(
            Mistake(
                lambda: _vector(math.cos(2), -math.sin(2), math.sin(0.02), math.cos(0.02)),
                "every pair was turned clockwise, by $-m \\omega_i$: that is $R_m^\\top$. The "
                "rotation of position $m$ turns $(a, b)$ to "
                "$(a \\cos m\\omega_i - b \\sin m\\omega_i,\\ a \\sin m\\omega_i + b \\cos "
                "m\\omega_i)$",
            ),
            Mistake(
                lambda: _vector(math.cos(2), math.sin(2), -math.sin(2), math.cos(2)),
                "both pairs were turned by the same angle 2; pair $i = 1$ turns at the "
                "frequency $10000^{-2/4} = 0.01$, so by $0.02$ radians",
            ),
            Mistake(
                lambda: _vector(math.cos(2), -math.sin(0.02), math.sin(2), math.cos(0.02)),
                "these are the pairs of Hugging Face's rotate_half, feature $j$ with feature "
                "$j + d/2$; this chapter (and RoFormer) pairs the adjacent features $2i$ and "
                "$2i + 1$",
            ),
            Mistake(
                lambda: _vector(
                    math.cos(math.radians(2)),
                    math.sin(math.radians(2)),
                    -math.sin(math.radians(0.02)),
                    math.cos(math.radians(0.02)),
                ),
                "these are cosines and sines of angles in degrees; the angles are in radians",
            ),
            Mistake(
                lambda: _vector(1 + math.sin(2), math.cos(2), math.sin(0.02), 1 + math.cos(0.02)),
                "this adds the sinusoidal encoding of position 2 to the query; rotary positions "
                "add nothing, they turn each pair of the query",
            ),
        ),
        hints=(
            "With $d = 4$ there are two pairs: $(q_0, q_1) = (1, 0)$ turns by $2 \\cdot "
            "\\omega_0 = 2$ radians, $(q_2, q_3) = (0, 1)$ by $2 \\cdot \\omega_1 = 2 \\cdot "
            "10000^{-2/4} = 0.02$ radians.",
            "Turning $(a, b)$ counter-clockwise by $\\theta$ gives "
            "$(a \\cos\\theta - b \\sin\\theta,\\ a \\sin\\theta + b \\cos\\theta)$: "
            "$(1, 0)$ goes to $(\\cos\\theta, \\sin\\theta)$ and $(0, 1)$ to "
            "$(-\\sin\\theta, \\cos\\theta)$.",
        ),
    )
)


WHERE = register(
    ChoiceExercise(
        id="rope-where",
        chapter=CHAPTER,
        title="Where the rotation goes",
        points=2,
        question=(
            "A colleague saves work: instead of rotating the queries and keys inside every "
            "attention layer, the model rotates each token's embedding once, $x_m R_m$, before "
            "the first layer, where the sinusoidal encoding used to be added. Do the attention "
            "scores of the first layer still depend on the positions only through $m - n$?"
        ),
        options=(
            Option(
                "a",
                "Yes: rotations compose, $R_m R_n^\\top = R_{m-n}$, wherever they are applied.",
                "No: the projections come between. The score is "
                "$x_m R_m W^Q (x_n R_n W^K)^\\top = x_m R_m W^Q W^{K\\top} R_n^\\top x_n^\\top$, "
                "and $R_m$ and $R_n^\\top$ only meet, and cancel to $R_{m-n}$, if "
                "nothing stands between them. A learned $W^Q W^{K\\top}$ does not commute with "
                "the rotations.",
            ),
            Option(
                "b",
                "No: $W^Q W^{K\\top}$ stands between $R_m$ and $R_n^\\top$, so they do not "
                "combine into $R_{m-n}$; the rotation must come after the projections.",
                "Right: rotating $q = x_m W^Q$ and $k = x_n W^K$ gives "
                "$q R_m R_n^\\top k^\\top = q R_{m-n} k^\\top$. Before the projections the "
                "rotations are separated by $W^Q W^{K\\top}$ and the score depends on $m$ and "
                "$n$ apart. That is why RoPE sits inside every attention layer, after the "
                "projections.",
            ),
            Option(
                "c",
                "Yes, provided the values are rotated too.",
                "No: the values do not enter the scores at all, and rotating them changes "
                "nothing about what the scores depend on. RoPE leaves the values alone.",
            ),
            Option(
                "d",
                "No, because a rotation changes the length of the embeddings.",
                "No: rotations keep lengths ($R_m R_m^\\top = I$). The problem is where the "
                "rotation is applied, not its size.",
            ),
        ),
        answer="b",
        hints=(
            "Write the score of the first layer for the query of position $m$ and the key of "
            "position $n$, with the projections $W^Q$ and $W^K$ in it.",
            "$R_m R_n^\\top = R_{m-n}$ needs the two rotations next to each other in the "
            "product. Are they?",
        ),
    )
)
