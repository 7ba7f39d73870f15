"""Specification of the explorers of the part "Building the Transformer" (core ipywidgets only)."""

from __future__ import annotations

import html

import matplotlib

matplotlib.use("Agg")

import ipywidgets as widgets
import pytest
import torch
from explorer_checks import assert_book_matches_live

from conftest import render_in_kernel, used_widget_types
from course_lib.encoder import EncoderLayer
from course_lib.explorers.building import (
    BOOK_LAYERS,
    DecoderExplorer,
    NormOrderExplorer,
    TokenPathExplorer,
    layer_forward,
    one_thread,
    stack_statistics,
)
from course_lib.transformer import Transformer
from course_lib.vocab import Vocabulary

CORE_WIDGETS_IN_7_7 = {"VBox", "HBox", "Text", "Dropdown", "Checkbox", "HTML", "HTMLMath",
                       "Output", "Layout", "ToggleButtons", "IntSlider"}  # fmt: skip
DIGITS = Vocabulary(list("0123456789"))


def small_model() -> Transformer:
    torch.manual_seed(0)
    return Transformer(len(DIGITS), len(DIGITS), d_model=16, num_heads=2, num_encoder_layers=2,
                       num_decoder_layers=2, d_ff=32, dropout=0.0).eval()  # fmt: skip


def token_explorer(**kwargs) -> TokenPathExplorer:
    model = small_model()
    settings = {"sentence": "3 1 4 1 5", "token": 1, **kwargs}
    return TokenPathExplorer(model.embed_source, model.encoder, DIGITS, **settings)


def decoder_explorer(**kwargs) -> DecoderExplorer:
    settings = {"source": "3 1 4", "target": "4 1 3", "position": 1, **kwargs}
    return DecoderExplorer(small_model(), DIGITS, DIGITS, **settings)


@pytest.mark.parametrize("build", [NormOrderExplorer, token_explorer, decoder_explorer])
def test_explorers_are_boxes_of_core_widgets_available_in_ipywidgets_7_7(build):
    explorer = build()
    assert isinstance(explorer, widgets.VBox)
    used = used_widget_types(explorer)
    assert used <= CORE_WIDGETS_IN_7_7


# ----------------------------------------------------------------------------- statistics


@pytest.mark.parametrize("norm_first", [False, True])
def test_layer_forward_with_residuals_is_the_layer_itself(norm_first):
    layer = EncoderLayer(16, 2, 32, norm_first=norm_first)
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(layer_forward(layer, x), layer(x))


def test_layer_forward_without_residuals_replaces_the_input_by_the_sublayer():
    layer = EncoderLayer(16, 2, 32)
    x = torch.randn(2, 5, 16)
    z = layer.norm1(layer.self_attention(x, x, x)[0])
    expected = layer.norm2(layer.feed_forward(z))
    torch.testing.assert_close(layer_forward(layer, x, residual=False), expected)


def test_post_norm_keeps_the_stream_at_rms_1_and_pre_norm_lets_it_grow():
    post = stack_statistics(6, norm_first=False)
    pre = stack_statistics(6, norm_first=True)
    torch.testing.assert_close(post["rms"], torch.ones(6), atol=1e-3, rtol=0)
    assert (pre["rms"][1:] > pre["rms"][:-1]).all()
    assert post["gradient"].shape == (6,) and (post["gradient"] > 0).all()


def test_statistics_are_repeatable_and_depend_on_the_seed():
    first = stack_statistics(3, norm_first=True, seed=1)
    torch.testing.assert_close(first["gradient"], stack_statistics(3, True, seed=1)["gradient"])
    assert not torch.equal(first["gradient"], stack_statistics(3, True, seed=2)["gradient"])


# ----------------------------------------------------------------------------- explorers


def test_norm_order_explorer_reads_out_the_first_and_last_layer():
    explorer = NormOrderExplorer(num_layers=4)
    stats = explorer.compute("post-norm", 4, True, False)
    assert explorer.readout.value == NormOrderExplorer.describe("post-norm", stats)
    assert "after layer 4" in explorer.readout.value


def test_switching_the_norm_order_sets_each_orders_usual_final_norm():
    explorer = NormOrderExplorer(num_layers=3)
    assert explorer.final_norm.value is False
    explorer.order.value = "pre-norm"
    assert explorer.final_norm.value is True
    assert explorer.readout.value.startswith("<b>pre-norm</b>")


def test_norm_order_explorer_refuses_an_unreasonable_depth():
    with pytest.raises(ValueError, match=r"num_layers must be in 1\.\.48"):
        NormOrderExplorer(num_layers=0)


def test_token_path_has_two_stages_per_layer_and_the_layers_attention():
    explorer = token_explorer()
    names, states, weights = explorer.compute("3 1 4 1 5")
    assert names == ["input", "layer 1: attention", "layer 1: feed-forward",
                     "layer 2: attention", "layer 2: feed-forward"]  # fmt: skip
    assert [tuple(s.shape) for s in states] == [(5, 16)] * 5
    assert [tuple(w.shape) for w in weights] == [(2, 5, 5)] * 2
    with torch.no_grad():
        final = explorer.encoder(explorer.embed(torch.tensor([DIGITS.encode("3 1 4 1 5".split())])))
    torch.testing.assert_close(states[-1], final[0])


def test_token_path_readout_names_the_token_and_the_predicted_labels():
    explorer = token_explorer(predict=lambda states: ["odd"] * states.size(1))
    assert "<b>token 1: 1</b>" in explorer.readout.value
    assert "3&rarr;odd" in explorer.readout.value


def test_a_new_sentence_updates_the_token_choices_and_a_bad_one_shows_a_message():
    explorer = token_explorer()
    explorer.sentence.value = "7 8"
    assert [label for label, _ in explorer.token.options] == ["0: 7", "1: 8"]
    assert "<b>token 1: 8</b>" in explorer.readout.value
    explorer.sentence.value = " "
    assert "must have 1 to 12 tokens, got 0" in explorer.message.value
    assert explorer.message.layout.display != "none"


def test_decoder_explorer_shows_the_next_token_distribution_of_the_position():
    explorer = decoder_explorer()
    probabilities, weights = explorer.compute("3 1 4", "4 1 3")
    assert probabilities.shape == (4, len(DIGITS))
    torch.testing.assert_close(probabilities.sum(-1), torch.ones(4))
    assert weights[0].cross_attention.shape == (1, 2, 4, 3)
    assert (weights[0].self_attention[0, :, 1, 2:] == 0).all()  # causal: position 1
    best = DIGITS.id_to_token(int(probabilities[1].argmax()))
    assert f"most likely next tokens: {best}" in html.unescape(explorer.readout.value)


def test_decoder_explorer_positions_follow_the_target():
    explorer = decoder_explorer()
    explorer.target.value = "9"
    assert [label for label, _ in explorer.position.options] == ["0: <bos>", "1: 9"]


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: token_explorer(token=5), r"token must be in 0\.\.4"),
        (lambda: token_explorer(sentence=" ".join("1" * 13)), "1 to 12 tokens, got 13"),
        (lambda: decoder_explorer(position=4), r"position must be in 0\.\.3"),
    ],
)
def test_bad_arguments_raise_clear_errors(build, message):
    with pytest.raises(ValueError, match=message):
        build()


# ----------------------------------------------------------------------------- in a kernel

KERNEL_CELLS = [
    "import ipywidgets\nprint(ipywidgets.__version__)",
    "from course_lib.explorers.building import NormOrderExplorer\n"
    "explorer = NormOrderExplorer(num_layers=3)\nexplorer",
    "explorer.order.value = 'pre-norm'\nprint(explorer.readout.value[:16])",
]


def test_the_norm_order_explorer_renders_in_a_kernel(tmp_path, widget_kernel):
    rendered = render_in_kernel(KERNEL_CELLS, tmp_path, widget_kernel)
    assert {"VBoxModel", "ToggleButtonsModel", "IntSliderModel",
            "OutputModel"} <= rendered.model_names()  # fmt: skip
    assert any(rendered.figures_stored()), "the explorer's figure is stored in its Output widget"
    assert rendered.notebook.cells[2].outputs[0].text == "<b>pre-norm</b>:\n"


# ----------------------------------------------------------------------------- in the book

TOKEN_SENTENCES = ["5 9", "2 2 7 2"]
"""Prepared sentences of the tests' token explorer (with its first one, "3 1 4 1 5")."""
DECODER_PAIRS = {
    "3 1 4": ["4 1 3", ("4 7 3", "a wrong digit"), ("3 1 4", "not reversed")],
    "8 2": ["2 8"],
    "9 9 9 1 2": ["2 1 9 9 9"],
}
"""Prepared pairs of the tests' decoder explorer, shaped like the chapter's."""


def test_the_norm_order_book_stores_a_figure_and_a_readout_for_each_setting():
    offer = {"order": ["post-norm"], "layers": [2, 3], "residual": [True]}
    explorer = NormOrderExplorer(num_layers=3, book=True, offer=offer)
    keys = {(0, layers, 0, final) for layers in (0, 1) for final in (0, 1)}
    assert set(explorer.states) == {"readout", "figure"}
    assert set(explorer.states["readout"]) == set(explorer.states["figure"]) == keys


def test_the_norm_order_book_shows_what_the_live_explorer_computes():
    offer = {"order": ["post-norm", "pre-norm"], "layers": [3], "final_norm": [False]}
    assert_book_matches_live(lambda book: NormOrderExplorer(num_layers=3, book=book, offer=offer))


def test_the_norm_order_book_offers_three_depths_both_orders_and_both_switch_positions():
    explorer = NormOrderExplorer(num_layers=5, book=False)
    specs = explorer._specs
    assert specs["layers"].book == tuple(sorted({*BOOK_LAYERS, 5}))
    assert len(BOOK_LAYERS) >= 3 and 12 in BOOK_LAYERS and 48 in BOOK_LAYERS
    assert specs["order"].book == ("post-norm", "pre-norm")
    assert specs["residual"].book == specs["final_norm"].book == (False, True)


def test_the_norm_order_computes_each_setting_once():
    explorer = NormOrderExplorer(num_layers=2)
    first = explorer.compute("pre-norm", 2, True, True)
    assert explorer.compute("pre-norm", 2, True, True) is first


def test_one_thread_runs_torch_on_one_thread_and_gives_the_threads_back():
    threads = torch.get_num_threads()
    with one_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == threads


def test_the_token_book_stores_one_state_per_token_of_each_prepared_sentence():
    explorer = token_explorer(prepared=TOKEN_SENTENCES, book=True)
    expected = {(0, i) for i in range(5)} | {(1, i) for i in range(2)} | {(2, i) for i in range(4)}
    assert set(explorer.states["readout"]) == set(explorer.states["figure"]) == expected
    menus = explorer._book.controls["token"]
    assert [label for label, _ in menus[(1,)].options] == ["0: 5", "1: 9"]
    assert menus[(0,)].index == 1  # the explorer's first token


def test_the_token_book_shows_what_the_live_explorer_computes():
    assert_book_matches_live(lambda **mode: token_explorer(prepared=TOKEN_SENTENCES, **mode))


def test_the_token_book_offers_the_first_sentence_and_the_prepared_ones():
    explorer = token_explorer(prepared=["2 2 7 2", "3  1 4 1 5", "5 9"], book=True)
    sentences = [value for _, value in explorer.controls["sentence"].options]
    assert sentences == ["3 1 4 1 5", "2 2 7 2", "5 9"]  # the first one once, first


def test_a_prepared_sentence_the_encoder_cannot_read_is_refused():
    with pytest.raises(ValueError, match="1 to 12 tokens, got 0"):
        token_explorer(prepared=["  "])


def test_the_decoder_book_stores_every_position_of_every_prepared_pair():
    explorer = decoder_explorer(pairs=DECODER_PAIRS, book=True)
    expected = (
        {(0, target, position) for target in range(3) for position in range(4)}
        | {(1, 0, position) for position in range(3)}
        | {(2, 0, position) for position in range(6)}
    )
    assert set(explorer.states["readout"]) == set(explorer.states["figure"]) == expected


def test_the_decoder_book_offers_the_targets_of_the_chosen_source_with_their_notes():
    explorer = decoder_explorer(pairs=DECODER_PAIRS, book=True)
    targets = explorer._book.controls["target"]
    assert [label for label, _ in targets[(0,)].options] == [
        "4 1 3", "4 7 3 (a wrong digit)", "3 1 4 (not reversed)"]  # fmt: skip
    assert [value for _, value in targets[(1,)].options] == ["2 8"]
    positions = explorer._book.controls["position"]
    assert [label for label, _ in positions[(1,)].options] == ["0 <bos>", "1", "2"]
    assert positions[(0,)].index == 1  # the explorer's first position
    assert [value for _, value in explorer.controls["source"].options] == list(DECODER_PAIRS)


def test_the_decoder_book_shows_what_the_live_explorer_computes():
    assert_book_matches_live(lambda **mode: decoder_explorer(pairs=DECODER_PAIRS, **mode), most=8)


def test_the_decoder_refuses_targets_of_one_source_with_different_lengths():
    with pytest.raises(ValueError, match="same number of tokens"):
        decoder_explorer(pairs={"3 1 4": ["4 1 3", "4 1"]})


@pytest.mark.parametrize(
    "build, counts, first",
    [
        (
            lambda: token_explorer(prepared=TOKEN_SENTENCES, book=True),
            {"sentence": 3, "token": 5},
            {"sentence": "3 1 4 1 5", "token": 1},
        ),
        (
            lambda: decoder_explorer(pairs=DECODER_PAIRS, book=True),
            {"source": 3, "target": 3, "position": 4},
            {"source": "3 1 4", "target": "4 1 3", "position": 1},
        ),
    ],
)
def test_every_book_control_offers_at_least_three_values_first_the_first_one(build, counts, first):
    explorer = build()
    for name, control in explorer.controls.items():  # the menus of the first sentence or pair
        assert len(control.options) == counts[name] >= 3, name
        assert control.value == first[name], name


def test_a_typed_target_the_decoder_cannot_read_shows_a_message_live():
    explorer = decoder_explorer()
    shown = explorer.readout.value
    explorer.target.value = " ".join("1" * 13)
    assert "the sentence must have 1 to 12 tokens, got 13" in explorer.message.value
    assert explorer.message.layout.display != "none"
    assert explorer.readout.value == shown  # the last good state stays
    explorer.target.value = "4 1 3"
    assert explorer.message.layout.display == "none"


def test_the_live_decoder_position_follows_the_typed_target_and_keeps_its_place():
    explorer = decoder_explorer(position=3)
    explorer.target.value = "4 1"
    assert explorer.position.value == 2
    assert "<b>position 2</b> reads &lt;bos&gt; 4 1" in explorer.readout.value


def test_the_books_readouts_take_the_page_width_not_the_controls():
    explorer = token_explorer(prepared=["5 9"], book=True)
    stacks = [explorer.parts["readout"], *explorer.parts["readout"].children]
    assert all(stack.layout.max_width is None for stack in stacks)
    assert explorer.controls["sentence"].layout.max_width == "340px"
