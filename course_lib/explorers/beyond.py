"""The explorers of the part "Beyond the original Transformer": rotary positions, RMSNorm and
gated feed-forward layers, attention for long contexts, a modern decoder."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from matplotlib.patches import Circle
from torch import Tensor

from course_lib._checks import base_value, integer, positive_int
from course_lib._html import TABLE_STYLE, color
from course_lib.attention import sliding_window_mask
from course_lib.cache import cache_bytes_per_token
from course_lib.explorers.base import (
    Control,
    Explorer,
    figure_part,
    menu,
    slider,
    switch,
    text_part,
)
from course_lib.families import DecoderOnlyModel, parameter_ledger
from course_lib.feedforward import swiglu_hidden_size
from course_lib.normalization import rms_norm
from course_lib.positional import angular_frequencies, sinusoidal_positional_encoding
from course_lib.rotary import rotate

__all__ = [
    "KVCacheExplorer",
    "ModernDecoderExplorer",
    "NormalizationExplorer",
    "RotaryPairsExplorer",
    "SlidingWindowExplorer",
    "kv_cache_explorer",
    "modern_decoder_explorer",
    "modern_ledger",
    "modern_settings",
    "norm_base_vector",
    "normalization_explorer",
    "receptive_fields",
    "rotary_pairs_explorer",
    "sliding_window_explorer",
]

# --------------------------------------------------------------------------- rotary positions
# (chapters/rotary-positions.ipynb)

ROPE_BOOK_POSITIONS = (0, 3, 6)
"""The positions ``m`` and ``n`` the book's sliders offer."""
ROPE_BOOK_BASES = (100.0, 10000.0, 500000.0)
"""The bases the book's slider offers: small, RoFormer's and Llama 2's, Llama 3's."""


class RotaryPairsExplorer(Explorer):
    """A query at position ``m`` and a key at position ``n``, rotated pair by pair.

    Parts: ``figure``, one panel per pair of features (the plane of features ``2i`` and
    ``2i + 1``), with the query's and the key's pair before (dashed) and after the rotation
    by ``m w_i`` and ``n w_i``; ``readout``, the angles, the rotary score
    ``(q R_m)(k R_n)^T``, which depends on ``m - n`` only, and for comparison the score
    ``(q + PE_m)(k + PE_n)^T`` with the sinusoidal encodings added to the same query and key,
    which does not.

    In the book the sliders offer :data:`ROPE_BOOK_POSITIONS` for ``m`` and ``n`` and
    :data:`ROPE_BOOK_BASES`; both parts depend on all three controls (27 states each).

    Args:
        d: the size of the query and the key (a head's ``d_head``), even, at most 8 pairs.
        m, n, base: the first values of the controls.
        seed: of the random query and key.
    """

    def __init__(
        self,
        d: int = 8,
        m: int = 6,
        n: int = 3,
        base: float = 10000.0,
        seed: int = 0,
        *,
        book: bool | None = None,
        offer: Mapping[str, Sequence] | None = None,
    ) -> None:
        d = positive_int("d", d, even=True)
        if d > 16:
            raise ValueError(f"d must be at most 16 (one panel per pair), got {d}")
        m, n = integer("m", m), integer("n", n)
        if m < 0 or n < 0:
            raise ValueError(f"positions must be non-negative, got m={m}, n={n}")
        base = base_value(base)
        draw = torch.Generator().manual_seed(integer("seed", seed))
        self.d = d
        self.query = torch.randn(d, generator=draw, dtype=torch.float64)
        self.key = torch.randn(d, generator=draw, dtype=torch.float64)
        most = 63

        def position(name: str, value: int) -> Control:
            return slider(
                name, f"${name}$", value, sorted({*ROPE_BOOK_POSITIONS, value}),
                lambda: widgets.IntSlider(value=value, min=0, max=most, description=f"${name}$",
                                          continuous_update=False),
            )  # fmt: skip

        controls = [
            position("m", m),
            position("n", n),
            slider("base", "base", base, sorted({*ROPE_BOOK_BASES, base}),
                   show=lambda b: f"{b:.6g}",
                   live=lambda: widgets.FloatLogSlider(value=base, base=10, min=1, max=6.5,
                                                       step=0.25, description="base",
                                                       continuous_update=False,
                                                       readout_format=".6g")),
        ]  # fmt: skip
        parts = [
            text_part("readout", ("m", "n", "base"), self.describe),
            figure_part("figure", ("m", "n", "base"), self.draw),
        ]
        super().__init__(controls, parts, [["m", "n"], ["base"]], book=book, offer=offer)

    def _rotated(self, m: int, n: int, base: float) -> tuple[Tensor, Tensor]:
        positions = torch.tensor([m, n])
        both = torch.stack((self.query, self.key))  # (2, d): the query and the key
        turned = rotate(both, positions, base)
        return turned[0], turned[1]

    def scores(self, m: int, n: int, base: float) -> tuple[float, float]:
        """The rotary score ``(q R_m)(k R_n)^T`` and the additive one ``(q + PE_m)(k + PE_n)^T``."""
        q, k = self._rotated(m, n, base)
        table = sinusoidal_positional_encoding(max(m, n) + 1, self.d, base, dtype=torch.float64)
        added = (self.query + table[m]) @ (self.key + table[n])
        return float(q @ k), float(added)

    def describe(self, m: int, n: int, base: float) -> str:
        """The offset, the angles between the query's and the key's pairs, and both scores."""
        rotary, added = self.scores(m, n, base)
        omega = angular_frequencies(self.d, base)
        angles = ", ".join(f"{(m - n) * float(w):.3g}".replace("-", "&minus;") for w in omega)
        offset = f"{m - n}".replace("-", "&minus;")
        return (  # a minus sign, not a hyphen, before the negative scores
            f"offset <b>m &minus; n = {offset}</b>: pair i of the query is turned "
            f"(m &minus; n)&middot;&omega;<sub>i</sub> = {angles} radians further than pair i "
            f"of the key<br>rotary score (q R<sub>m</sub>)&middot;(k R<sub>n</sub>) = "
            f"<b>{rotary:+.4f}</b> &nbsp; (the same for every m, n with this offset)<br>"
            f"sinusoidal encodings added, (q + PE<sub>m</sub>)&middot;(k + PE<sub>n</sub>) = "
            f"<b>{added:+.4f}</b> &nbsp; (changes when m and n move together)"
        ).replace("<b>-", "<b>&minus;")

    def draw(self, m: int, n: int, base: float) -> Figure:
        """One panel per pair: the query's and the key's pair, before and after turning."""
        q, k = self._rotated(m, n, base)
        omega = angular_frequencies(self.d, base)
        pairs = self.d // 2
        columns = min(pairs, 4)
        rows = -(-pairs // columns)
        fig, axes = plt.subplots(rows, columns, figsize=(7.2, 2.3 * rows), squeeze=False)
        reach = 1.45 * float(  # room for the labels past the longest arrow
            torch.stack((self.query, self.key)).view(2, pairs, 2).norm(dim=-1).max()
        )
        for i, ax in enumerate(axes.flat):
            if i >= pairs:
                ax.axis("off")
                continue
            for vector, turned, colour, name in (
                (self.query, q, "C0", "q"),
                (self.key, k, "C3", "k"),
            ):
                x, y = vector[2 * i : 2 * i + 2].tolist()
                ax.plot([0, x], [0, y], color=colour, linestyle="--", linewidth=1, alpha=0.6)
                radius = math.hypot(x, y)  # the circle the pair turns on
                ax.add_patch(Circle((0, 0), radius, fill=False, color=colour, alpha=0.25))
                x, y = turned[2 * i : 2 * i + 2].tolist()
                arrow = {"arrowstyle": "-|>", "color": colour, "linewidth": 2}
                ax.annotate("", (x, y), (0, 0), arrowprops=arrow)
                grow = 1 + 0.16 * reach / max(radius, 1e-9)  # the label just past the tip
                ax.text(x * grow, y * grow, name, color=colour, fontsize=10,
                        ha="center", va="center")  # fmt: skip
            ax.set_xlim(-reach, reach)
            ax.set_ylim(-reach, reach)
            ax.set_aspect("equal")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(f"pair {i}: $\\omega_{i}$ = {float(omega[i]):.3g}", fontsize=10)
        fig.suptitle(f"m = {m}, n = {n}, base {base:.6g}: dashed at position 0", fontsize=10)
        fig.tight_layout()
        return fig


def rotary_pairs_explorer(**kwargs) -> RotaryPairsExplorer:
    """Build a :class:`RotaryPairsExplorer`; display it as a cell's last expression."""
    return RotaryPairsExplorer(**kwargs)


# --------------------------------------------------------------------------- norms and gates
# (chapters/rmsnorm-and-gated-ffn.ipynb)

NORM_BOOK_SHIFTS = (0.0, 3.0, 10.0)
"""The shifts (the input's mean) the book's slider offers."""
NORM_BOOK_SCALES = (0.1, 1.0, 10.0)
"""The scales (the input's standard deviation) the book's slider offers."""


def norm_base_vector(d_model: int = 8, seed: int = 0) -> torch.Tensor:
    """A fixed vector of ``d_model`` features with mean 0 and standard deviation 1 (float64)."""
    z = torch.randn(d_model, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    z = z - z.mean()
    return z / z.pow(2).mean().sqrt()


class NormalizationExplorer(Explorer):
    """LayerNorm and RMSNorm side by side, for an input ``x = scale * z + shift``.

    ``z`` is a fixed vector (:func:`norm_base_vector`) with mean 0 and standard deviation 1, so
    the two sliders set the input's mean (``shift``) and its spread (``scale``). Both norms have
    a gain of 1 (LayerNorm a bias of 0) and ``eps = 1e-6``.

    Parts: ``readout``, the input's mean, standard deviation and root mean square and how far
    apart the two outputs are; ``figure``, the input's features as bars (top) and the two
    outputs' (bottom). In the book the sliders offer :data:`NORM_BOOK_SHIFTS` and
    :data:`NORM_BOOK_SCALES`: 9 figures.
    """

    def __init__(
        self,
        shift: float = 3.0,
        scale: float = 1.0,
        d_model: int = 8,
        *,
        book: bool | None = None,
        offer=None,
    ) -> None:
        self.z = norm_base_vector(d_model)
        self.eps = 1e-6
        controls = [
            slider("shift", "mean (shift)", shift, sorted({*NORM_BOOK_SHIFTS, shift}),
                    lambda: widgets.FloatSlider(value=shift, min=-10, max=10, step=0.5,
                                                 description="mean (shift)",
                                                 continuous_update=False)),
            slider("scale", "sd (scale)", scale, sorted({*NORM_BOOK_SCALES, scale}),
                    lambda: widgets.FloatLogSlider(value=scale, base=10, min=-2, max=2,
                                                    step=0.25, description="sd (scale)",
                                                    continuous_update=False,
                                                    readout_format=".3g")),
        ]  # fmt: skip
        parts = [
            text_part("readout", ("shift", "scale"), self.describe),
            figure_part("figure", ("shift", "scale"), self.draw),
        ]
        super().__init__(controls, parts, book=book, offer=offer, label_width="100px")

    def outputs(self, shift: float, scale: float) -> tuple[torch.Tensor, ...]:
        """The input, its LayerNorm and its RMSNorm, each ``(d_model,)``."""
        x = scale * self.z + shift
        layer = F.layer_norm(x, (x.numel(),), eps=self.eps)
        return x, layer, rms_norm(x, eps=self.eps)

    def describe(self, shift: float, scale: float) -> str:
        """The input's statistics and the gap between the two outputs, as HTML."""
        x, layer, rms = self.outputs(shift, scale)
        mean, sd = x.mean().item(), x.pow(2).mean().sub(x.mean() ** 2).sqrt().item()
        root = x.pow(2).mean().sqrt().item()
        gap = (layer - rms).abs().max().item()
        if gap < 1e-3:
            verdict = "the two outputs agree: with mean 0, the root mean square is the sd"
        else:
            verdict = (
                f"RMSNorm's output keeps a common part, mean {rms.mean().item():+.3f}; "
                f"LayerNorm's has mean 0 (RMSNorm depends on mean / sd = {shift / scale:.3g} "
                "only)"
            )
        return (
            f"input: mean <b>{mean:+.3g}</b>, sd <b>{sd:.3g}</b>, root mean square "
            f"<b>{root:.3g}</b> = sqrt(mean&sup2; + sd&sup2;)<br>"
            f"largest difference between the outputs: <b>{gap:.3f}</b>; {verdict}"
        )

    def draw(self, shift: float, scale: float) -> Figure:
        """The input's features (top) and both norms' outputs (bottom) as bars."""
        x, layer, rms = self.outputs(shift, scale)
        features = torch.arange(x.numel()).numpy()
        fig, (ax_in, ax_out) = plt.subplots(2, 1, figsize=(7.2, 5.4))
        ax_in.bar(features, x.numpy(), color="0.55")
        ax_in.axhline(shift, color="black", linewidth=1, linestyle="--")
        ax_in.set_title(f"input x: mean {shift:g} (dashed), sd {scale:g}")
        ax_in.set_ylabel("value")
        width = 0.4
        ax_out.bar(features - width / 2, layer.numpy(), width, label="LayerNorm(x)")
        ax_out.bar(features + width / 2, rms.numpy(), width, label="RMSNorm(x)")
        ax_out.axhline(0, color="black", linewidth=0.5)
        ax_out.set_ylim(-2.6, 2.6)
        ax_out.set_xlabel("feature")
        ax_out.set_ylabel("output")
        ax_out.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=2)
        for ax in (ax_in, ax_out):
            ax.set_xticks(features)
        fig.tight_layout()
        return fig


def normalization_explorer(**kwargs) -> NormalizationExplorer:
    """Build a :class:`NormalizationExplorer`; display it as a cell's last expression."""
    return NormalizationExplorer(**kwargs)


# --------------------------------------------------------------------------- long contexts
# (chapters/attention-at-scale.ipynb)

SWA_LENGTH = 16
"""The tokens the sliding-window explorer draws."""
SWA_BOOK_WINDOWS = (2, 3, 4, 6)
"""The windows ``w`` the book's slider offers."""
SWA_BOOK_LAYERS = (1, 2, 3, 4)
"""The layers ``k`` the book's slider offers."""
SWA_BOOK_QUERIES = (15, 10, 5)
"""The query positions the book's slider offers (the last token first)."""


def receptive_fields(length: int, window: int, layers: int) -> Tensor:
    """``(layers, length, length)`` bool: entry ``[k - 1, i, j]`` is True when the output of
    layer ``k`` at position ``i`` depends on the input token ``j``, through ``k`` sliding-window
    masks (:func:`~course_lib.attention.sliding_window_mask`) one after the other."""
    layers = positive_int("layers", layers)
    mask = sliding_window_mask(length, window).float()
    reach, fields = mask, []
    for _ in range(layers):
        fields.append(reach > 0)
        reach = reach @ mask  # one more layer: what my keys depended on
    return torch.stack(fields)


class SlidingWindowExplorer(Explorer):
    """Sliders for the window ``w``, the number of layers ``k`` and a query position that
    show which input tokens the query's output depends on, layer by layer.

    Parts (both HTML, so every state is cheap): ``field``, one row of boxes per layer, the
    tokens the query depends on filled; ``readout``, the span, its formula ``k (w - 1) + 1``
    and what a dense masked implementation computes for it.

    In the book the sliders offer :data:`SWA_BOOK_WINDOWS`, :data:`SWA_BOOK_LAYERS` and
    :data:`SWA_BOOK_QUERIES` (each with the explorer's first value).
    """

    def __init__(
        self,
        window: int = 3,
        layers: int = 2,
        query: int = SWA_LENGTH - 1,
        *,
        book: bool | None = None,
        offer: Mapping[str, Sequence] | None = None,
    ) -> None:
        window, layers = positive_int("window", window), positive_int("layers", layers)
        query = integer("query", query)
        if not 0 <= query < SWA_LENGTH:
            raise ValueError(f"query must be a position in 0..{SWA_LENGTH - 1}, got {query}")
        last = SWA_LENGTH - 1
        controls = [
            slider("window", "window $w$", window, sorted({*SWA_BOOK_WINDOWS, window}),
                   lambda: widgets.IntSlider(value=window, min=1, max=SWA_LENGTH,
                                             description="window $w$", continuous_update=False)),
            slider("layers", "layers $N$", layers, sorted({*SWA_BOOK_LAYERS, layers}),
                   lambda: widgets.IntSlider(value=layers, min=1, max=8,
                                             description="layers $N$", continuous_update=False)),
            slider("query", "query $i$", query, sorted({*SWA_BOOK_QUERIES, query}),
                   lambda: widgets.IntSlider(value=query, min=0, max=last,
                                             description="query $i$", continuous_update=False)),
        ]  # fmt: skip
        parts = [
            text_part("field", ("window", "layers", "query"), self.field),
            text_part("readout", ("window", "layers", "query"), self.describe),
        ]
        super().__init__(controls, parts, [["window", "layers"], ["query"]], book=book, offer=offer)

    def field(self, window: int, layers: int, query: int) -> str:
        """One row of boxes per layer: filled where the query's output depends on the token."""
        fields = receptive_fields(SWA_LENGTH, window, layers)[:, query]  # (k, L)
        box = (
            "display: inline-block; width: 12px; height: 12px; margin: 1px; "
            "border: 1px solid currentColor; vertical-align: middle; background: {}"
        )
        rows = []
        for k in range(layers):
            cells = "".join(
                f"<span style='{box.format(self._fill(j, query, seen, color))}'></span>"
                for j, seen in enumerate(fields[k].tolist())
            )
            rows.append(
                f"<div style='white-space: nowrap'><span style='display: inline-block; "
                f"width: 64px'>layer {k + 1}</span>{cells}</div>"
            )
        return (
            f"<div>Inputs 0 to {SWA_LENGTH - 1}, left to right; filled: the tokens the output "
            f"of position {query} depends on after each layer (its own box is filled in the "
            f"colour of the text).</div>{''.join(rows)}"
        )

    @staticmethod
    def _fill(token: int, query: int, seen: bool, color) -> str:
        if token == query:
            return "currentColor"
        return color("pass") if seen else "transparent"

    def describe(self, window: int, layers: int, query: int) -> str:
        """The span the query sees after ``layers`` layers, and the cost of one layer."""
        seen = receptive_fields(SWA_LENGTH, window, layers)[-1, query].nonzero().flatten()
        first, count = int(seen[0]), len(seen)
        reach = layers * (window - 1) + 1
        allowed = int(receptive_fields(SWA_LENGTH, window, 1)[0].sum())
        formula = f"$N(w-1)+1 = {layers} \\cdot {window - 1} + 1 = {reach}$"
        if reach <= query + 1:
            limit = f"as {formula} says"
        elif query == 0:
            limit = "the first token has none before it"
        else:
            limit = f"every token up to it, since {formula} reaches past the start"
        span = f"tokens {first} to {query}" if count > 1 else f"token {query} only"
        return (
            f"After {layers} layer{'s' if layers > 1 else ''} with $w = {window}$, position "
            f"{query} depends on {span}: <b>{count}</b> token{'s' if count > 1 else ''}, "
            f"{limit}.<br>"
            f"One layer's mask allows {allowed} of the {SWA_LENGTH}&times;{SWA_LENGTH} = "
            f"{SWA_LENGTH**2} scores; a dense masked implementation still computes all "
            f"{SWA_LENGTH**2}, a banded kernel about $L w$ = {SWA_LENGTH * window}."
        )


def sliding_window_explorer(**kwargs) -> SlidingWindowExplorer:
    """Build a :class:`SlidingWindowExplorer`; display it as a cell's last expression."""
    return SlidingWindowExplorer(**kwargs)


LLAMA_2_70B = {"num_layers": 80, "num_heads": 64, "d_head": 128}
"""The attention shape of Llama-2-70B: 80 layers, 64 query heads of 128 features."""
KV_HEADS = (("64: multi-head", 64), ("8: grouped (Llama-2-70B)", 8), ("1: multi-query", 1))
KV_CONTEXTS = (("4,096 tokens", 4096), ("32,768 tokens", 32_768), ("131,072 tokens", 131_072))
KV_DTYPES = (
    ("float32 (4 bytes)", "float32"),
    ("bfloat16 (2 bytes)", "bfloat16"),
    ("8-bit float (1 byte)", "float8_e4m3fn"),
)


class KVCacheExplorer(Explorer):
    """Menus for the key/value heads, the context length and the cache's dtype of a model
    shaped like Llama-2-70B; the readout computes the cache's bytes per token, per sequence
    and per batch of 8 sequences with :func:`~course_lib.cache.cache_bytes_per_token`."""

    def __init__(
        self,
        kv_heads: int = 8,
        context: int = 4096,
        dtype: str = "bfloat16",
        *,
        book: bool | None = None,
        offer: Mapping[str, Sequence] | None = None,
    ) -> None:
        controls = [
            menu("kv_heads", "KV heads", kv_heads, KV_HEADS),
            menu("context", "context", context, KV_CONTEXTS),
            menu("dtype", "cache dtype", dtype, KV_DTYPES),
        ]
        parts = [text_part("readout", ("kv_heads", "context", "dtype"), self.describe)]
        super().__init__(controls, parts, [["kv_heads"], ["context", "dtype"]], book=book,
                         offer=offer, label_width="100px")  # fmt: skip

    def describe(self, kv_heads: int, context: int, dtype: str) -> str:
        """The cache's size per token, per sequence and for 8 sequences, as HTML."""
        shape = LLAMA_2_70B
        per_token = cache_bytes_per_token(
            shape["num_layers"], kv_heads, shape["d_head"], getattr(torch, dtype)
        )
        size = getattr(torch, dtype).itemsize
        formula = (
            f"2 &times; {shape['num_layers']} layers &times; {kv_heads} "
            f"head{'s' if kv_heads > 1 else ''} &times; {shape['d_head']} numbers &times; "
            f"{size} byte{'s' if size > 1 else ''}"
        )
        rows = [
            ("per token", f"{per_token / 2**10:,.0f} KiB", formula),
            ("one sequence", f"{per_token * context / 2**30:,.2f} GiB", f"&times; {context:,}"),
            ("a batch of 8", f"{8 * per_token * context / 2**30:,.1f} GiB", "&times; 8 sequences"),
        ]
        right = "style='text-align: right'"
        body = "".join(
            f"<tr><td>{what}</td><td {right}><b>{size}</b></td><td>{how}</td></tr>"
            for what, size, how in rows
        )
        saving = shape["num_heads"] // kv_heads
        return (
            f"<table style='{TABLE_STYLE}'>{body}</table>"
            f"{shape['num_heads']} query heads share {kv_heads} key/value "
            f"head{'s' if kv_heads > 1 else ''}: the cache is {saving}&times; smaller than "
            "with multi-head attention in the same dtype."
        )


def kv_cache_explorer(**kwargs) -> KVCacheExplorer:
    """Build a :class:`KVCacheExplorer`; display it as a cell's last expression."""
    return KVCacheExplorer(**kwargs)


# --------------------------------------------------------------------------- a modern decoder
# (chapters/a-modern-decoder.ipynb)

MODERN_SIZES = {
    "the chapter's model": {
        "vocab_size": 85, "d_model": 64, "num_heads": 4, "num_layers": 2, "max_len": 16,
        "d_ff": 256, "multiple_of": 1, "grouped": 2, "context": 16,
    },
    "Llama-2-7B's sizes": {
        "vocab_size": 32000, "d_model": 4096, "num_heads": 32, "num_layers": 32,
        "max_len": 4096, "d_ff": 16384, "multiple_of": 256, "grouped": 8, "context": 4096,
    },
}  # fmt: skip
"""The two model sizes of :class:`ModernDecoderExplorer`: ``d_ff`` is the two-matrix network's
``4 d_model``; a gated one gets :func:`~course_lib.feedforward.swiglu_hidden_size` (rounded up
to ``multiple_of``); ``grouped`` is the number of key/value heads of grouped-query attention;
``context`` the tokens whose cache the readout sizes."""
MODERN_POSITIONS = ("sinusoidal", "learned", "rotary")
MODERN_KV = ("multi-head", "grouped", "multi-query")


def modern_settings(
    size: str, positions: str, rms: bool, swiglu: bool, kv: str, biases: bool, tied: bool
) -> dict:
    """The arguments of :class:`~course_lib.families.DecoderOnlyModel` for one choice of the
    explorer's controls (all off, sinusoidal, multi-head: the 2017 decoder, pre-norm)."""
    sizes = MODERN_SIZES[size]
    heads = sizes["num_heads"]
    kv_heads = {"multi-head": heads, "grouped": sizes["grouped"], "multi-query": 1}[kv]
    d_ff = swiglu_hidden_size(sizes["d_model"], sizes["multiple_of"]) if swiglu else sizes["d_ff"]
    return {
        "vocab_size": sizes["vocab_size"],
        "d_model": sizes["d_model"],
        "num_heads": heads,
        "num_layers": sizes["num_layers"],
        "d_ff": d_ff,
        "max_len": sizes["max_len"],
        "positions": positions,
        "norm": "rms" if rms else "layer",
        "gated": swiglu,
        "activation": "silu" if swiglu else "relu",
        "num_kv_heads": kv_heads,
        "bias": biases,
        "output_bias": False,
        "tie_embeddings": tied,
        "pad_id": None,
    }


def modern_ledger(settings: Mapping) -> dict[str, int]:
    """:func:`~course_lib.families.parameter_ledger` of the model of ``settings``, computed on
    the ``meta`` device from one layer (every layer has the same parameters)."""
    layers = settings["num_layers"]
    with torch.device("meta"):
        one = DecoderOnlyModel(**{**settings, "num_layers": 1})
    ledger = parameter_ledger(one)
    for part in ("attention", "feed-forward"):
        ledger[part] *= layers
    final = sum(p.numel() for p in one.encoder.norm.parameters())
    ledger["norms"] = (ledger["norms"] - final) * layers + final
    ledger["total"] = sum(n for part, n in ledger.items() if part != "total")
    attention = one.encoder.layers[0].self_attention
    ledger["cache"] = cache_bytes_per_token(
        layers, attention.num_kv_heads, attention.d_head, torch.bfloat16
    )
    return ledger


def _bytes(count: int) -> str:
    """``count`` bytes in the largest binary unit that keeps a number of at least 1."""
    for power, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if count >= 2**power:
            return f"{count / 2**power:.3g} {unit}"
    return f"{count} bytes"


class ModernDecoderExplorer(Explorer):
    """The 2017 decoder turned into a Llama, one change at a time: what each change does to
    the parameters and to the key/value cache.

    Controls: the model's sizes (:data:`MODERN_SIZES`), positions (:data:`MODERN_POSITIONS`),
    RMSNorm, SwiGLU, key/value heads (:data:`MODERN_KV`), biases, a tied output map. Part:
    ``ledger``, the parameters of every component of that model (computed from the model
    :class:`~course_lib.families.DecoderOnlyModel` builds, on the ``meta`` device), next to
    those of the pre-norm 2017 decoder of the same sizes (the 2017 parts, the norms placed as
    in GPT-2), and the bytes its key/value cache holds per token and for a full context (16-bit
    numbers). Nothing is trained here: the readout holds computed properties only. Every
    control is offered in the book (2 x 3 x 2 x 2 x 3 x 2 x 2 = 288 text states).
    """

    def __init__(
        self,
        size: str = "the chapter's model",
        positions: str = "sinusoidal",
        rms: bool = False,
        swiglu: bool = False,
        kv: str = "multi-head",
        biases: bool = True,
        tied: bool = True,
        *,
        book: bool | None = None,
        offer: Mapping[str, Sequence] | None = None,
    ) -> None:
        for name, value, known in (
            ("size", size, MODERN_SIZES),
            ("positions", positions, MODERN_POSITIONS),
            ("kv", kv, MODERN_KV),
        ):
            if value not in known:
                raise ValueError(f"{name} must be one of {list(known)}, got {value!r}")
        controls = [
            menu("size", "sizes", size, [(name, name) for name in MODERN_SIZES]),
            menu("positions", "positions", positions, [(p, p) for p in MODERN_POSITIONS]),
            menu("kv", "key/value heads", kv, [(k, k) for k in MODERN_KV]),
            switch("rms", "RMSNorm", rms),
            switch("swiglu", "SwiGLU", swiglu),
            switch("biases", "biases", biases),
            switch("tied", "tied output", tied),
        ]
        everything = ("size", "positions", "rms", "swiglu", "kv", "biases", "tied")
        parts = [text_part("ledger", everything, self.describe)]
        rows = [["size"], ["positions"], ["kv"], ["rms", "swiglu"], ["biases", "tied"]]
        super().__init__(controls, parts, rows, book=book, offer=offer, label_width="120px")

    def describe(
        self, size: str, positions: str, rms: bool, swiglu: bool, kv: str, biases: bool,
        tied: bool,
    ) -> str:  # fmt: skip
        """The ledger of the chosen model beside the pre-norm 2017 one's, as an HTML table."""
        settings = modern_settings(size, positions, rms, swiglu, kv, biases, tied)
        chosen = modern_ledger(settings)
        old = modern_ledger(
            modern_settings(size, "sinusoidal", False, False, "multi-head", True, True)
        )
        head = "<tr><th></th><th>this model</th><th>pre-norm 2017</th></tr>"
        rows = "".join(
            f"<tr><td>{part}</td><td style='text-align:right'>{chosen[part]:,}</td>"
            f"<td style='text-align:right'>{old[part]:,}</td></tr>"
            for part in ("token embedding", "positions", "attention", "feed-forward", "norms",
                         "output map", "total")
        )  # fmt: skip
        context = MODERN_SIZES[size]["context"]
        d_ff = settings["d_ff"]
        network = f"{'SwiGLU' if swiglu else 'ReLU'}, d<sub>ff</sub> = {d_ff:,}"
        return (
            f"<b>{settings['num_kv_heads']}</b> key/value "
            f"head{'s' if settings['num_kv_heads'] > 1 else ''} for "
            f"{settings['num_heads']} query heads; {network}<br>"
            f"<table style='{TABLE_STYLE}'>{head}{rows}</table>"
            f"key/value cache (16-bit numbers): <b>{chosen['cache']:,} bytes per token</b> "
            f"(pre-norm 2017: {old['cache']:,}); for {context:,} tokens, "
            f"{_bytes(chosen['cache'] * context)} per sequence"
        )


def modern_decoder_explorer(**kwargs) -> ModernDecoderExplorer:
    """Build a :class:`ModernDecoderExplorer`; display it as a cell's last expression."""
    return ModernDecoderExplorer(**kwargs)
