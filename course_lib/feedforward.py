"""The position-wise feed-forward network (Vaswani et al., 2017, section 3.3).

Every encoder and decoder layer ends with the same small network, applied to each position
separately and identically::

    FFN(x) = max(0, x W_1 + b_1) W_2 + b_2

with ``W_1`` of shape ``(d_model, d_ff)`` and ``W_2`` of shape ``(d_ff, d_model)``; the paper
uses ``d_model = 512`` and ``d_ff = 2048``. Attention mixes information *between* positions;
this network transforms each position's vector *on its own*: the same weights at every
position, and no position sees another.

:class:`GatedFeedForward` is the gated form of today's models (Shazeer, 2020): a third matrix
whose output multiplies the activated hidden units feature by feature,
``FFN_SwiGLU(x) = (Swish(x W) * x V) W_2``, with Swish_1 = SiLU (Llama, Mistral, Qwen).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib._checks import check_tensor, module_dtype, positive_int, probability

__all__ = [
    "ACTIVATIONS",
    "FeedForward",
    "GatedFeedForward",
    "activation_of",
    "copy_linear",
    "gelu_tanh",
    "swiglu_hidden_size",
]


def gelu_tanh(x: Tensor) -> Tensor:
    """GELU's tanh approximation, ``x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``: the GELU
    of GPT-2 (Hugging Face's ``"gelu_new"``), within ``1e-3`` of the exact ``F.gelu``."""
    return F.gelu(x, approximate="tanh")


ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": gelu_tanh,
    "silu": F.silu,  # x * sigmoid(x), Swish with beta = 1: the "Swish" of SwiGLU
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
        self.d_model, self.d_ff, self.activation = _settings(d_model, d_ff, activation)
        self.w_1 = nn.Linear(self.d_model, self.d_ff, bias=bias)
        self.w_2 = nn.Linear(self.d_ff, self.d_model, bias=bias)
        self.dropout = nn.Dropout(probability("dropout", dropout))

    def forward(self, x: Tensor) -> Tensor:
        """``W_2(dropout(activation(W_1 x)))`` at every position: ``(..., d_model)``."""
        _check_input(self, x)
        hidden = ACTIVATIONS[self.activation](self.w_1(x))  # (..., d_ff)
        return self.w_2(self.dropout(hidden))  # (..., d_model)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, d_ff={self.d_ff}, activation={self.activation!r}"


class GatedFeedForward(nn.Module):
    """The gated feed-forward network: ``W_2(activation(W_1 x) * W_3 x)`` at every position.

    Shazeer (2020) writes ``FFN_SwiGLU(x, W, V, W_2) = (Swish_1(x W) * x V) W_2``: the hidden
    units of one map, through the activation, open and close like gates on the hidden units
    of a second, linear map. With SiLU (= Swish_1) it is SwiGLU, Llama's; with GELU, GEGLU. The
    names ``w_1`` (gate), ``w_3`` (the linear map) and ``w_2`` (down) are those of Meta's Llama
    code (Hugging Face's ``gate_proj``, ``up_proj``, ``down_proj``). Three matrices instead of
    two: for the parameters of a ReLU network of hidden size ``4 d_model``, the hidden size is
    ``2/3 * 4 d_model`` (:func:`swiglu_hidden_size`).

    Args:
        d_model: size of the input and output vectors.
        d_ff: the hidden size.
        dropout: on the gated hidden units, in training.
        activation: of :data:`ACTIVATIONS`; ``"silu"`` (SwiGLU) by default.
        bias: biases in the three maps (Llama and the paper's experiments have none).

    Shape:
        ``forward(x)``: ``(..., d_model)`` -> the same shape.
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        dropout: float = 0.0,
        activation: str = "silu",
        bias: bool = False,
    ) -> None:
        super().__init__()
        self.d_model, self.d_ff, self.activation = _settings(d_model, d_ff, activation)
        self.w_1 = nn.Linear(self.d_model, self.d_ff, bias=bias)  # the gate
        self.w_3 = nn.Linear(self.d_model, self.d_ff, bias=bias)  # what the gate lets through
        self.w_2 = nn.Linear(self.d_ff, self.d_model, bias=bias)  # back to d_model
        self.dropout = nn.Dropout(probability("dropout", dropout))

    def forward(self, x: Tensor) -> Tensor:
        """``W_2(dropout(activation(W_1 x) * W_3 x))`` at every position: ``(..., d_model)``."""
        _check_input(self, x)
        gate = ACTIVATIONS[self.activation](self.w_1(x))  # (..., d_ff)
        return self.w_2(self.dropout(gate * self.w_3(x)))  # (..., d_model)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, d_ff={self.d_ff}, activation={self.activation!r}"


def _settings(d_model: int, d_ff: int, activation: str) -> tuple[int, int, str]:
    """The checked ``d_model``, ``d_ff`` and activation name of either network."""
    d_model, d_ff = positive_int("d_model", d_model), positive_int("d_ff", d_ff)
    if activation not in ACTIVATIONS:
        known = sorted(ACTIVATIONS)
        raise ValueError(f"activation must be one of {known}, got {activation!r}")
    return d_model, d_ff, activation


def _check_input(network: FeedForward | GatedFeedForward, x: Tensor) -> None:
    """Raise unless ``x`` is a tensor of ``network``'s dtype with ``d_model`` features last."""
    check_tensor("x", x)
    if x.dim() == 0 or x.size(-1) != network.d_model:
        raise ValueError(
            f"x must have d_model={network.d_model} features in its last "
            f"axis, e.g. (batch, length, {network.d_model}); "
            f"got {tuple(x.shape)}"
        )
    module_dtype("x", x, network)


def swiglu_hidden_size(
    d_model: int, multiple_of: int = 1, ffn_dim_multiplier: float | None = None
) -> int:
    """The hidden size of a gated network with about the parameters of a ``4 d_model`` one.

    Two matrices of ``d_model x 4 d_model`` hold as many weights as three of ``d_model x
    (2/3) 4 d_model``. Meta's Llama code takes ``int(2 * 4 * d_model / 3)``, multiplies it by
    ``ffn_dim_multiplier`` if given, and rounds *up* to a multiple of ``multiple_of`` (256 in
    Llama 1 and Llama 2's 7B and 13B, 4096 in Llama-2-70B): Llama-2-7B's ``d_model = 4096``
    gives 11008.
    """
    d_model = positive_int("d_model", d_model)
    multiple_of = positive_int("multiple_of", multiple_of)
    hidden = int(2 * 4 * d_model / 3)
    if ffn_dim_multiplier is not None:
        if isinstance(ffn_dim_multiplier, bool) or not ffn_dim_multiplier > 0:
            wanted = "ffn_dim_multiplier must be a positive number"
            raise ValueError(f"{wanted}, got {ffn_dim_multiplier!r}")
        hidden = int(ffn_dim_multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def activation_of(layer: nn.Module) -> str:
    """The name in :data:`ACTIVATIONS` of the activation of an ``nn.TransformerEncoderLayer``
    or ``nn.TransformerDecoderLayer``, read from the function the layer applies.

    Every form PyTorch takes is recognised: the strings ``"relu"`` and ``"gelu"`` (the layer
    keeps ``F.relu`` or ``F.gelu``), the functions ``F.relu``, ``torch.relu`` and ``F.gelu``,
    and the modules ``nn.ReLU()``, ``nn.GELU()`` and ``nn.GELU(approximate="tanh")``.

    Raises:
        ValueError: for any other activation (a custom function), naming it.
    """
    function = getattr(layer, "activation", None)
    name = _activation_name(function)
    if name is None:
        raise ValueError(
            "from_torch takes layers whose activation is ReLU or GELU: 'relu', 'gelu', "
            "F.relu, F.gelu, nn.ReLU(), nn.GELU() or nn.GELU(approximate='tanh'); "
            f"got {function!r}"
        )
    return name


def _activation_name(function: object) -> str | None:
    """``"relu"``, ``"gelu"``, ``"gelu_tanh"`` or ``None`` (not one of them) for a function."""
    gelu_forms = {"none": "gelu", "tanh": "gelu_tanh"}
    if function is F.relu or function is torch.relu or isinstance(function, nn.ReLU):
        return "relu"
    if function is F.gelu:
        return "gelu"
    if function is gelu_tanh:
        return "gelu_tanh"
    if isinstance(function, nn.GELU):
        return gelu_forms.get(function.approximate)
    if isinstance(function, partial) and function.func is F.gelu and not function.args:
        if set(function.keywords) <= {"approximate"}:
            return gelu_forms.get(function.keywords.get("approximate", "none"))
    return None


def copy_linear(target: nn.Linear, source: nn.Linear) -> None:
    """Copy the weight and bias of ``source`` into ``target`` (same shapes)."""
    if source.bias is None:
        raise ValueError("from_torch takes layers with biases (bias=True), got bias=False")
    with torch.no_grad():
        target.weight.copy_(source.weight)
        target.bias.copy_(source.bias)
