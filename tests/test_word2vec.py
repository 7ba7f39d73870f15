"""Specification of course_lib.word2vec: skip-gram and CBOW on the course's synthetic corpus."""

import math

import pytest
import torch

from course_lib.data import CONTENT_CLASSES, WORD_CLASSES, synthetic_grammar_corpus
from course_lib.vocab import Vocabulary
from course_lib.word2vec import (
    CBOW,
    SkipGram,
    cbow_examples,
    nearest_neighbours,
    negative_sampling_loss,
    neighbour_class_agreement,
    noise_distribution,
    pca_2d,
    skipgram_pairs,
    train_word2vec,
    unigram_counts,
)

CONTENT = {name: WORD_CLASSES[name] for name in CONTENT_CLASSES}


@pytest.fixture(scope="module")
def corpus() -> tuple[Vocabulary, list[list[int]]]:
    sentences = synthetic_grammar_corpus()
    vocab = Vocabulary.from_corpus(sentences)
    return vocab, [vocab.encode(sentence) for sentence in sentences]


@pytest.fixture(scope="module", params=["skipgram", "cbow"])
def trained(request, corpus):
    """Each method trained once with the defaults."""
    vocab, ids = corpus
    return request.param, train_word2vec(ids, len(vocab), method=request.param)


# --- training examples ----------------------------------------------------------------------


def test_skipgram_pairs_worked_example_window_1():
    centres, contexts = skipgram_pairs([[10, 11, 12, 13]], window=1)
    assert centres.tolist() == [10, 11, 11, 12, 12, 13]
    assert contexts.tolist() == [11, 10, 12, 11, 13, 12]


def test_skipgram_pairs_window_2_hand_computed():
    pairs = skipgram_pairs([[5, 6, 7]], window=2)
    assert list(zip(pairs.centres.tolist(), pairs.contexts.tolist(), strict=True)) == [
        (5, 6), (5, 7), (6, 5), (6, 7), (7, 5), (7, 6),
    ]  # fmt: skip


def test_skipgram_pairs_never_cross_sentences():
    pairs = skipgram_pairs([[5, 6], [7, 8]], window=3)
    assert set(zip(pairs.centres.tolist(), pairs.contexts.tolist(), strict=True)) == {
        (5, 6), (6, 5), (7, 8), (8, 7),
    }  # fmt: skip


def test_skipgram_pair_count_is_sum_over_words_of_their_neighbours():
    sentence = list(range(4, 14))  # 10 words, window 2: 2 * (2 * 10 - 3) = 34 pairs
    centres, contexts = skipgram_pairs([sentence], window=2)
    assert centres.shape == contexts.shape == (34,)
    assert centres.dtype == contexts.dtype == torch.long


def test_cbow_examples_worked_example_window_1():
    contexts, mask, centres = cbow_examples([[10, 11, 12]], window=1)
    assert contexts.tolist() == [[0, 11], [10, 12], [11, 0]]
    assert mask.tolist() == [[False, True], [True, True], [True, False]]
    assert centres.tolist() == [10, 11, 12]


def test_cbow_examples_window_2_slots_are_left_to_right():
    contexts, mask, centres = cbow_examples([[5, 6, 7, 8, 9]], window=2)
    assert contexts[2].tolist() == [5, 6, 8, 9]
    assert contexts[0].tolist() == [0, 0, 6, 7] and mask[0].tolist() == [False, False, True, True]
    assert contexts.shape == mask.shape == (5, 4) and centres.shape == (5,)


def test_cbow_examples_skip_one_word_sentences():
    contexts, _, centres = cbow_examples([[5], [6, 7]], window=1)
    assert centres.tolist() == [6, 7]
    assert contexts.tolist() == [[0, 7], [6, 0]]


def test_examples_accept_tensors_and_refuse_a_flat_list():
    pairs = skipgram_pairs([torch.tensor([5, 6])], window=1)
    assert pairs.centres.tolist() == [5, 6]
    with pytest.raises(TypeError, match="sentence_ids must be a list of sentences"):
        skipgram_pairs([5, 6, 7], window=1)


def test_window_must_be_positive():
    with pytest.raises(ValueError, match="window must be a positive integer, got 0"):
        cbow_examples([[5, 6]], window=0)


# --- noise distribution ---------------------------------------------------------------------


def test_unigram_counts_count_every_id():
    counts = unigram_counts([[4, 5, 5], [5, 6]], vocab_size=8)
    assert counts.tolist() == [0, 0, 0, 0, 1, 3, 1, 0]


def test_noise_is_counts_to_the_three_quarters_normalised():
    noise = noise_distribution(torch.tensor([0.0, 1.0, 16.0]))
    torch.testing.assert_close(noise, torch.tensor([0.0, 1 / 9, 8 / 9], dtype=torch.float64))


def test_noise_of_all_zero_counts_raises():
    with pytest.raises(ValueError, match="non-negative counts, not all zero"):
        noise_distribution(torch.zeros(4))


# --- the losses -----------------------------------------------------------------------------


def test_negative_sampling_loss_with_zero_output_vectors_is_k_plus_1_times_log_2():
    model = SkipGram(10, 4)  # output vectors start at zero: every sigmoid is 1/2
    noise = torch.full((10,), 0.1)
    loss = model.loss(torch.tensor([4, 5]), torch.tensor([6, 7]), noise=noise, negatives=3)
    assert loss.item() == pytest.approx(4 * math.log(2))


def test_full_softmax_loss_with_zero_output_vectors_is_log_vocab_size():
    model = CBOW(10, 4)
    contexts, mask, centres = cbow_examples([[4, 5, 6]], window=1)
    loss = model.loss(contexts, mask, centres, full_softmax=True)
    assert loss.item() == pytest.approx(math.log(10))


def test_full_softmax_loss_is_cross_entropy_of_dot_products():
    model = SkipGram(6, 3)
    torch.nn.init.normal_(model.output_embeddings.weight)
    centres, contexts = torch.tensor([1, 4]), torch.tensor([2, 5])
    v, u = model.input_embeddings.weight, model.output_embeddings.weight
    expected = -sum(torch.log_softmax(u @ v[c], 0)[o] for c, o in ((1, 2), (4, 5))) / 2
    loss = model.loss(centres, contexts, full_softmax=True)
    torch.testing.assert_close(loss, expected)


def test_cbow_hidden_vector_is_the_mean_of_the_real_context_words():
    model = CBOW(10, 4)
    contexts, mask = torch.tensor([[0, 5, 6, 7]]), torch.tensor([[False, True, True, True]])
    expected = model.input_embeddings.weight[[5, 6, 7]].mean(0)
    torch.testing.assert_close(model(contexts, mask)[0], expected)


def test_negative_sampling_without_noise_raises():
    with pytest.raises(ValueError, match="negative sampling needs the noise distribution"):
        SkipGram(10, 4).loss(torch.tensor([1]), torch.tensor([2]))


def test_loss_refuses_out_of_range_targets():
    with pytest.raises(IndexError, match=r"token id 10 .* outside"):
        SkipGram(10, 4).loss(torch.tensor([1]), torch.tensor([10]), full_softmax=True)


def test_models_have_input_and_output_tables():
    model = SkipGram(10, 4)
    assert model.input_embeddings.weight.shape == model.output_embeddings.weight.shape == (10, 4)
    assert model.embeddings.shape == (10, 4)


# --- training on the synthetic corpus -------------------------------------------------------


def test_words_of_one_class_become_nearest_neighbours(trained, corpus):
    method, result = trained
    vocab, _ = corpus
    rate = neighbour_class_agreement(result.embeddings, vocab, CONTENT)
    assert rate >= 0.9, f"{method}: only {rate:.0%} of content words have a same-class neighbour"


def test_training_runs_on_one_thread_and_restores_the_thread_count(corpus, monkeypatch):
    vocab, ids = corpus
    before = torch.get_num_threads()
    seen = []
    original = SkipGram.loss

    def spy(self, *args, **kwargs):
        seen.append(torch.get_num_threads())
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SkipGram, "loss", spy)
    try:
        torch.set_num_threads(2)
        train_word2vec(ids[:20], len(vocab), epochs=1)
        assert set(seen) == {1}
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_loss_goes_down(trained):
    _, result = trained
    assert len(result.losses) == 5
    assert result.losses[-1] < result.losses[0]


def test_result_holds_one_vector_per_token(trained, corpus):
    _, result = trained
    assert result.embeddings.shape == (len(corpus[0]), 16)


def test_same_seed_gives_identical_embeddings(trained, corpus):
    method, result = trained
    vocab, ids = corpus
    again = train_word2vec(ids, len(vocab), method=method)
    assert torch.equal(again.embeddings, result.embeddings)
    assert again.losses == result.losses


def test_different_seed_gives_different_embeddings(corpus):
    vocab, ids = corpus
    first = train_word2vec(ids[:200], len(vocab), epochs=1, seed=0)
    second = train_word2vec(ids[:200], len(vocab), epochs=1, seed=1)
    assert not torch.equal(first.embeddings, second.embeddings)


def test_result_does_not_depend_on_the_global_random_state(corpus):
    vocab, ids = corpus
    results = []
    with torch.random.fork_rng():
        for global_seed in (1, 2):
            torch.manual_seed(global_seed)
            results.append(train_word2vec(ids[:100], len(vocab), epochs=1).embeddings)
    assert torch.equal(*results)


@pytest.mark.parametrize("method", ["skipgram", "cbow"])
def test_full_softmax_training_also_finds_the_classes(corpus, method):
    vocab, ids = corpus
    result = train_word2vec(ids, len(vocab), method=method, full_softmax=True)
    assert neighbour_class_agreement(result.embeddings, vocab, CONTENT) >= 0.9


def test_snapshots_hold_the_start_every_k_epochs_and_the_end(corpus):
    vocab, ids = corpus
    result = train_word2vec(ids[:200], len(vocab), epochs=5, snapshot_every=2)
    assert [epoch for epoch, _ in result.snapshots] == [0, 2, 4, 5]
    assert torch.equal(result.snapshots[-1][1], result.embeddings)
    assert not torch.equal(result.snapshots[0][1], result.embeddings)


def test_no_snapshots_unless_asked(corpus):
    vocab, ids = corpus
    assert train_word2vec(ids[:50], len(vocab), epochs=1).snapshots == []


def test_unknown_method_raises():
    with pytest.raises(ValueError, match=r"method must be one of \('skipgram', 'cbow'\)"):
        train_word2vec([[4, 5]], 6, method="glove")


# --- looking at embeddings ------------------------------------------------------------------


@pytest.fixture
def toy() -> tuple[Vocabulary, torch.Tensor]:
    vocab = Vocabulary(["a", "b", "c", "d"])
    table = torch.tensor(
        [[1.0, 1.0], [1.0, 0.9], [1.0, 0.0], [0.0, 1.0],  # specials: close to everything
         [1.0, 0.0], [2.0, 0.2], [0.0, 3.0], [-1.0, 0.0]],  # a, b, c, d
    )  # fmt: skip
    return vocab, table


def test_nearest_neighbours_by_cosine_without_the_word_and_specials(toy):
    vocab, table = toy
    result = nearest_neighbours(table, vocab, "a", k=3)
    assert [word for word, _ in result] == ["b", "c", "d"]
    assert result[0][1] == pytest.approx(2.0 / math.hypot(2.0, 0.2))
    assert result[1][1] == pytest.approx(0.0, abs=1e-12)
    assert result[2][1] == pytest.approx(-1.0)


def test_nearest_neighbours_returns_at_most_the_other_words(toy):
    vocab, table = toy
    assert len(nearest_neighbours(table, vocab, "c", k=10)) == 3


def test_nearest_neighbours_of_an_unknown_word_raises(toy):
    vocab, table = toy
    with pytest.raises(KeyError, match="'z' is not in the vocabulary"):
        nearest_neighbours(table, vocab, "z")


def test_nearest_neighbours_checks_the_table_matches_the_vocabulary(toy):
    vocab, table = toy
    with pytest.raises(ValueError, match="embeddings has 7 rows but the vocabulary 8 tokens"):
        nearest_neighbours(table[:7], vocab, "a")


def test_neighbour_class_agreement_counts_same_class_nearest_neighbours(toy):
    vocab, table = toy
    classes = {"right": ("a", "b"), "up": ("c",), "left": ("d",)}
    assert neighbour_class_agreement(table, vocab, classes) == pytest.approx(2 / 4)


def test_pca_of_points_on_a_line_puts_them_on_the_first_axis():
    direction = torch.tensor([1.0, 2.0, 2.0], dtype=torch.float64) / 3.0  # a unit vector
    points = torch.tensor([-2.0, -1.0, 0.0, 4.0], dtype=torch.float64)[:, None] * direction + 5.0
    coords = pca_2d(points)
    centred = torch.tensor([-2.25, -1.25, -0.25, 3.75], dtype=torch.float64)
    torch.testing.assert_close(coords[:, 0], centred)
    torch.testing.assert_close(coords[:, 1], torch.zeros(4, dtype=torch.float64))


def test_pca_first_axis_has_the_larger_variance():
    points = torch.randn(50, 6, generator=torch.Generator().manual_seed(0))
    points[:, 2] *= 10.0
    coords = pca_2d(points)
    assert coords.shape == (50, 2)
    assert coords[:, 0].var() > coords[:, 1].var()


def test_pca_sign_is_fixed_largest_entry_of_each_axis_is_positive():
    points = torch.randn(30, 5, generator=torch.Generator().manual_seed(1))
    coords = pca_2d(points)
    largest = coords.abs().argmax(dim=0)
    assert (coords[largest, torch.arange(2)] > 0).all()
    torch.testing.assert_close(pca_2d(-points), coords)  # mirrored input, same picture


def test_pca_needs_a_matrix_with_two_rows_and_two_columns():
    with pytest.raises(ValueError, match=r"\(n, dim\) tensor with n, dim >= 2, got \(5, 1\)"):
        pca_2d(torch.zeros(5, 1))


# --- the negative-sampling loss on its own ---------------------------------------------------


def test_negative_sampling_loss_hand_computed():
    hidden = torch.tensor([[1.0, 0.0]])
    target = torch.tensor([[2.0, 5.0]])  # u . v = 2
    noise = torch.tensor([[[0.0, 3.0], [-1.0, 0.0]]])  # u_j . v = 0 and -1
    expected = -(
        math.log(1 / (1 + math.exp(-2))) + math.log(0.5) + math.log(1 / (1 + math.exp(-1)))
    )
    assert negative_sampling_loss(hidden, target, noise).item() == pytest.approx(expected)


def test_negative_sampling_loss_is_the_mean_over_the_batch():
    g = torch.Generator().manual_seed(0)
    hidden, target, noise = (
        torch.randn(3, 4, generator=g),
        torch.randn(3, 4, generator=g),
        (torch.randn(3, 2, 4, generator=g)),
    )
    each = [negative_sampling_loss(hidden[i : i + 1], target[i : i + 1], noise[i : i + 1])
            for i in range(3)]  # fmt: skip
    torch.testing.assert_close(negative_sampling_loss(hidden, target, noise), sum(each) / 3)


def test_negative_sampling_loss_checks_the_shapes():
    with pytest.raises(ValueError, match=r"noise must have shape \(batch, k, dim\) = \(2, k, 4\)"):
        negative_sampling_loss(torch.zeros(2, 4), torch.zeros(2, 4), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="hidden and target must both have shape"):
        negative_sampling_loss(torch.zeros(2, 4), torch.zeros(2, 3), torch.zeros(2, 1, 4))
