"""The training recipe chapter's trained claims, measured again from several seeds.

    .venv/bin/python benchmarks/recipe_seeds.py                 # seeds 0 to 2, all parts
    .venv/bin/python benchmarks/recipe_seeds.py --part finetune --seeds 0 1 2 3 4 5 6 7

Seed 0 is the run ``chapters/training-recipe.ipynb`` prints. For each seed the script trains
what the chapter trains, with the chapter's settings, and prints what the chapter measures:

- ``regularise``: the translator on 150 numbers without dropout, with dropout 0.1, and with
  dropout 0.1 and label smoothing 0.1 (``NumberTranslator.untrained(..., seed=seed)``, 48
  epochs, ``train_seq2seq(..., seed=seed)``): final training loss, held-out loss, token
  accuracy, mean confidence, expected calibration error, the fullest reliability bin, exact
  match;
- ``warmup``: the three deeper translators (4 + 4 layers, 80 steps; post-norm with the
  paper's warm-up, post-norm at the peak rate from the first step, pre-norm likewise): the
  mean loss of their last 10 steps against the loss of a frequency guess;
- ``finetune``: the masked-token pre-training of the encoder (``torch.manual_seed(seed)``,
  ``train_masked_lm(..., seed=seed)``) and, for the four draws of 64 labels, the held-out
  accuracy of the classifier fine-tuned from it and of the one trained from scratch.

Then it checks each claim the chapter asserts and exits with status 1 if one failed for some
seed. Run it with the chapter's numerics (one thread, AVX2 kernels) to reproduce seed 0::

    ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2,STRICT ONEDNN_MAX_CPU_ISA=AVX2 OMP_NUM_THREADS=1 \\
        .venv/bin/python benchmarks/recipe_seeds.py --seeds 0 1 2 3 4

Measured on 2026-11-29 with torch 2.13.0 (seeds 0 to 2 printed the same on torch 2.14.1):

- ``regularise``, seeds 0 to 4, held-out loss and exact match without dropout -> with it:
  0.214 -> 0.146, 73.9% -> 81.4%; 0.225 -> 0.163, 75.0% -> 81.6%; 0.219 -> 0.159, 73.4% ->
  80.6%; 0.179 -> 0.153, 79.0% -> 83.4%; 0.204 -> 0.160, 77.5% -> 83.5%. Seed 3 missed the
  margins the chapter asserted then (0.03 and 5 points), so it asserts 0.02 and 4 points now.
  ECE 0.004 to 0.009 without smoothing, 0.055 to 0.061 with it; confidence with smoothing
  90.2% to 90.8% against an accuracy of 96.0% to 96.5%. Every other claim held.
- ``warmup``, seeds 0 to 4, the last 10 steps of post-norm with warm-up, post-norm without,
  pre-norm without (a frequency guess: 3.03): 0.72, 2.54, 0.12; 0.72, 2.51, 0.13; 0.69, 2.99,
  0.19; 0.69, 2.45, 0.13; 0.83, 2.54, 0.17. Every claim held.
- ``finetune``, seeds 0 to 7, the mean gain of pre-training over the four draws: +6.5, +3.85,
  +8.1, +8.7, +5.5, +8.1, +5.2, +10.8 points; a single draw's gain +2.5 to +12.6; the weakest
  fine-tuned classifier 86.2% (seed 1, draw 4), against 81.7% for always "no"; the last
  masked-token epoch 0.63 to 0.70 of the first. Every claim held.

On a quiet machine a seed takes about 20 s of one CPU thread for ``regularise``, 10 to 12 s
for ``warmup`` and 13 to 17 s for ``finetune``. ``tests/test_training_recipe_chapter.py``
checks every part's claims for seeds 1 and 2 (for ``regularise`` without the smoothed model's
exact match, which no claim needs).
"""

from __future__ import annotations

import argparse
import copy
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script

from benchmarks._seeds import Claims, failed_claims, run, spread
from course_lib.calibration import expected_calibration_error, reliability_bins
from course_lib.data import (
    english_number_name,
    number_pairs,
    number_split,
    number_tokens,
    number_vocabularies,
)
from course_lib.families import EncoderOnlyModel, SequenceClassifier
from course_lib.objectives import train_classifier, train_masked_lm
from course_lib.training import (
    sequence_loss,
    teacher_forcing,
    train_seq2seq,
    transformer_schedule,
    transformer_scheduler,
)
from course_lib.translation import NumberTranslator
from course_lib.vocab import Vocabulary, pad_batch

SPLIT = number_split(seed=0)
SOURCE, TARGET = number_vocabularies(SPLIT.train)
FEW = sorted(random.Random(0).sample(SPLIT.train, 150))
FEW_PAIRS = number_pairs(FEW, SOURCE, TARGET)  # the 150 training numbers
TEST_PAIRS = number_pairs(SPLIT.test, SOURCE, TARGET)  # the 1,000 held-out numbers
DEEP_PAIRS = number_pairs(SPLIT.train[:2560], SOURCE, TARGET)  # the warm-up runs' data
ENCODER = {"d_model": 64, "num_heads": 4, "num_layers": 2, "d_ff": 128, "max_len": 16}
DRAWS = (1, 2, 3, 4)


def held_out(translator: NumberTranslator, exact: bool = True) -> dict[str, float]:
    """The chapter's ``held_out``: teacher-forced scores on the 1,000 test numbers and, if
    ``exact``, the exact match of greedy translation."""
    test_src, test_tgt = TEST_PAIRS
    decoder_input, labels = teacher_forcing(test_tgt)
    with torch.no_grad():
        logits = translator.model(test_src, decoder_input)
    real = labels != TARGET.pad_id
    confidence, predicted = logits.softmax(dim=-1).max(dim=-1)
    confidence, right = confidence[real], (predicted == labels)[real]
    fullest = max(reliability_bins(confidence, right), key=lambda b: b.count)
    scores = {
        "loss": sequence_loss(logits, labels, TARGET.pad_id).item(),
        "accuracy": right.float().mean().item(),
        "confidence": confidence.mean().item(),
        "ECE": expected_calibration_error(confidence, right),
        "fullest gap": fullest.gap,
    }
    return scores | ({"exact": translator.exact_match(SPLIT.test)} if exact else {})


def regularise(seed: int, every_score: bool = True) -> dict[str, dict[str, float]]:
    """The chapter's three translators on 150 numbers (none, dropout, dropout and smoothing):
    their scores; without ``every_score``, the smoothed model's exact match, which no claim
    needs, is left out."""
    src_ids, tgt_ids = FEW_PAIRS
    runs = {"plain": (0.0, 0.0), "dropout": (0.1, 0.0), "smoothed": (0.1, 0.1)}
    scores = {}
    for name, (dropout, smoothing) in runs.items():
        translator = NumberTranslator.untrained(SOURCE, TARGET, seed=seed, dropout=dropout)
        history = train_seq2seq(
            translator.model,
            src_ids,
            tgt_ids,
            label_smoothing=smoothing,
            epochs=48,
            batch_size=32,
            learning_rate=3e-3,
            seed=seed,
        )
        exact = every_score or name != "smoothed"
        scores[name] = {**held_out(translator, exact), "train": history.epoch_losses[-1]}
    return scores


def regularise_claims(s: dict[str, dict[str, float]]) -> Claims:
    """The chapter's claims about dropout and label smoothing, for one seed's three models."""
    plain, drop, smooth = s["plain"], s["dropout"], s["smoothed"]
    return {
        "dropout raises the training loss": lambda: plain["train"] < drop["train"],
        "dropout lowers the held-out loss by 0.02": lambda: drop["loss"] < plain["loss"] - 0.02,
        "dropout adds 4 points of exact match": lambda: drop["exact"] > plain["exact"] + 0.04,
        "smoothing hurts the loss": lambda: smooth["loss"] > drop["loss"],
        "smoothing lowers the confidence by 3 points": lambda: (
            smooth["confidence"] < drop["confidence"] - 0.03
        ),
        "the smoothed model is under-confident": lambda: smooth["confidence"] < smooth["accuracy"],
        "the accuracy stays within 2 points": lambda: (
            abs(smooth["accuracy"] - drop["accuracy"]) < 0.02
        ),
        "ECE below 0.02 without smoothing": lambda: plain["ECE"] < 0.02 and drop["ECE"] < 0.02,
        "ECE above 0.04 and 3 times with it": lambda: (
            smooth["ECE"] > 0.04 and smooth["ECE"] > 3 * drop["ECE"]
        ),
        "the smoothed fullest bin 3 points above the diagonal": lambda: (
            smooth["fullest gap"] > 0.03
        ),
    }


def show_regularise(seed: int, s: dict[str, dict[str, float]]) -> str:
    return f"regularise, seed {seed}: " + "; ".join(
        f"{name} train {m['train']:.3f}, held-out {m['loss']:.3f}, accuracy "
        f"{m['accuracy']:.1%}, confidence {m['confidence']:.1%}, ECE {m['ECE']:.3f}, "
        f"fullest gap {m['fullest gap']:+.3f}, exact {m['exact']:.1%}"
        for name, m in s.items()
    )


def summarise_regularise(seeds: dict[int, dict[str, dict[str, float]]]) -> str:
    """What dropout gained and what smoothing did to the calibration, over the seeds."""
    runs = seeds.values()
    return "\n".join(
        (
            "dropout's held-out loss below none's by "
            + spread(s["plain"]["loss"] - s["dropout"]["loss"] for s in runs),
            "dropout's exact match above none's by "
            + spread((s["dropout"]["exact"] - s["plain"]["exact"] for s in runs), ".1%"),
            "ECE without smoothing: "
            + spread(s[name]["ECE"] for s in runs for name in ("plain", "dropout")),
            "ECE with smoothing: " + spread(s["smoothed"]["ECE"] for s in runs),
        )
    )


def warmup(seed: int) -> dict[str, float]:
    """The chapter's three deeper translators (4 + 4 layers, 80 steps of 32 pairs, Adam with
    the paper's settings): the mean loss of their last 10 steps, and the frequency-guess loss."""
    src_ids, tgt_ids = DEEP_PAIRS
    steps, scale = 50, 0.3

    def with_warmup(optimizer: torch.optim.Optimizer, total_steps: int):
        return transformer_scheduler(optimizer, d_model=64, warmup_steps=steps)

    def without(optimizer: torch.optim.Optimizer, total_steps: int):
        def factor(calls: int) -> float:
            return transformer_schedule(max(calls + 1, steps), 64, steps)

        return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)

    runs = {
        "post-norm, warm-up": (False, with_warmup),
        "post-norm, no warm-up": (False, without),
        "pre-norm, no warm-up": (True, without),
    }
    final = {}
    for name, (norm_first, schedule) in runs.items():
        deep = NumberTranslator.untrained(
            SOURCE,
            TARGET,
            seed=seed,
            num_encoder_layers=4,
            num_decoder_layers=4,
            norm_first=norm_first,
        )
        history = train_seq2seq(
            deep.model,
            src_ids,
            tgt_ids,
            epochs=1,
            batch_size=32,
            learning_rate=scale,
            schedule=schedule,
            adam_eps=1e-9,
            seed=seed,
        )
        final[name] = sum(history.step_losses[-10:]) / 10
    labels = tgt_ids[:, 1:][tgt_ids[:, 1:] != TARGET.pad_id]
    frequency = torch.bincount(labels).float()
    frequency = frequency[frequency > 0] / frequency.sum()
    final["frequency guess"] = -(frequency * frequency.log()).sum().item()
    return final


def warmup_claims(final: dict[str, float]) -> Claims:
    """The chapter's claims about one seed's three deeper translators."""
    stalled = final["post-norm, no warm-up"]
    return {
        "post-norm without warm-up stalls near the frequency guess": lambda: (
            stalled > 0.75 * final["frequency guess"] and stalled > 2.0
        ),
        "post-norm with warm-up trains (below 1.0)": lambda: final["post-norm, warm-up"] < 1.0,
        "pre-norm without warm-up trains (below 0.5)": lambda: final["pre-norm, no warm-up"] < 0.5,
    }


def show_warmup(seed: int, final: dict[str, float]) -> str:
    losses = ", ".join(f"{name} {loss:.2f}" for name, loss in final.items())
    return f"warmup, seed {seed}: mean loss of the last 10 steps: {losses}"


def finetune(seed: int) -> dict[str, Any]:
    english = [number_tokens(english_number_name(n)) for n in SPLIT.train]
    vocab = Vocabulary(["<mask>", *Vocabulary.from_corpus(english).tokens[4:]])
    unlabelled, _ = pad_batch([vocab.encode(name) for name in english])
    torch.manual_seed(seed)
    bert = EncoderOnlyModel(len(vocab), **ENCODER)
    history = train_masked_lm(
        bert,
        unlabelled,
        vocab.token_to_id("<mask>"),
        epochs=3,
        batch_size=64,
        learning_rate=5e-3,
        seed=seed,
    )

    def ids_of(numbers: list[int]) -> torch.Tensor:
        rows = [vocab.encode(number_tokens(english_number_name(n))) for n in numbers]
        return pad_batch(rows)[0]

    def labels_of(numbers: list[int]) -> torch.Tensor:
        return torch.tensor([int(n % 5 == 0) for n in numbers])

    test_ids, test_labels = ids_of(SPLIT.test), labels_of(SPLIT.test)

    def accuracy(pretrained: bool, numbers: list[int]) -> float:
        torch.manual_seed(1)
        encoder = copy.deepcopy(bert) if pretrained else EncoderOnlyModel(len(vocab), **ENCODER)
        torch.manual_seed(1)
        classifier = SequenceClassifier(encoder, num_classes=2)
        train_classifier(
            classifier,
            ids_of(numbers),
            labels_of(numbers),
            epochs=30,
            batch_size=16,
            learning_rate=1e-3,
            seed=0,
        )
        with torch.no_grad():
            predicted = classifier(test_ids).argmax(dim=-1)
        return (predicted == test_labels).float().mean().item()

    result: dict[str, Any] = {
        "masked-token loss": history.epoch_losses[-1] / history.epoch_losses[0],
    }
    for draw in DRAWS:
        labelled = random.Random(draw).sample(SPLIT.train, 64)
        result[f"draw {draw}"] = (accuracy(True, labelled), accuracy(False, labelled))
    return result


MAJORITY = 1 - sum(n % 5 == 0 for n in SPLIT.test) / len(SPLIT.test)  # always "no"


def gains(r: dict[str, Any]) -> list[float]:
    """Fine-tuned minus from-scratch held-out accuracy, for each draw of the 64 labels."""
    return [r[f"draw {draw}"][0] - r[f"draw {draw}"][1] for draw in DRAWS]


def finetune_claims(r: dict[str, Any]) -> Claims:
    """The chapter's claims about one pre-training seed and its eight classifiers."""
    pairs = [r[f"draw {draw}"] for draw in DRAWS]
    return {
        "the masked-token loss falls by a fifth": lambda: r["masked-token loss"] < 0.8,
        "every fine-tuned classifier 2 points above 'no'": lambda: all(
            pre > MAJORITY + 0.02 for pre, _ in pairs
        ),
        "a mean gain above 2 points": lambda: sum(gains(r)) / len(DRAWS) > 0.02,
    }


def show_finetune(seed: int, r: dict[str, Any]) -> str:
    draws = ", ".join(f"{r[f'draw {d}'][0]:.1%} against {r[f'draw {d}'][1]:.1%}" for d in DRAWS)
    return (
        f"finetune, seed {seed}: masked-token loss x{r['masked-token loss']:.2f}; "
        f"fine-tuned against from scratch, draws {DRAWS}: {draws}; "
        f"mean gain {sum(gains(r)) / len(DRAWS):+.1%}"
    )


def summarise_finetune(seeds: dict[int, dict[str, Any]]) -> str:
    """The gains and the weakest fine-tuned classifier over the seeds."""
    runs = seeds.values()
    return "\n".join(
        (
            "mean gain over the draws: "
            + spread((sum(gains(r)) / len(DRAWS) for r in runs), ".1%"),
            "a single draw's gain: " + spread((g for r in runs for g in gains(r)), ".1%"),
            f"the weakest fine-tuned classifier: "
            f"{min(r[f'draw {d}'][0] for r in runs for d in DRAWS):.1%} "
            f"(always 'no': {MAJORITY:.1%})",
        )
    )


class Part(NamedTuple):
    """One part of the chapter: train and measure a seed, its claims, a line to print."""

    measure: Callable[[int], Any]
    claims: Callable[[Any], Claims]
    show: Callable[[int, Any], str]
    summarise: Callable[[dict[int, Any]], str] | None = None


PARTS = {
    "regularise": Part(regularise, regularise_claims, show_regularise, summarise_regularise),
    "warmup": Part(warmup, warmup_claims, show_warmup),
    "finetune": Part(finetune, finetune_claims, show_finetune, summarise_finetune),
}


def failed_part_claims(part: str, seed: int) -> list[str]:
    """The chapter's claims about ``part`` that do not hold for ``seed`` (none, we expect)."""
    measure, claims, _, _ = PARTS[part]
    return failed_claims(claims(measure(seed)))


def main(argv: list[str]) -> int:
    """``--part`` (default: all) and ``--seeds`` (default: 0 to 2); each part's seeds are
    measured and checked by ``benchmarks._seeds.run``. The exit status is 1 if a claim failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=[*PARTS, "all"], default="all")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    options = parser.parse_args(argv)
    seeds = ["--seeds", *map(str, options.seeds)]
    status = 0
    for name in PARTS if options.part == "all" else [options.part]:
        measure, claims, show, summarise = PARTS[name]
        status |= run(__doc__, measure, claims, show, seeds, summarise=summarise)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
