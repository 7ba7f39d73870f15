"""Explorers of the chapters on the Transformer at work (core ipywidgets only, 7.7 and 8).

- :class:`TranslatorExplorer` -- type a number or its English name; see the trained model's
  Spanish, the correct one, and where its cross-attention looks;
- :class:`RecipeExplorer` -- the learning-rate schedule and the label-smoothed target for
  any ``d_model``, warm-up, smoothing rate and number of classes;
- :class:`DecodingExplorer` -- greedy decoding step by step and the hypotheses of beam search
  for any number and beam width;
- :class:`SamplingExplorer` -- sentences sampled from a GPT-like model at any temperature,
  each marked grammatical or not, and the distribution of the first word.

In the HTML book an explorer shows the state it was saved with; open the chapter in Colab or
Jupyter to use its controls.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch

from course_lib._devices import device_of
from course_lib._html import block, color
from course_lib._layout import control_row, fitting
from course_lib.data import (
    MAX_NUMBER,
    english_number_name,
    is_grammatical,
    number_split,
    spanish_number_name,
    tokens_to_name,
)
from course_lib.decoding import beam_search, sample
from course_lib.families import DecoderOnlyModel
from course_lib.plotting import plot_attention, to_numpy
from course_lib.training import smoothed_loss_minimum, smoothed_targets, transformer_schedule
from course_lib.translation import MAX_OUTPUT_TOKENS, NumberTranslator
from course_lib.vocab import Vocabulary

__all__ = [
    "DecodingExplorer",
    "RecipeExplorer",
    "SamplingExplorer",
    "TranslatorExplorer",
    "predicted_labels",
    "read_number",
]

_WIDE = fitting("360px")
_LABEL = {"description_width": "110px"}


def read_number(text: str) -> tuple[int | None, str]:
    """``text`` as a number 0..9999 (digits, or an English name as the course writes it) and
    its English name; ``(None, message)`` if it is neither."""
    text = " ".join(str(text).strip().lower().split())
    if text.isdigit():
        n = int(text)
        if n > MAX_NUMBER:
            return None, f"{n} is larger than {MAX_NUMBER}"
        return n, english_number_name(n)
    for n in range(MAX_NUMBER + 1):
        if english_number_name(n) == text:
            return n, text
    return None, (
        f"{html.escape(text)!r} is not a number from 0 to {MAX_NUMBER} or its English name "
        "(write it like 'two hundred twenty-one')"
    )


def predicted_labels(target: Sequence[str]) -> list[str]:
    """Row labels of cross-attention: the decoder position of input ``target[t]`` predicts
    ``target[t + 1]`` (the last one predicts ``<eos>``), so label it ``"→ target[t + 1]"``."""
    following = [*target[1:], "<eos>"]
    return [f"→ {token}" for token in following]


def _where(n: int) -> str:
    split = number_split()
    if n in split.test:
        return "held out (never seen in training)"
    if n in split.validation:
        return "validation (never trained on)"
    return "a training number"


class TranslatorExplorer(widgets.VBox):
    """Translate any number typed in, and draw the cross-attention of the translation.

    Args:
        translator: a trained :class:`~course_lib.translation.NumberTranslator`.
        text: the initial input, digits or an English name.

    Attributes:
        number: the text box; ``layer`` and ``head``: which cross-attention to draw.
        readout: HTML with the translation; ``output``: the figure.
    """

    def __init__(self, translator: NumberTranslator, text: str = "2534") -> None:
        self.translator = translator
        self.number = widgets.Text(
            value=text, description="number", continuous_update=False,
            layout=_WIDE, style=_LABEL,
        )  # fmt: skip
        layers = len(translator.model.decoder.layers)
        heads = translator.model.decoder.layers[0].cross_attention.num_heads
        self.layer = widgets.Dropdown(
            options=[(f"layer {i + 1}", i) for i in range(layers)], value=layers - 1,
            description="decoder layer", layout=_WIDE, style=_LABEL,
        )  # fmt: skip
        self.head = widgets.Dropdown(
            options=[("mean of the heads", -1)] + [(f"head {h + 1}", h) for h in range(heads)],
            value=-1, description="heads", layout=_WIDE, style=_LABEL,
        )  # fmt: skip
        self.readout = widgets.HTML()
        self.output = widgets.interactive_output(
            self._draw, {"text": self.number, "layer": self.layer, "head": self.head}
        )
        super().__init__(
            [self.number, control_row([self.layer, self.head]), self.readout, self.output]
        )

    def describe(self, text: str) -> tuple[int | None, str]:
        """The number read from ``text`` and the readout's HTML."""
        n, name = read_number(text)
        if n is None:
            return None, block(f"<span style='color:{color('fail')}'>{name}</span>")
        got = self.translator.translate([n])[0]
        want = spanish_number_name(n)
        verdict = "✓ correct" if got == want else f"✗ the rule says <b>{want}</b>"
        return n, (
            f"<b>{n}</b>: {html.escape(name)} &rarr; model: <b>{html.escape(got)}</b> "
            f"&nbsp; {verdict} &nbsp; <i>({_where(n)})</i>"
        )

    def _draw(self, text: str, layer: int, head: int) -> None:
        n, self.readout.value = self.describe(text)
        if n is None:
            return
        attention = self.translator.cross_attention(n)
        weights = attention.weights[layer]
        weights = weights.mean(0) if head < 0 else weights[head]
        which = "mean of the heads" if head < 0 else f"head {head + 1}"
        fig, ax = plt.subplots(figsize=(1.2 + 0.75 * len(attention.source),
                                        1.0 + 0.45 * len(attention.target)))  # fmt: skip
        plot_attention(weights, ax, queries=predicted_labels(attention.target),
                       keys=attention.source,
                       title=f"cross-attention, layer {layer + 1}, {which}")  # fmt: skip
        ax.set_xlabel("English (encoder output)")
        ax.set_ylabel("decoder position writing ...")
        fig.tight_layout()
        plt.show()
        plt.close(fig)


class DecodingExplorer(widgets.VBox):
    """Greedy decoding step by step and beam search's hypotheses for one number.

    Args:
        translator: a trained :class:`~course_lib.translation.NumberTranslator`.
        number: the initial number; ``beam_width``: the initial beam width.
        top: how many candidates of each greedy step to list.
    """

    def __init__(
        self, translator: NumberTranslator, number: int = 1971, beam_width: int = 4, top: int = 3
    ) -> None:
        self.translator = translator
        self.top = top
        self.number = widgets.BoundedIntText(
            value=number, min=0, max=MAX_NUMBER, description="number",
            layout=_WIDE, style=_LABEL,
        )  # fmt: skip
        self.beam_width = widgets.IntSlider(
            value=beam_width, min=1, max=8, description="beam width",
            continuous_update=False, layout=_WIDE, style=_LABEL,
        )  # fmt: skip
        self.greedy = widgets.HTML()
        self.beams = widgets.HTML()
        for control in (self.number, self.beam_width):
            control.observe(lambda _: self.refresh(), names="value")
        super().__init__([control_row([self.number, self.beam_width]), self.greedy, self.beams])
        self.refresh()

    def _token(self, index: int) -> str:
        return html.escape(self.translator.target_vocab.id_to_token(index))

    def greedy_steps(self, n: int) -> str:
        """An HTML table: at every step the ``top`` most probable tokens; greedy takes the
        first."""
        vocab = self.translator.target_vocab
        src_ids = self.translator.source_ids([n])
        scorer = self.translator.scorer(src_ids)
        ids = torch.full((1, 1), vocab.bos_id, device=src_ids.device)
        rows = []
        with torch.no_grad():
            for step in range(1, MAX_OUTPUT_TOKENS + 1):
                probabilities = torch.softmax(scorer(ids)[0], -1)
                best = probabilities.topk(self.top)
                cells = [
                    f"{self._token(int(i))} {float(p):.3f}"
                    for p, i in zip(best.values, best.indices, strict=True)
                ]
                cells[0] = f"<b>{cells[0]}</b>"
                rows.append(f"<tr><td>{step}</td><td>{' &nbsp; '.join(cells)}</td></tr>")
                ids = torch.cat([ids, best.indices[:1][None]], dim=1)
                if int(best.indices[0]) == vocab.eos_id:
                    break
        return (
            "<b>Greedy, step by step</b> (the most probable tokens and their probabilities; "
            f"greedy takes the first)<table>{''.join(rows)}</table>"
        )

    def beam_table(self, n: int, width: int) -> str:
        """An HTML table of beam search's hypotheses, best first, with their probabilities."""
        vocab = self.translator.target_vocab
        src_ids = self.translator.source_ids([n])
        start = torch.full((1, 1), vocab.bos_id, device=src_ids.device)
        result = beam_search(self.translator.scorer(src_ids), start, vocab.eos_id,
                             MAX_OUTPUT_TOKENS, width)  # fmt: skip
        rows = []
        for ids, score in zip(result.sequences[0].tolist(), result.scores[0].tolist(),
                              strict=True):  # fmt: skip
            ended = vocab.eos_id in ids
            name = tokens_to_name(vocab.decode(ids[: ids.index(vocab.eos_id)] if ended else ids))
            mark = "✓" if name == spanish_number_name(n) else ""
            rows.append(f"<tr><td>{html.escape(name)}{'' if ended else ' ...'}</td>"
                        f"<td>{score:.3f}</td><td>{math.exp(score):.4f}</td>"
                        f"<td>{mark}</td></tr>")  # fmt: skip
        return (
            f"<b>Beam search, width {width}</b>"
            "<table><tr><th>hypothesis</th><th>log-probability</th><th>probability</th>"
            f"<th></th></tr>{''.join(rows)}</table>"
        )

    def refresh(self) -> None:
        n = self.number.value
        self.greedy.value = (
            f"<p>{n}: {html.escape(english_number_name(n))}</p>" + self.greedy_steps(n)
        )
        self.beams.value = self.beam_table(n, self.beam_width.value)


class SamplingExplorer(widgets.VBox):
    """Sentences sampled from a GPT-like model, and the first word's distribution.

    Args:
        model: a trained :class:`~course_lib.families.DecoderOnlyModel`.
        vocab: its vocabulary (with ``<bos>`` and ``<eos>``).
        temperature: the initial temperature.
        count: how many sentences to sample.
        max_new_tokens: the longest sentence.
    """

    def __init__(
        self,
        model: DecoderOnlyModel,
        vocab: Vocabulary,
        temperature: float = 1.0,
        count: int = 8,
        max_new_tokens: int = 14,
    ) -> None:
        self.model, self.vocab = model, vocab
        self.count, self.max_new_tokens = count, max_new_tokens
        self.temperature = widgets.FloatSlider(
            value=temperature, min=0.1, max=3.0, step=0.1, description="temperature",
            continuous_update=False, layout=_WIDE, style=_LABEL,
        )  # fmt: skip
        self.seed = widgets.IntSlider(
            value=0, min=0, max=99, description="seed", continuous_update=False,
            layout=_WIDE, style=_LABEL,
        )  # fmt: skip
        self.readout = widgets.HTML()
        self.output = widgets.interactive_output(
            self._draw, {"temperature": self.temperature, "seed": self.seed}
        )
        super().__init__([control_row([self.temperature, self.seed]), self.readout, self.output])

    def sentences(self, temperature: float, seed: int) -> list[tuple[list[str], bool]]:
        """``count`` sampled sentences and whether each ended with ``<eos>``."""
        start = torch.full((self.count, 1), self.vocab.bos_id, device=device_of(self.model))
        ids = sample(self.model.next_token_scores, start, self.vocab.eos_id,
                     self.max_new_tokens, temperature,
                     torch.Generator().manual_seed(seed))  # fmt: skip
        found = []
        for row in ids[:, 1:].tolist():
            ended = self.vocab.eos_id in row
            words = self.vocab.decode(row[: row.index(self.vocab.eos_id)] if ended else row)
            found.append((words, ended))
        return found

    def _draw(self, temperature: float, seed: int) -> None:
        lines = []
        for words, ended in self.sentences(temperature, seed):
            good = ended and is_grammatical(words)
            mark = "✓" if good else "✗"
            lines.append(f"{mark} {html.escape(' '.join(words))}{'' if ended else ' ...'}")
        self.readout.value = (
            f"<b>{self.count} sentences at temperature {temperature:.1f}</b> "
            "(✓ grammatical, ✗ not)<br>" + "<br>".join(lines)
        )
        with torch.no_grad():
            bos = torch.full((1, 1), self.vocab.bos_id, device=device_of(self.model))
            scores = self.model.next_token_scores(bos)[0]
        probabilities = torch.softmax(scores / temperature, -1)
        top = probabilities.topk(min(10, probabilities.numel()))
        fig, ax = plt.subplots(figsize=(7.2, 2.8))
        labels = [self.vocab.id_to_token(int(i)) for i in top.indices]
        ax.bar(range(len(labels)), to_numpy(top.values))
        ax.set_xticks(range(len(labels)), labels, rotation=30)
        ax.set_ylabel("probability")
        ax.set_title(f"the first word at temperature {temperature:.1f} (the likeliest)")
        fig.tight_layout()
        plt.show()
        plt.close(fig)


# --- the training recipe (chapter "The paper's training recipe") ---------------------------

_RECIPE_WIDE = fitting("340px")
_RECIPE_LABEL = {"description_width": "110px"}
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
            layout=_RECIPE_WIDE,
            style=_RECIPE_LABEL,
        )
        self.warmup = widgets.IntSlider(
            value=warmup_steps,
            min=100,
            max=10_000,
            step=100,
            description="warm-up steps",
            continuous_update=False,
            layout=_RECIPE_WIDE,
            style=_RECIPE_LABEL,
        )
        self.epsilon = widgets.FloatSlider(
            value=epsilon,
            min=0.0,
            max=0.5,
            step=0.05,
            description="$\\epsilon_{ls}$ (smoothing)",
            continuous_update=False,
            layout=_RECIPE_WIDE,
            style=_RECIPE_LABEL,
        )
        self.num_classes = widgets.IntSlider(
            value=num_classes,
            min=2,
            max=64,
            description="classes $|\\mathcal{V}|$",
            continuous_update=False,
            layout=_RECIPE_WIDE,
            style=_RECIPE_LABEL,
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
