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

from course_lib.answers.judging import run_locally
from course_lib.exercises import evaluate, get_exercise, list_exercises

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


# Routes of issue 28 and their kind: refused once the runner refuses with _refuse.refuse_for_good.


def by_refs_native_layer_norm(x, gain, bias, eps):
    return torch._refs.native_layer_norm(x, [x.size(-1)], gain, bias, eps)[0]


def by_the_decomposition_table(x, gain, bias, eps):
    decompose = torch._decomp.decomposition_table[torch.ops.aten.native_layer_norm.default]
    return decompose(x, [x.size(-1)], gain, bias, eps)[0]


def by_batch_norm_with_update_of_the_transposed_tokens(x, gain, bias, eps):
    tokens = x.reshape(-1, x.size(-1)).T.contiguous()
    stats = torch.zeros(tokens.size(0), dtype=x.dtype), torch.ones(tokens.size(0), dtype=x.dtype)
    normed = torch.ops.aten._batch_norm_with_update(tokens, None, None, *stats, 0.0, eps or 1e-30)
    return normed[0].T.reshape(x.shape) * gain + bias


def by_another_overload_of_a_blocked_operator(x, gain, bias, eps):
    tokens = x.reshape(-1, x.size(-1)).T.contiguous()
    legit = torch.ops.aten._native_batch_norm_legit.no_stats
    normed = legit(tokens, None, None, True, 0.0, eps or 1e-30)[0]
    return normed.T.reshape(x.shape) * gain + bias


def by_a_nested_tensor(x, gain, bias, eps):
    nested = torch.nested.nested_tensor([x.reshape(-1, x.size(-1))])
    normed = torch.ops.aten.native_layer_norm(nested, [x.size(-1)], gain, bias, eps)[0]
    return normed.unbind()[0].reshape(x.shape)


def by_redispatching_to_meta(x, gain, bias, eps):  # Meta's kernel: the Python reference
    meta = torch._C.DispatchKeySet(torch._C.DispatchKey.Meta)
    native = torch.ops.aten.native_layer_norm.default
    return native.redispatch(meta, x, [x.size(-1)], gain, bias, eps)[0]


def by_vmap_of_the_operator(x, gain, bias, eps):
    def one(token):
        return torch.ops.aten.native_layer_norm(token, [x.size(-1)], gain, bias, eps)[0]

    return torch.vmap(one)(x.reshape(-1, x.size(-1))).reshape(x.shape)


def by_local_response_norm_of_the_centred_tokens(x, gain, bias, eps):
    d = x.size(-1)
    centred = (x - x.mean(-1, keepdim=True)).reshape(-1, d, 1)
    size = 2 * d - 1  # every window covers all d features
    normed = F.local_response_norm(centred, size, alpha=size / d, beta=0.5, k=eps)
    return normed.reshape(x.shape) * gain + bias


def by_the_static_runtime(x, gain, bias, eps):
    unit = torch.jit.CompilationUnit(
        "def norm(x: Tensor, gain: Tensor, bias: Tensor, eps: float) -> Tensor:\n"
        "    return torch.layer_norm(x, [x.size(-1)], gain, bias, eps)\n"
    )
    return torch._C._jit_to_static_module(unit.norm.graph)(x, gain, bias, eps)


def by_undoing_what_the_stack_holds(x, gain, bias, eps):
    import sys

    frame = sys._getframe()
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if callable(value) and getattr(value, "__name__", "") in ("undo", "restore"):
                try:
                    value()
                except Exception:
                    pass
        frame = frame.f_back
    return torch.layer_norm(x, (x.size(-1),), gain, bias, eps)


def by_destroying_every_library_gc_finds(x, gain, bias, eps):
    import gc

    try:
        for thing in gc.get_objects():
            if isinstance(thing, torch.library.Library):
                thing._destroy()
    except Exception:  # gc refused
        pass
    return torch.layer_norm(x, (x.size(-1),), gain, bias, eps)


def by_reloading_the_references(x, gain, bias, eps):
    import importlib

    try:
        references = importlib.reload(torch._refs)
    except Exception:  # reloading refused
        references = torch._refs
    return references.native_layer_norm(x, [x.size(-1)], gain, bias, eps)[0]


def by_reloading_the_functional_module(x, gain, bias, eps):
    import importlib

    try:
        functional = importlib.reload(F)  # runs its code again: fresh, unrefused functions
    except Exception:  # reloading refused
        functional = F
    d = x.size(-1)
    centred = (x - x.mean(-1, keepdim=True)).reshape(-1, d, 1)
    size = 2 * d - 1
    normed = functional.local_response_norm(centred, size, alpha=size / d, beta=0.5, k=eps)
    return normed.reshape(x.shape) * gain + bias


def by_a_fresh_python_in_a_subprocess(x, gain, bias, eps):
    import json
    import subprocess
    import sys

    code = (
        "import json, sys, torch\n"
        "a = json.load(sys.stdin)\n"
        "x, g, b = (torch.tensor(a[k], dtype=torch.float64) for k in 'xgb')\n"
        "print(json.dumps(torch.layer_norm(x, (x.size(-1),), g, b, a['eps']).tolist()))\n"
    )
    sent = {"x": x.tolist(), "g": gain.tolist(), "b": bias.tolist(), "eps": eps}
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], input=json.dumps(sent), capture_output=True,
            text=True, timeout=60, check=True,
        )  # fmt: skip
        return torch.tensor(json.loads(done.stdout), dtype=x.dtype)
    except Exception:  # starting a process refused
        return torch.layer_norm(x, (x.size(-1),), gain, bias, eps)


def rms_by_its_decomposition(x, weight, eps):
    decompositions = torch._decomp.decompositions
    return decompositions._fused_rms_norm(x, [x.size(-1)], weight, eps)[0]


def rms_by_local_response_norm(x, weight, eps):
    d = x.size(-1)
    size = 2 * d - 1
    normed = F.local_response_norm(x.reshape(-1, d, 1), size, alpha=size / d, beta=0.5, k=eps)
    return normed.reshape(x.shape) * weight


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


def by_the_cpu_flash_decomposition(query, key, value, mask=None):
    from torch._decomp.decompositions import scaled_dot_product_flash_attention_for_cpu

    width = max(query.size(-1), value.size(-1))  # its kernel wants one head size: pad
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2])
    q, k, v = (
        F.pad(t, (0, width - t.size(-1)))
        .expand(*batch, t.size(-2), width)
        .reshape(-1, 1, t.size(-2), width)
        for t in (query, key, value)
    )
    additive = None
    if mask is not None:
        shape = (query.size(-2), key.size(-2))
        allowed = mask.expand(*batch, *shape).reshape(-1, 1, *shape)
        additive = torch.zeros(allowed.shape, dtype=query.dtype).masked_fill(
            ~allowed, float("-inf")
        )
    scale = query.size(-1) ** -0.5
    output = scaled_dot_product_flash_attention_for_cpu(q, k, v, attn_mask=additive, scale=scale)
    output = output[0][..., : value.size(-1)].reshape(*batch, query.size(-2), value.size(-1))
    return output, weights_by_hand(query, key, mask)


def by_reloading_the_quantizable_attention(query, key, value, mask=None):
    import importlib

    activation = torch.ao.nn.quantizable.modules.activation
    try:
        activation = importlib.reload(activation)  # runs its code again: an unrefused class
    except Exception:  # reloading refused
        pass
    d, width = query.size(-1), max(query.size(-1), value.size(-1))
    module = activation.MultiheadAttention(width, 1, bias=False)
    with torch.no_grad():
        for linear in (module.linear_Q, module.linear_K, module.linear_V, module.out_proj):
            linear.weight.copy_(torch.eye(width))
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2])
    q, k, v = (
        F.pad(t, (0, width - t.size(-1)))
        .expand(*batch, t.size(-2), width)
        .reshape(-1, t.size(-2), width)
        .transpose(0, 1)
        for t in (query * (width / d) ** 0.5, key, value)  # the module scales by width
    )
    blocked = None
    if mask is not None:
        shape = (query.size(-2), key.size(-2))
        blocked = ~mask.expand(*batch, *shape).reshape(-1, *shape)
    output = module(q, k, v, attn_mask=blocked, need_weights=False)[0].transpose(0, 1)
    output = output[..., : value.size(-1)].reshape(*batch, query.size(-2), value.size(-1))
    return output, weights_by_hand(query, key, mask)


# ----------------------------------------------------------------------------- embedding


def lookup_by_functional_embedding(ids, weight):
    return F.embedding(ids, weight)


def lookup_by_torch_embedding(ids, weight):
    return torch.embedding(weight, ids)


def lookup_by_aten_embedding(ids, weight):
    return torch.ops.aten.embedding(weight, ids)


def lookup_by_the_module(ids, weight):
    return torch.nn.Embedding.from_pretrained(weight)(ids)


def lookup_by_its_decomposition(ids, weight):
    return torch._decomp.decomposition_table[torch.ops.aten.embedding.default](weight, ids)


def lookup_by_the_operator_on_a_nested_tensor(ids, weight):
    rows = torch.nested.nested_tensor(list(ids.reshape(-1, ids.size(-1))))
    looked_up = torch.ops.aten.embedding(weight, rows).unbind()
    return torch.stack(looked_up).reshape(*ids.shape, weight.size(-1))


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

ISSUE_28_ROUTES = [  # refused once the runner refuses with _refuse.refuse_for_good
    ("layer-norm", by_refs_native_layer_norm, "torch._refs.native_layer_norm"),
    ("layer-norm", by_the_decomposition_table, "torch._refs.native_layer_norm"),
    (
        "layer-norm",
        by_batch_norm_with_update_of_the_transposed_tokens,
        "torch.ops.aten._batch_norm_with_update",
    ),
    (
        "layer-norm",
        by_another_overload_of_a_blocked_operator,
        "torch.ops.aten._native_batch_norm_legit",
    ),
    ("layer-norm", by_a_nested_tensor, "torch.ops.aten.native_layer_norm"),
    ("layer-norm", by_redispatching_to_meta, "torch.ops.aten.native_layer_norm"),
    ("layer-norm", by_vmap_of_the_operator, "torch.ops.aten.native_layer_norm"),
    (
        "layer-norm",
        by_local_response_norm_of_the_centred_tokens,
        "torch.nn.functional.local_response_norm",
    ),
    ("layer-norm", by_the_static_runtime, "TorchScript"),
    ("layer-norm", by_undoing_what_the_stack_holds, "torch.ops.aten.layer_norm"),
    ("layer-norm", by_destroying_every_library_gc_finds, "torch.ops.aten.layer_norm"),
    ("layer-norm", by_reloading_the_references, "torch._refs.native_layer_norm"),
    (
        "layer-norm",
        by_reloading_the_functional_module,
        "torch.nn.functional.local_response_norm",
    ),
    ("layer-norm", by_a_fresh_python_in_a_subprocess, "torch.ops.aten.layer_norm"),
    ("rms-norm", rms_by_its_decomposition, "torch._decomp.decompositions._fused_rms_norm"),
    ("rms-norm", rms_by_local_response_norm, "torch.nn.functional.local_response_norm"),
    (
        "scaled-dot-product-attention",
        by_the_cpu_flash_decomposition,
        "torch._decomp.decompositions.scaled_dot_product_flash_attention_for_cpu",
    ),
    (
        "scaled-dot-product-attention",
        by_reloading_the_quantizable_attention,
        "MultiheadAttention._forward_impl",
    ),
    ("emb-one-hot-lookup", lookup_by_its_decomposition, "torch._decomp.decompositions.embedding"),
    ("emb-one-hot-lookup", lookup_by_the_operator_on_a_nested_tensor, "torch.ops.aten.embedding"),
]
ROUTES += ISSUE_28_ROUTES


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
    # refusals are tested here, not time limits: one only a hang reaches
    status, printed = grade(
        inbox, "--out", out, "--seed", SEED, "--jobs", 2, "--timeout", 60, "--quiet"
    )
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
    from course_lib.answers import judging

    monkeypatch.setattr(judging, "can_fork", lambda: False)
    result = evaluate("layer-norm", by_torch_layer_norm, record=False)
    assert REFUSED in result.checks[1].message
    x = torch.randn(2, 3)
    assert torch.allclose(torch.layer_norm(x, (3,)), F.layer_norm(x, (3,)))
