"""Exercises of the chapter "Model families" (``chapters/model-families.ipynb``)."""

from __future__ import annotations

from course_lib.exercises._registry import ChoiceExercise, Option, register

CHAPTER = "model-families"

FAMILY_FOR_TASK = register(
    ChoiceExercise(
        id="family-for-task",
        chapter=CHAPTER,
        title="Which family fits the task",
        points=2,
        question=(
            "A hospital wants to label every word of its doctors' notes as a drug name, a "
            "dose or neither. The whole note is available before any label is given, and "
            "every word needs exactly one label. Which kind of Transformer fits best?"
        ),
        options=(
            Option(
                "a",
                "Encoder-only (BERT-like): one output per input word, each computed from the "
                "whole note, before and after the word.",
                "Right: labelling every token of a known input is what an encoder is for. "
                "Whether '5' is a dose can depend on the word after it ('5 mg'), and an "
                "encoder's tokens see both sides.",
            ),
            Option(
                "b",
                "Decoder-only (GPT-like): it predicts the label of each word from the words "
                "before it.",
                "It could be made to work, but the causal mask hides the words after each "
                "word, and they often decide the label ('5' before 'mg' is a dose). Nothing "
                "has to be generated here, so the mask only loses information.",
            ),
            Option(
                "c",
                "Encoder-decoder (like the translator): the note goes in, the sequence of "
                "labels comes out.",
                "Possible, but more than the task needs: the output has exactly one label per "
                "input word, so there is nothing to generate token by token; an encoder "
                "with a classifier on each position does it in one pass.",
            ),
            Option(
                "d",
                "Decoder-only, because only decoders output probability distributions.",
                "No: an encoder followed by a linear layer and a softmax gives a distribution "
                "over the labels at every position, just as BERT's masked-token head gives one "
                "over the vocabulary.",
            ),
        ),
        answer="a",
        hints=(
            "Is anything generated token by token, or is every output tied to one input word?",
            "Which mask lets a word's representation depend on the words after it?",
        ),
    )
)

FAMILY_FOR_GENERATION = register(
    ChoiceExercise(
        id="family-for-speech-to-text",
        chapter=CHAPTER,
        title="Speech in, text out",
        points=2,
        question=(
            "Whisper turns 30 seconds of speech into a transcript. Its input is a sequence of "
            "audio frames, its output a sequence of text tokens of a different length. Which "
            "parts of the Transformer built in this course does it use?"
        ),
        options=(
            Option(
                "a",
                "An encoder over the audio frames, and a decoder that writes the text token by "
                "token, cross-attending to the encoder's output.",
                "Right: Whisper is an encoder-decoder, the translator's architecture with "
                "audio frames (through two convolutions) in place of English tokens.",
            ),
            Option(
                "b",
                "An encoder only: one text token per audio frame.",
                "No: a transcript is much shorter than the sequence of frames, and its length "
                "is not known in advance, so it is generated token by token.",
            ),
            Option(
                "c",
                "A decoder only: the frames are turned into text tokens first and the decoder "
                "continues them.",
                "No: audio frames are continuous vectors and Whisper does not turn them into "
                "tokens; its encoder reads them directly after a small convolutional stem.",
            ),
            Option(
                "d",
                "An encoder-decoder in which the decoder has no causal mask, since the audio "
                "is complete before the transcript starts.",
                "No: the audio is complete, so the encoder needs no mask, but the transcript "
                "is still written one token at a time; the decoder keeps its causal mask.",
            ),
        ),
        answer="a",
        hints=(
            "Input and output have different lengths. Which architecture maps one to the other?",
        ),
    )
)
