"""Interactive explorers for the chapters, built from core ipywidgets only.

They work with ipywidgets 7.7 (what Google Colab ships) and 8. In the HTML book a widget shows
the state it was saved with; open the chapter in Colab or Jupyter to move its controls.
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import matplotlib.pyplot as plt

from course_lib.plotting import plot_encoding_heatmap, plot_encoding_waves
from course_lib.positional import angular_frequencies, sinusoidal_positional_encoding

__all__ = ["PositionalEncodingExplorer", "positional_encoding_explorer"]

_WIDE = widgets.Layout(width="340px")
_LABEL = {"description_width": "90px"}


class PositionalEncodingExplorer(widgets.VBox):
    """Sliders for position, dimension, ``d_model`` and base that redraw the encoding.

    Left: the encoding table as a heatmap with the chosen position (row) and dimension
    (column) marked. Right: the chosen dimension as a wave over the positions, with the chosen
    position's value marked. Above the plots, the value and the formula that produced it.

    Attributes:
        position, dimension, d_model, base: the four sliders.
        readout: an HTML widget with the chosen entry and its formula.
        output: the Output widget holding the figure.
    """

    def __init__(
        self,
        max_len: int = 64,
        d_model: int = 32,
        base: float = 10000.0,
        position: int = 10,
        dimension: int = 6,
    ) -> None:
        sinusoidal_positional_encoding(max_len, d_model, base)  # validates the arguments
        if not (0 <= position < max_len and 0 <= dimension < d_model):
            raise ValueError(
                f"position must be in 0..{max_len - 1} and dimension in 0..{d_model - 1}, "
                f"got position={position}, dimension={dimension}"
            )
        self.max_len = max_len
        self.position = widgets.IntSlider(
            value=position, min=0, max=max_len - 1, description="position",
            continuous_update=False, layout=_WIDE, style=_LABEL,
        )  # fmt: skip
        self.dimension = widgets.IntSlider(
            value=dimension, min=0, max=d_model - 1, description="dimension j",
            continuous_update=False, layout=_WIDE, style=_LABEL,
        )  # fmt: skip
        self.d_model = widgets.IntSlider(
            value=d_model, min=2, max=128, step=2, description="d_model",
            continuous_update=False, layout=_WIDE, style=_LABEL,
        )  # fmt: skip
        self.base = widgets.FloatLogSlider(
            value=base, base=10, min=1, max=5, step=0.25, description="base",
            continuous_update=False, layout=_WIDE, style=_LABEL, readout_format=".6g",
        )  # fmt: skip
        self.readout = widgets.HTML()
        self.d_model.observe(self._on_d_model, names="value")
        self.output = widgets.interactive_output(
            self._draw,
            {"position": self.position, "dimension": self.dimension,
             "d_model": self.d_model, "base": self.base},
        )  # fmt: skip
        super().__init__(
            [
                widgets.HBox([self.position, self.dimension]),
                widgets.HBox([self.d_model, self.base]),
                self.readout,
                self.output,
            ]
        )

    def _on_d_model(self, change: dict) -> None:
        # The dimension slider cannot point past the last column (ipywidgets clamps its value).
        self.dimension.max = change["new"] - 1

    def describe(self, position: int, dimension: int, d_model: int, base: float) -> str:
        """The chosen entry, its formula and its wavelength, as HTML."""
        pair = dimension // 2
        omega = float(angular_frequencies(d_model, base)[pair])
        angle = position * omega
        func, value = ("sin", math.sin(angle)) if dimension % 2 == 0 else ("cos", math.cos(angle))
        return (
            f"<b>PE[{position}, {dimension}]</b> = {func}({position} &middot; "
            f"{base:.6g}<sup>&minus;{2 * pair}/{d_model}</sup>) = {func}({angle:.4f}) = "
            f"<b>{value:.4f}</b> &nbsp;&nbsp; (pair i = {pair}, wavelength "
            f"2&pi;/&omega;<sub>{pair}</sub> = {2 * math.pi / omega:.4g} positions)"
        )

    def _draw(self, position: int, dimension: int, d_model: int, base: float) -> None:
        dimension = min(dimension, d_model - 1)
        self.readout.value = self.describe(position, dimension, d_model, base)
        pe = sinusoidal_positional_encoding(self.max_len, d_model, base)
        fig, (ax_map, ax_wave) = plt.subplots(
            1, 2, figsize=(11, 3.6), gridspec_kw={"width_ratios": [1.15, 1]}
        )
        plot_encoding_heatmap(pe, ax_map, title=f"d_model = {d_model}, base = {base:.6g}")
        ax_map.axhline(position, color="black", linewidth=1)
        ax_map.axvline(dimension, color="black", linewidth=1, linestyle="--")
        kind = "sin" if dimension % 2 == 0 else "cos"
        title = f"dimension j = {dimension} ({kind}, pair i = {dimension // 2})"
        plot_encoding_waves(pe, [dimension], ax_wave, title=title, legend=False)
        ax_wave.plot([position], [float(pe[position, dimension])], "o", color="black")
        fig.tight_layout()
        plt.show()
        plt.close(fig)


def positional_encoding_explorer(**kwargs) -> PositionalEncodingExplorer:
    """Build a :class:`PositionalEncodingExplorer`; display it as a cell's last expression."""
    return PositionalEncodingExplorer(**kwargs)
