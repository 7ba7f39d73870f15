"""Specification of course_lib.recurrence: an RNN steps through a sequence, attention does not."""

import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from course_lib.attention import scaled_dot_product_attention
from course_lib.plotting import plot_rnn_vs_attention
from course_lib.recurrence import (
    attention_matmul_flops,
    rnn_from_cell,
    rnn_matmul_flops,
    rnn_stepwise,
    self_attention,
    time_rnn_vs_attention,
)

ROW_KEYS = {
    "length",
    "rnn_seconds",
    "rnn_builtin_seconds",
    "attention_seconds",
    "rnn_sequential_steps",
    "attention_sequential_steps",
    "rnn_flops",
    "attention_flops",
}


def random(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def cell_and_rnn(input_size: int, hidden_size: int, nonlinearity: str = "tanh"):
    """An nn.RNNCell and a batch-first nn.RNN holding the same weights, in float64."""
    torch.manual_seed(0)
    cell = nn.RNNCell(input_size, hidden_size, nonlinearity=nonlinearity).double()
    rnn = nn.RNN(input_size, hidden_size, nonlinearity=nonlinearity, batch_first=True).double()
    with torch.no_grad():
        rnn.weight_ih_l0.copy_(cell.weight_ih)
        rnn.weight_hh_l0.copy_(cell.weight_hh)
        rnn.bias_ih_l0.copy_(cell.bias_ih)
        rnn.bias_hh_l0.copy_(cell.bias_hh)
    return cell, rnn


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


# --- the RNN, step by step ------------------------------------------------------------------


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_stepwise_rnn_equals_torch_rnn_with_the_same_weights(nonlinearity):
    cell, rnn = cell_and_rnn(5, 7, nonlinearity)
    x = random(3, 11, 5)
    expected, _ = rnn(x)
    torch.testing.assert_close(rnn_stepwise(x, cell), expected, rtol=0, atol=1e-6)


def test_stepwise_rnn_with_an_initial_state_equals_torch_rnn():
    cell, rnn = cell_and_rnn(4, 6)
    x, h0 = random(2, 9, 4, seed=1), random(2, 6, seed=2)
    expected, _ = rnn(x, h0[None])
    torch.testing.assert_close(rnn_stepwise(x, cell, h0), expected, rtol=0, atol=1e-6)


def test_stepwise_rnn_output_shape_is_batch_seq_hidden():
    cell = nn.RNNCell(4, 9)
    assert rnn_stepwise(torch.zeros(2, 13, 4), cell).shape == (2, 13, 9)


def test_hand_computed_one_unit_rnn():
    cell = nn.RNNCell(1, 1, nonlinearity="relu")
    with torch.no_grad():
        cell.weight_ih.fill_(1.0)
        cell.weight_hh.fill_(2.0)
        cell.bias_ih.zero_()
        cell.bias_hh.zero_()
    x = torch.tensor([[[1.0], [0.0], [3.0]]])  # h = 1, then 2 * 1 = 2, then 3 + 2 * 2 = 7
    assert rnn_stepwise(x, cell).flatten().tolist() == [1.0, 2.0, 7.0]


def test_a_later_input_never_changes_an_earlier_state():
    cell = nn.RNNCell(3, 4)
    x = torch.randn(1, 6, 3, generator=torch.Generator().manual_seed(0))
    changed = x.clone()
    changed[0, 4] += 1.0
    before, after = rnn_stepwise(x, cell), rnn_stepwise(changed, cell)
    torch.testing.assert_close(before[:, :4], after[:, :4], rtol=0, atol=0)
    assert not torch.allclose(before[:, 4:], after[:, 4:])


def test_an_early_input_changes_every_later_state():
    cell = nn.RNNCell(3, 4)
    x = torch.randn(1, 6, 3, generator=torch.Generator().manual_seed(0))
    changed = x.clone()
    changed[0, 0] += 1.0
    difference = (rnn_stepwise(x, cell) - rnn_stepwise(changed, cell)).abs().sum(dim=-1)
    assert (difference > 0).all()


def test_stepwise_rnn_rejects_other_cells():
    with pytest.raises(TypeError, match=r"cell must be an nn\.RNNCell, got LSTMCell"):
        rnn_stepwise(torch.zeros(1, 2, 3), nn.LSTMCell(3, 4))


@pytest.mark.parametrize("shape", [(2, 3), (2, 5, 4), (1, 2, 5, 3), (2, 0, 3)])
def test_stepwise_rnn_rejects_inputs_of_the_wrong_shape(shape):
    message = "expected inputs of shape (batch, seq >= 1, input_size=3)"
    with pytest.raises(ValueError, match=re.escape(message)):
        rnn_stepwise(torch.zeros(shape), nn.RNNCell(3, 4))


def test_stepwise_rnn_rejects_an_initial_state_of_the_wrong_shape():
    message = "expected h0 of shape (batch=2, hidden_size=4), got (4,)"
    with pytest.raises(ValueError, match=re.escape(message)):
        rnn_stepwise(torch.zeros(2, 5, 3), nn.RNNCell(3, 4), torch.zeros(4))


# --- self-attention, all positions at once --------------------------------------------------


def test_self_attention_projects_then_attends():
    torch.manual_seed(0)
    w_q, w_k, w_v = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 5)
    x = torch.randn(2, 6, 8, generator=torch.Generator().manual_seed(1))
    expected, _ = scaled_dot_product_attention(w_q(x), w_k(x), w_v(x))
    torch.testing.assert_close(self_attention(x, w_q, w_k, w_v), expected)
    assert expected.shape == (2, 6, 5)


def test_self_attention_output_at_every_position_sees_a_later_input():
    torch.manual_seed(0)
    projections = [nn.Linear(4, 4) for _ in range(3)]
    x = torch.randn(1, 6, 4, generator=torch.Generator().manual_seed(0))
    changed = x.clone()
    changed[0, 5] += 1.0
    difference = (self_attention(x, *projections) - self_attention(changed, *projections)).abs()
    assert (difference.sum(dim=-1) > 0).all()


# --- counting the arithmetic ----------------------------------------------------------------


def counted_flops(function, *args) -> int:
    with FlopCounterMode(display=False) as counter:
        function(*args)
    return counter.get_total_flops()


@pytest.mark.parametrize("batch, length, input_size, hidden_size", [(2, 5, 16, 16), (3, 7, 4, 9)])
def test_rnn_flops_equal_pytorchs_flop_counter(batch, length, input_size, hidden_size):
    cell = nn.RNNCell(input_size, hidden_size)
    x = torch.zeros(batch, length, input_size)
    expected = counted_flops(rnn_stepwise, x, cell)
    assert rnn_matmul_flops(batch, length, input_size, hidden_size) == expected


@pytest.mark.parametrize("batch, length, d_model, d_k, d_v", [(2, 5, 16, 16, 16), (1, 9, 8, 4, 6)])
def test_attention_flops_equal_pytorchs_flop_counter(batch, length, d_model, d_k, d_v):
    w_q, w_k, w_v = nn.Linear(d_model, d_k), nn.Linear(d_model, d_k), nn.Linear(d_model, d_v)
    x = torch.zeros(batch, length, d_model)
    expected = counted_flops(self_attention, x, w_q, w_k, w_v)
    assert attention_matmul_flops(batch, length, d_model, d_k, d_v) == expected


def test_flops_hand_computed():
    # one step, one sequence: (1 x 2)(2 x 3) and (1 x 3)(3 x 3): 2 * (6 + 9) = 30
    assert rnn_matmul_flops(1, 1, 2, 3) == 30
    # projections 2 * 2 * 4 * (2 * 3 + 5) = 176; scores and sum 2 * 2**2 * (3 + 5) = 64
    assert attention_matmul_flops(1, 2, 4, 3, 5) == 176 + 64


def test_attention_flops_grow_with_the_square_of_the_length_rnn_flops_linearly():
    assert rnn_matmul_flops(1, 200, 8, 8) == 2 * rnn_matmul_flops(1, 100, 8, 8)
    quadratic = attention_matmul_flops(1, 200, 8, 8, 8) - 2 * attention_matmul_flops(
        1, 100, 8, 8, 8
    )
    assert quadratic == 2 * 200 * 100 * 16  # 2 L^2 (d_k + d_v) at L = 200, minus twice at 100


def test_flop_counts_refuse_non_positive_sizes():
    with pytest.raises(ValueError, match="length must be a positive integer, got 0"):
        rnn_matmul_flops(1, 0, 4, 4)
    with pytest.raises(TypeError, match="d_k must be an integer"):
        attention_matmul_flops(1, 2, 4, 2.5, 4)


# --- the builtin RNN with the cell's weights ------------------------------------------------


def test_the_builtin_rnn_shares_the_cells_weights_and_computes_the_same():
    cell = nn.RNNCell(5, 7).double()
    rnn = rnn_from_cell(cell)
    assert rnn.weight_hh_l0 is cell.weight_hh and rnn.bias_ih_l0 is cell.bias_ih
    x = random(3, 11, 5)
    torch.testing.assert_close(rnn(x)[0], rnn_stepwise(x, cell), rtol=0, atol=1e-12)


# --- timing ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rows():
    return time_rnn_vs_attention([4, 16, 8], d_model=16, batch=2, repeats=2)


def test_one_row_per_length_in_the_given_order(rows):
    assert [row["length"] for row in rows] == [4, 16, 8]
    assert all(set(row) == ROW_KEYS for row in rows)


def test_rnn_needs_one_sequential_step_per_position_attention_one_in_all(rows):
    assert [row["rnn_sequential_steps"] for row in rows] == [4, 16, 8]
    assert [row["attention_sequential_steps"] for row in rows] == [1, 1, 1]


def test_times_are_positive_seconds(rows):
    for row in rows:
        for key in ("rnn_seconds", "rnn_builtin_seconds", "attention_seconds"):
            assert isinstance(row[key], float) and row[key] > 0


def test_rows_carry_the_exact_flop_counts(rows):
    for row in rows:
        assert row["rnn_flops"] == rnn_matmul_flops(2, row["length"], 16, 16)
        assert row["attention_flops"] == attention_matmul_flops(2, row["length"], 16, 16, 16)


def test_timing_leaves_the_global_random_state_and_threads_alone():
    threads = torch.get_num_threads()
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    time_rnn_vs_attention([2], d_model=4, batch=1, repeats=1)
    torch.testing.assert_close(torch.rand(3), expected)
    assert torch.get_num_threads() == threads


def test_timing_runs_on_the_threads_asked_for_and_restores_the_setting(monkeypatch):
    import course_lib.recurrence as recurrence

    seen = []
    original = recurrence._best_time

    def spy(run, repeats):
        seen.append(torch.get_num_threads())
        return original(run, repeats)

    monkeypatch.setattr(recurrence, "_best_time", spy)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        time_rnn_vs_attention([2, 3], d_model=4, batch=1, repeats=1, threads=1)
        assert seen == [1] * 6 and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_timing_refuses_zero_threads():
    with pytest.raises(ValueError, match="threads must be a positive integer, got 0"):
        time_rnn_vs_attention([4], threads=0)


def test_timing_leaves_gradients_off():
    time_rnn_vs_attention([2], d_model=4, batch=1, repeats=1)
    assert torch.is_grad_enabled()


@pytest.mark.parametrize("lengths", [[], [4, 0], [-1]])
def test_timing_rejects_empty_or_non_positive_lengths(lengths):
    with pytest.raises(ValueError, match="length"):
        time_rnn_vs_attention(lengths)


def test_timing_rejects_zero_repeats():
    with pytest.raises(ValueError, match="repeats must be a positive integer, got 0"):
        time_rnn_vs_attention([4], repeats=0)


# --- the plot -------------------------------------------------------------------------------


def test_plot_draws_one_line_per_model_on_log_axes(rows):
    _, ax = plt.subplots()
    assert plot_rnn_vs_attention(rows, ax) is ax
    assert len(ax.lines) == 3
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert list(ax.lines[0].get_xdata()) == [4, 16, 8]
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert sum("RNN" in label for label in labels) == 2
    assert any("attention" in label for label in labels)


def test_plot_leaves_out_the_builtin_rnn_when_it_was_not_measured(rows):
    without = [{k: v for k, v in row.items() if k != "rnn_builtin_seconds"} for row in rows]
    assert len(plot_rnn_vs_attention(without).lines) == 2


def test_plot_shows_milliseconds(rows):
    ax = plot_rnn_vs_attention(rows)
    assert ax.lines[0].get_ydata()[0] == pytest.approx(1000 * rows[0]["rnn_seconds"])
    assert "ms" in ax.get_ylabel()


def test_plot_rejects_rows_without_times():
    with pytest.raises(ValueError, match="rows lack the keys"):
        plot_rnn_vs_attention([{"length": 4}])


def test_plot_rejects_no_rows():
    with pytest.raises(ValueError, match="rows must hold at least one measurement"):
        plot_rnn_vs_attention([])


def test_rnn_from_cell_refuses_other_modules():
    with pytest.raises(TypeError, match=r"cell must be an nn\.RNNCell, got GRUCell"):
        rnn_from_cell(nn.GRUCell(3, 4))
