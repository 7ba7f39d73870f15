"""The PyTorch operators behind the built-in computations that exercises ask students to write
themselves.

An exercise lists them in :attr:`CodeExercise.blocked_ops`; where an answer runs, each gets a
kernel that raises in PyTorch's dispatcher, so every route to it is refused: the Python
function (``F.layer_norm``), its builtin twin (``torch.layer_norm``), ``torch.ops.aten``, a
module (``nn.LayerNorm``), or a relative that computes the same thing (a group norm of one
group, a batch norm over the transposed tokens). Operators that an installed PyTorch does not
have are skipped.
"""

from __future__ import annotations

__all__ = ["ATTENTION", "EMBEDDING", "ENCODER_LAYER", "NORMALIZATION"]

NORMALIZATION = (
    "aten::layer_norm",
    "aten::native_layer_norm",
    "aten::group_norm",
    "aten::native_group_norm",
    "aten::batch_norm",
    "aten::native_batch_norm",
    "aten::_native_batch_norm_legit",
    "aten::_native_batch_norm_legit_no_training",
    "aten::instance_norm",
    "aten::rms_norm",
    "aten::_fused_rms_norm",
)

ATTENTION = (
    "aten::scaled_dot_product_attention",
    "aten::_scaled_dot_product_attention_math",
    "aten::_scaled_dot_product_flash_attention_for_cpu",
    "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_cudnn_attention",
    "aten::_native_multi_head_attention",
)

EMBEDDING = (
    "aten::embedding",
    "aten::embedding_bag",
    "aten::_embedding_bag",
    "aten::_embedding_bag_forward_only",
)

ENCODER_LAYER = ("aten::_transformer_encoder_layer_fwd",)
