"""Specification of course_lib.plotting.plot_word_map: words in 2-D, one colour per class."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.colors import to_hex

from course_lib.plotting import plot_word_map

CLASSES = {"animal": ("cat", "dog"), "food": ("bread",)}
WORDS = ["cat", "bread", "dog", "the"]  # "the" is in no class
COORDS = torch.tensor([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]])


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_one_scatter_per_class_and_one_for_words_of_no_class():
    ax = plot_word_map(COORDS, WORDS, CLASSES)
    labels = [collection.get_label() for collection in ax.collections]
    assert labels == ["animal", "food", "other"]


def test_each_word_is_drawn_at_its_coordinates_in_its_class_colour():
    ax = plot_word_map(COORDS, WORDS, CLASSES)
    animal, food, other = ax.collections
    np.testing.assert_array_equal(animal.get_offsets(), [[0.0, 1.0], [4.0, 5.0]])
    np.testing.assert_array_equal(food.get_offsets(), [[2.0, 3.0]])
    np.testing.assert_array_equal(other.get_offsets(), [[6.0, 7.0]])
    assert to_hex(animal.get_facecolor()[0]) == to_hex(plt.get_cmap("tab10")(0))
    assert to_hex(other.get_facecolor()[0]) == "#999999"


def test_every_point_is_labelled_with_its_word():
    ax = plot_word_map(COORDS, WORDS, CLASSES)
    assert [text.get_text() for text in ax.texts] == WORDS
    assert [text.xy for text in ax.texts] == [tuple(row) for row in COORDS.tolist()]


def test_legend_and_title_are_optional():
    _, ax = plt.subplots()
    assert plot_word_map(COORDS, WORDS, CLASSES, ax, title="epoch 3", legend=False) is ax
    assert ax.get_legend() is None and ax.get_title() == "epoch 3"
    assert plot_word_map(COORDS, WORDS, CLASSES).get_legend() is not None


def test_coordinates_must_be_one_pair_per_word():
    with pytest.raises(ValueError, match=r"coords must have shape \(len\(words\), 2\) = \(4, 2\)"):
        plot_word_map(COORDS[:3], WORDS, CLASSES)
    with pytest.raises(ValueError, match=r"got \(4, 3\)"):
        plot_word_map(torch.zeros(4, 3), WORDS, CLASSES)
