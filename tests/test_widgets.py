"""Specification of the positional-encoding explorer (core ipywidgets only)."""

import matplotlib

matplotlib.use("Agg")

import ipywidgets as widgets
import pytest

from course_lib.explorers.foundations import PositionalEncodingExplorer

CORE_WIDGETS_IN_7_7 = {
    "VBox", "HBox", "IntSlider", "FloatLogSlider", "HTML", "Output", "Layout",
}  # fmt: skip


def all_widgets(widget):
    yield widget
    for child in getattr(widget, "children", ()):
        yield from all_widgets(child)


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
