"""Specification of course_lib.discretize: a continuous signal turned into tokens and back."""

import math
import re

import pytest
import torch

from course_lib.discretize import (
    Codebook,
    frame_signal,
    kmeans,
    overlap_add,
    reconstruction_snr,
    synthesis_window,
    synthetic_signal,
)


def blobs() -> torch.Tensor:
    """Three well-separated groups of points in the plane, in float64."""
    return torch.tensor(
        [
            [0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0],  # mean (0.5, 0.5)
            [10.0, 10.0], [10.0, 11.0], [11.0, 10.0], [11.0, 11.0],  # mean (10.5, 10.5)
            [0.0, 10.0], [0.0, 11.0], [1.0, 10.0],  # mean (1/3, 31/3)
        ],
        dtype=torch.float64,
    )  # fmt: skip


BLOB_MEANS = torch.tensor([[0.5, 0.5], [10.5, 10.5], [1 / 3, 31 / 3]], dtype=torch.float64)


def sort_rows(rows: torch.Tensor) -> torch.Tensor:
    """Rows in lexicographic order (k-means numbers its clusters arbitrarily)."""
    order = sorted(range(rows.size(0)), key=lambda i: rows[i].tolist())
    return rows[order]


# --- the synthetic signal -------------------------------------------------------------------


def test_signal_has_the_requested_length_and_is_float32():
    signal = synthetic_signal(1234, sample_rate=1000)
    assert signal.shape == (1234,)
    assert signal.dtype == torch.float32


def test_signal_is_the_same_for_the_same_seed():
    torch.testing.assert_close(synthetic_signal(seed=3), synthetic_signal(seed=3), rtol=0, atol=0)


def test_signal_does_not_depend_on_the_global_random_state():
    torch.manual_seed(1)
    first = synthetic_signal()
    torch.manual_seed(2)
    torch.testing.assert_close(synthetic_signal(), first, rtol=0, atol=0)


def test_different_seeds_change_only_a_little_noise():
    difference = synthetic_signal(seed=0) - synthetic_signal(seed=1)
    assert difference.abs().max() > 0
    assert difference.std() < 0.05  # two noises of standard deviation 0.02


def test_signal_is_bounded_and_not_silent():
    signal = synthetic_signal()
    assert signal.abs().max() < 1.2
    assert signal.std() > 0.2


def test_signal_pitch_changes_over_time():
    signal = synthetic_signal(4000, sample_rate=1000)
    first, last = signal[:500], signal[-500:]
    peak_hz = [int(torch.fft.rfft(part).abs()[1:].argmax()) * 2 + 2 for part in (first, last)]
    assert peak_hz[0] != peak_hz[1]  # 1000 Hz / 500 samples: bins are 2 Hz apart


def test_sample_rate_too_low_for_the_highest_note_raises():
    with pytest.raises(ValueError, match=r"sample_rate must be above 440 Hz.*got 400"):
        synthetic_signal(sample_rate=400)


@pytest.mark.parametrize("bad", [0, -5])
def test_non_positive_length_raises(bad):
    with pytest.raises(ValueError, match=f"num_samples must be a positive integer, got {bad}"):
        synthetic_signal(bad)


# --- framing --------------------------------------------------------------------------------


def test_frames_are_the_hand_checked_slices():
    frames = frame_signal(torch.arange(10.0), frame_length=4, hop=3)
    expected = torch.tensor([[0.0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9]])
    torch.testing.assert_close(frames, expected, rtol=0, atol=0)


@pytest.mark.parametrize(
    ("num_samples", "frame_length", "hop", "num_frames"),
    [(4000, 32, 16, 249), (4000, 32, 32, 125), (100, 100, 7, 1), (10, 3, 5, 2), (11, 1, 1, 11)],
)
def test_number_of_frames_is_one_plus_whole_hops(num_samples, frame_length, hop, num_frames):
    frames = frame_signal(torch.zeros(num_samples), frame_length, hop)
    assert frames.shape == (num_frames, frame_length)


def test_trailing_samples_that_fill_no_frame_are_left_out():
    frames = frame_signal(torch.arange(10.0), frame_length=4, hop=4)
    assert frames.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_frames_are_a_copy_not_a_view_of_the_signal():
    signal = torch.arange(8.0)
    frames = frame_signal(signal, 4, 2)
    frames[0, 0] = 100.0
    assert signal[0] == 0.0


def test_hop_below_one_raises():
    with pytest.raises(ValueError, match="hop must be a positive integer, got 0"):
        frame_signal(torch.zeros(10), 4, 0)


def test_frame_longer_than_the_signal_raises_with_both_lengths():
    message = "frame_length=11 is longer than the signal (10 samples)"
    with pytest.raises(ValueError, match=re.escape(message)):
        frame_signal(torch.zeros(10), 11, 1)


@pytest.mark.parametrize("shape", [(), (2, 10), (1, 1, 10)])
def test_signal_that_is_not_one_dimensional_raises(shape):
    with pytest.raises(ValueError, match=re.escape(f"signal must be 1-D, got shape {shape}")):
        frame_signal(torch.zeros(shape), 4, 2)


def test_signal_must_be_a_tensor():
    with pytest.raises(TypeError, match=r"signal must be a torch\.Tensor, got list"):
        frame_signal([0.0] * 10, 4, 2)


# --- overlap-add ----------------------------------------------------------------------------


@pytest.mark.parametrize(("frame_length", "hop"), [(32, 16), (32, 32), (32, 8), (30, 7), (5, 1)])
def test_frame_then_overlap_add_gives_back_the_signal_when_hop_divides_evenly(frame_length, hop):
    num_samples = frame_length + 40 * hop  # hop divides num_samples - frame_length
    signal = synthetic_signal(num_samples)
    rebuilt = overlap_add(frame_signal(signal, frame_length, hop), hop)
    assert rebuilt.shape == signal.shape
    torch.testing.assert_close(rebuilt, signal, rtol=0, atol=1e-6)


def test_round_trip_is_exact_to_rounding_in_float64():
    signal = synthetic_signal(4000).double()
    rebuilt = overlap_add(frame_signal(signal, 32, 16), 16)
    torch.testing.assert_close(rebuilt, signal, rtol=0, atol=1e-12)


def test_uncovered_trailing_samples_come_back_as_zeros():
    signal = torch.arange(1.0, 11.0)  # 10 samples; frames of 4 every 4 cover 8
    rebuilt = overlap_add(frame_signal(signal, 4, 4), 4, length=10)
    torch.testing.assert_close(rebuilt[:8], signal[:8])
    assert rebuilt[8:].tolist() == [0.0, 0.0]


def test_overlap_add_averages_disagreeing_frames_with_the_window_as_weights():
    frames = torch.tensor([[0.0, 0.0, 0.0, 0.0], [3.0, 3.0, 3.0, 3.0]], dtype=torch.float64)
    w = [math.sin(math.pi * n / 5) ** 2 for n in (1, 2, 3, 4)]  # 0.35, 0.90, 0.90, 0.35
    rebuilt = overlap_add(frames, hop=2)  # samples 2 and 3 are covered by both frames
    expected = [0.0, 0.0, 3 * w[0] / (w[2] + w[0]), 3 * w[1] / (w[3] + w[1]), 3.0, 3.0]
    assert rebuilt.tolist() == pytest.approx(expected)


def test_window_is_a_hann_window_without_its_zero_ends():
    torch.testing.assert_close(
        synthesis_window(3, dtype=torch.float64),
        torch.tensor([0.5, 1.0, 0.5], dtype=torch.float64),
    )
    torch.testing.assert_close(synthesis_window(6), torch.hann_window(8, periodic=False)[1:-1])
    assert (synthesis_window(64) > 0).all()


def test_overlap_add_length_shorter_than_the_frames_cover_raises():
    with pytest.raises(ValueError, match=r"length must be at least 10, .*got 9"):
        overlap_add(torch.zeros(3, 4), 3, length=9)


def test_overlap_add_needs_floating_point_frames():
    with pytest.raises(TypeError, match="frames must be a floating-point tensor"):
        overlap_add(torch.zeros(3, 4, dtype=torch.long), 2)


# --- k-means --------------------------------------------------------------------------------


def test_kmeans_recovers_well_separated_blobs():
    centroids, assignments = kmeans(blobs(), 3)
    torch.testing.assert_close(sort_rows(centroids), sort_rows(BLOB_MEANS))
    groups = [assignments[:4], assignments[4:8], assignments[8:]]
    assert all(len(set(group.tolist())) == 1 for group in groups)
    assert len({int(group[0]) for group in groups}) == 3


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_kmeans_plus_plus_finds_the_blobs_from_every_seed(seed):
    centroids, _ = kmeans(blobs(), 3, seed=seed)
    torch.testing.assert_close(sort_rows(centroids), sort_rows(BLOB_MEANS))


def test_kmeans_is_deterministic_per_seed():
    points = torch.randn(200, 5, generator=torch.Generator().manual_seed(0))
    first, second = kmeans(points, 8, seed=7), kmeans(points, 8, seed=7)
    torch.testing.assert_close(first[0], second[0], rtol=0, atol=0)
    assert torch.equal(first[1], second[1])


def test_kmeans_does_not_touch_the_global_random_state():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    kmeans(torch.randn(50, 2, generator=torch.Generator().manual_seed(1)), 4)
    torch.testing.assert_close(torch.rand(3), expected)


def test_assignments_are_the_nearest_centroids():
    points = torch.randn(300, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    centroids, assignments = kmeans(points, 10)
    distances = ((points[:, None, :] - centroids[None, :, :]) ** 2).sum(-1)
    assert torch.equal(assignments, distances.argmin(dim=1))


def test_centroids_are_the_means_of_their_points_after_convergence():
    points = torch.randn(300, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    centroids, assignments = kmeans(points, 6, iterations=500)
    for cluster in range(6):
        torch.testing.assert_close(centroids[cluster], points[assignments == cluster].mean(0))


def test_a_converged_run_does_not_change_with_more_iterations():
    points = torch.randn(300, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    short, long = kmeans(points, 6, iterations=300), kmeans(points, 6, iterations=3000)
    torch.testing.assert_close(short[0], long[0], rtol=0, atol=0)


def test_more_clusters_never_fit_worse_on_these_points():
    points = torch.randn(400, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    inertia = []
    for k in (1, 2, 4, 8, 16):
        centroids, assignments = kmeans(points, k)
        inertia.append(float(((points - centroids[assignments]) ** 2).sum()))
    assert inertia == sorted(inertia, reverse=True)


def test_a_cluster_left_empty_is_reseeded_on_a_data_point():
    far_away = torch.tensor([[0.5, 0.5], [10.5, 10.5], [100.0, -100.0]], dtype=torch.float64)
    centroids, assignments = kmeans(blobs(), 3, init=far_away)  # the third wins no point at first
    assert torch.bincount(assignments, minlength=3).min() > 0
    torch.testing.assert_close(sort_rows(centroids), sort_rows(BLOB_MEANS))


def test_k_equal_to_the_number_of_points_puts_one_point_in_each_cluster():
    points = blobs()
    centroids, assignments = kmeans(points, points.size(0))
    assert sorted(assignments.tolist()) == list(range(points.size(0)))
    torch.testing.assert_close(sort_rows(centroids), sort_rows(points))


def test_more_clusters_than_points_raises_with_both_numbers():
    with pytest.raises(ValueError, match="k=12 clusters need at least 12 points, got 11"):
        kmeans(blobs(), 12)


def test_kmeans_points_must_be_two_dimensional():
    with pytest.raises(ValueError, match=r"points must be 2-D, got shape \(11,\)"):
        kmeans(torch.zeros(11), 2)


def test_kmeans_points_must_be_floating_point():
    with pytest.raises(TypeError, match=r"points must be a floating-point tensor, got torch\.int"):
        kmeans(torch.zeros(11, 2, dtype=torch.long), 2)


def test_kmeans_points_must_be_finite():
    points = blobs()
    points[3, 1] = math.nan
    with pytest.raises(ValueError, match="points must be finite"):
        kmeans(points, 2)


def test_kmeans_init_of_the_wrong_shape_raises():
    with pytest.raises(ValueError, match=r"init must be a tensor of shape \(k, d\) = \(3, 2\)"):
        kmeans(blobs(), 3, init=torch.zeros(2, 2))


@pytest.mark.parametrize("bad", [0, -1])
def test_kmeans_needs_a_positive_k(bad):
    with pytest.raises(ValueError, match=f"k must be a positive integer, got {bad}"):
        kmeans(blobs(), bad)


# --- the codebook ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def frames() -> torch.Tensor:
    return frame_signal(synthetic_signal(4000), frame_length=32, hop=16)


def test_codebook_sizes(frames):
    codebook = Codebook.fit(frames, 16, seed=0)
    assert codebook.vocab_size == 16
    assert codebook.frame_length == 32
    assert codebook.centroids.shape == (16, 32)


def test_encode_gives_one_int64_token_id_per_frame(frames):
    ids = Codebook.fit(frames, 16).encode(frames)
    assert ids.shape == (frames.size(0),)
    assert ids.dtype == torch.int64
    assert 0 <= int(ids.min()) and int(ids.max()) < 16


def test_decode_gives_one_frame_per_token_id(frames):
    codebook = Codebook.fit(frames, 16)
    decoded = codebook.decode(codebook.encode(frames))
    assert decoded.shape == frames.shape
    assert decoded.dtype == frames.dtype


def test_encode_and_decode_keep_leading_dimensions(frames):
    codebook = Codebook.fit(frames, 8)
    ids = codebook.encode(frames[:12].reshape(3, 4, 32))
    assert ids.shape == (3, 4)
    assert codebook.decode(ids).shape == (3, 4, 32)


def test_decode_looks_up_the_entries():
    codebook = Codebook(torch.tensor([[0.0, 0.0], [1.0, 2.0], [3.0, 4.0]]))
    assert codebook.decode(torch.tensor([2, 0, 1])).tolist() == [[3, 4], [0, 0], [1, 2]]


def test_encode_picks_the_nearest_entry():
    codebook = Codebook(torch.tensor([[0.0, 0.0], [1.0, 2.0], [3.0, 4.0]]))
    frames = torch.tensor([[2.9, 3.8], [0.1, -0.2], [1.2, 1.9]])
    assert codebook.encode(frames).tolist() == [2, 0, 1]


def test_an_entry_decodes_and_encodes_back_to_its_own_id(frames):
    codebook = Codebook.fit(frames, 32)
    ids = torch.arange(32)
    assert torch.equal(codebook.encode(codebook.decode(ids)), ids)


def test_codebook_fit_is_deterministic_per_seed(frames):
    first, second = Codebook.fit(frames, 16, seed=5), Codebook.fit(frames, 16, seed=5)
    torch.testing.assert_close(first.centroids, second.centroids, rtol=0, atol=0)


def test_bigger_codebooks_reconstruct_the_signal_better():
    signal = synthetic_signal(4000)
    frames = frame_signal(signal, 32, 16)
    snr = []
    for k in (2, 8, 32, 128):
        codebook = Codebook.fit(frames, k, seed=0)
        rebuilt = overlap_add(codebook.decode(codebook.encode(frames)), 16, length=signal.numel())
        snr.append(reconstruction_snr(signal, rebuilt))
    assert snr == sorted(snr)
    assert snr[-1] - snr[0] > 6.0  # at least four times less error energy


def test_decoding_token_ids_out_of_range_raises_with_the_range():
    codebook = Codebook(torch.zeros(4, 2))
    with pytest.raises(ValueError, match=r"token ids must be in 0..3, got values from 0 to 4"):
        codebook.decode(torch.tensor([0, 4]))


def test_decoding_float_ids_raises():
    with pytest.raises(TypeError, match=r"ids must be an integer tensor, got torch\.float32"):
        Codebook(torch.zeros(4, 2)).decode(torch.tensor([0.0, 1.0]))


def test_encoding_frames_of_the_wrong_length_raises_with_both_lengths():
    with pytest.raises(ValueError, match=r"frame_length=2 samples.*got shape \(5, 3\)"):
        Codebook(torch.zeros(4, 2)).encode(torch.zeros(5, 3))


def test_fitting_more_entries_than_frames_raises():
    with pytest.raises(ValueError, match="k=10 clusters need at least 10 points, got 3"):
        Codebook.fit(torch.zeros(3, 4), 10)


# --- signal-to-noise ratio ------------------------------------------------------------------


def test_snr_of_a_hand_computed_case():
    original = torch.tensor([3.0, 4.0])  # energy 25
    noisy = torch.tensor([3.0, 3.5])  # error energy 0.25
    assert reconstruction_snr(original, noisy) == pytest.approx(20.0)


def test_snr_of_a_perfect_reconstruction_is_infinite():
    signal = synthetic_signal(100)
    assert reconstruction_snr(signal, signal.clone()) == math.inf


def test_snr_of_silence_is_zero_decibels():
    assert reconstruction_snr(torch.ones(10), torch.zeros(10)) == pytest.approx(0.0)


def test_snr_needs_equal_shapes():
    with pytest.raises(ValueError, match=r"same shape, got \(10,\) and \(9,\)"):
        reconstruction_snr(torch.ones(10), torch.ones(9))


def test_snr_of_an_all_zero_original_raises():
    with pytest.raises(ValueError, match="original is all zeros"):
        reconstruction_snr(torch.zeros(5), torch.ones(5))
