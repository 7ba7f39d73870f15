"""The chapter "Rotary positions": its exercises (the model answers pass, see
test_exercises.py; plausible wrong answers fail with a message that explains them) and its
explorer (core widgets, the book's states are what the live explorer shows)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import re

import pytest
import torch
from explorer_checks import assert_book_matches_live

from conftest import failed_messages, used_widget_types
from course_lib.exercises import ChoiceExercise, CodeExercise, ValueExercise, list_exercises
from course_lib.explorers.beyond import (
    ROPE_BOOK_BASES,
    ROPE_BOOK_POSITIONS,
    RotaryPairsExplorer,
)
from solutions import SOLUTIONS

model_rope = SOLUTIONS["rope-rotate"]  # carried with the wrong answers below

# ----------------------------------------------------------------------------- the exercises


def test_the_chapter_has_the_exercises_the_course_promises():
    exercises = {e.id: e for e in list_exercises("rotary-positions")}
    assert isinstance(exercises["rope-rotate"], CodeExercise)
    assert exercises["rope-rotate"].function == "rope"
    assert isinstance(exercises["rope-by-hand"], ValueExercise)
    assert isinstance(exercises["rope-where"], ChoiceExercise)


def turned_clockwise(x, positions):
    return model_rope(x, -positions)


def rotate_half_pairs(x, positions):
    d = x.shape[-1]
    order = torch.stack((torch.arange(d // 2), torch.arange(d // 2) + d // 2), dim=1).flatten()
    out = torch.empty_like(x)
    out[:, order] = model_rope(x[:, order], positions)
    return out


def positions_from_zero(x, positions):
    return model_rope(x, torch.arange(x.shape[0]))


def doubled_index(x, positions):
    d = x.shape[-1]
    column = torch.arange(0, d, 2, dtype=torch.float64)  # 2i already
    angle = positions.double()[:, None] * 10000.0 ** (-2 * column / d)
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    out = torch.empty_like(x)
    out[:, 0::2] = x[:, 0::2] * cos - x[:, 1::2] * sin
    out[:, 1::2] = x[:, 0::2] * sin + x[:, 1::2] * cos
    return out


def sinusoid_added(x, positions):
    d = x.shape[-1]
    angle = positions.double()[:, None] * 10000.0 ** (-torch.arange(0, d, 2) / d)
    pe = torch.zeros(x.shape, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
    return x + pe.to(x.dtype)


# each wrong answer, and the first case that catches it
WRONG_ROTATIONS = {
    turned_clockwise: "d=4, positions 0, 1, 2",
    rotate_half_pairs: "d=4, positions 0, 1, 2",
    positions_from_zero: "d=8, positions 5, 6, 7 (after a cache of 5)",
    doubled_index: "d=4, positions 0, 1, 2",
    sinusoid_added: "d=2, position 0 (no turn)",
}


@pytest.mark.parametrize(
    "wrong, case", WRONG_ROTATIONS.items(), ids=lambda v: getattr(v, "__name__", "")
)
def test_a_plausible_wrong_rotation_fails_where_it_goes_wrong(wrong, case):
    messages = failed_messages("rope-rotate", wrong)
    found = re.search(re.escape(case) + r": \d+ of \d+ entries differ by more than", messages)
    assert found, messages


def test_the_clockwise_answer_passes_only_where_the_angle_is_zero():
    x, zero = torch.tensor([[1.0, 2.0]]), torch.tensor([0])
    assert torch.equal(turned_clockwise(x, zero), model_rope(x, zero))
    messages = failed_messages("rope-rotate", turned_clockwise)
    assert "d=2, position 0 (no turn)" not in messages


def rotate_by_the_library(x, positions):
    from course_lib.rotary import rotate

    return rotate(x, positions)


def rotate_by_the_matrix(x, positions):
    from course_lib.rotary import rotation_matrix

    rows = [
        x[j] @ rotation_matrix(int(m), x.shape[-1]).to(x.dtype) for j, m in enumerate(positions)
    ]
    return torch.stack(rows)


@pytest.mark.parametrize(
    "answer, name",
    [
        (rotate_by_the_library, "rotary import rotate"),
        (rotate_by_the_matrix, "rotary import rotation_matrix"),
    ],
)
def test_the_check_does_not_let_the_answer_call_the_library(answer, name):
    message = failed_messages("rope-rotate", answer)
    assert message.startswith("source: the code uses course_lib (line ")
    assert f": from course_lib.{name});" in message


@pytest.mark.parametrize(
    "answer, message",
    [
        ("-0.416, -0.909, 0.020, 1.000", "turned clockwise"),
        ("-0.416, 0.909, -0.909, -0.416", "both pairs were turned by the same angle 2"),
        ("-0.416, -0.020, 0.909, 1.000", "Hugging Face's rotate_half"),
        ("0.999, 0.035, -0.000, 1.000", "angles in degrees"),
        ("1.909, -0.416, 0.020, 1.9998", "adds the sinusoidal encoding"),
    ],
)
def test_a_known_wrong_rotation_by_hand_gets_its_explanation(answer, message):
    assert message in failed_messages("rope-by-hand", answer)


def test_the_rotation_by_hand_is_the_one_the_library_computes():
    from course_lib.exercises import get_exercise

    expected = get_exercise("rope-by-hand").expected()
    assert [round(v, 3) for v in expected.tolist()] == [-0.416, 0.909, -0.02, 1.0]


@pytest.mark.parametrize(
    "answer, message",
    [
        ("a", "the projections come between"),
        ("c", "the values do not enter the scores"),
        ("d", "rotations keep lengths"),
    ],
)
def test_a_wrong_place_for_the_rotation_fails_with_its_feedback(answer, message):
    assert message in failed_messages("rope-where", answer)


def test_rotating_the_embeddings_once_breaks_the_offset_property_as_the_choice_says():
    from course_lib.rotary import rotate

    generator = torch.Generator().manual_seed(0)
    w_q, w_k = torch.randn(2, 8, 8, generator=generator, dtype=torch.float64)
    x, y = torch.randn(2, 8, generator=generator, dtype=torch.float64)
    positions = torch.arange(12)
    turned_x, turned_y = rotate(x.expand(12, 8), positions), rotate(y.expand(12, 8), positions)
    once = (turned_x @ w_q) @ (turned_y @ w_k).T  # rotate, then project
    inside = rotate((x @ w_q).expand(12, 8), positions) @ rotate((y @ w_k).expand(12, 8)).T
    assert torch.allclose(inside.diagonal(1), inside.diagonal(1)[0].expand(11))
    assert not torch.allclose(once.diagonal(1), once.diagonal(1)[0].expand(11), atol=1e-3)


# ----------------------------------------------------------------------------- the measurement


@pytest.mark.claims
@pytest.mark.parametrize("seed", [1, 2])
def test_the_chapters_claims_about_its_trained_models_hold_for_other_seeds(seed):
    """The chapter asserts what its digit-reversal comparison showed for seed 0 and says those
    results held for seeds 0 to 4 (benchmarks/rotary_seeds.py prints them all). Here the same
    claims are checked again on seeds 1 and 2, so that the suite covers three seeds on whatever
    torch it runs: about 20 s of one CPU thread per seed (two models trained)."""
    from benchmarks.rotary_seeds import failed_claims, measure

    assert failed_claims(measure(seed)) == []


# ----------------------------------------------------------------------------- the explorer

CORE_WIDGETS_IN_7_7 = {
    "VBox", "HBox", "HTML", "HTMLMath", "Output", "Dropdown", "IntSlider", "SelectionSlider",
    "FloatLogSlider", "Stack",
}  # fmt: skip


def test_the_explorer_uses_core_widgets():
    assert used_widget_types(RotaryPairsExplorer(book=False)) <= CORE_WIDGETS_IN_7_7


def test_the_rotary_score_stays_when_m_and_n_move_together_and_the_added_one_does_not():
    explorer = RotaryPairsExplorer(book=False)
    rotary_a, added_a = explorer.scores(3, 0, 10000.0)
    rotary_b, added_b = explorer.scores(6, 3, 10000.0)
    assert rotary_a == pytest.approx(rotary_b, abs=1e-12)
    assert abs(added_a - added_b) > 0.1
    assert f"<b>{rotary_a:+.4f}</b>" in explorer.describe(6, 3, 10000.0)
    assert "m &minus; n = 3" in explorer.describe(6, 3, 10000.0)


def test_the_explorer_draws_one_panel_per_pair():
    explorer = RotaryPairsExplorer(d=8, book=False)
    figure = explorer.draw(2, 1, 100.0)
    titles = [ax.get_title() for ax in figure.axes if ax.axison]
    assert titles == [t for t in titles if t.startswith("pair ")] and len(titles) == 4


@pytest.mark.book_states
def test_the_book_offers_the_prepared_values_and_stores_few_states():
    book = RotaryPairsExplorer(book=True)
    offered = {name: [value for _, value in book.controls[name].options] for name in book.controls}
    assert offered["m"] == list(ROPE_BOOK_POSITIONS)
    assert offered["n"] == [0, 3, 6]
    assert offered["base"] == list(ROPE_BOOK_BASES)
    assert len(book.states["figure"]) == 27 and len(book.states["readout"]) == 27


@pytest.mark.book_states
def test_the_book_explorer_shows_what_the_live_explorer_computes():
    assert_book_matches_live(
        lambda book: RotaryPairsExplorer(book=book, offer={"base": [100.0, 10000.0, 500000.0]}),
        most=4,
    )


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"d": 7}, "d must be even"),
        ({"d": 18}, "at most 16"),
        ({"m": -1}, "non-negative"),
        ({"base": 0.5}, "base must be"),
    ],
)
def test_the_explorer_refuses_bad_settings(settings, message):
    with pytest.raises((ValueError, TypeError), match=message):
        RotaryPairsExplorer(book=False, **settings)
