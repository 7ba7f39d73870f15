"""word2vec: learning word embeddings from the words around each word (Mikolov et al., 2013).

Two tasks, each with two tables of shape ``(vocab_size, dim)``: the *input* embeddings (the
word vectors one keeps) and the *output* embeddings (used only to score predictions).

- **Skip-gram** predicts each context word from the centre word: the centre's input vector
  ``v`` scores every candidate context word ``o`` by ``u_o . v`` (``u_o`` its output vector).
- **CBOW** ("continuous bag of words") predicts the centre word from the mean ``v`` of the
  input vectors of its context words.

The exact loss is a softmax over the whole vocabulary, ``-log softmax(U v)[target]``.
*Negative sampling* replaces it by ``k + 1`` binary decisions: the true target against ``k``
"noise" words drawn from the unigram distribution raised to the power 3/4::

    loss = -log sigmoid(u_target . v) - sum_j log sigmoid(-u_noise_j . v)

Words that occur in the same contexts get similar input vectors, which :func:`nearest_neighbours`
and :func:`pca_2d` make visible.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib._checks import integer, positive_int
from course_lib._devices import multinomial, threads, values_checkable
from course_lib.embeddings import TokenEmbedding, check_token_ids
from course_lib.vocab import Vocabulary

__all__ = [
    "CBOW",
    "CBOWExamples",
    "SkipGram",
    "SkipGramPairs",
    "Word2VecResult",
    "cbow_examples",
    "nearest_neighbours",
    "negative_sampling_loss",
    "neighbour_class_agreement",
    "noise_distribution",
    "pca_2d",
    "skipgram_pairs",
    "train_word2vec",
    "unigram_counts",
]

METHODS = ("skipgram", "cbow")


# --- training examples ----------------------------------------------------------------------


class SkipGramPairs(NamedTuple):
    """Skip-gram examples: ``centres[n]`` (input) should predict ``contexts[n]`` (target)."""

    centres: Tensor  # (n,)
    contexts: Tensor  # (n,)


class CBOWExamples(NamedTuple):
    """CBOW examples: the context words ``contexts[n][mask[n]]`` should predict ``centres[n]``."""

    contexts: Tensor  # (n, 2 * window), 0 where there is no word
    mask: Tensor  # (n, 2 * window), True at real context words
    centres: Tensor  # (n,)


def _sentences(sentence_ids: Sequence[Sequence[int] | Tensor]) -> list[list[int]]:
    """The corpus as lists of ints; refuses a flat list of ids (one sentence not wrapped)."""
    sentences = []
    for number, sentence in enumerate(sentence_ids):
        if isinstance(sentence, Tensor):
            if sentence.is_floating_point() or sentence.dim() != 1:
                raise TypeError(
                    f"sentence {number} must be a 1-D integer tensor of ids, got "
                    f"{sentence.dtype} of shape {tuple(sentence.shape)}"
                )
            sentence = sentence.tolist()
        elif not isinstance(sentence, Sequence) or isinstance(sentence, str):
            raise TypeError(
                f"sentence_ids must be a list of sentences, each a list of ids such as "
                f"[[5, 6, 7], [8, 9]]; sentence {number} is {sentence!r}"
            )
        sentences.append([integer(f"an id of sentence {number}", i) for i in sentence])
    return sentences


def skipgram_pairs(sentence_ids: Sequence[Sequence[int] | Tensor], window: int) -> SkipGramPairs:
    """Every (centre, context) pair of words at most ``window`` apart within a sentence.

    Pairs are listed sentence by sentence, centre by centre, contexts from left to right; they
    never cross from one sentence into the next. Worked example, one sentence of four ids and
    ``window=1``::

        sentence      10  11  12  13
        centres   [10, 11, 11, 12, 12, 13]
        contexts  [11, 10, 12, 11, 13, 12]

    Each word is a centre once for each neighbour it has: 10 and 13 have one, 11 and 12 two.

    Args:
        sentence_ids: the corpus, a list of sentences, each a list (or 1-D tensor) of ids.
        window: how many words on each side count as context, a positive integer.

    Returns:
        ``SkipGramPairs(centres, contexts)``, two ``torch.long`` tensors of shape ``(n,)``.
    """
    window = positive_int("window", window)
    centres: list[int] = []
    contexts: list[int] = []
    for sentence in _sentences(sentence_ids):
        for i, centre in enumerate(sentence):
            for j in range(max(0, i - window), min(len(sentence), i + window + 1)):
                if j != i:
                    centres.append(centre)
                    contexts.append(sentence[j])
    return SkipGramPairs(
        torch.tensor(centres, dtype=torch.long), torch.tensor(contexts, dtype=torch.long)
    )


def cbow_examples(sentence_ids: Sequence[Sequence[int] | Tensor], window: int) -> CBOWExamples:
    """For every word, the ``2 * window`` slots of context around it and the word itself.

    Slot ``s`` holds the word at offset ``-window, ..., -1, +1, ..., +window`` from the centre;
    near the ends of a sentence some slots are empty (id 0, mask False). Worked example, one
    sentence of three ids and ``window=1`` (slots: left, right)::

        sentence   10  11  12
        contexts   [[ 0, 11], [10, 12], [11,  0]]
        mask       [[False, True], [True, True], [True, False]]
        centres    [10, 11, 12]

    A one-word sentence has no context and gives no example.

    Args:
        sentence_ids: the corpus, a list of sentences, each a list (or 1-D tensor) of ids.
        window: how many words on each side count as context, a positive integer.

    Returns:
        ``CBOWExamples(contexts, mask, centres)``: ``contexts`` ``(n, 2 * window)`` long,
        ``mask`` ``(n, 2 * window)`` bool, True at real context words, ``centres`` ``(n,)``.
    """
    window = positive_int("window", window)
    offsets = [*range(-window, 0), *range(1, window + 1)]
    contexts: list[list[int]] = []
    masks: list[list[bool]] = []
    centres: list[int] = []
    for sentence in _sentences(sentence_ids):
        if len(sentence) < 2:
            continue
        for i, centre in enumerate(sentence):
            inside = [0 <= i + offset < len(sentence) for offset in offsets]
            masks.append(inside)
            contexts.append(
                [sentence[i + o] if ok else 0 for o, ok in zip(offsets, inside, strict=True)]
            )
            centres.append(centre)
    return CBOWExamples(
        torch.tensor(contexts, dtype=torch.long).reshape(-1, 2 * window),
        torch.tensor(masks, dtype=torch.bool).reshape(-1, 2 * window),
        torch.tensor(centres, dtype=torch.long),
    )


def unigram_counts(sentence_ids: Sequence[Sequence[int] | Tensor], vocab_size: int) -> Tensor:
    """How often each id occurs in the corpus: a float64 tensor of shape ``(vocab_size,)``."""
    vocab_size = positive_int("vocab_size", vocab_size)
    ids = [i for sentence in _sentences(sentence_ids) for i in sentence]
    ids_tensor = torch.tensor(ids, dtype=torch.long)
    check_token_ids(ids_tensor, vocab_size, name="sentence_ids")
    return torch.bincount(ids_tensor, minlength=vocab_size).to(torch.float64)


def noise_distribution(counts: Tensor, power: float = 0.75) -> Tensor:
    """The distribution negative samples are drawn from: ``counts ** power``, normalised.

    The power 3/4 (Mikolov et al., 2013) draws rare words more often than their frequency and
    frequent words less often. Ids that never occur are never drawn.

    Args:
        counts: ``(vocab_size,)`` non-negative counts, not all zero.
        power: the exponent.

    Returns:
        ``(vocab_size,)`` probabilities summing to 1 (float64).
    """
    counts = torch.as_tensor(counts, dtype=torch.float64)
    values_wrong = values_checkable(counts) and bool((counts < 0).any() or counts.sum() <= 0)
    if counts.dim() != 1 or values_wrong:
        raise ValueError(
            "counts must be a 1-D tensor of non-negative counts, not all zero; got "
            f"shape {tuple(counts.shape)}"
        )
    weights = counts**power
    return weights / weights.sum()


# --- the losses -----------------------------------------------------------------------------


def _check_loss_shapes(hidden: Tensor, target: Tensor, noise: Tensor) -> None:
    if hidden.dim() != 2 or target.shape != hidden.shape:
        raise ValueError(
            f"hidden and target must both have shape (batch, dim), got {tuple(hidden.shape)} "
            f"and {tuple(target.shape)}"
        )
    if noise.dim() != 3 or noise.shape[0] != hidden.shape[0] or noise.shape[2] != hidden.shape[1]:
        raise ValueError(
            f"noise must have shape (batch, k, dim) = ({hidden.shape[0]}, k, {hidden.shape[1]}), "
            f"got {tuple(noise.shape)}"
        )


def negative_sampling_loss(
    hidden: Tensor,
    target: Tensor,
    noise: Tensor,
) -> Tensor:
    """Negative sampling: the true target scores high, the noise words score low.

    For each example, with ``v = hidden[n]``, ``u = target[n]`` and noise vectors
    ``u_1 .. u_k = noise[n]``::

        loss = -log sigmoid(u . v) - sum_j log sigmoid(-u_j . v)

    and the result is the mean over the batch.

    Args:
        hidden: ``(batch, dim)``, the vector that predicts (skip-gram: the centre word's input
            vector; CBOW: the mean of the context words' input vectors).
        target: ``(batch, dim)``, the output vectors of the words to predict.
        noise: ``(batch, k, dim)``, the output vectors of ``k`` noise words per example.

    Returns:
        A scalar tensor.
    """
    _check_loss_shapes(hidden, target, noise)
    positive = (target * hidden).sum(dim=-1)  # (batch,): u . v
    negative = (noise @ hidden[:, :, None]).squeeze(-1)  # (batch, k): u_j . v
    loss = -F.logsigmoid(positive) - F.logsigmoid(-negative).sum(dim=-1)
    return loss.mean()  # over the batch


# --- the models -----------------------------------------------------------------------------


class _Word2Vec(nn.Module):
    """The two tables and the two losses that skip-gram and CBOW share."""

    def __init__(self, vocab_size: int, dim: int, generator: torch.Generator | None = None):
        super().__init__()
        self.vocab_size = positive_int("vocab_size", vocab_size)
        self.dim = positive_int("dim", dim)
        self.input_embeddings = TokenEmbedding(self.vocab_size, self.dim)
        self.output_embeddings = TokenEmbedding(self.vocab_size, self.dim)
        # The original word2vec start: small uniform input vectors, zero output vectors.
        with torch.no_grad():
            bound = 0.5 / self.dim
            self.input_embeddings.weight.uniform_(-bound, bound, generator=generator)
            self.output_embeddings.weight.zero_()

    @property
    def embeddings(self) -> Tensor:
        """A copy of the input embeddings, the word vectors: ``(vocab_size, dim)``."""
        return self.input_embeddings.weight.detach().clone()

    def _target_loss(
        self,
        hidden: Tensor,
        targets: Tensor,
        noise: Tensor | None,
        negatives: int,
        full_softmax: bool,
        generator: torch.Generator | None,
    ) -> Tensor:
        """Mean loss of predicting ``targets`` ``(batch,)`` from ``hidden`` ``(batch, dim)``."""
        check_token_ids(targets, self.vocab_size, name="targets")
        if full_softmax:
            logits = hidden @ self.output_embeddings.weight.T  # (batch, vocab_size)
            return F.cross_entropy(logits, targets)
        if noise is None:
            raise ValueError(
                "negative sampling needs the noise distribution: pass "
                "noise=noise_distribution(unigram_counts(sentence_ids, vocab_size)), "
                "or use full_softmax=True"
            )
        if noise.shape != (self.vocab_size,):
            raise ValueError(
                f"noise must have shape (vocab_size,) = ({self.vocab_size},), "
                f"got {tuple(noise.shape)}"
            )
        negatives = positive_int("negatives", negatives)
        batch = targets.size(0)
        drawn = multinomial(noise, batch * negatives, generator, replacement=True)
        noise_ids = drawn.view(batch, negatives).to(targets.device)
        return negative_sampling_loss(
            hidden, self.output_embeddings(targets), self.output_embeddings(noise_ids)
        )


class SkipGram(_Word2Vec):
    """Skip-gram: the centre word predicts each of its context words.

    Args:
        vocab_size: number of words (rows of each table).
        dim: embedding size.
        generator: random generator for the initial input vectors (default: the global one).

    Shape:
        ``forward(centres)``: ``(batch,)`` ids -> ``(batch, dim)`` input vectors.
    """

    def forward(self, centres: Tensor) -> Tensor:
        return self.input_embeddings(centres)

    def loss(
        self,
        centres: Tensor,
        contexts: Tensor,
        *,
        noise: Tensor | None = None,
        negatives: int = 5,
        full_softmax: bool = False,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Mean loss over a batch of pairs (scalar tensor).

        Args:
            centres: ``(batch,)`` ids of the centre words.
            contexts: ``(batch,)`` ids of the context words to predict.
            noise: ``(vocab_size,)`` noise distribution (:func:`noise_distribution`), needed
                for negative sampling.
            negatives: noise words drawn per pair.
            full_softmax: use the exact softmax over the vocabulary instead (no noise).
            generator: random generator for drawing the noise words.
        """
        return self._target_loss(self(centres), contexts, noise, negatives, full_softmax, generator)


class CBOW(_Word2Vec):
    """CBOW: the mean of the context words' input vectors predicts the centre word.

    Args:
        vocab_size: number of words (rows of each table).
        dim: embedding size.
        generator: random generator for the initial input vectors (default: the global one).

    Shape:
        ``forward(contexts, mask)``: ``(batch, 2 * window)`` ids and mask -> ``(batch, dim)``.
    """

    def forward(self, contexts: Tensor, mask: Tensor) -> Tensor:
        if mask.dtype != torch.bool or mask.shape != contexts.shape:
            raise ValueError(
                f"mask must be a bool tensor of the contexts' shape {tuple(contexts.shape)}, "
                f"got {mask.dtype} of shape {tuple(mask.shape)}"
            )
        vectors = self.input_embeddings(contexts) * mask[..., None]  # (batch, 2w, dim)
        return vectors.sum(1) / mask.sum(1, keepdim=True).clamp(min=1)

    def loss(
        self,
        contexts: Tensor,
        mask: Tensor,
        centres: Tensor,
        *,
        noise: Tensor | None = None,
        negatives: int = 5,
        full_softmax: bool = False,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Mean loss over a batch of examples (scalar tensor).

        Args:
            contexts: ``(batch, 2 * window)`` ids of the context slots.
            mask: ``(batch, 2 * window)`` bool, True at real context words.
            centres: ``(batch,)`` ids of the centre words to predict.
            noise, negatives, full_softmax, generator: as in :meth:`SkipGram.loss`.
        """
        return self._target_loss(
            self(contexts, mask), centres, noise, negatives, full_softmax, generator
        )


# --- training -------------------------------------------------------------------------------


@dataclass
class Word2VecResult:
    """What :func:`train_word2vec` returns.

    Attributes:
        embeddings: the trained input embeddings, ``(vocab_size, dim)``.
        losses: the mean training loss of each epoch, ``epochs`` numbers.
        snapshots: ``(epoch, embeddings)`` pairs, epoch 0 being the start (empty unless
            ``snapshot_every`` was given).
        model: the trained :class:`SkipGram` or :class:`CBOW`.
    """

    embeddings: Tensor
    losses: list[float]
    snapshots: list[tuple[int, Tensor]] = field(default_factory=list)
    model: nn.Module | None = None


def train_word2vec(
    sentence_ids: Sequence[Sequence[int] | Tensor],
    vocab_size: int,
    method: str = "skipgram",
    dim: int = 16,
    window: int = 2,
    negatives: int = 5,
    epochs: int = 5,
    lr: float = 0.01,
    batch_size: int = 256,
    seed: int = 0,
    snapshot_every: int | None = None,
    full_softmax: bool = False,
) -> Word2VecResult:
    """Train skip-gram or CBOW with Adam on mini-batches of a tokenised corpus.

    Every random choice (initial vectors, order of the examples, noise words) comes from one
    ``torch.Generator`` seeded with ``seed``, so the same arguments give the same embeddings
    (with the same PyTorch version and CPU), and the global random state is not used.

    Training runs on one CPU thread, whatever ``torch.get_num_threads()`` says (the setting
    is restored afterwards): the matrices of word2vec are too small for threads to help, and
    on a machine whose cores are busy, waiting threads made training several times slower.
    One thread also makes the result independent of the number of cores.

    Args:
        sentence_ids: the corpus, a list of sentences of ids (``Vocabulary.encode``).
        vocab_size: number of ids (``len(vocab)``).
        method: ``"skipgram"`` or ``"cbow"``.
        dim: embedding size.
        window: context words on each side.
        negatives: noise words per example (negative sampling).
        epochs: passes over all examples.
        lr: Adam's learning rate.
        batch_size: examples per step.
        seed: seed of the generator.
        snapshot_every: if given, keep a copy of the embeddings at the start (epoch 0), after
            every ``snapshot_every`` epochs and after the last.
        full_softmax: train with the exact softmax instead of negative sampling.

    Returns:
        A :class:`Word2VecResult`.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    epochs = positive_int("epochs", epochs)
    batch_size = positive_int("batch_size", batch_size)
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a positive number, got {lr!r}")
    if snapshot_every is not None:
        snapshot_every = positive_int("snapshot_every", snapshot_every)
    generator = torch.Generator().manual_seed(integer("seed", seed))

    examples: tuple[Tensor, ...]
    if method == "skipgram":
        examples = tuple(skipgram_pairs(sentence_ids, window))
        model: _Word2Vec = SkipGram(vocab_size, dim, generator=generator)
    else:
        examples = tuple(cbow_examples(sentence_ids, window))
        model = CBOW(vocab_size, dim, generator=generator)
    noise = noise_distribution(unigram_counts(sentence_ids, vocab_size)).float()
    count = examples[0].size(0)
    if count == 0:
        raise ValueError("the corpus gives no training example: no sentence has two words")

    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    snapshots = [(0, model.embeddings)] if snapshot_every else []
    losses: list[float] = []
    with threads(1):
        for epoch in range(1, epochs + 1):
            order = torch.randperm(count, generator=generator)
            total = 0.0
            for start in range(0, count, batch_size):
                batch = [tensor[order[start : start + batch_size]] for tensor in examples]
                loss = model.loss(
                    *batch,
                    noise=noise,
                    negatives=negatives,
                    full_softmax=full_softmax,
                    generator=generator,
                )
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += loss.item() * batch[0].size(0)
            losses.append(total / count)
            if snapshot_every and (epoch % snapshot_every == 0 or epoch == epochs):
                snapshots.append((epoch, model.embeddings))
    return Word2VecResult(model.embeddings, losses, snapshots, model)


# --- looking at the result ------------------------------------------------------------------


def _check_table(embeddings: Tensor, vocab: Vocabulary) -> None:
    if not isinstance(embeddings, Tensor) or embeddings.dim() != 2:
        shape = tuple(embeddings.shape) if isinstance(embeddings, Tensor) else embeddings
        raise ValueError(f"embeddings must be a (vocab_size, dim) tensor, got {shape!r}")
    if embeddings.size(0) != len(vocab):
        raise ValueError(
            f"embeddings has {embeddings.size(0)} rows but the vocabulary {len(vocab)} tokens"
        )


def nearest_neighbours(
    embeddings: Tensor, vocab: Vocabulary, word: str, k: int = 5
) -> list[tuple[str, float]]:
    """The ``k`` words whose vectors have the largest cosine similarity to ``word``'s.

    The word itself and the special tokens are left out; ties keep the vocabulary order.

    Args:
        embeddings: ``(len(vocab), dim)``, row ``i`` the vector of token ``i``.
        vocab: the vocabulary the rows belong to.
        word: a token of the vocabulary (``KeyError`` otherwise).
        k: how many neighbours (fewer if the vocabulary has fewer other words).

    Returns:
        ``[(token, similarity), ...]``, most similar first, similarities in ``[-1, 1]``.
    """
    _check_table(embeddings, vocab)
    k = positive_int("k", k)
    index = vocab.token_to_id(word)
    unit = F.normalize(embeddings.detach().double(), dim=1)
    similarity = unit @ unit[index]  # (vocab_size,)
    candidates = [i for i in range(len(vocab)) if i != index and i not in vocab.special_ids]
    scores = similarity[candidates]
    order = torch.sort(scores, descending=True, stable=True).indices[:k]
    return [(vocab.id_to_token(candidates[i]), float(scores[i])) for i in order.tolist()]


def neighbour_class_agreement(
    embeddings: Tensor, vocab: Vocabulary, word_classes: Mapping[str, Sequence[str]]
) -> float:
    """The share of classified words whose nearest neighbour is in the same class.

    Only words of ``word_classes`` that are in the vocabulary are scored; their neighbour is
    searched among all non-special words (a neighbour in no class counts as a miss).

    Args:
        embeddings: ``(len(vocab), dim)``.
        vocab: the vocabulary the rows belong to.
        word_classes: class name -> its words, e.g. part of ``course_lib.data.WORD_CLASSES``.

    Returns:
        A number in ``[0, 1]``.
    """
    class_of = {word: name for name, words in word_classes.items() for word in words}
    scored = [word for word in class_of if word in vocab]
    if not scored:
        raise ValueError("none of the words of word_classes is in the vocabulary")
    hits = 0
    for word in scored:
        (neighbour, _), *_ = nearest_neighbours(embeddings, vocab, word, k=1)
        hits += class_of.get(neighbour) == class_of[word]
    return hits / len(scored)


def pca_2d(embeddings: Tensor) -> Tensor:
    """Project vectors onto their first two principal components, for a 2-D scatter plot.

    The rows are centred, then ``torch.linalg.svd`` gives the directions of largest variance.
    An SVD fixes each direction only up to its sign; here each output column is flipped so that
    its entry of largest absolute value is positive, so the picture is always the same.

    Args:
        embeddings: ``(n, dim)`` with ``n >= 2`` and ``dim >= 2``.

    Returns:
        ``(n, 2)`` coordinates, same dtype; column 0 has the larger variance.
    """
    if not isinstance(embeddings, Tensor) or embeddings.dim() != 2 or min(embeddings.shape) < 2:
        shape = tuple(embeddings.shape) if isinstance(embeddings, Tensor) else embeddings
        raise ValueError(f"embeddings must be an (n, dim) tensor with n, dim >= 2, got {shape!r}")
    data = embeddings.detach().double()
    centred = data - data.mean(dim=0, keepdim=True)
    _, _, vh = torch.linalg.svd(centred, full_matrices=False)
    coords = centred @ vh[:2].T  # (n, 2)
    largest = coords.abs().argmax(dim=0)  # (2,)
    signs = torch.sign(coords[largest, torch.arange(2, device=coords.device)])
    signs[signs == 0] = 1.0
    return (coords * signs).to(embeddings.dtype)
