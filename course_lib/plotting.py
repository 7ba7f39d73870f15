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

__all__ = [
    "plot_attention",
    "plot_attention_heads",
    "plot_encoding_heatmap",
    "plot_encoding_waves",
    "plot_mask",
    "plot_word_map",
    "to_numpy",
]

ENCODING_CMAP = "RdBu_r"  # diverging: -1 blue, 0 white, +1 red
ATTENTION_CMAP = "Blues"  # sequential: weight 0 white, weight 1 dark blue
BLOCKED_COLOR = "#d9d9d9"  # cells a mask does not allow


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
                            fontsize="x-small", color=color)  # fmt: skip
    ax.set_xticks(range(len_k), keys, rotation=45, ha="right")
    ax.set_yticks(range(len_q), queries)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if highlight is not None:
        ax.add_patch(
            plt.Rectangle((-0.5, highlight - 0.5), len_k, 1, fill=False, color="#d62728", lw=2)
        )
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, label="attention weight")
    return ax


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
