"""Specification of course_lib.translation: the number translator and its shipped checkpoint."""

from __future__ import annotations

from importlib import resources

import pytest
import torch

from course_lib.data import number_split, number_vocabularies, spanish_number_name
from course_lib.training import threads
from course_lib.translation import (
    CHECKPOINT,
    MODEL_SETTINGS,
    NumberTranslator,
    load_number_translator,
    train_number_translator,
)


@pytest.fixture(scope="module")
def translator() -> NumberTranslator:
    return load_number_translator()


def test_the_shipped_checkpoint_is_small_and_holds_only_tensors_and_plain_data():
    path = resources.files("course_lib") / CHECKPOINT
    assert path.is_file() and path.stat().st_size < 2 * 2**20
    state = torch.load(path, weights_only=True)
    assert state["format"] == 1 and state["settings"] == MODEL_SETTINGS


def test_the_shipped_translator_gets_at_least_99_percent_of_the_held_out_numbers_right(
    translator,
):
    with threads(1):
        assert translator.exact_match(number_split().test) >= 0.99


def test_the_shipped_translator_has_the_vocabularies_of_the_training_numbers(translator):
    source, target = number_vocabularies(number_split().train)
    assert translator.source_vocab.tokens == source.tokens
    assert translator.target_vocab.tokens == target.tokens


def test_translate_takes_numbers_or_english_names_and_gives_spanish_names(translator):
    tricky = [16, 21, 101, 555, 1000, 1100, 2501, 7008, 9999]  # (it says "ciento" for 100)
    assert translator.translate(tricky) == [spanish_number_name(n) for n in tricky]
    assert translator.translate(["two hundred twenty-one"]) == ["doscientos veintiuno"]


def test_beam_search_and_the_cache_change_nothing_on_these_numbers(translator):
    numbers = number_split().test[:200]
    greedy = translator.translate(numbers)
    assert translator.translate(numbers, use_cache=False) == greedy
    assert translator.translate(numbers, beam_width=4) == greedy


def test_cross_attention_has_a_row_per_decoder_input_that_sums_to_one(translator):
    attention = translator.cross_attention(221)
    assert attention.source == ["two", "hundred", "twenty", "-", "one"]
    assert attention.target == ["<bos>", "doscientos", "veintiuno"]
    assert attention.weights.shape == (2, 4, 3, 5)
    torch.testing.assert_close(attention.weights.sum(-1), torch.ones(2, 4, 3))


def test_saving_and_loading_gives_the_same_translator(translator, tmp_path):
    translator.save(tmp_path / "copy.pt")
    copy = NumberTranslator.load(tmp_path / "copy.pt")
    for a, b in zip(translator.model.parameters(), copy.model.parameters(), strict=True):
        assert torch.equal(a, b)
    assert copy.translate([4321]) == translator.translate([4321])


def test_loading_a_file_that_is_not_a_translator_is_refused(tmp_path):
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match=r"not a translator saved by NumberTranslator\.save"):
        NumberTranslator.load(tmp_path / "other.pt")


@pytest.mark.parametrize(
    ("items", "error", "message"),
    [(21, TypeError, "a list of numbers or names"), ([], ValueError, "the list is empty"),
     ([10_000], ValueError, "between 0 and 9999")],
)  # fmt: skip
def test_bad_input_to_translate_is_refused(translator, items, error, message):
    with pytest.raises(error, match=message):
        translator.translate(items)


def test_a_short_training_run_already_translates_most_held_out_numbers():
    translator, history = train_number_translator(epochs=1)
    assert history.epoch_losses[0] < 2.0
    with threads(1):
        assert translator.exact_match(number_split().test[:300]) > 0.5


def test_the_second_decoder_layer_of_the_shipped_translator_aligns_the_words(translator):
    first, second = translator.alignment_agreement(number_split().test)
    assert 0.0 <= first <= 1.0 and second > 0.9


def test_an_untrained_translator_does_not_align_the_words():
    source, target = number_vocabularies(number_split().train)
    untrained = NumberTranslator.untrained(source, target, seed=0)
    assert max(untrained.alignment_agreement(number_split().test[:200])) < 0.6


def test_log_probability_counts_the_tokens_up_to_eos_and_matches_beam_search(translator):
    from course_lib.decoding import beam_search

    src_ids = translator.source_ids([100, 21, 7008])
    start = torch.full((3, 1), translator.target_vocab.bos_id)
    result = beam_search(translator.scorer(src_ids), start, translator.target_vocab.eos_id,
                         8, beam_width=3)  # fmt: skip
    for k in range(3):
        torch.testing.assert_close(
            translator.log_probability(src_ids, result.sequences[:, k]), result.scores[:, k]
        )
