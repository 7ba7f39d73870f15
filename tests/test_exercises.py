"""Specification of the exercises: the registry, the checks, and how they treat student code."""

from __future__ import annotations

import math
import os
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
import torch

from conftest import chapter_notebooks, read_notebook, toc_files
from course_lib.answers import engine
from course_lib.answers.compare import compare_tensors
from course_lib.exercises import (
    ChoiceExercise,
    CodeExercise,
    UnknownExerciseError,
    ValueExercise,
    check,
    evaluate,
    get_exercise,
    list_exercises,
)
from solutions import SOLUTIONS

model_offset_rotation = SOLUTIONS["pe-offset-rotation"]  # carried with wrong answers
model_encoding = SOLUTIONS["positional-encoding"]  # carried with wrong answers

# ----------------------------------------------------------------------------- the registry


def test_every_exercise_has_a_kebab_case_id_title_points_hints_and_checks():
    exercises = list_exercises()
    assert len({e.id for e in exercises}) == len(exercises)
    for exercise in exercises:
        assert exercise.id == exercise.id.lower() and " " not in exercise.id
        assert exercise.kind in ("code", "choice", "value")
        assert exercise.title and exercise.points > 0
        assert exercise.hints, f"{exercise.id} has no hints"
        assert exercise.checks, f"{exercise.id} has no checks"


def test_the_positional_encoding_chapter_has_the_exercises_the_course_promises():
    exercises = {e.id: e for e in list_exercises("positional-encoding")}
    assert isinstance(exercises["positional-encoding"], CodeExercise)
    assert exercises["positional-encoding"].function == "positional_encoding"
    assert isinstance(exercises["pe-worked-example"], ValueExercise)
    assert isinstance(exercises["pe-doubled-index-bug"], ChoiceExercise)
    assert len(exercises) >= 3


def test_every_exercise_belongs_to_a_chapter_of_the_book():
    for exercise in list_exercises():
        assert f"chapters/{exercise.chapter}" in toc_files(), exercise.id


def test_every_exercise_is_posed_in_its_chapter_notebook():
    sources = {
        path.stem: "".join(cell.source for cell in read_notebook(path).cells)
        for path in chapter_notebooks()
    }
    for exercise in list_exercises():
        call = "check" if exercise.kind == "code" else "ask"
        assert f'{call}("{exercise.id}"' in sources[exercise.chapter], exercise.id


def test_an_unknown_id_is_refused_with_the_closest_ids():
    with pytest.raises(UnknownExerciseError, match="did you mean 'positional-encoding'"):
        get_exercise("positional_encoding")
    with pytest.raises(UnknownExerciseError, match="no exercises for chapter 'nope'"):
        list_exercises("nope")


def test_every_exercise_has_a_model_solution_for_these_tests():
    assert set(SOLUTIONS) == {e.id for e in list_exercises()}


# ----------------------------------------------------------------------------- solutions pass


@pytest.mark.parametrize("exercise_id", sorted(SOLUTIONS))
def test_the_model_solution_passes_every_check(exercise_id):
    result = evaluate(exercise_id, SOLUTIONS[exercise_id])
    assert result.passed, str(result)
    assert len(result.checks) == len(get_exercise(exercise_id).checks)
    assert result.score == get_exercise(exercise_id).points


def test_checks_run_fixed_and_seeded_random_inputs_that_stay_the_same():
    labels = get_exercise("positional-encoding").checks
    assert "max_len=3, d_model=4 (the worked example)" in labels
    assert sum(label.startswith("random:") for label in labels) >= 3
    assert get_exercise("positional-encoding").checks == labels


@pytest.mark.parametrize(
    "exercise", [e for e in list_exercises() if e.kind == "code"], ids=lambda e: e.id
)
def test_another_seed_keeps_the_fixed_inputs_and_draws_other_random_ones(exercise):
    public = [case.label for case in exercise.cases(exercise.seed)]
    other = [case.label for case in exercise.cases(exercise.seed + 1)]
    assert public == [case.label for case in exercise.cases(exercise.seed)]
    fixed = [label for label in public if not label.startswith("random:")]
    assert fixed and fixed == [label for label in other if not label.startswith("random:")]
    assert public != other


def test_grading_with_another_seed_runs_the_inputs_of_that_seed():
    exercise = get_exercise("positional-encoding")
    checks, _ = exercise.grade(SOLUTIONS["positional-encoding"], seed=exercise.seed + 1)
    assert [check.name for check in checks][1:] == [
        case.label for case in exercise.cases(exercise.seed + 1)
    ]
    assert all(check.passed for check in checks)


# ----------------------------------------------------------------------------- wrong answers


def doubled_index(max_len, d_model):
    position = torch.arange(max_len)[:, None]
    column = torch.arange(0, d_model, 2)
    angle = position * 10000.0 ** (-2 * column / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
    return pe


def sin_cos_swapped(max_len, d_model):
    pe = model_encoding(max_len, d_model)
    return pe[:, [j + 1 if j % 2 == 0 else j - 1 for j in range(d_model)]]


def positions_from_one(max_len, d_model):
    return model_encoding(max_len + 1, d_model)[1:]


def transposed(max_len, d_model):
    return model_encoding(max_len, d_model).T


def base_1000(max_len, d_model):
    position = torch.arange(max_len)[:, None]
    angle = position * 1000.0 ** (-2 * torch.arange(d_model // 2) / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
    return pe


def sines_then_cosines(max_len, d_model):
    position = torch.arange(max_len)[:, None]
    angle = position * 10000.0 ** (-2 * torch.arange(d_model // 2) / d_model)
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)


def returns_numpy(max_len, d_model):
    return model_encoding(max_len, d_model).numpy()


def returns_nothing(max_len, d_model):
    model_encoding(max_len, d_model)


def returns_integers(max_len, d_model):
    return model_encoding(max_len, d_model).round().long()


def returns_nan(max_len, d_model):
    pe = model_encoding(max_len, d_model)
    pe[0, 0] = float("nan")
    return pe


WRONG_ENCODINGS = {
    doubled_index: "differ by more than the tolerance 0.0001; first at [1, 2]",
    sin_cos_swapped: "first at [0, 0]: expected +0, got +1",
    positions_from_one: "first at [0, 0]: expected +0, got +0.841471",
    transposed: "rows and columns are swapped",
    base_1000: "differ by more than the tolerance",
    sines_then_cosines: "first at [0, 1]: expected +1, got +0",
    returns_numpy: "expected a torch.Tensor, got numpy.ndarray; convert it",
    returns_nothing: "got NoneType (did the function forget to return its result?)",
    returns_integers: "expected dtype float32 or float64, got int64",
    returns_nan: "1 of 12 entries are NaN or infinite; the first is [0, 0] = nan",
}


@pytest.mark.parametrize("wrong", WRONG_ENCODINGS, ids=lambda f: f.__name__)
def test_a_plausible_wrong_encoding_fails_with_a_message_that_says_what_differs(wrong):
    result = evaluate("positional-encoding", wrong)
    assert result.status == "failed" and not result.passed and result.score == 0
    messages = " | ".join(c.message for c in result.checks if not c.passed)
    assert WRONG_ENCODINGS[wrong] in messages


def test_a_value_mismatch_names_the_first_wrong_entry_and_the_largest_error():
    result = evaluate("positional-encoding", doubled_index)
    failed = next(c for c in result.checks if c.name.startswith("max_len=3"))
    assert failed.message == (
        "3 of 12 entries differ by more than the tolerance 0.0001; first at [1, 2]: "
        "expected +0.00999983, got +1.000e-04; largest error 0.0198 at [2, 2]"
    )


def transposed_rotation(offset, d_model):
    return model_offset_rotation(offset, d_model).T


def rotation_in_degrees(offset, d_model):
    m = torch.zeros(d_model, d_model)
    for i in range(d_model // 2):
        angle = math.radians(offset * 10000.0 ** (-2 * i / d_model))
        m[2 * i, 2 * i] = m[2 * i + 1, 2 * i + 1] = math.cos(angle)
        m[2 * i + 1, 2 * i], m[2 * i, 2 * i + 1] = math.sin(angle), -math.sin(angle)
    return m


def rotation_with_doubled_index(offset, d_model):
    m = torch.zeros(d_model, d_model)
    for j in range(0, d_model, 2):
        angle = offset * 10000.0 ** (-2 * j / d_model)
        m[j, j] = m[j + 1, j + 1] = math.cos(angle)
        m[j + 1, j], m[j, j + 1] = math.sin(angle), -math.sin(angle)
    return m


def identity_matrix(offset, d_model):
    return torch.eye(d_model)


WRONG_ROTATIONS = [transposed_rotation, rotation_in_degrees, rotation_with_doubled_index,
                   identity_matrix]  # fmt: skip


@pytest.mark.parametrize("wrong", WRONG_ROTATIONS, ids=lambda f: f.__name__)
def test_a_plausible_wrong_offset_matrix_fails(wrong):
    result = evaluate("pe-offset-rotation", wrong)
    assert not result.passed
    assert any("differ by more than the tolerance" in c.message for c in result.checks)


def test_a_float64_answer_is_accepted():
    def in_float64(max_len, d_model):
        return model_encoding(max_len, d_model).double()

    assert evaluate("positional-encoding", in_float64).passed


@pytest.mark.parametrize(
    "answer, message",
    [
        ("c", "(c) No: the paper puts sines in the even columns"),
        ("e", "choose one of a, b, c, d; got 'e'"),
        (3, "choose one of a, b, c, d; got 3"),
    ],
)
def test_a_wrong_choice_fails_with_its_feedback(answer, message):
    result = evaluate("pe-doubled-index-bug", answer)
    assert not result.passed
    assert result.checks[-1].message.startswith(message)


def test_a_choice_may_be_written_with_parentheses_or_capitals():
    assert evaluate("pe-doubled-index-bug", "(B)").passed


@pytest.mark.parametrize(
    "answer, failed, message",
    [
        ("0.909, -0.416, 0.020, -0.416", ["PE[2, 3]"], "not of pair 0's"),
        ("0.035, 0.999, 0.000, 1.000", ["PE[2, 0]", "PE[2, 1]", "PE[2, 2]"], "in degrees"),
        ("0.909, -0.416, 0.0002, 1.0", ["PE[2, 2]"], "the index was doubled"),
        ("-0.416 0.909 1.000 0.020", ["PE[2, 0]", "PE[2, 1]", "PE[2, 2]", "PE[2, 3]"],
         "sine and cosine are swapped"),
    ],
)  # fmt: skip
def test_a_known_wrong_value_gets_its_explanation_without_the_answer(answer, failed, message):
    result = evaluate("pe-worked-example", answer)
    assert not result.passed
    assert [c.name for c in result.checks if not c.passed and c.name != "known mistake"] == failed
    assert message in result.checks[-1].message
    for check_ in result.checks:
        assert "0.9998" not in check_.message  # the right value is never shown


@pytest.mark.parametrize(
    "answer, message",
    [
        ("0.9, 0.1", "expected 4 numbers, got 2"),
        ("1,050,624", "expected 4 numbers, got 3"),
        ("0.909, minus 0.4", "'minus' is not a number"),
        (object(), "expected a number or a list of numbers, got object"),
        ([0.909, -0.416, 0.02, float("nan")], "nan is not a finite number"),
    ],
)
def test_a_malformed_value_fails_with_a_clear_message(answer, message):
    result = evaluate("pe-worked-example", answer)
    assert not result.passed
    assert any(message in c.message for c in result.checks)


def test_a_value_may_be_a_list_a_tensor_or_an_array():
    for answer in ([0.909, -0.416, 0.02, 1.0], torch.tensor([0.909, -0.416, 0.02, 1.0]),
                   np.array([0.909, -0.416, 0.02, 1.0])):  # fmt: skip
        assert evaluate("pe-worked-example", answer).passed


# ----------------------------------------------------------------------------- student code


def stub(max_len, d_model):
    raise NotImplementedError


def never_returns(max_len, d_model):
    while True:
        pass


def raises(max_len, d_model):
    table = torch.zeros(max_len, d_model)
    return table @ torch.zeros(3, 3)


def exits(max_len, d_model):
    sys.exit(3)


def kills_its_process(max_len, d_model):
    os._exit(7)


def chatty(max_len, d_model):
    print("x" * 10_000)
    return model_encoding(max_len, d_model)


def uses_the_library(max_len, d_model):
    from course_lib.positional import PositionalEncoding

    return PositionalEncoding(d_model, max_len).pe


def takes_one_argument(n):
    return torch.zeros(n, n)


def prints_then_loops(max_len, d_model):
    print("debugging: got", max_len, d_model)
    while True:
        pass


def allocates_too_much(max_len, d_model):
    return torch.empty(8 * 2**30, dtype=torch.uint8)  # 8 GiB, never touched


def asks_for_input(max_len, d_model):
    return torch.zeros(max_len, int(input("d_model? ")))


def forks(max_len, d_model):
    os.fork()
    return model_encoding(max_len, d_model)


def returns_a_meta_tensor(max_len, d_model):
    return torch.zeros(max_len, d_model, device="meta")


def prints_a_lone_surrogate(max_len, d_model):
    print("\ud800")
    return model_encoding(max_len, d_model)


def uses_cuda(max_len, d_model):  # what torch raises for CUDA after fork, on a GPU runtime
    raise RuntimeError("Cannot re-initialize CUDA in forked subprocess. To use CUDA with ...")


def test_cuda_in_the_checked_function_gets_advice_to_stay_on_the_cpu():
    message = evaluate("positional-encoding", uses_cuda).checks[1].message
    assert "runs your code in a forked process, on the CPU: keep tensors there" in message


def test_the_stub_counts_as_not_attempted_and_is_not_recorded():
    result = evaluate("positional-encoding", stub)
    assert result.status == "not attempted" and result.checks == ()
    from course_lib.exercises import progress

    assert (
        next(r for r in progress().rows if r["id"] == "positional-encoding")["status"]
        == "not attempted"
    )


def test_wall_clock_a_function_that_never_returns_is_stopped_within_3_s_by_a_1_s_limit():
    engine.local_engine()  # started (as long as importing torch) before the clock
    started = time.monotonic()
    result = evaluate("positional-encoding", never_returns, timeout=1.0)
    assert time.monotonic() - started < 3.0
    assert result.status == "failed"
    assert result.checks[1].status == "timeout"
    assert "stopped after 1 s, the time limit" in result.checks[1].message
    assert all(c.status == "error" for c in result.checks[2:])


def test_wall_clock_starting_the_fork_server_is_not_counted_in_the_first_checks_limit(
    monkeypatch,
):
    # The first check of a kernel starts the fork server; on a busy machine that alone took
    # longer than an exercise's limit, and a correct answer was recorded as timed out.
    start = engine.Engine.start

    def slow_start(server):
        start(server)
        time.sleep(3.0)  # a start 3 s slower than this machine's

    monkeypatch.setattr(engine.Engine, "start", slow_start)
    engine._stop_local()
    result = evaluate("positional-encoding", model_encoding, timeout=2.0)
    engine._stop_local()  # the next test gets a fork server started the usual way
    assert result.passed, str(result)


def test_what_a_stopped_function_printed_is_still_shown():
    result = evaluate("positional-encoding", prints_then_loops, timeout=1.0)
    assert result.checks[1].status == "timeout"
    assert result.output == "debugging: got 3 4\n"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the memory cap is Linux only")
def test_wall_clock_allocating_more_memory_than_allowed_fails_within_5_s_with_a_clear_message():
    engine.local_engine()  # started (as long as importing torch) before the clock
    started = time.monotonic()
    result = evaluate("positional-encoding", allocates_too_much)
    assert time.monotonic() - started < 5
    assert result.checks[1].status == "error"
    assert "checks and grading let the code use about 1024 MB" in result.checks[1].message


def test_input_in_student_code_is_an_error_not_the_stub():
    result = evaluate("positional-encoding", asks_for_input)
    assert result.status == "failed"
    assert result.checks[1].status == "error"


def test_student_code_that_forks_is_refused_with_a_message():
    result = evaluate("positional-encoding", forks)
    assert not result.passed
    assert "checks and grading do not allow starting a process (os.fork)" in str(result)


def test_a_tensor_that_cannot_be_read_is_reported():
    result = evaluate("positional-encoding", returns_a_meta_tensor)
    assert "returned a value that cannot be read (a torch.strided tensor on the meta device)" in (
        result.checks[1].message
    )


def test_unprintable_output_is_escaped_so_it_can_be_shown_and_saved():
    result = evaluate("positional-encoding", prints_a_lone_surrogate)
    assert result.output == "\\ud800\n" * 7  # once per case
    str(result).encode("utf-8")


@pytest.mark.parametrize("timeout", [float("inf"), float("nan"), -1, 1e10, "10", True])
def test_an_unusable_timeout_is_refused(timeout):
    with pytest.raises(ValueError, match="timeout must be"):
        evaluate("positional-encoding", stub, timeout=timeout)


def test_the_default_time_limit_is_ten_seconds():
    assert get_exercise("positional-encoding").timeout == 10.0


def test_an_error_in_student_code_says_what_and_where():
    result = evaluate("positional-encoding", raises)
    message = result.checks[1].message
    assert result.checks[1].status == "error"
    assert message.startswith("RuntimeError: mat1 and mat2 shapes cannot be multiplied")
    assert "(line 3 of raises: return table @ torch.zeros(3, 3))" in message  # as in its cell


def test_sys_exit_in_student_code_is_a_failed_check_not_the_end_of_the_kernel():
    result = evaluate("positional-encoding", exits)
    assert result.checks[1].status == "error"
    assert result.checks[1].message.startswith("SystemExit: 3")


def test_student_code_that_kills_its_process_is_reported():
    result = evaluate("positional-encoding", kills_its_process)
    assert result.checks[1].status == "error"
    assert "the process running the code ended (exit code 7)" in result.checks[1].message


def test_what_student_code_prints_is_kept_and_truncated():
    result = evaluate("positional-encoding", chatty)
    assert result.passed
    assert result.output.startswith("x" * 100)
    assert "more characters not shown" in result.output
    assert len(result.output) < 5_000


def test_calling_the_library_implementation_is_refused():
    result = evaluate("positional-encoding", uses_the_library)
    assert not result.passed
    assert "the code uses course_lib (line 2: from course_lib.positional import" in (
        result.checks[0].message
    )
    # the block lives in the child process only: the library still works here
    assert get_exercise("positional-encoding").reference(2, 2).shape == (2, 2)


def test_a_function_with_the_wrong_parameters_fails_the_signature_check():
    result = evaluate("positional-encoding", takes_one_argument)
    assert [c.name for c in result.checks] == ["signature"]
    assert "must accept (max_len, d_model); yours takes (n)" in result.checks[0].message


def test_passing_the_result_instead_of_the_function_is_explained():
    table = model_encoding(3, 4)
    result = evaluate("positional-encoding", table)
    assert "expected a function, got torch.Tensor" in result.checks[0].message
    assert "check('positional-encoding', positional_encoding)" in result.checks[0].message


# ----------------------------------------------------------------------------- comparison


def test_compare_reports_shape_before_values():
    verdict = compare_tensors(torch.zeros(2, 3), torch.zeros(2, 4), atol=1e-4)
    assert not verdict.ok
    assert verdict.message == "expected shape (2, 3), got (2, 4)"


def test_compare_gives_the_largest_error_when_all_entries_match():
    expected = torch.ones(3, dtype=torch.float64)
    verdict = compare_tensors(expected, expected + 2e-6, atol=1e-4)
    assert verdict.ok
    assert verdict.message == "all 3 entries match (largest error 2.0e-06, tolerance 0.0001)"


def test_compare_uses_the_relative_tolerance_too():
    assert compare_tensors(torch.tensor([100.0]), torch.tensor([100.5]), atol=0, rtol=0.01).ok
    assert not compare_tensors(torch.tensor([100.0]), torch.tensor([102.0]), atol=0, rtol=0.01).ok


# ----------------------------------------------------------------------------- display


def test_check_outside_a_notebook_prints_the_result_as_text(capsys):
    result = check("positional-encoding", doubled_index)
    printed = capsys.readouterr().out
    assert printed.startswith("positional-encoding: failed: 2 of 8 checks passed\n")
    assert "  [ok  ] signature: accepts (max_len, d_model)" in printed
    assert "  [FAIL] max_len=3, d_model=4 (the worked example): 3 of 12 entries" in printed
    assert str(result) == printed.rstrip("\n")


# ----------------------------------------------------------------------------- without fork


@pytest.fixture
def without_fork(monkeypatch):
    """Where the system cannot fork (Windows), calls run in a thread."""
    from course_lib.answers import judging

    monkeypatch.setattr(judging, "can_fork", lambda: False)


def test_without_fork_a_correct_answer_still_passes(without_fork):
    assert evaluate("positional-encoding", SOLUTIONS["positional-encoding"]).passed


def test_without_fork_errors_and_the_stub_are_reported_the_same_way(without_fork):
    assert evaluate("positional-encoding", stub).status == "not attempted"
    message = evaluate("positional-encoding", raises).checks[1].message
    assert message.startswith("RuntimeError: mat1 and mat2 shapes cannot be multiplied")


def slow(max_len, d_model):
    time.sleep(2 if max_len == 3 else 0)  # the first case only
    return torch.zeros(max_len, d_model)


def test_wall_clock_without_fork_a_slow_function_is_abandoned_within_1_5_s_by_a_0_5_s_limit(
    without_fork,
):
    before = set(threading.enumerate())
    started = time.monotonic()
    try:
        result = evaluate("positional-encoding", slow, timeout=0.5)
        assert time.monotonic() - started < 1.5
        assert result.checks[1].status == "timeout"
        assert "keeps running in the background" in result.checks[1].message
    finally:
        # Let the abandoned thread finish now: a thread still inside torch when the test
        # process exits can abort it ("terminate called without an active exception").
        for thread in set(threading.enumerate()) - before:
            thread.join(10)
            assert not thread.is_alive()


# ----------------------------------------------------------------------------- tolerances


def shifted_answer(exercise_id: str, fraction: float) -> dict:
    """The model answer with every floating-point entry it returns moved by ``fraction`` of
    the exercise's tolerance (``atol + rtol * |expected|``; by 1e-6 past an exact comparison),
    as a recorded answer."""
    from course_lib.answers.source import function_source

    model = SOLUTIONS[exercise_id]
    exercise = get_exercise(exercise_id)
    exact = exercise.atol == exercise.rtol == 0
    nudge = 1e-6 if exact and fraction > 1 else 0.0  # outside an exact comparison
    source = function_source(model).text + textwrap.dedent(
        f"""

        def shifted(*args):
            def move(t):
                if not t.is_floating_point():
                    return t
                allowed = {exercise.atol!r} + {exercise.rtol!r} * t.abs()
                return t + {fraction!r} * allowed + {nudge!r}
            result = {model.__name__}(*args)
            if isinstance(result, tuple):
                return tuple(move(part) for part in result)
            return move(result)
        """
    )
    return {"function": "shifted", "source": source}


FLOAT_RESULTS = [
    e.id
    for e in list_exercises()
    if isinstance(e, CodeExercise)
    and e.id not in ("causal-mask", "w2v-skipgram-pairs", "glance-nearest-codes", "greedy-decoding")
    and any(dtype.is_floating_point for dtype in e.dtypes)  # integer or boolean results
]


@pytest.mark.parametrize("exercise_id", FLOAT_RESULTS)
def test_an_answer_just_inside_the_tolerance_passes(exercise_id):
    from course_lib.answers.judging import run_locally

    exercise = get_exercise(exercise_id)
    answer = shifted_answer(exercise_id, 0.5)
    verdict = run_locally(exercise, answer, seed=exercise.seed, timeout=exercise.timeout)
    assert verdict.ok, verdict.message


@pytest.mark.parametrize("exercise_id", FLOAT_RESULTS)
def test_an_answer_just_outside_the_tolerance_fails(exercise_id):
    from course_lib.answers.judging import run_locally

    exercise = get_exercise(exercise_id)
    answer = shifted_answer(exercise_id, 2.0)
    verdict = run_locally(exercise, answer, seed=exercise.seed, timeout=exercise.timeout)
    assert verdict.status == "fail", verdict.message
    assert "differ by more than the tolerance" in verdict.message


def test_a_number_written_with_thousands_separators_is_explained():
    result = evaluate("mha-parameter-count", "1,050,624", record=False)
    assert result.checks[0].message == (
        "expected 1 number, got 3; write the number without separators: 1050624"
    )


def test_a_separated_number_among_several_is_explained():
    result = evaluate("swiglu-hidden-size", "2816, 8,650,752", record=False)
    assert result.checks[0].message == (
        "expected 2 numbers, got 4; write every number without thousands separators: "
        "8650752, not 8,650,752"
    )


def test_a_number_grouped_by_spaces_is_explained():
    result = evaluate("modern-layer-parameters", "2 769 920", record=False)
    assert result.checks[0].message.endswith(
        "write every number without thousands separators: 2769920, not 2 769 920"
    )


def test_decimals_with_a_comma_are_still_explained():
    result = evaluate("pe-worked-example", "0,909, -0,416, 0,020, 1,000", record=False)
    assert result.checks[0].message.endswith("write decimals with a point (0.5, not 0,5)")


def test_a_large_number_is_shown_in_full():
    result = evaluate("mha-parameter-count", "1048576", record=False)
    assert result.checks[1].message.startswith("1048576 is not right")
