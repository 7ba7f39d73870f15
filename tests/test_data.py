"""Specification of course_lib.data: the datasets the course generates itself."""

import itertools

import pytest

from course_lib.data import CONTENT_CLASSES, WORD_CLASSES, synthetic_grammar_corpus

CLASS_OF = {word: name for name, words in WORD_CLASSES.items() for word in words}


def test_the_same_seed_gives_the_same_corpus():
    assert synthetic_grammar_corpus(300, seed=7) == synthetic_grammar_corpus(300, seed=7)


def test_different_seeds_give_different_corpora():
    assert synthetic_grammar_corpus(300, seed=0) != synthetic_grammar_corpus(300, seed=1)


def test_corpus_has_the_requested_number_of_sentences_of_3_to_10_words():
    corpus = synthetic_grammar_corpus(500)
    assert len(corpus) == 500
    assert all(3 <= len(sentence) <= 10 for sentence in corpus)


def test_default_corpus_uses_every_word_of_every_class_and_no_other():
    words = {word for sentence in synthetic_grammar_corpus() for word in sentence}
    assert words == set(CLASS_OF)


def test_classes_are_disjoint_and_the_vocabulary_has_30_to_60_words():
    assert len(CLASS_OF) == sum(len(words) for words in WORD_CLASSES.values())
    assert 30 <= len(CLASS_OF) <= 60


def test_content_classes_are_classes_and_leave_out_only_function_words():
    assert set(CONTENT_CLASSES) <= set(WORD_CLASSES)
    assert set(WORD_CLASSES) - set(CONTENT_CLASSES) == {"determiner", "preposition"}


def test_every_sentence_starts_with_a_determiner_and_ends_with_a_noun_or_animal_verb():
    for sentence in synthetic_grammar_corpus(500):
        assert CLASS_OF[sentence[0]] == "determiner"
        assert CLASS_OF[sentence[-1]] in {"animal_verb", "food", "place"}


def test_word_classes_keep_to_their_slots():
    following = {}  # class -> classes of the next word
    for sentence in synthetic_grammar_corpus():
        for word, after in itertools.pairwise(sentence):
            following.setdefault(CLASS_OF[word], set()).add(CLASS_OF[after])
    assert following["colour"] == {"food"}
    assert following["size"] == {"animal", "place"}
    assert following["animal"] == {"animal_verb"}
    assert following["person"] == {"person_verb"}
    assert following["person_verb"] == {"determiner"}
    assert following["preposition"] == {"determiner"}


def test_num_sentences_must_be_positive():
    with pytest.raises(ValueError, match="num_sentences must be a positive integer, got 0"):
        synthetic_grammar_corpus(0)
