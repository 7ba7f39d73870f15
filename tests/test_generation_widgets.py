"""Specification of the explorers of the chapters on the Transformer at work: translation,
decoding and sampling. Core ipywidgets only, checked in kernels with ipywidgets 8 and 7.7;
in the book (``book=True``) each stores the states of its prepared values."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest
import torch
from explorer_checks import assert_book_matches_live

from conftest import render_in_kernel
from course_lib.data import number_split
from course_lib.explorers.at_work import (
    BOOK_BEAM_WIDTHS,
    BOOK_DECODING_NUMBERS,
    BOOK_SEEDS,
    BOOK_TEMPERATURES,
    BOOK_TRANSLATOR_INPUTS,
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


@pytest.fixture(scope="module")
def language_model():
    torch.manual_seed(0)
    vocab = Vocabulary(["the", "fox", "hides"])
    model = DecoderOnlyModel(len(vocab), d_model=16, num_heads=2, num_layers=1, d_ff=32,
                             max_len=20).eval()  # fmt: skip
    return model, vocab


def offered(explorer, name):
    """The values a book explorer's control offers (its first widget's options)."""
    return [value for _, value in explorer.controls[name].options]


# ------------------------------------------------------------------------ reading numbers


def test_read_number_takes_digits_or_english_names():
    assert read_number(" 221 ") == (221, "two hundred twenty-one")
    assert read_number("Two Hundred  Twenty-One") == (221, "two hundred twenty-one")
    assert read_number("10000")[0] is None and "larger than 9999" in read_number("10000")[1]
    assert read_number("twenty one")[0] is None  # the course writes "twenty-one"


def test_rows_of_cross_attention_are_labelled_with_the_token_they_predict():
    assert predicted_labels(["<bos>", "dos", "mil"]) == ["→ dos", "→ mil", "→ <eos>"]


# ------------------------------------------------------------------------ translator


def test_the_translator_explorer_translates_what_is_typed(translator):
    explorer = TranslatorExplorer(translator, "21", book=False)
    assert "veintiuno" in explorer.readout.value and "✓ correct" in explorer.readout.value
    explorer.number.value = "one hundred"
    assert "the rule says <b>cien</b>" in explorer.readout.value  # its one mistake


def test_a_text_that_is_not_a_number_shows_a_clear_message(translator):
    explorer = TranslatorExplorer(translator, "21", book=False)
    explorer.number.value = "hello"
    assert explorer.message.layout.display != "none"
    assert "&#x27;hello&#x27; is not a number from 0 to 9999" in explorer.message.value
    assert "veintiuno" in explorer.readout.value  # the last good reading stays
    explorer.number.value = "12345"
    assert "12345 is larger than 9999" in explorer.message.value
    explorer.number.value = "7"
    assert explorer.message.layout.display == "none" and "siete" in explorer.readout.value


def test_the_translator_stores_a_readout_per_input_and_a_figure_per_layer_and_head(translator):
    explorer = TranslatorExplorer(translator, book=True)
    inputs, layers, heads = (len(offered(explorer, name)) for name in ("number", "layer", "head"))
    assert (inputs, layers, heads) == (len(BOOK_TRANSLATOR_INPUTS), 2, 5)
    assert set(explorer.states["readout"]) == {(i,) for i in range(inputs)}
    assert set(explorer.states["figure"]) == {
        (i, j, k) for i in range(inputs) for j in range(layers) for k in range(heads)
    }


def test_the_books_inputs_show_a_mistake_a_held_out_number_and_an_english_name(translator):
    explorer = TranslatorExplorer(translator, book=True, offer={"layer": [1], "head": [-1]})
    assert offered(explorer, "number")[0] == "2534"
    readouts = [state.value for state in explorer.states["readout"].values()]
    assert any("✗ the rule says <b>cien</b>" in text for text in readouts)
    assert any("held out" in text for text in readouts)
    assert any(not text.isdigit() for text in offered(explorer, "number"))
    assert any(n in number_split().test for n in map(lambda t: read_number(t)[0],
                                                     BOOK_TRANSLATOR_INPUTS))  # fmt: skip


def test_the_translators_book_states_are_what_it_shows_live(translator):
    assert_book_matches_live(
        lambda book: TranslatorExplorer(translator, "21", book=book,
                                        offer={"number": ["21", "one hundred"],
                                               "layer": [0, 1], "head": [-1, 2]}),
        most=4,
    )  # fmt: skip


# ------------------------------------------------------------------------ decoding


def test_the_decoding_explorer_lists_greedy_steps_and_the_beams(translator):
    explorer = DecodingExplorer(translator, number=1971, beam_width=3, book=False)
    assert "<b>mil 1.000</b>" in explorer.greedy.value
    assert explorer.beams.value.count("<tr><td>") == 3
    assert "mil novecientos setenta y uno" in explorer.beams.value
    explorer.beam_width.value = 1
    assert explorer.beams.value.count("<tr><td>") == 1


def test_the_decoding_explorer_refuses_a_number_or_width_out_of_range(translator):
    with pytest.raises(ValueError, match=r"number must be in 0\.\.9999 and beam_width in 1\.\.8"):
        DecodingExplorer(translator, number=10_000)
    with pytest.raises(ValueError, match="got number=5, beam_width=9"):
        DecodingExplorer(translator, number=5, beam_width=9)


def test_the_decoding_explorer_stores_greedy_per_number_and_beams_per_number_and_width(
    translator,
):
    explorer = DecodingExplorer(translator, book=True)
    numbers, widths = offered(explorer, "number"), offered(explorer, "beam_width")
    assert numbers == list(BOOK_DECODING_NUMBERS) and widths == list(BOOK_BEAM_WIDTHS)
    assert 100 in numbers and explorer.controls["beam_width"].value == 4
    assert set(explorer.states["greedy"]) == {(i,) for i in range(len(numbers))}
    assert len(explorer.states["beams"]) == len(numbers) * len(widths)
    wide = explorer.states["beams"][(numbers.index(7777), widths.index(8))].value
    assert "Beam search, width 8" in wide and wide.count("<tr><td>") == 8


def test_the_decoding_books_states_are_what_it_shows_live(translator):
    assert_book_matches_live(
        lambda book: DecodingExplorer(translator, 21, 2, book=book,
                                      offer={"number": [21, 100], "beam_width": [1, 2]}),
    )  # fmt: skip


# ------------------------------------------------------------------------ sampling


def test_the_sampling_explorer_marks_each_sentence(language_model):
    model, vocab = language_model
    explorer = SamplingExplorer(model, vocab, temperature=1.0, count=5, book=False)
    assert explorer.readout.value.count("<br>") == 5
    sentences = explorer.sentences(1.0, seed=3)
    assert sentences == explorer.sentences(1.0, seed=3) and len(sentences) == 5


def test_another_seed_samples_other_sentences_and_keeps_the_figure(language_model):
    model, vocab = language_model
    explorer = SamplingExplorer(model, vocab, count=5, book=False)
    text, figure = explorer.readout.value, explorer.figure.outputs
    explorer.seed.value = 1
    assert explorer.readout.value != text and "(seed 1;" in explorer.readout.value
    assert explorer.figure.outputs == figure


def test_the_sampling_explorer_stores_sentences_per_temperature_and_seed(language_model):
    model, vocab = language_model
    explorer = SamplingExplorer(model, vocab, count=3, book=True)
    temperatures, seeds = offered(explorer, "temperature"), offered(explorer, "seed")
    assert temperatures == list(BOOK_TEMPERATURES) and seeds == list(BOOK_SEEDS)
    assert explorer.controls["temperature"].value == 1.0
    assert len(explorer.states["readout"]) == len(temperatures) * len(seeds)
    assert set(explorer.states["figure"]) == {(i,) for i in range(len(temperatures))}


def test_the_sampling_books_states_are_what_it_shows_live(language_model):
    model, vocab = language_model
    assert_book_matches_live(
        lambda book: SamplingExplorer(model, vocab, count=3, book=book,
                                      offer={"temperature": [0.5, 1.0], "seed": [0, 2]}),
    )  # fmt: skip


# ------------------------------------------------------------------------ every control


def test_every_control_offers_three_values_in_the_book_with_its_first(translator, language_model):
    model, vocab = language_model
    explorers = [
        (TranslatorExplorer(translator, book=True, offer={"head": [-1, 0, 1]}),
         {"number": "2534", "layer": 1, "head": -1}),
        (DecodingExplorer(translator, book=True), {"number": 1971, "beam_width": 4}),
        (SamplingExplorer(model, vocab, count=2, book=True), {"temperature": 1.0, "seed": 0}),
    ]  # fmt: skip
    for explorer, first in explorers:
        for name, value in first.items():
            values = offered(explorer, name)
            if name != "layer":  # the translator has two decoder layers: both are offered
                assert len(values) >= 3, (name, values)
            assert explorer.controls[name].value == value, name


# ------------------------------------------------------------------------ in a kernel

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
            "OutputModel", "HTMLMathModel"} <= rendered.model_names()  # fmt: skip
    values = rendered.values()
    assert "siete mil ocho" in values and "Beam search, width 2" in values
    assert any(rendered.figures_stored())
    printed = [o.get("text", "") for o in rendered.outputs if o.output_type == "stream"]
    assert printed[-1] == "True\n"


def test_in_the_book_a_stored_figure_stays_within_the_pages_width(language_model):
    model, vocab = language_model
    explorer = SamplingExplorer(model, vocab, count=2, book=True)
    for states in explorer.states.values():
        assert all(state.layout.max_width == "100%" for state in states.values())
