// The margin, embedding and likelihood losses of torch.nn.functional (round 9):
// margin_ranking_loss, hinge_embedding_loss, cosine_embedding_loss, soft_margin_loss,
// multilabel_soft_margin_loss, multi_margin_loss, multilabel_margin_loss, triplet_margin_loss,
// triplet_margin_with_distance_loss, poisson_nll_loss, gaussian_nll_loss. Included by loss.h.
//
// Each is a composite of DTensor ops (margin_loss.cc) reproducing PyTorch 2.15's formula op by op
// (ATen's Loss.cpp composites, the Python ones of torch.nn.functional, the CPU kernels of
// multi_margin_loss / multilabel_margin_loss), so it is differentiable and sharded like its ops:
// batch-sharded inputs (Shard(0), uneven or empty shards included) keep their layout for kNone
// and equal the unsharded result bit for bit; kSum is sum() and kMean mean() of the per-element
// losses (a Partial(sum) 0-d DTensor whose shares divide by the GLOBAL count, as the pointwise
// losses). Other layouts go through the same ops (a sum over a sharded feature dim all-reduces).
// Arguments follow PyTorch's F.<name> order and defaults with `reduction` moved right after the
// tensors (as the other losses of loss.h); kBatchMean is refused. The Tensor forms run the DTensor
// composite on local DTensors (values only). Every input gets a gradient where the composite has
// one, also where PyTorch refuses it (soft_margin_loss' target, multi_margin_loss' weight).
#pragma once

#include <cstdint>
#include <functional>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// max(0, -target (input1 - input2) + margin). The three inputs must have one number of dims
// (PyTorch's check); their shapes broadcast.
Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                           Reduction reduction = Reduction::kMean, double margin = 0.0);
DTensor margin_ranking_loss(const DTensor& input1, const DTensor& input2, const DTensor& target,
                            Reduction reduction = Reduction::kMean, double margin = 0.0);

// where(target != 1, max(0, margin - input), 0) + where(target != -1, input, 0) (a target other
// than +-1 gets both terms, as PyTorch's). The target gets no gradient.
Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target,
                            Reduction reduction = Reduction::kMean, double margin = 1.0);
DTensor hinge_embedding_loss(const DTensor& input, const DTensor& target,
                             Reduction reduction = Reduction::kMean, double margin = 1.0);

// cos = sum(x1 x2) / sqrt((sum(x1^2) + 1e-12) (sum(x2^2) + 1e-12)) over dim 1 ([N, D] inputs,
// [N] target) or dim 0 ([D] inputs, 0-d target): 1 - cos where target == 1, max(0, cos - margin)
// where target == -1, 0 elsewhere (ATen's formula, not cosine_similarity's).
Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                             Reduction reduction = Reduction::kMean, double margin = 0.0);
DTensor cosine_embedding_loss(const DTensor& input1, const DTensor& input2, const DTensor& target,
                              Reduction reduction = Reduction::kMean, double margin = 0.0);

// log(1 + exp(-target input)).
Tensor soft_margin_loss(const Tensor& input, const Tensor& target,
                        Reduction reduction = Reduction::kMean);
DTensor soft_margin_loss(const DTensor& input, const DTensor& target,
                         Reduction reduction = Reduction::kMean);

// -(t log_sigmoid(x) + (1 - t) log_sigmoid(-x)) times `weight` (optional, broadcast), summed over
// the last dim and divided by its size C: one loss per sample (the input's shape less the last
// dim) before the reduction.
Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target,
                                   Reduction reduction = Reduction::kMean,
                                   const Tensor& weight = Tensor());
DTensor multilabel_soft_margin_loss(const DTensor& input, const DTensor& target,
                                    Reduction reduction = Reduction::kMean,
                                    const DTensor& weight = DTensor());

// Input [N, C] or [C], class-index target [N] or 0-d (int64 / int32, in [0, C)): per sample
// sum over c != t of w[t] max(0, margin - x[t] + x[c])^p / C, p 1 or 2, `weight` an optional [C]
// tensor (the gradient passes where margin - x[t] + x[c] > 0, strictly, as PyTorch's kernel).
Tensor multi_margin_loss(const Tensor& input, const Tensor& target,
                         Reduction reduction = Reduction::kMean, int64_t p = 1, double margin = 1.0,
                         const Tensor& weight = Tensor());
DTensor multi_margin_loss(const DTensor& input, const DTensor& target,
                          Reduction reduction = Reduction::kMean, int64_t p = 1,
                          double margin = 1.0, const DTensor& weight = DTensor());

// Input [N, C] or [C], target of the input's shape holding class indices up to the first -1
// (entries in [-1, C)): per sample sum over the listed targets j and the classes k not listed of
// max(0, 1 - (x[j] - x[k])) / C (a repeated index counts twice, as PyTorch's kernel). The
// composite holds an [N, C, C] tensor of the pair terms.
Tensor multilabel_margin_loss(const Tensor& input, const Tensor& target,
                              Reduction reduction = Reduction::kMean);
DTensor multilabel_margin_loss(const DTensor& input, const DTensor& target,
                               Reduction reduction = Reduction::kMean);

// max(0, margin + d(a, p) - d(a, n)), d = pairwise_distance(., ., p, eps); with swap, d(a, n) is
// replaced by min(d(a, n), d(p, n)). margin must be > 0; the inputs have one number of dims.
Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           Reduction reduction = Reduction::kMean, double margin = 1.0,
                           double p = 2.0, double eps = 1e-6, bool swap = false);
DTensor triplet_margin_loss(const DTensor& anchor, const DTensor& positive, const DTensor& negative,
                            Reduction reduction = Reduction::kMean, double margin = 1.0,
                            double p = 2.0, double eps = 1e-6, bool swap = false);

// triplet_margin_loss with a distance function (empty: pairwise_distance with its defaults).
using TensorDistance = std::function<Tensor(const Tensor&, const Tensor&)>;
using DTensorDistance = std::function<DTensor(const DTensor&, const DTensor&)>;
Tensor triplet_margin_with_distance_loss(const Tensor& anchor, const Tensor& positive,
                                         const Tensor& negative,
                                         Reduction reduction = Reduction::kMean,
                                         const TensorDistance& distance_function = {},
                                         double margin = 1.0, bool swap = false);
DTensor triplet_margin_with_distance_loss(const DTensor& anchor, const DTensor& positive,
                                          const DTensor& negative,
                                          Reduction reduction = Reduction::kMean,
                                          const DTensorDistance& distance_function = {},
                                          double margin = 1.0, bool swap = false);

// log_input: exp(input) - target input; else input - target log(input + eps). full adds the
// Stirling term t log(t) - t + 0.5 log(2 pi t) where target > 1.
Tensor poisson_nll_loss(const Tensor& input, const Tensor& target,
                        Reduction reduction = Reduction::kMean, bool log_input = true,
                        bool full = false, double eps = 1e-8);
DTensor poisson_nll_loss(const DTensor& input, const DTensor& target,
                         Reduction reduction = Reduction::kMean, bool log_input = true,
                         bool full = false, double eps = 1e-8);

// 0.5 (log(v) + (input - target)^2 / v) (+ 0.5 log(2 pi) when full), v = var clamped to >= eps
// in value only (the gradient passes to var as if unclamped, as PyTorch's no_grad clamp_). var
// has the input's shape, or its shape less the last dim, or one dim of size 1 where the input's
// differs (homoscedastic); no entry may be negative (checked on every rank that holds var). The
// double form is PyTorch's float var (var * ones_like(input)).
Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var,
                         Reduction reduction = Reduction::kMean, bool full = false,
                         double eps = 1e-6);
DTensor gaussian_nll_loss(const DTensor& input, const DTensor& target, const DTensor& var,
                          Reduction reduction = Reduction::kMean, bool full = false,
                          double eps = 1e-6);
DTensor gaussian_nll_loss(const DTensor& input, const DTensor& target, double var,
                          Reduction reduction = Reduction::kMean, bool full = false,
                          double eps = 1e-6);

}  // namespace dtensor
