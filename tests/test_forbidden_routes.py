"""An exercise that asks for a computation written by hand refuses every route to the built-in
one, in the student's check and in grading, with the same message.

Each route below is a correct answer but for the built-in it calls: without the exercise's
blocks it passes (so the test shows the block, not a mistake, is what fails it), with them
it fails its check, and ``course-grade`` gives it an error with the message the student saw.
"""

from __future__ import annotations

import dataclasses
import sqlite3

import pytest
import torch
import torch.nn.functional as F
from test_grading import SEED, document, entry, grade, write
from test_rmsnorm_chapter import RMS_NORM_ROUTES

from course_lib.exercises import evaluate, get_exercise, list_exercises
from course_lib.exercises._evaluation import run_locally

REFUSED = "this exercise asks you to write the computation yourself; your code called "
norm = F.layer_norm  # a Python alias of the built-in, as a notebook might make one


# ----------------------------------------------------------------------------- layer-norm


def by_functional_layer_norm(x, gain, bias, eps):
    return F.layer_norm(x, (x.size(-1),), gain, bias, eps)


def by_an_alias(x, gain, bias, eps):
    return norm(x, (x.size(-1),), gain, bias, eps)


def by_torch_layer_norm(x, gain, bias, eps):
    return torch.layer_norm(x, (x.size(-1),), gain, bias, eps)


def by_native_layer_norm(x, gain, bias, eps):
    return torch.native_layer_norm(x, (x.size(-1),), gain, bias, eps)[0]


def by_aten_layer_norm(x, gain, bias, eps):
    return torch.ops.aten.layer_norm(x, [x.size(-1)], gain, bias, eps)


def by_aten_native_layer_norm(x, gain, bias, eps):
    return torch.ops.aten.native_layer_norm.default(x, [x.size(-1)], gain, bias, eps)[0]


def by_the_module(x, gain, bias, eps):
    layer = torch.nn.LayerNorm(x.size(-1), eps=eps).to(x.dtype)
    with torch.no_grad():
        layer.weight.copy_(gain)
        layer.bias.copy_(bias)
        return layer(x)


def by_group_norm_of_one_group(x, gain, bias, eps):
    tokens = x.reshape(-1, 1, x.size(-1))
    return F.group_norm(tokens, 1, eps=eps).reshape(x.shape) * gain + bias


def by_batch_norm_of_the_transposed_tokens(x, gain, bias, eps):
    tokens = x.reshape(-1, x.size(-1)).T
    normed = F.batch_norm(tokens, None, None, training=True, eps=eps or 1e-30)
    return normed.T.reshape(x.shape) * gain + bias


def by_instance_norm(x, gain, bias, eps):
    tokens = x.reshape(-1, 1, x.size(-1))
    return F.instance_norm(tokens, eps=eps).reshape(x.shape) * gain + bias


def by_rms_norm_of_the_centred_tokens(x, gain, bias, eps):
    centred = x - x.mean(-1, keepdim=True)
    return F.rms_norm(centred, (x.size(-1),), eps=eps) * gain + bias


# ----------------------------------------------------------------------------- attention


def weights_by_hand(query, key, mask):
    scores = query @ key.transpose(-2, -1) / query.size(-1) ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(-1)


def by_functional_sdpa(query, key, value, mask=None):
    output = F.scaled_dot_product_attention(query, key, value, attn_mask=mask)
    return output, weights_by_hand(query, key, mask)


def by_aten_sdpa(query, key, value, mask=None):
    output = torch.ops.aten.scaled_dot_product_attention(query, key, value, mask)
    return output, weights_by_hand(query, key, mask)


def by_the_math_kernel(query, key, value, mask=None):
    if mask is not None:  # as an additive mask
        mask = torch.zeros(mask.shape, dtype=query.dtype).masked_fill(~mask, float("-inf"))
    return torch._scaled_dot_product_attention_math(query, key, value, mask)


def cache_step_by_sdpa(x, cached_keys, cached_values, w_q, w_k, w_v):
    keys = torch.cat([cached_keys, x @ w_k], dim=1)
    values = torch.cat([cached_values, x @ w_v], dim=1)
    return F.scaled_dot_product_attention(x @ w_q, keys, values), keys, values


# ----------------------------------------------------------------------------- embedding


def lookup_by_functional_embedding(ids, weight):
    return F.embedding(ids, weight)


def lookup_by_torch_embedding(ids, weight):
    return torch.embedding(weight, ids)


def lookup_by_aten_embedding(ids, weight):
    return torch.ops.aten.embedding(weight, ids)


def lookup_by_the_module(ids, weight):
    return torch.nn.Embedding.from_pretrained(weight)(ids)


# ----------------------------------------------------------------------------- encoder layer


def layer_by_torchs_encoder_layer(x, mask, w_attention, w_1, w_2, gain, bias, num_heads,
                                  norm_first):  # fmt: skip
    d_model, d_ff = w_1.shape
    layer = torch.nn.TransformerEncoderLayer(
        d_model, num_heads, d_ff, dropout=0.0, batch_first=True, norm_first=norm_first
    ).to(x.dtype)
    w_q, w_k, w_v, w_o = w_attention
    with torch.no_grad():
        layer.self_attn.in_proj_weight.copy_(torch.cat([w_q.T, w_k.T, w_v.T]))
        layer.self_attn.in_proj_bias.zero_()
        layer.self_attn.out_proj.weight.copy_(w_o.T)
        layer.self_attn.out_proj.bias.zero_()
        layer.linear1.weight.copy_(w_1.T)
        layer.linear1.bias.zero_()
        layer.linear2.weight.copy_(w_2.T)
        layer.linear2.bias.zero_()
        for number, norm_layer in enumerate((layer.norm1, layer.norm2)):
            norm_layer.weight.copy_(gain[number])
            norm_layer.bias.copy_(bias[number])
    padding = None if mask is None else ~mask[:, 0, :]
    return layer.train()(x, src_key_padding_mask=padding)


ROUTES = [
    ("layer-norm", by_functional_layer_norm, "torch.nn.functional.layer_norm"),
    ("layer-norm", by_an_alias, "torch.nn.functional.layer_norm"),
    ("layer-norm", by_torch_layer_norm, "torch.ops.aten.layer_norm"),
    ("layer-norm", by_native_layer_norm, "torch.ops.aten.native_layer_norm"),
    ("layer-norm", by_aten_layer_norm, "torch.ops.aten.layer_norm"),
    ("layer-norm", by_aten_native_layer_norm, "torch.ops.aten.native_layer_norm"),
    ("layer-norm", by_the_module, "torch.nn.functional.layer_norm"),
    ("layer-norm", by_group_norm_of_one_group, "torch.ops.aten.group_norm"),
    ("layer-norm", by_batch_norm_of_the_transposed_tokens, "torch.ops.aten.batch_norm"),
    ("layer-norm", by_instance_norm, "torch.ops.aten.instance_norm"),
    ("layer-norm", by_rms_norm_of_the_centred_tokens, "torch.ops.aten.rms_norm"),
    ("scaled-dot-product-attention", by_functional_sdpa, "scaled_dot_product_attention"),
    ("scaled-dot-product-attention", by_aten_sdpa, "scaled_dot_product_attention"),
    ("scaled-dot-product-attention", by_the_math_kernel, "_scaled_dot_product_attention_math"),
    ("kv-cache-step", cache_step_by_sdpa, "torch.ops.aten.scaled_dot_product_attention"),
    ("emb-one-hot-lookup", lookup_by_functional_embedding, "torch.nn.functional.embedding"),
    ("emb-one-hot-lookup", lookup_by_torch_embedding, "torch.ops.aten.embedding"),
    ("emb-one-hot-lookup", lookup_by_aten_embedding, "torch.ops.aten.embedding"),
    ("emb-one-hot-lookup", lookup_by_the_module, "torch.nn.functional.embedding"),
    ("encoder-layer", layer_by_torchs_encoder_layer, "TransformerEncoderLayer.forward"),
    *RMS_NORM_ROUTES,
]


def route_id(route: tuple) -> str:
    return f"{route[0]}-{route[1].__name__}"


def test_every_exercise_that_forbids_a_torch_computation_has_routes_here():
    forbidding = {
        e.id
        for e in list_exercises()
        if getattr(e, "blocked_ops", ())
        or any(not f.__module__.startswith("course_lib") for f in getattr(e, "blocked", ()))
    }
    assert forbidding == {exercise_id for exercise_id, _, _ in ROUTES}


@pytest.mark.parametrize("exercise_id, answer, name", ROUTES, ids=map(route_id, ROUTES))
def test_a_route_to_the_built_in_passes_only_without_the_exercises_blocks(
    exercise_id, answer, name
):
    exercise = get_exercise(exercise_id)
    unblocked = dataclasses.replace(exercise, blocked=(), blocked_ops=())
    verdict = run_locally(
        unblocked, exercise.answer_record(answer), seed=exercise.seed, timeout=exercise.timeout
    )
    assert verdict.ok, verdict.message


@pytest.mark.parametrize("exercise_id, answer, name", ROUTES, ids=map(route_id, ROUTES))
def test_a_route_to_the_built_in_fails_the_check_with_the_refusal(exercise_id, answer, name):
    result = evaluate(exercise_id, answer, record=False)
    assert result.status == "failed"
    refusals = [c.message for c in result.checks if REFUSED in c.message]
    assert refusals and name in refusals[0], str(result)


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, tuple[str, str]]:
    root = tmp_path_factory.mktemp("routes")
    inbox, out = root / "inbox", root / "out"
    inbox.mkdir()
    for index, (exercise_id, answer, _) in enumerate(ROUTES):
        record = get_exercise(exercise_id).answer_record(answer)
        write(inbox, f"r{index:02d}", document(f"r{index:02d}", [entry(exercise_id, record)]))
    status, printed = grade(inbox, "--out", out, "--seed", SEED, "--jobs", 2, "--quiet")
    assert status == 0, printed
    with sqlite3.connect(out / "gradebook.sqlite") as db:
        rows = db.execute(
            "SELECT s.student_id, r.status, r.message FROM results r JOIN submissions s "
            "USING (sha256)"
        ).fetchall()
    return {student: (status, message) for student, status, message in rows}


@pytest.mark.parametrize("index", range(len(ROUTES)), ids=[route_id(r) for r in ROUTES])
def test_a_route_to_the_built_in_scores_zero_in_grading_with_the_same_refusal(graded, index):
    status, message = graded[f"r{index:02d}"]
    assert status == "error"
    assert REFUSED in message and ROUTES[index][2] in message


def test_the_blocks_live_in_the_process_that_runs_the_answer_only():
    evaluate("layer-norm", by_torch_layer_norm, record=False)
    x = torch.randn(2, 3)
    assert torch.allclose(torch.layer_norm(x, (3,)), F.layer_norm(x, (3,)))


def test_without_fork_a_route_is_refused_too_and_the_block_is_lifted_after(monkeypatch):
    from course_lib.exercises import _evaluation

    monkeypatch.setattr(_evaluation, "can_fork", lambda: False)
    result = evaluate("layer-norm", by_torch_layer_norm, record=False)
    assert REFUSED in result.checks[1].message
    x = torch.randn(2, 3)
    assert torch.allclose(torch.layer_norm(x, (3,)), F.layer_norm(x, (3,)))
