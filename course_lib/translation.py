"""The course's translator: English number names to Spanish ones, with a small Transformer.

:class:`NumberTranslator` holds a trained :class:`~course_lib.transformer.Transformer` with
its two vocabularies, and translates numbers (or their English names) by greedy decoding or
beam search (:mod:`course_lib.decoding`). :func:`train_number_translator` trains one on the
training numbers of :func:`course_lib.data.number_split` in seconds on a CPU;
:func:`load_number_translator` loads the one that ships with ``course_lib`` (trained by the
same function with the default settings), so that a chapter can use it at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import Tensor

from course_lib._checks import integer
from course_lib._devices import device_of, threads
from course_lib.data import (
    MAX_NUMBER,
    english_number_name,
    number_alignment,
    number_pairs,
    number_split,
    number_tokens,
    number_vocabularies,
    spanish_number_name,
    tokens_to_name,
)
from course_lib.decoding import TranslationScorer, beam_search, greedy_decode
from course_lib.training import TrainingHistory, train_seq2seq
from course_lib.transformer import Transformer
from course_lib.vocab import Vocabulary, pad_batch

__all__ = [
    "CHECKPOINT",
    "MODEL_SETTINGS",
    "TRAINING_SETTINGS",
    "CrossAttention",
    "NumberTranslator",
    "english_names",
    "load_number_translator",
    "train_number_translator",
]

MODEL_SETTINGS: dict[str, Any] = {
    "d_model": 64,
    "num_heads": 4,
    "num_encoder_layers": 2,
    "num_decoder_layers": 2,
    "d_ff": 128,
    "dropout": 0.0,
    "max_len": 16,
}
"""The translator's sizes: a small version of the paper's model (which has 512, 8, 6, 6, 2048)."""

TRAINING_SETTINGS: dict[str, Any] = {
    "epochs": 4,
    "batch_size": 64,
    "learning_rate": 3e-3,
    "warmup_fraction": 0.1,
}
"""How :func:`train_number_translator` trains by default."""

MAX_OUTPUT_TOKENS = 8  # the longest Spanish name has 6 words; <eos> makes 7
CHECKPOINT = "checkpoints/number_translator.pt"
"""The shipped translator, inside the ``course_lib`` package."""


class CrossAttention(NamedTuple):
    """The cross-attention weights of one translation, with the tokens they connect."""

    weights: Tensor  # (num_layers, num_heads, L_t, L_s)
    source: list[str]  # L_s English tokens
    target: list[str]  # L_t decoder inputs: <bos> and the Spanish tokens


_ACCEPTED = (
    f"a number from 0 to {MAX_NUMBER} (21 or '21') or its English name ('twenty-one'; "
    "capitals, a space for the hyphen and 'one hundred and five' are fine)"
)


def english_names(numbers_or_names: Iterable[object]) -> list[str]:
    """The English names, as :func:`english_number_name` writes them, of numbers or names.

    Numbers (0..9999) and digit strings (``"21"``) become their names; names are read
    without regard to capitals, extra spaces, a space for the hyphen or an "and" after
    "hundred" or "thousand" (``"Twenty one"``, ``"one hundred and five"``). Every item that
    is none of these is named in one ``ValueError`` (``TypeError`` for an item that is
    neither a number nor a string).
    """
    names, problems = [], []
    for position, item in enumerate(numbers_or_names):
        name, problem = _english_name(item, f"item {position}")
        names.append(name)
        if problem:
            problems.append(problem)
    if problems:
        raise ValueError(f"cannot translate {', '.join(problems[:5])}; expected {_ACCEPTED}")
    return names


def _english_name(item: object, where: str) -> tuple[str, str]:
    """``(name, "")`` for an item :func:`english_names` accepts, else ``("", problem)``."""
    if isinstance(item, str):
        text = item.strip()
        if not text:
            return "", f"an empty name ({where})"
        if not (text.isascii() and text.isdigit()):
            name = _names_by_form().get(_normalised(text))
            return (name, "") if name else ("", f"{item!r} ({where})")
        number = int(text)
    else:
        number = integer(where, item)
    if not 0 <= number <= MAX_NUMBER:
        return "", f"{item!r} ({where}, not between 0 and {MAX_NUMBER})"
    return english_number_name(number), ""


def _normalised(text: str) -> str:
    """A name in one form for all the ways of writing it: lower case, words joined by one space, a
    space for the hyphen, without an "and" between "hundred" or "thousand" and what follows."""
    words = text.lower().replace("-", " ").split()
    joining = {
        at
        for at in range(1, len(words) - 1)  # "and" between two words of the number
        if words[at] == "and" and words[at - 1] in ("hundred", "thousand")
    }
    return " ".join(word for at, word in enumerate(words) if at not in joining)


@cache
def _names_by_form() -> dict[str, str]:
    """Every English name in :func:`_normalised` form, with the name the model was trained on."""
    names = (english_number_name(n) for n in range(MAX_NUMBER + 1))
    return {_normalised(name): name for name in names}


@dataclass
class NumberTranslator:
    """A Transformer that translates English number names into Spanish, with its vocabularies.

    Attributes:
        model: the encoder-decoder :class:`~course_lib.transformer.Transformer`.
        source_vocab, target_vocab: the English and Spanish vocabularies.
    """

    model: Transformer
    source_vocab: Vocabulary
    target_vocab: Vocabulary

    @classmethod
    def untrained(
        cls, source_vocab: Vocabulary, target_vocab: Vocabulary, seed: int = 0, **settings: Any
    ) -> NumberTranslator:
        """A translator with freshly initialised weights (seeded); ``settings`` override
        :data:`MODEL_SETTINGS`."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = Transformer(
                len(source_vocab),
                len(target_vocab),
                pad_id=source_vocab.pad_id,
                **{**MODEL_SETTINGS, **settings},
            )
        return cls(model.eval(), source_vocab, target_vocab)

    # ----------------------------------------------------------------------- inputs

    def source_ids(self, numbers_or_names: Sequence[int | str]) -> Tensor:
        """``(batch, L_s)`` padded source ids of numbers (0..9999) or English names, made on the
        model's device.

        A name may be written as a student would type it: any capitals, spaces for the
        hyphen, extra spaces, "and" (``"One hundred and twenty one"``), or digits
        (``"121"``). Anything else is refused, naming it: the model would otherwise translate
        whatever its unknown tokens happen to resemble.
        """
        if isinstance(numbers_or_names, (str, int)):
            raise TypeError("pass a list of numbers or names, e.g. [21] or ['twenty-one']")
        names = english_names(numbers_or_names)
        if not names:
            raise ValueError("nothing to translate: the list is empty")
        rows = [self.source_vocab.encode(number_tokens(name)) for name in names]
        ids, _ = pad_batch(rows, self.source_vocab.pad_id)
        return ids.to(device_of(self.model))

    def _names(self, ids: Tensor) -> list[str]:
        """The Spanish names of generated ids ``(batch, t)``: up to ``<eos>``, specials out."""
        names = []
        for row in ids.tolist():
            if self.target_vocab.eos_id in row:
                row = row[: row.index(self.target_vocab.eos_id)]
            names.append(tokens_to_name(self.target_vocab.decode(row)))
        return names

    # ----------------------------------------------------------------------- translation

    def scorer(self, src_ids: Tensor, use_cache: bool = True) -> TranslationScorer:
        """The next-token scorer of this model for a batch of source ids."""
        return TranslationScorer(self.model, src_ids, use_cache=use_cache)

    def generate(self, src_ids: Tensor, beam_width: int = 1, use_cache: bool = True) -> Tensor:
        """``(batch, t)`` target ids, ``<bos>`` first: greedy (``beam_width=1``) or the best
        hypothesis of beam search."""
        self.model.eval()
        start = torch.full((src_ids.size(0), 1), self.target_vocab.bos_id, device=src_ids.device)
        scorer = self.scorer(src_ids, use_cache)
        eos = self.target_vocab.eos_id
        if beam_width == 1:
            return greedy_decode(scorer, start, eos, MAX_OUTPUT_TOKENS)
        result = beam_search(scorer, start, eos, MAX_OUTPUT_TOKENS, beam_width)
        return result.sequences[:, 0]

    def translate(
        self, numbers_or_names: Sequence[int | str], beam_width: int = 1, use_cache: bool = True
    ) -> list[str]:
        """The model's Spanish for each number (or English name), e.g. ``[21] -> ["veintiuno"]``."""
        return self._names(self.generate(self.source_ids(numbers_or_names), beam_width, use_cache))

    @torch.no_grad()
    def log_probability(self, src_ids: Tensor, generated: Tensor) -> Tensor:
        """The model's log-probability of whole outputs: ``sum_t log p(y_t | y_<t, x)``.

        Args:
            src_ids: ``(batch, L_s)`` source ids.
            generated: ``(batch, t)`` target ids from :meth:`generate` (``<bos>`` first);
                the tokens up to and including the first ``<eos>`` count, the padding after
                it does not.

        Returns:
            ``(batch,)`` log-probabilities: what beam search maximises.
        """
        decoder_input, labels = generated[:, :-1], generated[:, 1:]
        src_mask = self.model.source_mask(src_ids)
        memory = self.model.encode(src_ids, src_mask)
        log_p = torch.log_softmax(self.model.decode(decoder_input, memory, src_mask), -1)
        picked = log_p.gather(-1, labels[..., None])[..., 0]
        ended_before = (labels == self.target_vocab.eos_id).cumsum(1) - (
            labels == self.target_vocab.eos_id
        ).long()
        return (picked * (ended_before == 0)).sum(1)

    def exact_match(
        self, numbers: Sequence[int], beam_width: int = 1, batch_size: int = 1000
    ) -> float:
        """The share of ``numbers`` whose translation is exactly :func:`spanish_number_name`."""
        return 1 - len(self.mistakes(numbers, beam_width, batch_size)) / len(numbers)

    def mistakes(
        self, numbers: Sequence[int], beam_width: int = 1, batch_size: int = 1000
    ) -> list[tuple[int, str, str]]:
        """``(number, model's Spanish, correct Spanish)`` for every number translated wrongly."""
        numbers = list(numbers)
        wrong = []
        for start in range(0, len(numbers), batch_size):
            part = numbers[start : start + batch_size]
            for n, name in zip(part, self.translate(part, beam_width), strict=True):
                if name != spanish_number_name(n):
                    wrong.append((n, name, spanish_number_name(n)))
        return wrong

    @torch.no_grad()
    def cross_attention(self, number_or_name: int | str) -> CrossAttention:
        """The cross-attention weights of every layer and head while the model writes its own
        (greedy) translation of one number: rows are the decoder's inputs (``<bos>`` and the
        Spanish tokens), columns the English tokens."""
        src_ids = self.source_ids([number_or_name])
        generated = self.generate(src_ids)[0]
        if self.target_vocab.eos_id in generated.tolist():  # feed <bos> ... up to before <eos>
            generated = generated[: generated.tolist().index(self.target_vocab.eos_id)]
        tgt_ids = generated[None]
        src_mask = self.model.source_mask(src_ids)
        memory = self.model.encode(src_ids, src_mask)
        x = self.model.embed_target(tgt_ids)
        mask = self.model.target_mask(tgt_ids)
        _, weights = self.model.decoder(x, memory, mask, src_mask, return_weights=True)
        stacked = torch.stack([w.cross_attention[0] for w in weights])
        source = self.source_vocab.decode(src_ids[0], skip_special=False)
        target = self.target_vocab.decode(tgt_ids[0], skip_special=False)
        return CrossAttention(stacked, source, target)

    @torch.no_grad()
    def alignment_agreement(self, numbers: Sequence[int]) -> list[float]:
        """How often cross-attention points at the words being translated, per decoder layer.

        The correct Spanish names of ``numbers`` go through the decoder (teacher forcing).
        For every Spanish word, take the decoder position that predicts it (the one before
        it) and the English token to which that position's cross-attention, averaged over
        the heads, gives the most weight. The result, one number per layer, is the share of
        Spanish words for which that token is one of the English tokens the word translates
        (:func:`course_lib.data.number_alignment`): 1.0 is a perfect word alignment.
        """
        numbers = list(numbers)
        pairs = number_pairs(numbers, self.source_vocab, self.target_vocab)
        src_ids, tgt_ids = (ids.to(device_of(self.model)) for ids in pairs)
        decoder_input = tgt_ids[:, :-1]
        src_mask = self.model.source_mask(src_ids)
        memory = self.model.encode(src_ids, src_mask)
        x = self.model.embed_target(decoder_input)
        mask = self.model.target_mask(decoder_input)
        _, weights = self.model.decoder(x, memory, mask, src_mask, return_weights=True)
        shares = []
        for layer in weights:
            looked_at = layer.cross_attention.mean(dim=1).argmax(dim=-1)  # (batch, L_t)
            hits = total = 0
            for row, n in enumerate(numbers):
                for position, english in enumerate(number_alignment(n)):
                    hits += int(looked_at[row, position]) in english
                    total += 1
            shares.append(hits / total)
        return shares

    # ----------------------------------------------------------------------- saving

    def state(self) -> dict[str, Any]:
        """Everything needed to rebuild the translator, as plain data and tensors."""
        settings = {
            "d_model": self.model.d_model,
            "num_heads": self.model.decoder.layers[0].self_attention.num_heads,
            "num_encoder_layers": len(self.model.encoder.layers),
            "num_decoder_layers": len(self.model.decoder.layers),
            "d_ff": self.model.decoder.layers[0].feed_forward.d_ff,
            "dropout": self.model.positional.dropout.p,
            "max_len": self.model.positional.max_len,
        }
        return {
            "format": 1,
            "settings": settings,
            "source_tokens": self.source_vocab.tokens[4:],
            "target_tokens": self.target_vocab.tokens[4:],
            "state_dict": self.model.state_dict(),
        }

    def save(self, path: str | Path) -> None:
        """Write :meth:`state` with ``torch.save`` (load it with :meth:`load`)."""
        torch.save(self.state(), path)

    @classmethod
    def load(cls, path: str | Path) -> NumberTranslator:
        """A translator saved by :meth:`save`, read with ``torch.load(weights_only=True)``:
        only tensors and plain data, never code."""
        state = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(state, dict) or state.get("format") != 1:
            raise ValueError(f"{path} is not a translator saved by NumberTranslator.save")
        source = Vocabulary(state["source_tokens"])
        target = Vocabulary(state["target_tokens"])
        translator = cls.untrained(source, target, **state["settings"])
        translator.model.load_state_dict(state["state_dict"])
        return translator


def train_number_translator(
    seed: int = 0, progress: bool = False, split_seed: int = 0, **training: Any
) -> tuple[NumberTranslator, TrainingHistory]:
    """Train a :class:`NumberTranslator` on the training numbers of a :func:`number_split`.

    The vocabularies come from the training numbers' names; the model has
    :data:`MODEL_SETTINGS` and starts from weights drawn with ``seed``; training follows
    :data:`TRAINING_SETTINGS` (``training`` overrides them) on one CPU thread.

    Returns:
        ``(translator, history)``.
    """
    split = number_split(seed=split_seed)
    source_vocab, target_vocab = number_vocabularies(split.train)
    translator = NumberTranslator.untrained(source_vocab, target_vocab, seed=seed)
    src_ids, tgt_ids = number_pairs(split.train, source_vocab, target_vocab)
    settings = {**TRAINING_SETTINGS, **training}
    history = train_seq2seq(
        translator.model, src_ids, tgt_ids, pad_id=target_vocab.pad_id, seed=seed,
        progress=progress, **settings,
    )  # fmt: skip
    return translator, history


def load_number_translator() -> NumberTranslator:
    """The translator that ships with ``course_lib``: ``train_number_translator()`` with the
    default settings (seed 0), saved after training."""
    with resources.as_file(resources.files("course_lib") / CHECKPOINT) as path:
        return NumberTranslator.load(path)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m course_lib.translation [PATH]``: train with the default settings and save
    the translator to ``PATH`` (default: the checkpoint inside the package)."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    path = Path(args[0]) if args else Path(__file__).parent / CHECKPOINT
    translator, history = train_number_translator()
    with threads(1):
        score = translator.exact_match(number_split().test)
    translator.save(path)
    print(f"trained in {history.seconds:.1f} s, held-out exact match {score:.1%}; wrote {path}")


if __name__ == "__main__":
    main()
