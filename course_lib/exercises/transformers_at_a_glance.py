"""Exercises of the chapter "Transformers at a glance" (``transformers-at-a-glance.ipynb``)."""

from __future__ import annotations

import torch

from course_lib.answers import Case
from course_lib.discretize import Codebook, kmeans
from course_lib.exercises._registry import (
    ChoiceExercise,
    CodeExercise,
    Mistake,
    Option,
    ValueExercise,
    register,
)

CHAPTER = "transformers-at-a-glance"


ARCHITECTURE = register(
    ChoiceExercise(
        id="glance-architecture",
        chapter=CHAPTER,
        title="Choose an architecture",
        points=2,
        question=(
            "A help desk wants a model that reads an incoming e-mail and sorts it into one of "
            "five departments: the whole e-mail goes in, one label comes out. Which kind of "
            "Transformer fits this task best?"
        ),
        options=(
            Option(
                "a",
                "A decoder-only model such as GPT-2, since decoders are what generate text.",
                "Not the best fit: a decoder's causal mask lets each position see only the "
                "tokens before it, which suits producing text one token at a time. A decoder "
                "can be made to classify (for example by writing the label's name), but "
                "nothing here needs to be generated.",
            ),
            Option(
                "b",
                "An encoder-only model such as BERT: every position attends to the whole "
                "e-mail, and a small classifier reads the encoder's output.",
                "Right: classifying a whole input is a discriminative task. The encoder's "
                "attention looks both ways, so every vector it outputs has seen the whole "
                "e-mail; a linear layer and a softmax over five labels turn that into a "
                "prediction, and fine-tuning a pre-trained encoder needs few labelled e-mails.",
            ),
            Option(
                "c",
                "An encoder-decoder such as BART or Whisper: the encoder reads the e-mail and "
                "the decoder writes the label.",
                "It would work, but it is more than the task needs: the decoder stack exists "
                "to produce an output sequence (a translation, a summary, a transcript) "
                "conditioned on the input. One label out of five needs no generated sequence.",
            ),
            Option(
                "d",
                "None of them: a Transformer's output is always a sequence as long as its input.",
                "No: the encoder gives one vector per input token, but a classifier can read "
                "one of them (BERT uses its [CLS] token) or their mean to give a single label.",
            ),
        ),
        answer="b",
        hints=(
            "Does the task produce a sequence, or one decision about the whole input?",
            "Which part of the Transformer lets every position see the whole input, and which "
            "part hides the future from each position?",
        ),
    )
)


def _vit_patches() -> torch.Tensor:
    side = 224 // 16
    return torch.tensor([side * side, 3 * 16 * 16], dtype=torch.float64)


VIT_PATCHES = register(
    ValueExercise(
        id="glance-vit-patches",
        chapter=CHAPTER,
        title="An image as a sequence",
        points=2,
        question=(
            "ViT-Base/16 cuts a $224 \\times 224$ RGB image into $16 \\times 16$ patches and "
            "flattens every "
            "patch into one vector. How many patches (the sequence length) does one image "
            "give, and how many numbers does one flattened patch hold? Give the two numbers, "
            "separated by a comma."
        ),
        expected=_vit_patches,
        atol=0.5,
        entry_names=("number of patches", "numbers per patch"),
        mistakes=(
            Mistake(
                lambda: torch.tensor([14.0, 768.0]),
                "224 / 16 = 14 is the number of patches along one side; the image is a grid "
                "of patches with that many rows and that many columns",
            ),
            Mistake(
                lambda: torch.tensor([196.0, 256.0]),
                "$16 \\times 16$ counts the pixels of a patch, but every pixel of an RGB image "
                "holds three numbers (red, green, blue)",
            ),
            Mistake(
                lambda: torch.tensor([196.0, 48.0]),
                "a patch is 16 pixels wide and 16 pixels high: count the pixels of the whole "
                "square, each with its three colour values",
            ),
        ),
        hints=(
            "Along one side, 224 pixels make 224 / 16 patches. The patches form a square grid.",
            "A flattened patch lists every value of every pixel: width x height x channels.",
        ),
    )
)


def _reference_codes(frames: torch.Tensor, codebook: torch.Tensor) -> torch.Tensor:
    return Codebook(codebook).encode(frames)


def _code_cases(seed: int) -> list[Case]:
    codebook = torch.tensor([[0.0, 0.0], [3.0, 3.0], [-2.0, 1.0]])
    frames = torch.tensor([[1.0, 1.0], [2.5, 2.0], [-1.0, 0.8], [0.0, 0.0]])
    cases = [
        Case("3 entries in 2-D, worked by hand", (frames, codebook)),
        Case(
            "one entry: every frame gets id 0",
            (torch.arange(20.0).reshape(5, 4) / 7, torch.ones(1, 4)),
        ),
        Case("frames equal to the entries", (codebook.flip(0).clone(), codebook)),
        Case("a frame far from everything", (torch.tensor([[40.0, -3.0]]), codebook)),
    ]
    draw = torch.Generator().manual_seed(seed)
    for _ in range(3):
        k = int(torch.randint(2, 17, (), generator=draw))
        length = int(torch.randint(2, 33, (), generator=draw))
        num_frames = int(torch.randint(1, 61, (), generator=draw))
        entries = 2.0 * torch.randn(k, length, generator=draw)
        entries *= torch.rand(k, 1, generator=draw) * 2 + 0.2  # entries of unequal length
        ids = torch.randint(k, (num_frames,), generator=draw)
        noisy = entries[ids] + 0.05 * torch.randn(num_frames, length, generator=draw)
        cases.append(
            Case(
                f"random: {num_frames} frames of {length} samples, k={k}",
                (noisy, entries),
            )
        )
    return cases


NEAREST_CODES = register(
    CodeExercise(
        id="glance-nearest-codes",
        chapter=CHAPTER,
        title="Frames to token ids",
        points=3,
        function="nearest_codes",
        parameters=("frames", "codebook"),
        reference=_reference_codes,
        cases=_code_cases,
        seed=2020,
        atol=0.0,
        dtypes=(torch.int64,),
        blocked=(Codebook.encode, kmeans),
        hints=(
            "Compare every frame with every codebook entry: frames[:, None, :] - "
            "codebook[None, :, :] has shape (num_frames, k, frame_length).",
            "Square the differences and sum over the last dimension to get the squared "
            "distances, shape (num_frames, k); torch.cdist computes the distances directly.",
            "The token id of a frame is the index of its smallest distance: .argmin(dim=1). "
            "Not the largest dot product: entries of different lengths would win unfairly.",
        ),
    )
)
