"""course_lib: the tested Transformer components that every chapter of the course imports.

Modules, one concept each:

- :mod:`course_lib.positional` -- sinusoidal positional encoding;
- :mod:`course_lib.attention` -- scaled dot-product attention, causal and padding masks,
  multi-head attention;
- :mod:`course_lib.feedforward` -- the position-wise feed-forward network;
- :mod:`course_lib.encoder` -- encoder layers (self-attention and feed-forward, each with
  Add & Norm, post- or pre-norm) and the encoder stack;
- :mod:`course_lib.decoder` -- decoder layers (masked self-attention, cross-attention,
  feed-forward) and the decoder stack;
- :mod:`course_lib.transformer` -- the encoder-decoder Transformer, from token ids to
  next-token logits;
- :mod:`course_lib.plotting` -- the figures the chapters draw;
- :mod:`course_lib.widgets` -- interactive explorers (core ipywidgets only, 7.7 and 8);
- :mod:`course_lib.notebook` -- helpers for the chapter notebooks;
- :mod:`course_lib.exercises` -- the exercises, their checks and the submission file.

All tensors are batch-first: ``(batch, seq, d_model)``.
"""

__version__ = "0.1.0"

from course_lib import attention, positional

__all__ = ["__version__", "attention", "positional"]
