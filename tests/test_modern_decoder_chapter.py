"""The chapter "A modern decoder": its exercises (the model answers pass, plausible wrong
answers fail with their explanation) and its explorer (the book shows what the live explorer
computes)."""

from __future__ import annotations

import pytest
import torch

from conftest import failed_messages
from course_lib.exercises import (
    ChoiceExercise,
    CodeExercise,
    ValueExercise,
    evaluate,
    list_exercises,
)
from solutions import SOLUTIONS

model_row_order = SOLUTIONS["modern-rotary-row-order"]

# ----------------------------------------------------------------------------- exercises


def test_the_chapter_has_the_exercises_the_course_promises():
    exercises = {e.id: e for e in list_exercises("a-modern-decoder")}
    assert isinstance(exercises["modern-layer-parameters"], ValueExercise)
    assert isinstance(exercises["modern-hidden-size"], ValueExercise)
    assert isinstance(exercises["modern-position-table"], ChoiceExercise)
    assert isinstance(exercises["modern-rotary-row-order"], CodeExercise)


@pytest.mark.parametrize("exercise", [e.id for e in list_exercises("a-modern-decoder")])
def test_the_model_answers_pass(exercise):
    result = evaluate(exercise, SOLUTIONS[exercise])
    assert result.status == "passed", str(result)


def test_the_layer_count_is_the_sum_of_its_tensors():
    d, d_kv, d_ff = 512, 128, 1376
    assert SOLUTIONS["modern-layer-parameters"] == str(
        2 * d * d + 2 * d * d_kv + 3 * d * d_ff + 2 * d
    )


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("2065408", "three, $W_1$ (the gate)"),  # two feed-forward matrices
        ("3163136", "not 512"),  # keys and values with h heads
        ("2774464", "each of the seven linear maps"),  # biases in the linear maps
        ("2775488", "RMSNorm has a gain only"),  # and in the norms
        ("2768896", "two RMSNorms"),  # norms forgotten
    ],
)
def test_a_wrong_layer_count_fails_with_its_explanation(answer, message):
    assert message in failed_messages("modern-layer-parameters", answer)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("43690", "before the multiplier"),
        ("52428", "rounded up"),
        ("49152", "rounds down"),
        ("65536", "two thirds"),
        ("45056", "without the multiplier"),
    ],
)
def test_a_wrong_hidden_size_fails_with_its_explanation(answer, message):
    assert message in failed_messages("modern-hidden-size", answer)


@pytest.mark.parametrize(
    ("answer", "message"),
    [("a", "knows nothing of positions"), ("c", "weak sense"), ("d", "same at every position")],
)
def test_a_wrong_reason_for_the_missing_position_table_fails_with_its_feedback(answer, message):
    assert message in failed_messages("modern-position-table", answer)


def identity_order(d_head):
    return torch.arange(d_head)


def inverse_order(d_head):
    """Where each of Llama's rows goes in ours: the inverse permutation."""
    return torch.argsort(model_row_order(d_head))


def pairs_one_apart_from_the_half(d_head):
    half = d_head // 2
    return torch.stack((torch.arange(half), (torch.arange(half) + half + 1) % d_head), 1).flatten()


def order_as_floats(d_head):
    return model_row_order(d_head).float()


def order_as_a_list(d_head):
    return model_row_order(d_head).tolist()


WRONG_ORDERS = {
    identity_order: "differ by more than the tolerance",
    inverse_order: "differ by more than the tolerance",
    pairs_one_apart_from_the_half: "differ by more than the tolerance",
    order_as_floats: "expected dtype int64, got float32",
    order_as_a_list: "expected a torch.Tensor, got list",
}


@pytest.mark.parametrize("answer", list(WRONG_ORDERS), ids=lambda f: f.__name__)
def test_wrong_row_orders_fail_for_the_right_reason(answer):
    assert WRONG_ORDERS[answer] in failed_messages("modern-rotary-row-order", answer)


def test_the_inverse_order_agrees_only_where_it_cannot_differ():
    """For one pair the order is [0, 1] either way: the cases with larger heads catch it."""
    assert torch.equal(inverse_order(2), model_row_order(2))
    assert not torch.equal(inverse_order(8), model_row_order(8))


# ----------------------------------------------------------------------------- the measurement


@pytest.mark.claims
def test_the_chapters_claims_about_its_trained_models_hold_for_a_third_seed():
    """The chapter trains its three decoders with seeds 0 and 1 and asserts, for both, the
    order of their exact match and final loss, the lowest first loss of the Llama-style model
    and what the untrained models score. Seed 2 here makes three seeds, on whatever torch the
    tests run: three models trained for one epoch, about 20 s of one CPU thread."""
    from benchmarks.modern_decoder_seeds import failed_claims, measure

    assert failed_claims(measure(2)) == []


# ----------------------------------------------------------------------------- explorer


@pytest.mark.book_states
def test_the_book_explorer_stores_what_the_live_one_shows():
    from explorer_checks import assert_book_matches_live

    from course_lib.explorers.beyond import ModernDecoderExplorer

    book = assert_book_matches_live(ModernDecoderExplorer, most=8)
    assert len(book.states["ledger"]) == 2 * 3 * 3 * 2 * 2 * 2 * 2


def test_the_explorers_llama_settings_give_llama_2_7b_exactly():
    from course_lib.explorers.beyond import modern_ledger, modern_settings

    settings = modern_settings(
        "Llama-2-7B's sizes", "rotary", True, True, "multi-head", False, False
    )
    ledger = modern_ledger(settings)
    assert ledger["total"] == 6_738_415_616
    assert ledger["cache"] == 2 * 32 * 32 * 128 * 2  # 512 KiB per token in 16 bits
    grouped = modern_ledger({**settings, "num_kv_heads": 8})
    assert grouped["cache"] == ledger["cache"] // 4


def test_the_explorers_ledger_from_one_layer_is_the_full_models():
    from course_lib.explorers.beyond import modern_ledger, modern_settings
    from course_lib.families import DecoderOnlyModel, parameter_ledger

    settings = modern_settings(
        "the chapter's model", "learned", False, True, "grouped", True, False
    )
    full = parameter_ledger(DecoderOnlyModel(**settings))
    assert {part: n for part, n in modern_ledger(settings).items() if part != "cache"} == full


def test_the_explorer_refuses_unknown_choices():
    from course_lib.explorers.beyond import ModernDecoderExplorer

    with pytest.raises(ValueError, match="positions must be one of"):
        ModernDecoderExplorer(positions="alibi", book=False)
