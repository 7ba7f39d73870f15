"""Datasets the course generates itself, so that every chapter runs offline and in seconds.

- :func:`synthetic_grammar_corpus` -- sentences of a small hand-written grammar whose words
  fall into clearly separated classes (:data:`WORD_CLASSES`): the corpus on which the course
  trains word embeddings and then checks that words of one class end up close together.

Every generator takes a ``seed`` and returns the same data for the same seed.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from course_lib._checks import integer, positive_int

__all__ = ["CONTENT_CLASSES", "WORD_CLASSES", "synthetic_grammar_corpus"]

WORD_CLASSES: dict[str, tuple[str, ...]] = {
    "determiner": ("the", "this", "that", "every"),
    "preposition": ("in", "near", "behind", "beside"),
    "animal": ("dog", "cat", "horse", "rabbit", "fox", "goat"),
    "person": ("teacher", "doctor", "farmer", "baker", "pilot", "child"),
    "food": ("bread", "apple", "cheese", "soup", "rice", "cake"),
    "place": ("park", "garden", "kitchen", "forest", "market", "village"),
    "animal_verb": ("sleeps", "runs", "jumps", "hides", "wanders"),
    "person_verb": ("cooks", "buys", "sells", "serves", "orders"),
    "size": ("big", "small", "tiny", "huge"),
    "colour": ("red", "green", "brown", "white"),
}
"""The words of :func:`synthetic_grammar_corpus`, by class (50 words in 10 classes)."""

CONTENT_CLASSES: tuple[str, ...] = (
    "animal",
    "person",
    "food",
    "place",
    "animal_verb",
    "person_verb",
    "size",
    "colour",
)
"""The classes of content words (nouns, verbs, adjectives); the other two are function words."""


def _noun_phrase(
    rng: random.Random, nouns: Sequence[str], adjectives: Sequence[str] = ()
) -> list[str]:
    """``determiner [adjective] noun``, with an adjective (if any are given) 40% of the time."""
    phrase = [rng.choice(WORD_CLASSES["determiner"])]
    if adjectives and rng.random() < 0.4:
        phrase.append(rng.choice(adjectives))
    phrase.append(rng.choice(nouns))
    return phrase


def _sentence(rng: random.Random) -> list[str]:
    """One sentence of the grammar (see :func:`synthetic_grammar_corpus`)."""
    words = WORD_CLASSES
    if rng.random() < 0.5:
        sentence = _noun_phrase(rng, words["animal"], words["size"])
        sentence.append(rng.choice(words["animal_verb"]))
    else:
        sentence = _noun_phrase(rng, words["person"])
        sentence.append(rng.choice(words["person_verb"]))
        sentence += _noun_phrase(rng, words["food"], words["colour"])
    if rng.random() < 0.5:
        sentence.append(rng.choice(words["preposition"]))
        sentence += _noun_phrase(rng, words["place"], words["size"])
    return sentence


def synthetic_grammar_corpus(num_sentences: int = 2000, seed: int = 0) -> list[list[str]]:
    """Sentences of a tiny English-like grammar, as lists of lower-case words.

    Two sentence patterns, each optionally followed by a place (``[...]`` is optional, every
    choice is uniform within a class)::

        determiner [size] animal animal_verb              [preposition determiner [size] place]
        determiner person person_verb determiner [colour] food  [preposition ...same...]

    for example ``the small fox hides near this forest`` or ``every baker sells the red cake``.
    Words of one class are interchangeable, so they occur in exactly the same contexts: a good
    word embedding puts them close together. Size adjectives go with animals and places,
    colour adjectives with foods, so the two kinds of adjective have different contexts too.

    Args:
        num_sentences: how many sentences, a positive integer.
        seed: seed of the random choices; the same seed always gives the same corpus.

    Returns:
        A list of ``num_sentences`` sentences, each a list of 3 to 10 words from
        :data:`WORD_CLASSES`.
    """
    num_sentences = positive_int("num_sentences", num_sentences)
    rng = random.Random(integer("seed", seed))
    return [_sentence(rng) for _ in range(num_sentences)]
