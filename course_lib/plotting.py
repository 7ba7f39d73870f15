"""Figures shared by the chapters and the widgets, drawn with matplotlib.

Every function draws into an ``Axes`` it is given (or a new one) and returns that ``Axes``,
so that a chapter can compose figures and a widget can redraw them.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes

__all__ = ["plot_encoding_heatmap", "plot_encoding_waves", "to_numpy"]

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
