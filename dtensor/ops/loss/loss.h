// Classification losses on local tensors, and the building blocks of the class-sharded
// ("loss parallel") DTensor cross entropy.
//
// Layouts follow PyTorch: the input is [N, C], [C] (one sample, target 0-d) or [N, C, d1, ...]
// (target [N, d1, ...]); the class dim is 1 (0 for a 1-d input) and the target has the input's
// shape without it. Targets are int64 (int32 accepted). Sums are accumulated in double and the
// result has the input's dtype. Elements whose target equals ignore_index contribute 0 and are
// not counted by the mean; a mean over zero counted elements is NaN, as in PyTorch.
#pragma once

#include <cstdint>
#include <functional>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// How per-element losses are combined (PyTorch's reduction='none' | 'mean' | 'sum' |
// 'batchmean'): kNone keeps them (target's shape), kSum adds them, kMean divides the sum by the
// number of elements (of non-ignored elements for the class-index losses; by the sum of their
// class weights when weighted), kBatchMean (kl_div only) divides the sum by the input's size
// along dim 0. All but kNone give a 0-d tensor; a mean over zero elements is NaN (0 / 0).
enum class Reduction : uint8_t { kNone, kMean, kSum, kBatchMean };

// "none", "mean", "sum", "batchmean".
const char* reduction_name(Reduction reduction);

// torch.nn.functional.cross_entropy, with lp = log_softmax(x) over the class dim, s =
// label_smoothing in [0, 1] and w = weight (a [C] floating tensor on the logits' device, or
// undefined for all ones). Two kinds of target, told apart as PyTorch does (by shape):
// - class indices (int64 or int32, the input's shape without the class dim):
//     loss_i = (1 - s) * -w[t_i] * lp[i, t_i] + s / C * sum_c -w[c] * lp[i, c]
//   kMean divides the sum by the sum of w[t_i] over the non-ignored elements (their count
//   without weights), the smoothing term included, as PyTorch. A target outside [0, C) that is
//   not ignore_index raises "[nll_loss] target 7 out of range for 5 classes".
// - class probabilities (the input's shape and dtype: soft labels, distillation, mixup):
//     loss_i = -sum_c w[c] * (p[i, c] * (1 - s) + s / C) * lp[i, c]
//   kMean divides the sum by the number of elements i (input numel / C; NaN when empty), not by
//   the weights. ignore_index must be negative (it is ignored; PyTorch refuses a non-negative
//   one too); a target of another floating dtype is refused (PyTorch would promote).
Tensor cross_entropy(const Tensor& logits, const Tensor& target,
                     Reduction reduction = Reduction::kMean, int64_t ignore_index = -100,
                     double label_smoothing = 0.0, const Tensor& weight = Tensor());

// torch.nn.functional.nll_loss: loss_i = -weight[t_i] * log_probs[i, t_i] (weight: a [C]
// floating tensor on log_probs' device, or undefined for all ones); kMean divides by the sum of
// weight[t_i] over the non-ignored elements (PyTorch's weighted mean). Errors as cross_entropy's.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target,
                Reduction reduction = Reduction::kMean, int64_t ignore_index = -100,
                const Tensor& weight = Tensor());

// Loss-parallel building block: `log_probs` holds the global classes
// [class_offset, class_offset + log_probs.size(class dim)) of the full log-probabilities. The
// result (target's shape, log_probs' dtype) is log_probs[i, t_i - class_offset] where t_i falls
// in this shard, and 0 where it does not or where t_i == ignore_index. Summed over the class
// shards (an all-reduce) it is exactly the full log_probs[i, t_i], so that
// reduce_loss(-sum, target, ...) equals nll_loss on the full tensor. Targets are not
// range-checked (a shard cannot know the global class count).
Tensor gather_target_log_probs(const Tensor& log_probs, const Tensor& target,
                               int64_t class_offset = 0, int64_t ignore_index = -100);

// Applies `reduction` to per-element losses of target's shape: elements whose target is
// ignore_index are treated as 0 and not counted by the mean (kNone returns the losses with those
// elements set to 0).
Tensor reduce_loss(const Tensor& losses, const Tensor& target, Reduction reduction,
                   int64_t ignore_index = -100);

// DTensor cross entropy (same arguments and semantics as the Tensor form, both kinds of
// target), composed of DTensor ops (amax, exp, sum, the registered gather_target pick,
// embedding for w[t_i], stack, log; loss_dtensor.cc), so it is differentiable (in the logits,
// a probability target and the weights) and its collectives come from the sharding engine.
// Partial logits are reduced first. Batch dims sharded on a mesh dim stay sharded (the target
// is laid out to match; a probability target is laid out like the logits). The weights are
// laid out like the classes: sharded where the logits' class dim is (a replicated weight is
// sliced locally), replicated elsewhere (a sharded one is gathered there: C values). Loss
// parallel (PyTorch loss_parallel): when the class dim is sharded (S(1) of [N, C], S(0) of
// [C]), the row max is one all-reduce(max) and the class sums (of exp, the target logit, and
// as needed w[t_i], the (weighted) logits, the weights or the probabilities) one
// all-reduce(sum); the full logits are never gathered. Result placements: kNone - the
// target's batch shards; kSum - P(sum) over the batch-sharded mesh dims; kMean - Replicate
// (one all-reduce of (sum, count or W) over the batch-sharded mesh dims, exact for uneven
// shards and ignored targets). A target out of range raises "[cross_entropy] target 7 out of
// range for 5 classes (raised on rank R)" on every rank of the mesh dims where targets differ.
DTensor cross_entropy(const DTensor& logits, const DTensor& target,
                      Reduction reduction = Reduction::kMean, int64_t ignore_index = -100,
                      double label_smoothing = 0.0, const DTensor& weight = DTensor());

// DTensor nll_loss (same arguments and semantics as the Tensor form; `weight` a [C] DTensor on
// the input's mesh, or undefined): the registered op nll_loss (nll_loss_strategy.cc, one
// dispatch), so class-sharded (loss parallel: the weights replicated or sharded like the
// classes) and batch-sharded inputs reduce without gathering the log-probabilities. Result
// placements: kNone - the target's batch shards (class-sharded picks all-reduced); kSum -
// P(sum) over the mesh dims where the input is class- or batch-sharded; kMean - Replicate (the
// loss sum, the weight sum W and the range check's flag all-reduced together over the mesh dims
// where the input is sharded: one collective per forward and backward on a 1-D mesh). Out-of-
// range targets raise "[nll_loss] target 7 out of range for 5 classes (raised on rank R)" on
// every rank that may hold different targets. The input's gradient is PyTorch's (-weight[t] *
// grad / W at the picks; W kept from the forward as the op's second output, total_weight, as
// PyTorch's nll_loss_forward does); the weights get one too (PyTorch refuses it), composed of
// registered ops.
DTensor nll_loss(const DTensor& log_probs, const DTensor& target,
                 Reduction reduction = Reduction::kMean, int64_t ignore_index = -100,
                 const DTensor& weight = DTensor());

// ---- Pointwise losses ------------------------------------------------------------------------
// The input and target have one shape and one floating dtype (PyTorch broadcasts a differently
// shaped target with a warning; here it is an error, "[mse_loss] target of shape [3] does not
// match input of shape [2, 3]"). kNone gives the per-element losses (input's shape); kSum and
// kMean a 0-d tensor (the mean divides by the number of elements: NaN for an empty input);
// kBatchMean is refused ("[mse_loss] reduction 'batchmean' is only supported by kl_div"). Values
// are computed in double and rounded to the input dtype. The formulas and their gradients
// (PyTorch 2.15's, kinks included) are listed in dtensor/ops/loss/detail/pointwise_loss.h.
//
// The DTensor forms are registered ops (dtensor/ops/loss/pointwise_loss_strategy.cc): input and
// target laid out alike (Shard on any dim, or Replicate; other layouts are redistributed to the
// cheapest such), kNone keeps that layout, and a reduction over a sharded dim is a Partial(sum)
// 0-d DTensor (each rank's share: its shard's sum divided by the GLOBAL divisor, exact for
// uneven and empty shards) that costs one all-reduce of a scalar when it is reduced; no input
// is ever gathered. Weights broadcast to the input: sharded where they span the input's
// sharded dim, replicated where they broadcast. Partial inputs are reduced first.

// torch.nn.functional.mse_loss: (input - target)^2.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::kMean);
DTensor mse_loss(const DTensor& input, const DTensor& target,
                 Reduction reduction = Reduction::kMean);

// torch.nn.functional.l1_loss: |input - target| (gradient sign(input - target), 0 at 0).
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::kMean);
DTensor l1_loss(const DTensor& input, const DTensor& target,
                Reduction reduction = Reduction::kMean);

// torch.nn.functional.smooth_l1_loss: 0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere
// (d = input - target; beta >= 0, 0 gives l1_loss).
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target,
                      Reduction reduction = Reduction::kMean, double beta = 1.0);
DTensor smooth_l1_loss(const DTensor& input, const DTensor& target,
                       Reduction reduction = Reduction::kMean, double beta = 1.0);

// torch.nn.functional.huber_loss: 0.5 d^2 where |d| < delta, delta (|d| - 0.5 delta) elsewhere
// (delta > 0).
Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::kMean,
                  double delta = 1.0);
DTensor huber_loss(const DTensor& input, const DTensor& target,
                   Reduction reduction = Reduction::kMean, double delta = 1.0);

// torch.nn.functional.binary_cross_entropy: -weight (t log(x) + (1 - t) log(1 - x)), each log
// clamped to >= -100. Every input element must lie in [0, 1] ("[binary_cross_entropy] all
// elements of input should be between 0 and 1"; the DTensor form raises it on every rank that
// may hold different values). `weight` (optional) broadcasts to the input's shape. Unlike
// PyTorch, which refuses a weight that requires grad, weight gets its gradient (the unweighted
// loss times the upstream gradient, summed over its broadcast dims).
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target,
                            Reduction reduction = Reduction::kMean,
                            const Tensor& weight = Tensor());
DTensor binary_cross_entropy(const DTensor& input, const DTensor& target,
                             Reduction reduction = Reduction::kMean,
                             const DTensor& weight = DTensor());

// torch.nn.functional.binary_cross_entropy_with_logits, the numerically stable form:
// weight ((1 - t) x - (1 + (pos_weight - 1) t) log_sigmoid(x)). weight and pos_weight
// (optional) broadcast to the input's shape (pos_weight usually [C], the last dim); both get
// gradients (PyTorch refuses them).
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        Reduction reduction = Reduction::kMean,
                                        const Tensor& weight = Tensor(),
                                        const Tensor& pos_weight = Tensor());
DTensor binary_cross_entropy_with_logits(const DTensor& input, const DTensor& target,
                                         Reduction reduction = Reduction::kMean,
                                         const DTensor& weight = DTensor(),
                                         const DTensor& pos_weight = DTensor());

// torch.nn.functional.kl_div of log-probabilities `input`: target (log(target) - input), with
// 0 where target == 0 (xlogy), or exp(target) (target - input) when log_target. kMean divides
// by the number of elements, as PyTorch's 'mean'; kBatchMean divides the sum by input.size(0)
// (not at all for a 0-d input), the KL divergence's definition.
Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::kMean,
              bool log_target = false);
DTensor kl_div(const DTensor& input, const DTensor& target, Reduction reduction = Reduction::kMean,
               bool log_target = false);

}  // namespace dtensor

// ---- The margin, embedding and likelihood losses of torch.nn.functional (round 9):
// margin_ranking_loss, hinge_embedding_loss, cosine_embedding_loss, soft_margin_loss,
// multilabel_soft_margin_loss, multi_margin_loss, multilabel_margin_loss, triplet_margin_loss,
// triplet_margin_with_distance_loss, poisson_nll_loss, gaussian_nll_loss.
//
// Each is a composite of DTensor ops (loss_margin_dtensor.cc) reproducing PyTorch 2.15's formula op
// by op (ATen's Loss.cpp composites, the Python ones of torch.nn.functional, the CPU kernels of
// multi_margin_loss / multilabel_margin_loss), so it is differentiable and sharded like its ops:
// batch-sharded inputs (Shard(0), uneven or empty shards included) keep their layout for kNone
// and equal the unsharded result bit for bit; kSum is sum() and kMean mean() of the per-element
// losses (a Partial(sum) 0-d DTensor whose shares divide by the GLOBAL count, as the pointwise
// losses). Other layouts go through the same ops (a sum over a sharded feature dim all-reduces).
// Arguments follow PyTorch's F.<name> order and defaults with `reduction` moved right after the
// tensors (as the other losses of loss.h); kBatchMean is refused. The Tensor forms run the DTensor
// composite on local DTensors (values only). Every input gets a gradient where the composite has
// one, also where PyTorch refuses it (soft_margin_loss' target, multi_margin_loss' weight).

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
