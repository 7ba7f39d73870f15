"""Generating with a key/value cache against recomputing the whole prefix at every step.

    .venv/bin/python benchmarks/kv_cache_speed.py               # 256 tokens, batch 8
    .venv/bin/python benchmarks/kv_cache_speed.py --tokens 512 --threads 2

An untrained encoder-decoder ``course_lib.transformer.Transformer`` (``--d-model`` 128,
4 heads, ``--layers`` 2 + 2, d_ff 4 * d_model; the speed of a step does not depend on the
weights) encodes ``--batch`` random source sentences of 16 tokens and then generates
``--tokens`` tokens greedily, never stopping early, twice:

- with the cache: every step feeds the one new token; the keys and values of the earlier
  positions come from the cache (``TranslationScorer(..., use_cache=True)``);
- without: every step feeds ``<bos>`` and all the tokens generated so far.

The script checks that both runs generate the same tokens, then prints the total time of each
run, the ratio (recompute / cache: how many times faster the cache is), and the mean time per
token over the first and the last 32 steps of each run: flat with the cache, growing with the
prefix without it. One run of each, on ``--threads`` CPU threads (1 by default: on a shared
machine, threads waiting for each other make small steps slower at random). Timings vary
with the machine's load: run it more than once.
"""

from __future__ import annotations

import argparse
import statistics

import torch

from course_lib.decoding import TranslationScorer, greedy_decode, step_times
from course_lib.training import threads
from course_lib.transformer import Transformer

VOCAB, SOURCE_LENGTH, BOS = 100, 16, 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    model = Transformer(VOCAB, VOCAB, d_model=args.d_model, num_heads=4,
                        num_encoder_layers=args.layers, num_decoder_layers=args.layers,
                        d_ff=4 * args.d_model, dropout=0.0,
                        max_len=args.tokens + 1).eval()  # fmt: skip
    src = torch.randint(4, VOCAB, (args.batch, SOURCE_LENGTH))
    start = torch.full((args.batch, 1), BOS)
    with threads(args.threads):
        same = torch.equal(
            greedy_decode(TranslationScorer(model, src, True), start, None, args.tokens),
            greedy_decode(TranslationScorer(model, src, False), start, None, args.tokens),
        )
        cached = step_times(TranslationScorer(model, src, use_cache=True), start, args.tokens)
        plain = step_times(TranslationScorer(model, src, use_cache=False), start, args.tokens)

    print(f"{args.tokens} tokens, batch {args.batch}, d_model {args.d_model}, "
          f"{args.layers}+{args.layers} layers, {args.threads} thread(s)")  # fmt: skip
    print(f"same tokens with and without the cache: {same}")
    window = min(32, args.tokens)
    for name, times in (("with the cache", cached), ("recomputing the prefix", plain)):
        first = statistics.mean(times[:window]) * 1e3
        last = statistics.mean(times[-window:]) * 1e3
        print(f"{name:>24}: total {sum(times):7.3f} s; per token {first:6.2f} ms over the "
              f"first {window} steps, {last:6.2f} ms over the last {window}")  # fmt: skip
    ratio = sum(plain) / sum(cached)
    print(f"ratio recompute / cache: {ratio:.1f}x (the cache is {ratio:.1f} times faster)")
    if not same:
        raise SystemExit("the cached run generated other tokens than the recomputing one")


if __name__ == "__main__":
    main()
