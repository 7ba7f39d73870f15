"""Probe course_lib's public API with bad inputs and count how many get a clear message.

    .venv/bin/python benchmarks/probe_bad_input.py [-v]

A probe is clear if it raises ``TypeError``, ``ValueError``, ``IndexError`` or ``KeyError``
by a ``raise`` statement of ``course_lib`` (the message is the library's, naming what was
expected and what came); it fails if the error comes from deep inside PyTorch or Python, or
if the call returns without an error (a silent answer). A few probes are inputs a student
would reasonably type that must be accepted: they are clear if the answer is right.
"""

from __future__ import annotations

import math
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

import course_lib
from course_lib import attention as A
from course_lib.cache import DecoderCache, KeyValueCache
from course_lib.data import english_number_name, number_tokens, spanish_number_name
from course_lib.decoder import Decoder, DecoderLayer
from course_lib.decoding import TranslationScorer, beam_search, greedy_decode, sample
from course_lib.discretize import frame_signal, kmeans, overlap_add, reconstruction_snr
from course_lib.embeddings import PatchEmbedding, TokenEmbedding, one_hot_lookup, patchify
from course_lib.encoder import Encoder, EncoderLayer
from course_lib.families import DecoderOnlyModel, EncoderOnlyModel
from course_lib.feedforward import FeedForward
from course_lib.objectives import mask_tokens
from course_lib.positional import (
    PositionalEncoding,
    angular_frequencies,
    offset_rotation,
    sinusoidal_positional_encoding,
)
from course_lib.recurrence import rnn_matmul_flops, rnn_stepwise
from course_lib.tokenization import train_bpe
from course_lib.training import (
    fit,
    label_smoothed_loss,
    sequence_loss,
    smoothed_targets,
    teacher_forcing,
    transformer_schedule,
)
from course_lib.transformer import Transformer
from course_lib.translation import load_number_translator
from course_lib.vocab import Vocabulary, pad_batch
from course_lib.word2vec import SkipGram, negative_sampling_loss, noise_distribution, skipgram_pairs

LIBRARY = str(Path(course_lib.__file__).parent)
CLEAR_ERRORS = (TypeError, ValueError, IndexError, KeyError)

torch.manual_seed(0)
x = torch.randn(2, 3, 8)
mha = A.MultiHeadAttention(8, 2).eval()
enc_layer = EncoderLayer(8, 2, 16).eval()
pre_layer = EncoderLayer(8, 2, 16, norm_first=True).eval()
dec_layer = DecoderLayer(8, 2, 16).eval()
encoder = Encoder(2, 8, 2, 16).eval()
decoder = Decoder(2, 8, 2, 16).eval()
ffn = FeedForward(8, 16)
pe = PositionalEncoding(8, max_len=10)
emb = TokenEmbedding(10, 8)
model = Transformer(12, 12, d_model=8, num_heads=2, num_encoder_layers=1,
                    num_decoder_layers=1, d_ff=16, dropout=0.0, max_len=20).eval()  # fmt: skip
gpt = DecoderOnlyModel(12, d_model=8, num_heads=2, num_layers=1, d_ff=16).eval()
translator = load_number_translator()
logits = torch.randn(2, 3, 5)
labels = torch.tensor([[1, 2, 0], [3, 0, 0]])
bos = torch.full((2, 1), 1)
linear = nn.Linear(2, 2)


def scorer(ids):
    return torch.randn(ids.size(0), 6)


def minus_inf_scorer(ids):
    return torch.full((ids.size(0), 6), -math.inf)


def nan_scorer(ids):
    return torch.full((ids.size(0), 6), math.nan)


def cache_with(dtype=torch.float32, batch=2):
    cache = KeyValueCache()
    cache.update(torch.randn(batch, 2, 1, 4, dtype=dtype), torch.randn(batch, 2, 1, 4, dtype=dtype))
    return cache


def filled_decoder_cache():
    cache = model.new_cache()
    memory = model.encode(torch.tensor([[4, 5], [6, 7]]))
    model.decode(bos, memory, None, cache=cache)
    return cache


def layer_64(kind, **kwargs):
    cls = nn.TransformerEncoderLayer if kind == "enc" else nn.TransformerDecoderLayer
    return cls(8, 2, 16, dropout=0.0, batch_first=True, **kwargs)


ERROR = "error"
PROBES: list[tuple[str, Callable[[], object], object]] = [
    # ------------------------------------------------------------------ issue 19, point 5
    ("translate: 'banana'", lambda: translator.translate(["banana"]), ERROR),
    ("translate: Spanish name 'veintiuno'", lambda: translator.translate(["veintiuno"]), ERROR),
    ("translate: empty name in a batch", lambda: translator.translate(["one", ""]), ERROR),
    (
        "translate: 'twenty one' (space)",
        lambda: translator.translate(["twenty one"]),
        ["veintiuno"],
    ),
    (
        "translate: 'Twenty-One' (capitals)",
        lambda: translator.translate(["Twenty-One"]),
        ["veintiuno"],
    ),
    ("translate: '21' (digits)", lambda: translator.translate(["21"]), ["veintiuno"]),
    (
        "translate: '  two  hundred ' (spaces)",
        lambda: translator.translate(["  two  hundred "]),
        ["doscientos"],
    ),
    ("translate: '10000' (digits out of range)", lambda: translator.translate(["10000"]), ERROR),
    ("translate: '-3'", lambda: translator.translate(["-3"]), ERROR),
    ("translate: '2.5'", lambda: translator.translate(["2.5"]), ERROR),
    (
        "translate: 'twenty-one hundred'",
        lambda: translator.translate(["twenty-one hundred"]),
        ERROR,
    ),
    ("translate: 'one one'", lambda: translator.translate(["one one"]), ERROR),
    ("translate: 2.0 (float)", lambda: translator.translate([2.0]), ERROR),
    ("translate: None", lambda: translator.translate([None]), ERROR),
    ("translate: True", lambda: translator.translate([True]), ERROR),
    ("translate: -1", lambda: translator.translate([-1]), ERROR),
    ("translate: beam_width=0", lambda: translator.translate([1], beam_width=0), ERROR),
    ("cross_attention: 'banana'", lambda: translator.cross_attention("banana"), ERROR),
    ("PositionalEncoding: int tensor", lambda: pe(torch.ones(1, 3, 8, dtype=torch.long)), ERROR),
    ("PositionalEncoding: bool tensor", lambda: pe(torch.ones(1, 3, 8, dtype=torch.bool)), ERROR),
    (
        "sdpa: mixed dtypes",
        lambda: A.scaled_dot_product_attention(
            torch.randn(2, 3, 4), torch.randn(2, 3, 4).double(), torch.randn(2, 3, 4)
        ),
        ERROR,
    ),
    (
        "sdpa: integer inputs",
        lambda: A.scaled_dot_product_attention(*(torch.ones(2, 3, 4, dtype=torch.long),) * 3),
        ERROR,
    ),
    (
        "sdpa: d_k = 0",
        lambda: A.scaled_dot_product_attention(
            torch.randn(2, 3, 0), torch.randn(2, 3, 0), torch.randn(2, 3, 4)
        ),
        ERROR,
    ),
    (
        "sdpa: mismatched batch",
        lambda: A.scaled_dot_product_attention(
            torch.randn(2, 3, 4), torch.randn(3, 3, 4), torch.randn(3, 3, 4)
        ),
        ERROR,
    ),
    (
        "sdpa: key/value batch differ",
        lambda: A.scaled_dot_product_attention(
            torch.randn(2, 3, 4), torch.randn(2, 3, 4), torch.randn(3, 3, 4)
        ),
        ERROR,
    ),
    ("MHA: float64 input", lambda: mha(x.double(), x.double(), x.double()), ERROR),
    (
        "MHA: float64 input, fused",
        lambda: mha(x.double(), x.double(), x.double(), need_weights=False),
        ERROR,
    ),
    ("MHA: integer input", lambda: mha(*(torch.ones(2, 3, 8, dtype=torch.long),) * 3), ERROR),
    ("EncoderLayer: float64 input", lambda: enc_layer(x.double()), ERROR),
    ("EncoderLayer pre-norm: float64 input", lambda: pre_layer(x.double()), ERROR),
    (
        "sequence_loss: label >= vocab",
        lambda: sequence_loss(logits, torch.tensor([[1, 7, 0], [3, 0, 0]])),
        ERROR,
    ),
    (
        "sequence_loss: negative label",
        lambda: sequence_loss(logits, torch.tensor([[1, -2, 0], [3, 0, 0]])),
        ERROR,
    ),
    (
        "sequence_loss: every label is padding",
        lambda: sequence_loss(logits, torch.zeros(2, 3, dtype=torch.long)),
        ERROR,
    ),
    ("sample: every score -inf", lambda: sample(minus_inf_scorer, bos, None, 3), ERROR),
    (
        "KeyValueCache.reorder: float index",
        lambda: cache_with().reorder(torch.tensor([0.0, 1.0])),
        ERROR,
    ),
    (
        "beam_search: pad_id out of range",
        lambda: beam_search(scorer, bos, 2, 3, beam_width=2, pad_id=99),
        ERROR,
    ),
    (
        "KeyValueCache: float64 after float32",
        lambda: cache_with().update(
            torch.randn(2, 2, 1, 4).double(), torch.randn(2, 2, 1, 4).double()
        ),
        ERROR,
    ),
    # ------------------------------------------------------------------ attention, beyond
    (
        "sdpa: 1-D query",
        lambda: A.scaled_dot_product_attention(
            torch.randn(4), torch.randn(3, 4), torch.randn(3, 4)
        ),
        ERROR,
    ),
    ("sdpa: list input", lambda: A.scaled_dot_product_attention([[1.0]], x, x), ERROR),
    (
        "sdpa: empty keys",
        lambda: A.scaled_dot_product_attention(
            torch.randn(2, 3, 4), torch.randn(2, 0, 4), torch.randn(2, 0, 4)
        ),
        ERROR,
    ),
    (
        "sdpa: d_k mismatch",
        lambda: A.scaled_dot_product_attention(
            torch.randn(2, 3, 4), torch.randn(2, 3, 5), torch.randn(2, 3, 4)
        ),
        ERROR,
    ),
    (
        "sdpa: L_k mismatch",
        lambda: A.scaled_dot_product_attention(
            torch.randn(2, 3, 4), torch.randn(2, 3, 4), torch.randn(2, 5, 4)
        ),
        ERROR,
    ),
    (
        "sdpa: int mask",
        lambda: A.scaled_dot_product_attention(x, x, x, mask=torch.ones(3, 3, dtype=torch.long)),
        ERROR,
    ),
    (
        "sdpa: float mask",
        lambda: A.scaled_dot_product_attention(x, x, x, mask=torch.zeros(3, 3)),
        ERROR,
    ),
    (
        "sdpa: mask wrong shape",
        lambda: A.scaled_dot_product_attention(x, x, x, mask=torch.ones(4, 4, dtype=torch.bool)),
        ERROR,
    ),
    (
        "sdpa: mask with an empty row",
        lambda: A.scaled_dot_product_attention(x, x, x, mask=torch.zeros(3, 3, dtype=torch.bool)),
        ERROR,
    ),
    ("sdpa: scale = nan", lambda: A.scaled_dot_product_attention(x, x, x, scale=math.nan), ERROR),
    ("sdpa: scale = 'big'", lambda: A.scaled_dot_product_attention(x, x, x, scale="big"), ERROR),
    (
        "sdpa: scale tensor of 2",
        lambda: A.scaled_dot_product_attention(x, x, x, scale=torch.ones(2)),
        ERROR,
    ),
    (
        "sdpa: complex inputs",
        lambda: A.scaled_dot_product_attention(*(torch.randn(2, 3, 4, dtype=torch.cfloat),) * 3),
        ERROR,
    ),
    (
        "sdpa: mask on query batch mismatch",
        lambda: A.scaled_dot_product_attention(x, x, x, mask=torch.ones(5, 3, 3, dtype=torch.bool)),
        ERROR,
    ),
    ("causal_mask: 0", lambda: A.causal_mask(0), ERROR),
    ("causal_mask: -1", lambda: A.causal_mask(-1), ERROR),
    ("causal_mask: 2.5", lambda: A.causal_mask(2.5), ERROR),
    ("causal_mask: num_keys < size", lambda: A.causal_mask(3, num_keys=2), ERROR),
    ("padding_mask: float ids", lambda: A.padding_mask(torch.zeros(2, 3), 0), ERROR),
    ("padding_mask: 1-D ids", lambda: A.padding_mask(torch.zeros(3, dtype=torch.long), 0), ERROR),
    (
        "padding_mask: pad_id 'x'",
        lambda: A.padding_mask(torch.zeros(2, 3, dtype=torch.long), "x"),
        ERROR,
    ),
    ("split_heads: 2-D", lambda: A.split_heads(torch.randn(3, 8), 2), ERROR),
    ("split_heads: not divisible", lambda: A.split_heads(x, 3), ERROR),
    ("split_heads: 0 heads", lambda: A.split_heads(x, 0), ERROR),
    ("split_heads: list", lambda: A.split_heads([[1.0]], 2), ERROR),
    ("merge_heads: 3-D", lambda: A.merge_heads(x), ERROR),
    ("merge_heads: list", lambda: A.merge_heads([1.0]), ERROR),
    ("MHA(d_model=0)", lambda: A.MultiHeadAttention(0, 1), ERROR),
    ("MHA(8, 3)", lambda: A.MultiHeadAttention(8, 3), ERROR),
    ("MHA(dropout=1.5)", lambda: A.MultiHeadAttention(8, 2, dropout=1.5), ERROR),
    ("MHA(dropout='a')", lambda: A.MultiHeadAttention(8, 2, dropout="a"), ERROR),
    ("MHA: 2-D input", lambda: mha(x[0], x[0], x[0]), ERROR),
    ("MHA: wrong d_model", lambda: mha(*(torch.randn(2, 3, 4),) * 3), ERROR),
    ("MHA: batch mismatch", lambda: mha(x, x[:1], x[:1]), ERROR),
    ("MHA: key/value length mismatch", lambda: mha(x, x, x[:, :2]), ERROR),
    ("MHA: empty key", lambda: mha(x, x[:, :0], x[:, :0]), ERROR),
    ("MHA: 5-D mask", lambda: mha(x, x, x, torch.ones(1, 1, 1, 3, 3, dtype=torch.bool)), ERROR),
    ("MHA: (batch, L_k) mask", lambda: mha(x, x, x, torch.ones(2, 3, dtype=torch.bool)), ERROR),
    ("MHA: float mask", lambda: mha(x, x, x, torch.zeros(3, 3)), ERROR),
    ("MHA: float mask fused", lambda: mha(x, x, x, torch.zeros(3, 3), need_weights=False), ERROR),
    (
        "MHA: empty mask row fused",
        lambda: mha(x, x, x, torch.zeros(3, 3, dtype=torch.bool), need_weights=False),
        ERROR,
    ),
    ("MHA.from_torch: Linear", lambda: A.MultiHeadAttention.from_torch(nn.Linear(2, 2)), ERROR),
    (
        "MHA.from_torch: kdim",
        lambda: A.MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, kdim=4)),
        ERROR,
    ),
    # ------------------------------------------------------------------ positional
    ("PE(d_model=7)", lambda: PositionalEncoding(7), ERROR),
    ("PE(max_len=0)", lambda: PositionalEncoding(8, max_len=0), ERROR),
    ("PE(dropout=-0.1)", lambda: PositionalEncoding(8, dropout=-0.1), ERROR),
    ("PE(dropout='x')", lambda: PositionalEncoding(8, dropout="x"), ERROR),
    ("PE(base=1)", lambda: PositionalEncoding(8, base=1), ERROR),
    ("PE: 2-D input", lambda: pe(torch.randn(3, 8)), ERROR),
    ("PE: wrong d_model", lambda: pe(torch.randn(1, 3, 6)), ERROR),
    ("PE: too long", lambda: pe(torch.randn(1, 11, 8)), ERROR),
    ("PE: start=-1", lambda: pe(torch.randn(1, 3, 8), start=-1), ERROR),
    ("PE: start=1.0", lambda: pe(torch.randn(1, 3, 8), start=1.0), ERROR),
    ("PE: list input", lambda: pe([[1.0]]), ERROR),
    ("sinusoidal_positional_encoding(0, 8)", lambda: sinusoidal_positional_encoding(0, 8), ERROR),
    (
        "sinusoidal_positional_encoding(dtype=long)",
        lambda: sinusoidal_positional_encoding(4, 8, dtype=torch.long),
        ERROR,
    ),
    ("angular_frequencies(dtype=int)", lambda: angular_frequencies(8, dtype=torch.int32), ERROR),
    ("angular_frequencies(-2)", lambda: angular_frequencies(-2), ERROR),
    ("offset_rotation(1.5, 8)", lambda: offset_rotation(1.5, 8), ERROR),
    # ------------------------------------------------------------------ embeddings
    ("TokenEmbedding(0, 8)", lambda: TokenEmbedding(0, 8), ERROR),
    ("TokenEmbedding padding_idx=10", lambda: TokenEmbedding(10, 8, padding_idx=10), ERROR),
    ("TokenEmbedding: float ids", lambda: emb(torch.zeros(2, 3)), ERROR),
    ("TokenEmbedding: id 10", lambda: emb(torch.tensor([[10]])), ERROR),
    ("TokenEmbedding: id -1", lambda: emb(torch.tensor([[-1]])), ERROR),
    ("TokenEmbedding: list", lambda: emb([[1, 2]]), ERROR),
    ("one_hot_lookup: float ids", lambda: one_hot_lookup(torch.zeros(2), torch.randn(4, 3)), ERROR),
    (
        "one_hot_lookup: id too big",
        lambda: one_hot_lookup(torch.tensor([5]), torch.randn(4, 3)),
        ERROR,
    ),
    (
        "one_hot_lookup: 1-D weight",
        lambda: one_hot_lookup(torch.tensor([1]), torch.randn(4)),
        ERROR,
    ),
    ("patchify: 3-D images", lambda: patchify(torch.randn(3, 8, 8), 4), ERROR),
    ("patchify: not divisible", lambda: patchify(torch.randn(1, 3, 8, 8), 3), ERROR),
    ("patchify: patch 0", lambda: patchify(torch.randn(1, 3, 8, 8), 0), ERROR),
    (
        "PatchEmbedding: wrong channels",
        lambda: PatchEmbedding(3, 4, 8)(torch.randn(1, 1, 8, 8)),
        ERROR,
    ),
    # ------------------------------------------------------------------ feed-forward, layers
    ("FeedForward(activation='tanh')", lambda: FeedForward(8, 16, activation="tanh"), ERROR),
    ("FeedForward(d_ff=0)", lambda: FeedForward(8, 0), ERROR),
    ("FeedForward: wrong d_model", lambda: ffn(torch.randn(2, 3, 4)), ERROR),
    ("FeedForward: float64 input", lambda: ffn(x.double()), ERROR),
    ("FeedForward: integer input", lambda: ffn(torch.ones(2, 3, 8, dtype=torch.long)), ERROR),
    ("FeedForward: list", lambda: ffn([1.0] * 8), ERROR),
    ("EncoderLayer(8, 3, 16)", lambda: EncoderLayer(8, 3, 16), ERROR),
    ("EncoderLayer(norm eps=-1)", lambda: EncoderLayer(8, 2, 16, layer_norm_eps=-1), ERROR),
    ("EncoderLayer: 2-D input", lambda: enc_layer(x[0]), ERROR),
    ("EncoderLayer: empty sequence", lambda: enc_layer(x[:, :0]), ERROR),
    ("EncoderLayer: int input", lambda: enc_layer(torch.ones(2, 3, 8, dtype=torch.long)), ERROR),
    ("EncoderLayer: ids", lambda: enc_layer(torch.ones(2, 3, dtype=torch.long)), ERROR),
    (
        "EncoderLayer: mask (batch, L)",
        lambda: enc_layer(x, torch.ones(2, 3, dtype=torch.bool)),
        ERROR,
    ),
    ("EncoderLayer: float mask", lambda: enc_layer(x, torch.zeros(3, 3)), ERROR),
    ("EncoderLayer: nan input", lambda: enc_layer(torch.full((2, 3, 8), math.nan)), ERROR),
    ("Encoder: float64 input", lambda: encoder(x.double()), ERROR),
    ("Encoder(num_layers=0)", lambda: Encoder(0, 8, 2, 16), ERROR),
    ("DecoderLayer: float64 x", lambda: dec_layer(x.double(), x), ERROR),
    ("DecoderLayer: float64 memory", lambda: dec_layer(x, x.double()), ERROR),
    ("DecoderLayer: batch mismatch", lambda: dec_layer(x, x[:1]), ERROR),
    ("DecoderLayer: memory d_model", lambda: dec_layer(x, torch.randn(2, 3, 4)), ERROR),
    (
        "DecoderLayer: tgt_mask shape",
        lambda: dec_layer(x, x, torch.ones(2, 2, dtype=torch.bool)),
        ERROR,
    ),
    ("Decoder: float64 x", lambda: decoder(x.double(), x), ERROR),
    ("Decoder: memory not a tensor", lambda: decoder(x, None), ERROR),
    (
        "EncoderLayer.from_torch: SiLU",
        lambda: EncoderLayer.from_torch(layer_64("enc", activation=nn.SiLU())),
        ERROR,
    ),
    (
        "DecoderLayer.from_torch: lambda",
        lambda: DecoderLayer.from_torch(layer_64("dec", activation=lambda t: t.relu())),
        ERROR,
    ),
    (
        "EncoderLayer.from_torch: nn.GELU(tanh)",
        lambda: _matches_torch(layer_64("enc", activation=nn.GELU(approximate="tanh"))),
        True,
    ),
    (
        "DecoderLayer.from_torch: nn.ReLU()",
        lambda: _matches_torch(layer_64("dec", activation=nn.ReLU())),
        True,
    ),
    (
        "DecoderLayer.from_torch: nn.GELU()",
        lambda: _matches_torch(layer_64("dec", activation=nn.GELU())),
        True,
    ),
    (
        "EncoderLayer.from_torch: bias=False",
        lambda: EncoderLayer.from_torch(layer_64("enc", bias=False)),
        ERROR,
    ),
    (
        "EncoderLayer.from_torch: decoder layer",
        lambda: EncoderLayer.from_torch(layer_64("dec")),
        ERROR,
    ),
    ("Encoder.from_torch: a layer", lambda: Encoder.from_torch(layer_64("enc")), ERROR),
    # ------------------------------------------------------------------ transformer
    (
        "Transformer(tie 'all', sizes differ)",
        lambda: Transformer(10, 12, tie_embeddings="all"),
        ERROR,
    ),
    (
        "Transformer(pad_id=20)",
        lambda: Transformer(12, 12, d_model=8, num_heads=2, pad_id=20),
        ERROR,
    ),
    ("Transformer(d_model=7)", lambda: Transformer(12, 12, d_model=7, num_heads=1), ERROR),
    ("Transformer: 1-D src", lambda: model(torch.tensor([1, 2]), torch.tensor([[1, 2]])), ERROR),
    ("Transformer: float ids", lambda: model(torch.ones(1, 2), torch.ones(1, 2)), ERROR),
    ("Transformer: id >= vocab", lambda: model(torch.tensor([[13]]), torch.tensor([[1]])), ERROR),
    (
        "Transformer: batch mismatch",
        lambda: model(torch.ones(2, 2, dtype=torch.long), torch.ones(3, 2, dtype=torch.long)),
        ERROR,
    ),
    (
        "Transformer: too long",
        lambda: model(torch.ones(1, 25, dtype=torch.long), torch.ones(1, 2, dtype=torch.long)),
        ERROR,
    ),
    (
        "Transformer: empty src",
        lambda: model(torch.ones(1, 0, dtype=torch.long), torch.ones(1, 2, dtype=torch.long)),
        ERROR,
    ),
    (
        "Transformer: all-padding source",
        lambda: model(torch.zeros(1, 3, dtype=torch.long), torch.ones(1, 2, dtype=torch.long)),
        ERROR,
    ),
    (
        "Transformer.decode: memory batch mismatch",
        lambda: model.decode(torch.ones(2, 2, dtype=torch.long), torch.randn(3, 2, 8), None),
        ERROR,
    ),
    (
        "Transformer.decode: float64 memory",
        lambda: model.decode(
            torch.ones(2, 2, dtype=torch.long), torch.randn(2, 2, 8).double(), None
        ),
        ERROR,
    ),
    (
        "Transformer.from_torch: Linear",
        lambda: Transformer.from_torch(nn.Linear(2, 2), 5, 5),
        ERROR,
    ),
    # ------------------------------------------------------------------ cache
    (
        "KeyValueCache.update: 3-D",
        lambda: KeyValueCache().update(torch.randn(2, 1, 4), torch.randn(2, 1, 4)),
        ERROR,
    ),
    ("KeyValueCache.update: list", lambda: KeyValueCache().update([1.0], [1.0]), ERROR),
    (
        "KeyValueCache.update: int keys",
        lambda: KeyValueCache().update(
            torch.ones(2, 2, 1, 4, dtype=torch.long), torch.ones(2, 2, 1, 4, dtype=torch.long)
        ),
        ERROR,
    ),
    (
        "KeyValueCache.update: keys/values dtype differ",
        lambda: KeyValueCache().update(torch.randn(2, 2, 1, 4), torch.randn(2, 2, 1, 4).double()),
        ERROR,
    ),
    (
        "KeyValueCache.update: batch changes",
        lambda: cache_with().update(torch.randn(3, 2, 1, 4), torch.randn(3, 2, 1, 4)),
        ERROR,
    ),
    ("KeyValueCache.reorder: index 5", lambda: cache_with().reorder(torch.tensor([0, 5])), ERROR),
    ("KeyValueCache.reorder: index -1", lambda: cache_with().reorder(torch.tensor([0, -1])), ERROR),
    (
        "KeyValueCache.reorder: 2-D index",
        lambda: cache_with().reorder(torch.tensor([[0, 1]])),
        ERROR,
    ),
    ("KeyValueCache.reorder: list", lambda: cache_with().reorder([0, 1]), ERROR),
    (
        "KeyValueCache.reorder: bool index",
        lambda: cache_with().reorder(torch.tensor([True, False])),
        ERROR,
    ),
    ("DecoderCache(0)", lambda: DecoderCache(0), ERROR),
    (
        "DecoderCache.reorder: float index",
        lambda: filled_decoder_cache().reorder(torch.tensor([0.0, 1.0])),
        ERROR,
    ),
    (
        "DecoderCache.reorder: index 9",
        lambda: filled_decoder_cache().reorder(torch.tensor([0, 9])),
        ERROR,
    ),
    # ------------------------------------------------------------------ decoding
    ("greedy: 1-D prompt", lambda: greedy_decode(scorer, torch.tensor([1]), 2, 3), ERROR),
    ("greedy: float prompt", lambda: greedy_decode(scorer, torch.ones(2, 1), 2, 3), ERROR),
    ("greedy: max_new_tokens 0", lambda: greedy_decode(scorer, bos, 2, 0), ERROR),
    ("greedy: eos_id 99", lambda: greedy_decode(scorer, bos, 99, 3), ERROR),
    ("greedy: pad_id -1", lambda: greedy_decode(scorer, bos, 2, 3, pad_id=-1), ERROR),
    ("greedy: pad_id 99", lambda: greedy_decode(scorer, bos, 2, 3, pad_id=99), ERROR),
    ("greedy: every score -inf", lambda: greedy_decode(minus_inf_scorer, bos, 2, 3), ERROR),
    ("greedy: NaN scores", lambda: greedy_decode(nan_scorer, bos, 2, 3), ERROR),
    (
        "greedy: scorer returns 3-D",
        lambda: greedy_decode(lambda ids: torch.randn(ids.size(0), 1, 6), bos, 2, 3),
        ERROR,
    ),
    ("greedy: scorer returns a list", lambda: greedy_decode(lambda ids: [0.0], bos, 2, 3), ERROR),
    ("beam: width 0", lambda: beam_search(scorer, bos, 2, 3, beam_width=0), ERROR),
    ("beam: width > vocab", lambda: beam_search(scorer, bos, 2, 3, beam_width=7), ERROR),
    ("beam: pad_id -1", lambda: beam_search(scorer, bos, 2, 3, beam_width=2, pad_id=-1), ERROR),
    ("beam: eos_id 99", lambda: beam_search(scorer, bos, 99, 3, beam_width=2), ERROR),
    (
        "beam: every score -inf",
        lambda: beam_search(minus_inf_scorer, bos, 2, 3, beam_width=2),
        ERROR,
    ),
    ("beam: NaN scores", lambda: beam_search(nan_scorer, bos, 2, 3, beam_width=2), ERROR),
    ("sample: NaN scores", lambda: sample(nan_scorer, bos, None, 3), ERROR),
    ("sample: temperature 0", lambda: sample(scorer, bos, None, 3, temperature=0), ERROR),
    ("sample: temperature inf", lambda: sample(scorer, bos, None, 3, temperature=math.inf), ERROR),
    ("sample: pad_id 99", lambda: sample(scorer, bos, 2, 3, pad_id=99), ERROR),
    ("sample: eos_id -5", lambda: sample(scorer, bos, -5, 3), ERROR),
    ("sample: generator not a Generator", lambda: sample(scorer, bos, None, 3, generator=1), ERROR),
    # ------------------------------------------------------------------ training
    ("sequence_loss: float labels", lambda: sequence_loss(logits, labels.float()), ERROR),
    ("sequence_loss: shape mismatch", lambda: sequence_loss(logits, labels[:, :2]), ERROR),
    ("sequence_loss: 2-D logits", lambda: sequence_loss(logits[0], labels[0]), ERROR),
    ("sequence_loss: list labels", lambda: sequence_loss(logits, [[1, 2, 0], [3, 0, 0]]), ERROR),
    (
        "sequence_loss: smoothing 1.5",
        lambda: sequence_loss(logits, labels, label_smoothing=1.5),
        ERROR,
    ),
    ("sequence_loss: int logits", lambda: sequence_loss(logits.long(), labels), ERROR),
    (
        "sequence_loss: label >= vocab, pad None",
        lambda: sequence_loss(logits, torch.tensor([[1, 5, 0], [3, 0, 0]]), pad_id=None),
        ERROR,
    ),
    (
        "sequence_loss: NaN logits",
        lambda: sequence_loss(torch.full((2, 3, 5), math.nan), labels),
        ERROR,
    ),
    (
        "label_smoothed_loss: label >= vocab",
        lambda: label_smoothed_loss(logits, torch.tensor([[1, 7, 0], [3, 0, 0]]), 0.1),
        ERROR,
    ),
    (
        "label_smoothed_loss: every label is padding",
        lambda: label_smoothed_loss(logits, torch.zeros(2, 3, dtype=torch.long), 0.1),
        ERROR,
    ),
    ("label_smoothed_loss: list labels", lambda: label_smoothed_loss(logits, [[1]], 0.1), ERROR),
    ("smoothed_targets: label 9 of 5", lambda: smoothed_targets(torch.tensor([9]), 5, 0.1), ERROR),
    ("smoothed_targets: list", lambda: smoothed_targets([1, 2], 5, 0.1), ERROR),
    (
        "teacher_forcing: 1 column",
        lambda: teacher_forcing(torch.ones(2, 1, dtype=torch.long)),
        ERROR,
    ),
    ("teacher_forcing: float ids", lambda: teacher_forcing(torch.ones(2, 3)), ERROR),
    ("transformer_schedule(step=0)", lambda: transformer_schedule(0, 512), ERROR),
    # ------------------------------------------------------------------ data, vocab, families
    ("english_number_name(10000)", lambda: english_number_name(10000), ERROR),
    ("spanish_number_name('5')", lambda: spanish_number_name("5"), ERROR),
    ("number_tokens(5)", lambda: number_tokens(5), ERROR),
    ("Vocabulary(['<pad>'])", lambda: Vocabulary(["<pad>"]), ERROR),
    ("Vocabulary(['a', 'a'])", lambda: Vocabulary(["a", "a"]), ERROR),
    ("Vocabulary.encode('a b')", lambda: Vocabulary(["a"]).encode("a b"), ERROR),
    ("Vocabulary.decode([99])", lambda: Vocabulary(["a"]).decode([99]), ERROR),
    ("pad_batch([])", lambda: pad_batch([]), ERROR),
    ("pad_batch([[1.5]])", lambda: pad_batch([[1.5]]), ERROR),
    (
        "EncoderOnlyModel: id 99",
        lambda: EncoderOnlyModel(12, d_model=8, num_heads=2)(torch.tensor([[99]])),
        ERROR,
    ),
    (
        "EncoderOnlyModel(positions='rope')",
        lambda: EncoderOnlyModel(12, d_model=8, num_heads=2, positions="rope"),
        ERROR,
    ),
    ("DecoderOnlyModel: 1-D ids", lambda: gpt(torch.tensor([1, 2])), ERROR),
    (
        "mask_tokens: all padding",
        lambda: mask_tokens(torch.zeros(2, 3, dtype=torch.long), 5),
        ERROR,
    ),
    ("mask_tokens: float ids", lambda: mask_tokens(torch.ones(2, 3), 5), ERROR),
    # ------------------------------------------------------------------ more modules
    (
        "Transformer.decode: cache of another size",
        lambda: model.decode(
            torch.ones(2, 1, dtype=torch.long), torch.randn(2, 2, 8), None, cache=DecoderCache(3)
        ),
        ERROR,
    ),
    (
        "Transformer.decode: src_mask of another batch",
        lambda: model.decode(
            torch.ones(2, 2, dtype=torch.long),
            torch.randn(2, 2, 8),
            torch.ones(3, 1, 2, dtype=torch.bool),
        ),
        ERROR,
    ),
    (
        "Transformer.decode: float src_mask",
        lambda: model.decode(
            torch.ones(2, 2, dtype=torch.long), torch.randn(2, 2, 8), torch.ones(2, 1, 2)
        ),
        ERROR,
    ),
    (
        "Transformer.encode: src_mask (batch, L)",
        lambda: model.encode(
            torch.ones(2, 3, dtype=torch.long), torch.ones(2, 3, dtype=torch.bool)
        ),
        ERROR,
    ),
    (
        "TranslationScorer: nn.Transformer",
        lambda: TranslationScorer(
            nn.Transformer(8, 2, 1, 1, 16), torch.ones(1, 2, dtype=torch.long)
        ),
        ERROR,
    ),
    ("TranslationScorer: ids not continuing", lambda: _scorer_twice(), ERROR),
    ("DecoderOnlyModel: float ids", lambda: gpt(torch.ones(1, 3)), ERROR),
    ("DecoderOnlyModel: empty ids", lambda: gpt(torch.ones(1, 0, dtype=torch.long)), ERROR),
    (
        "DecoderOnlyModel: too long",
        lambda: DecoderOnlyModel(12, d_model=8, num_heads=2, max_len=4)(
            torch.ones(1, 5, dtype=torch.long)
        ),
        ERROR,
    ),
    ("pad_batch(pad_id=1.5)", lambda: pad_batch([[1]], pad_id=1.5), ERROR),
    ("pad_batch([[1], 'ab'])", lambda: pad_batch([[1], "ab"]), ERROR),
    ("pad_batch: 2-D tensor row", lambda: pad_batch([torch.ones(2, 2, dtype=torch.long)]), ERROR),
    ("Vocabulary.token_to_id(5)", lambda: Vocabulary(["a"]).token_to_id(5), ERROR),
    (
        "Vocabulary.decode: 2-D tensor",
        lambda: Vocabulary(["a"]).decode(torch.zeros(2, 2, dtype=torch.long)),
        ERROR,
    ),
    ("Vocabulary.from_corpus('a b')", lambda: Vocabulary.from_corpus("a b"), ERROR),
    ("train_bpe(vocab_size=10)", lambda: train_bpe(["ab"], 10), ERROR),
    ("train_bpe('text')", lambda: train_bpe("some text", 300), ERROR),
    ("BytePairEncoding.decode([99999])", lambda: _bpe().decode([99999]), ERROR),
    ("BytePairEncoding.encode(5)", lambda: _bpe().encode(5), ERROR),
    ("skipgram_pairs(window=0)", lambda: skipgram_pairs([[1, 2, 3]], 0), ERROR),
    ("skipgram_pairs: float ids", lambda: skipgram_pairs([[1.5, 2.0]], 1), ERROR),
    (
        "negative_sampling_loss: shapes",
        lambda: negative_sampling_loss(torch.randn(4, 3), torch.randn(4, 2), torch.randn(4, 5, 3)),
        ERROR,
    ),
    ("SkipGram(vocab_size=0)", lambda: SkipGram(0, 4), ERROR),
    (
        "noise_distribution: negative counts",
        lambda: noise_distribution(torch.tensor([1.0, -2.0])),
        ERROR,
    ),
    ("noise_distribution: all zero", lambda: noise_distribution(torch.zeros(3)), ERROR),
    ("rnn_stepwise: 2-D x", lambda: rnn_stepwise(torch.randn(3, 4), nn.RNNCell(4, 5)), ERROR),
    (
        "rnn_stepwise: wrong features",
        lambda: rnn_stepwise(torch.randn(2, 3, 6), nn.RNNCell(4, 5)),
        ERROR,
    ),
    ("rnn_matmul_flops(batch=-1)", lambda: rnn_matmul_flops(-1, 3, 4, 5), ERROR),
    ("frame_signal: hop 0", lambda: frame_signal(torch.randn(100), 10, 0), ERROR),
    ("frame_signal: too short", lambda: frame_signal(torch.randn(5), 10, 5), ERROR),
    ("kmeans: k > points", lambda: kmeans(torch.randn(3, 2), 5), ERROR),
    ("kmeans: NaN points", lambda: kmeans(torch.full((6, 2), math.nan), 2), ERROR),
    ("overlap_add: 1-D frames", lambda: overlap_add(torch.randn(10), 5), ERROR),
    (
        "reconstruction_snr: shapes",
        lambda: reconstruction_snr(torch.randn(10), torch.randn(9)),
        ERROR,
    ),
    (
        "fit: batch_size 0",
        lambda: fit(
            nn.Linear(2, 2),
            (torch.randn(4, 2),),
            lambda b: b.sum(),
            epochs=1,
            batch_size=0,
            learning_rate=0.1,
        ),
        ERROR,
    ),
    (
        "fit: data of different lengths",
        lambda: fit(
            nn.Linear(2, 2),
            (torch.randn(4, 2), torch.randn(3, 2)),
            lambda a, b: a.sum(),
            epochs=1,
            batch_size=2,
            learning_rate=0.1,
        ),
        ERROR,
    ),
    (
        "fit: loss not a scalar",
        lambda: fit(
            linear,
            (torch.randn(4, 2),),
            linear,
            epochs=1,
            batch_size=2,
            learning_rate=0.1,
        ),
        ERROR,
    ),
]


def _scorer_twice():
    scorer = TranslationScorer(model, torch.tensor([[4, 5], [6, 7]]))
    scorer(bos)
    return scorer(torch.full((2, 2), 3))


def _bpe():
    return train_bpe(["low lower lowest"] * 3, 260)


def _matches_torch(layer: nn.Module) -> bool:
    """Whether our copy of ``layer`` (a PyTorch layer) gives PyTorch's output."""
    layer.train()  # no fast path: PyTorch's own code, with its own activation
    ours = EncoderLayer if isinstance(layer, nn.TransformerEncoderLayer) else DecoderLayer
    copy = ours.from_torch(layer)
    inputs = (x,) if ours is EncoderLayer else (x, torch.randn(2, 4, 8))
    return torch.allclose(copy(*inputs), layer(*inputs), atol=1e-6)


def outcome(probe: Callable[[], object], expected: object) -> tuple[bool, str]:
    """``(clear, what happened)`` for one probe."""
    try:
        result = probe()
    except CLEAR_ERRORS as error:
        frame = traceback.extract_tb(error.__traceback__)[-1]
        where = frame.filename
        ours = where.startswith(LIBRARY) and (frame.line or "").startswith("raise")
        text = f"{type(error).__name__}: {error}"
        if expected is not ERROR:
            return False, f"refused an input it should accept: {text}"
        return ours, text if ours else f"deep in {Path(where).name}: {text}"
    except Exception as error:
        where = traceback.extract_tb(error.__traceback__)[-1].filename
        return False, f"deep in {Path(where).name}: {type(error).__name__}: {error}"
    if expected is ERROR:
        return False, f"silent: returned {_short(result)}"
    return result == expected, f"accepted: {_short(result)}"


def _short(value: object) -> str:
    text = repr(value).replace("\n", " ")
    return text if len(text) < 100 else text[:97] + "..."


def main() -> None:
    verbose = "-v" in sys.argv
    clear = 0
    for label, probe, expected in PROBES:
        ok, text = outcome(probe, expected)
        clear += ok
        if verbose or not ok:
            print(f"{'ok  ' if ok else 'FAIL'} {label}: {text.splitlines()[0][:300]}")
    print(f"{clear} of {len(PROBES)} probes give a clear message (or the right answer)")


if __name__ == "__main__":
    main()
