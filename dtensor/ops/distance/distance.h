// Distances between vectors (PyTorch semantics): cdist (every pair of rows of two batches),
// pairwise_distance and cosine_similarity (row by row, broadcasting).
#pragma once

#include <cstdint>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// torch.cdist(x1, x2, p=2): x1 [*a, P, M], x2 [*b, R, M] (batch dims broadcast to *) -> [*, P, R],
// out[b, i, j] = the p-norm of x1[b, i] - x2[b, j]: p 0 counts the nonzero differences, p inf is
// the largest |difference|. Floating inputs of one dtype, p >= 0. Computed directly in float64 and
// rounded once, except p 2 with P or R > 25, which goes through a matmul as PyTorch's default
// compute_mode does (sqrt(max(|a|^2 + |b|^2 - 2 a.b, 0)): faster, less exact for points close to
// each other). The gradient is PyTorch's _cdist_backward either way.
Tensor cdist(const Tensor& x1, const Tensor& x2, double p = 2.0);
// torch.nn.functional.pairwise_distance: the p-norm of x1 - x2 + eps over the last dim (x1, x2
// broadcast), keepdim as in PyTorch.
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p = 2.0, double eps = 1e-6,
                         bool keepdim = false);
// torch.nn.functional.cosine_similarity: sum over dim of (x1 / max(|x1|, eps)) * (x2 / max(|x2|,
// eps)) (x1, x2 broadcast first; PyTorch's current formula: each normalised first, the norms
// clamped at eps outside autograd).
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim = 1, double eps = 1e-8);

// ---- DTensor forms (distance_strategy.cc, distance_dtensor.cc) -------------------------------
// cdist rows (one mesh dim): batch dims sharded alike; x1's P sharded -> output dim -2 sharded
// (x2 replicated); x2's R sharded -> output dim -1 sharded; M sharded on both: Partial(sum) for
// p 0 and 1, Partial(max) for p inf (no communication; other p gather M). Its gradient
// (cdist_backward, PyTorch's _cdist_backward) keeps the same shards, and a sharded R gives the
// x1 gradient Partial(sum).
DTensor cdist(const DTensor& x1, const DTensor& x2, double p = 2.0);
// pairwise_distance and cosine_similarity are compositions of elementwise ops and sums, so a
// sharded reduced dim leaves Partial(sum) sums (one all-reduce of the reduced result) for p 2
// and cosine similarity, and other dims keep their shards.
DTensor pairwise_distance(const DTensor& x1, const DTensor& x2, double p = 2.0, double eps = 1e-6,
                          bool keepdim = false);
DTensor cosine_similarity(const DTensor& x1, const DTensor& x2, int64_t dim = 1, double eps = 1e-8);

}  // namespace dtensor
