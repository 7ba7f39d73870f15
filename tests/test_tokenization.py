"""Specification of course_lib.tokenization: byte-level BPE, checked against Hugging Face.

The oracle is Hugging Face ``tokenizers`` (pinned in requirements.txt, a test dependency only)
in the configuration the module docstring names.
"""

import json
import random
import unicodedata

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from course_lib.data import english_number_name, spanish_number_name
from course_lib.tokenization import (
    SPECIAL_TOKENS,
    BytePairEncoding,
    TradeoffRow,
    byte_alphabet,
    bytes_to_symbols,
    split_words,
    symbols_to_bytes,
    train_bpe,
    vocabulary_tradeoff,
)

BASE = len(SPECIAL_TOKENS) + 256  # the vocabulary before any merge

NUMBER_NAMES = [english_number_name(n) for n in range(10_000)] + [
    spanish_number_name(n) for n in range(10_000)
]

ENGLISH = """\
The Transformer reads a sentence all at once. Each word looks at every other word, and
attention decides how much of each it takes. It doesn't need recurrence: positions are
added to the embeddings instead. We'll train one that translates numbers, and we've
kept the data small so that it runs in seconds -- 42 of them, say, on a laptop's CPU.
""".splitlines()

# "ab" and "cd" occur equally often, so do "xy" and "yz": the ids have to decide.
TIES = ["ab cd", "cd ab", "xyz", "zyx"] * 3 + ["ab ab", "cd cd"]


def hugging_face_bpe(texts, vocab_size, special_tokens=SPECIAL_TOKENS, min_frequency=0):
    """Hugging Face tokenizers trained with the settings course_lib reproduces."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=min_frequency,
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


def hugging_face_merges(tokenizer) -> list[tuple[str, str]]:
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    return [tuple(merge.split(" ")) if isinstance(merge, str) else tuple(merge) for merge in merges]


def random_text(rng: random.Random, length: int) -> str:
    """Any text: letters of many scripts, accents, emoji, digits, white space, control chars."""
    pools = [
        "abcdefghijklmnopqrstuvwxyz ABCXYZ",
        "áéíóúñüçÀÉ",  # precomposed accents
        "e\u0301a\u0308",  # combining accents
        "  \t\n\r\n\x0b\x0c\x85\u00a0\u2028\u3000",  # white space runs
        "\x00\x01\x1b\x1c\x1f\x7f\u200b\ufeff",  # control and invisible characters
        "0123456789٣४",
        "'s're'll'd.,;:!?-()\"",
        "😀🎉👍🏽🇪🇸👩‍💻",  # emoji, some of several code points
        "日本語中文한국어Ελληνικάкириллица",
        "<pad><bos><eos>",
    ]
    chars = []
    while len(chars) < length:
        chars.append(rng.choice(rng.choice(pools)))
        if rng.random() < 0.02:  # now and then any assigned code point
            char = chr(rng.randrange(0x110000))
            if unicodedata.category(char) not in ("Cn", "Cs"):
                chars.append(char)
    return "".join(chars)


@pytest.fixture(scope="module")
def numbers_bpe() -> BytePairEncoding:
    return BytePairEncoding.train(NUMBER_NAMES, vocab_size=400)


# --- bytes as characters -------------------------------------------------------------------


def test_the_byte_alphabet_has_256_distinct_printable_characters_in_code_point_order():
    alphabet = byte_alphabet()
    assert len(set(alphabet)) == 256
    assert alphabet == sorted(alphabet)
    assert all(char.isprintable() and not char.isspace() for char in alphabet)


def test_printable_bytes_stand_for_themselves_and_the_space_is_written_G_dot():
    assert bytes_to_symbols(b"Hi!") == "Hi!"
    assert bytes_to_symbols(b" \n") == "ĠĊ"


def test_every_byte_goes_to_a_symbol_and_back():
    every_byte = bytes(range(256))
    assert symbols_to_bytes(bytes_to_symbols(every_byte)) == every_byte


# --- pre-tokenization ----------------------------------------------------------------------


def test_words_are_letters_digits_or_symbols_with_at_most_one_space_in_front():
    assert split_words("It's 2 o'clock,  see?") == [
        "It",
        "'s",
        " 2",
        " o",
        "'",
        "clock",
        ",",
        " ",
        " see",
        "?",
    ]


def test_a_run_of_white_space_leaves_its_last_space_to_the_next_word():
    assert split_words("a   b\n\n") == ["a", "  ", " b", "\n\n"]


def test_the_words_join_back_into_the_text():
    rng = random.Random(0)
    for _ in range(200):
        text = random_text(rng, rng.randrange(60))
        assert "".join(split_words(text)) == text


def test_words_are_hugging_faces_for_every_assigned_character():
    """Every code point Python's unicodedata knows, between spaces, letters, digits, 's."""
    rng = random.Random(1)
    splitter = pre_tokenizers.ByteLevel(add_prefix_space=False)
    chars = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) not in ("Cn", "Cs")]
    contexts = ["", "", " ", "  ", "a", "1", "'s", "\n", " \t", "\u00a0"]
    for start in range(0, len(chars), 5000):
        text = "".join(char + rng.choice(contexts) for char in chars[start : start + 5000])
        ours = [bytes_to_symbols(word.encode()) for word in split_words(text)]
        assert ours == [word for word, _ in splitter.pre_tokenize_str(text)]


# --- round trip, no unknown token ----------------------------------------------------------


def test_decode_of_encode_gives_back_any_text(numbers_bpe):
    rng = random.Random(2)
    english = BytePairEncoding.train(ENGLISH, vocab_size=400)
    for _ in range(300):
        text = random_text(rng, rng.randrange(80))
        assert numbers_bpe.decode(numbers_bpe.encode(text)) == text
        assert english.decode(english.encode(text)) == text


def test_the_empty_text_has_no_tokens(numbers_bpe):
    assert numbers_bpe.encode("") == []
    assert numbers_bpe.decode([]) == ""


def test_there_is_no_unknown_token_unseen_characters_are_spelled_in_bytes(numbers_bpe):
    assert "<unk>" not in numbers_bpe.vocab
    text = "🎉 北京"  # nothing like it in the number names
    assert numbers_bpe.tokens(text) == [bytes_to_symbols(bytes([b])) for b in text.encode()]
    assert len(numbers_bpe.encode(text)) == len(text.encode())


def test_a_tokenizer_without_merges_has_one_token_per_byte():
    bpe = BytePairEncoding.train(["hello"], vocab_size=BASE)
    assert bpe.merges == []
    assert len(bpe) == BASE
    assert len(bpe.encode("héllo")) == len("héllo".encode())


def test_tokens_are_the_vocabulary_entries_of_the_ids(numbers_bpe):
    text = "two thousand veintitrés"
    ids = [numbers_bpe.vocab[token] for token in numbers_bpe.tokens(text)]
    assert ids == numbers_bpe.encode(text)


def test_a_character_cut_in_the_middle_of_its_bytes_decodes_as_the_replacement_character():
    bpe = BytePairEncoding.train(["x"], vocab_size=BASE)
    ids = bpe.encode("é")  # two bytes, two tokens
    assert len(ids) == 2
    assert bpe.decode(ids[:1]) == "\ufffd"


# --- special tokens -------------------------------------------------------------------------


def test_special_tokens_get_the_first_ids_then_the_byte_alphabet_in_order(numbers_bpe):
    assert (numbers_bpe.pad_id, numbers_bpe.bos_id, numbers_bpe.eos_id) == (0, 1, 2)
    tokens = sorted(numbers_bpe.vocab, key=numbers_bpe.vocab.get)
    assert tokens[:BASE] == ["<pad>", "<bos>", "<eos>", *byte_alphabet()]


def test_other_special_tokens_come_first_in_the_order_given():
    bpe = BytePairEncoding.train(["a b"], vocab_size=BASE + 1, special_tokens=["[CLS]", "<pad>"])
    assert bpe.special_tokens == ("[CLS]", "<pad>")
    assert (bpe.token_to_id("[CLS]"), bpe.pad_id) == (0, 1)
    with pytest.raises(KeyError, match="<eos> is not one of this tokenizer's special tokens"):
        _ = bpe.eos_id


def test_a_special_token_in_the_text_is_one_token_never_split(numbers_bpe):
    ids = numbers_bpe.encode("one<eos>two<pad>")
    assert numbers_bpe.tokens("one<eos>two<pad>") == ["one", "<eos>", "two", "<pad>"]
    assert ids[1] == numbers_bpe.eos_id and ids[3] == numbers_bpe.pad_id


def test_add_bos_and_add_eos_frame_the_ids(numbers_bpe):
    ids = numbers_bpe.encode("one", add_bos=True, add_eos=True)
    assert ids == [numbers_bpe.bos_id, *numbers_bpe.encode("one"), numbers_bpe.eos_id]


def test_decode_writes_special_tokens_unless_asked_to_skip_them(numbers_bpe):
    ids = numbers_bpe.encode("one", add_bos=True, add_eos=True)
    assert numbers_bpe.decode(ids) == "<bos>one<eos>"
    assert numbers_bpe.decode(ids, skip_special=True) == "one"


def test_special_tokens_in_the_training_texts_are_cut_out_never_merged():
    with_specials = BytePairEncoding.train(["low<pad>er<eos>"] * 5, vocab_size=BASE + 20)
    without = BytePairEncoding.train(["low", "er"] * 5, vocab_size=BASE + 20)
    assert with_specials.merges == without.merges
    assert all("<" not in left + right for left, right in with_specials.merges)


# --- training -------------------------------------------------------------------------------


def test_the_most_frequent_pair_is_merged_first():
    bpe = BytePairEncoding.train(["ab"] * 3 + ["cd"] * 2 + ["ef"], vocab_size=BASE + 3)
    assert bpe.merges == [("a", "b"), ("c", "d"), ("e", "f")]


def test_equal_counts_go_to_the_pair_with_the_smaller_ids():
    bpe = BytePairEncoding.train(["yz", "ab", "cd"], vocab_size=BASE + 3)
    assert bpe.merges == [("a", "b"), ("c", "d"), ("y", "z")]


def test_merges_of_a_small_corpus_worked_out_by_hand():
    """Words: 'low' x10, 'Ġlower' x10, 'Ġlowest' x10.

    (l, o) and (o, w) occur 30 times: l has the smaller id. Then (lo, w): 30. Then (Ġ, low)
    and (low, e) 20 times each: Ġ (id 223) is smaller than low (id 260). Then (Ġlow, e): 20.
    """
    bpe = BytePairEncoding.train(["low lower lowest"] * 10, vocab_size=BASE + 4)
    assert bpe.merges == [("l", "o"), ("lo", "w"), ("Ġ", "low"), ("Ġlow", "e")]
    assert [bpe.vocab[token] for token in ("lo", "low", "Ġlow", "Ġlowe")] == [259, 260, 261, 262]
    assert bpe.tokens("lowly lowers") == ["low", "l", "y", "Ġlowe", "r", "s"]


def test_training_stops_at_vocab_size(numbers_bpe):
    assert len(numbers_bpe) == 400
    assert len(numbers_bpe.merges) == 400 - BASE


def test_training_stops_early_when_every_word_is_one_token():
    bpe = BytePairEncoding.train(["abc abc"], vocab_size=1000)
    assert bpe.merges == [("a", "b"), ("ab", "c"), ("Ġ", "abc")]
    assert len(bpe) == BASE + 3


def test_min_frequency_stops_at_rarer_pairs():
    bpe = BytePairEncoding.train(["ab"] * 3 + ["cd"], vocab_size=1000, min_frequency=2)
    assert bpe.merges == [("a", "b")]


def test_train_bpe_is_bytepairencoding_train():
    assert train_bpe(TIES, 280).merges == BytePairEncoding.train(TIES, 280).merges


def test_training_does_not_depend_on_the_order_of_the_texts():
    forwards = BytePairEncoding.train(NUMBER_NAMES, 400)
    backwards = BytePairEncoding.train(NUMBER_NAMES[::-1], 400)
    assert backwards.vocab == forwards.vocab


# --- against Hugging Face tokenizers --------------------------------------------------------


def assert_same_as_hugging_face(texts, vocab_size, held_out, **options):
    ours = BytePairEncoding.train(texts, vocab_size, **options)
    theirs = hugging_face_bpe(texts, vocab_size, **options)
    assert ours.merges == hugging_face_merges(theirs)
    assert ours.vocab == theirs.get_vocab()
    for text in held_out:
        ids = ours.encode(text)
        assert ids == theirs.encode(text).ids, text
        assert ours.decode(ids) == theirs.decode(ids, skip_special_tokens=False) == text


@pytest.mark.parametrize("vocab_size", [300, 400, 500, 600])  # 600: the names run out first
def test_same_as_hugging_face_on_the_number_names(vocab_size):
    held_out = ["nine thousand and one", "veintidós mil", "Quarante-deux", "Ñandú 7 días"]
    assert_same_as_hugging_face(NUMBER_NAMES, vocab_size, held_out)


@pytest.mark.parametrize("vocab_size", [280, 350, 1000])
def test_same_as_hugging_face_on_english_text(vocab_size):
    held_out = ["Attention isn't recurrence; it's 2x faster.", "  two\tspaces\n\nand lines "]
    assert_same_as_hugging_face(ENGLISH, vocab_size, held_out)


def test_same_as_hugging_face_when_counts_tie():
    assert_same_as_hugging_face(TIES, 270, ["abcdxyz zyx", "ab<eos>cd"])


def test_same_as_hugging_face_with_min_frequency():
    assert_same_as_hugging_face(ENGLISH, 1000, ENGLISH, min_frequency=3)


def test_same_as_hugging_face_with_other_special_tokens():
    specials = ["<s>", "</s>", "<mask>"]
    assert_same_as_hugging_face(ENGLISH, 320, ["a <mask> b</s>"], special_tokens=specials)


def test_same_as_hugging_face_on_random_text():
    rng = random.Random(3)
    texts = [random_text(rng, 60).replace("<", "[") for _ in range(300)]
    held_out = [random_text(rng, 60) for _ in range(50)]
    assert_same_as_hugging_face(texts, 600, held_out)


# --- the vocabulary-size trade-off ----------------------------------------------------------


def test_a_bigger_vocabulary_gives_fewer_tokens_and_a_bigger_table():
    rows = vocabulary_tradeoff(NUMBER_NAMES, [BASE, 300, 400, 500], d_model=64)
    assert all(isinstance(row, TradeoffRow) for row in rows)
    assert [row.vocab_size for row in rows] == [BASE, 300, 400, 500]
    tokens = [row.total_tokens for row in rows]
    assert tokens == sorted(tokens, reverse=True) and tokens[0] > tokens[-1]
    sizes = [BASE, 300, 400, 500]
    assert [row.embedding_parameters for row in rows] == [size * 64 for size in sizes]


def test_the_tradeoff_measures_the_tokenizers_that_training_gives():
    held_out = ["one hundred", "ciento uno", "🎉"]
    (row,) = vocabulary_tradeoff(NUMBER_NAMES, [350], eval_texts=held_out)
    bpe = BytePairEncoding.train(NUMBER_NAMES, 350)
    total = sum(len(bpe.encode(text)) for text in held_out)
    assert (row.actual_size, row.num_merges, row.total_tokens) == (350, 350 - BASE, total)
    assert row.tokens_per_text == total / 3
    assert row.bytes_per_token == sum(len(text.encode()) for text in held_out) / total


def test_one_training_run_holds_every_smaller_vocabulary():
    rows = vocabulary_tradeoff(ENGLISH, [1000, 300, 280])
    for row in rows:
        bpe = BytePairEncoding.train(ENGLISH, row.vocab_size)
        assert row.total_tokens == sum(len(bpe.encode(text)) for text in ENGLISH)
        assert row.actual_size == len(bpe)


def test_a_corpus_that_runs_out_of_pairs_reports_its_actual_size():
    (row,) = vocabulary_tradeoff(["abc"], [1000])
    assert (row.vocab_size, row.actual_size, row.total_tokens) == (1000, BASE + 2, 1)


# --- errors ---------------------------------------------------------------------------------


def test_vocab_size_below_the_specials_and_the_byte_alphabet_raises():
    with pytest.raises(ValueError, match=r"vocab_size must be at least 259.*got 258"):
        BytePairEncoding.train(["a"], vocab_size=258)


def test_vocab_size_must_be_an_integer():
    with pytest.raises(TypeError, match="vocab_size must be an integer"):
        BytePairEncoding.train(["a"], vocab_size=300.0)


def test_a_string_instead_of_a_list_of_texts_raises():
    with pytest.raises(TypeError, match=r"texts must be an iterable of strings.*put it in a list"):
        BytePairEncoding.train("one two three", vocab_size=300)


def test_a_text_that_is_not_a_string_raises():
    with pytest.raises(TypeError, match="text 1 must be a str, got 2 of type int"):
        BytePairEncoding.train(["one", 2], vocab_size=300)
    with pytest.raises(TypeError, match="text must be a str, got b'one'"):
        BytePairEncoding.train(["one"], vocab_size=300).encode(b"one")


def test_a_lone_surrogate_is_not_text():
    with pytest.raises(ValueError, match="lone surrogate '\\\\ud800' at index 1"):
        BytePairEncoding.train(["x"], vocab_size=BASE).encode("a\ud800")


def test_special_tokens_must_be_distinct_and_non_empty():
    with pytest.raises(ValueError, match="special_tokens must be distinct"):
        BytePairEncoding.train(["a"], 300, special_tokens=["<pad>", "<pad>"])
    with pytest.raises(ValueError, match="non-empty strings, got ''"):
        BytePairEncoding.train(["a"], 300, special_tokens=["<pad>", ""])


def test_decode_refuses_ids_out_of_range_and_non_integers(numbers_bpe):
    with pytest.raises(IndexError, match=r"id 400 is outside the vocabulary's range \[0, 400\)"):
        numbers_bpe.decode([5, 400])
    with pytest.raises(IndexError, match="id -1 is outside"):
        numbers_bpe.decode([-1])
    with pytest.raises(TypeError, match="id must be an integer"):
        numbers_bpe.decode([1.0])
    with pytest.raises(TypeError, match="ids must be a sequence of integers, got the string"):
        numbers_bpe.decode("12")


def test_tradeoff_needs_sizes_and_texts():
    with pytest.raises(ValueError, match="vocab_sizes must hold at least one size"):
        vocabulary_tradeoff(["a"], [])
    with pytest.raises(ValueError, match="at least one text to measure"):
        vocabulary_tradeoff(["a"], [300], eval_texts=[])
