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
from explorer_checks import assert_book_matches_live

from conftest import render_in_kernel, used_widget_types
from course_lib.explorers.attention import (
    BOOK_SENTENCES,
    HEAD_CHOICES,
    AttentionExplorer,
    attention_explorer,
    book_heads,
    word_vector,
)
from course_lib.plotting import plot_attention, plot_attention_heads, plot_mask

CORE_WIDGETS_IN_7_7 = {
    "VBox", "HBox", "Text", "Dropdown", "Checkbox", "HTML", "HTMLMath", "Layout",
}  # fmt: skip


def test_explorer_is_a_box_of_core_widgets_available_in_ipywidgets_7_7():
    explorer = AttentionExplorer()
    assert isinstance(explorer, widgets.VBox)
    used = used_widget_types(explorer)
    assert used <= CORE_WIDGETS_IN_7_7


def test_the_readout_names_the_query_and_gives_its_weight_on_every_key():
    explorer = AttentionExplorer(sentence="the cat sat", query=1)
    _, weights = explorer.compute("the cat sat", 1)
    row = weights[0, 1].tolist()
    assert "<b>query 1: cat</b>" in explorer.readout.value
    assert "<th>0<br>the<th>1<br>cat<th>2<br>sat" in explorer.readout.value
    for weight in row:
        assert f">{weight:.2f}" in explorer.readout.value


def test_the_readout_puts_the_largest_weight_of_each_head_in_bold():
    explorer = AttentionExplorer(num_heads=4)
    _, weights = explorer.compute("the cat sat on the mat", 4)
    bold = [f"<b>{float(row.max()):.2f}</b>" for row in weights[:, 2]]
    assert explorer.readout.value.count("<b>") == 1 + 4  # the query's name, then one a head
    assert all(text in explorer.readout.value for text in bold)


def test_the_matrices_show_every_heads_weights_and_the_masked_keys():
    explorer = AttentionExplorer(sentence="a b c", num_heads=2, causal=True)
    _, weights = explorer.compute("a b c", 2, causal=True)
    shown = explorer.matrices.value
    assert shown.count("<caption>head") == 2
    assert shown.count("<td class=x>&times;") == 2 * 3  # three future keys in each head
    assert f">{float(weights[1, 2, 0]):.2f}" in shown
    assert "causal mask" in shown and "hidden by the mask" in shown


def test_a_large_matrix_is_shaded_without_numbers():
    explorer = AttentionExplorer(num_heads=8)
    assert explorer.matrices.value.count("<caption>head") == 8
    assert "0." not in explorer.matrices.value.split("</style>")[1]


def test_choosing_another_query_redraws_the_readout_only():
    explorer = AttentionExplorer()
    matrices = explorer.matrices.value
    explorer.query.value = 0
    assert "<b>query 0: the</b>" in explorer.readout.value
    assert explorer.matrices.value == matrices


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


def test_an_empty_or_too_long_sentence_shows_a_message_and_keeps_the_last_view():
    explorer = AttentionExplorer()
    readout = explorer.readout.value
    explorer.sentence.value = "   "
    assert "must have 1 to 12 words, got 0" in explorer.message.value
    assert explorer.message.layout.display != "none"
    explorer.sentence.value = " ".join(["w"] * 13)
    assert "got 13" in explorer.message.value
    assert explorer.readout.value == readout
    explorer.sentence.value = "a b"
    assert explorer.message.layout.display == "none"
    assert "<b>query 1: b</b>" in explorer.readout.value


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


# ----------------------------------------------------------------------------- the book

SMALL = {"sentence": ("a b", "a b a"), "heads": (1, 2)}  # few states: fast tests


def test_building_for_the_book_stores_a_readout_per_query_and_matrices_per_setting():
    explorer = AttentionExplorer(sentence="a b", query=1, book=True, offer=SMALL)
    # readout keys: sentence, heads, scale, causal, positions, query
    readouts = set(explorer.states["readout"])
    assert len(readouts) == (2 + 3) * 2 * 2 * 2 * 2
    assert (1, 1, 1, 0, 1, 2) in readouts and (0, 0, 0, 0, 0, 2) not in readouts
    # matrices keys: sentence, heads, scale, causal, positions (not the query)
    assert set(explorer.states["matrices"]) == {
        (s, h, a, c, p) for s in (0, 1) for h in (0, 1) for a in (0, 1) for c in (0, 1)
        for p in (0, 1)
    }  # fmt: skip
    assert explorer.state_values("readout", (1, 1, 1, 0, 1, 2)) == {
        "sentence": "a b a", "heads": 2, "scale": True, "causal": False, "positions": True,
        "query": 2,
    }  # fmt: skip


def test_the_books_states_are_what_the_live_explorer_shows():
    assert_book_matches_live(
        lambda book: AttentionExplorer(sentence="a b", query=1, book=book, offer=SMALL),
        most=8,
    )


def test_the_books_causal_states_are_what_the_live_explorer_shows():
    assert_book_matches_live(
        lambda book: AttentionExplorer(
            sentence="a b a",
            causal=True,
            num_heads=2,
            book=book,
            offer={"sentence": ("a b a", "c"), "heads": (2, 8)},
        ),
        most=8,
    )


def test_the_tables_take_the_whole_width_live_and_in_the_book():
    live = AttentionExplorer()
    assert live.readout.layout.width == live.matrices.layout.width == "calc(100% - 4px)"
    book = AttentionExplorer(
        book=True, offer=SMALL | {"sentence": ("a b",)}, sentence="a b", query=0
    )
    views = [book.parts["readout"], book.parts["matrices"]]
    while views:  # no stack of the tables is held to a control's width
        view = views.pop()
        if isinstance(view, widgets.Stack):
            assert view.layout.width == "100%" and view.layout.max_width is None
            views.extend(view.children)
        else:
            assert view.layout.width == "calc(100% - 4px)"


def test_the_book_offers_three_sentences_three_head_counts_and_both_sides_of_each_switch():
    explorer = attention_explorer(book=True)
    offered = {name: [value for _, value in control.options]
               for name, control in explorer.controls.items()}  # fmt: skip
    assert offered["sentence"] == list(BOOK_SENTENCES)
    assert offered["query"] == list(range(6))  # every word of the first sentence
    assert offered["heads"] == [1, 2, 8]
    assert offered["scale"] == offered["causal"] == offered["positions"] == [False, True]
    assert {name: control.value for name, control in explorer.controls.items()} == {
        "sentence": "the cat sat on the mat", "query": 2, "heads": 1, "scale": True,
        "causal": False, "positions": True,
    }  # fmt: skip
    assert {part: len(states) for part, states in explorer.states.items()} == {
        "readout": (6 + 9 + 4) * 3 * 8, "matrices": 3 * 3 * 8,
    }  # fmt: skip


@pytest.mark.parametrize("num_heads", HEAD_CHOICES)
def test_the_book_offers_at_least_three_head_counts_with_the_first_one(num_heads):
    offered = book_heads(num_heads)
    assert len(offered) >= 3 and num_heads in offered and set(offered) <= set(HEAD_CHOICES)


def test_a_sentence_of_the_explorers_own_comes_first_in_the_book():
    explorer = AttentionExplorer(sentence="one two three", query=0, book=True,
                                 offer={"heads": (1, 2)})  # fmt: skip
    assert [value for _, value in explorer.controls["sentence"].options] == [
        "one two three",
        *BOOK_SENTENCES,
    ]


def test_the_prepared_sentences_repeat_words_and_differ_in_length():
    words = [sentence.split() for sentence in BOOK_SENTENCES]
    assert max(w.count("the") for w in words) == 3  # "a word three times", in the chapter
    assert sorted(len(w) for w in words) == [4, 6, 9]
    assert all(len(set(w)) < len(w) for w in words)  # every one repeats a word


def test_without_positions_the_two_rows_of_the_are_the_same_in_the_book():
    explorer = AttentionExplorer(book=True, offer={"sentence": BOOK_SENTENCES[:1],
                                                   "heads": (1, 2)})  # fmt: skip
    state = explorer.states["matrices"][(0, 0, 1, 0, 0)]  # one head, scaled, no positions
    rows = state.value.split("<tr><th class=q>")[2:]  # after the keys' row
    assert rows[0].startswith("0 the<td") and rows[4].startswith("4 the<td")
    assert rows[0].split("<td", 1)[1] == rows[4].split("<td", 1)[1]


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
            "HTMLMathModel"} <= rendered.model_names()  # fmt: skip
    assert "<caption>head 4</caption>" in rendered.values(), "the matrices are stored, 4 heads"
    assert rendered.notebook.cells[2].outputs[0].text.startswith("<b>query 2: sat</b>")


def test_the_page_text_keeps_a_contrast_of_4_5_on_the_darkest_weight_in_every_theme():
    from course_lib._html import TEXT_COLOURS, contrast_ratio, rgb
    from course_lib.explorers.attention import MAX_ALPHA, WEIGHT_RGB

    for theme, (text, background) in TEXT_COLOURS.items():
        pairs = zip(rgb(background), WEIGHT_RGB, strict=True)
        shaded = [b * (1 - MAX_ALPHA) + w * MAX_ALPHA for b, w in pairs]
        assert contrast_ratio(rgb(text), shaded) >= 4.5, theme
