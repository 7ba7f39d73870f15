"""Exercises of the chapter "Positional encoding" (``chapters/positional-encoding.ipynb``)."""

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

CHAPTER = "positional-encoding"


def _encoding_cases(seed: int) -> list[Case]:
    cases = [
        Case("max_len=3, d_model=4 (the worked example)", (3, 4)),
        Case("max_len=1, d_model=2 (smallest table)", (1, 2)),
        Case("max_len=50, d_model=16", (50, 16)),
        Case("max_len=8, d_model=128 (many pairs)", (8, 128)),
    ]
    draw = torch.Generator().manual_seed(seed)
    for _ in range(3):
        max_len = int(torch.randint(1, 101, (), generator=draw))
        d_model = 2 * int(torch.randint(1, 33, (), generator=draw))
        cases.append(Case(f"random: max_len={max_len}, d_model={d_model}", (max_len, d_model)))
    return cases


def _reference_encoding(max_len: int, d_model: int) -> torch.Tensor:
    return sinusoidal_positional_encoding(max_len, d_model)


POSITIONAL_ENCODING = register(
    CodeExercise(
        id="positional-encoding",
        chapter=CHAPTER,
        title="Implement the sinusoidal encoding",
        points=4,
        function="positional_encoding",
        parameters=("max_len", "d_model"),
        reference=_reference_encoding,
        cases=_encoding_cases,
        seed=2017,
        atol=1e-4,
        blocked=(sinusoidal_positional_encoding, angular_frequencies),
        hints=(
            "Make the positions a column, torch.arange(max_len)[:, None], and the pair "
            "indices $i = 0, 1, \\dots, d_{model}/2 - 1$ a row: `torch.arange(d_model // 2)`.",
            "Pair $i$ has the angular frequency $10000^{-2i/d_{model}}$. Position times "
            "frequency gives every angle at once, a `(max_len, d_model // 2)` table.",
            "Start from `torch.zeros(max_len, d_model)` and fill the even columns with "
            "`pe[:, 0::2] = torch.sin(angle)`, the odd ones with `pe[:, 1::2] = torch.cos(angle)`.",
        ),
    )
)


def _worked_example() -> torch.Tensor:
    return sinusoidal_positional_encoding(3, 4, dtype=torch.float64)[2]


def _angles(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


WORKED_EXAMPLE = register(
    ValueExercise(
        id="pe-worked-example",
        chapter=CHAPTER,
        title="An encoding by hand",
        points=2,
        question=(
            "With $d_{model} = 4$, what is the encoding of position 2? Give its four entries "
            "$PE_{(2, 0)}, PE_{(2, 1)}, PE_{(2, 2)}, PE_{(2, 3)}$, rounded to 3 decimals and "
            "separated by commas."
        ),
        expected=_worked_example,
        atol=1.5e-3,
        entry_names=("PE[2, 0]", "PE[2, 1]", "PE[2, 2]", "PE[2, 3]"),
        mistakes=(
            Mistake(
                lambda: _angles(math.sin(2), math.cos(2), math.sin(0.02), math.cos(2)),
                "the last entry belongs to pair i = 1, like the third: it is the cosine of that "
                "pair's angle, not of pair 0's",
            ),
            Mistake(
                lambda: _angles(
                    math.sin(math.radians(2)),
                    math.cos(math.radians(2)),
                    math.sin(math.radians(0.02)),
                    math.cos(math.radians(0.02)),
                ),
                "these are sines and cosines of angles in degrees; the formula works in "
                "radians, as math.sin and torch.sin do",
            ),
            Mistake(
                lambda: _angles(math.sin(2), math.cos(2), math.sin(2e-4), math.cos(2e-4)),
                "the second pair uses the frequency $10000^{-4/4}$: the index was doubled. "
                "Columns 2 and 3 belong to pair $i = 1$, and the exponent is $-2i/d_{model}$",
            ),
            Mistake(
                lambda: _angles(math.cos(2), math.sin(2), math.cos(0.02), math.sin(0.02)),
                "sine and cosine are swapped: even columns (0, 2) hold sines, odd columns "
                "(1, 3) hold cosines",
            ),
        ),
        hints=(
            "With $d_{model} = 4$ there are two pairs, $i = 0$ (columns 0 and 1) and $i = 1$ "
            "(columns 2 and 3). Each pair holds a sine and then a cosine of the same angle.",
            "Pair $i = 0$ has the frequency $10000^0 = 1$ and pair $i = 1$ has $10000^{-2/4} = "
            "0.01$, so at position 2 the angles are 2 and 0.02 radians.",
        ),
    )
)


DOUBLED_INDEX = register(
    ChoiceExercise(
        id="pe-doubled-index-bug",
        chapter=CHAPTER,
        title="Find the bug",
        points=2,
        question=(
            "buggy_encoding (above) returns a table of the right shape with values in "
            "[-1, 1], but not the sinusoidal encoding. Which line is wrong, and why?"
        ),
        options=(
            Option(
                "a",
                "Line 2: positions must start at 1, not 0.",
                "No: position 0 is encoded too, as sin(0) = 0 and cos(0) = 1 in every pair.",
            ),
            Option(
                "b",
                "Line 4: column already steps by 2 (it is 2i), so the exponent counts the "
                "pair index twice.",
                "Right: column takes the values 0, 2, 4, ..., which is 2i already, and "
                "`-2 * column / d_model` makes the exponent $-4i / d_{model}$. The frequencies "
                "fall twice as fast and the upper half of the pairs is almost constant. Use "
                "`-column / d_model` (or let the index run over $i = 0, 1, 2, \\dots$).",
            ),
            Option(
                "c",
                "Lines 6 and 7: sine and cosine are swapped.",
                "No: the paper puts sines in the even columns 2i and cosines in the odd "
                "columns 2i + 1, as these lines do.",
            ),
            Option(
                "d",
                "Line 5: the table must start as ones, not zeros.",
                "No: lines 6 and 7 overwrite every entry, so the starting values do not matter.",
            ),
        ),
        answer="b",
        hints=(
            "Print `column` and `omega` for `d_model = 8` and compare `omega` with "
            "`course_lib.positional.angular_frequencies(8)`.",
            "`angular_frequencies(8)` is $10000^{-2i / 8}$ for $i = 0, 1, 2, 3$. Which values "
            "does `column` take for the same four pairs?",
        ),
    )
)


def _rotation_cases(seed: int) -> list[Case]:
    cases = [
        Case("offset=1, d_model=4", (1, 4)),
        Case("offset=0, d_model=6 (no move)", (0, 6)),
        Case("offset=-3, d_model=8 (backwards)", (-3, 8)),
        Case("offset=5, d_model=2", (5, 2)),
    ]
    draw = torch.Generator().manual_seed(seed)
    for _ in range(3):
        offset = int(torch.randint(-50, 51, (), generator=draw))
        d_model = 2 * int(torch.randint(1, 17, (), generator=draw))
        cases.append(Case(f"random: offset={offset}, d_model={d_model}", (offset, d_model)))
    return cases


def _reference_rotation(offset: int, d_model: int) -> torch.Tensor:
    return offset_rotation(offset, d_model)


OFFSET_ROTATION = register(
    CodeExercise(
        id="pe-offset-rotation",
        chapter=CHAPTER,
        title="The matrix that shifts positions",
        points=3,
        function="offset_matrix",
        parameters=("offset", "d_model"),
        reference=_reference_rotation,
        cases=_rotation_cases,
        seed=2018,
        atol=1e-4,
        blocked=(offset_rotation, sinusoidal_positional_encoding, angular_frequencies),
        hints=(
            "Pair $i$ of $PE_{pos}$ is $(\\sin a, \\cos a)$ with $a = pos \\cdot \\omega_i$. "
            "Moving by $k$ must give "
            "$(\\sin(a + k \\omega_i), \\cos(a + k \\omega_i))$: use the angle-sum formulas.",
            "Rows of $PE$ are multiplied on the left, $PE_{pos} M$, so column $2i$ of $M$ makes "
            "the new sine: $M_{2i, 2i} = \\cos(k \\omega_i)$ and $M_{2i + 1, 2i} = \\sin(k "
            "\\omega_i)$.",
            "Column $2i + 1$ makes the new cosine: $M_{2i, 2i + 1} = -\\sin(k \\omega_i)$ and "
            "$M_{2i + 1, 2i + 1} = \\cos(k \\omega_i)$. Every other entry is zero.",
        ),
    )
)
