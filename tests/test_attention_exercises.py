"""The attention chapters' exercises: model answers pass, plausible wrong answers fail with a
message that says what is wrong, and a result made of several tensors is compared part by part."""

from __future__ import annotations

import math

import pytest
import torch

from conftest import failed_messages
from course_lib.answers.compare import compare_results
from course_lib.exercises import evaluate
from solutions import SOLUTIONS

model_attention = SOLUTIONS["scaled-dot-product-attention"]  # carried with wrong answers

# ----------------------------------------------------------------------------- attention


def no_scaling(query, key, value, mask=None):
    scores = query @ key.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, weights


def divided_by_d_k(query, key, value, mask=None):
    return model_attention(query * math.sqrt(query.size(-1)) / query.size(-1), key, value, mask)


def softmax_over_the_queries(query, key, value, mask=None):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-2)
    return weights @ value, weights


def inverted_mask(query, key, value, mask=None):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))  # PyTorch's nn.Transformer convention
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, weights


def mask_ignored(query, key, value, mask=None):
    return model_attention(query, key, value)


def zeroed_after_the_softmax(query, key, value, mask=None):
    weights = torch.softmax(query @ key.transpose(-2, -1) / math.sqrt(query.size(-1)), dim=-1)
    if mask is not None:
        weights = weights * mask  # rows no longer sum to 1
    return weights @ value, weights


def keys_transposed_wrongly(query, key, value, mask=None):
    scores = query @ key.T / math.sqrt(query.size(-1))  # .T reverses every axis
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, weights


def output_only(query, key, value, mask=None):
    return model_attention(query, key, value, mask)[0]


def weights_first(query, key, value, mask=None):
    output, weights = model_attention(query, key, value, mask)
    return weights, output


WRONG_ATTENTION = {
    no_scaling: "output: ",
    divided_by_d_k: "differ by more than the tolerance",
    softmax_over_the_queries: "weights: ",
    inverted_mask: "NaN or infinite",
    mask_ignored: "weights: ",
    zeroed_after_the_softmax: "weights: ",
    keys_transposed_wrongly: "Error",
    output_only: "expected a tuple (output, weights), got torch.Tensor; return all 2",
    weights_first: "output: expected shape (1, 1), got (1, 2)",
}


@pytest.mark.parametrize("wrong", WRONG_ATTENTION, ids=lambda f: f.__name__)
def test_a_plausible_wrong_attention_fails_and_says_what_differs(wrong):
    assert WRONG_ATTENTION[wrong] in failed_messages("scaled-dot-product-attention", wrong)


def test_no_scaling_fails_every_case_with_more_than_one_key():
    result = evaluate("scaled-dot-product-attention", no_scaling)
    wide = next(c for c in result.checks if c.name.startswith("d_k = 256"))
    assert not wide.passed


def test_an_attention_written_differently_but_correctly_passes():
    def attention(query, key, value, mask=None):
        scores = torch.einsum("...qd,...kd->...qk", query, key) * query.size(-1) ** -0.5
        if mask is not None:
            scores = torch.where(mask, scores, torch.tensor(-1e9))
        weights = scores.softmax(-1)
        return (weights @ value, weights)

    assert evaluate("scaled-dot-product-attention", attention).passed


def output_off_by_2e_3(query, key, value, mask=None):
    output, weights = model_attention(query, key, value, mask)
    return output + 2e-3, weights  # 20 times the tolerance of 1e-4


def output_off_by_half_the_tolerance(query, key, value, mask=None):
    output, weights = model_attention(query, key, value, mask)
    return output + 5e-5, weights


def test_an_attention_just_outside_the_tolerance_fails():
    assert "output: " in failed_messages("scaled-dot-product-attention", output_off_by_2e_3)


def test_an_attention_within_the_tolerance_passes():
    assert evaluate("scaled-dot-product-attention", output_off_by_half_the_tolerance).passed


def test_an_attention_that_returns_a_list_or_tensors_needing_grad_passes():
    def attention_as_a_list(query, key, value, mask=None):
        output, weights = model_attention(query.requires_grad_(), key, value, mask)
        return [output, weights]

    assert evaluate("scaled-dot-product-attention", attention_as_a_list).passed


@pytest.mark.parametrize(
    "answer, feedback",
    [
        ("0.245, 0.665, 0.090, 18.453", "without the scaling"),
        ("0.307, 0.506, 0.186, 18.791", "divided by $d_k = 2$"),
        ("0.333, 0.667, 0, 16.667", "divided by their sum"),
    ],
)
def test_known_mistakes_by_hand_get_their_explanation(answer, feedback):
    result = evaluate("attention-by-hand", answer)
    assert not result.passed
    assert feedback in result.checks[-1].message


# ----------------------------------------------------------------------------- heads


def split_without_transpose(x, num_heads):
    batch, length, d_model = x.shape
    return x.reshape(batch, num_heads, length, d_model // num_heads)


def split_interleaved(x, num_heads):
    batch, length, d_model = x.shape
    return x.view(batch, length, d_model // num_heads, num_heads).permute(0, 3, 1, 2)


def split_heads_last(x, num_heads):
    batch, length, d_model = x.shape
    return x.view(batch, length, num_heads, d_model // num_heads)


def split_into_d_head_heads(x, num_heads):
    batch, length, d_model = x.shape
    return x.view(batch, length, d_model // num_heads, num_heads).transpose(1, 2)


WRONG_SPLITS = [split_without_transpose, split_interleaved, split_heads_last,
                split_into_d_head_heads]  # fmt: skip


@pytest.mark.parametrize("wrong", WRONG_SPLITS, ids=lambda f: f.__name__)
def test_a_plausible_wrong_split_fails(wrong):
    messages = failed_messages("split-heads", wrong)
    assert "entries differ" in messages or "expected shape" in messages


def test_a_split_that_forgets_the_transpose_fails_on_shape_where_length_and_heads_differ():
    messages = failed_messages("split-heads", split_heads_last)
    assert "expected shape (1, 8, 4, 1), got (1, 4, 8, 1)" in messages


def test_a_split_with_chunk_and_stack_passes():
    def split_heads(x, num_heads):
        return torch.stack(x.chunk(num_heads, dim=-1), dim=1)

    assert evaluate("split-heads", split_heads).passed


def merge_without_transpose(x):
    batch, num_heads, length, d_head = x.shape
    return x.reshape(batch, length, num_heads * d_head)


def merge_interleaved(x):
    batch, num_heads, length, d_head = x.shape
    return x.permute(0, 2, 3, 1).reshape(batch, length, num_heads * d_head)


def merge_by_summing(x):
    return x.sum(dim=1)


def merge_along_positions(x):
    return torch.cat(x.unbind(dim=1), dim=1)


WRONG_MERGES = [merge_without_transpose, merge_interleaved, merge_by_summing,
                merge_along_positions]  # fmt: skip


@pytest.mark.parametrize("wrong", WRONG_MERGES, ids=lambda f: f.__name__)
def test_a_plausible_wrong_merge_fails(wrong):
    messages = failed_messages("merge-heads", wrong)
    assert "entries differ" in messages or "expected shape" in messages


def test_a_merge_with_cat_passes():
    def merge_heads(x):
        return torch.cat(x.unbind(dim=1), dim=-1)

    assert evaluate("merge-heads", merge_heads).passed


@pytest.mark.parametrize(
    "answer, feedback",
    [("1048576", "weights only"), ("787968", "$W^O$ is missing"), ("8404992", "full-size")],
)
def test_known_parameter_count_mistakes_get_their_explanation(answer, feedback):
    result = evaluate("mha-parameter-count", answer)
    assert feedback in result.checks[-1].message


# ----------------------------------------------------------------------------- causal mask


def upper_triangle(size):
    return torch.ones(size, size, dtype=torch.bool).triu()


def without_the_diagonal(size):
    return torch.ones(size, size, dtype=torch.bool).tril(diagonal=-1)


def pytorch_convention(size):
    return ~torch.ones(size, size, dtype=torch.bool).tril()


def float_ones(size):
    return torch.ones(size, size).tril()


def additive_minus_infinity(size):
    return torch.nn.Transformer.generate_square_subsequent_mask(size)


WRONG_MASKS = {
    upper_triangle: "entries differ; first at [0, 1]: expected False, got True",
    without_the_diagonal: "entries differ; first at [0, 0]: expected True, got False",
    pytorch_convention: "first at [0, 0]: expected True, got False",
    float_ones: "expected dtype bool, got float32 (a mask is a tensor of True and False",
    additive_minus_infinity: "expected dtype bool, got float32",
}


@pytest.mark.parametrize("wrong", WRONG_MASKS, ids=lambda f: f.__name__)
def test_a_plausible_wrong_causal_mask_fails_with_a_message_that_says_what_differs(wrong):
    assert WRONG_MASKS[wrong] in failed_messages("causal-mask", wrong)


@pytest.mark.parametrize("answer", ["b", "c", "d"])
def test_a_wrong_choice_about_decoder_positions_explains_itself(answer):
    result = evaluate("decoder-attention-positions", answer)
    assert not result.passed
    assert result.checks[0].message.startswith(f"({answer}) No") or "Not quite" in (
        result.checks[0].message
    )


def test_the_attention_exercises_block_the_library_functions():
    def calls_the_library(query, key, value, mask=None):
        from course_lib.attention import scaled_dot_product_attention

        return scaled_dot_product_attention(query, key, value, mask)

    messages = failed_messages("scaled-dot-product-attention", calls_the_library)
    assert "the code uses course_lib (line 2: from course_lib.attention import" in messages


def test_the_causal_mask_exercise_refuses_the_library_mask():
    def causal_mask(size):
        from course_lib.attention import causal_mask as library_mask

        return library_mask(size)

    messages = failed_messages("causal-mask", causal_mask)
    assert "the code uses course_lib (line 2: from course_lib.attention import" in messages


# ----------------------------------------------------------------------------- comparison


def test_a_tuple_result_is_compared_part_by_part_with_names():
    expected = (torch.zeros(2), torch.ones(3))
    verdict = compare_results(
        expected, (torch.zeros(2), torch.zeros(3)), names=("output", "weights"), atol=1e-4
    )
    assert not verdict.ok
    assert verdict.message.startswith("weights: 3 of 3 entries differ")
    assert "output" not in verdict.message
    ok = compare_results(expected, list(expected), names=("output", "weights"), atol=1e-4)
    assert ok.ok and ok.message.startswith("output: all 2 entries match")
    assert "; weights: all 3 entries match" in ok.message


def test_a_tuple_result_of_the_wrong_length_or_kind_is_explained():
    expected = (torch.zeros(2), torch.ones(3))
    names = ("output", "weights")
    assert compare_results(expected, (torch.zeros(2),), names=names, atol=0).message == (
        "expected a tuple (output, weights) of 2 parts, got 1"
    )
    assert "forget to return" in compare_results(expected, None, names=names, atol=0).message


def test_a_single_tensor_is_compared_as_before():
    verdict = compare_results(torch.zeros(2, 3), torch.zeros(3, 2), atol=1e-4)
    assert "rows and columns are swapped" in verdict.message


def test_a_boolean_mismatch_names_true_and_false():
    verdict = compare_results(
        torch.tensor([True, False]),
        torch.tensor([True, True]),
        atol=0.0,
        expected_dtypes=(torch.bool,),
    )
    assert verdict.message == "1 of 2 entries differ; first at [1]: expected False, got True"
