"""A student's check and ``course-grade`` give every answer the same verdict.

Every model answer and every plausible wrong answer of the course's code exercises (the ones
the exercise tests pose), and answers written the ways notebooks invite (a notebook global, a
helper from another cell, a lambda, a module alias, an import of the student's own module),
are checked as a student checks them and graded by ``course-grade`` from a submission file:
an answer passes its check exactly when grading gives it full points.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import numpy as np
import pytest
import torch
import torch as T
from test_attention_at_scale_chapter import WRONG_BLOCK_MERGES, WRONG_WINDOWS
from test_attention_exercises import WRONG_ATTENTION, WRONG_MASKS, WRONG_MERGES, WRONG_SPLITS
from test_exercises import WRONG_ENCODINGS, WRONG_ROTATIONS
from test_exercises_foundations import WRONG_CODES, WRONG_LOOKUPS, WRONG_PAIRS
from test_grading import SEED, document, entry, grade, write
from test_layer_exercises import WRONG_ENCODER_LAYERS, WRONG_LAYER_NORMS
from test_modern_decoder_chapter import WRONG_ORDERS
from test_rmsnorm_chapter import WRONG_RMS_NORMS, WRONG_SWIGLUS
from test_rotary_chapter import WRONG_ROTATIONS as WRONG_ROTARY
from test_transformer_at_work_exercises import (
    WRONG_CACHE_STEPS,
    WRONG_GREEDY,
    WRONG_LOSSES,
    WRONG_SCHEDULES,
    WRONG_SMOOTHED_LOSSES,
)

from course_lib.exercises import evaluate, get_exercise
from course_lib.grading.grader import Grader, Settings
from solutions import SOLUTIONS

model_encoding = SOLUTIONS["positional-encoding"]  # carried with the answers below
BASE = torch.tensor(10000.0)  # a notebook global that a submission cannot carry


def encoding_reading_a_global_tensor(max_len, d_model):
    position = torch.arange(max_len, dtype=torch.float32)[:, None]
    angle = position * BASE ** (-torch.arange(0, d_model, 2) / d_model)
    table = torch.zeros(max_len, d_model)
    table[:, 0::2], table[:, 1::2] = angle.sin(), angle.cos()
    return table


def angles(max_len, d_model):
    """A helper defined in another cell."""
    position = torch.arange(max_len, dtype=torch.float32)[:, None]
    return position * 10000.0 ** (-torch.arange(0, d_model, 2) / d_model)


def encoding_with_a_helper(max_len, d_model):
    table = torch.zeros(max_len, d_model)
    table[:, 0::2], table[:, 1::2] = angles(max_len, d_model).sin(), angles(max_len, d_model).cos()
    return table


def encoding_with_module_aliases(max_len, d_model):
    angle = T.arange(max_len)[:, None] * np.float32(10000.0) ** (-T.arange(0, d_model, 2) / d_model)
    return T.stack([angle.sin(), angle.cos()], dim=-1).reshape(max_len, d_model).float()


DTYPE = torch.float64  # a notebook global that is written into the submission
SCALE = np.float64(10000.0)  # a NumPy number: written as a plain float


def encoding_with_a_numpy_constant(max_len, d_model):
    angle = torch.arange(max_len)[:, None] * SCALE ** (-torch.arange(0, d_model, 2) / d_model)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(max_len, d_model).float()


def encoding_in_a_global_dtype(max_len, d_model):
    return model_encoding(max_len, d_model).to(DTYPE)


encoding_as_a_lambda = lambda max_len, d_model: model_encoding(max_len, d_model)  # noqa: E731


def encoding_from_my_own_module(max_len, d_model):
    import solutions.positional_encoding as mine  # the student's own file: grading lacks it

    return mine.positional_encoding(max_len, d_model)


WRONG = {
    "glance-nearest-codes": WRONG_CODES,
    "emb-one-hot-lookup": WRONG_LOOKUPS,
    "w2v-skipgram-pairs": WRONG_PAIRS,
    "positional-encoding": WRONG_ENCODINGS,
    "pe-offset-rotation": WRONG_ROTATIONS,
    "scaled-dot-product-attention": WRONG_ATTENTION,
    "split-heads": WRONG_SPLITS,
    "merge-heads": WRONG_MERGES,
    "causal-mask": WRONG_MASKS,
    "layer-norm": WRONG_LAYER_NORMS,
    "encoder-layer": WRONG_ENCODER_LAYERS,
    "teacher-forcing-loss": WRONG_LOSSES,
    "transformer-schedule": WRONG_SCHEDULES,
    "label-smoothed-loss": WRONG_SMOOTHED_LOSSES,
    "greedy-decoding": WRONG_GREEDY,
    "kv-cache-step": WRONG_CACHE_STEPS,
    "rope-rotate": list(WRONG_ROTARY),
    "modern-rotary-row-order": WRONG_ORDERS,
    "rms-norm": WRONG_RMS_NORMS,
    "swiglu": WRONG_SWIGLUS,
    "aas-sliding-window-mask": WRONG_WINDOWS,
    "aas-merge-softmax-blocks": WRONG_BLOCK_MERGES,
}
NOTEBOOK_WAYS = [
    encoding_reading_a_global_tensor,
    encoding_with_a_helper,
    encoding_with_module_aliases,
    encoding_in_a_global_dtype,
    encoding_with_a_numpy_constant,
    encoding_as_a_lambda,
    encoding_from_my_own_module,
]
CODE_EXERCISES = [e.id for e in map(get_exercise, SOLUTIONS) if e.kind == "code"]
ANSWERS = [
    *[(exercise_id, SOLUTIONS[exercise_id]) for exercise_id in CODE_EXERCISES],
    *[(exercise_id, wrong) for exercise_id, wrongs in WRONG.items() for wrong in wrongs],
    *[("positional-encoding", way) for way in NOTEBOOK_WAYS],
]


def answer_id(index: int) -> str:
    exercise_id, answer = ANSWERS[index]
    return f"{exercise_id}-{answer.__name__}"


def test_every_code_exercise_has_wrong_answers_in_this_comparison():
    assert set(WRONG) == set(CODE_EXERCISES)
    assert all(len(wrongs) >= 2 for wrongs in WRONG.values())


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, tuple[int, int, str]]:
    """Every answer, as ``submit`` records it, graded by ``course-grade`` in one batch:
    ``{student: (points, max_points, message)}``, one student per answer."""
    root = tmp_path_factory.mktemp("equivalence")
    inbox, out = root / "inbox", root / "out"
    inbox.mkdir()
    for index, (exercise_id, answer) in enumerate(ANSWERS):
        record = get_exercise(exercise_id).answer_record(answer)
        write(inbox, f"s{index:03d}", document(f"s{index:03d}", [entry(exercise_id, record)]))
    status, printed = grade(inbox, "--out", out, "--seed", SEED, "--jobs", 2, "--quiet")
    assert status == 0, printed
    with sqlite3.connect(Path(out) / "gradebook.sqlite") as db:
        rows = db.execute(
            "SELECT s.student_id, r.points, r.max_points, r.message FROM results r "
            "JOIN submissions s USING (sha256)"
        ).fetchall()
    return {student: (points, most, message) for student, points, most, message in rows}


@pytest.mark.parametrize("index", range(len(ANSWERS)), ids=answer_id)
def test_the_check_and_grading_give_an_answer_the_same_verdict(graded, index):
    exercise_id, answer = ANSWERS[index]
    local = evaluate(exercise_id, answer, record=False)
    points, most, message = graded[f"s{index:03d}"]
    assert local.passed == (points == most), f"check: {local}\ngrading: {message}"


def test_the_model_answers_and_the_notebook_ways_that_carry_everything_pass_both(graded):
    passing = {answer_id(i) for i, (_, a) in enumerate(ANSWERS) if graded[f"s{i:03d}"][0] > 0}
    assert {f"{e}-{SOLUTIONS[e].__name__}" for e in CODE_EXERCISES} <= passing
    assert "positional-encoding-encoding_with_a_helper" in passing
    assert "positional-encoding-encoding_with_module_aliases" in passing
    assert "positional-encoding-encoding_in_a_global_dtype" in passing
    assert "positional-encoding-encoding_with_a_numpy_constant" in passing


def test_a_notebook_global_is_named_with_how_to_fix_it_before_any_score():
    result = evaluate("positional-encoding", encoding_reading_a_global_tensor, record=False)
    assert [c.name for c in result.checks] == ["source"]
    assert result.checks[0].message.startswith(
        "encoding_reading_a_global_tensor reads BASE, defined elsewhere in the notebook"
    )
    assert "Compute BASE inside encoding_reading_a_global_tensor" in result.checks[0].message


def test_a_lambda_is_refused_with_how_to_fix_it():
    result = evaluate("positional-encoding", encoding_as_a_lambda, record=False)
    assert [c.name for c in result.checks] == ["source"]
    assert "only functions defined with def can be submitted" in result.checks[0].message


def test_an_import_of_the_students_own_module_is_refused_as_grading_refuses_it():
    result = evaluate("positional-encoding", encoding_from_my_own_module, record=False)
    assert "No module named 'solutions' (answers may import the standard library, torch" in (
        result.checks[1].message
    )


def slow_encoding(max_len, d_model):
    import time

    time.sleep(0.5)
    return model_encoding(max_len, d_model)


def test_more_time_shows_a_slow_answers_results_but_the_check_fails_as_grading_would():
    exercise = dataclasses.replace(get_exercise("positional-encoding"), timeout=2.0)
    checks, _ = exercise.grade(slow_encoding, timeout=30)
    assert all(c.passed for c in checks[:-1])  # every result was shown, and right
    assert checks[-1].name == "grading's time limit" and checks[-1].status == "timeout"
    assert "grading stops it after 2 s and it would earn nothing" in checks[-1].message


def test_a_submissions_code_may_take_the_sum_of_its_exercises_limits_by_default():
    records = [
        entry(e, get_exercise(e).answer_record(SOLUTIONS[e]))
        for e in ("positional-encoding", "pe-offset-rotation", "layer-norm")
    ]
    plan = Grader(Settings(seed=SEED)).plan(document("zoe", records))
    assert plan.job("zoe", None).timeout == 30.0
    assert plan.job("zoe", 12.0).timeout == 12.0
