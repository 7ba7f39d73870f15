"""The exercises of the chapters on the Transformer at work: model answers pass (see
test_exercises.py), plausible wrong answers fail with a message that says what is wrong."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from conftest import failed_messages
from course_lib.answers.runner import TableScorer
from course_lib.exercises import evaluate, get_exercise, list_exercises
from solutions import SOLUTIONS

model_greedy_decoding = SOLUTIONS["greedy-decoding"]  # carried with wrong answers

CHAPTERS = (
    "training-a-translator",
    "training-recipe",
    "decoding-and-inference-cost",
    "model-families",
)


# ----------------------------------------------------------------------------- the loss


def loss_without_the_shift(logits, tgt_ids, pad_id):
    labels = tgt_ids[:, :-1]  # the decoder's input, not the next tokens
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=pad_id)


def loss_counting_the_padding(logits, tgt_ids, pad_id):
    labels = tgt_ids[:, 1:]
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten())


def mean_of_the_sentence_means(logits, tgt_ids, pad_id):
    labels = tgt_ids[:, 1:]
    losses = F.cross_entropy(logits.transpose(1, 2), labels, reduction="none")
    real = labels != pad_id
    return ((losses * real).sum(1) / real.sum(1)).mean()


def loss_of_the_probabilities(logits, tgt_ids, pad_id):
    labels = tgt_ids[:, 1:]
    picked = torch.softmax(logits, -1).gather(-1, labels[..., None])[..., 0]
    real = labels != pad_id
    return -(picked * real).sum() / real.sum()


WRONG_LOSSES = {
    loss_without_the_shift: "expected",
    loss_counting_the_padding: "expected",
    mean_of_the_sentence_means: "expected",
    loss_of_the_probabilities: "expected",
}


def test_the_loss_of_one_unpadded_sentence_is_the_mean_cross_entropy_of_its_tokens():
    exercise = get_exercise("teacher-forcing-loss")
    logits, tgt_ids, pad_id = exercise.cases(exercise.seed)[0].args
    by_hand = -sum(
        torch.log_softmax(logits[0, t], -1)[tgt_ids[0, t + 1]] for t in range(logits.size(1))
    ) / logits.size(1)
    torch.testing.assert_close(exercise.reference(logits, tgt_ids, pad_id), by_hand)


def test_mean_of_the_sentence_means_passes_only_where_all_sentences_have_one_length():
    result = evaluate("teacher-forcing-loss", mean_of_the_sentence_means)
    assert result.checks[1].passed  # one sentence: the same number
    assert not result.checks[2].passed  # lengths 1 and 4


# ----------------------------------------------------------------------------- the schedule


def rates_counting_from_zero(steps, d_model, warmup_steps):
    steps = steps.to(torch.float64) - 1  # the first step as step 0
    return d_model**-0.5 * torch.minimum(steps**-0.5, steps * warmup_steps**-1.5)


def rates_without_the_d_model_factor(steps, d_model, warmup_steps):
    steps = steps.to(torch.float64)
    return torch.minimum(steps**-0.5, steps * warmup_steps**-1.5)


def rates_with_the_maximum(steps, d_model, warmup_steps):
    steps = steps.to(torch.float64)
    return d_model**-0.5 * torch.maximum(steps**-0.5, steps * warmup_steps**-1.5)


def rates_with_warmup_to_the_minus_half(steps, d_model, warmup_steps):
    steps = steps.to(torch.float64)
    return d_model**-0.5 * torch.minimum(steps**-0.5, steps * warmup_steps**-0.5)


WRONG_SCHEDULES = {
    rates_counting_from_zero: "expected",
    rates_without_the_d_model_factor: "expected",
    rates_with_the_maximum: "expected",
    rates_with_warmup_to_the_minus_half: "expected",
}


# ----------------------------------------------------------------------------- the smoothed loss


def smoothing_over_the_other_classes(logits, labels, epsilon, pad_id):
    k = logits.size(-1)
    real = labels != pad_id
    log_p = torch.log_softmax(logits[real], -1)
    one_hot = F.one_hot(labels[real], k)
    target = (1 - epsilon) * one_hot + epsilon / (k - 1) * (1 - one_hot)
    return -(target * log_p).sum(-1).mean()


def smoothing_counting_the_padding(logits, labels, epsilon, pad_id):
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), label_smoothing=epsilon)


def smoothing_without_the_1_minus_epsilon(logits, labels, epsilon, pad_id):
    k = logits.size(-1)
    real = labels != pad_id
    log_p = torch.log_softmax(logits[real], -1)
    target = F.one_hot(labels[real], k) + epsilon / k  # sums to 1 + epsilon
    return -(target * log_p).sum(-1).mean()


def smoothing_of_the_probabilities(logits, labels, epsilon, pad_id):
    k = logits.size(-1)
    real = labels != pad_id
    p = torch.softmax(logits[real], -1)
    target = (1 - epsilon) * F.one_hot(labels[real], k) + epsilon / k
    return -(target * p).sum(-1).mean()


WRONG_SMOOTHED_LOSSES = {
    smoothing_over_the_other_classes: "expected",
    smoothing_counting_the_padding: "expected",
    smoothing_without_the_1_minus_epsilon: "expected",
    smoothing_of_the_probabilities: "expected",
}


def test_the_smoothed_loss_with_epsilon_0_is_the_teacher_forcing_loss():
    exercise = get_exercise("label-smoothed-loss")
    logits, labels, epsilon, pad_id = exercise.cases(exercise.seed)[3].args
    assert epsilon == 0.0
    real = labels != pad_id
    torch.testing.assert_close(
        exercise.reference(logits, labels, epsilon, pad_id),
        F.cross_entropy(logits[real], labels[real]),
    )


def test_the_schedule_exercise_peaks_at_the_warmup_step():
    exercise = get_exercise("transformer-schedule")
    steps, d_model, warmup = exercise.cases(exercise.seed)[1].args
    rates = exercise.reference(steps, d_model, warmup)
    assert rates.argmax() == 1 and rates[1] == pytest.approx((512 * 4000) ** -0.5)


# ----------------------------------------------------------------------------- greedy


def greedy_feeding_the_last_token_only(model, prompt, eos_id, max_new_tokens):
    ids = prompt
    finished = torch.zeros(ids.size(0), dtype=torch.bool)
    for _ in range(max_new_tokens):
        token = model(ids[:, -1:]).argmax(-1).masked_fill(finished, 0)
        ids = torch.cat([ids, token[:, None]], 1)
        finished |= token == eos_id
        if finished.all():
            break
    return ids


def greedy_without_stopping(model, prompt, eos_id, max_new_tokens):
    ids = prompt
    finished = torch.zeros(ids.size(0), dtype=torch.bool)
    for _ in range(max_new_tokens):
        token = model(ids).argmax(-1).masked_fill(finished, 0)
        ids = torch.cat([ids, token[:, None]], 1)
        finished |= token == eos_id
    return ids


def greedy_without_padding_after_eos(model, prompt, eos_id, max_new_tokens):
    ids = prompt
    finished = torch.zeros(ids.size(0), dtype=torch.bool)
    for _ in range(max_new_tokens):
        token = model(ids).argmax(-1)
        ids = torch.cat([ids, token[:, None]], 1)
        finished |= token == eos_id
        if finished.all():
            break
    return ids


def greedy_stopping_at_the_first_eos(model, prompt, eos_id, max_new_tokens):
    ids = prompt
    for _ in range(max_new_tokens):
        token = model(ids).argmax(-1)
        ids = torch.cat([ids, token[:, None]], 1)
        if (token == eos_id).any():
            break
    return ids


def greedy_over_the_batch_axis(model, prompt, eos_id, max_new_tokens):
    ids = prompt
    for _ in range(max_new_tokens):
        scores = model(ids)
        token = scores.argmax(dim=0)[: ids.size(0)]  # the best sequence per token
        ids = torch.cat([ids, token[:, None]], 1)
        if (ids == eos_id).any(1).all():
            break
    return ids


WRONG_GREEDY = {
    greedy_feeding_the_last_token_only: "expected",
    greedy_without_stopping: "expected shape",
    greedy_without_padding_after_eos: "expected",
    greedy_stopping_at_the_first_eos: "expected shape",
    greedy_over_the_batch_axis: "expected",
}


def test_the_table_scorer_scores_from_the_last_token_the_length_and_the_first_token():
    by_position = torch.arange(3 * 4 * 4, dtype=torch.float32).reshape(3, 4, 4)
    by_start = torch.full((4, 4), 100.0) * torch.arange(4)[:, None]
    scorer = TableScorer(by_position, by_start)
    scores = scorer(torch.tensor([[2, 1], [3, 0]]))
    assert torch.equal(scores[0], by_position[1, 1] + by_start[2])
    assert torch.equal(scores[1], by_position[1, 0] + by_start[3])


@pytest.mark.parametrize(
    ("ids", "error", "message"),
    [
        (torch.tensor([1, 2]), ValueError, r"ids of shape \(batch, t\), got \(2,\)"),
        (torch.tensor([[1.0, 2.0]]), TypeError, "integer token ids"),
        (torch.ones(1, 4, dtype=torch.long), ValueError, "1 to 3 tokens per sequence, got 4"),
        (torch.tensor([[1, 7]]), ValueError, r"token ids must be in \[0, 4\)"),
    ],
)
def test_the_table_scorer_refuses_bad_ids_with_a_message(ids, error, message):
    scorer = TableScorer(torch.zeros(3, 4, 4), torch.zeros(4, 4))
    with pytest.raises(error, match=message):
        scorer(ids)


def test_a_table_scorer_needs_square_float_tables_of_one_vocabulary():
    with pytest.raises(ValueError, match="by_position must be"):
        TableScorer(torch.zeros(3, 4, 5), torch.zeros(4, 4))
    with pytest.raises(ValueError, match="by_start must be"):
        TableScorer(torch.zeros(3, 4, 4), torch.zeros(5, 5))
    with pytest.raises(TypeError, match="floating-point"):
        TableScorer(torch.zeros(3, 4, 4, dtype=torch.long), torch.zeros(4, 4))


# ----------------------------------------------------------------------------- the cache step


def cache_step_attending_before_appending(x, cached_keys, cached_values, w_q, w_k, w_v):
    q = x @ w_q
    weights = torch.softmax(q @ cached_keys.transpose(1, 2) / math.sqrt(q.size(-1)), -1)
    output = weights @ cached_values  # the new token does not see itself
    keys = torch.cat([cached_keys, x @ w_k], 1)
    values = torch.cat([cached_values, x @ w_v], 1)
    return output, keys, values


def cache_step_prepending(x, cached_keys, cached_values, w_q, w_k, w_v):
    q = x @ w_q
    keys = torch.cat([x @ w_k, cached_keys], 1)  # the newest position first
    values = torch.cat([x @ w_v, cached_values], 1)
    weights = torch.softmax(q @ keys.transpose(1, 2) / math.sqrt(q.size(-1)), -1)
    return weights @ values, keys, values


def cache_step_without_scaling(x, cached_keys, cached_values, w_q, w_k, w_v):
    q = x @ w_q
    keys = torch.cat([cached_keys, x @ w_k], 1)
    values = torch.cat([cached_values, x @ w_v], 1)
    weights = torch.softmax(q @ keys.transpose(1, 2), -1)
    return weights @ values, keys, values


def cache_step_caching_the_queries(x, cached_keys, cached_values, w_q, w_k, w_v):
    q = x @ w_q
    keys = torch.cat([cached_keys, q], 1)  # the query stored as the key
    values = torch.cat([cached_values, x @ w_v], 1)
    weights = torch.softmax(q @ keys.transpose(1, 2) / math.sqrt(q.size(-1)), -1)
    return weights @ values, keys, values


def cache_step_along_the_features(x, cached_keys, cached_values, w_q, w_k, w_v):
    q = x @ w_q
    keys = torch.cat([cached_keys, x @ w_k], -1)  # the wrong axis
    values = torch.cat([cached_values, x @ w_v], -1)
    return q, keys, values


WRONG_CACHE_STEPS = {
    cache_step_attending_before_appending: "output: 4 of 4 entries differ",
    cache_step_prepending: "keys: 16 of 16 entries differ",
    cache_step_without_scaling: "output: 4 of 4 entries differ",
    cache_step_caching_the_queries: "keys: 4 of 4 entries differ",
    cache_step_along_the_features: "Sizes of tensors must match",
}


# ----------------------------------------------------------------------------- together

WRONG_ANSWERS = [
    *[("teacher-forcing-loss", wrong, message) for wrong, message in WRONG_LOSSES.items()],
    *[("transformer-schedule", wrong, message) for wrong, message in WRONG_SCHEDULES.items()],
    *[("label-smoothed-loss", wrong, message) for wrong, message in WRONG_SMOOTHED_LOSSES.items()],
    *[("greedy-decoding", wrong, message) for wrong, message in WRONG_GREEDY.items()],
    *[("kv-cache-step", wrong, message) for wrong, message in WRONG_CACHE_STEPS.items()],
]


@pytest.mark.parametrize(
    "exercise_id, wrong, message", WRONG_ANSWERS, ids=lambda v: getattr(v, "__name__", "")
)
def test_a_plausible_wrong_answer_fails_with_a_message_that_says_what_differs(
    exercise_id, wrong, message
):
    assert message in failed_messages(exercise_id, wrong)


def test_each_code_exercise_has_at_least_three_plausible_wrong_answers():
    for chapter in CHAPTERS:
        for exercise in list_exercises(chapter):
            if exercise.kind == "code":
                assert sum(e == exercise.id for e, _, _ in WRONG_ANSWERS) >= 3, exercise.id


def test_the_greedy_answer_works_on_the_trained_translator_too():
    from course_lib.decoding import greedy_decode
    from course_lib.translation import load_number_translator

    translator = load_number_translator()
    src_ids = translator.source_ids([21, 1100, 7008])
    start = torch.full((3, 1), translator.target_vocab.bos_id)
    eos = translator.target_vocab.eos_id
    student = model_greedy_decoding(translator.scorer(src_ids), start, eos, 8)
    assert torch.equal(student, greedy_decode(translator.scorer(src_ids), start, eos, 8))


@pytest.mark.parametrize(
    ("exercise_id", "answer", "message"),
    [
        ("decoding-cost", "400", "counts 20 positions in every step"),
        ("decoding-cost", "231", "one step too many"),
        ("decoding-cost", "190", "leaves out <bos>"),
        ("family-for-task", "b", "causal mask hides the words after"),
        ("family-for-task", "c", "more than the task needs"),
        ("family-for-speech-to-text", "d", "keeps its causal mask"),
        ("held-out-numbers", "d", "teacher forcing is how the model is trained"),
        ("shared-embedding-saving", "18944000", "two matrices are saved"),
        ("shared-embedding-saving", "56832000", "the one they share"),
        ("shared-embedding-saving", "37925000", "keeps the bias"),
        ("smoothing-perplexity", "b", "labels are not replaced"),
        ("smoothing-perplexity", "c", "measured against the real tokens"),
        ("smoothing-perplexity", "d", "independent"),
    ],
)
def test_a_known_wrong_value_or_choice_gets_its_explanation(exercise_id, answer, message):
    assert message in failed_messages(exercise_id, answer)


def test_the_code_exercises_block_the_library_functions():
    def greedy_by_the_library(model, prompt, eos_id, max_new_tokens):
        from course_lib.decoding import greedy_decode

        return greedy_decode(model, prompt, eos_id, max_new_tokens)

    def loss_by_the_library(logits, tgt_ids, pad_id):
        from course_lib.training import sequence_loss

        return sequence_loss(logits, tgt_ids[:, 1:], pad_id)

    refused = "the code uses course_lib (line 2: from course_lib.{})"
    assert refused.format("decoding import greedy_decode") in failed_messages(
        "greedy-decoding", greedy_by_the_library
    )
    assert refused.format("training import sequence_loss") in failed_messages(
        "teacher-forcing-loss", loss_by_the_library
    )
