"""Specification of RMSNorm (course_lib/normalization.py): the formula, PyTorch's own
``nn.RMSNorm`` where the installed torch has it (2.4 and later), the relation to LayerNorm,
dtypes, devices and the messages for bad input."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from course_lib.normalization import RMSNorm, rms_norm

HAS_TORCH_RMSNORM = hasattr(torch.nn, "RMSNorm")
needs_torch_rmsnorm = pytest.mark.skipif(
    not HAS_TORCH_RMSNORM, reason="torch.nn.RMSNorm arrived in PyTorch 2.4"
)


def random(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def by_formula(x, weight, eps):
    """x / sqrt(mean(x^2) + eps) * weight, written out one step at a time."""
    mean_square = (x * x).sum(dim=-1, keepdim=True) / x.size(-1)
    return x / torch.sqrt(mean_square + eps) * weight


# ----------------------------------------------------------------------------- the formula


@pytest.mark.parametrize("eps", [0.0, 1e-6, 1e-5, 0.5])
def test_rms_norm_is_the_formula(eps):
    x, weight = random(3, 5, 16), random(16, seed=1)
    assert torch.allclose(rms_norm(x, weight, eps), by_formula(x, weight, eps), atol=1e-12)


def test_without_a_weight_every_vector_has_root_mean_square_one():
    y = rms_norm(random(4, 7, 32) * 5 + 2, eps=0.0)
    assert torch.allclose(y.pow(2).mean(dim=-1), torch.ones(4, 7, dtype=torch.float64))


def test_the_module_starts_with_a_gain_of_ones_and_applies_it():
    norm = RMSNorm(16, eps=1e-5).double()
    assert torch.equal(norm.weight, torch.ones(16, dtype=torch.float64))
    with torch.no_grad():
        norm.weight.copy_(random(16, seed=2))
    x = random(2, 3, 16)
    assert torch.allclose(norm(x), by_formula(x, norm.weight, 1e-5), atol=1e-12)
    assert "16, eps=1e-05" in repr(norm)


def test_a_vector_of_zeros_gives_zeros_not_nan():
    assert torch.equal(rms_norm(torch.zeros(2, 8)), torch.zeros(2, 8))


def test_every_vector_is_normalised_on_its_own():
    x = random(5, 8)
    rows = torch.stack([rms_norm(row) for row in x])
    assert torch.allclose(rms_norm(x), rows, atol=1e-15)


# ----------------------------------------------------------------------------- PyTorch's


@needs_torch_rmsnorm
@pytest.mark.parametrize("eps", [1e-6, 1e-5])
def test_rmsnorm_equals_torch_nn_rmsnorm_in_float64(eps):
    ours = RMSNorm(24, eps=eps).double()
    theirs = torch.nn.RMSNorm(24, eps=eps, dtype=torch.float64)
    with torch.no_grad():
        ours.weight.copy_(random(24, seed=3))
        theirs.weight.copy_(ours.weight)
    x = random(4, 9, 24, seed=4)
    assert (ours(x) - theirs(x)).abs().max() < 1e-12


@needs_torch_rmsnorm
def test_rms_norm_equals_torch_functional_rms_norm():
    x, weight = random(6, 10), random(10, seed=5)
    theirs = F.rms_norm(x, (10,), weight, eps=1e-6)
    assert (rms_norm(x, weight, 1e-6) - theirs).abs().max() < 1e-12


@needs_torch_rmsnorm
def test_torch_without_eps_uses_the_machine_epsilon_of_the_computation():
    x = random(3, 8, dtype=torch.float32) * 1e-4  # small: eps is visible
    default = torch.nn.RMSNorm(8)(x)
    assert torch.nn.RMSNorm(8).eps is None
    machine = torch.finfo(torch.float32).eps
    assert torch.allclose(default, rms_norm(x, eps=machine), rtol=1e-5, atol=0)
    assert not torch.allclose(default, rms_norm(x, eps=1e-6), rtol=1e-3, atol=0)


# ----------------------------------------------------------------------------- and LayerNorm


def test_for_zero_mean_vectors_rmsnorm_is_layernorm_without_bias():
    x = random(4, 6, 16)
    x = x - x.mean(dim=-1, keepdim=True)
    layer = F.layer_norm(x, (16,), eps=1e-6)
    assert torch.allclose(rms_norm(x, eps=1e-6), layer, atol=1e-12)


def test_for_vectors_with_a_mean_the_two_norms_differ():
    x = random(4, 16) + 3.0
    assert (rms_norm(x, eps=1e-6) - F.layer_norm(x, (16,), eps=1e-6)).abs().max() > 0.5


def test_scaling_the_input_changes_neither_norm():
    x = random(4, 16)
    assert torch.allclose(rms_norm(7.5 * x, eps=0.0), rms_norm(x, eps=0.0), atol=1e-12)
    assert torch.allclose(F.layer_norm(7.5 * x, (16,), eps=0.0), F.layer_norm(x, (16,), eps=0.0))


def test_shifting_the_input_changes_rmsnorm_but_not_layernorm():
    x = random(4, 16)
    assert torch.allclose(F.layer_norm(x + 2.0, (16,), eps=0.0), F.layer_norm(x, (16,), eps=0.0))
    assert not torch.allclose(rms_norm(x + 2.0, eps=0.0), rms_norm(x, eps=0.0), atol=1e-3)


# ----------------------------------------------------------------------------- dtypes, devices


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_input_keeps_its_dtype(dtype):
    norm = RMSNorm(16).to(dtype)
    x = random(2, 16, dtype=torch.float32).to(dtype)
    assert norm(x).dtype == dtype and rms_norm(x).dtype == dtype


def test_squares_are_taken_in_float32_so_large_float16_features_do_not_overflow():
    x = torch.full((1, 8), 300.0, dtype=torch.float16)  # 300^2 = 90,000 > 65,504
    assert torch.isinf(x.pow(2)).all()  # squared in float16: inf
    assert torch.equal(rms_norm(x), torch.ones(1, 8, dtype=torch.float16))


def test_squares_are_taken_in_float32_so_small_float16_features_are_not_lost():
    x = torch.full((1, 8), 1e-4, dtype=torch.float16)  # 1e-8 underflows in float16
    assert (x.pow(2) == 0).all()
    assert torch.allclose(rms_norm(x, eps=0.0).float(), torch.ones(1, 8), atol=1e-3)


def test_a_float16_result_is_the_float32_computation_rounded_once():
    x = random(3, 64, dtype=torch.float32).half()
    assert torch.equal(rms_norm(x, eps=1e-6), rms_norm(x.float(), eps=1e-6).half())


def test_a_gain_of_another_dtype_is_refused_rather_than_promoting_the_result():
    with pytest.raises(TypeError, match=r"x is torch\.float16 but weight is torch\.float32"):
        rms_norm(torch.ones(2, 8, dtype=torch.float16), torch.ones(8))


def test_a_float32_module_refuses_float64_input_with_the_cure():
    with pytest.raises(TypeError, match=r"convert the module \(\.double\(\) on it\)"):
        RMSNorm(8)(random(2, 8))


def test_the_norm_runs_on_the_meta_device():
    norm = RMSNorm(8).to("meta")
    y = norm(torch.empty(2, 3, 8, device="meta"))
    assert y.device.type == "meta" and y.shape == (2, 3, 8)


def test_gradients_reach_the_input_and_the_gain():
    norm = RMSNorm(8).double()
    x = random(3, 8).requires_grad_()
    norm(x).pow(3).sum().backward()
    assert x.grad is not None and norm.weight.grad is not None
    assert torch.autograd.gradcheck(
        lambda t: rms_norm(t, eps=1e-6), (random(2, 5).requires_grad_(),)
    )


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("eps", [-1e-6, float("nan"), float("inf"), True, "1e-6", None])
def test_eps_must_be_a_finite_non_negative_number(eps):
    with pytest.raises(ValueError, match="eps must be a finite non-negative number"):
        RMSNorm(8, eps=eps)
    with pytest.raises(ValueError, match="eps must be a finite non-negative number"):
        rms_norm(torch.ones(8), eps=eps)


@pytest.mark.parametrize("d_model", [0, -3])
def test_d_model_must_be_positive(d_model):
    with pytest.raises(ValueError, match="d_model must be a positive integer"):
        RMSNorm(d_model)


def test_input_of_the_wrong_width_is_refused_with_the_expected_shape():
    with pytest.raises(ValueError, match=r"d_model=8 features .* got \(2, 3, 6\)"):
        RMSNorm(8)(torch.zeros(2, 3, 6))


def test_a_scalar_is_refused():
    with pytest.raises(ValueError, match="at least one axis"):
        rms_norm(torch.tensor(1.0))
    with pytest.raises(ValueError, match="d_model=8 features"):
        RMSNorm(8)(torch.tensor(1.0))


def test_integer_input_is_refused():
    with pytest.raises(TypeError, match="floating-point"):
        rms_norm(torch.ones(2, 8, dtype=torch.long))


def test_a_list_is_refused():
    with pytest.raises(TypeError, match=r"must be a torch\.Tensor"):
        rms_norm([1.0, 2.0])


def test_a_weight_that_is_not_a_tensor_is_refused():
    with pytest.raises(TypeError, match=r"weight must be a torch\.Tensor"):
        rms_norm(torch.ones(2, 8), [1.0] * 8)


def test_a_weight_of_the_wrong_shape_is_refused():
    with pytest.raises(ValueError, match=r"weight must have shape \(8,\)"):
        rms_norm(torch.ones(2, 8), torch.ones(4))
