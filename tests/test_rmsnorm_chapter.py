"""The chapter "RMSNorm and gated feed-forward layers": its exercises (the model answers pass,
plausible wrong answers fail with a message that says why) and its explorer (the book stores
what the live explorer shows)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
import torch
import torch.nn.functional as F
from explorer_checks import assert_book_matches_live

from conftest import failed_messages
from course_lib.exercises import (
    ChoiceExercise,
    CodeExercise,
    ValueExercise,
    evaluate,
    get_exercise,
    list_exercises,
)
from course_lib.explorers.beyond import (
    NORM_BOOK_SCALES,
    NORM_BOOK_SHIFTS,
    NormalizationExplorer,
    norm_base_vector,
)
from course_lib.feedforward import GatedFeedForward, swiglu_hidden_size
from solutions import SOLUTIONS

CHAPTER = "rmsnorm-and-gated-ffn"
model_rms_norm = SOLUTIONS["rms-norm"]  # carried with wrong answers
model_swiglu = SOLUTIONS["swiglu"]

# ----------------------------------------------------------------------------- the exercises


def test_the_chapter_has_the_exercises_it_promises():
    exercises = {e.id: e for e in list_exercises(CHAPTER)}
    assert isinstance(exercises["rms-norm"], CodeExercise)
    assert isinstance(exercises["swiglu"], CodeExercise)
    assert isinstance(exercises["swiglu-hidden-size"], ValueExercise)
    assert isinstance(exercises["rmsnorm-shifted-input"], ChoiceExercise)
    assert list(exercises) == [
        "rms-norm", "swiglu", "swiglu-hidden-size", "rmsnorm-shifted-input",
    ]  # fmt: skip


@pytest.mark.parametrize("exercise_id", ["rms-norm", "swiglu", "swiglu-hidden-size",
                                         "rmsnorm-shifted-input"])  # fmt: skip
def test_the_model_answer_passes(exercise_id):
    result = evaluate(exercise_id, SOLUTIONS[exercise_id])
    assert result.passed, str(result)


def test_the_hidden_size_answer_is_what_llamas_rule_and_a_real_network_give():
    hidden = swiglu_hidden_size(1024, multiple_of=256)
    network = GatedFeedForward(1024, hidden, bias=False)
    count = sum(p.numel() for p in network.parameters())
    assert (hidden, count) == (2816, 8_650_752)
    assert get_exercise("swiglu-hidden-size").expected().tolist() == [2816.0, 8650752.0]


# --- RMSNorm by hand


def layer_norm_instead(x, weight, eps):  # subtracts the mean: LayerNorm without a bias
    centred = x - x.mean(dim=-1, keepdim=True)
    return centred / torch.sqrt(centred.pow(2).mean(dim=-1, keepdim=True) + eps) * weight


def eps_outside_the_root(x, weight, eps):
    return x / (torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True)) + eps) * weight


def norm_instead_of_rms(x, weight, eps):  # the Euclidean length: sqrt(d) too large
    return x / torch.sqrt(x.pow(2).sum(dim=-1, keepdim=True) + eps) * weight


def over_the_wrong_axis(x, weight, eps):  # across the tokens of the batch, not the features
    return x / torch.sqrt(x.pow(2).mean(dim=0, keepdim=True) + eps) * weight


def gain_ignored(x, weight, eps):
    return x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)


def calls_torch_rms_norm(x, weight, eps):
    return F.rms_norm(x, (x.size(-1),), weight, eps)


# --- routes to a built-in RMSNorm (tests/test_forbidden_routes.py runs them)


def rms_by_the_functional(x, weight, eps):
    return F.rms_norm(x, (x.size(-1),), weight, eps)


def rms_by_the_module(x, weight, eps):
    layer = torch.nn.RMSNorm(x.size(-1), eps=eps).to(x.dtype)
    with torch.no_grad():
        layer.weight.copy_(weight)
        return layer(x)


def rms_by_aten(x, weight, eps):
    return torch.ops.aten.rms_norm(x, [x.size(-1)], weight, eps)


def rms_by_layer_norm_of_x_and_minus_x(x, weight, eps):
    # [x, -x] has mean 0 and variance mean(x^2): LayerNorm of it starts with x / rms(x)
    both = torch.cat([x, -x], dim=-1)
    return F.layer_norm(both, (both.size(-1),), eps=eps)[..., : x.size(-1)] * weight


RMS_NORM_ROUTES = [
    ("rms-norm", rms_by_the_functional, "torch.nn.functional.rms_norm"),
    ("rms-norm", rms_by_the_module, "torch.nn.functional.rms_norm"),
    ("rms-norm", rms_by_aten, "torch.ops.aten.rms_norm"),
    ("rms-norm", rms_by_layer_norm_of_x_and_minus_x, "torch.nn.functional.layer_norm"),
]


# --- SwiGLU


def sigmoid_gate(x, w1, w3, w2):  # the original GLU, not Swish
    return (torch.sigmoid(x @ w1) * (x @ w3)) @ w2


def activation_on_both_branches(x, w1, w3, w2):
    return (F.silu(x @ w1) * F.silu(x @ w3)) @ w2


def activation_after_the_product(x, w1, w3, w2):
    return F.silu((x @ w1) * (x @ w3)) @ w2


def relu_network_with_w1(x, w1, w3, w2):  # the 2017 network: the third matrix unused
    return F.relu(x @ w1) @ w2


def gated_sum_instead_of_product(x, w1, w3, w2):
    return (F.silu(x @ w1) + (x @ w3)) @ w2


WRONG_ANSWERS = [
    ("rms-norm", layer_norm_instead, "differ by more than the tolerance"),
    ("rms-norm", eps_outside_the_root, "differ by more than the tolerance"),
    ("rms-norm", norm_instead_of_rms, "differ by more than the tolerance"),
    ("rms-norm", over_the_wrong_axis, "differ by more than the tolerance"),
    ("rms-norm", gain_ignored, "differ by more than the tolerance"),
    ("swiglu", sigmoid_gate, "differ by more than the tolerance"),
    ("swiglu", activation_on_both_branches, "differ by more than the tolerance"),
    ("swiglu", activation_after_the_product, "differ by more than the tolerance"),
    ("swiglu", relu_network_with_w1, "differ by more than the tolerance"),
    ("swiglu", gated_sum_instead_of_product, "differ by more than the tolerance"),
]


WRONG_RMS_NORMS = [wrong for e, wrong, _ in WRONG_ANSWERS if e == "rms-norm"]
WRONG_SWIGLUS = [wrong for e, wrong, _ in WRONG_ANSWERS if e == "swiglu"]


@pytest.mark.parametrize(
    "exercise_id, wrong, message", WRONG_ANSWERS, ids=lambda v: getattr(v, "__name__", "")
)
def test_a_plausible_wrong_answer_fails_with_a_message_that_says_what_differs(
    exercise_id, wrong, message
):
    assert message in failed_messages(exercise_id, wrong)


def test_each_code_exercise_has_at_least_three_plausible_wrong_answers():
    for exercise in list_exercises(CHAPTER):
        if exercise.kind == "code":
            assert sum(e == exercise.id for e, _, _ in WRONG_ANSWERS) >= 3, exercise.id


def test_the_layer_norm_answer_passes_the_case_with_mean_zero_only_by_accident():
    # on a centred token the two agree: the check needs the cases with a mean to tell them apart
    x = torch.tensor([[3.0, -3.0, 1.0, -1.0]])
    assert torch.allclose(
        layer_norm_instead(x, torch.ones(4), 1e-6), model_rms_norm(x, torch.ones(4), 1e-6)
    )
    messages = failed_messages("rms-norm", layer_norm_instead)
    assert "large mean" in messages


def test_the_eps_outside_the_root_fails_where_eps_is_large():
    messages = failed_messages("rms-norm", eps_outside_the_root)
    assert "eps = 0.5" in messages


def test_an_answer_calling_torch_rms_norm_is_refused():
    if not hasattr(F, "rms_norm"):
        pytest.skip("torch.nn.functional.rms_norm arrived in PyTorch 2.4")
    messages = failed_messages("rms-norm", calls_torch_rms_norm)
    assert "rms_norm" in messages


def test_a_sigmoid_gate_fails_on_the_identity_case_computed_by_hand():
    x, eye = torch.tensor([[1.0, -2.0]]), torch.eye(2)
    # Swish: 1 * sigmoid(1) * 1 = 0.731 and -2 * sigmoid(-2) * -2 = 0.477
    assert torch.allclose(
        model_swiglu(x, eye, eye, eye), torch.tensor([[0.7311, 0.4768]]), atol=1e-4
    )
    messages = failed_messages("swiglu", sigmoid_gate)
    assert "W = V = W_2 = identity" in messages


@pytest.mark.parametrize(
    "answer, feedback",
    [
        ("4096, 12582912", "that is the ReLU network's"),
        ("2560, 7864320", "rounded down"),
        ("2730, 8386560", "before the rounding"),
        ("2816, 5767168", "the count has two matrices"),
    ],
)
def test_a_known_wrong_hidden_size_gets_its_explanation(answer, feedback):
    assert feedback in failed_messages("swiglu-hidden-size", answer)


@pytest.mark.parametrize(
    "choice, reason",
    [("a", "only LayerNorm subtracts the mean"), ("c", "The other way round"),
     ("d", "which a shift does not change")],
)  # fmt: skip
def test_every_wrong_choice_says_why(choice, reason):
    assert reason in failed_messages("rmsnorm-shifted-input", choice)


def test_the_right_choice_is_what_the_norms_compute():
    x = torch.tensor([1.0, -2.0, 0.5, 3.0])
    layer = F.layer_norm
    assert torch.allclose(layer(x + 5, (4,)), layer(x, (4,)), atol=1e-5)
    assert not torch.allclose(model_rms_norm(x + 5, torch.ones(4), 1e-6),
                              model_rms_norm(x, torch.ones(4), 1e-6), atol=1e-2)  # fmt: skip


# ----------------------------------------------------------------------------- the explorer


def test_the_base_vector_has_mean_zero_and_standard_deviation_one():
    z = norm_base_vector(8)
    assert abs(z.mean()) < 1e-12 and abs(z.pow(2).mean() - 1) < 1e-12


def test_with_mean_zero_the_two_outputs_agree_and_the_readout_says_so():
    explorer = NormalizationExplorer(shift=0.0, book=False)
    _, layer, rms = explorer.outputs(0.0, 1.0)
    assert torch.allclose(layer, rms, atol=1e-5)
    assert "the two outputs agree" in explorer.readout.value


def test_with_a_large_mean_rmsnorm_tends_to_ones_and_layernorm_does_not_move():
    explorer = NormalizationExplorer(book=False)
    _, layer_0, _ = explorer.outputs(0.0, 1.0)
    _, layer, rms = explorer.outputs(10.0, 0.1)
    assert torch.allclose(rms, torch.ones(8, dtype=torch.float64), atol=0.02)
    assert torch.allclose(layer, layer_0, atol=1e-4)  # shift and scale: LayerNorm unchanged
    assert "RMSNorm's output keeps a common part, mean +1.000" in explorer.describe(10.0, 0.1)


def test_scaling_the_input_changes_neither_output():
    explorer = NormalizationExplorer(book=False)
    for shift in (0.0, 3.0):
        _, layer_1, rms_1 = explorer.outputs(shift, 1.0)
        _, layer_10, rms_10 = explorer.outputs(10 * shift, 10.0)
        assert torch.allclose(layer_1, layer_10, atol=1e-6)
        assert torch.allclose(rms_1, rms_10, atol=1e-6)


def test_layernorm_gives_z_in_every_state_and_rmsnorm_depends_on_the_ratio_only():
    explorer = NormalizationExplorer(book=False)
    for shift, scale in [(0.0, 0.1), (3.0, 1.0), (10.0, 10.0), (-2.0, 0.5)]:
        _, layer, rms = explorer.outputs(shift, scale)
        assert torch.allclose(layer, explorer.z, atol=1e-4)
        _, _, same_ratio = explorer.outputs(2 * shift, 2 * scale)
        assert torch.allclose(rms, same_ratio, atol=1e-4)  # up to eps
    assert "mean / sd = 3 only" in explorer.describe(3.0, 1.0)


def test_the_figure_names_the_input_and_both_norms():
    explorer = NormalizationExplorer(book=False)
    figure = explorer.draw(3.0, 1.0)
    assert figure.axes[0].get_title() == "input x: mean 3 (dashed), sd 1"
    labels = [t.get_text() for t in figure.axes[1].get_legend().get_texts()]
    assert labels == ["LayerNorm(x)", "RMSNorm(x)"]
    plt.close(figure)


@pytest.mark.book_states
def test_the_book_stores_a_readout_and_a_figure_per_shift_and_scale():
    explorer = NormalizationExplorer(book=True, offer={"shift": (0.0, 3.0), "scale": (1.0,)})
    assert set(explorer.states["figure"]) == {(0, 0), (1, 0)}
    assert explorer.state_values("readout", (1, 0)) == {"shift": 3.0, "scale": 1.0}
    assert len(NORM_BOOK_SHIFTS) * len(NORM_BOOK_SCALES) == 9  # the book's figures


@pytest.mark.book_states
def test_the_normalization_book_shows_what_the_live_explorer_computes():
    offer = {"shift": (0.0, 3.0, 10.0), "scale": (0.1, 1.0)}
    assert_book_matches_live(lambda book: NormalizationExplorer(book=book, offer=offer))
