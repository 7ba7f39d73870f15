"""The explorers of the chapters, one module per part of the book, on one engine.

- :mod:`course_lib.explorers.base` -- the engine: controls and parts, live in a kernel and
  stored states that move in the HTML book;
- :mod:`course_lib.explorers.foundations` -- tokens from a signal, word vectors, positional
  encoding;
- :mod:`course_lib.explorers.attention` -- one attention layer's weights, for any sentence;
- :mod:`course_lib.explorers.building` -- norm order, a token's path through an encoder, a
  decoder position;
- :mod:`course_lib.explorers.at_work` -- translation, the training recipe, decoding and
  sampling;
- :mod:`course_lib.explorers.beyond` -- rotated query and key pairs, LayerNorm against
  RMSNorm, sliding windows and key/value caches, a decoder changed into a Llama.

Core ipywidgets only, so that they run in Colab (ipywidgets 7.7) and in Jupyter (8).
"""

from course_lib.explorers.base import (
    Control,
    Explorer,
    Part,
    book_mode,
    figure_part,
    menu,
    slider,
    switch,
    text_box,
    text_part,
)

__all__ = [
    "Control",
    "Explorer",
    "Part",
    "book_mode",
    "figure_part",
    "menu",
    "slider",
    "switch",
    "text_box",
    "text_part",
]
