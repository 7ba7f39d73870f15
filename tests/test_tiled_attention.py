"""Specification of tiled attention (an online softmax over blocks of keys, the idea of
FlashAttention) and of the sliding-window mask."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from course_lib.attention import (
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
    sliding_window_mask,
    tiled_attention,
)
from course_lib.families import DecoderOnlyModel


def inputs(*batch, len_q=11, len_k=13, d_k=8, d_v=5, seed=0, dtype=torch.float32):
    draw = torch.Generator().manual_seed(seed)
    q = torch.randn(*batch, len_q, d_k, generator=draw, dtype=dtype)
    k = torch.randn(*batch, len_k, d_k, generator=draw, dtype=dtype)
    v = torch.randn(*batch, len_k, d_v, generator=draw, dtype=dtype)
    return q, k, v


def plain(q, k, v, mask=None, **options):
    return scaled_dot_product_attention(q, k, v, mask, **options)[0]


def storages(values):
    return {
        t.untyped_storage().data_ptr()
        for t in (values if isinstance(values, tuple | list) else (values,))
        if isinstance(t, torch.Tensor)
    }


class TensorShapes(TorchDispatchMode):
    """Records the shape of every new tensor an operator returns (not views of its inputs)."""

    def __init__(self):
        super().__init__()
        self.shapes = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = storages([*args, *(kwargs or {}).values()])
        for t in out if isinstance(out, tuple | list) else (out,):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in inputs:
                self.shapes.append(tuple(t.shape))
        return out


# ----------------------------------------------------------------------------- equality


@pytest.mark.parametrize("block_size", [1, 3, 7, 11, 13, 100])
def test_every_block_size_gives_the_output_of_plain_attention(block_size):
    q, k, v = inputs(2, 3)
    torch.testing.assert_close(
        tiled_attention(q, k, v, block_size=block_size), plain(q, k, v), atol=1e-5, rtol=0
    )


@pytest.mark.parametrize("block_size", [1, 3, 7, 13, 100])
def test_a_causal_mask_gives_the_output_of_plain_attention(block_size):
    q, k, v = inputs(2, len_q=13, len_k=13)
    mask = causal_mask(13)
    got = tiled_attention(q, k, v, mask, block_size=block_size)
    torch.testing.assert_close(got, plain(q, k, v, mask), atol=1e-5, rtol=0)


@pytest.mark.parametrize("block_size", [1, 3, 7, 13, 100])
def test_padding_and_causal_masks_combined_give_the_output_of_plain_attention(block_size):
    q, k, v = inputs(2, len_q=13, len_k=13)
    ids = torch.tensor([[5, 6, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], list(range(1, 14))])
    for mask in (padding_mask(ids, 0), causal_mask(13) & padding_mask(ids, 0)):
        got = tiled_attention(q, k, v, mask, block_size=block_size)
        torch.testing.assert_close(got, plain(q, k, v, mask), atol=1e-5, rtol=0)


def test_masks_of_every_broadcastable_form_are_read_like_plain_attention():
    q, k, v = inputs(2, 3, len_q=6, len_k=9)
    keys = torch.tensor([True] * 5 + [False] * 4)
    for mask in (
        keys,  # (L_k,)
        keys[None],  # (1, L_k)
        torch.rand(6, 1) > -1,  # (L_q, 1): all allowed
        torch.rand(2, 1, 6, 9, generator=torch.Generator().manual_seed(1)) > 0.3,
    ):
        mask = mask | (torch.arange(9) == 0)  # every row keeps key 0
        got = tiled_attention(q, k, v, mask, block_size=4)
        torch.testing.assert_close(got, plain(q, k, v, mask), atol=1e-5, rtol=0)


def test_batch_axes_broadcast_as_in_plain_attention():
    q, _, _ = inputs(2, 3)
    _, k, v = inputs(1, 3, seed=1)
    got = tiled_attention(q, k, v, block_size=4)
    assert got.shape == (2, 3, 11, 5)
    torch.testing.assert_close(got, plain(q, k, v), atol=1e-5, rtol=0)


def test_a_scale_is_applied_like_plain_attention():
    q, k, v = inputs(4)
    got = tiled_attention(q, k, v, block_size=5, scale=1.0)
    torch.testing.assert_close(got, plain(q, k, v, scale=1.0), atol=1e-5, rtol=0)


def test_huge_scores_do_not_overflow_thanks_to_the_running_maximum():
    q, k, v = inputs(2)
    got = tiled_attention(q * 300, k, v, block_size=3)  # scores of several hundred
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, plain(q * 300, k, v), atol=1e-5, rtol=0)


def test_gradients_flow_back_as_through_plain_attention():
    q, k, v = (t.requires_grad_() for t in inputs(2, len_q=7, len_k=7))
    mask = causal_mask(7)
    grads_tiled = torch.autograd.grad(tiled_attention(q, k, v, mask, block_size=3).sum(), (q, k, v))
    grads_plain = torch.autograd.grad(plain(q, k, v, mask).sum(), (q, k, v))
    for tiled, reference in zip(grads_tiled, grads_plain, strict=True):
        torch.testing.assert_close(tiled, reference, atol=1e-5, rtol=0)


def test_float64_is_computed_in_float64():
    q, k, v = inputs(2, dtype=torch.float64)
    got = tiled_attention(q, k, v, block_size=4)
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, plain(q, k, v), atol=1e-12, rtol=0)


def test_half_precision_inputs_give_a_half_precision_output_close_to_float32():
    q, k, v = inputs(2)
    for dtype in (torch.float16, torch.bfloat16):
        got = tiled_attention(q.to(dtype), k.to(dtype), v.to(dtype), block_size=4)
        assert got.dtype == dtype
        torch.testing.assert_close(got.float(), plain(q, k, v), atol=2e-2, rtol=0)


def test_on_the_meta_device_it_gives_the_output_shape():
    q, k, v = (t.to("meta") for t in inputs(2, 3))
    mask = torch.ones(11, 13, dtype=torch.bool, device="meta")
    out = tiled_attention(q, k, v, mask, block_size=4)
    assert out.shape == (2, 3, 11, 5) and out.device.type == "meta"


# ----------------------------------------------------------------------------- memory


def test_no_tensor_of_the_size_of_the_scores_is_ever_built():
    length, block = 64, 8
    q, k, v = inputs(1, len_q=length, len_k=length, d_k=4, d_v=4)
    mask = causal_mask(length)  # (a dense mask is L x L itself, of bools: made outside)
    with TensorShapes() as recorded:
        tiled_attention(q, k, v, mask, block_size=block)
    largest = max(torch.Size(shape).numel() for shape in recorded.shapes)
    assert largest == length * 4  # the output (1, L, d_v); tiles are 8 x 8 = 64 numbers
    assert all(shape[-2:] != (length, length) for shape in recorded.shapes)
    with TensorShapes() as recorded:
        plain(q, k, v, mask)
    assert (1, length, length) in recorded.shapes  # plain attention builds the scores


# ----------------------------------------------------------------------------- errors


def test_a_row_with_no_allowed_key_is_refused_as_by_plain_attention():
    q, k, v = inputs(len_q=3, len_k=4)
    mask = torch.tensor([[True, False, False, False], [False] * 4, [True] * 4])
    with pytest.raises(ValueError, match="no allowed key") as plain_error:
        plain(q, k, v, mask)
    with pytest.raises(ValueError, match="no allowed key") as tiled_error:
        tiled_attention(q, k, v, mask, block_size=2)
    assert str(tiled_error.value) == str(plain_error.value)


def test_a_row_whose_first_blocks_are_all_masked_gives_no_nan():
    q, k, v = inputs(len_q=2, len_k=8)
    mask = torch.tensor([[False] * 7 + [True], [True] * 8])  # row 0: only the last key
    got = tiled_attention(q, k, v, mask, block_size=2)
    assert not got.isnan().any()
    torch.testing.assert_close(got, plain(q, k, v, mask), atol=1e-6, rtol=0)
    torch.testing.assert_close(got[0], v[-1], atol=1e-6, rtol=0)


@pytest.mark.parametrize(
    ("block_size", "error", "message"),
    [
        (0, ValueError, "block_size must be a positive"),
        (-3, ValueError, "block_size must be a positive"),
        (2.5, TypeError, "block_size"),
        ("4", TypeError, "block_size"),
    ],
)
def test_a_block_size_that_is_not_a_positive_integer_is_refused(block_size, error, message):
    q, k, v = inputs()
    with pytest.raises(error, match=message):
        tiled_attention(q, k, v, block_size=block_size)


def test_shapes_that_do_not_fit_are_refused_like_plain_attention():
    q, k, v = inputs()
    with pytest.raises(ValueError, match="share their last size d_k"):
        tiled_attention(q, k[..., :4], v)
    with pytest.raises(ValueError, match="the same length L_k"):
        tiled_attention(q, k, v[:-1])
    with pytest.raises(TypeError, match="floating-point"):
        tiled_attention(q, k, v.long())


def test_masks_that_are_not_boolean_or_do_not_broadcast_are_refused():
    q, k, v = inputs()
    with pytest.raises(TypeError, match="mask == 0"):
        tiled_attention(q, k, v, torch.zeros(11, 13))
    with pytest.raises(ValueError, match="does not broadcast"):
        tiled_attention(q, k, v, torch.ones(11, 12, dtype=torch.bool))
    with pytest.raises(ValueError, match="does not broadcast"):
        tiled_attention(q, k, v, torch.ones(3, 11, 13, dtype=torch.bool))


# ----------------------------------------------------------------------------- sliding window


@pytest.mark.parametrize(("length", "window"), [(1, 1), (6, 1), (6, 2), (7, 3), (5, 5), (4, 9)])
def test_the_sliding_window_mask_lets_i_see_j_exactly_when_i_minus_window_lt_j_le_i(length, window):
    mask = sliding_window_mask(length, window)
    i, j = torch.arange(length)[:, None], torch.arange(length)[None, :]
    assert mask.dtype == torch.bool and mask.shape == (length, length)
    assert torch.equal(mask, (i - window < j) & (j <= i))
    assert (mask.sum(dim=1) == torch.clamp(torch.arange(length) + 1, max=window)).all()


def test_a_window_as_long_as_the_sequence_is_the_causal_mask():
    assert torch.equal(sliding_window_mask(7, 7), causal_mask(7))
    assert torch.equal(sliding_window_mask(7, 100), causal_mask(7))
    assert torch.equal(sliding_window_mask(5, 1), torch.eye(5, dtype=torch.bool))


def test_the_sliding_window_mask_is_made_on_the_device_asked_for():
    assert sliding_window_mask(4, 2, device="meta").device.type == "meta"


@pytest.mark.parametrize(("length", "window"), [(0, 2), (4, 0), (4, -1), (4, 1.5)])
def test_a_length_or_window_that_is_not_a_positive_integer_is_refused(length, window):
    with pytest.raises((ValueError, TypeError), match=r"length|window"):
        sliding_window_mask(length, window)


def test_a_decoder_with_an_attention_window_uses_the_sliding_window_and_padding_masks():
    model = DecoderOnlyModel(10, 16, 2, 1, 32, max_len=12, pad_id=0, attention_window=3)
    ids = torch.tensor([[1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 0, 0]])
    expected = sliding_window_mask(6, 3) & padding_mask(ids, 0)
    assert torch.equal(model.attention_mask(ids), expected)
