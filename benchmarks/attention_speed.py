"""Forward + backward time of course_lib's MultiHeadAttention against nn.MultiheadAttention.

    .venv/bin/python benchmarks/attention_speed.py            # batch 64, length 128, d 256, 8 heads
    .venv/bin/python benchmarks/attention_speed.py --mask causal --dropout 0.1

Both modules hold the same weights (``MultiHeadAttention.from_torch``), are in training mode
and run self-attention on the same input (``query is key is value``, so PyTorch uses its packed
input projection). One step is a forward pass, ``output.sum().backward()`` and clearing the
gradients. Two comparisons, each fair to both sides:

- ``weights``: both return per-head attention weights (ours by default; PyTorch with
  ``need_weights=True, average_attn_weights=False``), so both compute the explicit
  ``softmax(Q K^T / sqrt(d_k)) V``;
- ``no weights``: neither returns them (``need_weights=False``), so both hand the heads to the
  fused ``F.scaled_dot_product_attention``.

After a warm-up, the two modules alternate step by step (so that load from other processes
hits both alike) and the script prints, for wall-clock time and for the process's CPU time, the
median time of each (with the range) and the median of the per-step ratios ours / PyTorch. A
ratio <= 1 means ours is no slower. Timings on a shared machine vary: run it more than once
(``--threads 1`` is less sensitive to other processes' load than PyTorch's default).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

from course_lib.attention import MultiHeadAttention, causal_mask


def step(forward) -> tuple[float, float]:
    """Wall-clock and CPU seconds for one forward + backward pass."""
    start, start_cpu = time.perf_counter(), time.process_time()
    output = forward()
    output.sum().backward()
    return time.perf_counter() - start, time.process_time() - start_cpu


def compare(ours_forward, torch_forward, modules, x, warmup: int, repeats: int) -> dict:
    def clear() -> None:
        x.grad = None
        for module in modules:
            module.zero_grad(set_to_none=True)

    for _ in range(warmup):
        for forward in (ours_forward, torch_forward):
            step(forward)
            clear()
    ours, theirs = [], []
    for repeat in range(repeats):
        order = (0, 1) if repeat % 2 == 0 else (1, 0)  # alternate who goes first
        for which in order:
            seconds = step((ours_forward, torch_forward)[which])
            clear()
            (ours if which == 0 else theirs).append(seconds)
    result = {}
    for clock, index in (("wall", 0), ("cpu", 1)):
        mine = [1000 * s[index] for s in ours]
        other = [1000 * s[index] for s in theirs]
        ratios = [a / b for a, b in zip(mine, other, strict=True)]
        result[clock] = {"ours": mine, "torch": other, "ratio": statistics.median(ratios)}
    return result


def describe(times: list[float]) -> str:
    return f"{statistics.median(times):7.1f} ms ({min(times):.1f}..{max(times):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--mask", choices=("none", "causal"), default="none")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: torch's)"
    )
    args = parser.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    reference = nn.MultiheadAttention(
        args.d_model, args.heads, dropout=args.dropout, batch_first=True
    ).train()
    ours = MultiHeadAttention.from_torch(reference).train()
    x = torch.randn(args.batch, args.length, args.d_model, requires_grad=True)
    allowed = causal_mask(args.length) if args.mask == "causal" else None
    not_allowed = None if allowed is None else ~allowed  # PyTorch's convention is the opposite

    def ours_with() -> torch.Tensor:
        return ours(x, x, x, mask=allowed)[0]

    def torch_with() -> torch.Tensor:
        return reference(
            x, x, x, attn_mask=not_allowed, need_weights=True, average_attn_weights=False
        )[0]

    def ours_without() -> torch.Tensor:
        return ours(x, x, x, mask=allowed, need_weights=False)[0]

    def torch_without() -> torch.Tensor:
        return reference(x, x, x, attn_mask=not_allowed, need_weights=False)[0]

    print(
        f"batch {args.batch}, length {args.length}, d_model {args.d_model}, {args.heads} heads, "
        f"dropout {args.dropout}, mask {args.mask}; training mode, forward + backward; "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; "
        f"median of {args.repeats} after {args.warmup} warm-up steps"
    )
    for label, pair in (
        ("weights", (ours_with, torch_with)),
        ("no weights", (ours_without, torch_without)),
    ):
        result = compare(*pair, (ours, reference), x, args.warmup, args.repeats)
        for clock in ("wall", "cpu"):
            times = result[clock]
            print(
                f"{label:>10}, {clock:>4} time: ours {describe(times['ours'])}, "
                f"nn.MultiheadAttention {describe(times['torch'])}; "
                f"ratio ours / torch = {times['ratio']:.3f}"
            )


if __name__ == "__main__":
    main()
