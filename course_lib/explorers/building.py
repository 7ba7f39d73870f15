"""Explorers of the part "Building the Transformer", built from core ipywidgets only.

- :class:`NormOrderExplorer`: post-norm or pre-norm, with or without residual connections, any
  depth: the size of the residual stream and of the gradients, layer by layer;
- :class:`TokenPathExplorer`: follow one token through an encoder, sublayer by sublayer, with
  the attention it pays in every layer;
- :class:`DecoderExplorer`: one target position of a trained Transformer under teacher
  forcing: its masked self-attention, its cross-attention and its output distribution.

They run on the engine of :mod:`course_lib.explorers.base`: live from Python in Jupyter,
JupyterLab and Colab (ipywidgets 8 and 7.7), and, when a chapter is executed for the book, as
states computed for prepared values and stored with the chapter, which the HTML book switches
between with no kernel.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from torch import Tensor

from course_lib._devices import device_of
from course_lib._html import TABLE_STYLE
from course_lib._layout import fitting
from course_lib.encoder import Encoder, EncoderLayer
from course_lib.explorers.base import (
    Control,
    Explorer,
    figure_part,
    menu,
    slider,
    switch,
    text_box,
    text_part,
)
from course_lib.plotting import to_numpy
from course_lib.transformer import Transformer
from course_lib.vocab import Vocabulary

__all__ = [
    "BOOK_LAYERS",
    "DecoderExplorer",
    "NormOrderExplorer",
    "TokenPathExplorer",
    "layer_forward",
    "stack_statistics",
]

_LABEL = {"description_width": "110px"}
NORM_ORDERS = ("post-norm", "pre-norm")
MAX_TOKENS = 12


# --------------------------------------------------------------------------- statistics


def layer_forward(
    layer: EncoderLayer, x: Tensor, mask: Tensor | None = None, residual: bool = True
) -> Tensor:
    """``layer(x, mask)``, or the same layer with its two residual connections removed.

    With ``residual=False`` each sublayer's output replaces its input instead of being added to
    it: ``LayerNorm(sublayer(x))`` (post-norm) or ``sublayer(LayerNorm(x))`` (pre-norm).
    """

    def attention(h: Tensor) -> Tensor:
        return layer.self_attention_block(h, mask)[0]

    for norm, block in ((layer.norm1, attention), (layer.norm2, layer.feed_forward_block)):
        skip = x if residual else 0.0
        x = skip + block(norm(x)) if layer.norm_first else norm(skip + block(x))
    return x


def stack_statistics(
    num_layers: int,
    norm_first: bool,
    residual: bool = True,
    final_norm: bool | None = None,
    d_model: int = 64,
    num_heads: int = 4,
    seed: int = 0,
) -> dict[str, Tensor]:
    """Run a freshly initialised encoder stack forward and backward once; per-layer numbers.

    The input is 8 sequences of 10 random vectors with entries ``N(0, 1)``; the loss is the
    mean squared difference between the stack's output (after the final norm, if any) and a
    fixed random target. Everything is seeded by ``seed``.

    Returns:
        ``{"rms": ..., "gradient": ...}``, each of shape ``(num_layers,)``: the root mean
        square of the residual stream after each layer, and the norm of the gradient of all
        of that layer's parameters.
    """
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    encoder = Encoder(num_layers, d_model, num_heads, 4 * d_model, norm_first=norm_first,
                      final_norm=final_norm)  # fmt: skip
    x = torch.randn(8, 10, d_model, generator=generator)
    target = torch.randn(8, 10, d_model, generator=generator)
    rms = []
    for layer in encoder.layers:
        x = layer_forward(layer, x, residual=residual)
        rms.append(x.detach().pow(2).mean().sqrt())
    if encoder.norm is not None:
        x = encoder.norm(x)
    (x - target).pow(2).mean().backward()
    gradient = [
        torch.cat([p.grad.reshape(-1) for p in layer.parameters()]).norm()
        for layer in encoder.layers
    ]
    return {"rms": torch.stack(rms), "gradient": torch.stack(gradient)}


@contextmanager
def one_thread() -> Iterator[None]:
    """Run torch on one thread inside the block: the explorers' matrices are small, and
    threads competing for a busy machine's cores can make a deep stack many times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


# --------------------------------------------------------------------------- post vs pre

BOOK_LAYERS = (3, 12, 48)
"""The depths the book's ``layers`` slider offers (with the explorer's first depth): a shallow
stack, the usual one and the deepest the slider allows, where the two orders differ most."""


class NormOrderExplorer(Explorer):
    """Switch between post-norm and pre-norm and watch the statistics of every layer.

    A stack of freshly initialised encoder layers (``d_model = 64``, 4 heads) runs forward
    and backward once (:func:`stack_statistics`). Parts: ``readout``, the first and last
    layer's numbers; ``figure``, left the root mean square of the residual stream after each
    layer, right the gradient norm of each layer's parameters on a log scale, with the other
    norm order (with its usual final norm) drawn in grey for comparison. Untick *residual
    connections* to see what the stack does without them. Each setting is computed once and
    kept (:meth:`compute`).

    In a kernel, choosing an order also sets *final LayerNorm* to that order's usual choice
    (off for post-norm, on for pre-norm). In the book both switches are independent and the
    ``layers`` slider offers :data:`BOOK_LAYERS`.

    Attributes:
        order, layers, residual, final_norm: live, the controls (in the book:
            :attr:`controls`).
        readout, figure: live, the parts, an ``HTMLMath`` and an ``Output`` widget (in the
            book: :attr:`parts`, and the stored states in :attr:`states`).
    """

    def __init__(
        self,
        norm_first: bool = False,
        num_layers: int = 12,
        residual: bool = True,
        final_norm: bool | None = None,
        seed: int = 0,
        *,
        book: bool | None = None,
        offer: Mapping[str, Sequence] | None = None,
    ) -> None:
        if not 1 <= num_layers <= 48:
            raise ValueError(f"num_layers must be in 1..48, got {num_layers}")
        self.seed = seed
        self._computed: dict[tuple, dict[str, Tensor]] = {}
        final = bool(norm_first if final_norm is None else final_norm)
        order = NORM_ORDERS[int(bool(norm_first))]
        controls = [
            Control("order", "norm order", order, book=NORM_ORDERS, kind="buttons",
                    live=lambda: widgets.ToggleButtons(options=list(NORM_ORDERS), value=order,
                                                       description="norm order",
                                                       style=_LABEL)),
            slider("layers", "layers", num_layers, sorted({*BOOK_LAYERS, num_layers}),
                   lambda: widgets.IntSlider(value=num_layers, min=1, max=48,
                                             description="layers", continuous_update=False)),
            switch("residual", "residual connections", residual),
            switch("final_norm", "final LayerNorm", final),
        ]  # fmt: skip
        everything = ("order", "layers", "residual", "final_norm")
        parts = [
            text_part("readout", everything, self._describe),
            figure_part("figure", everything, self.draw),
        ]
        rows = [["order", "layers"], ["residual", "final_norm"]]
        super().__init__(controls, parts, rows, book=book, offer=offer, label_width="110px")
        if not self.book:
            self.order.observe(self._on_order, names="value")

    def _on_order(self, change: dict) -> None:
        self.final_norm.value = change["new"] == "pre-norm"  # each order's usual choice

    def compute(
        self, order: str, num_layers: int, residual: bool, final_norm: bool
    ) -> dict[str, Tensor]:
        """:func:`stack_statistics` for the chosen settings (computed once, then kept)."""
        key = (order, num_layers, bool(residual), bool(final_norm))
        if key not in self._computed:
            with one_thread():
                self._computed[key] = stack_statistics(num_layers, order == "pre-norm",
                                                       residual, final_norm,
                                                       seed=self.seed)  # fmt: skip
        return self._computed[key]

    @staticmethod
    def describe(order: str, stats: dict[str, Tensor]) -> str:
        """The first and last layer's numbers, as HTML."""
        rms, gradient = stats["rms"], stats["gradient"]
        ratio = float(gradient[0] / gradient[-1])
        return (
            f"<b>{order}</b>: residual stream RMS {float(rms[0]):.2f} after layer 1, "
            f"{float(rms[-1]):.2f} after layer {len(rms)}; gradient norm "
            f"{float(gradient[0]):.2e} at layer 1, {float(gradient[-1]):.2e} at layer "
            f"{len(rms)} (bottom / top = {ratio:.3g})"
        )

    def _describe(self, order: str, layers: int, residual: bool, final_norm: bool) -> str:
        return self.describe(order, self.compute(order, layers, residual, final_norm))

    def draw(self, order: str, layers: int, residual: bool, final_norm: bool) -> Figure:
        """Both panels: the chosen setting in colour, the other order in grey."""
        other = NORM_ORDERS[1 - NORM_ORDERS.index(order)]
        stats = self.compute(order, layers, residual, final_norm)
        reference = self.compute(other, layers, residual, other == "pre-norm")
        depth = np.arange(1, layers + 1)
        fig, (ax_rms, ax_grad) = plt.subplots(1, 2, figsize=(7.2, 3.4))
        for name, values, style in ((other, reference, {"color": "0.65", "linestyle": "--"}),
                                    (order, stats, {"color": "C0", "linewidth": 2})):  # fmt: skip
            ax_rms.plot(depth, values["rms"].numpy(), marker="o", ms=3, label=name, **style)
            ax_grad.semilogy(depth, values["gradient"].clamp_min(1e-30).numpy(), marker="o",
                             ms=3, label=name, **style)  # fmt: skip
        for ax in (ax_rms, ax_grad):
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # layers are whole
        ax_rms.set_xlabel("layer")
        ax_rms.set_ylabel("RMS of the residual stream")
        ax_rms.set_ylim(bottom=0)
        ax_grad.set_xlabel("layer")
        ax_grad.set_ylabel("gradient norm of the layer")
        ax_rms.legend()
        suffix = "" if residual else " (no residual connections)"
        ax_rms.set_title("activations" + suffix)
        ax_grad.set_title("gradients" + suffix)
        fig.tight_layout()
        return fig


# --------------------------------------------------------------------------- one token


def _tokens(sentence: str) -> list[str]:
    tokens = sentence.split()
    if not 1 <= len(tokens) <= MAX_TOKENS:
        raise ValueError(f"the sentence must have 1 to {MAX_TOKENS} tokens, got {len(tokens)}")
    return tokens


def _sentence(text: str) -> str:
    """A typed sentence with single spaces between its tokens; ValueError if it has too few
    or too many tokens."""
    return " ".join(_tokens(text))


def _replace_options(
    explorer: Explorer, menu: widgets.Dropdown, options: list[tuple[str, int]], keep: int
) -> None:
    """Give a live menu new options and select ``keep``, without redrawing: the explorer has
    already redrawn for the control these options follow, with the menu's value clamped as
    ``keep`` is. (Options and index are set one after the other: under
    ``hold_trait_notifications`` ipywidgets 8 resets the index to 0 after the fact.)"""
    refreshing, explorer._refreshing = explorer._refreshing, True
    try:
        menu.options = options
        menu.value = keep
    finally:
        explorer._refreshing = refreshing


def _numbered(tokens: Sequence[str]) -> list[tuple[str, int]]:
    return [(f"{i}: {token}", i) for i, token in enumerate(tokens)]


class TokenPathExplorer(Explorer):
    """Follow one token through an encoder, sublayer by sublayer.

    The sentence is embedded by ``embed`` (token ids ``(1, L)`` -> ``(1, L, d_model)``,
    embeddings and positions) and run through ``encoder`` layer by layer. Parts: ``readout``,
    per stage how far the chosen token's vector moved and how similar it still is to its
    input, and the labels ``predict`` (optional) gives each token from the encoder's output;
    ``figure``, above the token's vector at every stage (after each sublayer's Add & Norm),
    one row per stage, below the attention the token pays to every token of the sentence, in
    every layer and head. Each sentence is run once, then kept (:meth:`compute`).

    In a kernel the sentence is free text (tokens separated by spaces); in the book it is a
    menu of ``prepared`` sentences (default: the given one only), and the token menu offers
    every token of the chosen sentence.

    Attributes:
        sentence, token: live, the controls; readout, figure: live, the parts (in the book:
            :attr:`controls`, :attr:`parts` and :attr:`states`).
    """

    def __init__(
        self,
        embed: Callable[[Tensor], Tensor],
        encoder: Encoder,
        vocab: Vocabulary,
        sentence: str,
        token: int = 0,
        predict: Callable[[Tensor], list[str]] | None = None,
        prepared: Sequence[str] = (),
        *,
        book: bool | None = None,
        offer: Mapping[str, Sequence] | None = None,
    ) -> None:
        tokens = _tokens(sentence)
        if not 0 <= token < len(tokens):
            raise ValueError(f"token must be in 0..{len(tokens) - 1}, got {token}")
        for text in prepared:
            _tokens(text)
        self.embed, self.encoder, self.vocab, self.predict = embed, encoder, vocab, predict
        self._computed: dict[str, tuple] = {}
        offered = [sentence, *(text for text in prepared if _sentence(text) != _sentence(sentence))]
        controls = [
            text_box("sentence", "sentence", sentence, offered, read=_sentence),
            menu(
                "token",
                "token",
                token,
                lambda sentence: _numbered(sentence.split()),
                depends=("sentence",),
            ),
        ]
        parts = [
            text_part("readout", ("sentence", "token"), self._describe),
            figure_part("figure", ("sentence", "token"), self.draw),
        ]
        rows = [["sentence"], ["token"]]
        super().__init__(controls, parts, rows, book=book, offer=offer, label_width="110px")

    @torch.no_grad()
    def compute(self, sentence: str) -> tuple[list[str], list[Tensor], list[Tensor]]:
        """Stage names, the states ``(L, d_model)`` after each stage, and every layer's
        attention weights ``(heads, L, L)`` (computed once per sentence, then kept)."""
        key = _sentence(sentence)
        if key not in self._computed:
            with one_thread():
                self._computed[key] = self._run(key)
        return self._computed[key]

    def _run(self, sentence: str) -> tuple[list[str], list[Tensor], list[Tensor]]:
        ids = torch.tensor([self.vocab.encode(_tokens(sentence))], device=device_of(self.encoder))
        x = self.embed(ids)
        names, states, weights = ["input"], [x[0]], []
        for number, layer in enumerate(self.encoder.layers, start=1):
            attended, w = layer.self_attention_block(
                layer.norm1(x) if layer.norm_first else x, need_weights=True
            )
            x = x + attended if layer.norm_first else layer.norm1(x + attended)
            names.append(f"layer {number}: attention")
            states.append(x[0])
            update = layer.feed_forward_block(layer.norm2(x) if layer.norm_first else x)
            x = x + update if layer.norm_first else layer.norm2(x + update)
            names.append(f"layer {number}: feed-forward")
            states.append(x[0])
            weights.append(w[0])
        if self.encoder.norm is not None:
            x = self.encoder.norm(x)
            names.append("final norm")
            states.append(x[0])
        return names, states, weights

    def describe(
        self, tokens: list[str], token: int, names: list[str], states: list[Tensor]
    ) -> str:
        """Per stage: the norm of the token's vector, how far it moved, and its cosine
        similarity with its input, as an HTML table."""
        start = states[0][token]
        rows = []
        for index, (name, state) in enumerate(zip(names, states, strict=True)):
            vector = state[token]
            moved = 0.0 if index == 0 else float((vector - states[index - 1][token]).norm())
            cosine = float(torch.nn.functional.cosine_similarity(vector, start, dim=0))
            rows.append(f"<tr><td>{html.escape(name)}</td><td>{float(vector.norm()):.2f}</td>"
                        f"<td>{moved:.2f}</td><td>{cosine:+.2f}</td></tr>")  # fmt: skip
        header = (
            "<tr><th>stage</th><th>|vector|</th><th>moved by</th>"
            "<th>cosine with its input</th></tr>"
        )
        text = f"<b>token {token}: {html.escape(tokens[token])}</b>"
        if self.predict is not None:
            with torch.no_grad():
                labels = self.predict(states[-1][None])
            text += " &nbsp; output read as: " + ", ".join(
                f"{html.escape(t)}&rarr;{html.escape(str(label))}"
                for t, label in zip(tokens, labels, strict=True)
            )
        return f"{text}<table style='{TABLE_STYLE}'>{header}{''.join(rows)}</table>"

    def _describe(self, sentence: str, token: int) -> str:
        tokens = _tokens(sentence)
        names, states, _ = self.compute(sentence)
        return self.describe(tokens, min(token or 0, len(tokens) - 1), names, states)

    def draw(self, sentence: str, token: int) -> Figure:
        """The token's vector after every stage, and its attention in every layer."""
        tokens = _tokens(sentence)
        token = min(token or 0, len(tokens) - 1)
        names, states, weights = self.compute(sentence)
        path = torch.stack([state[token] for state in states])  # (stages, d_model)
        num_layers, num_heads = len(weights), weights[0].size(0)
        path_height = max(2.4, 0.32 * len(names) + 0.6)  # the vector above the attention
        fig = plt.figure(figsize=(7.2, path_height + 1.8 * num_layers + 0.8))
        outer = fig.add_gridspec(2, 1, height_ratios=[path_height, 1.8 * num_layers])
        grid = outer[1, 0].subgridspec(num_layers, 1, hspace=0.12)  # the layers close together
        ax_path = fig.add_subplot(outer[0, 0])
        limit = float(path.abs().max())
        image = ax_path.imshow(to_numpy(path), aspect="auto", cmap="RdBu_r", vmin=-limit,
                               vmax=limit)  # fmt: skip
        ax_path.set_yticks(range(len(names)), names)
        ax_path.set_xlabel("feature")
        ax_path.set_title(f"the vector of token {token} ({tokens[token]}) after each stage")
        fig.colorbar(image, ax=ax_path, fraction=0.04)
        width = 0.8 / num_heads
        positions = np.arange(len(tokens))
        for number, w in enumerate(weights):
            ax = fig.add_subplot(grid[number, 0])
            for head in range(num_heads):
                ax.bar(positions + (head - (num_heads - 1) / 2) * width, to_numpy(w[head, token]),
                       width, label=f"head {head + 1}")  # fmt: skip
            ax.set_ylim(0, 1.05)
            ax.set_xticks(positions, tokens if number == num_layers - 1 else [""] * len(tokens))
            ax.set_ylabel(f"layer {number + 1}")
            if number == 0:
                ax.set_title(f"attention of token {token} ({tokens[token]})")
                ax.legend(fontsize="small", loc="upper right")
        fig.tight_layout()
        return fig


# --------------------------------------------------------------------------- the decoder

Target = str | tuple[str, str]  # a target, or (target, a note shown with it in the book)


class DecoderExplorer(Explorer):
    """One target position of a Transformer under teacher forcing.

    A source and a target sentence (tokens separated by spaces): the decoder reads ``<bos>``
    followed by the target, all positions at once, as in training. Parts: ``readout``, what
    the chosen position reads and the most likely next tokens there; ``figure``, in every
    decoder layer the position's masked self-attention over the target positions so far and
    its cross-attention over the source, and below them the distribution the model predicts
    for the next token. Each (source, target) pair is run once, then kept (:meth:`compute`).

    In a kernel source and target are free text and the position menu follows the target.
    In the book the source is a menu of the keys of ``pairs`` (default: the given source
    only), the target a menu of the targets ``pairs`` offers with the chosen source (a target
    may come with a note, ``(target, note)``), and the position a slider from ``<bos>`` to
    the last token. The targets of a source must all have the same number of tokens, as the
    book's position slider follows the source.

    Attributes:
        source, target, position: live, the controls; readout, figure: live, the parts (in
            the book: :attr:`controls`, :attr:`parts` and :attr:`states`).
        pairs: the book's sources, each with its ``(target, note)`` pairs.
    """

    def __init__(
        self,
        model: Transformer,
        src_vocab: Vocabulary,
        tgt_vocab: Vocabulary,
        source: str,
        target: str,
        position: int = 0,
        top: int = 5,
        pairs: Mapping[str, Sequence[Target]] | None = None,
        *,
        book: bool | None = None,
        offer: Mapping[str, Sequence] | None = None,
    ) -> None:
        _tokens(source)  # checks the sentences
        target_tokens = _tokens(target)
        if not 0 <= position <= len(target_tokens):
            raise ValueError(f"position must be in 0..{len(target_tokens)}, got {position}")
        self.model, self.src_vocab, self.tgt_vocab, self.top = model, src_vocab, tgt_vocab, top
        self._computed: dict[tuple[str, str], tuple[Tensor, list]] = {}
        self.pairs = _book_pairs(source, target, pairs)

        def targets(source: str) -> list[tuple[str, str]]:
            return [(text if not note else f"{text} ({note})", text)
                    for text, note in self.pairs[source]]  # fmt: skip

        def positions(source: str) -> list[tuple[str, int]]:
            length = len(_tokens(self.pairs[source][0][0]))
            return [("0 <bos>", 0), *((str(i), i) for i in range(1, length + 1))]

        controls = [
            text_box("source", "source", source, list(self.pairs), read=_sentence),
            Control("target", "target", _sentence(target), kind="menu", options=targets,
                    depends=("source",), read=_sentence,
                    live=lambda: widgets.Text(value=target, description="target",
                                              continuous_update=False,
                                              layout=fitting("520px"))),
            Control("position", "position", position, kind="slider", options=positions,
                    depends=("source",),
                    live=lambda: widgets.Dropdown(options=self._options(target_tokens),
                                                  value=position, description="position")),
        ]  # fmt: skip
        everything = ("source", "target", "position")
        parts = [
            text_part("readout", everything, self._describe),
            figure_part("figure", everything, self.draw),
        ]
        rows = [["source"], ["target"], ["position"]]
        super().__init__(controls, parts, rows, book=book, offer=offer, label_width="110px")
        if not self.book:
            self.target.observe(self._on_target, names="value")

    @staticmethod
    def _inputs(target_tokens: list[str]) -> list[str]:
        return ["<bos>", *target_tokens]

    def _options(self, target_tokens: list[str]) -> list[tuple[str, int]]:
        return _numbered(self._inputs(target_tokens))

    def _on_target(self, change: dict) -> None:
        # Live only: the position menu follows the typed target (the book's follows the source).
        try:
            tokens = _tokens(change["new"])
        except ValueError:
            return  # the message line says what is wrong
        keep = min(self.position.value or 0, len(tokens))
        _replace_options(self, self.position, self._options(tokens), keep)

    @torch.no_grad()
    def compute(self, source: str, target: str) -> tuple[Tensor, list]:
        """The next-token probabilities ``(L_t + 1, vocab)`` for ``<bos> + target`` and the
        decoder's attention weights (one :class:`~course_lib.decoder.DecoderWeights` per
        layer); computed once per pair, then kept."""
        key = (_sentence(source), _sentence(target))
        if key not in self._computed:
            with one_thread():
                self._computed[key] = self._run(*key)
        return self._computed[key]

    def _run(self, source: str, target: str) -> tuple[Tensor, list]:
        model = self.model
        device = device_of(model)
        src = torch.tensor([self.src_vocab.encode(_tokens(source))], device=device)
        tgt = torch.tensor([self.tgt_vocab.encode(_tokens(target), add_bos=True)], device=device)
        src_mask = model.source_mask(src)
        memory = model.encode(src, src_mask)
        states, weights = model.decoder(model.embed_target(tgt), memory,
                                        model.target_mask(tgt), src_mask,
                                        return_weights=True)  # fmt: skip
        return model.output(states)[0].softmax(-1), weights

    def describe(self, inputs: list[str], position: int, probabilities: Tensor) -> str:
        """The most likely next tokens at ``position``, as HTML."""
        values, ids = probabilities[position].topk(min(self.top, probabilities.size(-1)))
        best = ", ".join(
            f"{html.escape(self.tgt_vocab.id_to_token(int(i)))} ({float(p):.3f})"
            for p, i in zip(values, ids, strict=True)
        )
        return (
            f"<b>position {position}</b> reads {html.escape(' '.join(inputs[: position + 1]))}"
            f" &rarr; most likely next tokens: {best}"
        )

    def _describe(self, source: str, target: str, position: int) -> str:
        inputs = self._inputs(_tokens(target))
        position = min(position or 0, len(inputs) - 1)
        return self.describe(inputs, position, self.compute(source, target)[0])

    def draw(self, source: str, target: str, position: int) -> Figure:
        """The position's attention in every layer and its next-token distribution."""
        source_tokens, inputs = _tokens(source), self._inputs(_tokens(target))
        position = min(position or 0, len(inputs) - 1)
        probabilities, weights = self.compute(source, target)
        num_layers = len(weights)
        fig = plt.figure(figsize=(7.2, 2.2 * num_layers + 2.6))
        grid = fig.add_gridspec(num_layers + 1, 2)
        for number, w in enumerate(weights):
            for column, (kind, keys) in enumerate(
                (("self_attention", inputs), ("cross_attention", source_tokens))
            ):
                ax = fig.add_subplot(grid[number, column])
                rows = getattr(w, kind)[0, :, position]  # (heads, keys)
                heads = rows.size(0)
                width = 0.8 / heads
                x = np.arange(len(keys))
                for head in range(heads):
                    ax.bar(x + (head - (heads - 1) / 2) * width, to_numpy(rows[head]), width,
                           label=f"head {head + 1}")  # fmt: skip
                ax.set_xticks(x, keys)
                ax.set_ylim(0, 1.05)
                title = "masked self-attention" if column == 0 else "cross-attention"
                ax.set_title(f"layer {number + 1}: {title}", fontsize="medium")
                if number == 0 and column == 1:
                    ax.legend(fontsize="small", loc="upper right")
        ax = fig.add_subplot(grid[num_layers, :])
        vocabulary = self.tgt_vocab.tokens
        ax.bar(np.arange(len(vocabulary)), to_numpy(probabilities[position]), color="C2")
        ax.set_xticks(np.arange(len(vocabulary)), vocabulary, rotation=90)  # <pad>, <bos>...
        ax.set_ylim(0, 1.05)
        ax.set_title(f"distribution of the token after position {position}", fontsize="medium")
        fig.tight_layout()
        return fig


def _book_pairs(
    source: str, target: str, pairs: Mapping[str, Sequence[Target]] | None
) -> dict[str, list[tuple[str, str]]]:
    """``pairs`` with every sentence normalised and every target as ``(target, note)``; the
    explorer's first source and target come first. ValueError if a sentence is unreadable or
    the targets of a source differ in length."""
    first, first_target = _sentence(source), _sentence(target)
    found: dict[str, list[tuple[str, str]]] = {first: [(first_target, "")]}
    for text, targets in (pairs or {}).items():
        offered = found.setdefault(_sentence(text), [])
        for given in targets:
            wanted, note = (given, "") if isinstance(given, str) else given
            wanted = _sentence(wanted)
            for index, (known, known_note) in enumerate(offered):
                if known == wanted:
                    offered[index] = (known, known_note or note)
                    break
            else:
                offered.append((wanted, note))
    for text, offered in found.items():
        lengths = {len(wanted.split()) for wanted, _ in offered}
        if len(lengths) > 1:
            raise ValueError(
                f"the targets offered with the source {text!r} must have the same number of "
                f"tokens (the book's position slider follows the source), got {sorted(lengths)}"
            )
    return found
