"""A language model trained on real text: the part of the book that leaves generated data.

The corpus is the English the running interpreter carries, the standard library's docstrings
and the language reference by topic (:mod:`course_lib.corpus`), split by document into
training, validation and test text; the yardstick is bits per byte, which any tokenizer can be
measured by, and the baseline to beat is what counting bytes achieves on the same splits
(:mod:`course_lib.ngram`). This module gathers what a chapter of that part imports:

- :func:`corpus` and :func:`corpus_info` -- a split's text, and what was read to build it;
- :class:`ByteNGram`, :func:`ngram_baselines` and :func:`baseline_table` -- byte n-gram
  models smoothed by interpolated Kneser-Ney, and their bits per byte for orders 1 to 5.
"""

from __future__ import annotations

from course_lib.corpus import SPLITS, CorpusInfo, corpus, corpus_info
from course_lib.ngram import ByteNGram, NGramBaseline, baseline_table, ngram_baselines

__all__ = [
    "SPLITS",
    "ByteNGram",
    "CorpusInfo",
    "NGramBaseline",
    "baseline_table",
    "corpus",
    "corpus_info",
    "ngram_baselines",
]
