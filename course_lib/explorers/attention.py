"""The explorer of the part "Attention": one attention layer's weights, for any sentence.

:class:`AttentionExplorer` -- pick a query token and see its attention weights in every head;
switch the scaling by ``sqrt(d_k)``, the causal mask, the positions and the number of heads.
The chapters "Self-attention", "Multi-head attention" and "Masking and cross-attention" show
it with their own settings (:func:`attention_explorer`).

It runs live in a kernel (ipywidgets 7.7 and 8) and moves in the HTML book from stored states
(:mod:`course_lib.explorers.base`): there the sentence is one of :data:`BOOK_SENTENCES`, the
query any of its words, and the heads those of :func:`book_heads`.
"""

from __future__ import annotations

import html
import math
import zlib
from collections.abc import Mapping, Sequence

import ipywidgets as widgets
import torch

from course_lib.attention import causal_mask, scaled_dot_product_attention, split_heads
from course_lib.explorers.base import Control, Explorer, menu, switch, text_box, text_part
from course_lib.positional import sinusoidal_positional_encoding

__all__ = [
    "BOOK_SENTENCES",
    "HEAD_CHOICES",
    "MAX_TOKENS",
    "AttentionExplorer",
    "attention_explorer",
    "book_heads",
    "word_vector",
]

HEAD_CHOICES = (1, 2, 4, 8)
MAX_TOKENS = 12

BOOK_SENTENCES = (
    "the cat sat on the mat",
    "the dog saw the cat and the cat ran",
    "I saw a saw",
)
"""The sentences the book offers (after the explorer's own, if it is another): one word twice
(positions tell the two "the" apart), a longer one with "the" three times and "cat" twice,
and a short one in which the same word is a verb and a noun."""

WEIGHT_RGB = (31, 119, 180)  # the colour of the weights in the tables (opacity: the weight)
BLOCKED = "#7f7f7f40"  # a key the causal mask hides
MAX_ALPHA = 0.65  # the opacity of a weight of 1: every theme's text keeps 4.5:1 on it


def book_heads(num_heads: int) -> tuple[int, ...]:
    """The head counts the book offers for an explorer that starts with ``num_heads``: one
    head, the first count and eight heads (and two, if that makes fewer than three)."""
    offered = {1, num_heads, max(HEAD_CHOICES)}
    if len(offered) < 3:
        offered.add(2)
    return tuple(sorted(offered))


def word_vector(word: str, d_model: int) -> torch.Tensor:
    """A fixed random embedding for ``word``: the same vector for the same word, everywhere.

    Drawn from ``N(0, 1)`` with a generator seeded by the word's CRC-32, so that the explorer
    can embed any sentence a reader types without a trained vocabulary.
    """
    seeded = torch.Generator().manual_seed(zlib.crc32(word.encode("utf-8")))
    return torch.randn(d_model, generator=seeded)


class AttentionExplorer(Explorer):
    """Pick a query token and see its attention weights; toggle scaling, causal mask and heads.

    The sentence's tokens get fixed random embeddings (:func:`word_vector`), plus the
    sinusoidal position vectors if *positions* is on. Fixed random projections ``W^Q``,
    ``W^K`` (``d_model x d_model``, entries ``N(0, 1/d_model)``) make queries and keys, which
    are cut into ``h`` heads of ``d_model / h`` features, as in multi-head attention. The same
    projections serve every head count, so changing *heads* only changes how the features are
    grouped.

    Parts (HTML, cheap to store: the book keeps every state): ``readout``, the chosen
    query's row in every head as a table (its weight on every key, shaded, the largest in
    bold, the largest score and the entropy of the weights: 0 for a one-hot row, ``log L_k``
    for a uniform one); ``matrices``, every head's attention matrix as a shaded table. The
    matrices do not depend on the query, so the book stores them once per sentence, head count
    and switch setting.

    In the book the sentence is one of :data:`BOOK_SENTENCES` (with the explorer's own first),
    the query any of its words, the heads :func:`book_heads` (or ``offer["heads"]``) and each
    switch off or on. In a kernel any sentence of 1 to 12 words can be typed.

    Attributes:
        sentence, query, heads, scale, causal, positions: the controls.
        readout, matrices: the parts (live: two ``HTMLMath`` widgets).
    """

    def __init__(
        self,
        sentence: str = "the cat sat on the mat",
        d_model: int = 64,
        query: int = 2,
        num_heads: int = 1,
        scale: bool = True,
        causal: bool = False,
        positions: bool = True,
        seed: int = 0,
        *,
        book: bool | None = None,
        offer: Mapping[str, Sequence] | None = None,
    ) -> None:
        if d_model % max(HEAD_CHOICES) or d_model <= 0:
            raise ValueError(f"d_model must be a positive multiple of 8, got {d_model}")
        if num_heads not in HEAD_CHOICES:
            raise ValueError(f"num_heads must be one of {HEAD_CHOICES}, got {num_heads}")
        tokens = self.tokenize(sentence)
        if not 0 <= query < len(tokens):
            raise ValueError(f"query must be in 0..{len(tokens) - 1}, got {query}")
        self.d_model = d_model
        draw = torch.Generator().manual_seed(seed)
        std = 1 / math.sqrt(d_model)
        self.w_q = torch.randn(d_model, d_model, generator=draw) * std
        self.w_k = torch.randn(d_model, d_model, generator=draw) * std
        self._computed: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}
        prepared = [sentence] + [text for text in BOOK_SENTENCES if text != sentence]
        controls = [
            text_box("sentence", "sentence", sentence, prepared, read=self._read),
            Control("heads", "heads", num_heads, book=book_heads(num_heads), kind="buttons",
                    live=lambda: widgets.Dropdown(options=[(str(h), h) for h in HEAD_CHOICES],
                                                  value=num_heads, description="heads")),
            switch("scale", "divide by $\\sqrt{d_k}$", scale),
            switch("causal", "causal mask", causal),
            switch("positions", "add positions", positions),
            # last: the readout's stacks branch on the query at their deepest level only
            menu("query", "query", query, self._options, depends=("sentence",)),
        ]  # fmt: skip
        settings = ("sentence", "heads", "scale", "causal", "positions")
        parts = [
            text_part("readout", (*settings, "query"), self._describe),
            text_part("matrices", settings, self.draw),
        ]
        rows = [["sentence"], ["query", "heads"], ["scale", "causal", "positions"]]
        super().__init__(controls, parts, rows, book=book, offer=offer)

    @staticmethod
    def tokenize(sentence: str) -> list[str]:
        """The sentence's words (split at spaces); at least 1 and at most 12."""
        tokens = sentence.split()
        if not 1 <= len(tokens) <= MAX_TOKENS:
            raise ValueError(f"the sentence must have 1 to {MAX_TOKENS} words, got {len(tokens)}")
        return tokens

    @classmethod
    def _read(cls, sentence: str) -> str:
        """The sentence typed, its words joined by single spaces (a ValueError if it has none
        or too many)."""
        return " ".join(cls.tokenize(sentence))

    @classmethod
    def _options(cls, sentence: str) -> list[tuple[str, int]]:
        return [(f"{i}: {token}", i) for i, token in enumerate(cls.tokenize(sentence))]

    def compute(
        self,
        sentence: str,
        num_heads: int,
        scale: bool = True,
        causal: bool = False,
        positions: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Scores and weights of every head, each ``(num_heads, L, L)``.

        The scores are the numbers that enter the softmax: ``Q K^T`` divided by
        ``sqrt(d_k)`` if ``scale``, with ``-inf`` where the causal mask forbids. Kept for the
        explorer's parts, which are drawn one by one for the same settings.
        """
        tokens = self.tokenize(sentence)
        key = (tuple(tokens), num_heads, bool(scale), bool(causal), bool(positions))
        if key not in self._computed:
            queries, keys = self._projected(tuple(tokens), bool(positions))
            q = split_heads(queries.unsqueeze(0), num_heads)[0]  # (h, L, d_k)
            k = split_heads(keys.unsqueeze(0), num_heads)[0]
            factor = 1 / math.sqrt(q.size(-1)) if scale else 1.0
            mask = causal_mask(len(tokens)) if causal else None
            # the values do not change the weights: pass the keys in their place
            _, weights = scaled_dot_product_attention(q, k, k, mask, scale=factor)
            scores = q @ k.transpose(-2, -1) * factor
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            self._computed[key] = (scores, weights)
        return self._computed[key]

    def _projected(self, tokens: tuple[str, ...], positions: bool) -> tuple[torch.Tensor, ...]:
        """The queries and keys of all features, ``(L, d_model)`` each (kept)."""
        key = (tokens, positions)
        if key not in self._computed:
            x = torch.stack([word_vector(token, self.d_model) for token in tokens])
            if positions:
                x = x + sinusoidal_positional_encoding(len(tokens), self.d_model)
            self._computed[key] = (x @ self.w_q, x @ self.w_k)
        return self._computed[key]

    def _describe(
        self, sentence: str, heads: int, scale: bool, causal: bool, positions: bool, query: int
    ) -> str:
        tokens = self.tokenize(sentence)
        scores, weights = self.compute(sentence, heads, scale, causal, positions)
        return self.describe(tokens, min(query, len(tokens) - 1), scores, weights)

    def describe(
        self, tokens: list[str], query: int, scores: torch.Tensor, weights: torch.Tensor
    ) -> str:
        """The chosen query's row in every head, as HTML: a table with one row per head, its
        weight on every key (shaded; the largest in bold; a key the mask hides is marked ×),
        the largest |score| and the entropy of the weights."""
        d_k = self.d_model // weights.size(0)
        allowed = int(torch.isfinite(scores[0, query]).sum())  # keys the query may see
        keys = "".join(f"<th>{i}<br>{html.escape(token)}" for i, token in enumerate(tokens))
        header = f"<tr><th>head{keys}<th>largest |score|<th>entropy"
        rows = []
        for head, (row, score) in enumerate(
            zip(weights[:, query].tolist(), scores[:, query].tolist(), strict=True)
        ):
            best = max(range(len(row)), key=row.__getitem__)
            entropy = -sum(w * math.log(w) for w in row if w > 0)
            largest = max(abs(s) for s in score if math.isfinite(s))
            cells = "".join(
                _cell(w, math.isfinite(s), True, j == best)
                for j, (w, s) in enumerate(zip(row, score, strict=True))
            )
            rows.append(f"<tr><td>head {head + 1}{cells}<td>{largest:.2f}<td>{entropy:.2f}")
        return (
            f"<b>query {query}: {html.escape(tokens[query])}</b> &nbsp; "
            f"<i>d</i><sub>k</sub> = {d_k}; "
            f"{allowed} keys allowed, uniform weights would have entropy "
            f"log {allowed} = {math.log(allowed):.2f}"
            f"<div class='course-attention ca'><table>{header}{''.join(rows)}</table></div>"
        )

    def draw(self, sentence: str, heads: int, scale: bool, causal: bool, positions: bool) -> str:
        """Every head's attention matrix, as HTML: one query a row, one key a column, the
        deeper the blue the larger the weight, the weights written in the cells when they are
        few (at most 2 heads and 8 words); keys the causal mask hides are grey with ×."""
        tokens = self.tokenize(sentence)
        scores, weights = self.compute(sentence, heads, scale, causal, positions)
        numbers = heads <= 2 and len(tokens) <= 8
        keys = "".join(f"<th>{i}" for i in range(len(tokens)))
        panels = []
        for head, (matrix, allowed) in enumerate(
            zip(weights.tolist(), torch.isfinite(scores).tolist(), strict=True)
        ):
            rows = "".join(
                f"<tr><th class=q>{i} {html.escape(token)}"
                + "".join(_cell(w, a, numbers) for w, a in zip(matrix[i], allowed[i], strict=True))
                for i, token in enumerate(tokens)
            )
            title = f"head {head + 1}" if heads > 1 else "attention weights"
            panels.append(
                f"<table class='m{' n' if numbers else ''}'><caption>{title}</caption>"
                f"<tr><th class=q>query \\ key{keys}{rows}</table>"
            )
        details = [
            f"<i>d</i><sub>k</sub> = {self.d_model // heads}",
            "divided by &radic;<i>d</i><sub>k</sub>" if scale else "not scaled",
            "causal mask" if causal else "no mask",
            "with positions" if positions else "no positions",
        ]
        return (
            f"{_STYLE}<div class='course-attention ca'>{', '.join(details)}: "
            "a row is a query's weights over the keys (no shade for 0, the darkest blue for 1"
            f"{', grey &times; hidden by the mask' if causal else ''})"
            f"<div class=panels>{''.join(panels)}</div></div>"
        )


SHADES = 10
"""The weights' shades: a weight is drawn in the shade of ``round(weight * SHADES)``."""

_STYLE = (
    "<style>.ca{overflow-x:auto;max-width:100%}"
    ".ca table{border-collapse:collapse;margin:2px 8px 6px 0}"
    ".ca td,.ca th{padding:1px 4px;text-align:center;font-weight:normal;font-size:.85em;"
    "line-height:1.2}.ca th.q{text-align:left;white-space:nowrap}"
    ".ca .panels{display:flex;flex-wrap:wrap;align-items:flex-start}"
    ".ca .m td{width:14px;height:14px;padding:0}.ca .m.n td{width:34px;height:22px}"
    ".ca caption{caption-side:top;text-align:left;font-size:.9em}"
    f".ca .x{{background:{BLOCKED}}}"
    + "".join(
        f".ca .s{level}{{background:#{''.join(f'{c:02x}' for c in WEIGHT_RGB)}"
        f"{round(MAX_ALPHA * 255 * level / SHADES):02x}}}"
        for level in range(SHADES + 1)
    )
    + "</style>"
)
"""The tables' look (class ``ca``), in every state of the matrices, which are always shown with
the readout: the readout's states leave it out, to stay small."""


def _cell(weight: float, allowed: bool, number: bool, best: bool = False) -> str:
    """A table cell for an attention weight in [0, 1]: the deeper the blue, the larger; grey
    with × for a key the mask hides; the weight written in if ``number`` (in bold if
    ``best``). Cells and rows are left unclosed, as HTML allows, to keep the states small."""
    if not allowed:
        return "<td class=x>&times;"
    text = f"{weight:.2f}" if number else ""
    if best and number:
        text = f"<b>{text}</b>"
    return f"<td class=s{round(weight * SHADES)}>{text}"


def attention_explorer(**kwargs) -> AttentionExplorer:
    """Build an :class:`AttentionExplorer`; display it as a cell's last expression."""
    return AttentionExplorer(**kwargs)
