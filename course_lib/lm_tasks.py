"""The course's tasks for a decoder-only model, a training run, and what it is measured by.

The part "Beyond the original Transformer" changes the course's decoder one piece at a time
(rotary positions, RMSNorm, SwiGLU, grouped-query attention, ...) and measures every change on
the same small tasks, so that two models differ only in the change. A decoder-only model has no
source sentence: the question is written first, then a separator, then the answer, and the
model learns to continue a question with its answer::

    <bos> q_1 ... q_n <sep> a_1 ... a_m <eos>

- :func:`reversal_task`: the decoder chapter's digit reversal, ``3 1 4 <sep> 4 1 3``. It is
  trained on strings of some lengths and tested on every length up to a longer one, so it
  measures *length extrapolation*: answers longer than any seen in training.
- :func:`number_task`: the course's translation of number names, ``two hundred one <sep>
  doscientos uno``, trained on the course's training numbers and tested on held-out ones.

:func:`train_lm` trains on the answer tokens only (the question is given, not predicted);
:func:`exact_match` is the share of test sequences whose whole answer, ``<eos>`` included, the
model gets right.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from course_lib._checks import integer, positive_int
from course_lib.data import english_number_name, number_split, number_tokens, spanish_number_name
from course_lib.families import DecoderOnlyModel
from course_lib.training import TrainingHistory, fit, sequence_loss
from course_lib.vocab import Vocabulary, pad_batch

__all__ = [
    "SEPARATOR",
    "LMTask",
    "answer_labels",
    "exact_match",
    "exact_match_by_length",
    "model_for",
    "number_task",
    "reversal_task",
    "train_lm",
]

SEPARATOR = "<sep>"


@dataclass(frozen=True)
class LMTask:
    """A question-answer task framed for a decoder-only model.

    Attributes:
        name: what the task is, for printing.
        vocab: the tokens, with ``<pad>`` (id 0), ``<bos>``, ``<eos>`` and :data:`SEPARATOR`.
        train: ``(N, L)`` training sequences ``<bos> question <sep> answer <eos>``, padded.
        tests: named test sets, each ``(N_t, L_t)`` like ``train``; no test sequence is a
            training sequence.
        max_len: the longest sequence of any set, training or test.
    """

    name: str
    vocab: Vocabulary
    train: Tensor
    tests: dict[str, Tensor]
    max_len: int

    @property
    def sep_id(self) -> int:
        """The id of :data:`SEPARATOR`."""
        return self.vocab.token_to_id(SEPARATOR)

    def encode(self, question: Sequence[str], answer: Sequence[str]) -> list[int]:
        """``<bos> question <sep> answer <eos>`` as ids."""
        return self.vocab.encode([*question, SEPARATOR, *answer], add_bos=True, add_eos=True)

    def decode(self, ids: Tensor) -> tuple[list[str], list[str]]:
        """The question and the answer of one sequence ``(L,)`` of ids."""
        tokens = self.vocab.decode(ids, skip_special=True)
        if SEPARATOR not in tokens:
            return tokens, []
        cut = tokens.index(SEPARATOR)
        return tokens[:cut], tokens[cut + 1 :]

    def __repr__(self) -> str:
        tests = ", ".join(f"{name}: {len(ids)}" for name, ids in self.tests.items())
        return (
            f"LMTask({self.name!r}, vocabulary of {len(self.vocab)}, {len(self.train)} training "
            f"sequences, tests {{{tests}}}, max_len={self.max_len})"
        )


def _task(
    name: str,
    vocab: Vocabulary,
    train: list[list[int]],
    tests: dict[str, list[list[int]]],
) -> LMTask:
    sequences = [train, *tests.values()]
    max_len = max(len(row) for rows in sequences for row in rows)
    padded = {name: pad_batch(rows, vocab.pad_id)[0] for name, rows in tests.items()}
    return LMTask(name, vocab, pad_batch(train, vocab.pad_id)[0], padded, max_len)


# --------------------------------------------------------------------------- the tasks


def _lengths(name: str, lengths: Iterable[int]) -> list[int]:
    values = sorted({positive_int(name, n) for n in lengths})
    if not values:
        raise ValueError(f"{name} must hold at least one length, got none")
    return values


def reversal_task(
    train_lengths: Iterable[int] = range(3, 9),
    test_lengths: Iterable[int] = range(3, 17),
    num_train: int = 4000,
    num_test: int = 200,
    seed: int = 0,
) -> LMTask:
    """Reverse a string of digits: ``<bos> 3 1 4 <sep> 4 1 3 <eos>``.

    Args:
        train_lengths: the numbers of digits of the training strings, drawn uniformly.
        test_lengths: one test set per length, named ``"length n"``; lengths outside
            ``train_lengths`` were never seen in training.
        num_train: training strings (distinct).
        num_test: strings per test length, none of them a training string (fewer for a
            length with fewer strings left, e.g. length 2 has 100 in all).
        seed: of the draws; the same seed gives the same task.
    """
    train_lengths = _lengths("train_lengths", train_lengths)
    test_lengths = _lengths("test_lengths", test_lengths)
    num_train, num_test = positive_int("num_train", num_train), positive_int("num_test", num_test)
    room = sum(10**n for n in train_lengths)
    if num_train > room // 2:
        raise ValueError(
            f"num_train={num_train} is more than half of the {room} strings of lengths "
            f"{train_lengths}: leave some for testing"
        )
    rng = random.Random(integer("seed", seed))
    digits = [str(d) for d in range(10)]
    vocab = Vocabulary([SEPARATOR, *digits])
    seen: set[tuple[str, ...]] = set()
    while len(seen) < num_train:
        seen.add(tuple(rng.choice(digits) for _ in range(rng.choice(train_lengths))))
    train = sorted(seen, key=lambda s: (len(s), s))
    rng.shuffle(train)

    def encode(string: Sequence[str]) -> list[int]:
        return vocab.encode([*string, SEPARATOR, *reversed(string)], add_bos=True, add_eos=True)

    tests = {}
    for n in test_lengths:
        left = 10**n - sum(len(s) == n for s in seen)
        if not left:
            raise ValueError(
                f"every string of {n} digits is a training string: none is left to test"
            )
        wanted, drawn = min(num_test, left), set()
        while len(drawn) < wanted:
            string = tuple(rng.choice(digits) for _ in range(n))
            if string not in seen:
                drawn.add(string)
        tests[f"length {n}"] = [encode(s) for s in sorted(drawn)]
    return _task("digit reversal", vocab, [encode(s) for s in train], tests)


def number_task(numbers_seed: int = 0, test_fraction: float = 0.1) -> LMTask:
    """Translate a number name from English to Spanish: ``<bos> two hundred one <sep>
    doscientos uno <eos>``, on the course's split of 0 to 9999
    (:func:`course_lib.data.number_split`).

    The training set is the split's training numbers; the test set ``"held-out"`` its test
    numbers, never seen in training; ``"validation"`` the validation numbers. The vocabulary
    holds the tokens of both languages (none is shared but ``<sep>``'s neighbours, the
    special tokens).
    """
    split = number_split(test_fraction=test_fraction, seed=numbers_seed)

    def pair(n: int) -> tuple[list[str], list[str]]:
        return number_tokens(english_number_name(n)), number_tokens(spanish_number_name(n))

    pairs = {n: pair(n) for n in range(10_000)}
    corpus = [q + a for n in split.train for q, a in [pairs[n]]]
    tokens = Vocabulary.from_corpus(corpus).tokens[4:]  # after the four special tokens
    vocab = Vocabulary([SEPARATOR, *tokens])

    def encode(numbers: Sequence[int]) -> list[list[int]]:
        return [
            vocab.encode([*pairs[n][0], SEPARATOR, *pairs[n][1]], add_bos=True, add_eos=True)
            for n in numbers
        ]

    tests = {"held-out": encode(split.test), "validation": encode(split.validation)}
    return _task("English to Spanish number names", vocab, encode(split.train), tests)


# --------------------------------------------------------------------------- models and training

SMALL = {
    "d_model": 64,
    "num_heads": 4,
    "num_layers": 2,
    "d_ff": 256,
    "dropout": 0.0,
    "norm_first": True,
    "activation": "relu",
}


def model_for(task: LMTask, **settings: Any) -> DecoderOnlyModel:
    """A small :class:`DecoderOnlyModel` for ``task``: the course's pre-norm 2017 decoder.

    The 2017 paper's parts with the norms placed as in GPT-2 (before each sublayer, and a final
    norm): ``d_model`` 64, 4 heads, 2 pre-norm layers, ``d_ff`` 256, ReLU, sinusoidal positions
    for ``task.max_len`` positions, the embeddings tied to the output map, ``<pad>`` masked.
    ``settings`` override any of these or set any other option of :class:`DecoderOnlyModel`
    (``positions="rotary"``, ``norm="rms"``, ``gated=True``, ``num_kv_heads=1``...). The
    weights are drawn from torch's global generator: seed it first.
    """
    options = {**SMALL, "max_len": task.max_len, "pad_id": task.vocab.pad_id, **settings}
    return DecoderOnlyModel(len(task.vocab), **options)


def answer_labels(ids: Tensor, sep_id: int, pad_id: int = 0) -> tuple[Tensor, Tensor]:
    """Inputs and labels of teacher forcing, with only the answer's tokens as labels.

    Args:
        ids: ``(N, L)`` sequences ``<bos> question <sep> answer <eos>``, padded with ``pad_id``.
        sep_id: the separator's id; every sequence must hold it once.

    Returns:
        ``(inputs, labels)``, each ``(N, L - 1)``: ``inputs = ids[:, :-1]``; ``labels`` is
        ``ids[:, 1:]`` at the positions that predict an answer token or ``<eos>`` (those at the
        separator and after it) and ``pad_id`` elsewhere, so the question costs nothing.
    """
    if ids.dim() != 2 or ids.size(1) < 2:
        raise ValueError(f"ids must be (N, L) with L >= 2, got shape {tuple(ids.shape)}")
    is_sep = ids == sep_id
    if not bool((is_sep.sum(dim=1) == 1).all()):
        rows = (is_sep.sum(dim=1) != 1).nonzero().flatten().tolist()
        raise ValueError(f"every sequence must hold the separator once; rows {rows[:5]} do not")
    inputs, labels = ids[:, :-1], ids[:, 1:].clone()
    after_sep = is_sep[:, :-1].long().cummax(dim=1).values.bool()  # the separator and after
    labels[~after_sep] = pad_id
    return inputs, labels


def train_lm(
    model: DecoderOnlyModel,
    task: LMTask,
    *,
    epochs: int,
    batch_size: int = 64,
    learning_rate: float = 3e-3,
    seed: int = 0,
    **settings: Any,
) -> TrainingHistory:
    """Train ``model`` on ``task.train`` to write every answer after its question.

    The loss is the cross-entropy of the answer tokens and ``<eos>``
    (:func:`answer_labels`); the loop is :func:`course_lib.training.fit` (Adam, warm-up then
    decay, one CPU thread), whose other options ``settings`` pass on (``progress=True``...).
    """
    if model.vocab_size != len(task.vocab):
        raise ValueError(
            f"the model scores {model.vocab_size} tokens, the task has {len(task.vocab)}: "
            "build it with model_for(task)"
        )
    pad_id = task.vocab.pad_id

    def batch_loss(batch: Tensor) -> Tensor:
        inputs, labels = answer_labels(batch, task.sep_id, pad_id)
        return sequence_loss(model(inputs), labels, pad_id)

    return fit(
        model,
        (task.train,),
        batch_loss,
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        seed=seed,
        **settings,
    )


# --------------------------------------------------------------------------- measuring


@torch.no_grad()
def _correct(model: DecoderOnlyModel, ids: Tensor, sep_id: int, pad_id: int) -> Tensor:
    """``(N,)`` bool: whether every answer token of each sequence is the model's argmax."""
    inputs, labels = answer_labels(ids, sep_id, pad_id)
    device = next(model.parameters()).device
    guesses = model(inputs.to(device)).argmax(dim=-1).cpu()  # (N, L - 1)
    counts = labels != pad_id
    return ((guesses == labels) | ~counts).all(dim=1)


def exact_match(model: DecoderOnlyModel, task: LMTask, test: str, batch_size: int = 500) -> float:
    """The share of the sequences of ``task.tests[test]`` whose whole answer the model writes.

    Greedy decoding from ``<bos> question <sep>`` writes the answer and its ``<eos>`` exactly
    when, at every answer position, the model's highest-scoring token is the right one given
    the right tokens before it. So one teacher-forced pass decides it for all the tokens at
    once, instead of one pass per generated token; the model is put in ``eval()`` mode.
    """
    if test not in task.tests:
        raise KeyError(f"no test set {test!r}; the task has {sorted(task.tests)}")
    ids = task.tests[test]
    model.eval()
    pad_id = task.vocab.pad_id
    correct = torch.cat([
        _correct(model, rows, task.sep_id, pad_id) for rows in ids.split(batch_size)
    ])  # fmt: skip
    return float(correct.float().mean())


def exact_match_by_length(model: DecoderOnlyModel, task: LMTask) -> dict[int, float]:
    """:func:`exact_match` of every test set named ``"length n"``, as ``{n: share}``."""
    lengths = {int(name.split()[-1]): name for name in task.tests if name.startswith("length ")}
    if not lengths:
        raise ValueError(f"the task {task.name!r} has no test sets by length")
    return {n: exact_match(model, task, lengths[n]) for n in sorted(lengths)}
