"""Exercises of the chapter "A modern decoder" (``chapters/a-modern-decoder.ipynb``)."""

from __future__ import annotations

CHAPTER = "a-modern-decoder"
