"""Exercises of the chapters "Transformers at a glance" and "Input embeddings": the model
answers pass (see test_exercises.py), plausible wrong answers fail with a useful message."""

from __future__ import annotations

import pytest
import torch

from conftest import failed_messages
from course_lib.exercises import (
    ChoiceExercise,
    CodeExercise,
    ValueExercise,
    get_exercise,
    list_exercises,
)
from solutions import SOLUTIONS

model_nearest_codes = SOLUTIONS["glance-nearest-codes"]  # carried with wrong answers
model_skipgram_pairs = SOLUTIONS["w2v-skipgram-pairs"]  # carried with wrong answers

# ----------------------------------------------------------------------------- the chapters


def test_the_opening_chapters_have_the_exercises_the_course_promises():
    glance = {e.id: e for e in list_exercises("transformers-at-a-glance")}
    assert isinstance(glance["glance-architecture"], ChoiceExercise)
    assert isinstance(glance["glance-vit-patches"], ValueExercise)
    assert isinstance(glance["glance-nearest-codes"], CodeExercise)
    embeddings = {e.id: e for e in list_exercises("input-embeddings")}
    assert isinstance(embeddings["emb-one-hot-lookup"], CodeExercise)
    assert isinstance(embeddings["emb-gradient-rows"], ValueExercise)
    assert isinstance(embeddings["w2v-skipgram-pairs"], CodeExercise)


def test_exercises_are_listed_in_the_reading_order_of_the_book():
    chapters = [exercise.chapter for exercise in list_exercises()]
    order = ["transformers-at-a-glance", "input-embeddings", "positional-encoding"]
    seen = [chapter for chapter in dict.fromkeys(chapters) if chapter in order]
    assert seen == order


def test_asking_for_the_expected_values_leaves_the_global_random_state_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    for exercise in list_exercises():
        exercise.checks  # noqa: B018 -- builds the expected values and the cases
    assert torch.equal(torch.rand(3), expected)


# ----------------------------------------------------------------------------- frames to ids


def nearest_by_dot_product(frames, codebook):
    return (frames @ codebook.T).argmax(dim=1)


def farthest_entry(frames, codebook):
    return torch.cdist(frames, codebook).argmax(dim=1)


def minimum_over_the_wrong_axis(frames, codebook):
    return torch.cdist(frames, codebook).argmin(dim=0)


def ids_as_floats(frames, codebook):
    return torch.cdist(frames, codebook).argmin(dim=1).float()


def the_nearest_entry_itself(frames, codebook):
    return codebook[torch.cdist(frames, codebook).argmin(dim=1)]


WRONG_CODES = {
    nearest_by_dot_product: "first at [0]: expected +0, got +1",
    farthest_entry: "differ by more than the tolerance",
    minimum_over_the_wrong_axis: "expected shape (4,), got (3,)",
    ids_as_floats: "expected dtype int64, got float32",
    the_nearest_entry_itself: "expected shape (4,), got (4, 2)",
}


def test_the_dot_product_answer_fails_on_the_hand_worked_case_for_the_right_reason():
    frames = torch.tensor([[1.0, 1.0]])
    codebook = torch.tensor([[0.0, 0.0], [3.0, 3.0]])
    # [3, 3] has the larger dot product with [1, 1], but [0, 0] is closer
    assert nearest_by_dot_product(frames, codebook).item() == 1
    assert model_nearest_codes(frames, codebook).item() == 0


# ----------------------------------------------------------------------------- choice and values


@pytest.mark.parametrize(
    "answer, message",
    [("a", "causal mask"), ("c", "more than the task needs"), ("d", "[CLS]")],
)
def test_a_wrong_architecture_fails_with_its_feedback(answer, message):
    assert message in failed_messages("glance-architecture", answer)


@pytest.mark.parametrize(
    "answer, message",
    [
        ("14, 768", "number of patches along one side"),
        ("196, 256", "three numbers (red, green, blue)"),
        ("196, 48", "the whole square"),
    ],
)
def test_a_known_wrong_patch_count_gets_its_explanation(answer, message):
    assert message in failed_messages("glance-vit-patches", answer)


@pytest.mark.parametrize(
    "answer, message",
    [
        ("4, 2", "padding_idx stops its gradient"),
        ("3, 1", "the gradients of the two lookups add up"),
        ("8, 1", "count rows of the table, not positions"),
        ("5, 2", "not the non-padding positions"),
    ],
)
def test_a_known_wrong_gradient_count_gets_its_explanation(answer, message):
    assert message in failed_messages("emb-gradient-rows", answer)


def test_the_gradient_question_matches_what_torch_computes():
    table = torch.nn.Embedding(10, 4, padding_idx=0)
    table(torch.tensor([[5, 2, 5, 0], [7, 2, 0, 0]])).sum().backward()
    rows = (table.weight.grad != 0).any(dim=1).nonzero().flatten().tolist()
    assert rows == [2, 5, 7]
    assert table.weight.grad[5].tolist() == [2.0] * 4
    assert get_exercise("emb-gradient-rows").expected().tolist() == [3.0, 2.0]


# ----------------------------------------------------------------------------- one-hot lookup


def vocabulary_from_the_ids(ids, weight):
    one_hot = torch.nn.functional.one_hot(ids, int(ids.max()) + 1).to(weight.dtype)
    return one_hot @ weight


def integer_one_hot(ids, weight):
    return torch.nn.functional.one_hot(ids, weight.shape[0]) @ weight


def summed_over_the_wrong_axis(ids, weight):
    one_hot = torch.nn.functional.one_hot(ids, weight.shape[0]).to(weight.dtype)
    return (one_hot[..., :, None] * weight).sum(dim=-1)  # sums d_model away, not the ids


def one_hot_only(ids, weight):
    return torch.nn.functional.one_hot(ids, weight.shape[0]).to(weight.dtype)


def ids_counted_from_one(ids, weight):
    one_hot = torch.nn.functional.one_hot(ids, weight.shape[0] + 1)[..., 1:]
    return one_hot.to(weight.dtype) @ weight


WRONG_LOOKUPS = {
    vocabulary_from_the_ids: "RuntimeError: mat1 and mat2 shapes cannot be multiplied",
    integer_one_hot: "RuntimeError",  # a matrix product of long and float tensors
    summed_over_the_wrong_axis: "expected shape (2, 3, 2), got (2, 3, 5)",
    one_hot_only: "expected shape (2, 3, 2), got (2, 3, 5)",
    ids_counted_from_one: "first at [0, 0, 0]: expected +2, got +0",
}


# ----------------------------------------------------------------------------- skip-gram pairs


def flattened_corpus(sentences, window):
    flat = [word for sentence in sentences for word in sentence]
    return model_skipgram_pairs([flat], window)


def window_one_short_on_the_right(sentences, window):
    pairs = []
    for sentence in sentences:
        for i, centre in enumerate(sentence):
            for j in range(max(0, i - window), min(len(sentence), i + window)):
                if j != i:
                    pairs.append([centre, sentence[j]])
    return torch.tensor(pairs, dtype=torch.long).reshape(-1, 2)


def centre_paired_with_itself(sentences, window):
    pairs = []
    for sentence in sentences:
        for i, centre in enumerate(sentence):
            for j in range(max(0, i - window), min(len(sentence), i + window + 1)):
                pairs.append([centre, sentence[j]])
    return torch.tensor(pairs, dtype=torch.long).reshape(-1, 2)


def negative_slice_start(sentences, window):
    pairs = []
    for sentence in sentences:
        for i, centre in enumerate(sentence):
            left = sentence[i - window : i]  # wraps around (or is empty) near the start
            right = sentence[i + 1 : i + window + 1]
            pairs += [[centre, word] for word in left + right]
    return torch.tensor(pairs, dtype=torch.long).reshape(-1, 2)


def context_then_centre(sentences, window):
    return model_skipgram_pairs(sentences, window).flip(1)


def list_of_pairs(sentences, window):
    return model_skipgram_pairs(sentences, window).tolist()


WRONG_PAIRS = {
    flattened_corpus: "pairs never cross sentences: expected shape (8, 2), got (14, 2)",
    window_one_short_on_the_right: "expected shape (6, 2), got (3, 2)",
    centre_paired_with_itself: "expected shape (6, 2), got (10, 2)",
    negative_slice_start: "window wider than the sentence: expected shape (6, 2), got (3, 2)",
    context_then_centre: "first at [0, 0]: expected +10, got +11",
    list_of_pairs: "expected a torch.Tensor, got list",
}


def test_the_pairs_of_a_corpus_without_pairs_have_shape_0_by_2():
    exercise = get_exercise("w2v-skipgram-pairs")
    empty = exercise.reference([[4], [5]], 2)
    assert empty.shape == (0, 2) and empty.dtype == torch.long


# ----------------------------------------------------------------------------- all code exercises

WRONG_ANSWERS = [
    *[("glance-nearest-codes", wrong, message) for wrong, message in WRONG_CODES.items()],
    *[("emb-one-hot-lookup", wrong, message) for wrong, message in WRONG_LOOKUPS.items()],
    *[("w2v-skipgram-pairs", wrong, message) for wrong, message in WRONG_PAIRS.items()],
]


@pytest.mark.parametrize(
    "exercise_id, wrong, message", WRONG_ANSWERS, ids=lambda v: getattr(v, "__name__", "")
)
def test_a_plausible_wrong_answer_fails_with_a_message_that_says_what_differs(
    exercise_id, wrong, message
):
    assert message in failed_messages(exercise_id, wrong)


def test_each_code_exercise_has_at_least_three_plausible_wrong_answers():
    for chapter in ("transformers-at-a-glance", "input-embeddings"):
        for exercise in list_exercises(chapter):
            if exercise.kind == "code":
                assert sum(e == exercise.id for e, _, _ in WRONG_ANSWERS) >= 3, exercise.id


def nearest_codes_by_the_library(frames, codebook):
    from course_lib.discretize import Codebook

    return Codebook(codebook).encode(frames)


def lookup_by_the_library(ids, weight):
    from course_lib.embeddings import one_hot_lookup

    return one_hot_lookup(ids, weight)


def lookup_by_the_course_embedding(ids, weight):
    from course_lib.embeddings import TokenEmbedding

    table = TokenEmbedding(weight.size(0), weight.size(1))
    table.weight.data.copy_(weight)
    return table(ids)


def pairs_by_the_library(sentences, window):
    from course_lib.word2vec import skipgram_pairs

    return torch.stack(list(skipgram_pairs(sentences, window)), dim=1)


@pytest.mark.parametrize(
    "exercise_id, answer, name",
    [
        ("glance-nearest-codes", nearest_codes_by_the_library, "discretize import Codebook"),
        ("emb-one-hot-lookup", lookup_by_the_library, "embeddings import one_hot_lookup"),
        ("emb-one-hot-lookup", lookup_by_the_course_embedding, "embeddings import TokenEmbedding"),
        ("w2v-skipgram-pairs", pairs_by_the_library, "word2vec import skipgram_pairs"),
    ],
)
def test_a_check_does_not_let_the_answer_call_the_library(exercise_id, answer, name):
    message = failed_messages(exercise_id, answer)
    assert message.startswith("source: the code uses course_lib (line ")
    assert f": from course_lib.{name});" in message
