"""Specification of the attention explorer and the attention plots (core ipywidgets only)."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from conftest import render_in_kernel, used_widget_types
from course_lib.explorers.attention import AttentionExplorer, word_vector
from course_lib.plotting import plot_attention, plot_attention_heads, plot_mask

CORE_WIDGETS_IN_7_7 = {"VBox", "HBox", "Text", "Dropdown", "Checkbox", "HTML", "Output", "Layout"}


def test_explorer_is_a_box_of_core_widgets_available_in_ipywidgets_7_7():
    explorer = AttentionExplorer()
    assert isinstance(explorer, widgets.VBox)
    used = used_widget_types(explorer)
    assert used <= CORE_WIDGETS_IN_7_7


def test_the_readout_names_the_query_and_the_key_it_attends_to_most():
    explorer = AttentionExplorer(sentence="the cat sat", query=1)
    _, weights = explorer.compute("the cat sat", 1)
    best = int(weights[0, 1].argmax())
    assert "<b>query 1: cat</b>" in explorer.readout.value
    assert f"<td>{['the', 'cat', 'sat'][best]} ({best})</td>" in explorer.readout.value
    assert f"<td>{float(weights[0, 1, best]):.3f}</td>" in explorer.readout.value


def test_every_row_of_weights_is_a_distribution_for_every_head_count():
    explorer = AttentionExplorer()
    for heads in (1, 2, 4, 8):
        _, weights = explorer.compute("the cat sat on the mat", heads)
        assert weights.shape == (heads, 6, 6)
        torch.testing.assert_close(weights.sum(-1), torch.ones(heads, 6))


def test_the_causal_toggle_gives_future_keys_exactly_zero_weight():
    explorer = AttentionExplorer()
    scores, weights = explorer.compute("the cat sat on the mat", 2, causal=True)
    future = ~torch.ones(6, 6, dtype=torch.bool).tril()
    assert (weights[:, future] == 0).all() and torch.isinf(scores[:, future]).all()
    explorer.causal.value = True
    assert "3 keys allowed" in explorer.readout.value  # query 2 sees 0, 1, 2


def test_without_scaling_the_scores_grow_by_sqrt_d_k_and_the_weights_sharpen():
    explorer = AttentionExplorer(d_model=64)
    scaled, weights = explorer.compute("the cat sat on the mat", 1, scale=True)
    raw, sharp = explorer.compute("the cat sat on the mat", 1, scale=False)
    torch.testing.assert_close(raw, scaled * math.sqrt(64))
    assert sharp.max(dim=-1).values.mean() > weights.max(dim=-1).values.mean()


def test_changing_the_head_count_regroups_the_same_projections():
    explorer = AttentionExplorer(d_model=16)
    x = torch.stack([word_vector(w, 16) for w in ["a", "b"]])
    scores, _ = explorer.compute("a b", 4, scale=False, positions=False)
    q, k = x @ explorer.w_q, x @ explorer.w_k
    torch.testing.assert_close(scores[2], q[:, 8:12] @ k[:, 8:12].T)


def test_the_same_word_gets_the_same_vector_and_positions_tell_repeats_apart():
    assert torch.equal(word_vector("the", 8), word_vector("the", 8))
    explorer = AttentionExplorer()
    _, same = explorer.compute("the the", 1, positions=False)
    torch.testing.assert_close(same[0, 0], torch.tensor([0.5, 0.5]))
    _, apart = explorer.compute("the the", 1, positions=True)
    assert not torch.allclose(apart[0, 0], torch.tensor([0.5, 0.5]))


def test_a_new_sentence_updates_the_query_choices_and_keeps_the_query_inside():
    explorer = AttentionExplorer(query=5)
    explorer.sentence.value = "one two"
    assert [label for label, _ in explorer.query.options] == ["0: one", "1: two"]
    assert explorer.query.value == 1
    assert "<b>query 1: two</b>" in explorer.readout.value


def test_an_empty_or_too_long_sentence_shows_a_message_instead_of_a_plot():
    explorer = AttentionExplorer()
    explorer.sentence.value = "   "
    assert "must have 1 to 12 words, got 0" in explorer.readout.value
    explorer.sentence.value = " ".join(["w"] * 13)
    assert "got 13" in explorer.readout.value


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"d_model": 20}, "d_model must be a positive multiple of 8"),
        ({"num_heads": 3}, r"num_heads must be one of \(1, 2, 4, 8\)"),
        ({"query": 6}, r"query must be in 0\.\.5"),
        ({"sentence": ""}, "must have 1 to 12 words"),
    ],
)
def test_bad_arguments_raise_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AttentionExplorer(**kwargs)


# ----------------------------------------------------------------------------- plots


def test_plot_attention_greys_out_masked_cells_and_labels_the_tokens():
    weights = torch.tensor([[1.0, 0.0], [0.4, 0.6]])
    mask = torch.tensor([[True, False], [True, True]])
    ax = plot_attention(weights, queries=["a", "b"], keys=["a", "b"], mask=mask, highlight=1)
    texts = [t.get_text() for t in ax.texts]
    assert texts == ["1.00", "×", "0.40", "0.60"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b"]
    plt.close(ax.figure)


def test_plot_attention_heads_draws_one_panel_per_head():
    axes = plot_attention_heads(torch.full((3, 2, 2), 0.5))
    assert [ax.get_title() for ax in axes] == ["head 1", "head 2", "head 3"]
    plt.close(axes[0].figure)


def test_plot_mask_marks_allowed_and_blocked_cells():
    ax = plot_mask(np.tril(np.ones((2, 2), dtype=bool)))
    assert [t.get_text() for t in ax.texts] == ["✓", "×", "✓", "✓"]
    plt.close(ax.figure)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: plot_attention(torch.ones(2, 2, 2)), r"weights must be 2-D \(L_q, L_k\)"),
        (lambda: plot_attention(torch.ones(2, 3), keys=["a"]), "keys has 1 labels for 3"),
        (lambda: plot_attention_heads(torch.ones(2, 2)), "weights must be 3-D"),
        (lambda: plot_mask(torch.ones(2, 2)), "mask must be a 2-D bool array"),
    ],
)
def test_plots_refuse_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
    plt.close("all")


# ----------------------------------------------------------------------------- in a kernel

KERNEL_CELLS = [
    "import ipywidgets\nprint(ipywidgets.__version__)",
    "from course_lib.explorers.attention import attention_explorer\n"
    "explorer = attention_explorer()\nexplorer",
    "explorer.heads.value = 4\nexplorer.causal.value = True\nprint(explorer.readout.value[:40])",
]


def test_the_explorer_renders_in_a_kernel(tmp_path, widget_kernel):
    rendered = render_in_kernel(KERNEL_CELLS, tmp_path, widget_kernel)
    assert {"VBoxModel", "TextModel", "DropdownModel", "CheckboxModel",
            "OutputModel"} <= rendered.model_names()  # fmt: skip
    assert any(rendered.figures_stored()), "the explorer's figure is stored in its Output widget"
    assert rendered.notebook.cells[2].outputs[0].text.startswith("<b>query 2: sat</b>")
