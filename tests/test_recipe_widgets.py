"""Specification of the explorer of the chapter on the paper's training recipe. Core ipywidgets
only, checked in kernels with ipywidgets 8 and 7.7; in the book (``book=True``) it stores the
states of its prepared values: a readout and a figure for the schedule per width and warm-up,
and for the smoothed target per rate and number of classes."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest
from explorer_checks import assert_book_matches_live

from conftest import render_in_kernel
from course_lib.explorers.at_work import (
    BOOK_CLASSES,
    BOOK_D_MODELS,
    BOOK_EPSILONS,
    BOOK_WARMUPS,
    RecipeExplorer,
    schedule_figure,
    target_figure,
)
from course_lib.plotting import figure_text_sizes


def offered(explorer, name):
    return [value for _, value in explorer.controls[name].options]


def test_the_readouts_give_the_peak_the_target_and_the_lowest_loss():
    explorer = RecipeExplorer(d_model=512, warmup_steps=4000, epsilon=0.1, num_classes=10)
    assert "6.99e-04</b> at step 4000" in explorer.schedule.value
    text = explorer.target.value
    assert "<b>0.910</b> on the label" in text and "<b>0.0100</b> on each of the other 9" in text
    assert "lowest possible loss <b>0.500</b>" in text


def test_moving_a_control_updates_its_readout_only():
    explorer = RecipeExplorer(book=False)
    target = explorer.target.value
    explorer.warmup.value = 1000
    assert "at step 1000" in explorer.schedule.value and explorer.target.value == target
    schedule = explorer.schedule.value
    explorer.epsilon.value = 0.0
    assert "<b>1.000</b> on the label" in explorer.target.value
    assert "lowest possible loss <b>0.000</b>" in explorer.target.value
    assert explorer.schedule.value == schedule


def test_the_controls_use_the_books_symbols_and_reach_a_real_vocabulary():
    explorer = RecipeExplorer(book=False)
    assert "$\\epsilon_{ls}$" in explorer.epsilon.description
    assert "$|\\mathcal{V}|$" in explorer.num_classes.description
    assert "$d_{\\text{model}}$" == explorer.d_model.description
    assert explorer.num_classes.max >= 64  # above the 53 Spanish tokens of the chapter
    explorer.num_classes.value = 64
    assert "on each of the other 63" in explorer.target.value


def test_the_target_figure_has_a_bar_per_class_and_writes_both_values():
    figure = target_figure(0.1, 12)
    (ax,) = figure.axes
    assert len(ax.patches) == 12
    assert any("label 0.908, others 0.0083 each" == t.text for t in figure_text_sizes(figure))


def test_the_schedule_figure_draws_the_schedule_beside_the_papers_base():
    (ax,) = schedule_figure(256, 1000).axes
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels[:2] == ["the paper's base (512, 4000)", "256, 1000"]
    peak = max(ax.get_lines()[1].get_ydata())
    assert peak == pytest.approx((256 * 1000) ** -0.5, rel=1e-3)


@pytest.mark.parametrize(
    "kwargs, message",
    [({"warmup_steps": 50}, "warmup_steps must be in 100..10000"),
     ({"epsilon": 0.7}, "epsilon in 0..0.5"), ({"num_classes": 1}, "num_classes in 2..64")],
)  # fmt: skip
def test_settings_out_of_the_controls_range_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RecipeExplorer(**kwargs)


def test_the_book_stores_the_schedule_per_width_and_warmup_and_the_target_per_rate_and_size():
    explorer = RecipeExplorer(book=True)
    models, warmups = offered(explorer, "d_model"), offered(explorer, "warmup")
    epsilons, classes = offered(explorer, "epsilon"), offered(explorer, "num_classes")
    assert models == list(BOOK_D_MODELS) and warmups == list(BOOK_WARMUPS)
    assert epsilons == list(BOOK_EPSILONS) and classes == list(BOOK_CLASSES)
    for part in ("schedule", "schedule_plot"):
        assert set(explorer.states[part]) == {
            (i, j) for i in range(len(models)) for j in range(len(warmups))
        }
    for part in ("target", "target_plot"):
        assert set(explorer.states[part]) == {
            (i, j) for i in range(len(epsilons)) for j in range(len(classes))
        }
    one_hot = explorer.states["target"][(0, classes.index(64))].value
    assert "lowest possible loss <b>0.000</b>" in one_hot


def test_live_the_width_menu_offers_more_than_the_book():
    assert [value for _, value in RecipeExplorer().d_model.options] == [64, 128, 256, 512, 1024]


def test_every_control_offers_three_values_in_the_book_with_its_first():
    explorer = RecipeExplorer(d_model=256, warmup_steps=3000, epsilon=0.15, num_classes=7,
                              book=True)  # fmt: skip
    first = {"d_model": 256, "warmup": 3000, "epsilon": 0.15, "num_classes": 7}
    for name, value in first.items():
        assert len(offered(explorer, name)) >= 3 and explorer.controls[name].value == value


def test_the_books_states_are_what_it_shows_live():
    assert_book_matches_live(
        lambda book: RecipeExplorer(book=book, offer={"d_model": [128, 512],
                                                      "warmup": [1000, 4000],
                                                      "epsilon": [0.0, 0.1],
                                                      "num_classes": [10, 64]}),
    )  # fmt: skip


KERNEL_CELLS = [
    "import ipywidgets; print(ipywidgets.__version__)",
    "from course_lib.explorers.at_work import RecipeExplorer\n"
    "explorer = RecipeExplorer()\nexplorer",
    "explorer.d_model.value = 64\nprint('at step 4000' in explorer.schedule.value)",
]


def test_the_explorer_renders_in_a_kernel(tmp_path, widget_kernel):
    rendered = render_in_kernel(KERNEL_CELLS, tmp_path, widget_kernel)
    assert len(rendered.views) == 1
    assert {
        "DropdownModel",
        "IntSliderModel",
        "FloatSliderModel",
        "HTMLMathModel",
        "OutputModel",
    } <= rendered.model_names()
    assert any(rendered.figures_stored()), "the figures are stored in their Output widgets"
    printed = [o.get("text", "") for o in rendered.outputs if o.output_type == "stream"]
    assert printed[-1] == "True\n"
