"""The explorer of the chapter "The paper's training recipe" (core ipywidgets only, 7.7 and 8).

:class:`RecipeExplorer` -- choose ``d_model`` and the warm-up, and see the learning rate of
:func:`~course_lib.training.transformer_schedule` over the first steps with its peak; choose
the smoothing rate ``eps_ls`` (the paper's epsilon_ls) and the number of classes ``|V|``, and
see the smoothed target of :func:`~course_lib.training.smoothed_targets` with the lowest loss
it allows (:func:`~course_lib.training.smoothed_loss_minimum`).

In the HTML book the explorer shows the state it was saved with; open the chapter in Colab
or Jupyter to use its controls.
"""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch

from course_lib._layout import control_row, fitting
from course_lib.training import smoothed_loss_minimum, smoothed_targets, transformer_schedule

__all__ = ["RecipeExplorer"]

_WIDE = fitting("340px")
_LABEL = {"description_width": "110px"}
_STEPS = 20_000  # the steps drawn


class RecipeExplorer(widgets.VBox):
    """The learning-rate schedule and the label-smoothed target, for chosen settings.

    Args:
        d_model, warmup_steps: the schedule's settings (the paper's base model: 512, 4000).
        epsilon, num_classes: the label smoothing ``eps_ls`` and the number of classes ``|V|``.
    """

    def __init__(
        self,
        d_model: int = 512,
        warmup_steps: int = 4000,
        epsilon: float = 0.1,
        num_classes: int = 10,
    ) -> None:
        self.d_model = widgets.Dropdown(
            options=[64, 128, 256, 512, 1024],
            value=d_model,
            description="$d_{\\text{model}}$",
            layout=_WIDE,
            style=_LABEL,
        )
        self.warmup = widgets.IntSlider(
            value=warmup_steps,
            min=100,
            max=10_000,
            step=100,
            description="warm-up steps",
            continuous_update=False,
            layout=_WIDE,
            style=_LABEL,
        )
        self.epsilon = widgets.FloatSlider(
            value=epsilon,
            min=0.0,
            max=0.5,
            step=0.05,
            description="$\\epsilon_{ls}$ (smoothing)",
            continuous_update=False,
            layout=_WIDE,
            style=_LABEL,
        )
        self.num_classes = widgets.IntSlider(
            value=num_classes,
            min=2,
            max=64,
            description="classes $|\\mathcal{V}|$",
            continuous_update=False,
            layout=_WIDE,
            style=_LABEL,
        )
        self.readout = widgets.HTML()
        controls = {
            "d_model": self.d_model,
            "warmup": self.warmup,
            "epsilon": self.epsilon,
            "num_classes": self.num_classes,
        }
        self.output = widgets.interactive_output(self._draw, controls)
        rows = [
            control_row([self.d_model, self.warmup]),
            control_row([self.epsilon, self.num_classes]),
        ]
        super().__init__([*rows, self.readout, self.output])

    @staticmethod
    def summary(d_model: int, warmup: int, epsilon: float, num_classes: int) -> str:
        """The readout: the peak rate and where it is, the target and the lowest loss."""
        peak = transformer_schedule(warmup, d_model, warmup)
        target = smoothed_targets(torch.tensor(0), num_classes, epsilon)
        lowest = smoothed_loss_minimum(num_classes, epsilon)
        return (
            f"peak learning rate <b>{peak:.2e}</b> at step {warmup} "
            f"(= ({d_model} &times; {warmup})<sup>-0.5</sup>); "
            f"target: <b>{target[0].item():.3f}</b> on the label, "
            f"<b>{target[1].item():.4f}</b> on each of the other {num_classes - 1} classes; "
            f"lowest possible loss <b>{lowest:.3f}</b>"
        )

    def _draw(self, d_model: int, warmup: int, epsilon: float, num_classes: int) -> None:
        self.readout.value = self.summary(d_model, warmup, epsilon, num_classes)
        steps = range(1, _STEPS + 1, 20)
        rates = [transformer_schedule(s, d_model, warmup) for s in steps]
        target = smoothed_targets(torch.tensor(0), num_classes, epsilon)
        fig, (left, right) = plt.subplots(1, 2, figsize=(7.2, 3))
        left.plot(list(steps), rates)
        left.axvline(warmup, color="grey", lw=0.8, ls="--")
        left.set_xlabel("step")
        left.set_ylabel("learning rate")
        left.set_title(f"$d_\\mathrm{{model}}$ {d_model}, warm-up {warmup}")
        right.bar(range(num_classes), target.numpy(), color="tab:orange")
        right.set_ylim(0, 1)
        right.set_xlabel("class (the label is 0)")
        right.set_ylabel("target probability")
        right.set_title(
            f"smoothed target, $\\epsilon_{{ls}}$ {epsilon:.2f}, $|\\mathcal{{V}}|$ {num_classes}"
        )
        fig.tight_layout()
        plt.show()
        plt.close(fig)
