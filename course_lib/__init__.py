"""course_lib: the tested Transformer components that every chapter of the course imports.

Modules, one concept each:

- :mod:`course_lib.positional` -- sinusoidal positional encoding;
- :mod:`course_lib.attention` -- scaled dot-product attention, causal and padding masks,
  multi-head attention;
- :mod:`course_lib.plotting` -- the figures the chapters draw;
- :mod:`course_lib.widgets` -- interactive explorers (core ipywidgets only, 7.7 and 8);
- :mod:`course_lib.notebook` -- helpers for the chapter notebooks;
- :mod:`course_lib.exercises` -- the exercises, their checks and the submission file.

All tensors are batch-first: ``(batch, seq, d_model)``.
"""

__version__ = "0.1.0"

from course_lib import attention, positional

__all__ = ["__version__", "attention", "positional"]
