"""The position-wise feed-forward network (Vaswani et al., 2017, section 3.3).

Every encoder and decoder layer ends with the same small network, applied to each position
separately and identically::

    FFN(x) = max(0, x W_1 + b_1) W_2 + b_2

with ``W_1`` of shape ``(d_model, d_ff)`` and ``W_2`` of shape ``(d_ff, d_model)``; the paper
uses ``d_model = 512`` and ``d_ff = 2048``. Attention mixes information *between* positions;
this network transforms each position's vector *on its own*: the same weights at every
position, and no position sees another.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib._checks import positive_int, probability

__all__ = ["ACTIVATIONS", "FeedForward", "activation_of", "copy_linear", "gelu_tanh"]


def gelu_tanh(x: Tensor) -> Tensor:
    """GELU's tanh approximation, ``x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``: the GELU
    of GPT-2 (Hugging Face's ``"gelu_new"``), within ``1e-3`` of the exact ``F.gelu``."""
    return F.gelu(x, approximate="tanh")


ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": gelu_tanh,
}


class FeedForward(nn.Module):
    """Two linear maps with an activation between them, applied to every position alike.

    Args:
        d_model: size of the input and output vectors.
        d_ff: size of the hidden layer (the paper uses ``4 * d_model``).
        dropout: probability of dropping hidden units in training (after the activation, as
            in ``nn.TransformerEncoderLayer``).
        activation: ``"relu"`` (the paper's), ``"gelu"`` (BERT's) or ``"gelu_tanh"``, the tanh
            approximation of GELU (GPT-2's, :func:`gelu_tanh`).
        bias: whether the two linear maps have biases ``b_1`` and ``b_2``.

    Shape:
        ``forward(x)``: ``x`` is ``(batch, length, d_model)`` (any ``(*, d_model)`` works);
        the result has the same shape.
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        dropout: float = 0.0,
        activation: str = "relu",
        bias: bool = True,
    ) -> None:
        super().__init__()
        self.d_model = positive_int("d_model", d_model)
        self.d_ff = positive_int("d_ff", d_ff)
        if activation not in ACTIVATIONS:
            known = sorted(ACTIVATIONS)
            raise ValueError(f"activation must be one of {known}, got {activation!r}")
        self.activation = activation
        self.w_1 = nn.Linear(self.d_model, self.d_ff, bias=bias)
        self.w_2 = nn.Linear(self.d_ff, self.d_model, bias=bias)
        self.dropout = nn.Dropout(probability("dropout", dropout))

    def forward(self, x: Tensor) -> Tensor:
        """``W_2(dropout(activation(W_1 x)))`` at every position: ``(..., d_model)``."""
        if x.dim() == 0 or x.size(-1) != self.d_model:
            raise ValueError(
                f"x must have d_model={self.d_model} features in its last "
                f"axis, e.g. (batch, length, {self.d_model}); "
                f"got {tuple(x.shape)}"
            )
        hidden = ACTIVATIONS[self.activation](self.w_1(x))  # (..., d_ff)
        return self.w_2(self.dropout(hidden))  # (..., d_model)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, d_ff={self.d_ff}, activation={self.activation!r}"


def activation_of(layer: nn.Module) -> str:
    """The name of the activation of an ``nn.TransformerEncoderLayer`` or ``...DecoderLayer``.

    Raises:
        ValueError: for an activation other than ReLU or GELU (a custom function).
    """
    code = getattr(layer, "activation_relu_or_gelu", None)
    if code is None:  # decoder layers of some versions only keep the function
        function = getattr(layer, "activation", None)
        code = {F.relu: 1, F.gelu: 2}.get(function, 0)  # type: ignore[arg-type]
    if code not in (1, 2):
        raise ValueError(
            f"from_torch takes layers with activation 'relu' or 'gelu', got {layer.activation!r}"
        )
    return "relu" if code == 1 else "gelu"


def copy_linear(target: nn.Linear, source: nn.Linear) -> None:
    """Copy the weight and bias of ``source`` into ``target`` (same shapes)."""
    if source.bias is None:
        raise ValueError("from_torch takes layers with biases (bias=True), got bias=False")
    with torch.no_grad():
        target.weight.copy_(source.weight)
        target.bias.copy_(source.bias)
