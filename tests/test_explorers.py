"""Specification of the explorers of the opening chapters: discretization, word neighbours and
the word map over training epochs. Core ipywidgets only, checked in kernels with ipywidgets 8
and 7.7 (Colab's)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import ipywidgets as widgets
import pytest
import torch

from conftest import render_in_kernel, used_widget_types
from course_lib.data import WORD_CLASSES, synthetic_grammar_corpus
from course_lib.discretize import synthetic_signal
from course_lib.explorers.foundations import (
    DiscretizationExplorer,
    WordMapExplorer,
    WordNeighboursExplorer,
)
from course_lib.vocab import Vocabulary
from course_lib.word2vec import train_word2vec

CORE_WIDGETS_IN_7_7 = {
    "VBox", "HBox", "HTML", "Output", "Dropdown", "IntSlider", "SelectionSlider",
}  # fmt: skip


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
