"""Training time of course_lib's byte-level BPE against Hugging Face tokenizers; tokens per text.

    .venv/bin/python benchmarks/tokenization_speed.py                 # sizes 500 and 1000
    .venv/bin/python benchmarks/tokenization_speed.py --sizes 300 500 2000 --repeat 5

Two corpora: the translator's (the English and Spanish names of 0 to 9999, 20,000 texts), whose
words run out of pairs after a few hundred merges, and the course's own text (the Markdown
pages and the library's source, one text per line), which has enough words for thousands.
For each vocabulary size, both libraries train with the same settings (the configuration in
``course_lib/tokenization.py``); the best of ``--repeat`` runs is printed, with whether the
merges and the vocabularies are the same. Then :func:`vocabulary_tradeoff` on the number
names: tokens per text and embedding parameters per vocabulary size.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from course_lib.data import english_number_name, spanish_number_name
from course_lib.tokenization import SPECIAL_TOKENS, BytePairEncoding, vocabulary_tradeoff

ROOT = Path(__file__).resolve().parent.parent


def number_names() -> list[str]:
    return [english_number_name(n) for n in range(10_000)] + [
        spanish_number_name(n) for n in range(10_000)
    ]


def course_text() -> list[str]:
    """Lines of the course's pages and library, without the special tokens' spellings."""
    files = sorted(ROOT.glob("*.md")) + sorted((ROOT / "course_lib").glob("*.py"))
    lines = [line for path in files for line in path.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if not any(token in line for token in SPECIAL_TOKENS)]


def hugging_face(texts: list[str], vocab_size: int) -> Tokenizer:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=0,
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


def best_time(
    train: Callable[[list[str], int], object], texts: list[str], size: int, repeat: int
) -> tuple[float, object]:
    """The shortest of ``repeat`` runs of ``train(texts, size)``, and what it returned."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = train(texts, size)
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 1000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    for name, texts in (("number names", number_names()), ("course text", course_text())):
        print(f"{name}: {len(texts)} texts, {sum(len(t.encode()) for t in texts)} bytes")
        for size in args.sizes:
            ours_time, ours = best_time(BytePairEncoding.train, texts, size, args.repeat)
            theirs_time, theirs = best_time(hugging_face, texts, size, args.repeat)
            merges = json.loads(theirs.to_str())["model"]["merges"]
            theirs_merges = [tuple(m.split(" ") if isinstance(m, str) else m) for m in merges]
            same = ours.merges == theirs_merges and ours.vocab == theirs.get_vocab()
            timings = f"course_lib {ours_time:6.3f} s, Hugging Face {theirs_time:6.3f} s"
            print(f"  vocab_size {size:5d}: {len(ours.merges):5d} merges, {timings}, same: {same}")

    print("number names, d_model 512 (measured on the training texts):")
    for row in vocabulary_tradeoff(number_names(), [259, 300, 400, 450, 500, 535], d_model=512):
        lengths = f"{row.tokens_per_text:5.2f} tokens per text ({row.total_tokens} in all)"
        table = f"{row.embedding_parameters:7d} embedding parameters"
        print(f"  {row.actual_size:4d} tokens: {lengths}, {table}")


if __name__ == "__main__":
    main()
