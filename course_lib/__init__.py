"""course_lib: the tested Transformer components that every chapter of the course imports.

Modules, one concept each:

- :mod:`course_lib.vocab` -- a vocabulary with the special tokens pad, bos, eos, unk, and
  padded batches with their masks;
- :mod:`course_lib.tokenization` -- subword tokens: byte-level byte-pair encoding (learn
  merges from a corpus, encode, decode, no unknown token), the vocabulary-size trade-off;
- :mod:`course_lib.embeddings` -- token embeddings (a trainable lookup table, optionally scaled
  by sqrt(d_model)), the lookup as one-hot times a matrix, image patch embeddings;
- :mod:`course_lib.word2vec` -- skip-gram and CBOW with negative sampling or the full softmax,
  nearest neighbours, 2-D projections;
- :mod:`course_lib.positional` -- sinusoidal positional encoding;
- :mod:`course_lib.rotary` -- rotary positions: queries and keys turned by their positions;
- :mod:`course_lib.attention` -- scaled dot-product attention, causal, padding and
  sliding-window masks, multi-head attention (with grouped-query or multi-query key/value
  heads and rotary positions as options), tiled attention with an online softmax;
- :mod:`course_lib.feedforward` -- the position-wise feed-forward network, and the gated one
  (SwiGLU);
- :mod:`course_lib.normalization` -- RMSNorm, layer normalization without the centring;
- :mod:`course_lib.encoder` -- encoder layers (self-attention and feed-forward, each with
  Add & Norm, post- or pre-norm) and the encoder stack;
- :mod:`course_lib.decoder` -- decoder layers (masked self-attention, cross-attention,
  feed-forward) and the decoder stack;
- :mod:`course_lib.transformer` -- the encoder-decoder Transformer, from token ids to
  next-token logits;
- :mod:`course_lib.cache` -- the key/value cache of incremental decoding;
- :mod:`course_lib.decoding` -- greedy decoding, beam search, sampling with a temperature;
- :mod:`course_lib.training` -- teacher forcing, the sequence loss (label smoothing
  optional), a seeded training loop, the paper's learning-rate schedule;
- :mod:`course_lib.translation` -- the English-to-Spanish number translator and its
  shipped checkpoint;
- :mod:`course_lib.families` -- encoder-only (BERT-like) and decoder-only (GPT-like) models,
  masked-token and next-token training, a classification head for fine-tuning, and the
  options of GPT-2, BERT and Llama;
- :mod:`course_lib.lm_tasks` -- the course's tasks framed for a decoder-only model (digit
  reversal by length, number names), training on the answers, exact match;
- :mod:`course_lib.huggingface` -- GPT-2, BERT and Llama from Hugging Face ``transformers``
  (which course_lib does not require): the names and shapes of their weights, mapped to ours;
- :mod:`course_lib.recurrence` -- an RNN stepping through a sequence against self-attention:
  outputs, operation counts and timings;
- :mod:`course_lib.discretize` -- a signal to tokens: frames, a k-means codebook, overlap-add;
- :mod:`course_lib.data` -- the data the course generates itself (a synthetic grammar, number
  names in English and Spanish);
- :mod:`course_lib.diagrams` -- the architecture diagram and the map of the course;
- :mod:`course_lib.plotting` -- the figures the chapters draw, and the book's figure style
  (text large enough to read in the book, measured on every figure shown);
- :mod:`course_lib.explorers` -- the chapters' explorers, one module per part (core
  ipywidgets only, 7.7 and 8): live in a kernel, moving from stored states in the book;
- :mod:`course_lib.notebook` -- helpers for the chapter notebooks;
- :mod:`course_lib.exercises` -- the exercises, their checks and the submission file;
- :mod:`course_lib.grading` -- the instructors' grader (`course-grade`): sandbox, gradebook.

All tensors are batch-first: ``(batch, seq, d_model)``.
"""

__version__ = "0.1.0"

from course_lib import attention, positional

__all__ = ["__version__", "attention", "positional"]
