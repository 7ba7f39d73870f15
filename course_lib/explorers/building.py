"""Explorers of the part "Building the Transformer", built from core ipywidgets only.

- :class:`NormOrderExplorer`: post-norm or pre-norm, with or without residual connections, any
  depth: the size of the residual stream and of the gradients, layer by layer;
- :class:`TokenPathExplorer`: follow one token through an encoder, sublayer by sublayer, with
  the attention it pays in every layer;
- :class:`DecoderExplorer`: one target position of a trained Transformer under teacher
  forcing: its masked self-attention, its cross-attention and its output distribution.

They work with ipywidgets 7.7 (what Google Colab ships) and 8. In the HTML book a widget shows
the state it was saved with; open the chapter in Colab or Jupyter to move its controls.
"""

from __future__ import annotations

import html
from collections.abc import Callable

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import Tensor

from course_lib._devices import device_of
from course_lib._layout import control_row, fitting
from course_lib.encoder import Encoder, EncoderLayer
from course_lib.plotting import to_numpy
from course_lib.transformer import Transformer
from course_lib.vocab import Vocabulary

__all__ = [
    "DecoderExplorer",
    "NormOrderExplorer",
    "TokenPathExplorer",
    "layer_forward",
    "stack_statistics",
]

_WIDE = fitting("340px")
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


# --------------------------------------------------------------------------- post vs pre


class NormOrderExplorer(widgets.VBox):
    """Switch between post-norm and pre-norm and watch the statistics of every layer.

    A stack of freshly initialised encoder layers (``d_model = 64``, 4 heads) runs forward
    and backward once (:func:`stack_statistics`). Left: the root mean square of the residual
    stream after each layer. Right: the gradient norm of each layer's parameters, on a log
    scale. The other norm order is drawn in grey for comparison. Untick *residual
    connections* to see what the stack does without them.

    Attributes:
        order, layers, residual, final_norm: the controls.
        readout: an HTML widget with the numbers; output: the Output widget with the figure.
    """

    def __init__(
        self,
        norm_first: bool = False,
        num_layers: int = 12,
        residual: bool = True,
        final_norm: bool | None = None,
        seed: int = 0,
    ) -> None:
        if not 1 <= num_layers <= 48:
            raise ValueError(f"num_layers must be in 1..48, got {num_layers}")
        self.seed = seed
        final = norm_first if final_norm is None else final_norm
        self.order = widgets.ToggleButtons(options=list(NORM_ORDERS),
                                           value=NORM_ORDERS[int(bool(norm_first))],
                                           description="norm order", style=_LABEL)  # fmt: skip
        self.layers = widgets.IntSlider(value=num_layers, min=1, max=48, description="layers",
                                        continuous_update=False, layout=_WIDE,
                                        style=_LABEL)  # fmt: skip
        self.residual = widgets.Checkbox(value=residual, description="residual connections",
                                         indent=False)  # fmt: skip
        self.final_norm = widgets.Checkbox(value=final, description="final LayerNorm",
                                           indent=False)  # fmt: skip
        self.readout = widgets.HTML()
        self.order.observe(self._on_order, names="value")
        self.output = widgets.interactive_output(
            self._draw,
            {"order": self.order, "num_layers": self.layers, "residual": self.residual,
             "final_norm": self.final_norm},
        )  # fmt: skip
        super().__init__(
            [
                self.order,
                control_row([self.layers, self.residual, self.final_norm]),
                self.readout,
                self.output,
            ]
        )

    def _on_order(self, change: dict) -> None:
        self.final_norm.value = change["new"] == "pre-norm"  # each order's usual choice

    def compute(
        self, order: str, num_layers: int, residual: bool, final_norm: bool
    ) -> dict[str, Tensor]:
        """:func:`stack_statistics` for the chosen settings."""
        return stack_statistics(num_layers, order == "pre-norm", residual, final_norm,
                                seed=self.seed)  # fmt: skip

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

    def _draw(self, order: str, num_layers: int, residual: bool, final_norm: bool) -> None:
        other = NORM_ORDERS[1 - NORM_ORDERS.index(order)]
        stats = self.compute(order, num_layers, residual, final_norm)
        reference = self.compute(other, num_layers, residual, other == "pre-norm")
        self.readout.value = self.describe(order, stats)
        layers = np.arange(1, num_layers + 1)
        fig, (ax_rms, ax_grad) = plt.subplots(1, 2, figsize=(7.2, 3.4))
        for name, values, style in ((other, reference, {"color": "0.65", "linestyle": "--"}),
                                    (order, stats, {"color": "C0", "linewidth": 2})):  # fmt: skip
            ax_rms.plot(layers, values["rms"].numpy(), marker="o", ms=3, label=name, **style)
            ax_grad.semilogy(layers, values["gradient"].clamp_min(1e-30).numpy(), marker="o",
                             ms=3, label=name, **style)  # fmt: skip
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
        plt.show()
        plt.close(fig)


# --------------------------------------------------------------------------- one token


def _tokens(sentence: str) -> list[str]:
    tokens = sentence.split()
    if not 1 <= len(tokens) <= MAX_TOKENS:
        raise ValueError(f"the sentence must have 1 to {MAX_TOKENS} tokens, got {len(tokens)}")
    return tokens


class TokenPathExplorer(widgets.VBox):
    """Follow one token through an encoder, sublayer by sublayer.

    The sentence is embedded by ``embed`` (token ids ``(1, L)`` -> ``(1, L, d_model)``,
    embeddings and positions) and run through ``encoder`` layer by layer. Left: the chosen
    token's vector at every stage (after each sublayer's Add & Norm), one row per stage.
    Right: the attention the token pays to every token of the sentence, in every layer and
    head. The readout gives, per stage, how far the vector moved and how similar it still is
    to its input; ``predict`` (optional) labels each token from the encoder's output.

    Attributes:
        sentence, token: the controls; readout: HTML; output: the figure.
    """

    def __init__(
        self,
        embed: Callable[[Tensor], Tensor],
        encoder: Encoder,
        vocab: Vocabulary,
        sentence: str,
        token: int = 0,
        predict: Callable[[Tensor], list[str]] | None = None,
    ) -> None:
        tokens = _tokens(sentence)
        if not 0 <= token < len(tokens):
            raise ValueError(f"token must be in 0..{len(tokens) - 1}, got {token}")
        self.embed, self.encoder, self.vocab, self.predict = embed, encoder, vocab, predict
        self.sentence = widgets.Text(value=sentence, description="sentence",
                                     continuous_update=False,
                                     layout=fitting("520px"),
                                     style=_LABEL)  # fmt: skip
        self.token = widgets.Dropdown(options=self._options(tokens), value=token,
                                      description="token", layout=_WIDE,
                                      style=_LABEL)  # fmt: skip
        self.readout = widgets.HTML()
        self.sentence.observe(self._on_sentence, names="value")
        self.output = widgets.interactive_output(
            self._draw, {"sentence": self.sentence, "token": self.token}
        )
        super().__init__([self.sentence, self.token, self.readout, self.output])

    @staticmethod
    def _options(tokens: list[str]) -> list[tuple[str, int]]:
        return [(f"{i}: {token}", i) for i, token in enumerate(tokens)]

    def _on_sentence(self, change: dict) -> None:
        try:
            tokens = _tokens(change["new"])
        except ValueError:
            return  # _draw shows the message
        keep = min(self.token.value or 0, len(tokens) - 1)
        self.token.options = self._options(tokens)
        self.token.value = keep

    @torch.no_grad()
    def compute(self, sentence: str) -> tuple[list[str], list[Tensor], list[Tensor]]:
        """Stage names, the states ``(L, d_model)`` after each stage, and every layer's
        attention weights ``(heads, L, L)``."""
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
            labels = self.predict(states[-1][None])
            text += " &nbsp; output read as: " + ", ".join(
                f"{html.escape(t)}&rarr;{html.escape(str(label))}"
                for t, label in zip(tokens, labels, strict=True)
            )
        return f"{text}<table style='border-spacing: 10px 0'>{header}{''.join(rows)}</table>"

    def _draw(self, sentence: str, token: int) -> None:
        try:
            tokens = _tokens(sentence)
        except ValueError as error:
            self.readout.value = f"<b>{html.escape(str(error))}</b>"
            return
        token = min(token or 0, len(tokens) - 1)
        names, states, weights = self.compute(sentence)
        self.readout.value = self.describe(tokens, token, names, states)
        path = torch.stack([state[token] for state in states])  # (stages, d_model)
        num_layers, num_heads = len(weights), weights[0].size(0)
        path_height = max(2.4, 0.32 * len(names) + 0.6)  # the vector above the attention
        fig = plt.figure(figsize=(7.2, path_height + 1.8 * num_layers + 0.8))
        grid = fig.add_gridspec(num_layers + 1, 1, height_ratios=[path_height] + [1.6] * num_layers)
        ax_path = fig.add_subplot(grid[0, 0])
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
            ax = fig.add_subplot(grid[number + 1, 0])
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
        plt.show()
        plt.close(fig)


# --------------------------------------------------------------------------- the decoder


class DecoderExplorer(widgets.VBox):
    """One target position of a Transformer under teacher forcing.

    Type a source and a target sentence (tokens separated by spaces). The decoder reads
    ``<bos>`` followed by the target, all positions at once, as in training. For the chosen
    position the figure shows, in every decoder layer, its masked self-attention over the
    target positions so far and its cross-attention over the source, and the distribution
    the model predicts for the next token.

    Attributes:
        source, target, position: the controls; readout: HTML; output: the figure.
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
    ) -> None:
        _tokens(source)  # checks the sentences
        target_tokens = _tokens(target)
        if not 0 <= position <= len(target_tokens):
            raise ValueError(f"position must be in 0..{len(target_tokens)}, got {position}")
        self.model, self.src_vocab, self.tgt_vocab, self.top = model, src_vocab, tgt_vocab, top
        text = {"continuous_update": False, "layout": fitting("520px"),
                "style": _LABEL}  # fmt: skip
        self.source = widgets.Text(value=source, description="source", **text)
        self.target = widgets.Text(value=target, description="target", **text)
        self.position = widgets.Dropdown(options=self._options(target_tokens), value=position,
                                         description="position", layout=_WIDE,
                                         style=_LABEL)  # fmt: skip
        self.readout = widgets.HTML()
        self.target.observe(self._on_target, names="value")
        self.output = widgets.interactive_output(
            self._draw,
            {"source": self.source, "target": self.target, "position": self.position},
        )
        super().__init__([self.source, self.target, self.position, self.readout, self.output])

    @staticmethod
    def _inputs(target_tokens: list[str]) -> list[str]:
        return ["<bos>", *target_tokens]

    def _options(self, target_tokens: list[str]) -> list[tuple[str, int]]:
        return [(f"{i}: {t}", i) for i, t in enumerate(self._inputs(target_tokens))]

    def _on_target(self, change: dict) -> None:
        try:
            tokens = _tokens(change["new"])
        except ValueError:
            return
        keep = min(self.position.value or 0, len(tokens))
        self.position.options = self._options(tokens)
        self.position.value = keep

    @torch.no_grad()
    def compute(self, source: str, target: str) -> tuple[Tensor, list]:
        """The next-token probabilities ``(L_t + 1, vocab)`` for ``<bos> + target`` and the
        decoder's attention weights (one :class:`~course_lib.decoder.DecoderWeights` per
        layer)."""
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

    def _draw(self, source: str, target: str, position: int) -> None:
        try:
            source_tokens, target_tokens = _tokens(source), _tokens(target)
        except ValueError as error:
            self.readout.value = f"<b>{html.escape(str(error))}</b>"
            return
        inputs = self._inputs(target_tokens)
        position = min(position or 0, len(inputs) - 1)
        probabilities, weights = self.compute(source, target)
        self.readout.value = self.describe(inputs, position, probabilities)
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
        plt.show()
        plt.close(fig)
