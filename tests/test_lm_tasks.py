"""Specification of the decoder-only tasks of the part "Beyond the original Transformer"."""

from __future__ import annotations

import pytest
import torch

from course_lib.data import number_split
from course_lib.decoding import greedy_decode
from course_lib.families import DecoderOnlyModel
from course_lib.lm_tasks import (
    SEPARATOR,
    answer_labels,
    exact_match,
    exact_match_by_length,
    model_for,
    number_task,
    reversal_task,
    train_lm,
)


@pytest.fixture(scope="module")
def reversal():
    return reversal_task(train_lengths=range(3, 6), test_lengths=range(2, 8), num_train=1500)


@pytest.fixture(scope="module")
def trained(reversal):
    torch.manual_seed(0)
    model = model_for(reversal, d_model=32, d_ff=64)
    train_lm(model, reversal, epochs=12, batch_size=32)
    return model


def test_a_reversal_sequence_is_the_digits_a_separator_and_the_digits_reversed(reversal):
    row = reversal.tests["length 5"][0]
    question, answer = reversal.decode(row)
    assert len(question) == 5 and answer == question[::-1]
    tokens = reversal.vocab.decode(row, skip_special=False)
    assert tokens[0] == "<bos>" and tokens[6] == SEPARATOR and tokens[-1] == "<eos>"


def test_no_reversal_test_string_is_a_training_string(reversal):
    train = {tuple(row.tolist()) for row in reversal.train}
    for ids in reversal.tests.values():
        for row in ids:
            trimmed = row[row != 0].tolist()
            padded = trimmed + [0] * (reversal.train.size(1) - len(trimmed))
            assert tuple(padded) not in train


def test_a_length_with_few_strings_left_gets_only_the_unseen_ones():
    task = reversal_task(train_lengths=[2], test_lengths=[2], num_train=40, num_test=200)
    assert len(task.tests["length 2"]) == 100 - 40


def test_training_lengths_and_test_lengths_are_as_asked(reversal):
    digits = {(int((row != 0).sum()) - 3) // 2 for row in reversal.train}  # 2n + 3 tokens
    assert digits == {3, 4, 5}
    assert list(reversal.tests) == [f"length {n}" for n in range(2, 8)]
    assert reversal.max_len == 2 * 7 + 3


def test_the_same_seed_gives_the_same_task_and_another_seed_another():
    one, two = reversal_task(num_train=300, seed=1), reversal_task(num_train=300, seed=1)
    assert torch.equal(one.train, two.train)
    assert not torch.equal(one.train, reversal_task(num_train=300, seed=2).train)


def test_a_test_length_whose_strings_were_all_trained_on_is_refused():
    with pytest.raises(ValueError, match="every string of 1 digits is a training string"):
        reversal_task(train_lengths=[1, 3], test_lengths=[1], num_train=400)


def test_asking_for_more_training_strings_than_leave_room_to_test_is_refused():
    with pytest.raises(ValueError, match="more than half of the 100 strings"):
        reversal_task(train_lengths=[2], num_train=60)


def test_the_number_task_trains_on_the_courses_training_numbers_and_tests_on_held_out_ones():
    task = number_task()
    split = number_split()
    assert len(task.train) == len(split.train)
    assert len(task.tests["held-out"]) == len(split.test)
    question, answer = task.decode(task.tests["held-out"][0])
    n = split.test[0]
    from course_lib.data import english_number_name, spanish_number_name

    assert " ".join(question).replace(" - ", "-") == english_number_name(n)
    assert " ".join(answer) == spanish_number_name(n)


def test_only_the_answer_and_its_end_are_labels():
    ids = torch.tensor([[1, 5, 6, 4, 6, 5, 2, 0]])  # <bos> a b <sep> b a <eos> <pad>
    inputs, labels = answer_labels(ids, sep_id=4)
    assert torch.equal(inputs, ids[:, :-1])
    assert labels.tolist() == [[0, 0, 0, 6, 5, 2, 0]]


def test_a_sequence_without_its_separator_is_refused():
    with pytest.raises(ValueError, match="separator once; rows \\[1\\]"):
        answer_labels(torch.tensor([[1, 4, 5, 2], [1, 5, 5, 2]]), sep_id=4)


def test_a_model_of_another_vocabulary_is_refused(reversal):
    with pytest.raises(ValueError, match="scores 99 tokens, the task has 15"):
        train_lm(DecoderOnlyModel(99), reversal, epochs=1)


def test_training_lowers_the_loss_and_learns_the_training_lengths(trained, reversal):
    assert exact_match(trained, reversal, "length 3") > 0.9


def test_exact_match_is_what_greedy_decoding_writes(trained, reversal):
    ids = reversal.tests["length 4"]
    prompt = ids[:, : 4 + 2]  # <bos>, four digits, <sep>
    written = greedy_decode(trained.next_token_scores, prompt, reversal.vocab.eos_id, 6)
    answers = ids[:, 6 : 6 + 5]  # four digits and <eos>
    by_decoding = (written[:, 6 : 6 + 5] == answers).all(dim=1).float().mean()
    assert exact_match(trained, reversal, "length 4") == pytest.approx(float(by_decoding))


def test_exact_match_by_length_has_every_test_length(trained, reversal):
    shares = exact_match_by_length(trained, reversal)
    assert list(shares) == [2, 3, 4, 5, 6, 7]
    assert all(0.0 <= s <= 1.0 for s in shares.values())


def test_an_unknown_test_set_is_refused_with_the_known_ones(trained, reversal):
    with pytest.raises(KeyError, match="no test set 'length 99'"):
        exact_match(trained, reversal, "length 99")


def test_the_model_for_a_task_takes_any_option_of_the_decoder(reversal):
    model = model_for(reversal, positions="rotary", norm="rms", gated=True, num_kv_heads=1)
    assert model.positions == "rotary" and model.vocab_size == len(reversal.vocab)
