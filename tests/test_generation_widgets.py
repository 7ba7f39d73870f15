"""Specification of the explorers of the chapters on the Transformer at work: translation,
decoding and sampling. Core ipywidgets only, checked in kernels with ipywidgets 8 and 7.7."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import nbformat
import pytest
import torch
from nbclient import NotebookClient

from course_lib.families import DecoderOnlyModel
from course_lib.generation_widgets import (
    DecodingExplorer,
    SamplingExplorer,
    TranslatorExplorer,
    predicted_labels,
    read_number,
)
from course_lib.translation import load_number_translator
from course_lib.vocab import Vocabulary

WIDGETS_7 = Path(sys.prefix) / "ipywidgets-7.7"  # installed by `tasks.py setup`
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


@pytest.fixture(scope="module")
def translator():
    torch.set_num_threads(1)
    return load_number_translator()


def test_read_number_takes_digits_or_english_names():
    assert read_number(" 221 ") == (221, "two hundred twenty-one")
    assert read_number("Two Hundred  Twenty-One") == (221, "two hundred twenty-one")
    assert read_number("10000")[0] is None and "larger than 9999" in read_number("10000")[1]
    assert read_number("twenty one")[0] is None  # the course writes "twenty-one"


def test_rows_of_cross_attention_are_labelled_with_the_token_they_predict():
    assert predicted_labels(["<bos>", "dos", "mil"]) == ["→ dos", "→ mil", "→ <eos>"]


def test_the_translator_explorer_translates_what_is_typed(translator):
    explorer = TranslatorExplorer(translator, "21")
    assert "veintiuno" in explorer.readout.value and "✓ correct" in explorer.readout.value
    explorer.number.value = "one hundred"
    assert "the rule says <b>cien</b>" in explorer.readout.value  # its one mistake
    explorer.number.value = "hello"
    assert "is not a number from 0 to 9999" in explorer.readout.value


def test_the_decoding_explorer_lists_greedy_steps_and_the_beams(translator):
    explorer = DecodingExplorer(translator, number=1971, beam_width=3)
    assert "<b>mil 1.000</b>" in explorer.greedy.value
    assert explorer.beams.value.count("<tr><td>") == 3
    assert "mil novecientos setenta y uno" in explorer.beams.value
    explorer.beam_width.value = 1
    assert explorer.beams.value.count("<tr><td>") == 1


def test_the_sampling_explorer_marks_each_sentence():
    torch.manual_seed(0)
    vocab = Vocabulary(["the", "fox", "hides"])
    model = DecoderOnlyModel(len(vocab), d_model=16, num_heads=2, num_layers=1, d_ff=32,
                             max_len=20).eval()  # fmt: skip
    explorer = SamplingExplorer(model, vocab, temperature=1.0, count=5)
    assert explorer.readout.value.count("<br>") == 5
    sentences = explorer.sentences(1.0, seed=3)
    assert sentences == explorer.sentences(1.0, seed=3) and len(sentences) == 5


KERNEL_CELLS = [
    "import ipywidgets; print(ipywidgets.__version__)",
    "import torch\n"
    "torch.set_num_threads(1)\n"
    "from course_lib.translation import load_number_translator\n"
    "from course_lib.generation_widgets import TranslatorExplorer, DecodingExplorer\n"
    "translator = load_number_translator()",
    "words = TranslatorExplorer(translator, '2534')\nwords",
    "DecodingExplorer(translator, number=1971, beam_width=2)",
    "words.number.value = '7008'\nprint('siete mil ocho' in words.readout.value)",
]


def run_in_kernel(tmp_path: Path) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in KERNEL_CELLS])
    client = NotebookClient(notebook, kernel_name="python3", timeout=180, store_widget_state=True,
                            resources={"metadata": {"path": str(tmp_path)}})  # fmt: skip
    client.execute()
    return notebook


def check_rendered(notebook, controls_version: str) -> None:
    outputs = [o for cell in notebook.cells for o in cell.outputs]
    errors = [o for o in outputs if o.output_type == "error"]
    assert not errors, errors[0].evalue if errors else ""
    views = [o.data[WIDGET_VIEW] for o in outputs if WIDGET_VIEW in o.get("data", {})]
    assert len(views) == 2
    models = notebook.metadata["widgets"][WIDGET_STATE]["state"]
    assert all(view["model_id"] in models for view in views)
    names = {m["model_name"] for m in models.values()}
    assert {"TextModel", "DropdownModel", "BoundedIntTextModel", "IntSliderModel",
            "OutputModel", "HTMLModel"} <= names  # fmt: skip
    versions = {m["model_module_version"] for m in models.values()
                if m["model_module"] == "@jupyter-widgets/controls"}  # fmt: skip
    assert versions == {controls_version}
    values = json.dumps([m["state"].get("value") for m in models.values()])
    assert "siete mil ocho" in values and "Beam search, width 2" in values
    drawn = [m for m in models.values() if m["model_name"] == "OutputModel"]
    assert any(
        any("image/png" in out.get("data", {}) for out in m["state"]["outputs"]) for m in drawn
    )
    printed = [o.get("text", "") for o in outputs if o.output_type == "stream"]
    assert printed[-1] == "True\n"


def test_the_explorers_render_in_a_kernel_with_ipywidgets_8(tmp_path):
    notebook = run_in_kernel(tmp_path)
    assert notebook.cells[0].outputs[0].text.startswith("8.")
    check_rendered(notebook, controls_version="2.0.0")


def test_the_explorers_render_in_a_kernel_with_ipywidgets_7_7_as_on_colab(tmp_path, monkeypatch):
    assert (WIDGETS_7 / "ipywidgets").is_dir(), (
        f"{WIDGETS_7} is missing: run `python3 tasks.py setup` (it installs ipywidgets 7.7 there)"
    )
    monkeypatch.setenv("PYTHONPATH", str(WIDGETS_7))
    notebook = run_in_kernel(tmp_path)
    assert notebook.cells[0].outputs[0].text == "7.7.1\n"
    check_rendered(notebook, controls_version="1.5.0")
