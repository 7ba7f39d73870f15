"""Exercises of the chapter "The encoder" (``chapters/encoder.ipynb``)."""

from __future__ import annotations

import math

import torch

from course_lib.answers import ENCODER_LAYER, Case
from course_lib.attention import padding_mask
from course_lib.encoder import EncoderLayer
from course_lib.exercises._registry import (
    CodeExercise,
    Mistake,
    ValueExercise,
    register,
)

CHAPTER = "encoder"


def encoder_layer_arguments(
    batch: int,
    length: int,
    d_model: int,
    num_heads: int,
    d_ff: int,
    norm_first: bool,
    lengths: list[int] | None,
    generator: torch.Generator,
) -> tuple:
    """The arguments of ``encoder_layer``: inputs, a padding mask (or None) and weights.

    ``w_attention`` stacks W^Q, W^K, W^V and W^O, each ``(d_model, d_model)``; ``w_1`` is
    ``(d_model, d_ff)`` and ``w_2`` ``(d_ff, d_model)``; ``gain`` and ``bias`` are
    ``(2, d_model)``, row 0 for the norm around the attention, row 1 for the feed-forward's.
    """
    x = torch.randn(batch, length, d_model, generator=generator)
    mask = None
    if lengths is not None:
        ids = torch.ones(batch, length, dtype=torch.long)
        for row, real in enumerate(lengths):
            ids[row, real:] = 0
        mask = padding_mask(ids, 0)  # (batch, 1, length)
    w_attention = torch.randn(4, d_model, d_model, generator=generator) / math.sqrt(d_model)
    w_1 = torch.randn(d_model, d_ff, generator=generator) / math.sqrt(d_model)
    w_2 = torch.randn(d_ff, d_model, generator=generator) / math.sqrt(d_ff)
    gain = 1 + 0.3 * torch.randn(2, d_model, generator=generator)
    bias = 0.3 * torch.randn(2, d_model, generator=generator)
    return (x, mask, w_attention, w_1, w_2, gain, bias, num_heads, norm_first)


def _encoder_cases(seed: int) -> list[Case]:
    fixed = torch.Generator().manual_seed(0)
    settings = [
        ("post-norm, batch 2, 5 tokens, d_model 8, 2 heads, no mask",
         (2, 5, 8, 2, 16, False, None)),
        ("post-norm with a padding mask (lengths 5 and 3)", (2, 5, 8, 2, 16, False, [5, 3])),
        ("pre-norm, no mask", (2, 5, 8, 2, 16, True, None)),
        ("pre-norm with a padding mask (lengths 2 and 5)", (2, 5, 8, 2, 16, True, [2, 5])),
        ("a single token, 1 head", (1, 1, 4, 1, 8, False, None)),
        ("d_model 16, 4 heads, d_ff 64, post-norm", (3, 6, 16, 4, 64, False, [6, 4, 1])),
    ]  # fmt: skip
    cases = [Case(label, encoder_layer_arguments(*s, generator=fixed)) for label, s in settings]
    draw = torch.Generator().manual_seed(seed)
    for _ in range(3):
        batch, length, heads, d_head = (
            int(torch.randint(low, high, (), generator=draw))
            for low, high in ((1, 4), (1, 8), (1, 5), (1, 5))
        )
        norm_first = bool(torch.randint(0, 2, (), generator=draw))
        lengths = torch.randint(1, length + 1, (batch,), generator=draw).tolist()
        d_model = heads * d_head
        order = "pre-norm" if norm_first else "post-norm"
        label = (
            f"random: {order}, batch {batch}, {length} tokens, d_model {d_model}, "
            f"{heads} heads, lengths {lengths}"
        )
        arguments = encoder_layer_arguments(batch, length, d_model, heads, 2 * d_model,
                                            norm_first, lengths, draw)  # fmt: skip
        cases.append(Case(label, arguments))
    return cases


def _reference_encoder_layer(
    x: torch.Tensor,
    mask: torch.Tensor | None,
    w_attention: torch.Tensor,
    w_1: torch.Tensor,
    w_2: torch.Tensor,
    gain: torch.Tensor,
    bias: torch.Tensor,
    num_heads: int,
    norm_first: bool,
) -> torch.Tensor:
    """``course_lib``'s EncoderLayer holding these weights (and zero biases)."""
    d_model, d_ff = w_1.shape
    layer = EncoderLayer(d_model, num_heads, d_ff, norm_first=norm_first).to(x.dtype).eval()
    attention = layer.self_attention
    with torch.no_grad():
        for linear, weight in zip(
            (attention.w_q, attention.w_k, attention.w_v, attention.w_o), w_attention, strict=True
        ):
            linear.weight.copy_(weight.T)  # nn.Linear computes x @ weight.T
            linear.bias.zero_()
        layer.feed_forward.w_1.weight.copy_(w_1.T)
        layer.feed_forward.w_2.weight.copy_(w_2.T)
        layer.feed_forward.w_1.bias.zero_()
        layer.feed_forward.w_2.bias.zero_()
        for number, norm in enumerate((layer.norm1, layer.norm2)):
            norm.weight.copy_(gain[number])
            norm.bias.copy_(bias[number])
        return layer(x, mask)


ENCODER_LAYER = register(
    CodeExercise(
        id="encoder-layer",
        chapter=CHAPTER,
        title="An encoder layer from its sublayers",
        points=4,
        function="encoder_layer",
        parameters=(
            "x",
            "mask",
            "w_attention",
            "w_1",
            "w_2",
            "gain",
            "bias",
            "num_heads",
            "norm_first",
        ),
        reference=_reference_encoder_layer,
        cases=_encoder_cases,
        seed=2407,
        atol=1e-4,
        rtol=1e-4,
        blocked=(EncoderLayer.forward, torch.nn.TransformerEncoderLayer.forward),
        blocked_ops=ENCODER_LAYER,
        hints=(
            "Two sublayer connections, one after the other: the first wraps self_attention "
            "with gain[0] and bias[0], the second wraps feed_forward with gain[1] and bias[1]. "
            "The second one starts from the output of the first.",
            "Post-norm (`norm_first=False`): $h = \\mathrm{LayerNorm}(h + \\mathrm{Sublayer}(h))$. "
            "Pre-norm: $h = h + \\mathrm{Sublayer}(\\mathrm{LayerNorm}(h))$. "
            "`torch.nn.functional.layer_norm(h, (d_model,), "
            "gain[0], bias[0])` normalises every token's features.",
            "Pass the mask to self_attention; the feed-forward network needs none, since it "
            "treats every position on its own.",
        ),
    )
)


def _encoder_parameters(d_model: int = 512, d_ff: int = 2048, norms: bool = True,
                        attention_copies: int = 4) -> float:  # fmt: skip
    attention = attention_copies * (d_model * d_model + d_model)
    feed_forward = d_model * d_ff + d_ff + d_ff * d_model + d_model
    return float(attention + feed_forward + (4 * d_model if norms else 0))


def _count(**kwargs) -> torch.Tensor:
    return torch.tensor([_encoder_parameters(**kwargs)], dtype=torch.float64)


ENCODER_PARAMETERS = register(
    ValueExercise(
        id="encoder-layer-parameters",
        chapter=CHAPTER,
        title="Count the parameters of an encoder layer",
        points=2,
        question=(
            "How many trainable numbers does one encoder layer of the paper's base model hold: "
            "`EncoderLayer(d_model=512, num_heads=8, d_ff=2048)`? Count every weight and bias of "
            "the attention, the feed-forward network and both layer normalizations. Write the "
            "number without separators."
        ),
        expected=_count,
        atol=0.5,
        entry_names=("number of parameters",),
        mistakes=(
            Mistake(
                lambda: _count(norms=False),
                "the two layer normalizations are missing: "
                "each has a gain and a bias of $d_{model}$ numbers",
            ),
            Mistake(
                lambda: _count(attention_copies=3),
                "$W^O$ is missing from the attention: four $d_{model} \\times d_{model}$ matrices "
                "with biases",
            ),
            Mistake(
                lambda: _count(d_ff=512),
                "the hidden layer of the feed-forward network has $d_{ff} = 2048$ units, not "
                "$d_{model}$",
            ),
        ),
        hints=(
            "Attention: $W^Q$, $W^K$, $W^V$ and $W^O$, each $512 \\times 512$ with a bias of 512. "
            "The heads share these matrices, so the head count does not change the total.",
            "Feed-forward: $W_1$ is $512 \\times 2048$ with a bias of 2048, $W_2$ is $2048 \\times "
            "512$ with a bias of 512. Each LayerNorm has 512 gains and 512 biases.",
        ),
    )
)
