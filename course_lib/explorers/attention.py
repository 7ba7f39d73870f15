"""The explorer of the part "Attention": one attention layer's weights, for any sentence.

:class:`AttentionExplorer` -- pick a query token and see its attention weights in every head;
switch the scaling by ``sqrt(d_k)``, the causal mask, the positions and the number of heads.
The chapters "Self-attention", "Multi-head attention" and "Masking and cross-attention" show
it with their own settings (:func:`attention_explorer`).

It runs live in a kernel (ipywidgets 7.7 and 8) and moves in the HTML book from stored states
(:mod:`course_lib.explorers.base`).
"""

from __future__ import annotations

import html
import math
import zlib

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch

from course_lib._layout import control_row, fitting
from course_lib.attention import causal_mask, scaled_dot_product_attention, split_heads
from course_lib.plotting import plot_attention
from course_lib.positional import sinusoidal_positional_encoding

__all__ = ["HEAD_CHOICES", "MAX_TOKENS", "AttentionExplorer", "attention_explorer", "word_vector"]

_WIDE = fitting("340px")
_LABEL = {"description_width": "90px"}


HEAD_CHOICES = (1, 2, 4, 8)
MAX_TOKENS = 12


def word_vector(word: str, d_model: int) -> torch.Tensor:
    """A fixed random embedding for ``word``: the same vector for the same word, everywhere.

    Drawn from ``N(0, 1)`` with a generator seeded by the word's CRC-32, so that the explorer
    can embed any sentence a reader types without a trained vocabulary.
    """
    seeded = torch.Generator().manual_seed(zlib.crc32(word.encode("utf-8")))
    return torch.randn(d_model, generator=seeded)


class AttentionExplorer(widgets.VBox):
    """Pick a query token and see its attention weights; toggle scaling, causal mask and heads.

    The sentence's tokens get fixed random embeddings (:func:`word_vector`), plus the
    sinusoidal position vectors if *positions* is ticked. Fixed random projections ``W^Q``,
    ``W^K`` (``d_model x d_model``, entries ``N(0, 1/d_model)``) make queries and keys, which
    are cut into ``h`` heads of ``d_model / h`` features, as in multi-head attention. The same
    projections serve every head count, so changing *heads* only changes how the features are
    grouped.

    The figure shows every head's attention matrix with the chosen query's row outlined, and
    that row's weights as bars. The readout gives, per head, the key the query attends to most,
    the largest score and the entropy of the weights (0 for a one-hot row, ``log L_k`` for a
    uniform one).

    Attributes:
        sentence, query, heads, scale, causal, positions: the controls.
        readout: an HTML widget with the numbers; output: the Output widget with the figure.
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
        self.sentence = widgets.Text(value=sentence, description="sentence",
                                     continuous_update=False, layout=fitting("520px"),
                                     style=_LABEL)  # fmt: skip
        self.query = widgets.Dropdown(options=self._options(tokens), value=query,
                                      description="query", layout=_WIDE, style=_LABEL)  # fmt: skip
        self.heads = widgets.Dropdown(options=list(HEAD_CHOICES), value=num_heads,
                                      description="heads", layout=_WIDE, style=_LABEL)  # fmt: skip
        self.scale = widgets.Checkbox(value=scale, description="divide by $\\sqrt{d_k}$",
                                      indent=False)  # fmt: skip
        self.causal = widgets.Checkbox(value=causal, description="causal mask", indent=False)
        self.positions = widgets.Checkbox(value=positions, description="add positions",
                                          indent=False)  # fmt: skip
        self.readout = widgets.HTML()
        self.sentence.observe(self._on_sentence, names="value")
        self.output = widgets.interactive_output(
            self._draw,
            {"sentence": self.sentence, "query": self.query, "num_heads": self.heads,
             "scale": self.scale, "causal": self.causal, "positions": self.positions},
        )  # fmt: skip
        super().__init__(
            [
                self.sentence,
                control_row([self.query, self.heads]),
                control_row([self.scale, self.causal, self.positions]),
                self.readout,
                self.output,
            ]
        )

    @staticmethod
    def tokenize(sentence: str) -> list[str]:
        """The sentence's words (split at spaces); at least 1 and at most 12."""
        tokens = sentence.split()
        if not 1 <= len(tokens) <= MAX_TOKENS:
            raise ValueError(f"the sentence must have 1 to {MAX_TOKENS} words, got {len(tokens)}")
        return tokens

    @staticmethod
    def _options(tokens: list[str]) -> list[tuple[str, int]]:
        return [(f"{i}: {token}", i) for i, token in enumerate(tokens)]

    def _on_sentence(self, change: dict) -> None:
        try:
            tokens = self.tokenize(change["new"])
        except ValueError:
            return  # _draw shows the message
        keep = min(self.query.value or 0, len(tokens) - 1)
        self.query.options = self._options(tokens)
        self.query.value = keep

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
        ``sqrt(d_k)`` if ``scale``, with ``-inf`` where the causal mask forbids.
        """
        tokens = self.tokenize(sentence)
        x = torch.stack([word_vector(token, self.d_model) for token in tokens])
        if positions:
            x = x + sinusoidal_positional_encoding(len(tokens), self.d_model)
        q = split_heads((x @ self.w_q).unsqueeze(0), num_heads)[0]  # (h, L, d_k)
        k = split_heads((x @ self.w_k).unsqueeze(0), num_heads)[0]
        factor = 1 / math.sqrt(q.size(-1)) if scale else 1.0
        mask = causal_mask(len(tokens)) if causal else None
        # the values do not change the weights: pass the keys in their place
        _, weights = scaled_dot_product_attention(q, k, k, mask, scale=factor)
        scores = q @ k.transpose(-2, -1) * factor
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return scores, weights

    def describe(
        self, tokens: list[str], query: int, scores: torch.Tensor, weights: torch.Tensor
    ) -> str:
        """The chosen query's row in every head, as HTML."""
        d_k = self.d_model // weights.size(0)
        allowed = int(torch.isfinite(scores[0, query]).sum())  # keys the query may see
        rows = []
        for head in range(weights.size(0)):
            row, score = weights[head, query], scores[head, query]
            best = int(row.argmax())
            nonzero = row[row > 0]
            entropy = float(-(nonzero * nonzero.log()).sum())
            rows.append(
                f"<tr><td>head {head + 1}</td><td>{html.escape(tokens[best])} ({best})</td>"
                f"<td>{float(row[best]):.3f}</td>"
                f"<td>{float(score[torch.isfinite(score)].abs().max()):.2f}</td>"
                f"<td>{entropy:.2f}</td></tr>"
            )
        header = (
            "<tr><th>head</th><th>attends most to</th><th>its weight</th>"
            "<th>largest |score|</th><th>entropy</th></tr>"
        )
        return (
            f"<b>query {query}: {html.escape(tokens[query])}</b> &nbsp; "
            f"<i>d</i><sub>k</sub> = {d_k}; "
            f"{allowed} keys allowed, uniform weights would have entropy "
            f"log {allowed} = {math.log(allowed):.2f}"
            f"<table style='border-spacing: 10px 0'>{header}{''.join(rows)}</table>"
        )

    def _draw(
        self,
        sentence: str,
        query: int,
        num_heads: int,
        scale: bool,
        causal: bool,
        positions: bool,
    ) -> None:
        try:
            tokens = self.tokenize(sentence)
        except ValueError as error:
            self.readout.value = f"<b>{html.escape(str(error))}</b>"
            return
        query = min(query or 0, len(tokens) - 1)
        scores, weights = self.compute(sentence, num_heads, scale, causal, positions)
        self.readout.value = self.describe(tokens, query, scores, weights)
        mask = causal_mask(len(tokens)) if causal else None
        if num_heads == 1:  # the matrix above the bars
            fig = plt.figure(figsize=(6.6, 6.6))
            grid = fig.add_gridspec(2, 1, height_ratios=[1.4, 1])
            cells, bars_cell, columns = [grid[0, 0]], grid[1, 0], 1
        else:  # up to two heads a row (the text stays readable in the book), the bars below
            columns = min(num_heads, 2)
            rows = math.ceil(num_heads / columns)
            fig = plt.figure(figsize=(6.4, 3.2 * rows + 2.6))
            grid = fig.add_gridspec(rows + 1, columns)
            cells = [grid[head // columns, head % columns] for head in range(num_heads)]
            bars_cell = grid[rows, :]
        for head, cell in enumerate(cells):
            ax = fig.add_subplot(cell)
            title = f"head {head + 1}" if num_heads > 1 else "attention weights"
            plot_attention(weights[head], ax, queries=tokens, keys=tokens, mask=mask,
                           annotate=num_heads <= 2 and len(tokens) <= 8, highlight=query,
                           title=title)  # fmt: skip
            if head % columns:  # the same queries as the head on its left
                ax.set_ylabel("")
                ax.tick_params(labelleft=False)
        bars = fig.add_subplot(bars_cell)
        width = 0.8 / num_heads
        positions_x = np.arange(len(tokens))
        for head in range(num_heads):
            bars.bar(positions_x + (head - (num_heads - 1) / 2) * width,
                     weights[head, query].numpy(), width, label=f"head {head + 1}")  # fmt: skip
        bars.set_xticks(positions_x, [f"{i}: {t}" for i, t in enumerate(tokens)])
        bars.set_ylim(0, 1.05)
        bars.set_ylabel("weight")
        bars.set_title(f"weights of query {query} ({tokens[query]}) over the keys")
        if num_heads > 1:
            bars.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
        fig.tight_layout()
        plt.show()
        plt.close(fig)


def attention_explorer(**kwargs) -> AttentionExplorer:
    """Build an :class:`AttentionExplorer`; display it as a cell's last expression."""
    return AttentionExplorer(**kwargs)
