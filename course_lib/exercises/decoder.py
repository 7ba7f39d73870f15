"""Exercises of the chapter "The decoder" (``chapters/decoder.ipynb``)."""

from __future__ import annotations

from course_lib.exercises._registry import ChoiceExercise, Option, register

CHAPTER = "decoder"

TEACHER_FORCING = register(
    ChoiceExercise(
        id="teacher-forcing",
        chapter=CHAPTER,
        title="What the decoder reads in training",
        points=2,
        question=(
            "A translation model is trained on the pair 'the cat sat' -> 'le chat est assis'. "
            "With teacher forcing, what does the decoder read, what must it predict, and how "
            "many decoder passes does this one pair take?"
        ),
        options=(
            Option(
                "a",
                "It reads '<bos> le chat est assis' and must predict 'le chat est assis <eos>', "
                "position by position; one pass computes all five predictions.",
                "Right: the target shifted right by one is the input, the target itself (with "
                "<eos>) the labels. The causal mask keeps each position from seeing the token "
                "it predicts, so a single pass gives every position what generation would.",
            ),
            Option(
                "b",
                "It reads 'le chat est assis <eos>' and must predict the same five tokens; one "
                "pass.",
                "No: position t would read the very token it must predict (the causal mask "
                "lets a position see itself), and copying would be enough to get it right.",
            ),
            Option(
                "c",
                "It reads '<bos>' and then its own predictions, one pass per token, and must "
                "predict 'le chat est assis <eos>'.",
                "No: that is generation. Teacher forcing feeds the correct previous tokens, "
                "not the model's own guesses, and needs no loop.",
            ),
            Option(
                "d",
                "It reads '<bos> le chat est assis' and must predict 'le chat est assis <eos>'; "
                "five passes, one per position, each with a longer prefix.",
                "The inputs and labels are right, and the five passes would give the same "
                "numbers, but they are not needed: with the causal mask one pass computes all "
                "positions at once. That is what makes training parallel.",
            ),
        ),
        answer="a",
        hints=(
            "At position t the decoder has to predict the token at t + 1 of the target, from "
            "the tokens before it.",
            "Compare the logits of one pass over the whole target with those of passes over "
            "its prefixes, as the chapter does.",
        ),
    )
)
