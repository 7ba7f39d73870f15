"""Model answers to the course's exercises, written independently of ``course_lib``.

``SOLUTIONS`` maps every exercise id to an answer that must pass all of its checks; the
tests (and instructors) use them. Code answers do not call ``course_lib``: the checks refuse
that.
"""

from solutions.a_modern_decoder import SOLUTIONS as A_MODERN_DECODER
from solutions.attention import SOLUTIONS as ATTENTION
from solutions.attention_at_scale import SOLUTIONS as ATTENTION_AT_SCALE
from solutions.input_embeddings import SOLUTIONS as INPUT_EMBEDDINGS
from solutions.layers import SOLUTIONS as LAYERS
from solutions.positional_encoding import SOLUTIONS as POSITIONAL_ENCODING
from solutions.rmsnorm_and_gated_ffn import SOLUTIONS as RMSNORM_AND_GATED_FFN
from solutions.rotary_positions import SOLUTIONS as ROTARY_POSITIONS
from solutions.transformer_at_work import SOLUTIONS as TRANSFORMER_AT_WORK
from solutions.transformers_at_a_glance import SOLUTIONS as TRANSFORMERS_AT_A_GLANCE

SOLUTIONS = {
    **TRANSFORMERS_AT_A_GLANCE,
    **INPUT_EMBEDDINGS,
    **POSITIONAL_ENCODING,
    **ATTENTION,
    **LAYERS,
    **TRANSFORMER_AT_WORK,
    **ROTARY_POSITIONS,
    **RMSNORM_AND_GATED_FFN,
    **ATTENTION_AT_SCALE,
    **A_MODERN_DECODER,
}
