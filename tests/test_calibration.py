"""Specification of course_lib.calibration: reliability bins and the expected calibration error
(Guo et al., 2017), checked against sums written out by hand."""

import pytest
import torch

from course_lib.calibration import expected_calibration_error, reliability_bins


def test_a_prediction_falls_in_the_bin_whose_upper_edge_it_does_not_exceed():
    confidence = torch.tensor([0.125, 0.25, 0.375, 1.0])  # exact in binary
    correct = torch.tensor([True, False, True, True])
    bins = reliability_bins(confidence, correct, num_bins=4)
    edges = [(b.low, b.high, b.count) for b in bins]
    assert edges == [(0.0, 0.25, 2), (0.25, 0.5, 1), (0.75, 1.0, 1)]


def test_each_bin_holds_the_mean_confidence_and_the_share_right_of_its_predictions():
    confidence = torch.tensor([0.45, 0.65, 0.95, 0.85, 0.91])
    correct = torch.tensor([True, False, True, False, True])
    low, high = reliability_bins(confidence, correct, num_bins=2)
    assert (low.count, high.count) == (1, 4)
    assert low.confidence == pytest.approx(0.45) and low.accuracy == 1.0
    assert high.confidence == pytest.approx((0.65 + 0.95 + 0.85 + 0.91) / 4)
    assert high.accuracy == 0.5 and high.gap == pytest.approx(0.5 - 3.36 / 4)


def test_empty_bins_are_left_out_and_the_counts_add_up_to_every_prediction():
    draw = torch.Generator().manual_seed(0)
    confidence = 0.5 + 0.5 * torch.rand(1000, generator=draw)
    correct = torch.rand(1000, generator=draw) < confidence
    bins = reliability_bins(confidence, correct, num_bins=10)
    assert all(b.low >= 0.5 for b in bins) and all(b.count > 0 for b in bins)
    assert sum(b.count for b in bins) == 1000


def test_the_error_is_the_gaps_weighted_by_the_share_of_predictions_in_each_bin():
    confidence = torch.tensor([0.45, 0.65, 0.95, 0.85, 0.91])
    correct = torch.tensor([True, False, True, False, True])
    by_hand = 1 / 5 * abs(1.0 - 0.45) + 4 / 5 * abs(0.5 - 3.36 / 4)
    assert expected_calibration_error(confidence, correct, 2) == pytest.approx(by_hand)


def test_a_model_right_as_often_as_it_is_sure_has_an_error_near_zero():
    draw = torch.Generator().manual_seed(1)
    confidence = 0.3 + 0.7 * torch.rand(200_000, generator=draw)
    correct = torch.rand(200_000, generator=draw) < confidence
    assert expected_calibration_error(confidence, correct, 10) < 0.01


def test_equal_means_do_not_make_a_model_calibrated():
    # too sure at 0.9 (right half the time), not sure enough at 0.6 (always right)
    confidence = torch.tensor([0.9] * 4 + [0.6] * 4)
    correct = torch.tensor([True, False, True, False] + [True] * 4)
    assert confidence.mean().item() == pytest.approx(correct.float().mean().item())
    assert expected_calibration_error(confidence, correct, 10) == pytest.approx(0.4)


def test_an_overconfident_model_has_an_error_of_its_excess_confidence():
    confidence = torch.full((100,), 0.95)
    correct = torch.arange(100) < 60
    assert expected_calibration_error(confidence, correct) == pytest.approx(0.35)


def test_any_shape_of_predictions_is_flattened():
    confidence = torch.tensor([[0.55, 0.65], [0.95, 0.85]])
    correct = torch.tensor([[True, False], [True, False]])
    flat = expected_calibration_error(confidence.flatten(), correct.flatten(), 4)
    assert expected_calibration_error(confidence, correct, 4) == flat


def test_confidence_outside_zero_to_one_is_refused_with_the_range_that_came():
    with pytest.raises(ValueError, match=r"confidence must lie in \(0, 1\], got values from"):
        reliability_bins(torch.tensor([0.5, 1.5]), torch.tensor([True, False]))
    with pytest.raises(ValueError, match="must lie in"):
        reliability_bins(torch.tensor([0.0]), torch.tensor([True]))


def test_correct_must_be_a_bool_tensor_of_the_same_shape():
    with pytest.raises(TypeError, match="correct must be a bool tensor"):
        reliability_bins(torch.tensor([0.5, 0.7]), torch.tensor([1, 0]))
    with pytest.raises(ValueError, match=r"same shape, got \(2,\) and \(3,\)"):
        reliability_bins(torch.tensor([0.5, 0.7]), torch.tensor([True, False, True]))
    with pytest.raises(TypeError, match="confidence must be a floating-point tensor"):
        reliability_bins(torch.tensor([1, 1]), torch.tensor([True, False]))


def test_no_predictions_and_no_bins_are_refused():
    with pytest.raises(ValueError, match="no predictions"):
        reliability_bins(torch.tensor([]), torch.tensor([], dtype=torch.bool))
    with pytest.raises(ValueError, match="num_bins"):
        reliability_bins(torch.tensor([0.5]), torch.tensor([True]), num_bins=0)


def test_bins_and_error_do_not_depend_on_the_dtype_or_a_gradient():
    confidence = torch.tensor([0.55, 0.65, 0.95, 0.85], requires_grad=True)
    correct = torch.tensor([True, False, True, False])
    wide = expected_calibration_error(confidence.double(), correct, 3)
    assert expected_calibration_error(confidence, correct, 3) == pytest.approx(wide)
    half = expected_calibration_error(confidence.detach().bfloat16(), correct, 3)
    assert half == pytest.approx(wide, abs=0.01)
