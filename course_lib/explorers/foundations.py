"""Interactive explorers for the chapters, built from core ipywidgets only.

They work with ipywidgets 7.7 (what Google Colab ships) and 8, live in a kernel. Built for the
book (:mod:`course_lib.explorers.base`), each stores the states of its prepared values, so that
its controls also move in the HTML book, with no kernel.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from torch import Tensor

from course_lib._checks import shape_of
from course_lib._html import block, color
from course_lib.discretize import Codebook, frame_signal, overlap_add, reconstruction_snr
from course_lib.explorers.base import (
    Control,
    Explorer,
    figure_part,
    menu,
    slider,
    text_part,
)
from course_lib.plotting import (
    plot_encoding_heatmap,
    plot_encoding_waves,
    plot_word_map,
)
from course_lib.positional import angular_frequencies, sinusoidal_positional_encoding
from course_lib.vocab import Vocabulary
from course_lib.word2vec import (
    Word2VecResult,
    nearest_neighbours,
    pca_2d,
)

__all__ = [
    "DiscretizationExplorer",
    "PositionalEncodingExplorer",
    "WordMapExplorer",
    "WordNeighboursExplorer",
    "book_epochs",
    "positional_encoding_explorer",
]


class PositionalEncodingExplorer(Explorer):
    """Sliders for position, dimension, ``d_model`` and base that redraw the encoding.

    Parts: ``readout``, the chosen entry with the formula that produced it and its value as a
    bar from -1 to 1; ``figure``, the encoding table as a heatmap with the chosen dimension's
    column marked and, below it, that dimension as a wave over the positions. The figure does
    not depend on the position, so the book stores one figure per dimension, ``d_model`` and
    base.

    In the book the sliders offer :data:`BOOK_POSITIONS`, :data:`BOOK_D_MODELS`,
    :data:`BOOK_BASES` and, for each ``d_model``, :func:`book_dimensions` (each with the
    explorer's first value).

    Attributes:
        position, dimension, d_model, base: the four sliders.
        readout, figure: the parts (live: an ``HTMLMath`` and an ``Output`` widget).
    """

    def __init__(
        self,
        max_len: int = 64,
        d_model: int = 32,
        base: float = 10000.0,
        position: int = 10,
        dimension: int = 6,
        *,
        book: bool | None = None,
        offer: Mapping[str, Sequence] | None = None,
    ) -> None:
        sinusoidal_positional_encoding(max_len, d_model, base)  # validates the arguments
        if not (0 <= position < max_len and 0 <= dimension < d_model):
            raise ValueError(
                f"position must be in 0..{max_len - 1} and dimension in 0..{d_model - 1}, "
                f"got position={position}, dimension={dimension}"
            )
        self.max_len = max_len
        positions = sorted({p for p in BOOK_POSITIONS if p < max_len} | {position})

        def dimensions(d_model: int) -> list[tuple[str, int]]:
            chosen = {dimension} if d_model > dimension else set()
            return [(str(j), j) for j in sorted({*book_dimensions(d_model), *chosen})]

        controls = [
            slider("position", "position", position, positions,
                   lambda: widgets.IntSlider(value=position, min=0, max=max_len - 1,
                                             description="position", continuous_update=False)),
            slider("d_model", D_MODEL, d_model, sorted({*BOOK_D_MODELS, d_model}),
                   lambda: widgets.IntSlider(value=d_model, min=2, max=128, step=2,
                                             description=D_MODEL, continuous_update=False)),
            Control("dimension", "dimension $j$", dimension, kind="slider", depends=("d_model",),
                    options=dimensions,
                    live=lambda: widgets.IntSlider(value=dimension, min=0, max=d_model - 1,
                                                   description="dimension $j$",
                                                   continuous_update=False)),
            slider("base", "base", base, sorted({*BOOK_BASES, base}), show=lambda b: f"{b:.6g}",
                   live=lambda: widgets.FloatLogSlider(value=base, base=10, min=1, max=5,
                                                       step=0.25, description="base",
                                                       continuous_update=False,
                                                       readout_format=".6g")),
        ]  # fmt: skip
        parts = [
            text_part("readout", ("position", "dimension", "d_model", "base"), self.describe),
            figure_part("figure", ("dimension", "d_model", "base"), self.draw),
        ]
        rows = [["position", "dimension"], ["d_model", "base"]]
        super().__init__(controls, parts, rows, book=book, offer=offer)
        if not self.book:
            self.d_model.observe(self._on_d_model, names="value")

    def _on_d_model(self, change: dict) -> None:
        # The dimension slider cannot point past the last column (ipywidgets clamps its value).
        self.dimension.max = change["new"] - 1

    def describe(self, position: int, dimension: int, d_model: int, base: float) -> str:
        """The chosen entry, its formula, its wavelength and its value as a bar, as HTML."""
        dimension = min(dimension, d_model - 1)
        pair = dimension // 2
        omega = float(angular_frequencies(d_model, base)[pair])
        angle = position * omega
        func, value = ("sin", math.sin(angle)) if dimension % 2 == 0 else ("cos", math.cos(angle))
        return (
            f"<b>PE[{position}, {dimension}]</b> = {func}({position} &middot; "
            f"{base:.6g}<sup>&minus;{2 * pair}/{d_model}</sup>) = {func}({angle:.4f}) = "
            f"<b>{value:.4f}</b> &nbsp;&nbsp; (pair i = {pair}, wavelength "
            f"2&pi;/&omega;<sub>{pair}</sub> = {2 * math.pi / omega:.4g} positions)"
            + value_bar(value)
        )

    def draw(self, dimension: int, d_model: int, base: float) -> Figure:
        """The table with the dimension's column marked, and that dimension as a wave."""
        dimension = min(dimension, d_model - 1)
        pe = sinusoidal_positional_encoding(self.max_len, d_model, base)
        fig, (ax_map, ax_wave) = plt.subplots(2, 1, figsize=(7.2, 6.2))
        title = f"$d_\\mathrm{{model}}$ = {d_model}, base = {base:.6g}"
        plot_encoding_heatmap(pe, ax_map, title=title)
        ax_map.axvline(dimension, color="black", linewidth=1, linestyle="--")
        kind = "sin" if dimension % 2 == 0 else "cos"
        title = f"dimension j = {dimension} ({kind}, pair i = {dimension // 2})"
        plot_encoding_waves(pe, [dimension], ax_wave, title=title, legend=False)
        fig.tight_layout()
        return fig


D_MODEL = "$d_{\\text{model}}$"
BOOK_POSITIONS = (0, 2, 10, 40)
"""The positions the book's slider offers."""
BOOK_D_MODELS = (4, 16, 32, 64)
"""The model sizes the book's slider offers."""
BOOK_BASES = (100.0, 1000.0, 10000.0)
"""The bases the book's slider offers."""


def book_dimensions(d_model: int) -> list[int]:
    """The dimensions the book offers for ``d_model``: all of them up to ``d_model = 4``,
    else the first pair, dimension 6 and the last one."""
    if d_model <= 4:
        return list(range(d_model))
    return sorted({0, 1, min(6, d_model - 2), d_model - 1})


def value_bar(value: float, width: int = 160) -> str:
    """A value in [-1, 1] as a bar from the middle of a ``width``-pixel track (HTML)."""
    half = width / 2
    length = abs(value) * half
    left = half if value >= 0 else half - length
    return (
        f"<div style='position: relative; width: {width}px; max-width: 100%; height: 10px; "
        f"margin-top: 4px; background: rgba(127, 127, 127, 0.18)'>"
        f"<div style='position: absolute; left: {left:.1f}px; width: {length:.1f}px; "
        f"height: 10px; background: {color('muted')}'></div>"
        f"<div style='position: absolute; left: {half:.0f}px; width: 1px; height: 10px; "
        "background: currentColor'></div></div>"
    )


def positional_encoding_explorer(**kwargs) -> PositionalEncodingExplorer:
    """Build a :class:`PositionalEncodingExplorer`; display it as a cell's last expression."""
    return PositionalEncodingExplorer(**kwargs)


# --- discretization (chapter "Transformers at a glance") -----------------------------------

BOOK_VOCAB_SIZES = (2, 4, 8, 16, 32, 64, 128)
"""The vocabulary sizes the book's slider offers (those among the explorer's choices)."""
BOOK_FRAME_LENGTHS = (10, 20, 40, 80)
"""The frame lengths the book's slider offers (those among the explorer's choices)."""


def _among(offered: Sequence, choices: Sequence, first) -> list:
    """The ``offered`` values that are ``choices``, with ``first``; all the choices when
    fewer than three of them are offered."""
    chosen = sorted({value for value in offered if value in choices} | {first})
    return chosen if len(chosen) >= 3 else list(choices)


class DiscretizationExplorer(Explorer):
    """Turn a signal into tokens with a k-means codebook and see, by eye, what is left.

    Two sliders choose the vocabulary size ``k`` and the frame length (frames overlap by half:
    the hop is half the frame length). Parts: ``readout``, the number of tokens, the bits per
    token and in all (against the bits of the samples themselves) and the signal-to-noise ratio
    of the reconstruction; ``figure``, the signal with its reconstruction from the tokens
    (decoded and overlap-added) and below it the token ids. A codebook is learned once per
    setting and kept, so both parts, and going back to a setting, reuse it.

    In the book the sliders offer :data:`BOOK_VOCAB_SIZES` and :data:`BOOK_FRAME_LENGTHS`
    (those among ``vocab_sizes`` and ``frame_lengths``, with the first values); the book stores
    a readout and a figure for each pair.

    Args:
        signal: 1-D float tensor ``(num_samples,)``.
        sample_rate: samples per second (for the time axis).
        vocab_sizes: the choices of ``k``.
        frame_lengths: the choices of frame length, in samples (even numbers).
        vocab_size, frame_length: the initial choices.
        seconds_shown: how much of the signal the figure shows, from the start.
        book, offer: see :class:`~course_lib.explorers.base.Explorer`.

    Attributes:
        vocab_size, frame_length: the two sliders (``SelectionSlider`` widgets).
        readout, figure: the parts (live: an ``HTMLMath`` and an ``Output`` widget).
    """

    def __init__(
        self,
        signal: Tensor,
        sample_rate: int = 1000,
        vocab_sizes: Sequence[int] = (2, 4, 8, 16, 32, 64, 128),
        frame_lengths: Sequence[int] = (10, 20, 40, 80),
        vocab_size: int = 16,
        frame_length: int = 40,
        seconds_shown: float = 1.0,
        *,
        book: bool | None = None,
        offer: Mapping[str, Sequence] | None = None,
    ) -> None:
        if not isinstance(signal, Tensor) or signal.dim() != 1 or not signal.is_floating_point():
            raise ValueError("signal must be a 1-D floating-point tensor (num_samples,)")
        if vocab_size not in vocab_sizes or frame_length not in frame_lengths:
            raise ValueError(
                f"vocab_size must be one of {tuple(vocab_sizes)} and frame_length one of "
                f"{tuple(frame_lengths)}, got {vocab_size} and {frame_length}"
            )
        odd = [length for length in frame_lengths if length % 2 or length < 2]
        if odd:
            raise ValueError(f"frame lengths must be even (the hop is half), got {odd}")
        self.signal = signal
        self.sample_rate = sample_rate
        self.seconds_shown = seconds_shown
        self._cache: dict[tuple[int, int], tuple[Tensor, Tensor, float]] = {}
        sizes, lengths = list(vocab_sizes), list(frame_lengths)
        controls = [
            slider("vocab_size", "vocabulary $k$", vocab_size,
                   _among(BOOK_VOCAB_SIZES, sizes, vocab_size),
                   lambda: widgets.SelectionSlider(options=sizes, value=vocab_size,
                                                   description="vocabulary $k$",
                                                   continuous_update=False)),
            slider("frame_length", "frame length", frame_length,
                   _among(BOOK_FRAME_LENGTHS, lengths, frame_length),
                   lambda: widgets.SelectionSlider(options=lengths, value=frame_length,
                                                   description="frame length",
                                                   continuous_update=False)),
        ]  # fmt: skip
        parts = [
            text_part("readout", ("vocab_size", "frame_length"), self.describe),
            figure_part("figure", ("vocab_size", "frame_length"), self.draw),
        ]
        super().__init__(controls, parts, book=book, offer=offer)

    def tokens(self, vocab_size: int, frame_length: int) -> tuple[Tensor, Tensor, float]:
        """Token ids ``(num_frames,)``, the reconstruction ``(num_samples,)`` and its SNR."""
        key = (vocab_size, frame_length)
        if key not in self._cache:
            hop = frame_length // 2
            frames = frame_signal(self.signal, frame_length, hop)
            codebook = Codebook.fit(frames, min(vocab_size, frames.size(0)))
            ids = codebook.encode(frames)
            rebuilt = overlap_add(codebook.decode(ids), hop, self.signal.numel())
            self._cache[key] = (ids, rebuilt, reconstruction_snr(self.signal, rebuilt))
        return self._cache[key]

    def describe(self, vocab_size: int, frame_length: int) -> str:
        """The token count, the bits per token and in all, and the SNR, as HTML."""
        ids, _, snr = self.tokens(vocab_size, frame_length)
        shown = ", ".join(str(i) for i in ids[:12].tolist())
        bits = math.log2(vocab_size)
        samples = self.signal.numel()
        return (
            f"{samples} samples &rarr; <b>{ids.numel()} tokens</b> (frames of "
            f"{frame_length} samples, hop {frame_length // 2}) from a vocabulary of "
            f"<b>{vocab_size}</b> ({bits:.0f} bit{'' if bits == 1 else 's'} per token); "
            f"reconstruction SNR <b>{snr:.1f} dB</b><br>"
            f"in all <b>{ids.numel() * bits:,.0f} bits</b> of token ids (the samples as "
            f"32-bit floats: {samples * 32:,} bits); first token ids: {shown}, ..."
        )

    def draw(self, vocab_size: int, frame_length: int) -> Figure:
        """The signal and its reconstruction, and the token ids below, over time."""
        ids, rebuilt, snr = self.tokens(vocab_size, frame_length)
        shown = min(self.signal.numel(), int(self.seconds_shown * self.sample_rate))
        time = torch.arange(shown) / self.sample_rate
        fig, (ax_wave, ax_ids) = plt.subplots(
            2, 1, figsize=(7.2, 4.2), sharex=True, gridspec_kw={"height_ratios": [2, 1]}
        )
        ax_wave.plot(time, self.signal[:shown], color="#999999", linewidth=1.5, label="signal")
        ax_wave.plot(time, rebuilt[:shown], color="C3", linewidth=1, label="from the tokens")
        ax_wave.set_ylabel("amplitude")
        ax_wave.set_title(
            f"k = {vocab_size}, frames of {frame_length} samples: SNR {snr:.1f} dB",
            fontsize="medium",
        )
        ax_wave.legend(loc="upper right", fontsize="small")
        hop = frame_length // 2
        starts = torch.arange(ids.numel()) * hop / self.sample_rate
        inside = starts < shown / self.sample_rate
        ax_ids.step(starts[inside], ids[inside], where="post", color="C0")
        ax_ids.set_ylim(-0.5, vocab_size - 0.5)
        ax_ids.yaxis.set_major_locator(MaxNLocator(nbins=4, integer=True))
        ax_ids.set_ylabel("token id")
        ax_ids.set_xlabel("time (s)")
        # fixed margins: the same layout in every state, without tight_layout's cost
        fig.subplots_adjust(left=0.1, right=0.98, top=0.92, bottom=0.13, hspace=0.12)
        return fig


# --- word embeddings (chapter "Input embeddings") -------------------------------------------


def _check_runs(tables: Mapping[str, Tensor], vocab: Vocabulary) -> None:
    if not tables:
        raise ValueError("give at least one embedding table, e.g. {'skip-gram': table}")
    for name, table in tables.items():
        if not isinstance(table, Tensor) or table.dim() != 2 or table.size(0) != len(vocab):
            shape = shape_of(table)
            raise ValueError(
                f"embedding table {name!r} must have shape (len(vocab), dim) = "
                f"({len(vocab)}, dim), got {shape}"
            )


BOOK_NEIGHBOURS = (3, 6, 10)
"""The numbers of neighbours the book's slider offers (with the explorer's first one)."""


class WordNeighboursExplorer(Explorer):
    """Pick a word and see its nearest neighbours by cosine similarity, with their classes.

    Part ``table``: the ``k`` nearest neighbours of the word in the chosen table, each with its
    cosine similarity as a number and a bar, and its class (the bar and the class in green when
    it is the word's own class, in red otherwise).

    In the book the menus offer every table and every word of ``word_classes`` (a text each is
    cheap) and the slider :data:`BOOK_NEIGHBOURS` (up to the number of other words, with the
    first ``k``).

    Args:
        embeddings: name -> embedding table ``(len(vocab), dim)``, e.g. one per method.
        vocab: the vocabulary the rows belong to.
        word_classes: class name -> its words (:data:`course_lib.data.WORD_CLASSES`).
        word: the word shown first (default: the first word of the first class).
        k: how many neighbours to list first.
        book, offer: see :class:`~course_lib.explorers.base.Explorer`.

    Attributes:
        model, word: the menus (``Dropdown`` widgets); k: the slider (live an ``IntSlider``).
        table: the part (live: an ``HTMLMath`` widget).
    """

    def __init__(
        self,
        embeddings: Mapping[str, Tensor],
        vocab: Vocabulary,
        word_classes: Mapping[str, Sequence[str]],
        word: str | None = None,
        k: int = 5,
        *,
        book: bool | None = None,
        offer: Mapping[str, Sequence] | None = None,
    ) -> None:
        _check_runs(embeddings, vocab)
        self.embeddings = dict(embeddings)
        self.vocab = vocab
        self.class_of = {w: name for name, words in word_classes.items() for w in words}
        choices = [(f"{w} ({self.class_of[w]})", w) for w in self.class_of if w in vocab]
        if not choices:
            raise ValueError("none of the words of word_classes is in the vocabulary")
        word = choices[0][1] if word is None else word
        if word not in vocab or word in vocab.tokens[: len(vocab.special_ids)]:
            raise ValueError(f"word must be a word of the vocabulary, got {word!r}")
        if word not in self.class_of:
            choices.append((word, word))
        others = len(vocab) - len(vocab.special_ids) - 1
        if not 1 <= k <= others:
            raise ValueError(f"k must be between 1 and {others}, got {k}")
        most = min(others, 20)
        counts = sorted({n for n in BOOK_NEIGHBOURS if n <= most} | {k})
        names = [(name, name) for name in self.embeddings]
        controls = [
            menu("model", "embeddings", names[0][1], names),
            menu("word", "word", word, choices),
            slider("k", "neighbours $k$", k, counts,
                   lambda: widgets.IntSlider(value=k, min=1, max=max(most, k),
                                             description="neighbours $k$",
                                             continuous_update=False)),
        ]  # fmt: skip
        parts = [text_part("table", ("model", "word", "k"), self.describe)]
        rows = [["model", "word"], ["k"]]
        super().__init__(controls, parts, rows, book=book, offer=offer)

    def describe(self, model: str, word: str, k: int) -> str:
        """The ``k`` nearest neighbours of ``word`` in table ``model``, as an HTML table."""
        neighbours = nearest_neighbours(self.embeddings[model], self.vocab, word, k)
        own = self.class_of.get(word)
        rows = []
        for rank, (other, similarity) in enumerate(neighbours, start=1):
            kind = self.class_of.get(other, "-")
            colour = color("pass") if own is not None and kind == own else color("fail")
            bar = max(0.0, similarity) * 120
            # the bar's border takes the cell's colour: the colour is written once a row
            rows.append(
                f"<tr><td>{rank}</td><td><b>{html.escape(other)}</b></td>"
                f"<td align=right>{similarity:+.3f}</td><td style='color:{colour}'><i "
                f"style='display:inline-block;border-left:{bar:.0f}px solid;height:9px'></i> "
                f"{html.escape(kind)}</td></tr>"
            )
        same = sum(self.class_of.get(o) == own for o, _ in neighbours) if own else 0
        header = (
            f"<b>{html.escape(word)}</b> ({html.escape(own or 'no class')}), {html.escape(model)}:"
            f" {same} of {len(neighbours)} nearest neighbours are of the same class"
        )
        return block(
            f"<div>{header}</div><table><tr><th>#</th><th>word</th><th>cosine</th>"
            f"<th>class</th></tr>{''.join(rows)}</table>"
        )


def book_epochs(epochs: Sequence[int]) -> list[int]:
    """The snapshot epochs the book's slider offers: 0, 1, 2, 4, 8, ... (those that are
    snapshots) and the last, so that the early epochs, where most happens, are there (at least
    three epochs when there are three snapshots)."""
    doubling = {0, *(2**n for n in range(max(epochs[-1], 1).bit_length() + 1))}
    chosen = {e for e in epochs if e in doubling} | {epochs[-1]}
    if len(chosen) < min(3, len(epochs)):  # snapshots far apart: the first, middle and last
        chosen |= {epochs[0], epochs[len(epochs) // 2]}
    return sorted(chosen)


class WordMapExplorer(Explorer):
    """A slider over the training epochs showing the words in 2-D as they move into classes.

    Parts: ``readout``, the run and epoch, that epoch's loss, the share of words whose nearest
    neighbour is of their own class and the words whose nearest neighbour is not;
    ``figure``, the words at their 2-D coordinates (:func:`course_lib.word2vec.pca_2d` of the
    snapshot), one colour per class. The coordinates and the neighbours of every snapshot are
    computed once, when the explorer is built, so moving a control only redraws.

    In the book the menu offers every run and the slider :func:`book_epochs` of the snapshot
    epochs (with the first epoch shown); the book stores a readout and a figure per run and
    epoch.

    Args:
        runs: name -> the result of :func:`course_lib.word2vec.train_word2vec` trained with
            ``snapshot_every``; all runs need the same snapshot epochs.
        vocab: the vocabulary the rows belong to.
        word_classes: class name -> its words.
        epoch: the snapshot shown first (default: the last).
        book, offer: see :class:`~course_lib.explorers.base.Explorer`.

    Attributes:
        run: the menu (a ``Dropdown``); epoch: the slider (a ``SelectionSlider`` over the
            snapshot epochs).
        readout, figure: the parts (live: an ``HTMLMath`` and an ``Output`` widget).
    """

    def __init__(
        self,
        runs: Mapping[str, Word2VecResult],
        vocab: Vocabulary,
        word_classes: Mapping[str, Sequence[str]],
        epoch: int | None = None,
        *,
        book: bool | None = None,
        offer: Mapping[str, Sequence] | None = None,
    ) -> None:
        if not runs:
            raise ValueError("give at least one training run, e.g. {'skip-gram': result}")
        epochs = None
        for name, result in runs.items():
            if not isinstance(result, Word2VecResult) or not result.snapshots:
                raise ValueError(
                    f"run {name!r} has no snapshots: train it with train_word2vec(..., "
                    "snapshot_every=1)"
                )
            these = [e for e, _ in result.snapshots]
            if epochs is not None and these != epochs:
                raise ValueError(f"all runs need the same snapshot epochs; {name!r} has {these}")
            epochs = these
            _check_runs({f"{name}, epoch {e}": table for e, table in result.snapshots}, vocab)
        assert epochs is not None
        epoch = epochs[-1] if epoch is None else epoch
        if epoch not in epochs:
            raise ValueError(f"epoch must be one of the snapshot epochs {epochs}, got {epoch}")
        self.vocab = vocab
        self.word_classes = dict(word_classes)
        self.words = vocab.tokens[len(vocab.special_ids) :]
        self.losses = {name: result.losses for name, result in runs.items()}
        self.coords: dict[tuple[str, int], Tensor] = {}
        self.agreement: dict[tuple[str, int], float] = {}
        self.strays: dict[tuple[str, int], list[tuple[str, str]]] = {}
        class_of = {w: name for name, words in word_classes.items() for w in words}
        scored = [w for w in class_of if w in vocab]
        first = len(vocab.special_ids)
        for name, result in runs.items():
            for e, table in result.snapshots:
                self.coords[name, e] = pca_2d(table[first:])
                nearest = {w: nearest_neighbours(table, vocab, w, 1)[0][0] for w in scored}
                self.strays[name, e] = [
                    (w, n) for w, n in nearest.items() if class_of.get(n) != class_of[w]
                ]
                self.agreement[name, e] = (len(scored) - len(self.strays[name, e])) / len(scored)
        names = [(name, name) for name in runs]
        offered = sorted({*book_epochs(epochs), epoch})
        controls = [
            menu("run", "embeddings", names[0][1], names),
            slider("epoch", "epoch", epoch, offered,
                   lambda: widgets.SelectionSlider(options=epochs, value=epoch,
                                                   description="epoch",
                                                   continuous_update=False)),
        ]  # fmt: skip
        parts = [
            text_part("readout", ("run", "epoch"), self.describe),
            figure_part("figure", ("run", "epoch"), self.draw),
        ]
        super().__init__(controls, parts, book=book, offer=offer)

    def describe(self, run: str, epoch: int) -> str:
        """The epoch, its loss, the class agreement and the words that stray, as HTML."""
        loss = "before training" if epoch == 0 else f"mean loss {self.losses[run][epoch - 1]:.3f}"
        share = self.agreement[run, epoch]
        strays = self.strays[run, epoch]
        if not strays:
            listed = "every classified word has a neighbour of its own class"
        else:
            shown = ", ".join(f"{html.escape(w)} &rarr; {html.escape(n)}" for w, n in strays[:10])
            more = f" and {len(strays) - 10} more" if len(strays) > 10 else ""
            listed = f"nearest neighbour of another class: {shown}{more}"
        return (
            f"<b>{html.escape(run)}, epoch {epoch}</b> ({loss}): for <b>{share:.0%}</b> of the "
            f"words the nearest neighbour is a word of the same class<br>{listed}"
        )

    def draw(self, run: str, epoch: int) -> Figure:
        """The words of the snapshot in 2-D, one colour per class."""
        fig, ax = plt.subplots(figsize=(5.8, 4.8))
        plot_word_map(
            self.coords[run, epoch], self.words, self.word_classes, ax,
            title=f"{run}, epoch {epoch}",
        )  # fmt: skip
        fig.subplots_adjust(left=0.12, right=0.74, top=0.92, bottom=0.12)
        return fig
