"""The exercises of the part "Building the Transformer": model answers pass, plausible wrong
answers fail with a message that says what is wrong."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from conftest import failed_messages
from course_lib.exercises import evaluate, get_exercise, list_exercises
from solutions import SOLUTIONS
from solutions.layers import feed_forward, self_attention

model_encoder_layer = SOLUTIONS["encoder-layer"]  # carried with wrong answers
model_layer_norm = SOLUTIONS["layer-norm"]  # carried with near misses

CHAPTERS = {
    "feed-forward-and-norm": ["layer-norm", "add-norm-order", "add-norm-by-hand"],
    "encoder": ["encoder-layer", "encoder-layer-parameters"],
    "decoder": ["teacher-forcing"],
}


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_each_chapter_registers_its_exercises_in_reading_order(chapter):
    assert [e.id for e in list_exercises(chapter)] == CHAPTERS[chapter]


@pytest.mark.parametrize("exercise_id", [i for ids in CHAPTERS.values() for i in ids])
def test_the_model_answer_passes(exercise_id):
    result = evaluate(exercise_id, SOLUTIONS[exercise_id])
    assert result.passed, str(result)


# ----------------------------------------------------------------------------- layer norm


def layer_norm_off_by_5e_5(x, gain, bias, eps):
    return model_layer_norm(x, gain, bias, eps) + 5e-5


def layer_norm_off_by_5e_3(x, gain, bias, eps):
    return model_layer_norm(x, gain, bias, eps) + 5e-3


def test_a_layer_norm_off_by_less_than_the_tolerance_passes():
    assert evaluate("layer-norm", layer_norm_off_by_5e_5).passed


def test_a_layer_norm_off_by_5e_3_fails():
    assert "differ by more than the tolerance" in failed_messages(
        "layer-norm", layer_norm_off_by_5e_3
    )


def unbiased_variance(x, gain, bias, eps):
    mean = x.mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(x.var(dim=-1, keepdim=True) + eps) * gain + bias


def eps_added_to_the_sd(x, gain, bias, eps):  # the Annotated Transformer's LayerNorm
    mean = x.mean(dim=-1, keepdim=True)
    return gain * (x - mean) / (x.std(dim=-1, keepdim=True) + eps) + bias


def eps_outside_the_root(x, gain, bias, eps):
    mean = x.mean(dim=-1, keepdim=True)
    sd = x.var(dim=-1, keepdim=True, unbiased=False).sqrt()
    return (x - mean) / (sd + eps) * gain + bias


def across_the_sequence(x, gain, bias, eps):  # lecture-c's reading
    mean = x.mean(dim=-2, keepdim=True)
    variance = x.var(dim=-2, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(variance + eps) * gain + bias


def gain_and_bias_ignored(x, gain, bias, eps):
    mean = x.mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(x.var(dim=-1, keepdim=True, unbiased=False) + eps)


def without_eps(x, gain, bias, eps):
    mean = x.mean(dim=-1, keepdim=True)
    return (x - mean) / x.var(dim=-1, keepdim=True, unbiased=False).sqrt() * gain + bias


WRONG_LAYER_NORMS = {
    unbiased_variance: "differ by more than the tolerance",
    eps_added_to_the_sd: "differ by more than the tolerance",
    eps_outside_the_root: "eps = 0.5",
    across_the_sequence: "differ by more than the tolerance",
    gain_and_bias_ignored: "differ by more than the tolerance",
    without_eps: "NaN",
}


@pytest.mark.parametrize("wrong", WRONG_LAYER_NORMS, ids=lambda f: f.__name__)
def test_a_plausible_wrong_layer_norm_fails(wrong):
    result = evaluate("layer-norm", wrong)
    assert result.status == "failed", str(result)
    failed = [f"{c.name}: {c.message}" for c in result.checks if not c.passed]
    assert any(WRONG_LAYER_NORMS[wrong] in text for text in failed), failed


def test_a_layer_norm_calling_torch_layer_norm_is_refused_with_the_functions_name():
    def layer_norm(x, gain, bias, eps):
        return F.layer_norm(x, (x.size(-1),), gain, bias, eps)

    messages = failed_messages("layer-norm", layer_norm)
    assert "your code called torch.nn.functional.layer_norm" in messages


def test_a_layer_norm_written_with_rsqrt_and_var_mean_passes():
    def layer_norm(x, gain, bias, eps):
        variance, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
        return (x - mean) * torch.rsqrt(variance + eps) * gain + bias

    assert evaluate("layer-norm", layer_norm).passed


# ----------------------------------------------------------------------------- Add & Norm


@pytest.mark.parametrize(
    "choice, reason",
    [
        ("b", "that is pre-norm"),
        ("c", "the residual path itself goes through the norm"),
        ("d", "normalises only the update"),
    ],
)
def test_every_other_order_is_wrong_and_says_what_it_computes(choice, reason):
    result = evaluate("add-norm-order", choice)
    assert not result.passed and reason in result.checks[0].message


@pytest.mark.parametrize(
    "answer, feedback",
    [
        ("4.828, -2.828, 1, 1, 1.414, -1.414, 0, 0", "the two orders are swapped"),
        ("1.225, -1.225, 0, 0, 4.449, -2.449, 1, 1", "divides by $d = 4$"),
        ("1.414, -1.414, 0, 0, 2.828, -2.828, 0, 0", "the residual is missing"),
    ],
)
def test_known_add_and_norm_mistakes_get_their_explanation(answer, feedback):
    result = evaluate("add-norm-by-hand", answer)
    assert not result.passed
    assert feedback in result.checks[-1].message


# ----------------------------------------------------------------------------- encoder layer


def _norm(h, gain, bias, i):
    return F.layer_norm(h, (h.size(-1),), gain[i], bias[i])


def always_post_norm(x, mask, w_attention, w_1, w_2, gain, bias, num_heads, norm_first):
    x = _norm(x + self_attention(x, mask, w_attention, num_heads), gain, bias, 0)
    return _norm(x + feed_forward(x, w_1, w_2), gain, bias, 1)


def norms_swapped(x, mask, w_attention, w_1, w_2, gain, bias, num_heads, norm_first):
    return model_encoder_layer(x, mask, w_attention, w_1, w_2, gain.flip(0), bias.flip(0),
                                      num_heads, norm_first)  # fmt: skip


def sublayers_in_parallel(x, mask, w_attention, w_1, w_2, gain, bias, num_heads, norm_first):
    attended = self_attention(x, mask, w_attention, num_heads)
    if norm_first:
        return x + attended + feed_forward(_norm(x, gain, bias, 1), w_1, w_2)
    return _norm(x + attended + feed_forward(x, w_1, w_2), gain, bias, 1)


def no_residual_around_the_ffn(x, mask, w_attention, w_1, w_2, gain, bias, num_heads,
                               norm_first):  # fmt: skip
    if norm_first:
        x = x + self_attention(_norm(x, gain, bias, 0), mask, w_attention, num_heads)
        return feed_forward(_norm(x, gain, bias, 1), w_1, w_2)
    x = _norm(x + self_attention(x, mask, w_attention, num_heads), gain, bias, 0)
    return _norm(feed_forward(x, w_1, w_2), gain, bias, 1)


def mask_ignored(x, mask, w_attention, w_1, w_2, gain, bias, num_heads, norm_first):
    return model_encoder_layer(x, None, w_attention, w_1, w_2, gain, bias, num_heads,
                                      norm_first)  # fmt: skip


def norm_of_the_update_only(x, mask, w_attention, w_1, w_2, gain, bias, num_heads, norm_first):
    x = x + _norm(self_attention(x, mask, w_attention, num_heads), gain, bias, 0)
    return x + _norm(feed_forward(x, w_1, w_2), gain, bias, 1)


WRONG_ENCODER_LAYERS = [always_post_norm, norms_swapped, sublayers_in_parallel,
                        no_residual_around_the_ffn, mask_ignored,
                        norm_of_the_update_only]  # fmt: skip


def encoder_layer_off_by_5e_5(x, mask, w_attention, w_1, w_2, gain, bias, num_heads, norm_first):
    answer = model_encoder_layer(x, mask, w_attention, w_1, w_2, gain, bias, num_heads,
                                 norm_first)  # fmt: skip
    return answer + 5e-5


def encoder_layer_off_by_5e_3(x, mask, w_attention, w_1, w_2, gain, bias, num_heads, norm_first):
    answer = model_encoder_layer(x, mask, w_attention, w_1, w_2, gain, bias, num_heads,
                                 norm_first)  # fmt: skip
    return answer + 5e-3


def test_an_encoder_layer_off_by_less_than_the_tolerance_passes():
    assert evaluate("encoder-layer", encoder_layer_off_by_5e_5).passed


def test_an_encoder_layer_off_by_5e_3_fails():
    assert "differ by more than the tolerance" in failed_messages(
        "encoder-layer", encoder_layer_off_by_5e_3
    )


@pytest.mark.parametrize("wrong", WRONG_ENCODER_LAYERS, ids=lambda f: f.__name__)
def test_a_plausible_wrong_encoder_layer_fails(wrong):
    assert "differ by more than the tolerance" in failed_messages("encoder-layer", wrong)


def test_ignoring_norm_first_fails_exactly_the_pre_norm_cases():
    result = evaluate("encoder-layer", always_post_norm)
    fixed = [c for c in result.checks if c.name.startswith(("post-norm", "pre-norm"))]
    assert [c.passed for c in fixed] == [True, True, False, False]


def test_an_encoder_layer_calling_course_libs_layer_is_refused():
    def encoder_layer(x, mask, w_attention, w_1, w_2, gain, bias, num_heads, norm_first):
        from course_lib.encoder import EncoderLayer

        return EncoderLayer(x.size(-1), num_heads, w_1.size(1))(x, mask)

    messages = failed_messages("encoder-layer", encoder_layer)
    assert "the code uses course_lib (line 2: from course_lib.encoder import" in messages


def test_the_encoder_layer_cases_include_masks_both_orders_and_fresh_random_inputs():
    exercise = get_exercise("encoder-layer")
    cases = exercise.cases(exercise.seed)
    assert any(case.args[1] is not None for case in cases)
    assert {case.args[-1] for case in cases} == {False, True}
    other = exercise.cases(exercise.seed + 1)
    assert not torch.equal(cases[-1].args[0], other[-1].args[0])  # a grader's seed


@pytest.mark.parametrize(
    "answer, feedback",
    [("3150336", "layer normalizations are missing"), ("2889728", "$W^O$ is missing"),
     ("1577984", "$d_{ff} = 2048$")],
)  # fmt: skip
def test_known_parameter_count_mistakes_get_their_explanation(answer, feedback):
    result = evaluate("encoder-layer-parameters", answer)
    assert not result.passed and feedback in result.checks[-1].message


def test_the_parameter_count_is_what_course_libs_layer_holds():
    from course_lib.encoder import EncoderLayer

    layer = EncoderLayer(512, 8, 2048)
    assert sum(p.numel() for p in layer.parameters()) == int(SOLUTIONS["encoder-layer-parameters"])


# ----------------------------------------------------------------------------- decoder


@pytest.mark.parametrize(
    "choice, reason",
    [
        ("b", "would read the very token it must predict"),
        ("c", "that is generation"),
        ("d", "but they are not needed"),
    ],
)
def test_every_other_teacher_forcing_answer_is_wrong_and_says_why(choice, reason):
    result = evaluate("teacher-forcing", choice)
    assert not result.passed and reason in result.checks[0].message
