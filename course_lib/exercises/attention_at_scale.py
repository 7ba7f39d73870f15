"""Exercises of the chapter "Attention for long contexts"
(``chapters/attention-at-scale.ipynb``)."""

from __future__ import annotations

CHAPTER = "attention-at-scale"
