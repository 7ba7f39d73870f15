"""The "The decoder" chapter's digit reverser, trained again from several seeds.

    .venv/bin/python benchmarks/decoder_seeds.py              # seeds 0 to 2
    .venv/bin/python benchmarks/decoder_seeds.py --seeds 3 4

For each seed the chapter's reverser (a post-norm ``Transformer`` of one encoder and one
decoder layer, d_model 32, two heads, d_ff 64, no dropout) is built after
``torch.manual_seed(seed)`` and trained as the chapter trains it: 400 steps of 64 random
strings of 3 to 8 digits drawn from ``torch.Generator().manual_seed(seed)``, Adam (3e-3,
betas 0.9 and 0.98), 40 steps of warm-up then a linear fall to zero, gradients clipped at 1.
Seed 0 is the run the chapter prints. The held-out strings are the chapter's 500 (drawn with
seed 1) for every seed. The script prints the teacher-forced next-token accuracy on them, the
first step's loss and the mean of the last 20, the share of the held-out digit positions
where the cross-attention, averaged over the two heads, peaks on the source digit to write;
for the example "3 1 4 1 5 9 2" the greedy reversal, per head the share of its positions
whose cross-attention peak is the digit to write next, and the token the model prefers after
"<bos> 2 9"; then whether each claim the chapter asserts held (exit status 1 if one did
not). Run it with the chapter's numerics to reproduce seed 0 exactly::

    ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2,STRICT ONEDNN_MAX_CPU_ISA=AVX2 OMP_NUM_THREADS=1 \\
        .venv/bin/python benchmarks/decoder_seeds.py --seeds 0 1 2 3 4

On torch 2.13.0 (2026-11-29), seeds 0 to 4 gave a next-token accuracy of 0.9929, 0.9703,
0.9641, 0.9678 and 0.9516 (mean loss of the last 20 steps 0.057, 0.112, 0.099, 0.124, 0.169),
and a head-averaged cross-attention peak on the digit to write at 0.811, 0.737, 0.741, 0.675
and 0.641 of the held-out digit positions (chance: 0.181). Every seed reversed the example
correctly and preferred 5 after "<bos> 2 9" (0.94, 0.69, 0.95, 0.80, 0.94). On the example,
the two heads' shares of peaks on the next digit were 0.86 and 1.00 for seed 0 but 0.57 and
0.29, 0.86 and 0.71, 0.43 and 0.71, 0.43 and 0.57 for seeds 1 to 4, and the accuracy of seeds
2 to 4 was below the 0.97 the chapter used to assert: the chapter now asserts an accuracy
above 0.9 and a held-out peak share above 0.5, and says which run its figure shows. Torch
2.14.1 gave the same numbers for seeds 0 to 2 (for seeds 1 and 2 every float of ``measure``,
digit for digit).

``tests/test_decoder_chapter.py`` checks the claims for seeds 1 and 2.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script

from benchmarks._seeds import Claims, run
from benchmarks._seeds import failed_claims as failed
from course_lib._devices import threads
from course_lib.transformer import Transformer
from course_lib.vocab import Vocabulary, pad_batch

DIGITS = Vocabulary(list("0123456789"))
STEPS = 400
EXAMPLE = "3 1 4 1 5 9 2".split()


@dataclass(frozen=True)
class Measures:
    """What the chapter reports of one trained reverser."""

    token_accuracy: float  # teacher-forced, on the 500 held-out strings
    first_loss: float  # the first training step's
    last_loss: float  # mean of the last 20 training steps
    reversal: str  # greedy output for EXAMPLE
    peak_on_next: float  # held-out positions whose head-averaged cross-attention peaks
    # on the source digit that the position writes
    aligned: tuple[float, float]  # per cross-attention head: peaks on the next digit
    after_2_9: str  # the most probable token after "<bos> 2 9"
    after_2_9_probability: float  # its probability


def digit_pairs(count: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The chapter's random digit strings (3 to 8 digits) and their reversals, padded."""
    lengths = torch.randint(3, 9, (count,), generator=generator).tolist()
    drawn = torch.randint(0, 10, (count, 8), generator=generator).tolist()
    strings = [[str(d) for d in row[:n]] for row, n in zip(drawn, lengths, strict=True)]
    sources = [DIGITS.encode(s) for s in strings]
    targets = [DIGITS.encode(s[::-1], add_bos=True, add_eos=True) for s in strings]
    return pad_batch(sources)[0], pad_batch(targets)[0]


def loss_of(model: Transformer, source: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Teacher forcing: read target[:, :-1], predict target[:, 1:]."""
    logits = model(source, target[:, :-1])
    labels = target[:, 1:].flatten()
    return F.cross_entropy(logits.flatten(0, 1), labels, ignore_index=DIGITS.pad_id)


def train(seed: int) -> tuple[Transformer, list[float]]:
    """The chapter's reverser and its step losses, trained from ``seed``."""
    torch.manual_seed(seed)
    model = Transformer(
        len(DIGITS), len(DIGITS), d_model=32, num_heads=2, num_encoder_layers=1,
        num_decoder_layers=1, d_ff=64, dropout=0.0, max_len=16,
    )  # fmt: skip
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / 40) * (1 - step / STEPS)
    )
    draw = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(STEPS):
        loss = loss_of(model, *digit_pairs(64, draw))
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    return model.eval(), losses


@torch.no_grad()
def reverse(model: Transformer, tokens: list[str]) -> str:
    """The chapter's greedy generation, at most 16 decoder passes."""
    source = torch.tensor([DIGITS.encode(tokens)])
    src_mask = model.source_mask(source)
    memory = model.encode(source, src_mask)
    written = torch.tensor([[DIGITS.bos_id]])
    for _ in range(16):
        next_id = model.decode(written, memory, src_mask)[0, -1].argmax()
        if next_id == DIGITS.eos_id:
            break
        written = torch.cat([written, next_id.view(1, 1)], dim=1)
    return " ".join(DIGITS.id_to_token(int(i)) for i in written[0, 1:])


def measure(seed: int) -> Measures:
    """Train the chapter's reverser from ``seed`` and measure it as the chapter does."""
    with threads(1), torch.random.fork_rng():  # as the chapter trains: repeatable sums
        model, losses = train(seed)
    with torch.no_grad():
        return measured(model, losses)


def measured(model: Transformer, losses: list[float]) -> Measures:
    """The chapter's measures of a trained reverser (under ``torch.no_grad``)."""
    test_source, test_target = digit_pairs(500, torch.Generator().manual_seed(1))
    inputs, labels = test_target[:, :-1], test_target[:, 1:]
    predicted = model(test_source, inputs).argmax(-1)
    real = labels != DIGITS.pad_id
    src_mask = model.source_mask(test_source)
    _, weights = model.decoder(
        model.embed_target(inputs), model.encode(test_source, src_mask),
        model.target_mask(inputs), src_mask, return_weights=True,
    )  # fmt: skip
    mean_cross = weights[0].cross_attention.mean(dim=1)  # (500, positions, source)
    position = torch.arange(mean_cross.size(1))
    next_digit = (test_source != DIGITS.pad_id).sum(dim=1, keepdim=True) - 1 - position
    on_next = mean_cross.argmax(dim=-1) == next_digit  # where next_digit >= 0

    source = torch.tensor([DIGITS.encode(EXAMPLE)])
    target = torch.tensor([DIGITS.encode(EXAMPLE[::-1], add_bos=True)])
    states, weights = model.decoder(
        model.embed_target(target), model.encode(source), model.target_mask(target), None,
        return_weights=True,
    )  # fmt: skip
    cross = weights[0].cross_attention[0]  # (heads, 8, 7)
    peaks = cross[:, :7].argmax(dim=-1)  # position t should read source digit 6 - t
    aligned = (peaks == torch.arange(6, -1, -1)).float().mean(dim=-1).tolist()
    next_token = model.output(states)[0, 2].softmax(-1)
    best = int(next_token.argmax())
    return Measures(
        token_accuracy=(predicted == labels)[real].float().mean().item(),
        first_loss=losses[0],
        last_loss=sum(losses[-20:]) / 20,
        reversal=reverse(model, EXAMPLE),
        peak_on_next=on_next[next_digit >= 0].float().mean().item(),
        aligned=(aligned[0], aligned[1]),
        after_2_9=DIGITS.id_to_token(best),
        after_2_9_probability=next_token[best].item(),
    )


def claims(m: Measures) -> Claims:
    """The chapter's asserts on its trained reverser."""
    return {
        "next-token accuracy on the held-out strings above 0.9": lambda: m.token_accuracy > 0.9,
        "greedy reversal of 3 1 4 1 5 9 2 is 2 9 5 1 4 1 3": lambda: m.reversal == "2 9 5 1 4 1 3",
        "cross-attention, averaged over the heads, peaks on the digit to write at more "
        "than half the held-out positions": lambda: m.peak_on_next > 0.5,
        "after <bos> 2 9 the most probable token is 5": lambda: m.after_2_9 == "5",
    }


def failed_claims(m: Measures) -> list[str]:
    """The chapter's claims that do not hold for this seed's reverser (none, we expect)."""
    return failed(claims(m))


def show(seed: int, m: Measures) -> str:
    return (
        f"seed {seed}: accuracy {m.token_accuracy:.4f}, loss {m.first_loss:.2f} to "
        f"{m.last_loss:.3f}, peak on the next digit {m.peak_on_next:.3f}; example: "
        f"{m.reversal!r}, per head {m.aligned[0]:.2f} {m.aligned[1]:.2f}, "
        f"after 2 9: {m.after_2_9} ({m.after_2_9_probability:.2f})"
    )


if __name__ == "__main__":
    sys.exit(run(__doc__, measure, claims, show, sys.argv[1:]))
