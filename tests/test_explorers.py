"""Specification of the explorers of the opening chapters: discretization, word neighbours and
the word map over training epochs. Core ipywidgets only, checked in kernels with ipywidgets 8
and 7.7 (Colab's); built for the book, each stores a state for every value its controls offer,
and those states are what the live explorer shows."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import ipywidgets as widgets
import matplotlib.pyplot as plt
import pytest
import torch
from explorer_checks import assert_book_matches_live

from conftest import render_in_kernel, used_widget_types
from course_lib.data import WORD_CLASSES, synthetic_grammar_corpus
from course_lib.discretize import synthetic_signal
from course_lib.explorers.foundations import (
    BOOK_FRAME_LENGTHS,
    BOOK_NEIGHBOURS,
    BOOK_VOCAB_SIZES,
    DiscretizationExplorer,
    WordMapExplorer,
    WordNeighboursExplorer,
    book_epochs,
)
from course_lib.vocab import Vocabulary
from course_lib.word2vec import train_word2vec

CORE_WIDGETS_IN_7_7 = {
    "VBox", "HBox", "HTML", "HTMLMath", "Output", "Dropdown", "IntSlider", "SelectionSlider",
}  # fmt: skip


def offered(explorer, control):
    """The values a book explorer's control offers (its first widget's options)."""
    return [value for _, value in explorer.controls[control].options]


def a_blank_figure(*_, **__):
    """Stands in for a figure part's drawing where a test looks only at the book's keys."""
    return plt.figure(figsize=(1, 1))


@pytest.fixture(scope="module")
def corpus():
    sentences = synthetic_grammar_corpus(400)
    vocab = Vocabulary.from_corpus(sentences)
    return vocab, [vocab.encode(sentence) for sentence in sentences]


@pytest.fixture(scope="module")
def runs(corpus):
    vocab, ids = corpus
    kwargs = {"epochs": 3, "snapshot_every": 1, "batch_size": 512, "lr": 0.05}
    return {
        "skip-gram": train_word2vec(ids, len(vocab), **kwargs),
        "CBOW": train_word2vec(ids, len(vocab), method="cbow", **kwargs),
    }


# --- discretization ---------------------------------------------------------------------------


def test_discretization_explorer_uses_core_widgets_of_ipywidgets_7_7():
    explorer = DiscretizationExplorer(synthetic_signal(1000))
    assert used_widget_types(explorer) <= CORE_WIDGETS_IN_7_7


def test_discretization_readout_counts_tokens_and_gives_the_snr():
    explorer = DiscretizationExplorer(synthetic_signal(1000), vocab_size=16, frame_length=40)
    # 1000 samples, frames of 40 with hop 20: 1 + (1000 - 40) // 20 = 49 tokens
    assert "<b>49 tokens</b>" in explorer.readout.value
    assert "vocabulary of <b>16</b> (4 bits per token)" in explorer.readout.value
    assert "SNR <b>" in explorer.readout.value


def test_a_larger_vocabulary_reconstructs_better():
    explorer = DiscretizationExplorer(synthetic_signal(1000))
    snr = [explorer.tokens(k, 20)[2] for k in (2, 8, 32)]
    assert snr == sorted(snr)


def test_moving_the_vocabulary_slider_redraws_the_readout_and_caches_the_codebook():
    explorer = DiscretizationExplorer(synthetic_signal(1000))
    explorer.vocab_size.value = 4
    assert "vocabulary of <b>4</b>" in explorer.readout.value
    ids, rebuilt, _ = explorer.tokens(4, 40)
    assert ids.max() < 4 and rebuilt.shape == (1000,)
    assert explorer.tokens(4, 40)[0] is ids  # the second time comes from the cache


def test_the_readout_counts_the_bits_of_the_token_ids_against_the_samples():
    explorer = DiscretizationExplorer(synthetic_signal(1000), vocab_size=16, frame_length=40)
    # 49 tokens of 4 bits; the samples as float32: 1000 * 32 bits
    assert "in all <b>196 bits</b> of token ids" in explorer.readout.value
    assert "32-bit floats: 32,000 bits" in explorer.readout.value


def test_one_bit_per_token_is_said_in_the_singular():
    explorer = DiscretizationExplorer(synthetic_signal(1000), vocab_size=2, frame_length=40)
    assert "vocabulary of <b>2</b> (1 bit per token)" in explorer.readout.value


def test_in_the_book_the_texts_are_as_wide_as_the_page_not_as_the_controls(runs, corpus):
    vocab, _ = corpus
    explorer = WordMapExplorer(runs, vocab, WORD_CLASSES, book=True, offer={"epoch": (0, 3)})
    stacks = [explorer.parts["readout"], *explorer.parts["readout"].children]
    assert all(stack.layout.max_width is None and stack.layout.width == "100%" for stack in stacks)
    assert explorer.controls["epoch"].layout.max_width == "340px"


def test_the_discretization_figure_names_its_setting_and_snr():
    explorer = DiscretizationExplorer(synthetic_signal(1000))
    figure = explorer.draw(4, 20)
    snr = explorer.tokens(4, 20)[2]
    assert figure.axes[0].get_title() == f"k = 4, frames of 20 samples: SNR {snr:.1f} dB"
    assert figure.axes[1].get_ylim() == (-0.5, 3.5)  # every token id of the vocabulary
    plt.close(figure)


def test_the_book_stores_a_readout_and_a_figure_per_vocabulary_and_frame_length():
    offer = {"vocab_size": (2, 16), "frame_length": (20, 40)}
    explorer = DiscretizationExplorer(synthetic_signal(1000), book=True, offer=offer)
    keys = {(i, j) for i in range(2) for j in range(2)}
    assert set(explorer.states["readout"]) == set(explorer.states["figure"]) == keys
    assert explorer.state_values("figure", (0, 1)) == {"vocab_size": 2, "frame_length": 40}
    assert "vocabulary of <b>2</b>" in explorer.states["readout"][0, 1].value


def test_the_discretization_book_shows_what_the_live_explorer_computes():
    offer = {"vocab_size": (4, 16, 64), "frame_length": (20, 40)}
    assert_book_matches_live(
        lambda book: DiscretizationExplorer(synthetic_signal(1000), book=book, offer=offer)
    )


def test_the_discretization_book_offers_every_vocabulary_and_frame_length(monkeypatch):
    monkeypatch.setattr(DiscretizationExplorer, "draw", a_blank_figure)
    explorer = DiscretizationExplorer(synthetic_signal(1000), book=True)
    assert offered(explorer, "vocab_size") == list(BOOK_VOCAB_SIZES) == [2, 4, 8, 16, 32, 64, 128]
    assert offered(explorer, "frame_length") == list(BOOK_FRAME_LENGTHS) == [10, 20, 40, 80]
    assert (explorer.controls["vocab_size"].value, explorer.controls["frame_length"].value) == (
        16, 40,
    )  # fmt: skip


def test_the_discretization_book_offers_the_first_values_and_at_least_three(monkeypatch):
    monkeypatch.setattr(DiscretizationExplorer, "draw", a_blank_figure)
    explorer = DiscretizationExplorer(
        synthetic_signal(1000), vocab_sizes=(3, 5, 16), frame_lengths=(12, 40, 100),
        vocab_size=5, frame_length=12, book=True,
    )  # fmt: skip
    # too few of the book's values among the choices: all the choices are offered
    assert offered(explorer, "vocab_size") == [3, 5, 16]
    assert offered(explorer, "frame_length") == [12, 40, 100]
    assert explorer.controls["vocab_size"].value == 5


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"vocab_size": 5}, "vocab_size must be one of"),
        ({"frame_lengths": (10, 15), "frame_length": 10}, "frame lengths must be even"),
    ],
)
def test_discretization_explorer_refuses_bad_settings(kwargs, error):
    with pytest.raises(ValueError, match=error):
        DiscretizationExplorer(synthetic_signal(1000), **kwargs)


def test_discretization_explorer_refuses_a_signal_that_is_not_1d():
    with pytest.raises(ValueError, match="signal must be a 1-D floating-point tensor"):
        DiscretizationExplorer(torch.zeros(2, 100))


# --- nearest neighbours -----------------------------------------------------------------------


def test_neighbours_explorer_uses_core_widgets(runs, corpus):
    vocab, _ = corpus
    tables = {name: result.embeddings for name, result in runs.items()}
    assert used_widget_types(WordNeighboursExplorer(tables, vocab, WORD_CLASSES)) <= (
        CORE_WIDGETS_IN_7_7
    )


def test_neighbours_table_lists_k_words_with_their_class_and_similarity(runs, corpus):
    vocab, _ = corpus
    tables = {name: result.embeddings for name, result in runs.items()}
    explorer = WordNeighboursExplorer(tables, vocab, WORD_CLASSES, word="cat", k=3)
    assert explorer.table.value.count("<tr><td>") == 3
    assert "<b>cat</b> (animal), skip-gram" in explorer.table.value
    explorer.k.value = 6
    assert explorer.table.value.count("<tr><td>") == 6


def test_choosing_another_word_or_table_updates_the_neighbours(runs, corpus):
    vocab, _ = corpus
    tables = {name: result.embeddings for name, result in runs.items()}
    explorer = WordNeighboursExplorer(tables, vocab, WORD_CLASSES, word="cat")
    explorer.word.value = "bread"
    assert "<b>bread</b> (food), skip-gram" in explorer.table.value
    explorer.model.value = "CBOW"
    assert "<b>bread</b> (food), CBOW" in explorer.table.value


def test_the_word_menu_names_each_words_class(runs, corpus):
    vocab, _ = corpus
    explorer = WordNeighboursExplorer({"w": runs["CBOW"].embeddings}, vocab, WORD_CLASSES)
    labels = [label for label, _ in explorer.word.options]
    assert "cat (animal)" in labels and "red (colour)" in labels


def test_neighbours_explorer_refuses_a_table_of_the_wrong_size(corpus):
    vocab, _ = corpus
    with pytest.raises(ValueError, match=r"must have shape \(len\(vocab\), dim\)"):
        WordNeighboursExplorer({"bad": torch.zeros(3, 4)}, vocab, WORD_CLASSES)


def test_neighbours_explorer_refuses_an_unknown_word(runs, corpus):
    vocab, _ = corpus
    with pytest.raises(ValueError, match="word must be a word of the vocabulary, got 'zebra'"):
        WordNeighboursExplorer({"w": runs["CBOW"].embeddings}, vocab, WORD_CLASSES, word="zebra")


def test_the_bar_and_class_of_a_neighbour_are_green_in_its_class_and_red_outside(runs, corpus):
    from course_lib._html import color

    vocab, _ = corpus
    explorer = WordNeighboursExplorer({"w": runs["CBOW"].embeddings}, vocab, WORD_CLASSES)
    html = explorer.describe("w", "cat", 49)  # every other word: some in its class, most not
    assert f"<td style='color:{color('pass')}'><i " in html
    assert f"<td style='color:{color('fail')}'><i " in html


def test_the_neighbours_book_stores_a_table_per_model_word_and_k(runs, corpus):
    vocab, _ = corpus
    tables = {name: result.embeddings for name, result in runs.items()}
    explorer = WordNeighboursExplorer(tables, vocab, WORD_CLASSES, word="cat", k=6, book=True)
    words = [w for words in WORD_CLASSES.values() for w in words if w in vocab]
    assert offered(explorer, "model") == ["skip-gram", "CBOW"]
    assert offered(explorer, "word") == words and len(words) >= 40  # every word
    assert offered(explorer, "k") == list(BOOK_NEIGHBOURS) == [3, 6, 10]
    assert explorer.controls["word"].value == "cat" and explorer.controls["k"].value == 6
    assert len(explorer.states["table"]) == 2 * len(words) * 3
    state = explorer.states["table"][1, words.index("bread"), 2]
    assert "<b>bread</b> (food), CBOW" in state.value and state.value.count("<tr><td>") == 10


def test_the_neighbours_book_adds_the_first_k_to_its_values(runs, corpus):
    vocab, _ = corpus
    explorer = WordNeighboursExplorer(
        {"w": runs["CBOW"].embeddings}, vocab, WORD_CLASSES, k=4, book=True
    )
    assert offered(explorer, "k") == [3, 4, 6, 10]


def test_the_neighbours_book_shows_what_the_live_explorer_computes(runs, corpus):
    vocab, _ = corpus
    tables = {name: result.embeddings for name, result in runs.items()}
    offer = {"word": ("cat", "red", "the"), "k": (3, 6)}
    assert_book_matches_live(
        lambda book: WordNeighboursExplorer(
            tables, vocab, WORD_CLASSES, word="cat", k=6, book=book, offer=offer
        ),
        most=12,
    )


# --- the word map over the epochs -------------------------------------------------------------


def test_word_map_explorer_uses_core_widgets(runs, corpus):
    vocab, _ = corpus
    assert used_widget_types(WordMapExplorer(runs, vocab, WORD_CLASSES)) <= CORE_WIDGETS_IN_7_7


def test_word_map_slider_runs_over_the_snapshot_epochs_and_starts_at_the_last(runs, corpus):
    vocab, _ = corpus
    explorer = WordMapExplorer(runs, vocab, WORD_CLASSES)
    assert list(explorer.epoch.options) == [0, 1, 2, 3]
    assert explorer.epoch.value == 3
    assert "<b>skip-gram, epoch 3</b> (mean loss" in explorer.readout.value


def test_word_map_precomputes_every_projection(runs, corpus):
    vocab, _ = corpus
    explorer = WordMapExplorer(runs, vocab, WORD_CLASSES)
    assert set(explorer.coords) == {(name, e) for name in runs for e in range(4)}
    words = len(vocab) - 4
    assert all(coords.shape == (words, 2) for coords in explorer.coords.values())


def test_moving_the_epoch_slider_shows_that_epoch(runs, corpus):
    vocab, _ = corpus
    explorer = WordMapExplorer(runs, vocab, WORD_CLASSES)
    explorer.epoch.value = 0
    assert "epoch 0</b> (before training)" in explorer.readout.value
    explorer.run.value = "CBOW"
    assert "<b>CBOW, epoch 0</b>" in explorer.readout.value


def test_word_map_needs_snapshots(corpus):
    vocab, ids = corpus
    plain = train_word2vec(ids[:50], len(vocab), epochs=1)
    with pytest.raises(ValueError, match="has no snapshots: train it with"):
        WordMapExplorer({"plain": plain}, vocab, WORD_CLASSES)


def test_word_map_refuses_an_epoch_without_a_snapshot(runs, corpus):
    vocab, _ = corpus
    with pytest.raises(
        ValueError, match=r"epoch must be one of the snapshot epochs \[0, 1, 2, 3\]"
    ):
        WordMapExplorer(runs, vocab, WORD_CLASSES, epoch=7)


def test_the_word_map_readout_lists_the_words_whose_neighbour_is_of_another_class(runs, corpus):
    vocab, _ = corpus
    explorer = WordMapExplorer(runs, vocab, WORD_CLASSES)
    before = explorer.describe("skip-gram", 0)
    assert "nearest neighbour of another class: " in before and " &rarr; " in before
    strays = explorer.strays["skip-gram", 0]
    scored = sum(w in vocab for words in WORD_CLASSES.values() for w in words)
    assert explorer.agreement["skip-gram", 0] == (scored - len(strays)) / scored
    assert len(strays) > 10 and f"and {len(strays) - 10} more" in before


def test_the_word_map_agreement_is_the_library_s(runs, corpus):
    from course_lib.word2vec import neighbour_class_agreement

    vocab, _ = corpus
    explorer = WordMapExplorer(runs, vocab, WORD_CLASSES)
    for epoch, table in runs["CBOW"].snapshots:
        expected = neighbour_class_agreement(table, vocab, WORD_CLASSES)
        assert explorer.agreement["CBOW", epoch] == pytest.approx(expected)


@pytest.mark.parametrize(
    "epochs, offered_epochs",
    [
        (list(range(9)), [0, 1, 2, 4, 8]),
        (list(range(4)), [0, 1, 2, 3]),
        ([0, 5, 10], [0, 5, 10]),
        (list(range(0, 21, 2)), [0, 2, 4, 8, 16, 20]),
    ],
)
def test_the_book_offers_the_early_epochs_doubling_and_the_last(epochs, offered_epochs):
    assert book_epochs(epochs) == offered_epochs


def test_the_word_map_book_stores_a_readout_and_a_figure_per_run_and_epoch(runs, corpus):
    vocab, _ = corpus
    explorer = WordMapExplorer(runs, vocab, WORD_CLASSES, epoch=2, book=True)
    assert offered(explorer, "run") == ["skip-gram", "CBOW"]
    assert offered(explorer, "epoch") == [0, 1, 2, 3]
    assert explorer.controls["epoch"].value == 2
    keys = {(r, e) for r in range(2) for e in range(4)}
    assert set(explorer.states["readout"]) == set(explorer.states["figure"]) == keys
    assert "<b>CBOW, epoch 0</b> (before training)" in explorer.states["readout"][1, 0].value


def test_the_word_map_book_shows_what_the_live_explorer_computes(runs, corpus):
    vocab, _ = corpus
    assert_book_matches_live(
        lambda book: WordMapExplorer(
            runs, vocab, WORD_CLASSES, book=book, offer={"epoch": (0, 1, 3)}
        ),
        most=4,
    )


# --- in a kernel, with ipywidgets 8 and 7.7 ---------------------------------------------------

KERNEL_CELLS = [
    "import ipywidgets\nprint(ipywidgets.__version__)",
    """\
from course_lib.data import WORD_CLASSES, synthetic_grammar_corpus
from course_lib.discretize import synthetic_signal
from course_lib.vocab import Vocabulary
from course_lib.explorers.foundations import (
    DiscretizationExplorer, WordMapExplorer, WordNeighboursExplorer,
)
from course_lib.word2vec import train_word2vec

sentences = synthetic_grammar_corpus(200)
vocab = Vocabulary.from_corpus(sentences)
ids = [vocab.encode(s) for s in sentences]
run = train_word2vec(ids, len(vocab), epochs=2, snapshot_every=1, lr=0.05)""",
    "sound = DiscretizationExplorer(synthetic_signal(1000))\nsound",
    "sound.vocab_size.value = 4\nprint('2 bits' in sound.readout.value, '4 bits' in "
    "sound.readout.value)",
    "near = WordNeighboursExplorer({'sg': run.embeddings}, vocab, WORD_CLASSES, word='cat')\nnear",
    "words = WordMapExplorer({'sg': run}, vocab, WORD_CLASSES)\nwords",
    "words.epoch.value = 0\nprint('before training' in words.readout.value)",
]


def test_the_explorers_render_in_a_kernel(tmp_path, widget_kernel):
    rendered = render_in_kernel(KERNEL_CELLS, tmp_path, widget_kernel)
    assert len(rendered.views) == 3
    assert {"SelectionSliderModel", "DropdownModel", "OutputModel",
            "HTMLModel"} <= rendered.model_names()  # fmt: skip
    values = rendered.values()
    assert "reconstruction SNR" in values and "nearest neighbours are of the same class" in values
    # the figures are drawn into the Output widgets and stored with them
    assert all(rendered.figures_stored())
    printed = [o.get("text", "") for o in rendered.outputs if o.output_type == "stream"]
    assert printed[1:] == ["True False\n", "True\n"]


def test_an_explorer_is_a_vbox(runs, corpus):
    vocab, _ = corpus
    assert isinstance(WordMapExplorer(runs, vocab, WORD_CLASSES), widgets.VBox)
