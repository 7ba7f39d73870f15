"""course_lib: the tested Transformer components that every chapter of the course imports.

The package is built in layers. A module imports from its own layer and the layers above it
in this list, never from one below (``tests/test_package_layers.py`` checks it, and that no
two modules import each other, directly or through others). All tensors are batch-first:
``(batch, seq, d_model)``.

**Foundations**, used by every layer:

- :mod:`course_lib._checks` -- argument checks whose messages name the argument, what was
  expected and what came;
- :mod:`course_lib._devices` -- tensors made on a model's device, random draws with a
  generator of any device, CPU threads.

**Data and tokenization**, text and signals to ids:

- :mod:`course_lib.vocab` -- a vocabulary with the special tokens pad, bos, eos, unk, and
  padded batches with their masks;
- :mod:`course_lib.tokenization` -- byte-level byte-pair encoding, the vocabulary-size
  trade-off;
- :mod:`course_lib.data` -- the data the course generates itself (a synthetic grammar, number
  names in English and Spanish);
- :mod:`course_lib.discretize` -- a signal to tokens: frames, a k-means codebook, overlap-add;
- :mod:`course_lib.corpus` -- real English from the running interpreter: the standard
  library's docstrings and the pydoc topics, read without importing, split by document.

**Model components**, ``torch`` alone (no plotting, no widgets):

- :mod:`course_lib.embeddings` -- token embeddings, the lookup as one-hot times a matrix,
  image patch embeddings;
- :mod:`course_lib.positional` -- sinusoidal positional encoding;
- :mod:`course_lib.rotary` -- rotary positions: queries and keys turned by their positions;
- :mod:`course_lib.attention` -- scaled dot-product attention, its masks, multi-head
  attention (grouped-query, rotary), tiled attention with an online softmax;
- :mod:`course_lib.feedforward` -- the position-wise feed-forward network and the gated one;
- :mod:`course_lib.normalization` -- RMSNorm;
- :mod:`course_lib.encoder` -- encoder layers and the stack both encoder and decoder are;
- :mod:`course_lib.decoder` -- decoder layers (masked self-attention, cross-attention,
  feed-forward) and the decoder stack;
- :mod:`course_lib.transformer` -- the encoder-decoder Transformer, from ids to logits;
- :mod:`course_lib.cache` -- the key/value cache of incremental decoding;
- :mod:`course_lib.decoding` -- greedy decoding, beam search, sampling;
- :mod:`course_lib.families` -- encoder-only (BERT-like) and decoder-only (GPT-like)
  models, a classification head, the options of GPT-2, BERT and Llama;
- :mod:`course_lib.huggingface` -- GPT-2, BERT and Llama weights from Hugging Face
  ``transformers`` (which course_lib does not require), mapped to ours; the one import that
  goes back (``from_hf``/``to_hf`` of the model families import it when called, as nanoGPT's
  ``from_pretrained`` does);
- :mod:`course_lib.recurrence` -- an RNN stepping through a sequence against
  self-attention: outputs, operation counts, timings.

**Training**, models fitted to data:

- :mod:`course_lib.training` -- teacher forcing, the sequence loss (label smoothing
  optional), the one training loop, the paper's learning-rate schedule;
- :mod:`course_lib.calibration` -- whether a model is right as often as it is sure:
  reliability bins and the expected calibration error;
- :mod:`course_lib.objectives` -- masked-token, next-token and label training of the model
  families;
- :mod:`course_lib.word2vec` -- skip-gram and CBOW;
- :mod:`course_lib.translation` -- the English-to-Spanish number translator and its
  shipped checkpoint;
- :mod:`course_lib.lm_tasks` -- the course's tasks framed for a decoder-only model;
- :mod:`course_lib.ngram` -- byte n-gram models smoothed by interpolated Kneser-Ney, the
  baseline in bits per byte;
- :mod:`course_lib.language_model` -- the part on a language model trained on real text: its
  corpus and its baselines.

**Presentation**, what the book shows:

- :mod:`course_lib.plotting` -- the chapters' figures and the book's figure style;
- :mod:`course_lib.diagrams` -- the architecture diagram and the map of the course;
- :mod:`course_lib.explorers` -- the chapters' explorers (ipywidgets 7.7 and 8), live in a
  kernel, moving from stored states in the book;
- :mod:`course_lib.notebook` -- helpers for the chapter notebooks (``show_source``, ...);
- ``_html`` and ``_layout`` -- the HTML and the widget layout they share.

**The answers engine** (:mod:`course_lib.answers`): how an answer to a code exercise runs,
in a limited process of its own, and is judged. It imports nothing else of course_lib: its
runner is a script of the standard library and torch that grading runs inside a sandbox.

**Exercises** (:mod:`course_lib.exercises`): the exercises, the student's ``check``, hints,
progress and the submission file.

**Grading** (:mod:`course_lib.grading`): the instructor's ``course-grade``: sandbox,
gradebook, reports.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
