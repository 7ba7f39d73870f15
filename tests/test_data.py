"""Specification of course_lib.data: the datasets the course generates itself."""

import itertools

import pytest

from course_lib.data import (
    CONTENT_CLASSES,
    MAX_NUMBER,
    WORD_CLASSES,
    english_number_name,
    is_grammatical,
    number_alignment,
    number_name,
    number_pairs,
    number_split,
    number_tokens,
    number_vocabularies,
    spanish_number_name,
    synthetic_grammar_corpus,
    tokens_to_name,
)

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


# ----------------------------------------------------------------------------- number names

TRICKY_NUMBERS = {
    0: ("zero", "cero"),
    7: ("seven", "siete"),
    11: ("eleven", "once"),
    15: ("fifteen", "quince"),
    16: ("sixteen", "dieciséis"),
    19: ("nineteen", "diecinueve"),
    20: ("twenty", "veinte"),
    21: ("twenty-one", "veintiuno"),
    22: ("twenty-two", "veintidós"),
    23: ("twenty-three", "veintitrés"),
    26: ("twenty-six", "veintiséis"),
    30: ("thirty", "treinta"),
    31: ("thirty-one", "treinta y uno"),
    100: ("one hundred", "cien"),
    101: ("one hundred one", "ciento uno"),
    116: ("one hundred sixteen", "ciento dieciséis"),
    200: ("two hundred", "doscientos"),
    221: ("two hundred twenty-one", "doscientos veintiuno"),
    500: ("five hundred", "quinientos"),
    555: ("five hundred fifty-five", "quinientos cincuenta y cinco"),
    700: ("seven hundred", "setecientos"),
    900: ("nine hundred", "novecientos"),
    1000: ("one thousand", "mil"),
    1001: ("one thousand one", "mil uno"),
    1100: ("one thousand one hundred", "mil cien"),
    1121: ("one thousand one hundred twenty-one", "mil ciento veintiuno"),
    2000: ("two thousand", "dos mil"),
    2501: ("two thousand five hundred one", "dos mil quinientos uno"),
    7008: ("seven thousand eight", "siete mil ocho"),
    9999: ("nine thousand nine hundred ninety-nine", "nueve mil novecientos noventa y nueve"),
}


@pytest.mark.parametrize("number", TRICKY_NUMBERS)
def test_english_names_of_tricky_numbers(number):
    assert english_number_name(number) == TRICKY_NUMBERS[number][0]


@pytest.mark.parametrize("number", TRICKY_NUMBERS)
def test_spanish_names_of_tricky_numbers(number):
    assert spanish_number_name(number) == TRICKY_NUMBERS[number][1]


def test_every_number_has_its_own_name_in_both_languages():
    for name in (english_number_name, spanish_number_name):
        names = {name(n) for n in range(MAX_NUMBER + 1)}
        assert len(names) == MAX_NUMBER + 1


def test_names_are_lower_case_words_separated_by_single_spaces():
    for n in range(MAX_NUMBER + 1):
        for name in (english_number_name(n), spanish_number_name(n)):
            assert name == name.strip() and "  " not in name and name == name.lower()


def test_spanish_never_says_un_mil_or_ciento_alone():
    names = [spanish_number_name(n) for n in range(MAX_NUMBER + 1)]
    assert not any(name.startswith("un mil") or "uno mil" in name for name in names)
    assert not any(name.endswith("ciento") for name in names)
    assert sum(name.endswith("cien") for name in names) == 10  # 100, 1100, ..., 9100


@pytest.mark.parametrize("name", [english_number_name, spanish_number_name])
@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (-1, ValueError, "between 0 and 9999, got -1"),
        (10_000, ValueError, "between 0 and 9999, got 10000"),
        (2.0, TypeError, "must be an integer"),
        (True, TypeError, "must be an integer"),
    ],
)
def test_numbers_outside_the_range_are_refused(name, value, error, message):
    with pytest.raises(error, match=message):
        name(value)


def test_the_split_is_disjoint_and_covers_every_number():
    split = number_split(test_fraction=0.1, validation_fraction=0.05, seed=0)
    train, validation, test = (set(part) for part in split)
    assert not train & validation and not train & test and not validation & test
    assert train | validation | test == set(range(MAX_NUMBER + 1))
    assert (len(test), len(validation)) == (1000, 500)
    assert all(list(part) == sorted(part) for part in split)


def test_the_split_depends_on_the_seed_only():
    assert number_split(seed=3) == number_split(seed=3)
    assert number_split(seed=3).test != number_split(seed=4).test


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"test_fraction": 1.0}, r"test_fraction must be in \[0, 1\)"),
        ({"validation_fraction": -0.1}, r"validation_fraction must be in \[0, 1\)"),
        ({"test_fraction": 0.6, "validation_fraction": 0.5}, "must leave numbers to train on"),
    ],
)
def test_a_split_that_leaves_nothing_to_train_on_is_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        number_split(**kwargs)


# ----------------------------------------------------------------------------- the translation task


def test_an_english_hyphen_is_a_token_of_its_own_and_names_come_back_whole():
    assert number_tokens("two hundred twenty-one") == ["two", "hundred", "twenty", "-", "one"]
    assert number_tokens("doscientos veintiuno") == ["doscientos", "veintiuno"]
    for n in range(MAX_NUMBER + 1):
        for name in (english_number_name(n), spanish_number_name(n)):
            assert tokens_to_name(number_tokens(name)) == name


def test_number_name_chooses_the_language():
    assert number_name(21, "english") == "twenty-one"
    assert number_name(21, "spanish") == "veintiuno"
    with pytest.raises(ValueError, match="language must be one of"):
        number_name(21, "french")


def test_the_vocabularies_of_the_training_numbers_hold_every_word_of_the_held_out_ones():
    split = number_split()
    source, target = number_vocabularies(split.train)
    assert (len(source), len(target)) == (4 + 31, 4 + 49)  # special tokens + words
    for n in split.test:
        assert all(t in source for t in number_tokens(english_number_name(n)))
        assert all(t in target for t in number_tokens(spanish_number_name(n)))


def test_number_pairs_are_padded_ids_with_bos_and_eos_around_the_target_only():
    source, target = number_vocabularies(range(MAX_NUMBER + 1))
    src_ids, tgt_ids = number_pairs([21, 100], source, target)
    assert src_ids.shape == (2, 3) and tgt_ids.shape == (2, 3)
    assert source.decode(src_ids[0]) == ["twenty", "-", "one"]
    assert source.decode(src_ids[1]) == ["one", "hundred"] and src_ids[1, 2] == source.pad_id
    assert tgt_ids[:, 0].tolist() == [target.bos_id] * 2
    assert target.decode(tgt_ids[0], skip_special=False) == ["<bos>", "veintiuno", "<eos>"]
    assert target.decode(tgt_ids[1], skip_special=False) == ["<bos>", "cien", "<eos>"]


def test_the_longest_names_fit_the_translator():
    source, target = number_vocabularies(range(MAX_NUMBER + 1))
    src_ids, tgt_ids = number_pairs(range(MAX_NUMBER + 1), source, target)
    assert src_ids.size(1) == 7  # "seven thousand seven hundred seventy - seven"
    assert tgt_ids.size(1) == 8  # <bos> + 6 words + <eos>


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: number_tokens(21), TypeError, "name must be a string"),
        (lambda: tokens_to_name("twenty one"), TypeError, "got the string"),
        (lambda: number_vocabularies([]), ValueError, "at least one number"),
        (lambda: number_vocabularies([10_000]), ValueError, "between 0 and 9999"),
    ],
)
def test_bad_input_to_the_corpus_helpers_is_refused(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_every_generated_sentence_is_grammatical():
    assert all(is_grammatical(s) for s in synthetic_grammar_corpus(3000, seed=5))


@pytest.mark.parametrize(
    "sentence",
    [
        "the fox",  # no verb
        "the fox hides near",  # a preposition without a place
        "the red fox hides",  # a colour before an animal
        "the baker sells",  # no food
        "the baker sells the cake in the park the",  # something after the end
        "baker sells the cake",  # no determiner
        "the big baker sells the cake",  # a size before a person
        "the fox sells the cake",  # an animal with a person's verb
        "",
    ],
)
def test_sentences_outside_the_grammar_are_recognised(sentence):
    assert not is_grammatical(sentence.split())


def test_is_grammatical_takes_a_list_of_words():
    assert is_grammatical("the small fox hides near this big park".split())
    with pytest.raises(TypeError, match="list of words"):
        is_grammatical("the fox hides")


@pytest.mark.parametrize(
    ("number", "alignment"),
    [
        (0, [{0}]),
        (16, [{0}]),
        (21, [{0, 1, 2}]),  # twenty - one -> veintiuno
        (31, [{0}, {1}, {2}]),  # thirty - one -> treinta y uno
        (100, [{0, 1}]),  # one hundred -> cien
        (1000, [{0, 1}]),  # one thousand -> mil
        (2221, [{0}, {1}, {2, 3}, {4, 5, 6}]),
        (7008, [{0}, {1}, {2}]),
        (9990, [{0}, {1}, {2, 3}, {4}]),
    ],
)
def test_the_word_alignment_of_tricky_numbers(number, alignment):
    assert number_alignment(number) == alignment


def test_every_spanish_token_is_aligned_and_every_english_token_used_once():
    for n in range(MAX_NUMBER + 1):
        alignment = number_alignment(n)
        assert len(alignment) == len(number_tokens(spanish_number_name(n)))
        used = sorted(i for english in alignment for i in english)
        assert used == list(range(len(number_tokens(english_number_name(n)))))
