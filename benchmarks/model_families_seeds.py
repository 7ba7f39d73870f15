"""The "Model families" chapter's BERT-like and GPT-like models, trained from several seeds.

    .venv/bin/python benchmarks/model_families_seeds.py              # seeds 0 to 2
    .venv/bin/python benchmarks/model_families_seeds.py --seeds 3 4

For each seed the chapter's two models of its grammar corpus (3,000 sentences of
``synthetic_grammar_corpus(seed=0)``, 55 tokens with ``<mask>``) are built from
``torch.manual_seed(seed)`` and trained with the chapter's settings (d_model 64, 4 heads, 2
layers, d_ff 128; 8 epochs, batches of 64, learning rate 5e-3, ``seed=seed``): an
``EncoderOnlyModel`` by masked-token prediction (``train_masked_lm``) and a
``DecoderOnlyModel`` by next-token prediction (``train_causal_lm``); seed 0 is the run the
chapter prints. The data, the masks of the test sentences and the sampling generators are the
chapter's for every seed: only the models' initialisation and training draws change. The
script prints, per seed, the encoder's class and exact-word accuracy on 1,000 new sentences
(and the best exact-word accuracy possible), its P(size adjective) in "the <mask> fox hides",
the decoder's P(size adjective) after "<bos> the", the grammatical share of 500 sentences
sampled at temperatures 0.5, 1.0 and 2.0, and how many tokens nucleus(0.9) keeps after "the"
and after "the teacher"; then whether each of the chapter's claims held (exit status 1 if one
did not). Run it with the chapter's numerics (one thread, AVX2 kernels) to reproduce seed 0
exactly::

    ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2,STRICT ONEDNN_MAX_CPU_ISA=AVX2 OMP_NUM_THREADS=1 \\
        .venv/bin/python benchmarks/model_families_seeds.py --seeds 0 1 2 3 4

On torch 2.13.0 (2026-11-29), seeds 0 to 4 gave: class accuracy 99.3%, 99.0%, 98.2%, 99.0%,
99.1%; exact word 19.5%, 22.3%, 18.5%, 22.9%, 20.3% (best possible 21.4%); P(size adjective)
in the gap 0.988, 0.960, 0.984, 0.985, 0.984; after "the" 0.178, 0.170, 0.182, 0.184, 0.174;
grammatical at temperature 0.5 100% for every seed, at 1.0 95.4%, 95.8%, 96.2%, 97.2%, 97.2%,
at 2.0 31.2%, 31.8%, 30.2%, 30.0%, 32.0%; nucleus(0.9) kept 14 tokens after "the" and the
five verbs of a person after "the teacher" for every seed. Every claim held. Torch 2.14.1
(Python 3.12) gave the same numbers for seeds 0 to 2, digit for digit, except the best
possible exact-word accuracy, a sum of Python floats, in its last digit (0.21422480620154855
on Python 3.11, 0.2142248062015504 on 3.12, whose ``sum`` compensates rounding). A seed takes
about 20 s of one CPU thread.

``tests/test_model_families_chapter.py`` checks the claims for seeds 1 and 2.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script

from benchmarks._seeds import Claims, run
from benchmarks._seeds import failed_claims as failed
from course_lib.data import WORD_CLASSES, is_grammatical, synthetic_grammar_corpus
from course_lib.decoding import sample
from course_lib.families import DecoderOnlyModel, EncoderOnlyModel
from course_lib.objectives import mask_tokens, train_causal_lm, train_masked_lm
from course_lib.vocab import Vocabulary, pad_batch

SETTINGS = {"d_model": 64, "num_heads": 4, "num_layers": 2, "d_ff": 128, "max_len": 16}
TRAINING = {"epochs": 8, "batch_size": 64, "learning_rate": 5e-3}
TEMPERATURES = (0.5, 1.0, 2.0)


@dataclass(frozen=True)
class Data:
    """The chapter's vocabulary, training sentences (plain and framed) and masked test."""

    vocab: Vocabulary
    sentences: torch.Tensor  # (3000, L): the words, padded
    framed: torch.Tensor  # (3000, L + 2): <bos> words <eos>, padded
    test_inputs: torch.Tensor  # 1,000 new sentences, 15% of their words masked
    test_labels: torch.Tensor


@dataclass(frozen=True)
class Measures:
    """What the chapter asserts about one seed's two trained models."""

    class_accuracy: float  # encoder: masked words given a word of the right class
    word_accuracy: float  # encoder: masked words given exactly
    best_possible: float  # the best exact-word accuracy: 1 / (words of the class)
    p_gap: float  # encoder: P(size adjective) in "the <mask> fox hides"
    p_size: float  # decoder: P(size adjective) after "<bos> the"
    grammatical: dict[float, float]  # decoder: grammatical share of 500 samples, by temperature
    nucleus_the: int  # tokens nucleus(0.9) keeps after "<bos> the"
    nucleus_teacher: int  # ... after "<bos> the teacher"
    nucleus_is_verbs: bool  # the latter are the five verbs of a person


@cache
def chapter_data() -> Data:
    corpus = synthetic_grammar_corpus(3000, seed=0)
    vocab = Vocabulary(["<mask>", *Vocabulary.from_corpus(corpus).tokens[4:]])
    sentences, _ = pad_batch([vocab.encode(s) for s in corpus])
    framed, _ = pad_batch([vocab.encode(s, add_bos=True, add_eos=True) for s in corpus])
    test, _ = pad_batch([vocab.encode(s) for s in synthetic_grammar_corpus(1000, seed=1)])
    mask = vocab.token_to_id("<mask>")
    inputs, labels = mask_tokens(test, mask, 0.15, torch.Generator().manual_seed(1))
    return Data(vocab, sentences, framed, inputs, labels)


def ids_of(vocab: Vocabulary, kind: str) -> list[int]:
    return [vocab.token_to_id(w) for w in WORD_CLASSES[kind]]


def nucleus_kept(p: torch.Tensor, top_p: float = 0.9) -> set[int]:
    """The smallest set of most probable tokens whose probabilities add up to ``top_p``."""
    ordered, order = p.sort(descending=True)
    before = ordered.cumsum(-1) - ordered  # probability of the tokens ahead
    return set(order[before < top_p].tolist())


def encoder_measures(data: Data, seed: int) -> tuple[float, float, float, float]:
    """Train the BERT-like model from ``seed``: class and word accuracy, the best word
    accuracy possible, and P(size adjective) in the gap of "the <mask> fox hides"."""
    vocab = data.vocab
    mask = vocab.token_to_id("<mask>")
    torch.manual_seed(seed)
    bert = EncoderOnlyModel(len(vocab), **SETTINGS)
    train_masked_lm(bert, data.sentences, mask, **TRAINING, seed=seed)
    word_class = {vocab.token_to_id(w): c for c, ws in WORD_CLASSES.items() for w in ws}
    with torch.no_grad():
        predicted = bert(data.test_inputs).argmax(dim=-1)
        query = torch.tensor([vocab.encode("the <mask> fox hides".split())])
        p_gap = torch.softmax(bert(query)[0, 1], dim=-1)
    hidden = data.test_labels != vocab.pad_id
    wanted, got = data.test_labels[hidden].tolist(), predicted[hidden].tolist()
    pairs = list(zip(wanted, got, strict=True))
    word = sum(a == b for a, b in pairs) / len(pairs)
    by_class = sum(word_class[a] == word_class.get(b) for a, b in pairs) / len(pairs)
    best = sum(1 / len(WORD_CLASSES[word_class[a]]) for a in wanted) / len(wanted)
    return by_class, word, best, p_gap[ids_of(vocab, "size")].sum().item()


def decoder_measures(data: Data, seed: int) -> dict:
    """Train the GPT-like model from ``seed``: its next-word distributions after "the" and
    "the teacher", and the grammatical share of its samples at each temperature."""
    vocab = data.vocab
    bos, eos, the = vocab.bos_id, vocab.eos_id, vocab.token_to_id("the")
    torch.manual_seed(seed)
    gpt = DecoderOnlyModel(len(vocab), **SETTINGS)
    train_causal_lm(gpt, data.framed, **TRAINING, seed=seed)
    with torch.no_grad():
        p_next = torch.softmax(gpt(torch.tensor([[bos, the]]))[0, -1], dim=-1)
        teacher = torch.tensor([[bos, the, vocab.token_to_id("teacher")]])
        p_verb = torch.softmax(gpt(teacher)[0, -1], dim=-1)
    grammatical = {}
    for tau in TEMPERATURES:
        drawn = sample(
            gpt.next_token_scores,
            torch.full((500, 1), bos),
            eos,
            14,
            temperature=tau,
            generator=torch.Generator().manual_seed(0),
        )
        ok = []
        for row in drawn[:, 1:].tolist():
            ended = eos in row
            ok.append(ended and is_grammatical(vocab.decode(row[: row.index(eos)])))
        grammatical[tau] = sum(ok) / len(ok)
    return {
        "p_size": p_next[ids_of(vocab, "size")].sum().item(),
        "grammatical": grammatical,
        "nucleus_the": len(nucleus_kept(p_next)),
        "nucleus_teacher": len(nucleus_kept(p_verb)),
        "nucleus_is_verbs": nucleus_kept(p_verb) == set(ids_of(vocab, "person_verb")),
    }


def measure(seed: int) -> Measures:
    """The chapter's measures of the two models trained from ``seed``."""
    data = chapter_data()
    with torch.random.fork_rng():
        by_class, word, best, p_gap = encoder_measures(data, seed)
        decoder = decoder_measures(data, seed)
    return Measures(by_class, word, best, p_gap, **decoder)


def claims(m: Measures) -> Claims:
    """The chapter's claims about one seed's two models."""
    g = m.grammatical
    return {
        "encoder: right class over 95%, exact word within 0.05 of the best possible": lambda: (
            m.class_accuracy > 0.95 and abs(m.word_accuracy - m.best_possible) < 0.05
        ),
        "encoder: P(size adjective) in 'the <mask> fox hides' over 0.9": lambda: m.p_gap > 0.9,
        "decoder: P(size adjective) after 'the' within 0.05 of 0.2": lambda: (
            abs(m.p_size - 0.2) < 0.05
        ),
        "decoder: grammatical over 95% at tau 0.5, over 85% at 1.0": lambda: (
            g[0.5] > 0.95 and g[1.0] > 0.85
        ),
        "decoder: grammatical under 60% at tau 2.0": lambda: g[2.0] < 0.6,
        "nucleus(0.9) keeps fewer tokens after 'the teacher' than after 'the'": lambda: (
            m.nucleus_teacher < m.nucleus_the
        ),
        "nucleus(0.9) after 'the teacher' is the five verbs of a person": lambda: (
            m.nucleus_is_verbs
        ),
    }


def failed_claims(m: Measures) -> list[str]:
    """The chapter's claims about one seed's two models that do not hold (none, we expect)."""
    return failed(claims(m))


def show(seed: int, m: Measures) -> str:
    shares = ", ".join(f"{m.grammatical[t]:.1%}" for t in TEMPERATURES)
    return (
        f"seed {seed}: class {m.class_accuracy:.1%}, word {m.word_accuracy:.1%}"
        f" (best {m.best_possible:.3f}), P(size | gap) {m.p_gap:.3f};"
        f" P(size | the) {m.p_size:.3f}, grammatical at 0.5/1/2 {shares};"
        f" nucleus keeps {m.nucleus_the} after 'the', {m.nucleus_teacher} after"
        f" 'the teacher' (the verbs: {m.nucleus_is_verbs})"
    )


if __name__ == "__main__":
    sys.exit(run(__doc__, measure, claims, show, sys.argv[1:]))
