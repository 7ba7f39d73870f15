"""Explorers of the chapters on the Transformer at work (core ipywidgets only, 7.7 and 8).

- :class:`TranslatorExplorer` -- type a number or its English name; see the trained model's
  Spanish, the correct one, and where its cross-attention looks;
- :class:`RecipeExplorer` -- the learning-rate schedule and the label-smoothed target for
  any ``d_model``, warm-up, smoothing rate and number of classes;
- :class:`DecodingExplorer` -- greedy decoding step by step and the hypotheses of beam search
  for any number and beam width;
- :class:`SamplingExplorer` -- sentences sampled from a GPT-like model at any temperature,
  each marked grammatical or not, and the distribution of the first word.

All four run on the engine of :mod:`course_lib.explorers.base`: live from Python in a kernel
(every value, free text included), and in the HTML book with the states of the values listed
by this module's ``BOOK_...`` constants, computed when the chapter is executed.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from course_lib._devices import device_of
from course_lib._html import TABLE_STYLE
from course_lib.data import (
    MAX_NUMBER,
    english_number_name,
    is_grammatical,
    number_split,
    spanish_number_name,
    tokens_to_name,
)
from course_lib.decoding import beam_search, sample
from course_lib.explorers.base import Control, Explorer, figure_part, menu, slider, text_part
from course_lib.families import DecoderOnlyModel
from course_lib.plotting import plot_attention, to_numpy
from course_lib.training import smoothed_loss_minimum, smoothed_targets, transformer_schedule
from course_lib.translation import MAX_OUTPUT_TOKENS, NumberTranslator
from course_lib.vocab import Vocabulary

__all__ = [
    "BOOK_BEAM_WIDTHS",
    "BOOK_CLASSES",
    "BOOK_DECODING_NUMBERS",
    "BOOK_EPSILONS",
    "BOOK_SEEDS",
    "BOOK_TEMPERATURES",
    "BOOK_TRANSLATOR_INPUTS",
    "BOOK_WARMUPS",
    "DecodingExplorer",
    "RecipeExplorer",
    "SamplingExplorer",
    "TranslatorExplorer",
    "predicted_labels",
    "read_number",
    "schedule_figure",
    "target_figure",
]

_WIDTH = "360px"
_LABEL_WIDTH = "110px"


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


def _number_of(text: str) -> int:
    """The explorer's reading of a typed text: :func:`read_number`'s number, or a
    ``ValueError`` with its message (the engine shows it, escaped, above the parts)."""
    n, name = read_number(text)
    if n is None:
        raise ValueError(html.unescape(name))
    return n


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


BOOK_TRANSLATOR_INPUTS = ("2534", "one hundred", "116", "9021", "1728")
"""The inputs the book's translator offers (with the first input): 2534, a training number;
100 typed as its English name, the one number of 0..9999 the shipped model gets wrong
(*ciento* for *cien*); 116 and 9021, irregular forms (*dieciséis*, *nueve mil veintiuno*);
1728, held out from training (*mil setecientos veintiocho*)."""


class TranslatorExplorer(Explorer):
    """Translate any number typed in, and draw the cross-attention of the translation.

    Parts: ``readout``, the number, its English name, the model's Spanish and the rule's, and
    whether the number was trained on; ``figure``, the cross-attention of the chosen decoder
    layer and head (or the mean of the heads) over the English tokens. A text that is not a
    number shows the engine's message line instead.

    In the book the text box is a menu of :data:`BOOK_TRANSLATOR_INPUTS` (with the first
    input), and the layer and head menus offer all their options.

    Args:
        translator: a trained :class:`~course_lib.translation.NumberTranslator`.
        text: the initial input, digits or an English name.

    Attributes:
        number: the text box (a menu in the book); ``layer`` and ``head``: which
            cross-attention to draw.
        readout, figure: the parts.
    """

    def __init__(
        self,
        translator: NumberTranslator,
        text: str = "2534",
        *,
        book: bool | None = None,
        offer: Mapping[str, Sequence] | None = None,
    ) -> None:
        self.translator = translator
        self._attention: dict[int, object] = {}
        self._translations: dict[int, str] = {}
        layers = len(translator.model.decoder.layers)
        heads = translator.model.decoder.layers[0].cross_attention.num_heads
        prepared = (text, *[t for t in BOOK_TRANSLATOR_INPUTS if t != text])
        controls = [
            Control("number", "number", text, kind="menu", book=prepared, read=_number_of,
                    live=lambda: widgets.Text(value=text, description="number",
                                              continuous_update=False)),
            menu("layer", "decoder layer", layers - 1,
                 [(f"layer {i + 1}", i) for i in range(layers)]),
            menu("head", "heads", -1,
                 [("mean of the heads", -1)] + [(f"head {h + 1}", h) for h in range(heads)]),
        ]  # fmt: skip
        parts = [
            text_part("readout", ("number",), self.describe),
            figure_part("figure", ("number", "layer", "head"), self.draw),
        ]
        rows = [["number"], ["layer", "head"]]
        super().__init__(controls, parts, rows, book=book, offer=offer,
                         width=_WIDTH, label_width=_LABEL_WIDTH)  # fmt: skip

    def translation(self, n: int) -> str:
        """The model's Spanish for ``n`` (computed once)."""
        if n not in self._translations:
            self._translations[n] = self.translator.translate([n])[0]
        return self._translations[n]

    def describe(self, number: int) -> str:
        """The readout's HTML: the number, its names, the model's Spanish and a verdict."""
        got, want = self.translation(number), spanish_number_name(number)
        verdict = "✓ correct" if got == want else f"✗ the rule says <b>{want}</b>"
        return (
            f"<b>{number}</b>: {html.escape(english_number_name(number))} &rarr; model: "
            f"<b>{html.escape(got)}</b> &nbsp; {verdict} &nbsp; <i>({_where(number)})</i>"
        )

    def draw(self, number: int, layer: int, head: int) -> Figure:
        """The cross-attention of ``layer`` (one head, or the mean of the heads if ``head``
        is -1) while the model writes its translation of ``number``."""
        if number not in self._attention:
            self._attention[number] = self.translator.cross_attention(number)
        attention = self._attention[number]
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
        return fig


BOOK_DECODING_NUMBERS = (1971, 100, 21, 3724, 7777, 9021)
"""The numbers the book's decoding explorer offers (with the first number): 1971, 100 (the
model hesitates between *cien* and *ciento*), a short one, 3724 (held out from training),
and two long ones."""
BOOK_BEAM_WIDTHS = (1, 2, 4, 8)
"""The beam widths the book's slider offers (with the first width); 1 is greedy."""


class DecodingExplorer(Explorer):
    """Greedy decoding step by step and beam search's hypotheses for one number.

    Parts: ``greedy``, the number's English name and, at every greedy step, the ``top`` most
    probable tokens with their probabilities; ``beams``, beam search's hypotheses at the
    chosen width, best first, with their log-probabilities and probabilities (✓ marks the
    rule's translation). ``greedy`` depends on the number only.

    In the book the number is a menu of :data:`BOOK_DECODING_NUMBERS` and the beam width a
    slider over :data:`BOOK_BEAM_WIDTHS` (each with the first value).

    Args:
        translator: a trained :class:`~course_lib.translation.NumberTranslator`.
        number: the initial number; ``beam_width``: the initial beam width (1 to 8).
        top: how many candidates of each greedy step to list.
    """

    def __init__(
        self,
        translator: NumberTranslator,
        number: int = 1971,
        beam_width: int = 4,
        top: int = 3,
        *,
        book: bool | None = None,
        offer: Mapping[str, Sequence] | None = None,
    ) -> None:
        if not (0 <= number <= MAX_NUMBER and 1 <= beam_width <= 8):
            raise ValueError(
                f"number must be in 0..{MAX_NUMBER} and beam_width in 1..8, "
                f"got number={number}, beam_width={beam_width}"
            )
        self.translator = translator
        self.top = top
        numbers = (number, *[n for n in BOOK_DECODING_NUMBERS if n != number])
        controls = [
            Control("number", "number", number, kind="menu", book=numbers,
                    live=lambda: widgets.BoundedIntText(value=number, min=0, max=MAX_NUMBER,
                                                        description="number")),
            slider("beam_width", "beam width", beam_width,
                   sorted({*BOOK_BEAM_WIDTHS, beam_width}),
                   lambda: widgets.IntSlider(value=beam_width, min=1, max=8,
                                             description="beam width",
                                             continuous_update=False)),
        ]  # fmt: skip
        parts = [
            text_part("greedy", ("number",), self.describe),
            text_part("beams", ("number", "beam_width"), self.beam_table),
        ]
        super().__init__(controls, parts, book=book, offer=offer,
                         width=_WIDTH, label_width=_LABEL_WIDTH)  # fmt: skip

    def _token(self, index: int) -> str:
        return html.escape(self.translator.target_vocab.id_to_token(index))

    def describe(self, number: int) -> str:
        """The ``greedy`` part: the number's English name and :meth:`greedy_steps`."""
        name = html.escape(english_number_name(number))
        return f"<p>{number}: {name}</p>" + self.greedy_steps(number)

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
            f"greedy takes the first)<table style='{TABLE_STYLE}'>{''.join(rows)}</table>"
        )

    def beam_table(self, number: int, beam_width: int) -> str:
        """An HTML table of beam search's hypotheses, best first, with their probabilities."""
        vocab = self.translator.target_vocab
        src_ids = self.translator.source_ids([number])
        start = torch.full((1, 1), vocab.bos_id, device=src_ids.device)
        result = beam_search(self.translator.scorer(src_ids), start, vocab.eos_id,
                             MAX_OUTPUT_TOKENS, beam_width)  # fmt: skip
        rows = []
        for ids, score in zip(result.sequences[0].tolist(), result.scores[0].tolist(),
                              strict=True):  # fmt: skip
            ended = vocab.eos_id in ids
            name = tokens_to_name(vocab.decode(ids[: ids.index(vocab.eos_id)] if ended else ids))
            mark = "✓" if name == spanish_number_name(number) else ""
            rows.append(f"<tr><td>{html.escape(name)}{'' if ended else ' ...'}</td>"
                        f"<td>{score:.3f}</td><td>{math.exp(score):.4f}</td>"
                        f"<td>{mark}</td></tr>")  # fmt: skip
        return (
            f"<b>Beam search, width {beam_width}</b>"
            f"<table style='{TABLE_STYLE}'><tr><th>hypothesis</th><th>log-probability</th>"
            "<th>probability</th>"
            f"<th></th></tr>{''.join(rows)}</table>"
        )


BOOK_TEMPERATURES = (0.1, 0.5, 1.0, 1.5, 3.0)
"""The temperatures the book's slider offers (with the first temperature)."""
BOOK_SEEDS = (0, 1, 2, 3)
"""The seeds the book's slider offers (with 0, the first)."""


class SamplingExplorer(Explorer):
    """Sentences sampled from a GPT-like model, and the first word's distribution.

    Parts: ``readout``, ``count`` sentences sampled at the chosen temperature with the chosen
    seed, each marked grammatical (✓) or not (✗, or unfinished with "..."); ``figure``, the
    ten likeliest first words and their probabilities at that temperature (it does not depend
    on the seed).

    In the book the sliders offer :data:`BOOK_TEMPERATURES` and :data:`BOOK_SEEDS`.

    Args:
        model: a trained :class:`~course_lib.families.DecoderOnlyModel`.
        vocab: its vocabulary (with ``<bos>`` and ``<eos>``).
        temperature: the initial temperature (0.1 to 3.0).
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
        *,
        book: bool | None = None,
        offer: Mapping[str, Sequence] | None = None,
    ) -> None:
        self.model, self.vocab = model, vocab
        self.count, self.max_new_tokens = count, max_new_tokens
        temperatures = sorted({*BOOK_TEMPERATURES, temperature})
        controls = [
            slider("temperature", "temperature", temperature, temperatures,
                   lambda: widgets.FloatSlider(value=temperature, min=0.1, max=3.0, step=0.1,
                                               description="temperature",
                                               continuous_update=False),
                   show=lambda t: f"{t:.1f}"),
            slider("seed", "seed", 0, BOOK_SEEDS,
                   lambda: widgets.IntSlider(value=0, min=0, max=99, description="seed",
                                             continuous_update=False)),
        ]  # fmt: skip
        parts = [
            text_part("readout", ("temperature", "seed"), self.describe),
            figure_part("figure", ("temperature",), self.draw),
        ]
        super().__init__(controls, parts, book=book, offer=offer,
                         width=_WIDTH, label_width=_LABEL_WIDTH)  # fmt: skip

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

    def describe(self, temperature: float, seed: int) -> str:
        """The readout: the sampled sentences, each marked grammatical or not."""
        lines = []
        for words, ended in self.sentences(temperature, seed):
            good = ended and is_grammatical(words)
            mark = "✓" if good else "✗"
            lines.append(f"{mark} {html.escape(' '.join(words))}{'' if ended else ' ...'}")
        return (
            f"<b>{self.count} sentences at temperature {temperature:.1f}</b> "
            f"(seed {seed}; ✓ grammatical, ✗ not)<br>" + "<br>".join(lines)
        )

    def draw(self, temperature: float) -> Figure:
        """The ten likeliest first words at ``temperature`` and their probabilities."""
        with torch.no_grad():
            bos = torch.full((1, 1), self.vocab.bos_id, device=device_of(self.model))
            scores = self.model.next_token_scores(bos)[0].float()
        probabilities = torch.softmax(scores / temperature, -1)
        top = probabilities.topk(min(10, probabilities.numel()))
        fig, ax = plt.subplots(figsize=(7.2, 2.8))
        labels = [self.vocab.id_to_token(int(i)) for i in top.indices]
        ax.bar(range(len(labels)), to_numpy(top.values))
        ax.set_xticks(range(len(labels)), labels, rotation=30)
        ax.set_ylim(0, 1)
        ax.set_ylabel("probability")
        ax.set_title(f"the first word at temperature {temperature:.1f} (the likeliest)")
        fig.tight_layout()
        return fig


# --- the training recipe (chapter "The paper's training recipe") ---------------------------

_STEPS = 20_000  # the steps drawn
D_MODEL = "$d_{\\text{model}}$"
BOOK_D_MODELS = (128, 512, 1024)
"""The model widths the book's menu offers (with the first one; the paper's base is 512)."""
BOOK_WARMUPS = (1000, 4000, 8000)
"""The warm-ups the book's slider offers (with the first one; the paper's is 4000)."""
BOOK_EPSILONS = (0.0, 0.1, 0.5)
"""The smoothing rates the book's slider offers (with the first; 0 is the one-hot target)."""
BOOK_CLASSES = (2, 10, 64)
"""The numbers of classes the book's slider offers (with the first; 64 is above the 53
Spanish tokens of the chapter)."""


def schedule_figure(d_model: int, warmup: int) -> Figure:
    """The learning rate over the first 20,000 steps, the paper's base model (512, 4000)
    dashed beside it and the end of the warm-up marked."""
    steps = list(range(1, _STEPS + 1, 20))
    fig, ax = plt.subplots(figsize=(7.2, 2.8))
    ax.plot(steps, [transformer_schedule(s, 512, 4000) for s in steps], color="0.55",
            linestyle="--", label="the paper's base (512, 4000)")  # fmt: skip
    ax.plot(steps, [transformer_schedule(s, d_model, warmup) for s in steps], color="C0",
            linewidth=2, label=f"{d_model}, {warmup}")  # fmt: skip
    ax.axvline(warmup, color="0.4", linewidth=0.8, linestyle=":")
    ax.set_xlabel("step")
    ax.set_ylabel("learning rate")
    ax.set_title(f"$d_\\mathrm{{model}}$ = {d_model}, warm-up {warmup}")
    ax.legend(loc="upper right")
    fig.tight_layout()
    return fig


def target_figure(epsilon: float, num_classes: int) -> Figure:
    """The smoothed target as one bar per class (the label is class 0), from 0 to 1, with the
    label's and the others' values written (a bar of many classes is thin)."""
    target = smoothed_targets(torch.tensor(0), num_classes, epsilon)
    fig, ax = plt.subplots(figsize=(7.2, 2.6))
    ax.bar(range(num_classes), to_numpy(target), color="C1")
    ax.set_ylim(0, 1.08)
    ax.set_xlabel("class (the label is 0)")
    ax.set_ylabel("target probability")
    ax.set_title(f"smoothed target, $\\epsilon_{{ls}}$ = {epsilon:.2f}, "
                 f"$|\\mathcal{{V}}|$ = {num_classes}")  # fmt: skip
    ax.text(0.99, 0.95, f"label {float(target[0]):.3f}, others {float(target[1]):.4f} each",
            transform=ax.transAxes, ha="right", va="top")  # fmt: skip
    fig.tight_layout()
    return fig


class RecipeExplorer(Explorer):
    """The learning-rate schedule and the label-smoothed target, for chosen settings.

    Parts: ``schedule``, the peak learning rate and where it is, and ``schedule_plot``, the
    schedule's first 20,000 steps next to the paper's base model (:func:`schedule_figure`),
    which depend on ``d_model`` and the warm-up only; ``target``, the smoothed target on the
    label and on each other class and the lowest possible loss, and ``target_plot``, the target
    as bars (:func:`target_figure`), which depend on the smoothing rate and the number of
    classes only.

    In the book the controls offer :data:`BOOK_D_MODELS`, :data:`BOOK_WARMUPS`,
    :data:`BOOK_EPSILONS` and :data:`BOOK_CLASSES` (each with the first value).

    Args:
        d_model, warmup_steps: the schedule's settings (the paper's base model: 512, 4000).
        epsilon, num_classes: the label smoothing ``eps_ls`` and the number of classes ``|V|``.

    Attributes:
        d_model, warmup, epsilon, num_classes: the controls.
        schedule, target: the parts.
    """

    def __init__(
        self,
        d_model: int = 512,
        warmup_steps: int = 4000,
        epsilon: float = 0.1,
        num_classes: int = 10,
        *,
        book: bool | None = None,
        offer: Mapping[str, Sequence] | None = None,
    ) -> None:
        if not (100 <= warmup_steps <= 10_000 and 0 <= epsilon <= 0.5 and 2 <= num_classes <= 64):
            raise ValueError(
                "warmup_steps must be in 100..10000, epsilon in 0..0.5 and num_classes in "
                f"2..64, got {warmup_steps}, {epsilon}, {num_classes}"
            )
        models = sorted({64, 128, 256, 512, 1024, d_model})
        label = "$\\epsilon_{ls}$ (smoothing)"
        classes = "classes $|\\mathcal{V}|$"
        controls = [
            menu("d_model", D_MODEL, d_model, [(str(m), m) for m in models],
                 book=sorted({*BOOK_D_MODELS, d_model})),
            slider("warmup", "warm-up steps", warmup_steps, sorted({*BOOK_WARMUPS, warmup_steps}),
                   lambda: widgets.IntSlider(value=warmup_steps, min=100, max=10_000, step=100,
                                             description="warm-up steps",
                                             continuous_update=False)),
            slider("epsilon", label, epsilon, sorted({*BOOK_EPSILONS, epsilon}),
                   lambda: widgets.FloatSlider(value=epsilon, min=0.0, max=0.5, step=0.05,
                                               description=label, continuous_update=False),
                   show=lambda e: f"{e:.2f}"),
            slider("num_classes", classes, num_classes, sorted({*BOOK_CLASSES, num_classes}),
                   lambda: widgets.IntSlider(value=num_classes, min=2, max=64,
                                             description=classes, continuous_update=False)),
        ]  # fmt: skip
        parts = [
            text_part("schedule", ("d_model", "warmup"), self.describe_schedule),
            figure_part("schedule_plot", ("d_model", "warmup"), schedule_figure),
            text_part("target", ("epsilon", "num_classes"), self.describe_target),
            figure_part("target_plot", ("epsilon", "num_classes"), target_figure),
        ]
        rows = [["d_model", "warmup"], ["epsilon", "num_classes"]]
        super().__init__(controls, parts, rows, book=book, offer=offer,
                         label_width=_LABEL_WIDTH)  # fmt: skip

    @staticmethod
    def describe_schedule(d_model: int, warmup: int) -> str:
        """The ``schedule`` part: the peak rate and where it is."""
        peak = transformer_schedule(warmup, d_model, warmup)
        return (
            f"peak learning rate <b>{peak:.2e}</b> at step {warmup} "
            f"(= ({d_model} &times; {warmup})<sup>-0.5</sup>); dashed: the paper's base model "
            "(512, 4000)"
        )

    @staticmethod
    def describe_target(epsilon: float, num_classes: int) -> str:
        """The ``target`` part: the target's two values and the lowest loss."""
        target = smoothed_targets(torch.tensor(0), num_classes, epsilon)
        lowest = smoothed_loss_minimum(num_classes, epsilon)
        return (
            f"&epsilon;<sub>ls</sub> = {epsilon:.2f}, |V| = {num_classes}: "
            f"target <b>{target[0].item():.3f}</b> on the label, "
            f"<b>{target[1].item():.4f}</b> on each of the other {num_classes - 1} classes; "
            f"lowest possible loss <b>{lowest:.3f}</b>"
        )
