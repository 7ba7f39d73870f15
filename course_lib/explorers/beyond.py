"""The explorers of the part "Beyond the original Transformer": rotary positions, RMSNorm and
gated feed-forward layers, attention for long contexts, a modern decoder."""

from __future__ import annotations

# --------------------------------------------------------------------------- rotary positions
# (chapters/rotary-positions.ipynb)


# --------------------------------------------------------------------------- norms and gates
# (chapters/rmsnorm-and-gated-ffn.ipynb)


# --------------------------------------------------------------------------- long contexts
# (chapters/attention-at-scale.ipynb)


# --------------------------------------------------------------------------- a modern decoder
# (chapters/a-modern-decoder.ipynb)
