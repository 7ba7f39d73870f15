"""Exercises of the chapter "A modern decoder" (``chapters/a-modern-decoder.ipynb``)."""

from __future__ import annotations

import torch

from course_lib.answers import Case
from course_lib.encoder import EncoderLayer
from course_lib.exercises._registry import (
    ChoiceExercise,
    CodeExercise,
    Mistake,
    Option,
    ValueExercise,
    register,
)
from course_lib.feedforward import swiglu_hidden_size
from course_lib.huggingface import rotary_row_order

CHAPTER = "a-modern-decoder"

# The layer of the first exercise: d_model, query heads, key/value heads, SwiGLU hidden size.
LAYER = {"d_model": 512, "num_heads": 8, "num_kv_heads": 2, "d_ff": 1376}


def _layer_count() -> int:
    """The parameters of the real layer, built on the meta device: no memory, and no draw
    from the global random generator."""
    with torch.device("meta"):
        layer = _layer()
    return sum(p.numel() for p in layer.parameters())


def _layer() -> EncoderLayer:
    return EncoderLayer(
        LAYER["d_model"],
        LAYER["num_heads"],
        LAYER["d_ff"],
        norm_first=True,
        activation="silu",
        norm="rms",
        gated=True,
        num_kv_heads=LAYER["num_kv_heads"],
        bias=False,
    )


def _count(value: int) -> torch.Tensor:
    return torch.tensor([float(value)], dtype=torch.float64)


def _layer_mistake(change: int) -> torch.Tensor:
    return _count(_layer_count() + change)


_D, _F = LAYER["d_model"], LAYER["d_ff"]
_KV = LAYER["num_kv_heads"] * _D // LAYER["num_heads"]  # g * d_head = 128 features

LAYER_PARAMETERS = register(
    ValueExercise(
        id="modern-layer-parameters",
        chapter=CHAPTER,
        title="The parameters of one Llama-style layer",
        points=2,
        question=(
            "A Llama-style layer has $d_{model} = 512$, $h = 8$ query heads, $g = 2$ key/value "
            "heads, a SwiGLU feed-forward network of hidden size $d_{ff} = 1376$, RMSNorm "
            "before each sublayer, and no biases. How many parameters does the layer have?"
        ),
        expected=lambda: _count(_layer_count()),
        atol=0.5,
        entry_names=("parameters",),
        mistakes=(
            Mistake(
                lambda: _layer_mistake(-_D * _F),
                "that counts two matrices in the feed-forward network; SwiGLU has three, "
                "$W_1$ (the gate), $W_3$ and $W_2$, each $d_{model} \\times d_{ff}$",
            ),
            Mistake(
                lambda: _layer_mistake(2 * _D * (_D - _KV)),
                "that gives $W^K$ and $W^V$ all $h = 8$ heads; with $g = 2$ key/value heads "
                "each maps $d_{model}$ to $g \\cdot d_{head} = 128$ features, not 512",
            ),
            Mistake(
                lambda: _layer_mistake(_D + _KV + _KV + _D + 2 * _F + _D + 2 * _D),
                "that adds biases (to the seven linear maps, and a bias to each norm); "
                "Llama's linear maps have none, and RMSNorm has a gain only",
            ),
            Mistake(
                lambda: _layer_mistake(_D + _KV + _KV + _D + 2 * _F + _D),
                "that adds a bias to each of the seven linear maps; Llama's have none",
            ),
            Mistake(
                lambda: _layer_mistake(-2 * _D),
                "almost: the two RMSNorms have a gain of $d_{model}$ numbers each",
            ),
        ),
        hints=(
            "Attention: $W^Q$ and $W^O$ are $d_{model} \\times d_{model}$; $W^K$ and $W^V$ "
            "map $d_{model}$ to $g \\cdot d_{head}$ with $d_{head} = d_{model} / h$.",
            "Feed-forward: three matrices of $d_{model} \\times d_{ff}$. Norms: two gains of "
            "$d_{model}$. No biases anywhere.",
        ),
    )
)


def _llama_405b_hidden() -> torch.Tensor:
    return _count(swiglu_hidden_size(16384, multiple_of=4096, ffn_dim_multiplier=1.2))


HIDDEN_SIZE = register(
    ValueExercise(
        id="modern-hidden-size",
        chapter=CHAPTER,
        title="Llama 3.1 405B's feed-forward size",
        points=2,
        question=(
            "Meta's Llama code sizes the SwiGLU network from $d_{model}$: it takes "
            "$\\lfloor 2 \\cdot 4 d_{model} / 3 \\rfloor$, multiplies it by "
            "`ffn_dim_multiplier` and keeps the whole part, then rounds up (never down) to a "
            "multiple of `multiple_of`. The largest Llama 3.1, 405B, has $d_{model} = 16384$, "
            "`ffn_dim_multiplier` = 1.2 and `multiple_of` = 4096. What is its hidden size "
            "$d_{ff}$? (One number, without separators.)"
        ),
        expected=_llama_405b_hidden,
        atol=0.5,
        entry_names=("d_ff",),
        mistakes=(
            Mistake(
                lambda: _count(43690),
                "that is $\\lfloor 2 \\cdot 4 \\cdot 16384 / 3 \\rfloor$ before the multiplier "
                "and the rounding",
            ),
            Mistake(
                lambda: _count(52428),
                "the multiplier is applied, but the result must still be rounded up to a "
                "multiple of 4096",
            ),
            Mistake(
                lambda: _count(49152),
                "that rounds down; the code rounds up, to the next multiple of 4096",
            ),
            Mistake(
                lambda: _count(65536),
                "$4 d_{model}$ is the hidden size of a two-matrix network; SwiGLU starts from "
                "two thirds of it, so that its three matrices hold about as many weights",
            ),
            Mistake(
                lambda: _count(45056),
                "that rounds $\\lfloor 2 \\cdot 4 d_{model} / 3 \\rfloor$ up without the "
                "multiplier 1.2",
            ),
        ),
        hints=(
            "$2 \\cdot 4 \\cdot 16384 / 3 = 43690.67$; keep 43690.",
            "$1.2 \\cdot 43690 = 52428$; then go up to the next multiple of 4096.",
        ),
    )
)


POSITION_TABLE = register(
    ChoiceExercise(
        id="modern-position-table",
        chapter=CHAPTER,
        title="Where did the position table go?",
        points=1,
        question=(
            "GPT-2's checkpoint holds a table of learned positions, `transformer.wpe.weight` "
            "($1024 \\times 768$ numbers); a Llama checkpoint has no tensor for positions at all. "
            "Which change explains it?"
        ),
        options=(
            Option(
                "a",
                "RMSNorm: dividing by the root mean square makes positions unnecessary.",
                "No: a norm rescales each token's features on its own and knows nothing of "
                "positions; it removes a bias vector per norm, not a position table.",
            ),
            Option(
                "b",
                "Rotary positions: every attention layer rotates its queries and keys by angles "
                "computed from the positions, with no parameters.",
                "Right: the angles $m \\omega_i$ come from a formula, as the sinusoids did, and "
                "they act inside attention instead of being added to the embeddings, so "
                "nothing position-related is stored.",
            ),
            Option(
                "c",
                "The causal mask: a decoder needs no position information, so Llama has none.",
                "No: the mask gives a decoder only a weak sense of position; Llama does encode "
                "positions, by rotating queries and keys in every layer.",
            ),
            Option(
                "d",
                "The positions are folded into the token embedding table, which is why Llama's "
                "vocabulary is larger.",
                "No: a token's embedding is the same at every position; the vocabulary size "
                "has nothing to do with positions.",
            ),
        ),
        answer="b",
        hints=(
            "Which of the changes computes something from the position index inside attention?",
        ),
    )
)


def _order_cases(seed: int) -> list[Case]:
    cases = [
        Case("d_head=2 (one pair)", (2,)),
        Case("d_head=8", (8,)),
        Case("d_head=16 (the chapter's tiny Llama)", (16,)),
        Case("d_head=128 (Llama-2-7B)", (128,)),
    ]
    draw = torch.Generator().manual_seed(seed)
    for _ in range(3):
        d_head = 2 * int(torch.randint(2, 65, (), generator=draw))
        cases.append(Case(f"random: d_head={d_head}", (d_head,)))
    return cases


ROW_ORDER = register(
    CodeExercise(
        id="modern-rotary-row-order",
        chapter=CHAPTER,
        title="Reorder a Llama head's rows",
        points=3,
        function="row_order",
        parameters=("d_head",),
        reference=rotary_row_order,
        cases=_order_cases,
        seed=2023,
        atol=0,
        dtypes=(torch.int64,),
        blocked=(rotary_row_order,),
        hints=(
            "Hugging Face's Llama turns feature $j$ together with feature $j + d_{head}/2$; "
            "our `rotate` turns features $2i$ and $2i + 1$. Our row $2i$ must be their row "
            "$i$, and our row $2i + 1$ their row $i + d_{head}/2$.",
            "Stack `torch.arange(d_head // 2)` and `torch.arange(d_head // 2) + d_head // 2` "
            "as two columns, then flatten the rows: `[0, d/2, 1, d/2 + 1, ...]`.",
        ),
    )
)
