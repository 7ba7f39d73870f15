"""A training step of course_lib's Transformer against nn.Transformer of the same size, on CPU.

    .venv/bin/python benchmarks/transformer_speed.py         # 2+2 layers, d_model 128, 4 heads
    .venv/bin/python benchmarks/transformer_speed.py --threads 1 --repeats 40

Both models hold the same weights and differ only in their encoder-decoder stack:

- ours: ``course_lib.transformer.Transformer.from_torch(reference)``: token embeddings times
  sqrt(d_model), sinusoidal positions, ``course_lib`` encoder and decoder, output projection;
- PyTorch's: the same embedding, positional encoding and output projection (the very same
  module objects' copies) around the ``nn.Transformer`` itself.

The batch is ``--batch`` random sentence pairs of ``--length`` tokens, padded at the end to
random lengths between half and all of it; both models get the same masks (causal and
padding; PyTorch's in its own convention, True = not allowed). One step is what training does:
zero the gradients, forward, cross-entropy over the real target tokens, backward, an Adam
step. Both are in training mode with dropout ``--dropout``.

After a warm-up, the two alternate step by step (so that load from other processes hits both
alike); the script prints the median wall-clock and CPU time of each (with the range) and the
median of the per-step ratios ours / PyTorch. A ratio <= 1 means ours is no slower. Timings on
a shared machine vary: run it more than once.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from course_lib.attention import causal_mask
from course_lib.transformer import Transformer

PAD = 0


class TorchSeq2Seq(nn.Module):
    """nn.Transformer between our embeddings, positions and output projection (copied)."""

    def __init__(self, ours: Transformer, core: nn.Transformer) -> None:
        super().__init__()
        self.src_embedding = copy.deepcopy(ours.src_embedding)
        self.tgt_embedding = copy.deepcopy(ours.tgt_embedding)
        self.positional = copy.deepcopy(ours.positional)
        self.core = core
        self.output = copy.deepcopy(ours.output)

    def forward(self, src_ids: torch.Tensor, tgt_ids: torch.Tensor) -> torch.Tensor:
        src_pad, tgt_pad = src_ids == PAD, tgt_ids == PAD  # True = padding = not allowed
        future = ~causal_mask(tgt_ids.size(1))  # True = not allowed
        states = self.core(
            self.positional(self.src_embedding(src_ids)),
            self.positional(self.tgt_embedding(tgt_ids)),
            tgt_mask=future,
            src_key_padding_mask=src_pad,
            tgt_key_padding_mask=tgt_pad,
            memory_key_padding_mask=src_pad,
        )
        return self.output(states)


def random_batch(batch: int, length: int, vocab: int, generator: torch.Generator):
    """Source and target ids padded at the end; the target input starts with <bos> = 1."""
    ids = torch.randint(4, vocab, (2, batch, length), generator=generator)
    lengths = torch.randint(length // 2, length + 1, (2, batch), generator=generator)
    positions = torch.arange(length)
    ids[positions.expand(2, batch, length) >= lengths[..., None]] = PAD
    src, tgt = ids
    tgt_in = torch.cat([torch.ones(batch, 1, dtype=torch.long), tgt[:, :-1]], dim=1)
    return src, tgt_in, tgt


class OurStacks(nn.Module):
    """course_lib's encoder and decoder alone, on embedded inputs, with our masks."""

    def __init__(self, ours: Transformer) -> None:
        super().__init__()
        self.encoder, self.decoder = ours.encoder, ours.decoder

    def forward(self, src, tgt, src_keep, tgt_keep):
        allowed = causal_mask(tgt.size(1)) & tgt_keep[:, None, :]
        memory = self.encoder(src, src_keep[:, None, :])
        return self.decoder(tgt, memory, allowed, src_keep[:, None, :])


class TorchStacks(nn.Module):
    """nn.Transformer alone, on embedded inputs, with the same masks in its convention."""

    def __init__(self, core: nn.Transformer) -> None:
        super().__init__()
        self.core = core

    def forward(self, src, tgt, src_keep, tgt_keep):
        return self.core(src, tgt, tgt_mask=~causal_mask(tgt.size(1)),
                         src_key_padding_mask=~src_keep, tgt_key_padding_mask=~tgt_keep,
                         memory_key_padding_mask=~src_keep)  # fmt: skip


def model_loss(model: nn.Module, batch) -> torch.Tensor:
    """Cross-entropy of the next-token logits over the real target tokens."""
    src, tgt_in, tgt_out = batch
    logits = model(src, tgt_in)
    return F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD)


def stacks_loss(model: nn.Module, batch) -> torch.Tensor:
    """A stand-in loss on the stacks' output: the mean square of the real target states."""
    src, tgt, src_keep, tgt_keep = batch
    return model(src, tgt, src_keep, tgt_keep)[tgt_keep].pow(2).mean()


def timed_step(model, optimizer, loss_of, batch) -> tuple[float, float]:
    start, start_cpu = time.perf_counter(), time.process_time()
    optimizer.zero_grad(set_to_none=True)
    loss_of(model, batch).backward()
    optimizer.step()
    return time.perf_counter() - start, time.process_time() - start_cpu


def compare(models: dict, loss_of, batch, warmup: int, repeats: int) -> dict:
    """Alternate the two models' training steps; wall and CPU milliseconds of each."""
    optimizers = {name: torch.optim.Adam(m.parameters(), lr=1e-4) for name, m in models.items()}
    for _ in range(warmup):
        for name in models:
            timed_step(models[name], optimizers[name], loss_of, batch)
    times: dict[str, list[tuple[float, float]]] = {"ours": [], "torch": []}
    for repeat in range(repeats):
        order = ("ours", "torch") if repeat % 2 == 0 else ("torch", "ours")
        for name in order:
            times[name].append(timed_step(models[name], optimizers[name], loss_of, batch))
    return times


def describe(times: list[float]) -> str:
    return f"{statistics.median(times):7.1f} ms ({min(times):.1f}..{max(times):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--length", type=int, default=32)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2, help="encoder and decoder layers each")
    parser.add_argument("--d-ff", type=int, default=None, help="default: 4 * d_model")
    parser.add_argument("--vocab", type=int, default=1000)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--norm-first", action="store_true")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    args = parser.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    d_ff = args.d_ff or 4 * args.d_model
    core = nn.Transformer(args.d_model, args.heads, args.layers, args.layers, d_ff,
                          args.dropout, batch_first=True, norm_first=args.norm_first)  # fmt: skip
    ours = Transformer.from_torch(core, args.vocab, args.vocab, pad_id=PAD, max_len=args.length)
    theirs = TorchSeq2Seq(ours, core)
    batch = random_batch(args.batch, args.length, args.vocab, torch.Generator().manual_seed(1))
    # same weights, same function (dropout off; with gradients on, nn.Transformer takes its
    # ordinary path, as in training)
    gap = (ours.eval()(*batch[:2]) - theirs.eval()(*batch[:2])).abs().max().item()
    src, tgt_in, _ = batch
    embedded = (ours.embed_source(src).detach(), ours.embed_target(tgt_in).detach(),
                src != PAD, tgt_in != PAD)  # fmt: skip
    comparisons = {
        "whole model": ({"ours": ours, "torch": theirs}, model_loss, batch),
        "stacks only": ({"ours": OurStacks(ours), "torch": TorchStacks(core)}, stacks_loss,
                        embedded),
    }  # fmt: skip

    print(
        f"batch {args.batch}, length {args.length}, d_model {args.d_model}, {args.heads} heads, "
        f"{args.layers}+{args.layers} layers, d_ff {d_ff}, vocab {args.vocab}, dropout "
        f"{args.dropout}, norm_first {args.norm_first}; causal and padding masks; training "
        f"step (forward, cross-entropy, backward, Adam); torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads; median of {args.repeats} after {args.warmup} "
        f"warm-up steps"
    )
    print(f"largest difference of the logits (eval mode, same weights): {gap:.1e}")
    for label, (models, loss_of, inputs) in comparisons.items():
        for model in models.values():
            model.train()
        times = compare(models, loss_of, inputs, args.warmup, args.repeats)
        for clock, index in (("wall", 0), ("cpu", 1)):
            mine = [1000 * t[index] for t in times["ours"]]
            other = [1000 * t[index] for t in times["torch"]]
            ratio = statistics.median(a / b for a, b in zip(mine, other, strict=True))
            print(
                f"{label}, {clock:>4} time: ours {describe(mine)}, torch {describe(other)}; "
                f"ratio ours / torch = {ratio:.3f}"
            )


if __name__ == "__main__":
    main()
