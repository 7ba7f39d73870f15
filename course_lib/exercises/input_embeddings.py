"""Exercises of the chapter "Input embeddings" (``chapters/input-embeddings.ipynb``)."""

from __future__ import annotations

import torch

from course_lib.answers import EMBEDDING, Case
from course_lib.embeddings import TokenEmbedding, one_hot_lookup
from course_lib.exercises._registry import (
    CodeExercise,
    Mistake,
    ValueExercise,
    register,
)
from course_lib.word2vec import cbow_examples, skipgram_pairs

CHAPTER = "input-embeddings"


def _reference_lookup(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return one_hot_lookup(ids, weight)


def _lookup_cases(seed: int) -> list[Case]:
    small = torch.tensor([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0], [8.0, 9.0]])
    cases = [
        Case("ids (2, 3), a 5 x 2 table", (torch.tensor([[1, 4, 0], [2, 2, 3]]), small)),
        Case("ids (4,): one sequence", (torch.tensor([3, 0, 3, 1]), small)),
        Case(
            "the largest ids of the table are not used",
            (torch.tensor([[0, 1], [1, 0]]), torch.arange(24.0).reshape(8, 3)),
        ),
        Case(
            "a float64 table",
            (torch.tensor([[2, 0, 1]]), torch.linspace(-1, 1, 12, dtype=torch.float64).view(3, 4)),
        ),
    ]
    draw = torch.Generator().manual_seed(seed)
    for _ in range(3):
        vocab_size = int(torch.randint(2, 60, (), generator=draw))
        d_model = int(torch.randint(1, 17, (), generator=draw))
        batch = int(torch.randint(1, 5, (), generator=draw))
        seq = int(torch.randint(1, 11, (), generator=draw))
        ids = torch.randint(vocab_size, (batch, seq), generator=draw)
        weight = torch.randn(vocab_size, d_model, generator=draw)
        label = f"random: ids ({batch}, {seq}), table ({vocab_size}, {d_model})"
        cases.append(Case(label, (ids, weight)))
    return cases


ONE_HOT_LOOKUP = register(
    CodeExercise(
        id="emb-one-hot-lookup",
        chapter=CHAPTER,
        title="The lookup as a matrix product",
        points=3,
        function="one_hot_embed",
        parameters=("ids", "weight"),
        reference=_reference_lookup,
        cases=_lookup_cases,
        seed=2013,
        atol=1e-5,
        blocked=(one_hot_lookup, TokenEmbedding.forward, torch.nn.functional.embedding),
        blocked_ops=EMBEDDING,
        hints=(
            "The one-hot vector of id i has vocab_size entries: 1 at index i, 0 elsewhere. "
            "vocab_size is the number of rows of weight, weight.shape[0], not ids.max() + 1.",
            "Compare the ids with every possible id: (ids[..., None] == torch.arange(V)) has "
            "shape (*ids.shape, V) and is True exactly once per token.",
            "Convert the booleans to weight's dtype (.to(weight.dtype)) before multiplying: "
            "`one_hot @ weight`, shapes $(*, V)$ and $(V, d_{model})$ give $(*, d_{model})$.",
        ),
    )
)


def _gradient_rows() -> torch.Tensor:
    # from_pretrained draws nothing from the global random state
    table = torch.nn.Embedding.from_pretrained(torch.ones(10, 4), freeze=False, padding_idx=0)
    table(torch.tensor([[5, 2, 5, 0], [7, 2, 0, 0]])).sum().backward()
    grad = table.weight.grad
    used_rows = int((grad != 0).any(dim=1).sum())
    return torch.tensor([used_rows, float(grad[5, 0])], dtype=torch.float64)


GRADIENT_ROWS = register(
    ValueExercise(
        id="emb-gradient-rows",
        chapter=CHAPTER,
        title="Rows that learn",
        points=2,
        question=(
            "An embedding table of 10 rows, created with padding_idx=0, looks up the batch "
            "ids = [[5, 2, 5, 0], [7, 2, 0, 0]] (0 is the padding id). The loss is the sum of "
            "all the looked-up numbers, and loss.backward() is called. How many rows of the "
            "table get a non-zero gradient, and what is the gradient of each entry of row 5? "
            "Give the two numbers, separated by a comma."
        ),
        expected=_gradient_rows,
        atol=1e-6,
        entry_names=("rows with a gradient", "gradient of an entry of row 5"),
        mistakes=(
            Mistake(
                lambda: torch.tensor([4.0, 2.0]),
                "the padding row is looked up, but padding_idx stops its gradient: it stays "
                "the zero vector",
            ),
            Mistake(
                lambda: torch.tensor([3.0, 1.0]),
                "row 5 is looked up twice, and the gradients of the two lookups add up",
            ),
            Mistake(
                lambda: torch.tensor([8.0, 1.0]),
                "count rows of the table, not positions of the batch: a row used several "
                "times is still one row",
            ),
            Mistake(
                lambda: torch.tensor([5.0, 2.0]),
                "count rows of the table, not the non-padding positions of the batch: ids 5 "
                "and 2 each occur twice",
            ),
        ),
        hints=(
            "Only rows whose id occurs in the batch take part in the computation. Which ids "
            "occur, and what does padding_idx do to the gradient of its row?",
            "The loss is a plain sum, so every looked-up number has derivative 1. A row looked "
            "up n times collects n such contributions per entry.",
        ),
    )
)


def _reference_pairs(sentences: list[list[int]], window: int) -> torch.Tensor:
    centres, contexts = skipgram_pairs(sentences, window)
    return torch.stack([centres, contexts], dim=1)


def _pair_cases(seed: int) -> list[Case]:
    cases = [
        Case("one sentence [10, 11, 12, 13], window=1", ([[10, 11, 12, 13]], 1)),
        Case("window wider than the sentence", ([[5, 6, 7]], 3)),
        Case("pairs never cross sentences", ([[5, 6], [7, 8, 9]], 2)),
        Case("one-word sentences have no pairs", ([[4], [5, 6, 7, 8, 9], [4]], 2)),
        Case("a repeated word", ([[7, 7, 8, 7]], 1)),
    ]
    draw = torch.Generator().manual_seed(seed)
    for _ in range(3):
        count = int(torch.randint(1, 6, (), generator=draw))
        window = int(torch.randint(1, 4, (), generator=draw))
        lengths = torch.randint(1, 9, (count,), generator=draw).tolist()
        sentences = [torch.randint(4, 40, (n,), generator=draw).tolist() for n in lengths]
        label = f"random: {count} sentences of lengths {lengths}, window={window}"
        cases.append(Case(label, (sentences, window)))
    return cases


SKIPGRAM_PAIRS = register(
    CodeExercise(
        id="w2v-skipgram-pairs",
        chapter=CHAPTER,
        title="Skip-gram's training pairs",
        points=3,
        function="make_skipgram_pairs",
        parameters=("sentences", "window"),
        reference=_reference_pairs,
        cases=_pair_cases,
        seed=2014,
        atol=0.0,
        dtypes=(torch.int64,),
        blocked=(skipgram_pairs, cbow_examples),
        hints=(
            "Loop over the sentences, and in each over the positions i: the context positions "
            "are j = i - window, ..., i + window, without i itself and without those outside "
            "the sentence.",
            "Python slicing with a negative start (sentence[i - window:]) wraps around to the "
            "end: clip the range with max(0, i - window) and min(len(sentence), i + window + 1).",
            "Collect [centre, context] pairs in a list and return torch.tensor(pairs, "
            "dtype=torch.long).reshape(-1, 2), which also gives shape (0, 2) when there are none.",
        ),
    )
)
