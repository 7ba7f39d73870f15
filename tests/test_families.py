"""Specification of course_lib.families, encoder-only (BERT-like) and decoder-only (GPT-like)
models, and of course_lib.objectives, their masked-token, next-token and label training."""

from __future__ import annotations

import pytest
import torch

from course_lib.attention import causal_mask
from course_lib.families import (
    DecoderOnlyModel,
    EncoderOnlyModel,
    LearnedPositions,
    SequenceClassifier,
)
from course_lib.objectives import mask_tokens, train_causal_lm, train_classifier, train_masked_lm

VOCAB = 20


def model(kind, **kwargs):
    torch.manual_seed(0)
    settings = {"d_model": 16, "num_heads": 2, "num_layers": 2, "d_ff": 32, "max_len": 32,
                **kwargs}  # fmt: skip
    return kind(VOCAB, **settings).eval()


IDS = torch.tensor([[1, 5, 6, 7, 8, 2], [1, 9, 10, 2, 0, 0]])


def test_both_give_scores_over_the_vocabulary_at_every_position():
    for kind in (EncoderOnlyModel, DecoderOnlyModel):
        assert model(kind)(IDS).shape == (2, 6, VOCAB)


def test_an_encoder_only_model_reads_both_sides_a_decoder_only_model_only_the_past():
    changed = IDS.clone()
    changed[0, 4] = 11  # a later token
    for kind, earlier_moves in ((EncoderOnlyModel, True), (DecoderOnlyModel, False)):
        m = model(kind)
        before, after = m(IDS)[0, :4], m(changed)[0, :4]
        assert (not torch.allclose(before, after)) is earlier_moves, kind.__name__


def test_a_decoder_only_model_is_its_encoder_stack_run_with_the_causal_mask():
    gpt = model(DecoderOnlyModel)
    ids = IDS[:1]
    x = gpt.positional(gpt.embedding(ids))
    states = gpt.encoder(x, causal_mask(6))
    torch.testing.assert_close(gpt(ids), gpt.output(states))
    assert gpt.encoder.norm is not None and gpt.encoder.layers[0].norm_first  # GPT-2's


def test_padding_does_not_change_the_real_positions():
    bert = model(EncoderOnlyModel)
    torch.testing.assert_close(bert(IDS)[1, :4], bert(IDS[1:, :4])[0])


def test_the_sizes_of_gpt2_small_give_its_124_439_808_parameters():
    with torch.device("meta"):
        gpt2 = DecoderOnlyModel(50257, d_model=768, num_heads=12, num_layers=12, d_ff=3072,
                                max_len=1024, positions="learned", pad_id=None)  # fmt: skip
    assert sum(p.numel() for p in gpt2.parameters()) == 124_439_808


def test_learned_positions_add_one_trained_row_per_position():
    positions = LearnedPositions(max_len=8, d_model=4)
    x = torch.zeros(2, 3, 4)
    torch.testing.assert_close(positions(x, start=2)[1], positions.table.weight[2:5])
    with pytest.raises(ValueError, match=r"positions 6\.\.8 are needed but the table has 8 rows"):
        positions(x, start=6)


def test_an_unknown_kind_of_position_is_refused():
    with pytest.raises(ValueError, match="'sinusoidal', 'learned' or 'rotary'"):
        EncoderOnlyModel(VOCAB, positions="alibi")


def test_ids_outside_the_vocabulary_are_refused():
    with pytest.raises(IndexError, match="outside"):
        model(EncoderOnlyModel)(torch.tensor([[1, VOCAB]]))
    with pytest.raises(ValueError, match=r"\(batch, L\) tensor"):
        model(EncoderOnlyModel)(torch.tensor([1, 2]))


def test_mask_tokens_hides_about_the_fraction_never_padding_and_at_least_one_per_row():
    ids = torch.randint(4, VOCAB, (400, 12))  # 3 is <mask>
    ids[:, 9:] = 0  # padding
    inputs, labels = mask_tokens(ids, mask_id=3, fraction=0.15,
                                 generator=torch.Generator().manual_seed(0))  # fmt: skip
    hidden = inputs == 3
    assert hidden.any(1).all() and not hidden[:, 9:].any()
    # 15%, and a little more from the rows where no token was drawn (0.85**9 of them)
    assert 0.14 < hidden[:, :9].float().mean() < 0.21
    assert torch.equal(labels[hidden], ids[hidden]) and (labels[~hidden] == 0).all()
    assert torch.equal(inputs[~hidden], ids[~hidden])


def test_mask_tokens_spares_the_tokens_it_is_told_to_keep():
    ids = torch.tensor([[1, 5, 6, 2]])
    inputs, _ = mask_tokens(ids, 3, fraction=0.99, keep=(1, 2))
    assert inputs.tolist() == [[1, 3, 3, 2]]
    with pytest.raises(ValueError, match="at least one token that may be masked"):
        mask_tokens(torch.tensor([[1, 2, 0]]), 3, keep=(1, 2))


def test_masked_and_causal_training_lower_their_losses():
    ids = torch.randint(4, 8, (256, 1), generator=torch.Generator().manual_seed(0)).repeat(
        1, 6
    )  # each sequence repeats one token
    ids[:, 0] = 1
    bert = model(EncoderOnlyModel)
    history = train_masked_lm(bert, ids, mask_id=3, epochs=4, batch_size=32,
                              learning_rate=1e-2)  # fmt: skip
    assert history.epoch_losses[-1] < 0.5 * history.epoch_losses[0]
    gpt = model(DecoderOnlyModel)
    history = train_causal_lm(gpt, ids, epochs=4, batch_size=32, learning_rate=1e-2)
    assert history.epoch_losses[-1] < 0.5 * history.epoch_losses[0]


# ----------------------------------------------------------------------------- fine-tuning


def test_a_classifier_gives_one_score_per_class_from_the_mean_of_the_real_tokens():
    bert = model(EncoderOnlyModel)
    classifier = SequenceClassifier(bert, num_classes=3).eval()
    scores = classifier(IDS)
    assert scores.shape == (2, 3)
    states = bert.hidden_states(IDS[1:, :4])  # the second row without its padding
    torch.testing.assert_close(scores[1], classifier.head(states.mean(dim=1))[0])
    assert classifier.encoder is bert  # fine-tuning trains the encoder itself


def test_a_classifier_needs_an_encoder_only_model_and_two_classes():
    with pytest.raises(TypeError, match="EncoderOnlyModel"):
        SequenceClassifier(model(DecoderOnlyModel), 2)
    with pytest.raises(ValueError, match="at least 2"):
        SequenceClassifier(model(EncoderOnlyModel), 1)


def test_train_classifier_learns_a_label_and_trains_the_encoder_too():
    ids = torch.randint(4, 8, (128, 5), generator=torch.Generator().manual_seed(0))
    labels = (ids[:, 2] >= 6).long()  # the label is a property of the third token
    classifier = SequenceClassifier(model(EncoderOnlyModel), 2)
    before = classifier.encoder.embedding.weight.detach().clone()
    history = train_classifier(
        classifier, ids, labels, epochs=10, batch_size=16, learning_rate=1e-2
    )
    assert history.epoch_losses[-1] < 0.5 * history.epoch_losses[0]
    assert (classifier(ids).argmax(-1) == labels).float().mean() > 0.9
    assert not torch.equal(before, classifier.encoder.embedding.weight)


@pytest.mark.parametrize(
    ("ids", "labels", "message"),
    [
        (torch.ones(4, dtype=torch.long), torch.zeros(4, dtype=torch.long), "ids must be"),
        (torch.ones(4, 3, dtype=torch.long), torch.zeros(3, dtype=torch.long), "labels must be"),
        (torch.ones(4, 3, dtype=torch.long), torch.full((4,), 2), r"in \[0, 2\)"),
        (torch.ones(4, 3, dtype=torch.long), torch.zeros(4), r"in \[0, 2\)"),
    ],
)
def test_train_classifier_refuses_bad_ids_and_labels(ids, labels, message):
    classifier = SequenceClassifier(model(EncoderOnlyModel), 2)
    with pytest.raises(ValueError, match=message):
        train_classifier(classifier, ids, labels, epochs=1, batch_size=2, learning_rate=0.1)


def test_the_defaults_keep_the_course_model_and_the_options_make_gpt2s():
    course = model(DecoderOnlyModel)
    assert course.embedding.scale and course.token_types is None and course.head_transform is None
    gpt2 = model(
        DecoderOnlyModel,
        positions="learned",
        pad_id=None,
        scale_embeddings=False,
        activation="gelu_tanh",
    )
    ids = IDS[:1]
    x = gpt2.embedding.weight[ids] + gpt2.positional.table.weight[:6]  # no sqrt(d_model)
    torch.testing.assert_close(gpt2.output(gpt2.encoder(x, causal_mask(6))), gpt2(ids))


def test_without_biases_no_layer_has_one():
    gpt = model(DecoderOnlyModel, bias=False)
    names = [name for name, _ in gpt.named_parameters()]
    assert not [name for name in names if name.endswith("bias")]


def test_token_types_are_added_and_refused_where_the_model_has_none():
    bert = model(EncoderOnlyModel, num_token_types=2, embedding_norm=True, head_transform=True)
    types = torch.zeros_like(IDS)
    torch.testing.assert_close(bert(IDS, types), bert(IDS))  # type 0 is the default
    assert not torch.allclose(bert(IDS, types + 1), bert(IDS))
    with pytest.raises(ValueError, match="has no token types; create it with num_token_types"):
        model(EncoderOnlyModel)(IDS, types)
    with pytest.raises(IndexError, match="token_type_ids"):
        bert(IDS, types + 2)


def test_the_pooler_reads_the_first_tokens_final_vector():
    bert = model(EncoderOnlyModel, pooler=True)
    states = bert.hidden_states(IDS)
    expected = torch.tanh(bert.pooler.dense(states[:, 0]))
    torch.testing.assert_close(bert.pooled(IDS), expected)
    with pytest.raises(ValueError, match="no pooler"):
        model(EncoderOnlyModel).pooled(IDS)
