"""Specification of course_lib.vocab: the token <-> id table and batch padding."""

import pytest
import torch

from course_lib.vocab import SPECIAL_TOKENS, Vocabulary, pad_batch

CORPUS = [["b", "a", "c"], ["c", "a"], ["d"], ["a"]]  # a: 3, c: 2, b: 1, d: 1


@pytest.fixture
def vocab() -> Vocabulary:
    return Vocabulary.from_corpus(CORPUS)


# --- special tokens -------------------------------------------------------------------------


def test_special_tokens_come_first_at_ids_0_to_3(vocab):
    assert vocab.tokens[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"] == list(SPECIAL_TOKENS)
    assert (vocab.pad_id, vocab.bos_id, vocab.eos_id, vocab.unk_id) == (0, 1, 2, 3)


def test_an_empty_vocabulary_holds_only_the_special_tokens():
    assert Vocabulary().tokens == list(SPECIAL_TOKENS)


def test_special_tokens_in_the_corpus_are_not_added_twice():
    vocab = Vocabulary.from_corpus([["<unk>", "x", "<pad>"]])
    assert vocab.tokens == [*SPECIAL_TOKENS, "x"]


# --- order ----------------------------------------------------------------------------------


def test_tokens_are_ordered_by_count_then_alphabetically(vocab):
    assert vocab.tokens[4:] == ["a", "c", "b", "d"]


def test_order_does_not_depend_on_the_order_of_the_sentences():
    assert Vocabulary.from_corpus(CORPUS[::-1]).tokens == Vocabulary.from_corpus(CORPUS).tokens


def test_min_count_drops_rare_tokens():
    assert Vocabulary.from_corpus(CORPUS, min_count=2).tokens[4:] == ["a", "c"]


def test_max_size_counts_the_special_tokens_and_keeps_the_most_frequent():
    vocab = Vocabulary.from_corpus(CORPUS, max_size=6)
    assert len(vocab) == 6
    assert vocab.tokens[4:] == ["a", "c"]


def test_max_size_below_the_number_of_special_tokens_raises():
    with pytest.raises(ValueError, match=r"max_size counts the 4 special tokens.*got 3"):
        Vocabulary.from_corpus(CORPUS, max_size=3)


def test_min_count_must_be_positive():
    with pytest.raises(ValueError, match="min_count must be a positive integer, got 0"):
        Vocabulary.from_corpus(CORPUS, min_count=0)


def test_a_sentence_given_as_a_string_raises_type_error():
    with pytest.raises(TypeError, match="got the string 'the cat'; split it"):
        Vocabulary.from_corpus(["the cat"])


def test_constructor_rejects_duplicate_and_special_tokens():
    with pytest.raises(ValueError, match="duplicate token 'a'"):
        Vocabulary(["a", "b", "a"])
    with pytest.raises(ValueError, match="special token '<eos>'"):
        Vocabulary(["a", "<eos>"])


# --- lookups --------------------------------------------------------------------------------


def test_len_contains_and_both_lookups(vocab):
    assert len(vocab) == 8
    assert "c" in vocab and "<pad>" in vocab and "z" not in vocab
    assert vocab.token_to_id("c") == 5
    assert vocab.id_to_token(5) == "c"


def test_tokens_list_is_a_copy(vocab):
    vocab.tokens.append("z")
    assert len(vocab.tokens) == 8


def test_token_to_id_of_an_unknown_token_raises_key_error(vocab):
    with pytest.raises(KeyError, match="'z' is not in the vocabulary"):
        vocab.token_to_id("z")


@pytest.mark.parametrize("bad", [8, 100, -1])
def test_id_to_token_outside_the_range_raises_index_error(vocab, bad):
    with pytest.raises(IndexError, match=rf"id {bad} is outside the vocabulary's range \[0, 8\)"):
        vocab.id_to_token(bad)


def test_repr_names_the_size_and_first_tokens(vocab):
    assert repr(vocab) == "Vocabulary(size=8, tokens=['a', 'c', 'b', 'd'])"


# --- encode and decode ----------------------------------------------------------------------


def test_encode_maps_tokens_to_their_ids(vocab):
    assert vocab.encode(["a", "b", "c"]) == [4, 6, 5]


def test_encode_maps_unknown_tokens_to_unk(vocab):
    assert vocab.encode(["a", "zebra"]) == [4, vocab.unk_id]


def test_encode_adds_bos_and_eos_on_request(vocab):
    assert vocab.encode(["d"], add_bos=True, add_eos=True) == [1, 7, 2]
    assert vocab.encode(["d"], add_eos=True) == [7, 2]


def test_encode_refuses_a_string(vocab):
    with pytest.raises(TypeError, match="split it into tokens first"):
        vocab.encode("a c")


def test_decode_inverts_encode(vocab):
    sentence = ["c", "a", "d", "b"]
    assert vocab.decode(vocab.encode(sentence, add_bos=True, add_eos=True)) == sentence


def test_decode_skips_pad_bos_eos_but_keeps_unk(vocab):
    ids = [1, 4, 3, 2, 0, 0]
    assert vocab.decode(ids) == ["a", "<unk>"]
    everything = ["<bos>", "a", "<unk>", "<eos>", "<pad>", "<pad>"]
    assert vocab.decode(ids, skip_special=False) == everything


def test_decode_accepts_a_1d_tensor(vocab):
    assert vocab.decode(torch.tensor([4, 5])) == ["a", "c"]


@pytest.mark.parametrize("bad", [8, -1])
def test_decode_of_an_out_of_range_id_raises_index_error_naming_it(vocab, bad):
    with pytest.raises(IndexError, match=rf"id {bad} is outside"):
        vocab.decode([4, bad])


# --- pad_batch ------------------------------------------------------------------------------


def test_pad_batch_pads_on_the_right_to_the_longest_sequence():
    ids, mask = pad_batch([[5, 6, 7], [8], [9, 10]])
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0], [9, 10, 0]]
    assert mask.tolist() == [[True, True, True], [True, False, False], [True, True, False]]


def test_pad_batch_returns_long_ids_and_bool_mask_of_shape_batch_seq():
    ids, mask = pad_batch([[5, 6, 7, 8], [9]])
    assert ids.shape == mask.shape == (2, 4)
    assert ids.dtype == torch.long and mask.dtype == torch.bool


def test_pad_batch_writes_the_given_pad_id():
    ids, mask = pad_batch([[5], [6, 7]], pad_id=-1)
    assert ids.tolist() == [[5, -1], [6, 7]]
    assert mask.tolist() == [[True, False], [True, True]]


def test_pad_batch_accepts_tensors_and_empty_sequences():
    ids, mask = pad_batch([torch.tensor([5, 6]), []])
    assert ids.tolist() == [[5, 6], [0, 0]]
    assert mask.tolist() == [[True, True], [False, False]]


def test_pad_batch_of_an_empty_batch_raises():
    with pytest.raises(ValueError, match="at least one sequence, got an empty batch"):
        pad_batch([])


def test_pad_batch_refuses_float_ids():
    with pytest.raises(TypeError, match=r"integer token ids, got a tensor of torch\.float32"):
        pad_batch([torch.tensor([1.0, 2.0])])
    with pytest.raises(TypeError, match="must be an integer"):
        pad_batch([[1, 2.5]])


def test_pad_batch_refuses_a_2d_sequence():
    with pytest.raises(ValueError, match=r"sequence 1 has shape \(1, 2\)"):
        pad_batch([torch.tensor([1]), torch.tensor([[1, 2]])])


def test_pad_batch_with_vocabulary_encode_round_trips(vocab):
    sentences = [["a", "b"], ["c", "d", "a"]]
    ids, mask = pad_batch([vocab.encode(s) for s in sentences], pad_id=vocab.pad_id)
    assert [vocab.decode(row) for row in ids] == sentences
    assert mask.sum(1).tolist() == [2, 3]
