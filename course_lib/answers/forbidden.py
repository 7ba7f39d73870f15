"""The PyTorch operators behind the built-in computations that exercises ask students to write
themselves.

An exercise lists them in :attr:`CodeExercise.blocked_ops`; where an answer runs, every
overload of each gets a kernel that raises at every dispatch key where it has one, and its
Python implementations (decompositions, ``torch._refs``) a body that raises
(:mod:`course_lib.answers._refuse`), so every route to it is refused: the Python function
(``F.layer_norm``), its builtin twin (``torch.layer_norm``), ``torch.ops``, a module
(``nn.LayerNorm``), another overload, a nested or quantized tensor, ``vmap``, or a relative
that computes the same thing (a group norm of one group, a batch norm over the transposed
tokens). Operators that an installed PyTorch does not have are skipped.

A list holds every operator that is a route to its computation, and none that an answer
written by hand needs: the norms of vectors (``aten::norm``, ``linalg_vector_norm``,
``renorm``), ``mean``, ``var``, ``rsqrt``, ``softmax``, ``matmul``, ``one_hot`` and indexing stay.
"""

from __future__ import annotations

__all__ = ["ATTENTION", "EMBEDDING", "ENCODER_LAYER", "NORMALIZATION"]

NORMALIZATION = (
    # Layer norm, group norm (of one group: a layer norm), instance norm (of one channel).
    "aten::layer_norm",
    "aten::native_layer_norm",
    "aten::native_layer_norm_backward",  # gives the normalised input from its statistics
    "aten::group_norm",
    "aten::native_group_norm",
    "aten::native_group_norm_backward",
    "aten::instance_norm",
    # Batch norm, a layer norm of the transposed tokens, in every form: the public operator,
    # its implementations (with and without updating running statistics, for cuDNN and
    # MIOpen, quantized), their gradients, which normalise with given statistics, and the
    # pieces of synchronised batch norm (statistics with eps, the normalisation, gradients).
    "aten::batch_norm",
    "aten::_batch_norm_impl_index",
    "aten::_batch_norm_impl_index_backward",
    "aten::_batch_norm_with_update",
    "aten::_batch_norm_with_update_functional",
    "aten::_batch_norm_no_update",
    "aten::native_batch_norm",
    "aten::native_batch_norm_backward",
    "aten::batch_norm_backward",
    "aten::_native_batch_norm_legit",
    "aten::_native_batch_norm_legit_no_training",
    "aten::_native_batch_norm_legit_functional",
    "aten::cudnn_batch_norm",
    "aten::cudnn_batch_norm_backward",
    "aten::miopen_batch_norm",
    "aten::miopen_batch_norm_backward",
    "aten::quantized_batch_norm",
    "aten::batch_norm_stats",
    "aten::batch_norm_elemt",
    "aten::batch_norm_gather_stats",
    "aten::batch_norm_gather_stats_with_counts",
    "aten::batch_norm_update_stats",
    "aten::batch_norm_backward_reduce",
    "aten::batch_norm_backward_elemt",
    # RMS norm (of the centred tokens: a layer norm).
    "aten::rms_norm",
    "aten::_fused_rms_norm",
    "aten::_fused_rms_norm_backward",
    # An encoder layer with zero weights is a layer norm applied twice.
    "aten::_transformer_encoder_layer_fwd",
    # Quantized twins: a layer norm of a finely quantized tensor.
    "quantized::layer_norm",
    "quantized::group_norm",
    "quantized::instance_norm",
    "quantized::batch_norm",
    "quantized::batch_norm_relu",
    "quantized::batch_norm1d",
    "quantized::batch_norm1d_relu",
    "quantized::batch_norm2d",
    "quantized::batch_norm2d_relu",
    "quantized::batch_norm3d",
    "quantized::batch_norm3d_relu",
    "onednn::qbatch_norm2d",
    # TorchScript's prim::MKLDNNLayerNorm computes a layer norm outside the dispatcher; it
    # takes only MKLDNN tensors, which this operator makes.
    "aten::to_mkldnn",
)

ATTENTION = (
    "aten::scaled_dot_product_attention",
    # Its kernels, each callable on its own, and their gradients: they recompute the
    # attention weights from the queries and keys, and with the inputs' roles swapped the
    # gradient of the values is an attention output.
    "aten::_scaled_dot_product_attention_math",
    "aten::_scaled_dot_product_attention_math_for_mps",
    "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_flash_attention_backward",
    "aten::_scaled_dot_product_flash_attention_for_cpu",
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
    "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_efficient_attention_backward",
    "aten::_scaled_dot_product_cudnn_attention",
    "aten::_scaled_dot_product_cudnn_attention_backward",
    "aten::_scaled_dot_product_fused_attention_overrideable",
    "aten::_scaled_dot_product_fused_attention_overrideable_backward",
    "aten::_flash_attention_forward",
    "aten::_flash_attention_forward_no_dropout_inplace",
    "aten::_flash_attention_backward",
    "aten::_efficient_attention_forward",
    "aten::_efficient_attention_backward",
    "aten::_cudnn_attention_forward",
    "aten::_cudnn_attention_backward",
    "aten::_triton_scaled_dot_attention",
    # Multi-head attention and a whole encoder layer compute it inside (with identity
    # projections, and, in the layer, zero feed-forward weights).
    "aten::_native_multi_head_attention",
    "aten::_triton_multi_head_attention",
    "aten::_transformer_encoder_layer_fwd",
)

EMBEDDING = (
    # The lookups: a bag of one id is a lookup too. Their gradients scatter into the table
    # and are no shorter route than indexing, which answers may use; embedding_renorm_
    # rescales rows and looks nothing up.
    "aten::embedding",
    "aten::embedding_bag",
    "aten::_embedding_bag",
    "aten::_embedding_bag_forward_only",
    "quantized::embedding_byte",
    "quantized::embedding_4bit",
    "quantized::embedding_bag_byte",
    "quantized::embedding_bag_4bit",
    "quantized::embedding_bag_byte_rowwise_offsets",
    "quantized::embedding_bag_4bit_rowwise_offsets",
    "quantized::embedding_bag_2bit_rowwise_offsets",
)

ENCODER_LAYER = ("aten::_transformer_encoder_layer_fwd",)
