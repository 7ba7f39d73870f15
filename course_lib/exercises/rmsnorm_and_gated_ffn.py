"""Exercises of the chapter "RMSNorm and gated feed-forward layers"
(``chapters/rmsnorm-and-gated-ffn.ipynb``)."""

from __future__ import annotations

CHAPTER = "rmsnorm-and-gated-ffn"
