"""Specification of course_lib.decoding: greedy decoding, beam search, sampling, and the
translation scorer with and without a key/value cache."""

from __future__ import annotations

import math
import time

import pytest
import torch

from course_lib.answers.runner import TableScorer
from course_lib.decoding import TranslationScorer, beam_search, greedy_decode, sample, step_times
from course_lib.transformer import Transformer

PAD, BOS, EOS = 0, 1, 2


def table(paths: dict[int, dict[int, float]], vocab_size: int = 8, max_len: int = 8):
    """A scorer whose log-probabilities after token ``a`` are ``paths[a]`` (others -30)."""
    by_position = torch.full((max_len, vocab_size, vocab_size), -30.0)
    for last, following in paths.items():
        for token, probability in following.items():
            by_position[:, last, token] = math.log(probability)
    return TableScorer(by_position, torch.zeros(vocab_size, vocab_size))


def random_table(seed: int, vocab_size: int = 9, max_len: int = 10) -> TableScorer:
    draw = torch.Generator().manual_seed(seed)
    by_position = torch.randn(max_len, vocab_size, vocab_size, generator=draw) * 2
    by_position[..., [PAD, BOS]] = -30.0  # never generated
    by_position[..., EOS] += 1.0
    return TableScorer(by_position, torch.randn(vocab_size, vocab_size, generator=draw))


def small_transformer(seed: int = 0, norm_first: bool = False) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(12, 10, d_model=16, num_heads=4, num_encoder_layers=2,
                       num_decoder_layers=2, d_ff=32, dropout=0.0, max_len=40,
                       norm_first=norm_first).eval()  # fmt: skip


SOURCES = torch.tensor([[4, 5, 6, 7], [8, 9, 0, 0], [10, 11, 4, 0]])


# ----------------------------------------------------------------------------- greedy


def test_greedy_follows_the_best_token_and_pads_sequences_that_have_ended():
    scorer = table({BOS: {3: 0.6, 4: 0.4}, 3: {EOS: 0.9, 5: 0.1}, 4: {5: 1.0}, 5: {6: 1.0},
                    6: {EOS: 1.0}, PAD: {3: 1.0}})  # fmt: skip
    ids = greedy_decode(scorer, torch.tensor([[BOS], [4]]), EOS, max_new_tokens=5)
    assert ids.tolist() == [[BOS, 3, EOS, PAD], [4, 5, 6, EOS]]
    assert greedy_decode(scorer, torch.tensor([[BOS]]), EOS, 5).tolist() == [[BOS, 3, EOS]]


def test_greedy_stops_after_max_new_tokens_or_never_early_without_an_eos_id():
    scorer = random_table(0)
    assert greedy_decode(scorer, torch.tensor([[BOS]]), EOS, 1).shape == (1, 2)
    assert greedy_decode(scorer, torch.tensor([[BOS]]), None, 9).shape == (1, 10)


def test_a_scorer_that_returns_every_position_gets_a_message_that_says_how_to_fix_it():
    model = small_transformer()
    memory = model.encode(SOURCES)
    with pytest.raises(ValueError, match=r"model\(ids\)\[:, -1\]"):
        greedy_decode(lambda ids: model.decode(ids, memory, model.source_mask(SOURCES)),
                      torch.ones(3, 1, dtype=torch.long), EOS, 4)  # fmt: skip


@pytest.mark.parametrize(
    ("prompt", "error", "message"),
    [
        (torch.tensor([1, 2]), ValueError, r"\(batch, t\) tensor"),
        (torch.zeros(2, 0, dtype=torch.long), ValueError, "t >= 1"),
        (torch.tensor([[1.0]]), TypeError, "integer token ids"),
        ([[1]], ValueError, "got list"),
    ],
)
def test_a_bad_prompt_is_refused(prompt, error, message):
    with pytest.raises(error, match=message):
        greedy_decode(random_table(0), prompt, EOS, 3)


def test_max_new_tokens_must_be_positive():
    with pytest.raises(ValueError, match="max_new_tokens must be a positive integer"):
        greedy_decode(random_table(0), torch.tensor([[BOS]]), EOS, 0)


# ----------------------------------------------------------------------------- beam search


@pytest.mark.parametrize("seed", range(5))
def test_beam_search_of_width_one_is_greedy_decoding(seed):
    scorer = random_table(seed)
    prompt = torch.tensor([[BOS], [3], [5], [7]])
    result = beam_search(scorer, prompt, EOS, 8, beam_width=1)
    assert torch.equal(result.sequences[:, 0], greedy_decode(scorer, prompt, EOS, 8))


def test_beam_search_of_width_one_is_greedy_decoding_on_a_transformer_too():
    model = small_transformer(seed=3)
    start = torch.full((3, 1), BOS)
    beam = beam_search(TranslationScorer(model, SOURCES), start, EOS, 12, beam_width=1)
    assert torch.equal(beam.sequences[:, 0], greedy_decode(TranslationScorer(model, SOURCES),
                                                           start, EOS, 12))  # fmt: skip


def test_beam_search_finds_the_likelier_sequence_that_greedy_misses():
    # <bos> -> 3 (0.55) then anything of five; <bos> -> 4 (0.45) then <eos> for sure
    scorer = table({BOS: {3: 0.55, 4: 0.45}, 3: dict.fromkeys(range(3, 8), 0.2),
                    4: {EOS: 1.0}, **{t: {EOS: 1.0} for t in (5, 6, 7)}})  # fmt: skip
    greedy = greedy_decode(scorer, torch.tensor([[BOS]]), EOS, 4)
    beam = beam_search(scorer, torch.tensor([[BOS]]), EOS, 4, beam_width=2)
    assert greedy.tolist()[0][:2] == [BOS, 3]
    assert beam.sequences[0, 0].tolist() == [BOS, 4, EOS, PAD]
    assert beam.scores[0, 0] == pytest.approx(math.log(0.45), abs=1e-4)


def test_beam_scores_are_the_sums_of_the_log_probabilities_best_first():
    scorer = random_table(1)
    prompt = torch.tensor([[BOS], [4]])
    result = beam_search(scorer, prompt, EOS, 6, beam_width=4)
    assert result.sequences.shape[:2] == (2, 4) and result.scores.shape == (2, 4)
    assert (result.scores[:, :-1] >= result.scores[:, 1:]).all()
    for b in range(2):
        for k in range(4):
            seq = result.sequences[b, k]
            total = 0.0
            for t in range(1, seq.numel()):
                if seq[t - 1] == EOS:  # then padding, at no cost
                    assert (seq[t:] == PAD).all()
                    break
                log_p = torch.log_softmax(scorer(seq[None, :t]), -1)[0]
                total += float(log_p[seq[t]])
            assert result.scores[b, k].item() == pytest.approx(total, abs=1e-4)


def test_beam_hypotheses_are_distinct():
    result = beam_search(random_table(2), torch.tensor([[BOS]]), EOS, 5, beam_width=4)
    rows = {tuple(r) for r in result.sequences[0].tolist()}
    assert len(rows) == 4


def test_a_beam_wider_than_the_vocabulary_is_refused():
    with pytest.raises(ValueError, match="larger than the vocabulary"):
        beam_search(random_table(0, vocab_size=5), torch.tensor([[BOS]]), EOS, 3, beam_width=6)


# ----------------------------------------------------------------------------- the cache


@pytest.mark.parametrize("norm_first", [False, True])
def test_the_cache_gives_the_same_tokens_as_recomputing_the_prefix(norm_first):
    model = small_transformer(seed=1, norm_first=norm_first)
    start = torch.full((3, 1), BOS)
    cached = greedy_decode(TranslationScorer(model, SOURCES, use_cache=True), start, None, 30)
    recomputed = greedy_decode(TranslationScorer(model, SOURCES, use_cache=False), start,
                               None, 30)  # fmt: skip
    assert torch.equal(cached, recomputed)


def test_the_cache_gives_the_same_scores_at_every_step():
    model = small_transformer(seed=2)
    ids = torch.randint(3, 10, (3, 12))
    ids[:, 0] = BOS
    with_cache = TranslationScorer(model, SOURCES, use_cache=True)
    without = TranslationScorer(model, SOURCES, use_cache=False)
    for t in range(1, 13):
        torch.testing.assert_close(with_cache(ids[:, :t]), without(ids[:, :t]))


def test_beam_search_with_the_cache_reorders_it_and_gives_the_same_hypotheses():
    model = small_transformer(seed=4)
    start = torch.full((3, 1), BOS)
    cached = beam_search(TranslationScorer(model, SOURCES, True), start, EOS, 10, beam_width=3)
    plain = beam_search(TranslationScorer(model, SOURCES, False), start, EOS, 10, beam_width=3)
    assert torch.equal(cached.sequences, plain.sequences)
    torch.testing.assert_close(cached.scores, plain.scores)


def test_without_a_cache_step_t_computes_t_positions_with_it_one():
    model = small_transformer()
    start = torch.full((3, 1), BOS)
    for use_cache, expected in ((False, 20 * 21 // 2), (True, 20)):
        scorer = TranslationScorer(model, SOURCES, use_cache)
        greedy_decode(scorer, start, None, 20)
        assert scorer.positions_computed == expected


def test_a_cached_scorer_refuses_ids_that_do_not_continue_what_it_saw():
    model = small_transformer()
    scorer = TranslationScorer(model, SOURCES)
    scorer(torch.tensor([[BOS], [BOS], [BOS]]))
    with pytest.raises(ValueError, match="continues the ids it was given before"):
        scorer(torch.tensor([[3, 4], [BOS, 4], [BOS, 4]]))
    with pytest.raises(ValueError, match="continues the ids it was given before"):
        scorer(torch.tensor([[BOS], [BOS], [BOS]]))


def test_a_translation_scorer_needs_a_course_lib_transformer():
    with pytest.raises(TypeError, match="course_lib Transformer"):
        TranslationScorer(torch.nn.Linear(2, 2), SOURCES)


# ----------------------------------------------------------------------------- sampling


def test_sampling_is_reproducible_with_a_seeded_generator():
    scorer, prompt = random_table(0), torch.full((6, 1), BOS)
    first = sample(scorer, prompt, EOS, 8, generator=torch.Generator().manual_seed(3))
    again = sample(scorer, prompt, EOS, 8, generator=torch.Generator().manual_seed(3))
    assert torch.equal(first, again)


def test_sampling_at_a_low_temperature_is_greedy_decoding():
    scorer, prompt = random_table(5), torch.tensor([[BOS], [3], [6]])
    cold = sample(scorer, prompt, EOS, 8, temperature=1e-3,
                  generator=torch.Generator().manual_seed(0))  # fmt: skip
    assert torch.equal(cold, greedy_decode(scorer, prompt, EOS, 8))


def test_sampling_draws_tokens_with_the_softmax_of_the_scores_over_the_temperature():
    scorer = table({BOS: {3: 0.5, 4: 0.3, 5: 0.2}})
    prompt = torch.full((20_000, 1), BOS)
    for temperature in (1.0, 2.0):
        ids = sample(scorer, prompt, None, 1, temperature=temperature,
                     generator=torch.Generator().manual_seed(0))  # fmt: skip
        counts = torch.bincount(ids[:, 1], minlength=8).float() / 20_000
        expected = torch.softmax(scorer(prompt[:1])[0] / temperature, -1)
        torch.testing.assert_close(counts, expected, atol=0.015, rtol=0)


@pytest.mark.parametrize("temperature", [0, -1.0, float("inf"), float("nan")])
def test_a_temperature_that_is_not_positive_is_refused(temperature):
    with pytest.raises(ValueError, match="temperature must be a positive number"):
        sample(random_table(0), torch.tensor([[BOS]]), EOS, 3, temperature=temperature)


def test_step_times_times_one_call_of_the_scorer_per_step_on_the_growing_prefix():
    table, lengths = random_table(0), []

    def slow_scorer(ids):  # takes at least 2 ms per id it reads
        lengths.append(ids.size(1))
        time.sleep(0.002 * ids.size(1))
        return table(ids)

    times = step_times(slow_scorer, torch.tensor([[BOS]]), 6)
    assert lengths == [1, 2, 3, 4, 5, 6]  # no early stop at <eos>
    assert all(t >= 0.002 * n for t, n in zip(times, lengths, strict=True))
