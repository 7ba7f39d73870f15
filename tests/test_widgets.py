"""Specification of the positional-encoding explorer (core ipywidgets only), live and in the
book."""

import matplotlib

matplotlib.use("Agg")

import ipywidgets as widgets
import pytest
from explorer_checks import assert_book_matches_live

from course_lib.explorers.foundations import (
    BOOK_BASES,
    BOOK_D_MODELS,
    BOOK_POSITIONS,
    PositionalEncodingExplorer,
    book_dimensions,
)

CORE_WIDGETS_IN_7_7 = {
    "VBox", "HBox", "IntSlider", "FloatLogSlider", "HTML", "HTMLMath", "Output", "Layout",
}  # fmt: skip
SMALL = {"d_model": (4, 8), "base": (100.0, 10000.0), "position": (0, 2), "dimension": (0, 1)}


def all_widgets(widget):
    yield widget
    for child in getattr(widget, "children", ()):
        yield from all_widgets(child)


def small(book: bool) -> PositionalEncodingExplorer:
    return PositionalEncodingExplorer(
        max_len=16, d_model=8, dimension=1, position=2, book=book, offer=SMALL
    )


@pytest.fixture(scope="module")
def small_book() -> PositionalEncodingExplorer:
    return small(book=True)


def test_explorer_is_a_box_of_core_widgets_available_in_ipywidgets_7_7():
    explorer = PositionalEncodingExplorer()
    assert isinstance(explorer, widgets.VBox)
    used = {type(w).__name__ for w in all_widgets(explorer)} - {"PositionalEncodingExplorer"}
    assert used <= CORE_WIDGETS_IN_7_7


def test_explorer_shows_the_formula_of_the_initial_entry():
    explorer = PositionalEncodingExplorer(d_model=4, position=2, dimension=3, max_len=8)
    assert "<b>PE[2, 3]</b> = cos(2" in explorer.readout.value
    assert "<b>0.9998</b>" in explorer.readout.value


def test_moving_a_slider_redraws_the_readout():
    explorer = PositionalEncodingExplorer(d_model=4, position=2, dimension=0, max_len=8)
    explorer.position.value = 0
    assert "<b>PE[0, 0]</b> = sin(0" in explorer.readout.value
    assert "<b>0.0000</b>" in explorer.readout.value


def test_moving_the_position_leaves_the_figure_as_it_was():
    explorer = PositionalEncodingExplorer(d_model=4, position=2, dimension=0, max_len=8)
    figure = explorer.figure.outputs
    explorer.position.value = 5
    assert explorer.figure.outputs == figure  # the figure does not depend on the position


def test_moving_the_dimension_redraws_the_figure():
    explorer = PositionalEncodingExplorer(d_model=8, position=2, dimension=0, max_len=8)
    figure = explorer.figure.outputs
    explorer.dimension.value = 5
    assert explorer.figure.outputs != figure


def test_the_readout_draws_the_value_as_a_bar_from_the_middle():
    explorer = PositionalEncodingExplorer(d_model=4, position=2, dimension=3, max_len=8)
    assert "left: 80.0px; width: 80.0px" in explorer.readout.value  # cos(2 * 0.01) ~ 1


def test_shrinking_d_model_keeps_the_dimension_inside_the_table():
    explorer = PositionalEncodingExplorer(d_model=32, dimension=30)
    explorer.d_model.value = 8
    assert explorer.dimension.max == 7
    assert explorer.dimension.value <= 7
    assert "/8</sup>" in explorer.readout.value


def test_changing_base_changes_the_wavelength_shown():
    explorer = PositionalEncodingExplorer(d_model=32, dimension=30)
    before = explorer.readout.value
    explorer.base.value = 100.0
    assert explorer.readout.value != before
    assert "100<sup>" in explorer.readout.value


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"d_model": 7}, "d_model must be even"),
        ({"position": 64}, "position must be in 0..63"),
        ({"dimension": -1}, "dimension in 0..31"),
    ],
)
def test_bad_arguments_raise_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PositionalEncodingExplorer(**kwargs)


def test_the_book_offers_the_prepared_values_and_each_size_its_own_dimensions():
    explorer = PositionalEncodingExplorer(max_len=16, d_model=8, dimension=1, book=True,
                                          offer={"base": [10000.0], "position": [10],
                                                 "d_model": [8, 16]})  # fmt: skip
    assert [value for _, value in explorer.controls["position"].options] == [10]
    dimension_menus = explorer.children[0].children[1]  # one slider per d_model, in a Stack
    assert isinstance(dimension_menus, widgets.Stack)
    assert [[v for _, v in s.options] for s in dimension_menus.children] == [
        book_dimensions(8),
        book_dimensions(16),
    ]


def test_the_chapter_offers_at_least_three_values_of_every_slider():
    assert len(BOOK_POSITIONS) >= 3 and len(BOOK_D_MODELS) >= 3 and len(BOOK_BASES) >= 3
    assert all(len(book_dimensions(d)) >= 3 for d in BOOK_D_MODELS)
    assert 6 in book_dimensions(32) and 10 in BOOK_POSITIONS  # the first values


def test_the_book_stores_the_figure_once_per_dimension_size_and_base(small_book):
    assert len(small_book.states["figure"]) == 2 * 2 * 2  # d_model, dimension, base
    assert len(small_book.states["readout"]) == 2 * 2 * 2 * 2  # and the position


def test_every_stored_state_is_what_the_live_explorer_shows_for_its_values(small_book):
    assert_book_matches_live(small, book=small_book)
