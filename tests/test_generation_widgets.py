"""Specification of the explorers of the chapters on the Transformer at work: translation,
decoding and sampling. Core ipywidgets only, checked in kernels with ipywidgets 8 and 7.7."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest
import torch

from conftest import render_in_kernel
from course_lib.explorers.at_work import (
    DecodingExplorer,
    SamplingExplorer,
    TranslatorExplorer,
    predicted_labels,
    read_number,
)
from course_lib.families import DecoderOnlyModel
from course_lib.translation import load_number_translator
from course_lib.vocab import Vocabulary


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
    "from course_lib.explorers.at_work import TranslatorExplorer, DecodingExplorer\n"
    "translator = load_number_translator()",
    "words = TranslatorExplorer(translator, '2534')\nwords",
    "DecodingExplorer(translator, number=1971, beam_width=2)",
    "words.number.value = '7008'\nprint('siete mil ocho' in words.readout.value)",
]


def test_the_explorers_render_in_a_kernel(tmp_path, widget_kernel):
    rendered = render_in_kernel(KERNEL_CELLS, tmp_path, widget_kernel)
    assert len(rendered.views) == 2
    assert {"TextModel", "DropdownModel", "BoundedIntTextModel", "IntSliderModel",
            "OutputModel", "HTMLModel"} <= rendered.model_names()  # fmt: skip
    values = rendered.values()
    assert "siete mil ocho" in values and "Beam search, width 2" in values
    assert any(rendered.figures_stored())
    printed = [o.get("text", "") for o in rendered.outputs if o.output_type == "stream"]
    assert printed[-1] == "True\n"
