// Explicit registration of every op family's ops (strategies, kernels, backward formulas) (no
// static initialisers that a static link could drop). Each family defines its register_<family>_ops
// next to its kernels; adding a family adds one declaration here and one call in register_all.cc.
#pragma once

#include "dtensor/core/propagation/registry.h"

namespace dtensor {

// Pointwise ops: arithmetic (tensor and scalar forms), unary math, activations, comparisons,
// where, cast and the in-place forms (dtensor/ops/elementwise/elementwise_strategy.cc).
void register_elementwise_ops(Registry& registry);
// sum, mean, var, amax, amin, max, min, argmax, argmin
// (dtensor/ops/reduction/reduction_strategy.cc).
void register_reduction_ops(Registry& registry);
// mm, bmm, matmul, addmm, linear (dtensor/ops/matmul/matmul_strategy.cc).
void register_matmul_ops(Registry& registry);
// einsum, its rows generated from the equation (dtensor/ops/matmul/einsum_strategy.cc).
void register_einsum_ops(Registry& registry);
// View and shape ops (dtensor/ops/view/view_strategy.cc).
void register_view_ops(Registry& registry);
// clone, contiguous, flip, roll, repeat, tril, triu (dtensor/ops/view/copy_ops_strategy.cc).
void register_copy_ops(Registry& registry);
// softmax, log_softmax (dtensor/ops/softmax/softmax_strategy.cc).
void register_softmax_ops(Registry& registry);
// layer_norm, rms_norm (dtensor/ops/norm/norm_strategy.cc).
void register_norm_ops(Registry& registry);
// batch_norm_sums, batch_norm_affine and their gradient ops
// (dtensor/ops/norm/batch_norm_strategy.cc).
void register_batch_norm_ops(Registry& registry);
// group_norm's fused op and its gradient op (dtensor/ops/norm/group_norm_strategy.cc).
void register_group_norm_ops(Registry& registry);
// embedding (dtensor/ops/embedding/embedding_strategy.cc).
void register_embedding_ops(Registry& registry);
// gather, scatter_add, scatter, scatter.value, scatter_reduce, index_add, one_hot
// (dtensor/ops/index/index_strategy.cc).
void register_index_ops(Registry& registry);
// index, index_put: advanced indexing by a list of index tensors
// (dtensor/ops/advanced_index/advanced_index_strategy.cc).
void register_advanced_index_ops(Registry& registry);
// masked_select, nonzero (data-dependent output shapes) and masked_select_backward
// (dtensor/ops/masked_select/masked_select_strategy.cc).
void register_masked_select_ops(Registry& registry);
// cumsum, cumprod, cummax, cummin, sort, argsort, topk, kthvalue
// (dtensor/ops/scan/scan_strategy.cc).
void register_scan_ops(Registry& registry);
// scaled_dot_product_attention (+ .mask) and their backward ops
// (dtensor/ops/attention/attention_strategy.cc).
void register_attention_ops(Registry& registry);
// cdist and cdist_backward (dtensor/ops/distance/distance_strategy.cc).
void register_distance_ops(Registry& registry);
// gather_target, the target pick of the DTensor cross_entropy (dtensor/ops/loss/loss_strategy.cc).
void register_loss_ops(Registry& registry);
// convolution (conv1d/2d/3d, conv_transpose1d/2d/3d) and convolution_backward
// (dtensor/ops/conv/conv_strategy.cc).
void register_conv_ops(Registry& registry);
// pad, max / avg / adaptive pools, upsample_* (interpolate) and their gradient ops
// (dtensor/ops/pool/pool_strategy.cc).
void register_pool_ops(Registry& registry);

// Calls every register_<family>_ops above on `registry`. Not idempotent: registering the same
// op twice throws; registered_ops() calls it exactly once.
void register_all(Registry& registry);

}  // namespace dtensor
