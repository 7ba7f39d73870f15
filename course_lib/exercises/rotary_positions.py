"""Exercises of the chapter "Rotary positions" (``chapters/rotary-positions.ipynb``)."""

from __future__ import annotations

CHAPTER = "rotary-positions"
