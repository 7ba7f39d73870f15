"""Specification of the explorer of the chapter on the paper's training recipe. Core ipywidgets
only, checked in kernels with ipywidgets 8 and 7.7; in the book (``book=True``) it stores the
states of its prepared values, all of them HTML (charts in SVG), so that they cost little time
when the chapter is executed."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest
from explorer_checks import assert_book_matches_live

from conftest import render_in_kernel
from course_lib.explorers.at_work import (
    BOOK_CLASSES,
    BOOK_EPSILONS,
    BOOK_WARMUPS,
    RecipeExplorer,
    schedule_chart,
    target_chart,
)


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


def test_the_charts_are_svg_in_the_texts_colour_with_a_bar_per_class():
    chart = target_chart(0.1, 12)
    assert chart.startswith("<svg") and "currentColor" in chart
    assert chart.count("<rect") == 12
    line = schedule_chart(512, 4000)
    assert line.count("<polyline") == 2  # this schedule and the paper's base model
    assert "$" not in line + chart  # no maths for MathJax inside the charts


def test_the_schedules_axis_reaches_the_higher_peak():
    assert ">7.0e-04<" in schedule_chart(512, 4000)
    assert ">2.0e-03<" in schedule_chart(256, 1000)  # (256 x 1000)^-0.5, above the base's
    assert ">7.0e-04<" in schedule_chart(1024, 8000)  # the base's peak, above this one


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
    assert models == [64, 128, 256, 512, 1024] and warmups == list(BOOK_WARMUPS)
    assert epsilons == list(BOOK_EPSILONS) and classes == list(BOOK_CLASSES)
    assert set(explorer.states["schedule"]) == {
        (i, j) for i in range(len(models)) for j in range(len(warmups))
    }
    assert set(explorer.states["target"]) == {
        (i, j) for i in range(len(epsilons)) for j in range(len(classes))
    }
    one_hot = explorer.states["target"][(0, classes.index(64))].value
    assert "lowest possible loss <b>0.000</b>" in one_hot


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
    } <= rendered.model_names()
    assert "<svg" in rendered.values()
    printed = [o.get("text", "") for o in rendered.outputs if o.output_type == "stream"]
    assert printed[-1] == "True\n"


def test_in_the_book_a_text_part_is_not_squeezed_to_a_controls_width():
    explorer = RecipeExplorer(book=True)
    control = explorer.controls["warmup"].layout.max_width
    for name in ("schedule", "target"):
        root = explorer.parts[name]
        assert root.layout.max_width != control and root.children[0].layout.max_width != control
