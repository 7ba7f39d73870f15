"""Specification of course_lib.plotting: plot_word_map (words in 2-D, one colour per class) and
the book's figure style (every figure's smallest text measured, at least 9 px as shown)."""

import hashlib
import types
import warnings

import matplotlib

matplotlib.use("Agg")

import IPython
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from IPython.core.formatters import DisplayFormatter
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

from course_lib.plotting import (
    BOOK_COLUMN_PX,
    BOOK_STYLE,
    MIN_TEXT_PX,
    FigureText,
    FigureTextTooSmall,
    FigureTextWarning,
    book_png,
    check_figure_text,
    displayed_text_px,
    figure_text_sizes,
    plot_word_map,
    use_book_figures,
)

CLASSES = {"animal": ("cat", "dog"), "food": ("bread",)}
WORDS = ["cat", "bread", "dog", "the"]  # "the" is in no class
COORDS = torch.tensor([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]])


@pytest.fixture(autouse=True)
def close_figures():
    with matplotlib.rc_context():  # use_book_figures changes rcParams: undo it after each test
        yield
    plt.close("all")


def book_figure(width: float = 6.0) -> Figure:
    """A figure in the book's style with a title, labels, ticks and a legend."""
    with matplotlib.rc_context(BOOK_STYLE):
        fig, ax = plt.subplots(figsize=(width, 3))
        ax.plot([0, 1, 2], [3, 1, 2], label="a curve")
        ax.set(title="a title", xlabel="x label", ylabel="y label")
        ax.set_xticks([0, 1, 2], ["zero", "one", "two"])
        ax.legend()
    return fig


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


# --- the book's figure style and the measurement of a figure's text -------------------------


def test_the_measurement_finds_a_text_of_4_px():
    fig = book_figure()
    fig.axes[0].text(1, 2, "tiny", fontsize=4 * 72 / fig.dpi)  # 4 px at the figure's dpi
    smallest = figure_text_sizes(fig)[0]
    assert smallest == FigureText("tiny", 4.0)


def test_the_measurement_sees_ticks_labels_title_legend_and_annotations():
    fig = book_figure()
    fig.axes[0].annotate("note", (1, 1))
    texts = {t.text for t in figure_text_sizes(fig)}
    assert {"a title", "x label", "y label", "a curve", "note", "one"} <= texts


def test_hidden_and_blank_texts_are_not_measured():
    fig = book_figure()
    fig.axes[0].text(1, 2, "hidden", fontsize=2).set_visible(False)
    fig.axes[0].text(1, 2, "   ", fontsize=2)
    assert all(t.text not in ("hidden", "   ") for t in figure_text_sizes(fig))
    assert figure_text_sizes(fig)[0].px >= 12


def test_sizes_are_in_pixels_of_the_png_at_the_figures_dpi():
    fig = book_figure()
    fig.set_dpi(200)
    title = next(t for t in figure_text_sizes(fig) if t.text == "a title")
    assert title.px == pytest.approx(BOOK_STYLE["axes.titlesize"] * 200 / 72, abs=0.01)


def test_a_figure_in_the_book_style_passes_the_check():
    fig = book_figure()
    assert check_figure_text(fig)[0].px >= MIN_TEXT_PX


def test_the_check_names_every_text_shown_under_9_px():
    fig = book_figure()
    fig.axes[0].text(1, 2, "small one", fontsize=5)
    fig.axes[0].text(1, 1, "small two", fontsize=6)
    with pytest.raises(FigureTextTooSmall, match=r"under 9 px high: 'small one' \(6\.9 px\), "
                       r"'small two' \(8\.3 px\)"):  # fmt: skip
        check_figure_text(fig)


def test_a_figure_wider_than_the_book_column_is_checked_as_shown_shrunk():
    fig = book_figure(width=14)  # 1400 px: shown at 740 / 1400 of its size, ticks about 6.6 px
    with pytest.raises(FigureTextTooSmall, match="shown 740 px wide in the book's column"):
        check_figure_text(fig)


def test_the_displayed_size_scales_with_the_shrinking_only():
    assert displayed_text_px(12.0, natural_width=2 * BOOK_COLUMN_PX) == pytest.approx(6.0)
    assert displayed_text_px(12.0, natural_width=300) == 12.0  # never enlarged
    with pytest.raises(ValueError, match="widths must be positive"):
        displayed_text_px(12.0, natural_width=0)


def test_only_figures_can_be_measured():
    with pytest.raises(TypeError, match="expected a matplotlib Figure, got list"):
        figure_text_sizes([])


def test_book_png_records_the_natural_width_and_the_smallest_text():
    png, metadata = book_png(book_figure())
    assert png.startswith(b"\x89PNG")
    assert metadata["natural_width_px"] == int.from_bytes(png[16:20], "big")
    assert metadata["smallest_text_px"] == pytest.approx(BOOK_STYLE["xtick.labelsize"] * 100 / 72,
                                                         abs=0.01)  # fmt: skip


def test_book_png_draws_the_same_bytes_every_time():
    fig = book_figure()
    assert hashlib.sha256(book_png(fig)[0]).digest() == hashlib.sha256(book_png(fig)[0]).digest()


def test_book_png_still_returns_a_figure_with_small_text_and_warns():
    fig = book_figure()
    fig.axes[0].text(1, 2, "tiny", fontsize=3)
    with pytest.warns(FigureTextWarning, match="'tiny'"):
        png, metadata = book_png(fig)
    assert png.startswith(b"\x89PNG") and metadata["smallest_text_px"] == pytest.approx(4.17)


def test_use_book_figures_sets_the_style():
    use_book_figures()
    assert all(matplotlib.rcParams[key] == value for key, value in BOOK_STYLE.items()
               if key != "figure.figsize")  # fmt: skip
    assert tuple(matplotlib.rcParams["figure.figsize"]) == BOOK_STYLE["figure.figsize"]


class FakeShell:
    """What use_book_figures needs of IPython's shell: its display formatters, and the events
    pyplot registers its hook with when the backend is loaded."""

    def __init__(self) -> None:
        self.display_formatter = DisplayFormatter()
        self.events = types.SimpleNamespace(register=lambda *args: None)


@pytest.fixture
def shell(monkeypatch) -> FakeShell:
    """A fake IPython shell for the test; pyplot's hook state is restored afterwards."""
    fake = FakeShell()
    monkeypatch.setattr(IPython, "get_ipython", lambda: fake)
    monkeypatch.setattr(plt, "_REPL_DISPLAYHOOK", plt._REPL_DISPLAYHOOK)
    return fake


def test_in_ipython_every_figure_is_shown_as_a_png_with_its_text_sizes(shell):
    use_book_figures()
    fig = book_figure()
    data, metadata = shell.display_formatter.format(fig)
    assert set(data) == {"image/png", "text/plain"}
    assert metadata["image/png"]["natural_width_px"] == book_png(fig)[1]["natural_width_px"]
    assert metadata["image/png"]["smallest_text_px"] >= MIN_TEXT_PX


def test_in_ipython_a_figure_with_small_text_is_still_shown(shell):
    use_book_figures()
    fig = book_figure()
    fig.axes[0].text(1, 2, "tiny", fontsize=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data, _ = shell.display_formatter.format(fig)
    assert "image/png" in data
    assert [w.category for w in caught] == [FigureTextWarning]
