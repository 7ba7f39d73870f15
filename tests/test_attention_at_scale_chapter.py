"""The chapter "Attention for long contexts": its exercises (model answers pass, plausible
wrong answers fail with feedback that explains them) and its explorers (the book stores what
the live explorer shows)."""

from __future__ import annotations

import pytest
import torch
from explorer_checks import assert_book_matches_live

from conftest import failed_messages
from course_lib.attention import sliding_window_mask
from course_lib.exercises import (
    ChoiceExercise,
    CodeExercise,
    ValueExercise,
    evaluate,
    get_exercise,
    list_exercises,
)
from course_lib.explorers.beyond import (
    KVCacheExplorer,
    SlidingWindowExplorer,
    receptive_fields,
)
from solutions import SOLUTIONS

model_merge = SOLUTIONS["aas-merge-softmax-blocks"]  # carried with wrong answers

# ----------------------------------------------------------------------------- the exercises


def test_the_chapter_has_the_exercises_it_promises():
    exercises = {e.id: e for e in list_exercises("attention-at-scale")}
    assert isinstance(exercises["aas-sliding-window-mask"], CodeExercise)
    assert isinstance(exercises["aas-merge-softmax-blocks"], CodeExercise)
    assert isinstance(exercises["aas-kv-cache-bytes"], ValueExercise)
    assert isinstance(exercises["aas-flash-saves"], ChoiceExercise)


@pytest.mark.parametrize("exercise_id", sorted(k for k in SOLUTIONS if k.startswith("aas-")))
def test_the_model_answer_passes(exercise_id):
    assert evaluate(exercise_id, SOLUTIONS[exercise_id]).passed


def test_merging_the_two_blocks_of_every_case_is_attention_over_all_the_keys():
    """The cases are built from one set of scores split in two: the reference's merge must
    be the softmax over the whole row, the claim the exercise teaches."""
    exercise = get_exercise("aas-merge-softmax-blocks")
    draw = torch.Generator().manual_seed(0)
    scores, values = torch.randn(4, 7, generator=draw) * 30, torch.randn(7, 3, generator=draw)
    from course_lib.exercises.attention_at_scale import _merge_case

    case = _merge_case("check", scores, values, 3)
    expected = torch.softmax(scores, dim=-1) @ values
    torch.testing.assert_close(exercise.reference(*case.args), expected)
    assert len(exercise.cases(exercise.seed)) >= 7


# ------------------------------------------------------------------ wrong sliding windows


def window_one_too_wide(length, window):
    i, j = torch.arange(length)[:, None], torch.arange(length)[None, :]
    return (j <= i) & (j >= i - window)


def window_both_ways(length, window):
    i, j = torch.arange(length)[:, None], torch.arange(length)[None, :]
    return (i - j).abs() < window


def window_looking_ahead(length, window):
    i, j = torch.arange(length)[:, None], torch.arange(length)[None, :]
    return (j >= i) & (j < i + window)


def window_of_zeros_and_ones(length, window):
    i, j = torch.arange(length)[:, None], torch.arange(length)[None, :]
    return ((j <= i) & (j > i - window)).long()


def causal_only(length, window):
    return torch.ones(length, length, dtype=torch.bool).tril()


WRONG_WINDOWS = {
    window_one_too_wide: "first at [2, 0]: expected False, got True",
    window_both_ways: "first at [0, 1]: expected False, got True",
    window_looking_ahead: "first at [0, 1]: expected False, got True",
    window_of_zeros_and_ones: "expected dtype bool, got int64",
    causal_only: "first at [2, 0]: expected False, got True",
}


# ------------------------------------------------------------------ wrong merges


def average_of_the_outputs(max_a, sum_a, out_a, max_b, sum_b, out_b):
    return (out_a + out_b) / 2


def sums_not_rescaled(max_a, sum_a, out_a, max_b, sum_b, out_b):
    return (sum_a * out_a + sum_b * out_b) / (sum_a + sum_b)


def exponentials_of_the_raw_maxima(max_a, sum_a, out_a, max_b, sum_b, out_b):
    weight_a, weight_b = sum_a * torch.exp(max_a), sum_b * torch.exp(max_b)
    return (weight_a * out_a + weight_b * out_b) / (weight_a + weight_b)


def never_normalised(max_a, sum_a, out_a, max_b, sum_b, out_b):
    m = torch.maximum(max_a, max_b)
    return sum_a * torch.exp(max_a - m) * out_a + sum_b * torch.exp(max_b - m) * out_b


def larger_block_only(max_a, sum_a, out_a, max_b, sum_b, out_b):
    return torch.where(max_a >= max_b, out_a, out_b)


WRONG_BLOCK_MERGES = {
    average_of_the_outputs: "differ by more than the tolerance",
    sums_not_rescaled: "one block far larger than the other: ",
    exponentials_of_the_raw_maxima: "scores in the thousands (exp overflows without the maxima)",
    never_normalised: "differ by more than the tolerance",
    larger_block_only: "differ by more than the tolerance",
}


def test_the_raw_exponentials_answer_is_right_until_the_scores_overflow():
    """The naive merge is correct maths: only the overflow case catches it (inf / inf)."""
    result = evaluate("aas-merge-softmax-blocks", exponentials_of_the_raw_maxima)
    failed = [check.name for check in result.checks if not check.passed]
    assert failed == ["scores in the thousands (exp overflows without the maxima)"]


def test_forgetting_to_rescale_the_sums_is_right_only_when_the_maxima_agree():
    max_a = max_b = torch.tensor([[2.0]])
    out_a, out_b = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])
    args = (max_a, torch.tensor([[3.0]]), out_a, max_b, torch.tensor([[1.0]]), out_b)
    torch.testing.assert_close(sums_not_rescaled(*args), model_merge(*args))


@pytest.mark.parametrize(
    ("exercise_id", "wrong", "message"),
    [
        *[("aas-sliding-window-mask", wrong, message) for wrong, message in WRONG_WINDOWS.items()],
        *[
            ("aas-merge-softmax-blocks", wrong, message)
            for wrong, message in WRONG_BLOCK_MERGES.items()
        ],
    ],
    ids=lambda value: getattr(value, "__name__", None),
)
def test_a_plausible_wrong_answer_fails_with_a_message_that_says_what_differs(
    exercise_id, wrong, message
):
    assert message in failed_messages(exercise_id, wrong)


def test_the_sliding_window_check_refuses_the_librarys_mask():
    def borrowed(length, window):
        return sliding_window_mask(length, window)

    assert not evaluate("aas-sliding-window-mask", borrowed).passed


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("65536", "a key as well as a value"),
        ("4096", "one layer's cache"),
        ("524288", "counts the 32 query heads"),
        ("262144", "float32"),
    ],
)
def test_a_known_wrong_cache_size_gets_its_explanation(answer, message):
    assert message in failed_messages("aas-kv-cache-bytes", answer)


def test_the_cache_question_matches_the_library():
    from course_lib.cache import cache_bytes_per_token

    expected = get_exercise("aas-kv-cache-bytes").expected().item()
    assert expected == cache_bytes_per_token(32, 8, 128, torch.bfloat16) == 131_072


@pytest.mark.parametrize(
    ("answer", "message"),
    [("a", "does more arithmetic"), ("c", "exact"), ("d", "grouped-query")],
)
def test_a_wrong_idea_of_flash_attention_gets_its_feedback(answer, message):
    assert message in failed_messages("aas-flash-saves", answer)


# ----------------------------------------------------------------------------- explorers


@pytest.mark.parametrize(("window", "layers"), [(2, 1), (3, 2), (4, 3), (6, 4), (16, 2)])
def test_receptive_fields_are_k_times_w_minus_1_tokens_back(window, layers):
    fields = receptive_fields(16, window, layers)
    assert fields.shape == (layers, 16, 16)
    i, j = torch.arange(16)[:, None], torch.arange(16)[None, :]
    for k in range(1, layers + 1):
        assert torch.equal(fields[k - 1], (j <= i) & (j >= i - k * (window - 1)))


def test_receptive_fields_follow_from_a_model_s_gradients():
    """The explorer's boolean reach is what a real model's outputs depend on."""
    from course_lib.families import DecoderOnlyModel

    torch.manual_seed(0)
    model = DecoderOnlyModel(12, 16, 2, 3, 32, max_len=12, pad_id=None, attention_window=3)
    model = model.double().eval()
    x = model.embed(torch.arange(12)[None]).detach().requires_grad_()
    mask = model.attention_mask(torch.arange(12)[None])
    h = x
    fields = receptive_fields(12, 3, 3)
    for k, layer in enumerate(model.encoder.layers):
        h = layer(h, mask)
        (grad,) = torch.autograd.grad(h[0, 11].sum(), x, retain_graph=True)
        assert torch.equal(grad[0].abs().sum(dim=-1) > 0, fields[k, 11])


def test_the_sliding_window_readout_states_the_span_and_the_dense_cost():
    explorer = SlidingWindowExplorer(window=4, layers=3, query=15, book=False)
    text = explorer.parts["readout"].value
    assert "depends on tokens 6 to 15: <b>10</b> tokens" in text
    assert "still computes all 256" in text
    near_start = SlidingWindowExplorer(window=4, layers=3, query=5, book=False)
    assert "<b>6</b> tokens, every token up to it" in near_start.parts["readout"].value


def test_the_sliding_window_field_fills_one_box_per_token_seen_and_layer():
    explorer = SlidingWindowExplorer(window=3, layers=2, query=15, book=False)
    html = explorer.parts["field"].value
    assert html.count("<span style='display: inline-block; width: 12px") == 2 * 16
    assert html.count("background: currentColor") == 2  # the query itself, in each layer
    assert html.count("background: color-mix") == 2 + 4  # 2 then 4 earlier tokens


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [({"window": 0}, ValueError), ({"layers": 0}, ValueError), ({"query": 16}, ValueError)],
)
def test_the_sliding_window_explorer_refuses_bad_settings(kwargs, error):
    with pytest.raises(error):
        SlidingWindowExplorer(book=False, **kwargs)


def test_the_kv_cache_readout_computes_llama_2_70b():
    explorer = KVCacheExplorer(kv_heads=8, context=4096, dtype="bfloat16", book=False)
    text = explorer.parts["readout"].value
    assert "320 KiB" in text and "1.25 GiB" in text and "8&times; smaller" in text
    explorer.set(kv_heads=64)
    assert "2,560 KiB" in explorer.parts["readout"].value
    explorer.set(kv_heads=1, dtype="float32", context=131_072)
    text = explorer.parts["readout"].value
    assert "80 KiB" in text and "10.00 GiB" in text


@pytest.mark.book_states
def test_the_sliding_window_book_shows_what_the_live_explorer_computes():
    book = assert_book_matches_live(SlidingWindowExplorer, most=8)
    assert {part: len(states) for part, states in book.states.items()} == {
        "field": 48,
        "readout": 48,
    }


@pytest.mark.book_states
def test_the_kv_cache_book_shows_what_the_live_explorer_computes():
    book = assert_book_matches_live(KVCacheExplorer, most=8)
    assert len(book.states["readout"]) == 27


@pytest.mark.book_states
def test_the_sliding_window_book_offers_the_first_values_and_at_least_three():
    book = SlidingWindowExplorer(window=5, layers=6, query=7, book=True)
    offered = {
        name: [value for _, value in book._specs[name].book_options({})]
        for name in ("window", "layers", "query")
    }
    assert offered == {
        "window": [2, 3, 4, 5, 6],
        "layers": [1, 2, 3, 4, 6],
        "query": [5, 7, 10, 15],
    }


# ----------------------------------------------------------------------------- the measurement


@pytest.mark.claims
@pytest.mark.parametrize("seed", [1, 2])
def test_the_chapters_claims_about_key_value_sharing_hold_for_other_seeds(seed):
    """The chapter asserts, for its seed 0, that multi-head and grouped attention write at
    least 99% of the held-out numbers and multi-query at least 90%, which held for seeds 0 to
    4 (benchmarks/sharing_seeds.py). Seeds 1 and 2 here make three seeds on whatever torch the
    tests run (seed 2 is the closest: 91.1% for multi-query): three models trained for two
    epochs, about 35 s of one CPU thread per seed."""
    from benchmarks.sharing_seeds import failed_claims, measure

    assert failed_claims(measure(seed)) == []
