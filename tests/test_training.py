"""Specification of course_lib.training: teacher forcing, the loss, the schedule, the loop."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from course_lib.training import (
    ProgressBar,
    fit,
    label_smoothed_loss,
    sequence_loss,
    smoothed_loss_minimum,
    smoothed_targets,
    teacher_forcing,
    threads,
    train_seq2seq,
    transformer_schedule,
    transformer_scheduler,
    warmup_then_decay,
)
from course_lib.transformer import Transformer


def test_teacher_forcing_shifts_the_target_by_one():
    tgt = torch.tensor([[1, 5, 6, 2], [1, 7, 2, 0]])
    decoder_input, labels = teacher_forcing(tgt)
    assert decoder_input.tolist() == [[1, 5, 6], [1, 7, 2]]
    assert labels.tolist() == [[5, 6, 2], [7, 2, 0]]


@pytest.mark.parametrize("tgt", [torch.tensor([[1]]), torch.tensor([1, 2, 3]), [[1, 2]]])
def test_teacher_forcing_needs_at_least_bos_and_eos(tgt):
    with pytest.raises(ValueError, match="L >= 2"):
        teacher_forcing(tgt)


def test_the_loss_averages_the_cross_entropy_over_the_real_labels_only():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 6)
    labels = torch.tensor([[5, 4, 2], [3, 2, 0]])
    by_hand = [-torch.log_softmax(logits[b, t], -1)[labels[b, t]]
               for b, t in [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]]  # fmt: skip
    torch.testing.assert_close(sequence_loss(logits, labels, pad_id=0), sum(by_hand) / 5)
    everything = F.cross_entropy(logits.reshape(6, 6), labels.reshape(6))
    torch.testing.assert_close(sequence_loss(logits, labels, pad_id=None), everything)


def test_the_loss_refuses_labels_that_do_not_match_the_logits():
    with pytest.raises(ValueError, match=r"logits must be \(batch, L, vocab_size\)"):
        sequence_loss(torch.zeros(2, 3, 5), torch.zeros(2, 4, dtype=torch.long))


def test_the_schedule_warms_up_linearly_then_decays_to_zero():
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    schedule = warmup_then_decay(optimizer, total_steps=10, warmup_fraction=0.2)
    rates = []
    for _ in range(10):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    assert rates == pytest.approx([0.5, 1.0, 1.0, 0.875, 0.75, 0.625, 0.5, 0.375, 0.25, 0.125])


def test_threads_sets_the_count_inside_and_restores_it_after():
    before = torch.get_num_threads()
    with threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def copy_task(count: int = 256, length: int = 5, seed: int = 0):
    """Sources of random tokens 3..9; the target is the source between <bos> and <eos>."""
    draw = torch.Generator().manual_seed(seed)
    src = torch.randint(3, 10, (count, length), generator=draw)
    bos, eos = torch.ones(count, 1, dtype=torch.long), torch.full((count, 1), 2)
    return src, torch.cat([bos, src, eos], dim=1)


def tiny_model(seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(10, 10, d_model=16, num_heads=2, num_encoder_layers=1,
                       num_decoder_layers=1, d_ff=32, dropout=0.1, max_len=10)  # fmt: skip


def test_training_lowers_the_loss_and_leaves_the_model_in_eval_mode():
    src, tgt = copy_task()
    model = tiny_model()
    history = train_seq2seq(model, src, tgt, epochs=8, batch_size=16, learning_rate=1e-2)
    assert len(history.step_losses) == 8 * 16 and len(history.epoch_losses) == 8
    assert history.steps_per_epoch == 16 and history.seconds > 0
    assert history.epoch_losses[-1] < 0.7 * history.epoch_losses[0]
    assert not model.training


def test_training_is_reproducible_and_leaves_the_global_random_state_alone():
    src, tgt = copy_task()
    settings = {"epochs": 2, "batch_size": 64, "learning_rate": 1e-2, "seed": 3}
    torch.manual_seed(123)
    state = torch.get_rng_state()
    first, second = tiny_model(), tiny_model()
    torch.set_rng_state(state)
    history = train_seq2seq(first, src, tgt, **settings)
    assert torch.equal(torch.get_rng_state(), state)
    again = train_seq2seq(second, src, tgt, **settings)
    assert history.step_losses == again.step_losses
    for a, b in zip(first.parameters(), second.parameters(), strict=True):
        assert torch.equal(a, b)


def test_a_progress_function_is_called_after_every_step():
    src, tgt = copy_task(count=64)
    calls = []
    train_seq2seq(tiny_model(), src, tgt, epochs=2, batch_size=32, learning_rate=1e-3,
                  progress=lambda *args: calls.append(args))  # fmt: skip
    assert [c[:2] for c in calls] == [(1, 0), (2, 0), (3, 1), (4, 1)]


def test_the_progress_bar_prints_lines_outside_a_notebook(capsys):
    bar = ProgressBar(total=4, every=2)
    for step in range(1, 5):
        bar.update(step, 0, 0.5, 1.0)
    assert capsys.readouterr().out.splitlines() == [
        "step 2/4, epoch 1, loss 0.5000, 1.0 s",
        "step 4/4, epoch 1, loss 0.5000, 1.0 s",
    ]


@pytest.mark.parametrize(
    ("data", "error", "message"),
    [
        ((torch.zeros(4, 3), torch.zeros(5, 3)), ValueError, "one row per example"),
        ((), TypeError, "one or more tensors"),
        (([1, 2],), TypeError, "one or more tensors"),
    ],
)
def test_fit_refuses_data_that_is_not_tensors_of_one_length(data, error, message):
    with pytest.raises(error, match=message):
        fit(tiny_model(), data, lambda *rows: None, epochs=1, batch_size=2, learning_rate=0.1)


def test_train_seq2seq_refuses_ids_of_the_wrong_shape():
    with pytest.raises(ValueError, match=r"\(N, L_s\) and \(N, L_t\)"):
        train_seq2seq(tiny_model(), torch.zeros(4, dtype=torch.long),
                      torch.zeros(4, 3, dtype=torch.long), epochs=1, batch_size=2,
                      learning_rate=0.1)  # fmt: skip


# ----------------------------------------------------------------------------- the paper's recipe


def test_the_papers_schedule_rises_linearly_peaks_at_warmup_then_decays_as_one_over_sqrt():
    assert transformer_schedule(1, 512, 4000) == pytest.approx(512**-0.5 * 4000**-1.5)
    assert transformer_schedule(2000, 512, 4000) == pytest.approx(
        transformer_schedule(1, 512, 4000) * 2000
    )
    peak = transformer_schedule(4000, 512, 4000)
    assert peak == pytest.approx((512 * 4000) ** -0.5) and peak == pytest.approx(6.99e-4, 1e-3)
    assert max(transformer_schedule(s, 512, 4000) for s in range(1, 20_000)) == peak
    assert transformer_schedule(16_000, 512, 4000) == pytest.approx(peak / 2)


@pytest.mark.parametrize(
    ("step", "d_model", "warmup"), [(0, 512, 4000), (1, 0, 4000), (1, 512, 0), (1.5, 512, 10)]
)
def test_the_papers_schedule_counts_steps_from_one_and_refuses_bad_sizes(step, d_model, warmup):
    with pytest.raises((ValueError, TypeError)):
        transformer_schedule(step, d_model, warmup)


def test_the_scheduler_runs_the_nth_optimizer_step_at_the_rate_of_paper_step_n_plus_1():
    weight = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.Adam([weight], lr=1.0)
    scheduler = transformer_scheduler(optimizer, d_model=64, warmup_steps=10)
    rates = []
    for _ in range(30):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert rates == pytest.approx([transformer_schedule(s, 64, 10) for s in range(1, 31)])


def test_fit_takes_another_schedule_and_adams_eps():
    model = torch.nn.Linear(2, 1)
    seen = []

    def schedule(optimizer, total):
        seen.append((optimizer.param_groups[0]["eps"], total))
        return transformer_scheduler(optimizer, 2, 3)

    x = torch.randn(8, 2)
    fit(
        model,
        (x,),
        lambda b: model(b).pow(2).mean(),
        epochs=2,
        batch_size=4,
        learning_rate=1.0,
        schedule=schedule,
        adam_eps=1e-9,
    )
    assert seen == [(1e-9, 4)]


def test_smoothed_targets_put_1_minus_eps_plus_eps_over_k_on_the_label():
    target = smoothed_targets(torch.tensor([2, 0]), num_classes=4, epsilon=0.1)
    expected = torch.tensor([[0.025, 0.025, 0.925, 0.025], [0.925, 0.025, 0.025, 0.025]])
    torch.testing.assert_close(target, expected)
    torch.testing.assert_close(target.sum(-1), torch.ones(2))


@pytest.mark.parametrize(
    ("labels", "k", "eps", "error"),
    [
        (torch.tensor([4]), 4, 0.1, ValueError),
        (torch.tensor([-1]), 4, 0.1, ValueError),
        (torch.tensor([0.0]), 4, 0.1, TypeError),
        (torch.tensor([0]), 4, 1.0, ValueError),
        (torch.tensor([0]), 4, -0.1, ValueError),
    ],
)
def test_smoothed_targets_refuse_bad_labels_and_epsilons(labels, k, eps, error):
    with pytest.raises(error):
        smoothed_targets(labels, k, eps)


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_the_smoothed_loss_is_torchs_label_smoothing_with_the_padding_left_out(eps):
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 7)
    labels = torch.randint(1, 7, (3, 5))
    labels[1, 3:] = 0
    labels[2, 1:] = 0
    ours = label_smoothed_loss(logits, labels, eps, pad_id=0)
    real = labels != 0
    torch.testing.assert_close(
        ours, F.cross_entropy(logits[real], labels[real], label_smoothing=eps)
    )
    torch.testing.assert_close(sequence_loss(logits, labels, 0, label_smoothing=eps), ours)
    every = label_smoothed_loss(logits, labels, eps, pad_id=None)
    torch.testing.assert_close(
        every, F.cross_entropy(logits.flatten(0, 1), labels.flatten(), label_smoothing=eps)
    )


def test_the_smoothed_loss_cannot_go_below_the_entropy_of_the_target():
    k, eps = 5, 0.1
    minimum = smoothed_loss_minimum(k, eps)
    target = smoothed_targets(torch.tensor([1]), k, eps)
    assert minimum == pytest.approx(-(target * target.log()).sum().item())
    logits = torch.zeros(1, 1, k, requires_grad=True)
    optimizer = torch.optim.Adam([logits], lr=0.1)
    for _ in range(500):
        loss = label_smoothed_loss(logits, torch.tensor([[1]]), eps, pad_id=None)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() == pytest.approx(minimum, abs=1e-4)
    assert loss.item() >= minimum - 1e-6
    assert smoothed_loss_minimum(k, 0.0) == 0.0


def test_train_seq2seq_passes_label_smoothing_to_the_loss():
    torch.manual_seed(0)
    model = Transformer(
        9,
        9,
        d_model=8,
        num_heads=2,
        num_encoder_layers=1,
        num_decoder_layers=1,
        d_ff=16,
        dropout=0.0,
    )
    src = torch.randint(3, 9, (16, 4))
    tgt = torch.cat([torch.ones(16, 1, dtype=torch.long), src, torch.full((16, 1), 2)], 1)
    settings = {"epochs": 1, "batch_size": 16, "learning_rate": 0.0}
    plain = train_seq2seq(model, src, tgt, **settings).step_losses[0]
    smooth = train_seq2seq(model, src, tgt, label_smoothing=0.1, **settings).step_losses[0]
    with torch.no_grad():
        decoder_input, labels = teacher_forcing(tgt)
        logits = model(src, decoder_input)
    assert plain == pytest.approx(sequence_loss(logits, labels).item(), abs=1e-5)
    assert smooth == pytest.approx(label_smoothed_loss(logits, labels, 0.1).item(), abs=1e-5)


def test_the_smoothed_loss_keeps_the_precision_of_float64_logits():
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 7, dtype=torch.float64)
    labels = torch.randint(1, 7, (2, 5))
    ours = label_smoothed_loss(logits, labels, 0.1, pad_id=None)
    torchs = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), label_smoothing=0.1)
    assert ours.dtype == torch.float64
    torch.testing.assert_close(ours, torchs, rtol=0, atol=1e-14)
