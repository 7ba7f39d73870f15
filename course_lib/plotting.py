"""Figures shared by the chapters and the widgets, drawn with matplotlib, and the book's
figure style.

Every plotting function draws into an ``Axes`` it is given (or a new one) and returns that
``Axes``, so that a chapter can compose figures and a widget can redraw them.

The book's figures must be readable where they are shown: the smallest text of every figure is
at least :data:`MIN_TEXT_PX` CSS pixels high (its font size) in the book's text column at a
1366-pixel-wide window. :func:`use_book_figures` (called by every chapter's setup cell) sets
the style (:data:`BOOK_STYLE`) and makes IPython show each figure as a PNG whose output
metadata records its natural width and its smallest text (:func:`book_png`); the tests read
those numbers from every stored figure. :func:`figure_text_sizes` measures a figure's texts,
:func:`check_figure_text` refuses a figure whose smallest text is too small.
"""

from __future__ import annotations

import base64
import io
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.figure import Figure

__all__ = [
    "BOOK_COLUMN_PX",
    "BOOK_STYLE",
    "MIN_TEXT_PX",
    "FigureText",
    "FigureTextTooSmall",
    "FigureTextWarning",
    "book_png",
    "check_figure_text",
    "displayed_text_px",
    "figure_output",
    "figure_text_sizes",
    "plot_attention",
    "plot_attention_heads",
    "plot_encoding_heatmap",
    "plot_encoding_waves",
    "plot_mask",
    "plot_rnn_vs_attention",
    "plot_word_map",
    "to_numpy",
    "use_book_figures",
]

ENCODING_CMAP = "RdBu_r"  # diverging: -1 blue, 0 white, +1 red
ATTENTION_CMAP = "Blues"  # sequential: weight 0 white, weight 1 dark blue
BLOCKED_COLOR = "#d9d9d9"  # cells a mask does not allow

# The width of the book's text column (an output image's room) in a 1366 x 768 window, measured
# in Chromium on the built book (sphinx-book-theme): 741 CSS px. A wider figure is shrunk to it.
BOOK_COLUMN_PX = 740
MIN_TEXT_PX = 9.0  # the smallest font size, in CSS px as displayed, a figure may use
BOOK_DPI = 100  # one point is 100 / 72 px: a 7.4-inch-wide figure fills the column exactly
BOOK_STYLE: dict[str, object] = {
    "figure.dpi": BOOK_DPI,
    "savefig.dpi": "figure",
    "figure.figsize": (7.0, 3.6),
    "font.size": 10.0,  # 13.9 px
    "axes.titlesize": 11.0,
    "axes.labelsize": 10.0,
    "xtick.labelsize": 9.0,  # 12.5 px, the style's smallest text
    "ytick.labelsize": 9.0,
    "legend.fontsize": 9.0,
    "legend.title_fontsize": 9.0,
    "figure.titlesize": 12.0,
}
METADATA_KEY = "smallest_text_px"  # in a PNG output's metadata: its smallest text, natural px


@dataclass(frozen=True)
class FigureText:
    """A text a figure draws and its font size in pixels of the figure's PNG (natural size)."""

    text: str
    px: float


class FigureTextTooSmall(ValueError):
    """A figure's text would be shown smaller than :data:`MIN_TEXT_PX` in the book."""


class FigureTextWarning(UserWarning):
    """Shown instead of :class:`FigureTextTooSmall` when a figure is displayed anyway."""


class _TextRecorder(RendererAgg):
    """An Agg renderer that records the texts drawn through it, and draws them only if asked
    (``draw=True``: the figure's image and its texts from one drawing)."""

    def __init__(self, figure: Figure, draw: bool = False) -> None:
        width, height = figure.get_size_inches() * figure.dpi
        super().__init__(max(1, int(width)), max(1, int(height)), figure.dpi)
        self.texts: list[tuple[str, float]] = []
        self._draw = draw

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        self.texts.append((s, prop.get_size_in_points()))
        if self._draw:
            super().draw_text(gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)

    def draw_tex(self, gc, x, y, s, prop, angle, *, mtext=None):
        self.texts.append((s, prop.get_size_in_points()))
        if self._draw:
            super().draw_tex(gc, x, y, s, prop, angle, mtext=mtext)

    def sizes(self) -> list[FigureText]:
        """The non-blank texts drawn, with their font sizes in pixels, smallest first."""
        scale = self.dpi / 72
        texts = {FigureText(text, round(points * scale, 2)) for text, points in self.texts}
        return sorted((t for t in texts if t.text.strip()), key=lambda t: (t.px, t.text))


def figure_text_sizes(figure: Figure) -> list[FigureText]:
    """Every non-blank text ``figure`` draws (ticks, labels, legends, titles, annotations,
    colour bars...), with its font size in pixels at the figure's dpi, smallest first.

    The figure is drawn, so only what a reader would see counts: hidden texts, empty tick
    labels and ticks outside the axes' limits are left out.
    """
    if not isinstance(figure, Figure):
        raise TypeError(f"expected a matplotlib Figure, got {type(figure).__name__}")
    recorder = _TextRecorder(figure)
    figure.draw(recorder)
    return recorder.sizes()


def displayed_text_px(
    text_px: float, natural_width: float, shown_width: float = BOOK_COLUMN_PX
) -> float:
    """The size of a ``text_px`` text of an image ``natural_width`` pixels wide when the image
    is given ``shown_width`` CSS pixels of room (it is shrunk to fit, never enlarged)."""
    if natural_width <= 0 or shown_width <= 0:
        raise ValueError(f"widths must be positive, got {natural_width} and {shown_width}")
    return text_px * min(1.0, shown_width / natural_width)


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=figure.dpi, bbox_inches="tight")
    return buffer.getvalue()


def _png_width(png: bytes) -> int:
    return int.from_bytes(png[16:20], "big")  # the IHDR chunk follows the 8-byte signature


def check_figure_text(
    figure: Figure,
    *,
    natural_width: int | None = None,
    minimum: float = MIN_TEXT_PX,
    texts: list[FigureText] | None = None,
) -> list[FigureText]:
    """Raise :class:`FigureTextTooSmall`, naming the texts, if any text of ``figure`` would be
    shown smaller than ``minimum`` CSS px in the book's column; else return its texts.

    Args:
        figure: the figure.
        natural_width: the width of its PNG in pixels (drawn to find out if omitted).
        minimum: the smallest size allowed, in CSS px as displayed.
        texts: its :func:`figure_text_sizes`, if already measured.
    """
    texts = figure_text_sizes(figure) if texts is None else texts
    if natural_width is None:
        natural_width = _png_width(_png(figure))
    small = [t for t in texts if displayed_text_px(t.px, natural_width) < minimum]
    if small:
        shown = min(natural_width, BOOK_COLUMN_PX)
        names = ", ".join(
            f"{t.text!r} ({displayed_text_px(t.px, natural_width):.1f} px)" for t in small[:8]
        )
        more = f" and {len(small) - 8} more" if len(small) > 8 else ""
        raise FigureTextTooSmall(
            f"this figure is {natural_width} px wide and is shown {shown} px wide in the "
            f"book's column, so these texts are under {minimum:g} px high: {names}{more}. "
            f"Use larger fonts (the book's style: plotting.BOOK_STYLE), a figure at most "
            f"{BOOK_COLUMN_PX / BOOK_DPI:.1f} inches wide, or fewer panels per row."
        )
    return texts


def book_png(figure: Figure) -> tuple[bytes, dict[str, object]]:
    """The figure as a PNG (tight bounding box, at its dpi) and the output metadata the book's
    tests read: ``natural_width_px`` (the PNG's width) and ``smallest_text_px`` (its smallest
    font, px). (Not ``width``: the book would then wrap the image in a link to itself.)

    A figure whose text would be shown under :data:`MIN_TEXT_PX` px in the book is still
    returned, with a :class:`FigureTextWarning` naming the small texts.
    """
    png = _png(figure)
    return png, _metadata(figure, _png_width(png), figure_text_sizes(figure))


def _metadata(figure: Figure, width: int, texts: list[FigureText]) -> dict[str, object]:
    """The output metadata of a figure ``width`` px wide drawing ``texts``; warns (for the
    caller's caller) if a text would be shown under :data:`MIN_TEXT_PX` px in the book."""
    try:
        check_figure_text(figure, natural_width=width, texts=texts)
    except FigureTextTooSmall as error:
        warnings.warn(str(error), FigureTextWarning, stacklevel=3)
    return {"natural_width_px": width, METADATA_KEY: texts[0].px if texts else None}


def figure_output(figure: Figure, colours: int = 256) -> dict:
    """The figure as a notebook ``display_data`` output, as the explorers store and show it.

    Drawn once, at the figure's size (no tight bounding box: an explorer's figure calls
    ``tight_layout``), which also measures its texts; stored as a PNG of at most ``colours``
    colours (an adaptive palette without dithering: about a third of the size, with the
    anti-aliased edges of text and lines kept). The metadata is :func:`book_png`'s, and a
    figure whose text would be shown under :data:`MIN_TEXT_PX` px is still returned, with a
    :class:`FigureTextWarning`.
    """
    from PIL import Image  # matplotlib's own dependency

    recorder = _TextRecorder(figure, draw=True)
    figure.draw(recorder)
    metadata = _metadata(figure, recorder.width, recorder.sizes())
    size = (recorder.width, recorder.height)
    image = Image.frombuffer("RGBA", size, recorder.buffer_rgba(), "raw", "RGBA", 0, 1)
    reduced = image.convert("RGB").quantize(
        colours, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
    )
    buffer = io.BytesIO()
    reduced.save(buffer, format="PNG", optimize=True)
    return {
        "output_type": "display_data",
        "data": {
            "image/png": base64.b64encode(buffer.getvalue()).decode("ascii"),
            "text/plain": f"<Figure size {size[0]}x{size[1]} with {len(figure.axes)} Axes>",
        },
        "metadata": {"image/png": metadata},
    }


def _book_png_formatter(figure: Figure) -> tuple[bytes, dict[str, object]] | None:
    if not figure.axes and not figure.texts:
        return None  # an empty figure shows nothing, as with matplotlib's own formatter
    return book_png(figure)


def use_book_figures() -> None:
    """Draw figures in the book's style and, in IPython or Jupyter, show every matplotlib
    figure through :func:`book_png` (a PNG with its natural width and smallest text in the
    output metadata). Outside IPython only the style is set.
    """
    mpl.rcParams.update(BOOK_STYLE)
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a dependency of ipywidgets
        return
    shell = get_ipython()
    if shell is None:
        return
    # Load the backend now: the inline backend, once loaded, installs its own PNG formatter.
    plt.switch_backend(mpl.get_backend())
    formatters = shell.display_formatter.formatters
    for mime, formatter in formatters.items():
        if mime != "image/png":
            formatter.pop(Figure, None)  # one image per figure: the PNG
    formatters["image/png"].for_type(Figure, _book_png_formatter)


def to_numpy(values: torch.Tensor | np.ndarray) -> np.ndarray:
    """A detached CPU NumPy copy of a tensor (or the array itself); bfloat16, which NumPy
    does not have, becomes float32."""
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu()
        return (values.float() if values.dtype == torch.bfloat16 else values).numpy()
    return np.asarray(values)


def _finish(ax: Axes, title: str | None, image: Any = None, colorbar_label: str = "") -> Axes:
    """Give ``ax`` its title, if any, and a colour bar for ``image``, if given; return it."""
    if title:
        ax.set_title(title)
    if image is not None:
        ax.figure.colorbar(image, ax=ax, label=colorbar_label)
    return ax


def plot_encoding_heatmap(
    pe: torch.Tensor | np.ndarray,
    ax: Axes | None = None,
    *,
    title: str | None = None,
    colorbar: bool = True,
) -> Axes:
    """Draw a positional-encoding table as a heatmap: positions down, dimensions across.

    Args:
        pe: table of shape ``(positions, d_model)`` with values in ``[-1, 1]``.
        ax: where to draw; a new figure if omitted.
        title: optional axes title.
        colorbar: whether to add a colour bar.
    """
    table = to_numpy(pe)
    if table.ndim != 2:
        raise ValueError(f"pe must be 2-D (positions, d_model), got shape {table.shape}")
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    image = ax.imshow(
        table, aspect="auto", cmap=ENCODING_CMAP, vmin=-1, vmax=1, interpolation="nearest"
    )
    ax.set_xlabel("dimension $j$")
    ax.set_ylabel("position $pos$")
    return _finish(ax, title, image if colorbar else None, "value")


def plot_encoding_waves(
    pe: torch.Tensor | np.ndarray,
    dims: Sequence[int],
    ax: Axes | None = None,
    *,
    title: str | None = None,
    legend: bool = True,
) -> Axes:
    """Plot chosen dimensions of a positional-encoding table as curves over the positions.

    Args:
        pe: table of shape ``(positions, d_model)``.
        dims: the dimensions (columns) to plot.
        ax: where to draw; a new figure if omitted.
        title: optional axes title.
        legend: whether to name the curves in a legend right of the axes.
    """
    table = to_numpy(pe)
    if table.ndim != 2:
        raise ValueError(f"pe must be 2-D (positions, d_model), got shape {table.shape}")
    bad = [d for d in dims if not 0 <= d < table.shape[1]]
    if bad:
        raise ValueError(f"dims {bad} are outside 0..{table.shape[1] - 1}")
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3))
    positions = np.arange(table.shape[0])
    for d in dims:
        kind = "sin" if d % 2 == 0 else "cos"
        ax.plot(positions, table[:, d], label=f"$j={d}$ ({kind}, pair $i={d // 2}$)")
    ax.set_xlabel("position $pos$")
    ax.set_ylabel("$PE_{pos,j}$")
    ax.set_ylim(-1.1, 1.1)
    if legend:
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize="small")
    return _finish(ax, title)


def _labels(labels: Sequence[str] | None, size: int, name: str) -> list[str]:
    if labels is None:
        return [str(i) for i in range(size)]
    labels = list(labels)
    if len(labels) != size:
        raise ValueError(f"{name} has {len(labels)} labels for {size} rows or columns")
    return labels


def plot_attention(
    weights: torch.Tensor | np.ndarray,
    ax: Axes | None = None,
    *,
    queries: Sequence[str] | None = None,
    keys: Sequence[str] | None = None,
    mask: torch.Tensor | np.ndarray | None = None,
    title: str | None = None,
    annotate: bool = True,
    highlight: int | None = None,
    colorbar: bool = False,
) -> Axes:
    """Draw an attention matrix: one row per query, one column per key, weights in [0, 1].

    Args:
        weights: ``(L_q, L_k)``, each row a distribution over the keys.
        ax: where to draw; a new figure if omitted.
        queries, keys: tick labels (the tokens); positions 0, 1, ... if omitted.
        mask: optional bool ``(L_q, L_k)``, True where attention is allowed; the other cells
            are drawn grey with a cross.
        title: optional axes title.
        annotate: write each weight in its cell (for small matrices).
        highlight: a query row to outline.
        colorbar: whether to add a colour bar.
    """
    table = to_numpy(weights)
    if table.ndim != 2:
        raise ValueError(f"weights must be 2-D (L_q, L_k), got shape {table.shape}")
    len_q, len_k = table.shape
    queries = _labels(queries, len_q, "queries")
    keys = _labels(keys, len_k, "keys")
    if ax is None:
        _, ax = plt.subplots(figsize=(0.5 * len_k + 1.5, 0.5 * len_q + 1))
    image = ax.imshow(table, cmap=ATTENTION_CMAP, vmin=0, vmax=1, interpolation="nearest")
    blocked = np.zeros_like(table, dtype=bool)
    if mask is not None:
        blocked = ~np.broadcast_to(to_numpy(mask).astype(bool), table.shape)
        grey = np.zeros((*table.shape, 4))
        grey[blocked] = plt.matplotlib.colors.to_rgba(BLOCKED_COLOR)
        ax.imshow(grey, interpolation="nearest")
    if annotate:
        for i in range(len_q):
            for j in range(len_k):
                if blocked[i, j]:
                    ax.text(j, i, "×", ha="center", va="center", color="#777777")
                else:
                    color = "white" if table[i, j] > 0.6 else "black"
                    ax.text(j, i, f"{table[i, j]:.2f}", ha="center", va="center",
                            fontsize="small", color=color)  # fmt: skip
    ax.set_xticks(range(len_k), keys, rotation=45, ha="right")
    ax.set_yticks(range(len_q), queries)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if highlight is not None:
        ax.add_patch(
            plt.Rectangle((-0.5, highlight - 0.5), len_k, 1, fill=False, color="#d62728", lw=2)
        )
    return _finish(ax, title, image if colorbar else None, "attention weight")


def plot_attention_heads(
    weights: torch.Tensor | np.ndarray,
    axes: Sequence[Axes] | None = None,
    *,
    queries: Sequence[str] | None = None,
    keys: Sequence[str] | None = None,
    annotate: bool = False,
    highlight: int | None = None,
) -> list[Axes]:
    """Draw the attention matrix of every head side by side.

    Args:
        weights: ``(num_heads, L_q, L_k)`` (one sequence of a batch).
        axes: one ``Axes`` per head; a new row of them if omitted.
        queries, keys, annotate, highlight: as in :func:`plot_attention`.
    """
    table = to_numpy(weights)
    if table.ndim != 3:
        raise ValueError(f"weights must be 3-D (num_heads, L_q, L_k), got shape {table.shape}")
    heads = table.shape[0]
    if axes is None:
        _, row = plt.subplots(1, heads, figsize=(2.6 * heads, 2.8), squeeze=False)
        axes = list(row[0])
    if len(axes) != heads:
        raise ValueError(f"got {len(axes)} axes for {heads} heads")
    for head, ax in enumerate(axes):
        plot_attention(table[head], ax, queries=queries, keys=keys, annotate=annotate,
                       highlight=highlight, title=f"head {head + 1}")  # fmt: skip
        if head:
            ax.set_ylabel("")
    return list(axes)


def plot_mask(
    mask: torch.Tensor | np.ndarray,
    ax: Axes | None = None,
    *,
    queries: Sequence[str] | None = None,
    keys: Sequence[str] | None = None,
    title: str | None = None,
) -> Axes:
    """Draw a boolean attention mask: allowed cells dark with a tick, the others grey.

    Args:
        mask: ``(L_q, L_k)``, True where query ``i`` may attend to key ``j``.
        ax, queries, keys, title: as in :func:`plot_attention`.
    """
    table = to_numpy(mask)
    if table.ndim != 2 or table.dtype != bool:
        raise ValueError(f"mask must be a 2-D bool array (L_q, L_k), got {table.dtype} "
                         f"of shape {table.shape}")  # fmt: skip
    len_q, len_k = table.shape
    if ax is None:
        _, ax = plt.subplots(figsize=(0.45 * len_k + 1.5, 0.45 * len_q + 1))
    colors = plt.matplotlib.colors.ListedColormap([BLOCKED_COLOR, "#3a7dc9"])
    ax.imshow(table.astype(float), cmap=colors, vmin=0, vmax=1, interpolation="nearest")
    for i in range(len_q):
        for j in range(len_k):
            mark, color = ("✓", "white") if table[i, j] else ("×", "#777777")
            ax.text(j, i, mark, ha="center", va="center", color=color, fontsize="small")
    ax.set_xticks(range(len_k), _labels(keys, len_k, "keys"), rotation=45, ha="right")
    ax.set_yticks(range(len_q), _labels(queries, len_q, "queries"))
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    return _finish(ax, title)


def plot_rnn_vs_attention(
    rows: Sequence[dict[str, int | float]], ax: Axes | None = None, *, title: str | None = None
) -> Axes:
    """Time per pass against sequence length, log-log: the rows of
    :func:`course_lib.recurrence.time_rnn_vs_attention`.

    One line for the RNN's Python loop, one for ``nn.RNN`` (if the rows have
    ``rnn_builtin_seconds``) and one for self-attention.

    Args:
        rows: the measurements, each with ``length``, ``rnn_seconds`` and
            ``attention_seconds``, and optionally ``rnn_builtin_seconds``.
        ax: where to draw; a new figure if omitted.
        title: optional axes title.
    """
    if not rows:
        raise ValueError("rows must hold at least one measurement, got none")
    missing = {"length", "rnn_seconds", "attention_seconds"} - set(rows[0])
    if missing:
        raise ValueError(
            f"rows lack the keys {sorted(missing)}; use course_lib.recurrence.time_rnn_vs_attention"
        )
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    lengths = [row["length"] for row in rows]
    curves = [
        ("rnn_seconds", "o-", "RNN, Python loop over the positions"),
        ("rnn_builtin_seconds", "^-", "RNN, torch.nn.RNN (loop inside PyTorch)"),
        ("attention_seconds", "s-", "self-attention, all positions at once"),
    ]
    for key, style, label in curves:
        if key in rows[0]:
            ax.plot(lengths, [1000 * row[key] for row in rows], style, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length $L$")
    ax.set_ylabel("time per pass (ms)")
    ax.legend(fontsize="small")
    ax.grid(True, which="major", alpha=0.3)
    return _finish(ax, title)


def plot_word_map(
    coords: torch.Tensor | np.ndarray,
    words: Sequence[str],
    word_classes: Mapping[str, Sequence[str]],
    ax: Axes | None = None,
    *,
    title: str | None = None,
    legend: bool = True,
) -> Axes:
    """Scatter words at 2-D coordinates (e.g. :func:`course_lib.word2vec.pca_2d`), one colour
    per word class, each point labelled with its word.

    Args:
        coords: ``(len(words), 2)``.
        words: the word of each row.
        word_classes: class name -> its words; words of no class are drawn in grey.
        ax: where to draw; a new figure if omitted.
        title: optional axes title.
        legend: whether to name the classes in a legend right of the axes.
    """
    points = to_numpy(coords)
    if points.ndim != 2 or points.shape[1] != 2 or points.shape[0] != len(words):
        raise ValueError(
            f"coords must have shape (len(words), 2) = ({len(words)}, 2), got {points.shape}"
        )
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 5))
    class_of = {word: name for name, members in word_classes.items() for word in members}
    colours = plt.get_cmap("tab10" if len(word_classes) <= 10 else "tab20")
    for index, name in enumerate(word_classes):
        rows = [i for i, word in enumerate(words) if class_of.get(word) == name]
        if rows:
            ax.scatter(points[rows, 0], points[rows, 1], s=22, color=colours(index), label=name)
    others = [i for i, word in enumerate(words) if word not in class_of]
    if others:
        ax.scatter(points[others, 0], points[others, 1], s=22, color="#999999", label="other")
    for (x, y), word in zip(points, words, strict=True):
        ax.annotate(word, (x, y), xytext=(3, 2), textcoords="offset points", fontsize=8)
    ax.set_xlabel("first principal component")
    ax.set_ylabel("second principal component")
    if legend:
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize="small")
    return _finish(ax, title)
