"""Figures shared by the chapters and the widgets, drawn with matplotlib.

Every function draws into an ``Axes`` it is given (or a new one) and returns that ``Axes``,
so that a chapter can compose figures and a widget can redraw them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes

__all__ = ["plot_encoding_heatmap", "plot_encoding_waves", "plot_word_map", "to_numpy"]

ENCODING_CMAP = "RdBu_r"  # diverging: -1 blue, 0 white, +1 red


def to_numpy(values: torch.Tensor | np.ndarray) -> np.ndarray:
    """A detached CPU NumPy copy of a tensor (or the array itself)."""
    if isinstance(values, torch.Tensor):
        return values.detach().cpu().numpy()
    return np.asarray(values)


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
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, label="value")
    return ax


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
    if title:
        ax.set_title(title)
    return ax


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
        ax.annotate(word, (x, y), xytext=(3, 2), textcoords="offset points", fontsize=7)
    ax.set_xlabel("first principal component")
    ax.set_ylabel("second principal component")
    if legend:
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize="small")
    if title:
        ax.set_title(title)
    return ax
