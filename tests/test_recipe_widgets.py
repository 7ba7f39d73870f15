"""Specification of the explorer of the chapter on the paper's training recipe. Core ipywidgets
only, checked in kernels with ipywidgets 8 and 7.7."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from conftest import render_in_kernel
from course_lib.explorers.at_work import RecipeExplorer


def test_the_readout_gives_the_peak_the_target_and_the_lowest_loss():
    explorer = RecipeExplorer(d_model=512, warmup_steps=4000, epsilon=0.1, num_classes=10)
    text = explorer.readout.value
    assert "6.99e-04</b> at step 4000" in text
    assert "<b>0.910</b> on the label" in text and "<b>0.0100</b> on each of the other 9" in text
    assert "lowest possible loss <b>0.500</b>" in text


def test_moving_a_control_updates_the_readout():
    explorer = RecipeExplorer()
    explorer.warmup.value = 1000
    assert "at step 1000" in explorer.readout.value
    explorer.epsilon.value = 0.0
    assert "<b>1.000</b> on the label" in explorer.readout.value
    assert "lowest possible loss <b>0.000</b>" in explorer.readout.value


def test_the_controls_use_the_books_symbols_and_reach_a_real_vocabulary():
    explorer = RecipeExplorer()
    assert "$\\epsilon_{ls}$" in explorer.epsilon.description
    assert "$|\\mathcal{V}|$" in explorer.num_classes.description
    assert "$d_{\\text{model}}$" == explorer.d_model.description
    assert explorer.num_classes.max >= 64  # above the 53 Spanish tokens of the chapter
    explorer.num_classes.value = 64
    assert "on each of the other 63" in explorer.readout.value


KERNEL_CELLS = [
    "import ipywidgets; print(ipywidgets.__version__)",
    "from course_lib.explorers.at_work import RecipeExplorer\n"
    "explorer = RecipeExplorer()\nexplorer",
    "explorer.d_model.value = 64\nprint('at step 4000' in explorer.readout.value)",
]


def test_the_explorer_renders_in_a_kernel(tmp_path, widget_kernel):
    rendered = render_in_kernel(KERNEL_CELLS, tmp_path, widget_kernel)
    assert len(rendered.views) == 1
    assert {
        "DropdownModel",
        "IntSliderModel",
        "FloatSliderModel",
        "OutputModel",
        "HTMLModel",
    } <= rendered.model_names()
    assert any(rendered.figures_stored())
    printed = [o.get("text", "") for o in rendered.outputs if o.output_type == "stream"]
    assert printed[-1] == "True\n"
