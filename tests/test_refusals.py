"""The refusals of :mod:`course_lib.answers._refuse`: every route to a computation an exercise
forbids raises with the refusal's message in a process where ``refuse_for_good`` ran, while
the same route computes the right values in a process where it did not (so the refusal, not
a mistake in the route, is what stops it); nothing Python can reach undoes a refusal; and the
operations an answer written by hand needs keep working.

Each route runs in a child forked from this process (which ran ``preload``, as the fork server
does), and reports through a pipe.
"""

from __future__ import annotations

import functools
import gc
import importlib
import json
import math
import os
import statistics
import subprocess
import sys
import time
import types
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from course_lib.answers import _confine, _refuse
from course_lib.answers.forbidden import ATTENTION, EMBEDDING, ENCODER_LAYER, NORMALIZATION
from course_lib.answers.runner import blocked_message

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the refusals live in a fork")

REFUSED = "this exercise asks you to write the computation yourself; your code called "
EPS = 1e-5
LAYER_NORM = [["torch.nn.functional", "layer_norm"]]
RMS_NORM = [["torch.nn.functional", "rms_norm"]]
LOOKUP = [["torch.nn.functional", "embedding"]]
aten = torch.ops.aten


@pytest.fixture(scope="module", autouse=True)
def preloaded():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the fork server's setting; forks of one thread are safe
    _refuse.preload()
    yield
    torch.set_num_threads(threads)


def plain(value: Any) -> Any:
    """``value`` as JSON: tensors (nested ones too) as lists of numbers."""
    if isinstance(value, torch.Tensor):
        if value.is_nested:
            return [plain(part) for part in value.unbind()]
        if value.is_quantized:
            value = value.dequantize()
        return value.detach().to(torch.float64).tolist()
    if isinstance(value, (tuple, list)):
        return [plain(part) for part in value]
    return value


def in_child(task: Callable[[], Any]) -> dict[str, Any]:
    """Run ``task`` in a forked child; what it returned, or the error it raised."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            os.close(read)
            try:
                report = {"status": "returned", "value": plain(task())}
            except BaseException as error:
                report = {"status": "raised", "error": f"{type(error).__name__}: {error}"}
            with os.fdopen(write, "w") as pipe:
                json.dump(report, pipe)
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        how = f"killed by signal {os.WTERMSIG(status)}"
    else:
        how = f"exit status {os.waitstatus_to_exitcode(status)}"
    assert text, f"the child died without reporting ({how})"
    return json.loads(text)


def refused_then(
    task: Callable[[], Any], blocked: list[list[str]], ops: tuple[str, ...]
) -> Callable[[], Any]:
    """``task``, after refusing ``blocked`` and ``ops`` for good."""

    def run() -> Any:
        _refuse.refuse_for_good(blocked, list(ops))
        return task()

    return run


# ----------------------------------------------------------------------------- inputs


def draw(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def tokens() -> torch.Tensor:
    return draw(6, 8, seed=1)


def layer_norm_by_hand(x: torch.Tensor) -> torch.Tensor:
    centred = x - x.mean(-1, keepdim=True)
    return centred * torch.rsqrt(centred.pow(2).mean(-1, keepdim=True) + EPS)


def rms_norm_by_hand(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS)


def qkv() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return draw(2, 1, 5, 4, seed=2), draw(2, 1, 7, 4, seed=3), draw(2, 1, 7, 4, seed=4)


def attention_by_hand() -> torch.Tensor:
    query, key, value = qkv()
    weights = (query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))).softmax(-1)
    return weights @ value


def ids_and_table() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.tensor([[3, 0, 3], [9, 1, 4]]), draw(10, 6, seed=5)


def lookup_by_hand() -> torch.Tensor:
    ids, table = ids_and_table()
    return F.one_hot(ids, table.size(0)).to(table.dtype) @ table


def transposed() -> torch.Tensor:
    """The tokens as the channels of a batch norm: a batch norm of these is a layer norm."""
    return tokens().T.contiguous()


# ----------------------------------------------------------------------------- layer norm


def by_refs_native_layer_norm():
    return torch._refs.native_layer_norm(tokens(), [8], None, None, EPS)[0]


def by_the_original_the_refs_decorator_wraps():
    original = torch._refs.native_layer_norm
    while hasattr(original, "__wrapped__"):
        original = original.__wrapped__
    return original(tokens(), [8], None, None, EPS)[0]


def by_the_original_in_the_decorators_closure():
    wrapper = torch._refs.native_layer_norm
    for cell in wrapper.__closure__:
        content = cell.cell_contents
        if isinstance(content, types.FunctionType) and content.__name__ == "native_layer_norm":
            return content(tokens(), [8], None, None, EPS)[0]
    raise AssertionError("no original in the closure")


def by_refs_functional_layer_norm():
    return torch._refs.nn.functional.layer_norm(tokens(), [8], eps=EPS)


def by_refs_normalize_helper():
    return torch._refs._normalize(tokens(), [1], EPS)[0]


def by_the_decomposition_table():
    table = torch._decomp.decomposition_table
    return table[aten.native_layer_norm.default](tokens(), [8], None, None, EPS)[0]


def by_get_decompositions():
    table = torch._decomp.get_decompositions([aten.native_layer_norm])
    return table[aten.native_layer_norm.default](tokens(), [8], None, None, EPS)[0]


def by_the_meta_python_kernel():
    kernel = aten.native_layer_norm.default.py_kernels[torch._C.DispatchKey.Meta]
    return kernel(tokens(), [8], None, None, EPS)[0]


def by_redispatching_real_tensors_to_meta():  # Meta's kernel here is the Python reference
    keys = torch._C.DispatchKeySet(torch._C.DispatchKey.Meta)
    return aten.native_layer_norm.default.redispatch(keys, tokens(), [8], None, None, EPS)[0]


def by_redispatching_to_cpu():
    keys = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
    return aten.native_layer_norm.default.redispatch(keys, tokens(), [8], None, None, EPS)[0]


def by_the_kernel_of_a_key():
    return aten.native_layer_norm.default._op_dk("CPU", tokens(), [8], None, None, EPS)[0]


def by_decompose():
    return aten.layer_norm.default.decompose(tokens(), [8], None, None, EPS)


def by_excluding_autograd():
    keys = torch._C.DispatchKeySet(torch._C.DispatchKey.AutogradCPU)
    with torch._C._ExcludeDispatchKeyGuard(keys):
        return aten.native_layer_norm(tokens(), [8], None, None, EPS)[0]


def by_dispatching_below_autograd():
    with torch._C._AutoDispatchBelowAutograd():
        return aten.native_layer_norm(tokens(), [8], None, None, EPS)[0]


def by_a_nested_tensor():
    nested = torch.nested.nested_tensor([tokens()[:2], tokens()[2:]])
    gain, bias = torch.ones(8), torch.zeros(8)
    return torch.cat(aten.native_layer_norm(nested, [8], gain, bias, EPS)[0].unbind())


def by_a_jagged_nested_tensor():
    jagged = torch.nested.nested_tensor([tokens()[:2], tokens()[2:]], layout=torch.jagged)
    return torch.cat(torch.layer_norm(jagged, [8], eps=EPS).unbind())


def by_the_raw_builtin_of_the_overload():
    return aten.native_layer_norm.default._op(tokens(), [8], None, None, EPS)[0]


def by_a_dispatch_mode_that_replays_the_call():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Replay(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with Replay():
        return aten.native_layer_norm(tokens(), [8], None, None, EPS)[0]


def by_functionalize():
    def norm(x):
        return aten.native_layer_norm(x, [8], None, None, EPS)[0]

    return torch.func.functionalize(norm)(tokens())


def by_vmap_of_the_operator():
    def one(token):
        return aten.native_layer_norm(token, [8], None, None, EPS)[0]

    return torch.vmap(one)(tokens())


def by_torch_func_vmap_of_layer_norm():
    return torch.func.vmap(lambda token: torch.layer_norm(token, [8], eps=EPS))(tokens())


def by_an_autograd_function():
    class Norm(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return torch.layer_norm(x, [8], eps=EPS)

        @staticmethod
        def backward(ctx, grad):
            return grad

    return Norm.apply(tokens().requires_grad_())


def by_the_python_dispatcher():
    x = transposed()
    with torch._C._EnablePythonDispatcher():
        return aten.native_batch_norm(x, None, None, None, None, True, 0.0, EPS)[0].T


def by_batch_norm_with_update_of_the_transposed_tokens():
    stats = torch.zeros(6), torch.ones(6)
    out = aten._batch_norm_with_update(transposed(), None, None, *stats, 0.0, EPS)
    return out[0].T


def by_batch_norm_no_stats_overload():
    return aten._native_batch_norm_legit.no_stats(transposed(), None, None, True, 0.0, EPS)[0].T


def by_native_batch_norm_out_overload():
    x = transposed()
    out, mean, invstd = torch.empty_like(x), torch.empty(6), torch.empty(6)
    aten.native_batch_norm.out(
        x, None, None, None, None, True, 0.0, EPS, out=out, save_mean=mean, save_invstd=invstd
    )
    return out.T


def by_the_batch_norm_decomposition_helper():
    helper = torch._decomp.decompositions.native_batch_norm_helper
    return helper(transposed(), None, None, None, None, True, 0.0, EPS, False)[0].T


def by_the_no_stats_decomposition():
    table = torch._decomp.decomposition_table
    decomposition = table[aten._native_batch_norm_legit.no_stats]
    return decomposition(transposed(), None, None, True, 0.0, EPS)[0].T


def by_a_group_norm_of_one_group():
    return aten.native_group_norm(tokens(), None, None, 6, 1, 8, 1, EPS)[0]


def by_refs_native_group_norm():
    return torch._refs.native_group_norm(tokens(), None, None, 6, 1, 8, 1, EPS)[0]


def by_a_quantized_layer_norm():
    quantized = torch.quantize_per_tensor(tokens(), 0.02, 128, torch.quint8)
    return torch.ops.quantized.layer_norm(quantized, [8], None, None, EPS, 0.02, 128)


def by_the_quantized_layer_norm_module():
    quantized = torch.quantize_per_tensor(tokens(), 0.02, 128, torch.quint8)
    gain, bias = torch.nn.Parameter(torch.ones(8)), torch.nn.Parameter(torch.zeros(8))
    module = torch.ao.nn.quantized.LayerNorm(8, gain, bias, 0.02, 128, EPS)
    return module(quantized)


def by_local_response_norm_of_the_centred_tokens():
    x = tokens()
    centred = (x - x.mean(-1, keepdim=True))[..., None]
    size = 2 * 8 - 1  # every window covers all 8 features
    return F.local_response_norm(centred, size, alpha=size / 8, beta=0.5, k=EPS)[..., 0]


def by_an_encoder_layer_of_zero_weights():  # LN(LN(x)) is LN(x)
    x = tokens()[None]
    d, zeros = 8, torch.zeros
    return aten._transformer_encoder_layer_fwd(
        x, d, 1, zeros(3 * d, d), zeros(3 * d), zeros(d, d), zeros(d), True, False, EPS,
        torch.ones(d), zeros(d), torch.ones(d), zeros(d),
        zeros(16, d), zeros(16), zeros(d, 16), zeros(d), None,
    )[0]  # fmt: skip


def by_a_scripted_function():
    return _scripted_layer_norm()(tokens())


def _scripted_layer_norm() -> Any:
    def norm(x: torch.Tensor) -> torch.Tensor:
        return torch.layer_norm(x, [8], eps=1e-5)

    return torch.jit.script(norm)


def by_a_static_module_of_a_scripted_function():
    static = torch._C._jit_to_static_module(_scripted_layer_norm().graph)
    return static(tokens())


def by_torchscripts_mkldnn_layer_norm():
    operation = torch.ops.prim.MKLDNNLayerNorm
    x, ones, zeros = tokens().to_mkldnn(), torch.ones(8), torch.zeros(8)
    return operation(x, [8], ones.to_mkldnn(), zeros.to_mkldnn(), EPS, False).to_dense()


# ----------------------------------------------------------------------------- RMS norm


def rms_by_the_fused_operator():
    return aten._fused_rms_norm(tokens(), [8], None, EPS)[0]


def rms_by_its_decomposition():
    return torch._decomp.decompositions._fused_rms_norm(tokens(), [8], None, EPS)[0]


def rms_by_local_response_norm():
    size = 2 * 8 - 1
    return F.local_response_norm(tokens()[..., None], size, size / 8, 0.5, EPS)[..., 0]


def rms_by_vmap_of_rms_norm():
    return torch.vmap(lambda token: torch.rms_norm(token, [8], eps=EPS))(tokens())


# ----------------------------------------------------------------------------- attention


def sdpa_by_the_cpu_flash_kernel():
    return aten._scaled_dot_product_flash_attention_for_cpu(*qkv())[0]


def sdpa_by_its_decomposition():
    decomposition = torch._decomp.decompositions.scaled_dot_product_flash_attention_for_cpu
    return decomposition(*qkv())[0]


def sdpa_by_the_math_kernel():
    return torch._scaled_dot_product_attention_math(*qkv())[0]


def sdpa_by_flex_attentions_math():
    from torch._higher_order_ops.flex_attention import math_attention

    query, key, value = qkv()

    def everything(b, h, q, k):
        return q >= 0

    scale = 1 / math.sqrt(query.size(-1))
    return math_attention(query, key, value, lambda s, *_: s, (everything,), scale, {})[0]


def sdpa_by_multi_head_attention_forward():
    query, key, value = (t[:, 0].transpose(0, 1) for t in qkv())  # (length, batch, features)
    eye = torch.eye(4)
    out, _ = F.multi_head_attention_forward(
        query, key, value, 4, 1, None, None, None, None, False, 0.0, eye, None,
        need_weights=True, use_separate_proj_weight=True,
        q_proj_weight=eye, k_proj_weight=eye, v_proj_weight=eye,
    )  # fmt: skip
    return out.transpose(0, 1)[:, None]


def sdpa_by_the_multihead_attention_module():
    query, key, value = (t[:, 0] for t in qkv())
    module = torch.nn.MultiheadAttention(4, 1, bias=False, batch_first=True)
    with torch.no_grad():
        module.in_proj_weight.copy_(torch.eye(4).repeat(3, 1))
        module.out_proj.weight.copy_(torch.eye(4))
    return module(query, key, value)[0][:, None]


def sdpa_by_the_quantizable_multihead_attention():
    query, key, value = (t[:, 0].transpose(0, 1) for t in qkv())
    module = torch.ao.nn.quantizable.MultiheadAttention(4, 1, bias=False)
    with torch.no_grad():
        for linear in (module.linear_Q, module.linear_K, module.linear_V, module.out_proj):
            linear.weight.copy_(torch.eye(4))
    return module(query, key, value)[0].transpose(0, 1)[:, None]


def sdpa_by_native_multi_head_attention():
    query, key, value = (t[:, 0] for t in qkv())
    query = torch.cat([query, torch.zeros(2, 2, 4)], 1)  # as many queries as keys
    projection = torch.eye(4).repeat(3, 1)
    out = aten._native_multi_head_attention(
        query, key, value, 4, 1, projection, torch.zeros(12), torch.eye(4), torch.zeros(4)
    )[0]
    return out[:, None, :5]


def sdpa_under_autocast():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return F.scaled_dot_product_attention(*qkv()).float()


def sdpa_by_vmap():
    def one(query, key, value):
        return F.scaled_dot_product_attention(query, key, value)

    return torch.vmap(one)(*qkv())


def sdpa_by_the_gradient_of_the_values():  # dV = P^T dO, with the roles of Q and K swapped
    query, key, value = qkv()
    scale = 1 / math.sqrt(query.size(-1))
    backward = aten._scaled_dot_product_flash_attention_for_cpu_backward

    def unnormalised(rows: torch.Tensor) -> torch.Tensor:
        zeros = torch.zeros(*key.shape[:3])
        out = torch.zeros(*key.shape[:3], rows.size(-1))
        return backward(rows, key, query, torch.zeros(*query.shape[:3], rows.size(-1)),
                        out, zeros, 0.0, False, scale=scale)[2]  # fmt: skip

    return unnormalised(value) / unnormalised(torch.ones_like(value))


# ----------------------------------------------------------------------------- embedding


def lookup_by_the_operator_on_a_nested_tensor():
    ids, table = ids_and_table()
    nested = torch.nested.nested_tensor(list(ids))
    return torch.stack(aten.embedding(table, nested).unbind())


def lookup_by_its_decomposition():
    ids, table = ids_and_table()
    return torch._decomp.decomposition_table[aten.embedding.default](table, ids)


def lookup_by_a_bag_of_one():
    ids, table = ids_and_table()
    offsets = torch.arange(ids.numel())
    return F.embedding_bag(ids.flatten(), table, offsets, mode="sum").reshape(2, 3, 6)


def lookup_by_embedding_bag_forward_only():
    ids, table = ids_and_table()
    offsets = torch.arange(ids.numel())
    return aten._embedding_bag_forward_only(table, ids.flatten(), offsets)[0].reshape(2, 3, 6)


def lookup_by_vmap():
    ids, table = ids_and_table()
    return torch.vmap(lambda row: torch.embedding(table, row))(ids)


def lookup_by_a_quantized_bag():
    ids, table = ids_and_table()
    packed = torch.ops.quantized.embedding_bag_byte_prepack(table)
    offsets = torch.arange(ids.numel())
    bags = torch.ops.quantized.embedding_bag_byte_rowwise_offsets(
        packed, ids.flatten(), offsets, False, 0, False, None, None, False
    )
    return bags.reshape(2, 3, 6)


# ----------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Route:
    run: Callable[[], Any]
    reference: Callable[[], torch.Tensor]
    refused: str  # the name in the refusal's message
    ops: tuple[str, ...] = NORMALIZATION
    blocked: tuple[tuple[str, str], ...] = (("torch.nn.functional", "layer_norm"),)
    atol: float = 1e-4


def norm_route(run, refused, **options) -> Route:
    return Route(run, lambda: layer_norm_by_hand(tokens()), refused, **options)


def rms_route(run, refused) -> Route:
    blocked = (("torch.nn.functional", "rms_norm"),)
    return Route(run, lambda: rms_norm_by_hand(tokens()), refused, blocked=blocked)


def attention_route(run, refused) -> Route:
    return Route(run, attention_by_hand, refused, ops=ATTENTION, blocked=())


def lookup_route(run, refused, atol=1e-6) -> Route:
    blocked = (("torch.nn.functional", "embedding"),)
    return Route(run, lookup_by_hand, refused, ops=EMBEDDING, blocked=blocked, atol=atol)


REFS = "torch._refs.native_layer_norm"
NATIVE = "torch.ops.aten.native_layer_norm"
TORCHSCRIPT = "TorchScript"
ROUTES = [
    norm_route(by_refs_native_layer_norm, REFS),
    norm_route(by_the_original_the_refs_decorator_wraps, REFS),
    norm_route(by_the_original_in_the_decorators_closure, REFS),
    norm_route(by_refs_functional_layer_norm, "torch._refs.nn.functional.layer_norm"),
    norm_route(by_refs_normalize_helper, "torch._refs._normalize"),
    norm_route(by_the_decomposition_table, REFS),
    norm_route(by_get_decompositions, REFS),
    norm_route(by_the_meta_python_kernel, REFS),
    norm_route(by_redispatching_real_tensors_to_meta, NATIVE),
    norm_route(by_redispatching_to_cpu, NATIVE),
    norm_route(by_the_kernel_of_a_key, NATIVE),
    norm_route(by_decompose, "torch.ops.aten.layer_norm"),
    norm_route(by_excluding_autograd, NATIVE),
    norm_route(by_dispatching_below_autograd, NATIVE),
    norm_route(by_a_nested_tensor, NATIVE),
    norm_route(by_a_jagged_nested_tensor, "torch.ops.aten.layer_norm"),
    norm_route(by_the_raw_builtin_of_the_overload, NATIVE),
    norm_route(by_a_dispatch_mode_that_replays_the_call, NATIVE),
    norm_route(by_functionalize, NATIVE),
    norm_route(by_vmap_of_the_operator, NATIVE),
    norm_route(by_torch_func_vmap_of_layer_norm, "torch.ops.aten.layer_norm"),
    norm_route(by_an_autograd_function, "torch.ops.aten.layer_norm"),
    norm_route(by_the_python_dispatcher, "native_batch_norm"),
    norm_route(
        by_batch_norm_with_update_of_the_transposed_tokens,
        "torch.ops.aten._batch_norm_with_update",
    ),
    norm_route(by_batch_norm_no_stats_overload, "torch.ops.aten._native_batch_norm_legit"),
    norm_route(by_native_batch_norm_out_overload, "torch.ops.aten.native_batch_norm"),
    norm_route(
        by_the_batch_norm_decomposition_helper,
        "torch._decomp.decompositions.native_batch_norm_helper",
    ),
    norm_route(by_the_no_stats_decomposition, "torch._decomp.decompositions."),
    norm_route(by_a_group_norm_of_one_group, "torch.ops.aten.native_group_norm"),
    norm_route(by_refs_native_group_norm, "torch._refs.native_group_norm"),
    norm_route(by_a_quantized_layer_norm, "torch.ops.quantized.layer_norm", atol=0.05),
    norm_route(by_the_quantized_layer_norm_module, "torch.ops.quantized.layer_norm", atol=0.05),
    norm_route(
        by_local_response_norm_of_the_centred_tokens, "torch.nn.functional.local_response_norm"
    ),
    norm_route(by_an_encoder_layer_of_zero_weights, "torch.ops.aten._transformer_encoder_layer"),
    norm_route(by_a_scripted_function, TORCHSCRIPT),
    norm_route(by_a_static_module_of_a_scripted_function, TORCHSCRIPT),
    norm_route(by_torchscripts_mkldnn_layer_norm, "torch.ops.aten.to_mkldnn"),
    rms_route(rms_by_the_fused_operator, "torch.ops.aten._fused_rms_norm"),
    rms_route(rms_by_its_decomposition, "torch._decomp.decompositions._fused_rms_norm"),
    rms_route(rms_by_local_response_norm, "torch.nn.functional.local_response_norm"),
    rms_route(rms_by_vmap_of_rms_norm, "torch.ops.aten.rms_norm"),
    attention_route(
        sdpa_by_the_cpu_flash_kernel, "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu"
    ),
    attention_route(
        sdpa_by_its_decomposition,
        "torch._decomp.decompositions.scaled_dot_product_flash_attention_for_cpu",
    ),
    attention_route(sdpa_by_the_math_kernel, "torch.ops.aten._scaled_dot_product_attention_math"),
    attention_route(sdpa_by_flex_attentions_math, "flex_attention.math_attention"),
    attention_route(
        sdpa_by_multi_head_attention_forward, "torch.nn.functional.multi_head_attention_forward"
    ),
    attention_route(
        sdpa_by_the_multihead_attention_module, "torch.nn.functional.multi_head_attention_forward"
    ),
    attention_route(
        sdpa_by_the_quantizable_multihead_attention, "MultiheadAttention._forward_impl"
    ),
    attention_route(
        sdpa_by_native_multi_head_attention, "torch.ops.aten._native_multi_head_attention"
    ),
    attention_route(sdpa_by_vmap, "torch.ops.aten.scaled_dot_product_attention"),
    Route(
        sdpa_under_autocast,
        attention_by_hand,
        "torch.ops.aten.scaled_dot_product_attention",
        ops=ATTENTION,
        blocked=(),
        atol=0.05,
    ),
    attention_route(
        sdpa_by_the_gradient_of_the_values,
        "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward",
    ),
    lookup_route(lookup_by_the_operator_on_a_nested_tensor, "torch.ops.aten.embedding"),
    lookup_route(lookup_by_its_decomposition, "torch._decomp.decompositions.embedding"),
    lookup_route(lookup_by_a_bag_of_one, "torch.ops.aten.embedding_bag"),
    lookup_route(lookup_by_embedding_bag_forward_only, "torch.ops.aten._embedding_bag_forward"),
    lookup_route(lookup_by_vmap, "torch.ops.aten.embedding"),
    lookup_route(
        lookup_by_a_quantized_bag, "torch.ops.quantized.embedding_bag_byte_rowwise", atol=0.05
    ),
]


def route_id(route: Route) -> str:
    return route.run.__name__


@pytest.mark.parametrize("route", ROUTES, ids=map(route_id, ROUTES))
def test_a_route_computes_the_forbidden_computation_without_the_refusals(route):
    report = in_child(route.run)
    assert report["status"] == "returned", report
    value = torch.tensor(report["value"], dtype=torch.float64)
    expected = route.reference().to(torch.float64)
    assert value.shape == expected.shape
    assert torch.allclose(value, expected, atol=route.atol), (value - expected).abs().max()


@pytest.mark.parametrize("route", ROUTES, ids=map(route_id, ROUTES))
def test_a_route_is_refused_with_the_message_after_refuse_for_good(route):
    blocked = [list(pair) for pair in route.blocked]
    report = in_child(refused_then(route.run, blocked, route.ops))
    assert report["status"] == "raised", report
    assert report["error"].startswith("RuntimeError"), report["error"]
    assert REFUSED in report["error"] and route.refused in report["error"], report["error"]


# ----------------------------------------------------------------------------- every kernel


def active_kernels(qualified: str) -> dict[str, str]:
    """Dispatch key: where its active kernel was registered, for one operator overload."""
    found = {}
    for line in torch._C._dispatch_dump(qualified).splitlines():
        match = _refuse.DUMP_KEY.match(line)
        if match and match.group(1) not in ("name", "schema", "debug") and "(inactive)" not in line:
            found[match.group(1)] = line.split("registered at ", 1)[-1]
    return found


def overloads(ops: tuple[str, ...]) -> list[str]:
    bases = set(ops)
    return [n for n in torch._C._dispatch_get_all_op_names() if n.split(".")[0] in bases]


def test_every_overload_has_a_python_refusal_at_every_key_where_it_has_a_kernel():
    ops = (*NORMALIZATION, *ATTENTION, *EMBEDDING, *ENCODER_LAYER)
    before = {name: active_kernels(name) for name in overloads(ops)}

    def kernels_after() -> dict[str, dict[str, str]]:
        _refuse.refuse_for_good([], list(ops))
        return {name: active_kernels(name) for name in overloads(ops)}

    report = in_child(kernels_after)
    assert report["status"] == "returned", report
    after = report["value"]
    assert set(after) == set(before)
    assert any(k.startswith("NestedTensor") for kernels in after.values() for k in kernels)
    assert any(k == "QuantizedCPU" for kernels in after.values() for k in kernels)
    for name, kernels in after.items():
        assert set(kernels) == set(before[name]), name
        for key, where in kernels.items():  # registered from Python, by the refusal
            assert where.startswith(f"{_refuse.LIBRARY_FILE}:0 "), (name, key, where)


def test_every_python_implementation_of_a_refused_operator_refuses():
    def call_them_all() -> list[str]:
        ops = [*NORMALIZATION, *ATTENTION, *EMBEDDING]
        _refuse.refuse_for_good([], ops)
        unrefused = []
        functions = [f for op in ops for f in _refuse._IMPLEMENTATIONS.get(op, ())]
        for function in functions:
            try:
                function()
            except RuntimeError as error:
                if REFUSED in str(error):
                    continue
            except Exception:
                pass
            unrefused.append(_refuse._describe(function))
        return [len(functions), *unrefused]

    report = in_child(call_them_all)
    assert report["status"] == "returned", report
    count, *unrefused = report["value"]
    assert count > 40 and not unrefused


# ----------------------------------------------------------------------------- nothing undoes


def undo_everything_reachable() -> int:
    """Destroy every torch.library.Library and reset every C++ library object that Python
    can reach (gc, every frame's locals, every module's globals); how many were found."""
    found = 0
    reachable = gc.get_objects()
    frame = sys._getframe()
    while frame is not None:
        reachable.extend(frame.f_locals.values())
        frame = frame.f_back
    for module in list(sys.modules.values()):
        reachable.extend(vars(module).values() if module is not None else ())
    for thing in reachable:
        if isinstance(thing, torch.library.Library):
            thing._destroy()
            found += 1
        for inner in gc.get_referents(thing):
            if isinstance(inner, torch._C._DispatchModule):
                inner.reset()
                found += 1
        undo = getattr(thing, "undo", None) if isinstance(thing, types.ModuleType) else None
        if callable(undo):
            undo()
    return found


def attack_everything_reachable() -> list[Any]:
    """Refuse the norms, check that the refusal left nothing behind to undo, destroy what is
    reachable all the same, then try three routes and the norm itself."""
    gc.collect()  # garbage of earlier work, with its finalizers, goes first
    libraries = sum(isinstance(o, torch.library.Library) for o in gc.get_objects())
    impls, finalizers = len(torch.library._impls), set(weakref.finalize._registry)
    _refuse.refuse_for_good(LAYER_NORM, list(NORMALIZATION))
    assert sum(isinstance(o, torch.library.Library) for o in gc.get_objects()) == libraries
    assert len(torch.library._impls) == impls
    assert set(weakref.finalize._registry) <= finalizers  # none added (some may have run)
    assert not any(isinstance(o, torch._C._DispatchModule) for o in gc.get_objects())
    for value in vars(_refuse).values():
        assert not isinstance(value, (torch.library.Library, torch._C._DispatchModule))
    found = undo_everything_reachable()
    gc.collect()
    results = []
    for route in (by_refs_native_layer_norm, by_a_nested_tensor, by_redispatching_to_cpu):
        try:
            route()
            results.append("computed")
        except RuntimeError as error:
            results.append(str(error))
    try:
        torch.layer_norm(tokens(), [8])
        results.append("computed")
    except RuntimeError as error:
        results.append(str(error))
    return [found, *results]


# A fresh interpreter imports this module, sets one thread, runs ``preload`` as the fork server
# does and forks the task named on its command line: what it prints is ``in_child``'s report.
FRESH_PARENT = """\
import importlib.util, json, sys
import torch
spec = importlib.util.spec_from_file_location("refusal_tests", sys.argv[1])
tests = sys.modules["refusal_tests"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tests)
torch.set_num_threads(1)
tests._refuse.preload()
print(json.dumps(tests.in_child(getattr(tests, sys.argv[2]))))
"""


def in_child_of_a_fresh_parent(task: Callable[[], Any], folder: os.PathLike) -> dict[str, Any]:
    """``in_child(task)``, forked from a new interpreter that only imported this module and
    ran ``preload`` (``task`` is named, so a function of this module), not from this test
    process, whose earlier tests leave their own libraries and modules behind."""
    result = subprocess.run(
        [sys.executable, "-c", FRESH_PARENT, __file__, task.__name__],
        cwd=folder, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


def test_no_library_or_undo_is_reachable_and_destroying_all_that_is_leaves_the_refusals(tmp_path):
    """In a fork of a grading process, as the fork server makes them: what the earlier tests
    of a pytest process left behind (libraries of their own, modules with an ``undo``) is not
    there, and destroying it once killed the child in a worker with Python 3.12."""
    report = in_child_of_a_fresh_parent(attack_everything_reachable, tmp_path)
    assert report["status"] == "returned", report
    found, *results = report["value"]
    assert found > 0  # torch's own libraries were there to destroy
    assert all(REFUSED in result for result in results), results


def test_a_refused_function_keeps_no_original_code_or_default():
    def inspect_them() -> list[Any]:
        _refuse.refuse_for_good(LAYER_NORM, list(NORMALIZATION))
        codes = {
            F.layer_norm.__code__.co_filename,
            torch._refs.native_layer_norm.__code__.co_filename,
            torch._refs.native_layer_norm.__wrapped__.__code__.co_filename,
        }
        return [sorted(codes), F.layer_norm.__defaults__, F.layer_norm.__kwdefaults__]

    report = in_child(inspect_them)
    message = blocked_message("torch.nn.functional.layer_norm")
    assert report["value"] == [["<refused>"], None, {"_message": message}]


def test_decorated_partial_cached_and_builtin_functions_are_refused_with_what_they_wrap():
    module = types.ModuleType("decorated_for_the_test")

    def decorate(function):
        def wrapper(*args):  # no functools.wraps: only the closure leads to the original
            return function(*args)

        wrapper.__name__ = function.__name__
        return wrapper

    @decorate
    def twice(x):
        return 2 * x

    @functools.lru_cache
    def thrice(x):
        return 3 * x

    module.twice, module.thrice = twice, thrice
    module.four_times = functools.partial(lambda x, k: k * x, k=4)
    module.sqrt = math.sqrt
    original, cached = twice.__closure__[0].cell_contents, thrice.__wrapped__

    def call_them() -> list[str]:
        sys.modules[module.__name__] = module
        blocked = [[module.__name__, n] for n in ("twice", "thrice", "four_times", "sqrt")]
        _refuse.refuse_for_good(blocked, [])
        errors = []
        for call in (
            lambda: module.twice(1),
            lambda: original(1),
            lambda: module.thrice(1),
            lambda: cached(1),
            lambda: module.four_times(1),
            lambda: module.sqrt(4.0),
        ):
            try:
                call()
                errors.append("computed")
            except RuntimeError as error:
                errors.append(str(error))
        return errors

    report = in_child(call_them)
    assert report["status"] == "returned", report
    names = ["twice", "twice", "thrice", "thrice", "four_times", "sqrt"]
    for error, name in zip(report["value"], names, strict=True):
        assert error == blocked_message(f"decorated_for_the_test.{name}")


def test_the_message_names_the_route_and_says_what_to_do():
    assert _refuse.blocked_message("torch.ops.aten.x") == (
        "this exercise asks you to write the computation yourself; your code called "
        "torch.ops.aten.x, which the check does not allow"
    )


# ----------------------------------------------------------------------------- what stays


def allowed_computations() -> list[Any]:
    x, ids = tokens(), torch.tensor([1, 0, 2])
    mask = torch.ones(6, 6, dtype=torch.bool).tril()
    grad_input = tokens().requires_grad_()
    layer_norm_by_hand(grad_input).pow(2).sum().backward()
    return [
        x @ x.T,
        x.softmax(-1),
        x.mean(-1),
        x.var(-1),
        torch.var_mean(x, -1),
        x.abs().sqrt(),
        x.abs().rsqrt(),
        torch.norm(x),
        torch.linalg.vector_norm(x, dim=-1),
        x.renorm(2, 0, 1.0),
        F.normalize(x),
        (x @ x.T).masked_fill(~mask, float("-inf")).softmax(-1),
        x.exp(),
        x.sum(-1),
        torch.cat([x, x]),
        F.one_hot(ids, 4),
        x[ids],
        x.index_select(0, ids),
        torch.vmap(layer_norm_by_hand)(x),
        torch.nn.Linear(8, 3)(x).shape[-1],
        F.silu(x),
        grad_input.grad,
    ]


def test_what_an_answer_by_hand_needs_still_works_after_every_refusal():
    def both() -> Any:
        ops = [*NORMALIZATION, *ATTENTION, *EMBEDDING, *ENCODER_LAYER]
        _refuse.refuse_for_good([*LAYER_NORM, *RMS_NORM, *LOOKUP], ops)
        return allowed_computations()

    torch.manual_seed(0)
    expected = plain(allowed_computations())
    report = in_child(both)
    assert report["status"] == "returned", report
    assert len(report["value"]) == len(expected)
    for got, want in zip(report["value"], expected, strict=True):
        if isinstance(want, list) and want and not isinstance(want[0], (list, int)):
            assert torch.allclose(torch.tensor(got), torch.tensor(want)), (got, want)


def test_without_blocked_operators_torchscript_is_not_refused():
    report = in_child(refused_then(by_a_scripted_function, LAYER_NORM, ()))
    assert report["status"] == "returned", report


# ----------------------------------------------------------------------------- preload, cost


def test_preload_loads_every_module_whose_functions_are_refused():
    for module_name, _ in (pair for pairs in _refuse.PYTHON_RELATIVES.values() for pair in pairs):
        assert module_name in sys.modules, module_name
        assert (
            any(
                module_name == prefix or module_name.startswith(prefix + ".")
                for prefix in _refuse.FRESH_IMPORTS_REFUSED
            )
            or module_name == "torch._refs"
        ), module_name
    for prefix in ("torch._refs", "torch._decomp.decompositions", "torch._meta_registrations"):
        assert prefix in sys.modules
    assert {"torch._refs", "torch._decomp"} <= set(_refuse.FRESH_IMPORTS_REFUSED)


FIRST_USE = """
import sys, torch
from course_lib.answers import _refuse
_refuse.preload()
before = set(sys.modules)
from torch._decomp.decompositions import scaled_dot_product_flash_attention_for_cpu
q = torch.randn(1, 1, 3, 4)
scaled_dot_product_flash_attention_for_cpu(q, q, q, scale=0.5)
print(sorted(set(sys.modules) - before))
"""


def test_after_preload_a_python_decomposition_imports_nothing_on_its_first_use():
    # torch._check imports sympy on its first call: in each case process, that was about
    # 1 s of the answer's time limit (a timeout on a busy machine); the fork server does it
    printed = subprocess.run(
        [sys.executable, "-c", FIRST_USE], capture_output=True, text=True, check=True
    ).stdout
    assert printed.strip() == "[]", printed


def test_reloading_a_refused_module_is_refused_by_the_case_processes_hook():
    files, _ = _confine.module_files(_refuse.FRESH_IMPORTS_REFUSED)
    for name in (
        "torch._refs",
        "torch._decomp.decompositions",
        "torch.nn.functional",
        "torch.ao.nn.quantizable.modules.activation",
        "torch._higher_order_ops.flex_attention",
    ):
        assert os.path.realpath(sys.modules[name].__file__).startswith(files), name

    def reload_under_the_hook() -> str:
        _confine.install_audit_hook(_refuse.FRESH_IMPORTS_REFUSED)
        try:
            importlib.reload(torch.ao.nn.quantizable.modules.activation)
        except RuntimeError as error:
            return str(error)
        return "reloaded"

    report = in_child(reload_under_the_hook)
    assert "activation." in report["value"], report
    assert report["value"].endswith("(a file of a module the exercise refuses)")


@pytest.mark.parametrize("ops", [NORMALIZATION, ATTENTION, EMBEDDING], ids=["norm", "att", "emb"])
def test_wall_clock_refuse_for_good_takes_under_60_ms_in_a_fresh_fork(ops):
    def timed() -> float:
        start = time.perf_counter()
        _refuse.refuse_for_good(LAYER_NORM, list(ops))
        return time.perf_counter() - start

    seconds = statistics.median(in_child(timed)["value"] for _ in range(7))
    print(f"refuse_for_good: {seconds * 1000:.1f} ms")
    assert seconds < 0.06
