// DTensor cross entropy, composed of DTensor ops (so it is sharded, cached and
// differentiable like any op), with PyTorch's loss-parallel path for class-sharded inputs.
//
// Worked example, [N, C] logits with placements [S(1)] on 2 ranks, C = 5 (blocks of 3 and 2):
// amax over the classes gives P(max) row maxima; subtracting them needs the whole maximum
// (all-reduce(max) #1); exp, the class sum and the target pick (gather_target: each rank picks
// the targets in its class block) are P(sum); they are stacked and reduced together
// (all-reduce(sum) #2); lse = log(sum exp(x - M)), loss = lse - (x - M)[t]. The full logits are
// never gathered. A batch-sharded mean adds one all-reduce of (sum, count).
//
// nll_loss is a registered op (nll_loss_strategy.cc): its DTensor form is one dispatch.
#include <limits>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/embedding/embedding.h"
#include "dtensor/ops/loss/detail/cross_entropy.h"
#include "dtensor/ops/loss/detail/pointwise_loss.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/softmax/softmax.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

constexpr const char* kOp = "cross_entropy";

// x with every Partial placement reduced (Replicate there), other placements kept.
DTensor resolve_partial(const DTensor& x) {
  Placements p = x.placements();
  bool partial = false;
  for (Placement& q : p) {
    if (q.is_partial()) {
      q = Replicate();
      partial = true;
    }
  }
  return partial ? x.redistribute(p) : x;
}

// `op`: the name range errors carry.
DTensor gather_target(const DTensor& input, const DTensor& target, int64_t ignore_index,
                      std::string_view op_name = kOp) {
  static const OpInfo& op = ops_op("gather_target");
  const ArgValue args[] = {ignore_index, op_name};
  return dispatch(op, {&input, &target}, args);
}

// sum(losses) / sum(counted) (the count of non-ignored targets, or their weights' sum, which may
// be below 1), exact for uneven shards and ignored targets: the two sums reduced together, then
// divided. With nothing counted the mean is 0/0 = NaN and its gradient 0, as PyTorch's: the sum
// is divided by 1 there (dividing by 0 would send inf back, and inf * 0 = NaN through the mask
// of the ignored targets), then NaN is filled in, which passes no gradient.
DTensor masked_mean(const DTensor& losses, const DTensor& counted) {
  const DTensor totals = resolve_partial(stack({sum(losses, {}), sum(counted, {})}, 0));
  const DTensor count = select(totals, 0, 1);
  const DTensor nothing = eq(count, Scalar(0.0));
  return masked_fill(select(totals, 0, 0) / masked_fill(count, nothing, Scalar(1.0)), nothing,
                     Scalar(std::numeric_limits<double>::quiet_NaN()));
}

// cross_entropy's per-element losses reduced: ignored targets contribute 0 and are not counted
// by the mean, which divides by their count, or by W = sum of target_weights when given.
DTensor reduce_rows(DTensor loss, const DTensor& target, int64_t ignore_index, Reduction reduction,
                    const DTensor& target_weights = DTensor()) {
  const DTensor valid = cast(ne(target, Scalar(ignore_index)), loss.dtype());
  loss = loss * valid;
  if (reduction == Reduction::kNone) return loss;
  if (reduction == Reduction::kSum) return sum(loss, {});
  return masked_mean(loss, target_weights.defined() ? target_weights : valid);
}

// The class weights, in the logits' dtype, laid out like the classes of x: Shard(0) on the mesh
// dims where x's class dim is sharded (a replicated weight is sliced locally), Replicate on the
// others (a sharded weight is gathered there: C values).
DTensor weight_like_classes(const DTensor& weight, const DTensor& x, int64_t class_dim) {
  const DTensor w = weight.dtype() == x.dtype() ? weight : cast(weight, x.dtype());
  Placements p(w.placements().size(), Replicate());
  for (size_t m = 0; m < p.size(); ++m) {
    if (x.placements()[m].is_shard(class_dim)) p[m] = Shard(0);
  }
  return w.placements() == p ? w : w.redistribute(p);
}

// w [C] viewed to broadcast along the class dim of an input of `ndim` dims ([C, 1, ...]).
DTensor broadcast_weight(DTensor w, int64_t ndim, int64_t class_dim) {
  for (int64_t d = class_dim + 1; d < ndim; ++d) w = unsqueeze(w, -1);
  return w;
}

// w[t_i] for the counted targets, 0 for the ignored ones (the target's shape): an embedding
// lookup in the [C, 1] table of the weights, so class-sharded weights give a Partial(sum) pick
// (each rank looks up the targets of its block) and the full weights are never needed.
DTensor target_weights(const DTensor& w, const DTensor& target, int64_t ignore_index) {
  const DTensor ignored = eq(target, Scalar(ignore_index));
  const DTensor picked =
      squeeze(embedding(masked_fill(target, ignored, Scalar(0)), unsqueeze(w, 1)), -1);
  return masked_fill(picked, ignored, Scalar(0.0));
}

// sum(x, dims) or, with weights (already broadcast), sum(x * w, dims).
DTensor class_sum(const DTensor& x, const DTensor& w_b, IntSpan dims) {
  return sum(w_b.defined() ? x * w_b : x, dims);
}

// cross_entropy with class probabilities p laid out like the logits x (resolved, no Partial):
// loss_i = -sum_c w[c] q[i, c] lp[i, c], q = p (1 - s) + s / C. Class-sharded, with
// lp = z - lse: loss_i = lse * sum_c w q - sum_c w q z, the class sums reduced together with
// sum exp(z). The mean divides by the number of rows (numel / C), as PyTorch.
DTensor cross_entropy_probs(const DTensor& x, DTensor p, Reduction reduction,
                            double label_smoothing, const DTensor& weight, int64_t class_dim,
                            bool class_sharded) {
  const int64_t classes = x.size(class_dim);
  const int64_t dims[] = {class_dim};
  if (p.placements() != x.placements()) p = p.redistribute(x.placements());
  DTensor q = p;
  if (label_smoothing != 0.0) {
    q = p * (1.0 - label_smoothing) + label_smoothing / static_cast<double>(classes);
  }
  if (weight.defined()) {
    q = q * broadcast_weight(weight_like_classes(weight, x, class_dim), x.dim(), class_dim);
  }
  DTensor loss;
  if (!class_sharded) {
    loss = neg(sum(log_softmax(x, class_dim) * q, dims));
  } else {
    const DTensor z = x - amax(x, dims, /*keepdim=*/true).detach();
    const DTensor reduced =
        resolve_partial(stack({sum(exp(z), dims), sum(q * z, dims), sum(q, dims)}, 0));
    loss = log(select(reduced, 0, 0)) * select(reduced, 0, 2) - select(reduced, 0, 1);
  }
  if (reduction == Reduction::kNone) return loss;
  const DTensor total = sum(loss, {});
  if (reduction == Reduction::kSum) return total;
  // 0 / 0 = NaN for an empty input (PyTorch's too).
  const double rows = classes > 0 ? static_cast<double>(x.numel() / classes) : 0.0;
  return resolve_partial(total / rows);
}

// The target laid out along the input's batch / spatial shards where it is replicated (a local
// slice). Left to the engine, a target that must move makes it charge the later reduction of
// nll_loss's Partial sum, and for small inputs it then prefers gathering the input's shards.
DTensor follow_batch_shards(const DTensor& target, const DTensor& input) {
  if (target.device_mesh() != input.device_mesh() || target.dim() != input.dim() - 1) {
    return target;  // dispatch raises the argument error
  }
  const int64_t class_dim = input.dim() == 1 ? 0 : 1;
  Placements p = target.placements();
  bool moved = false;
  for (size_t m = 0; m < p.size(); ++m) {
    const Placement& q = input.placements()[m];
    if (!q.is_shard() || q.dim() == class_dim || !p[m].is_replicate()) continue;
    p[m] = Shard(q.dim() < class_dim ? q.dim() : q.dim() - 1);
    moved = true;
  }
  return moved ? target.redistribute(p) : target;
}

}  // namespace

DTensor cross_entropy(const DTensor& logits, const DTensor& target, Reduction reduction,
                      int64_t ignore_index, double label_smoothing, const DTensor& weight) {
  DT_CHECK(logits.defined(), "[%s] argument input is an undefined DTensor", kOp);
  DT_CHECK(target.defined(), "[%s] argument target is an undefined DTensor", kOp);
  DT_CHECK(target.device_mesh() == logits.device_mesh(),
           "[%s] inputs live on different meshes (argument target)", kOp);
  const bool probs =
      detail::check_cross_entropy_args(logits.shape(), logits.dtype(), target.shape(),
                                       target.dtype(), ignore_index, label_smoothing, reduction);
  DT_CHECK(logits.dim() >= 1, "[%s] argument input is 0-d, expected [C], [N, C] or [N, C, ...]",
           kOp);
  const int64_t class_dim = logits.dim() == 1 ? 0 : 1;
  const int64_t classes = logits.size(class_dim);
  const int64_t dims[] = {class_dim};
  if (weight.defined()) {
    DT_CHECK(weight.device_mesh() == logits.device_mesh(),
             "[%s] inputs live on different meshes (argument weight)", kOp);
    detail::check_class_weight_meta(kOp, weight.shape(), weight.dtype(), classes);
  }

  // Partial logits are reduced first (softmax is not linear).
  const DTensor x = resolve_partial(logits);
  bool class_sharded = false;
  for (const Placement& p : x.placements()) class_sharded |= p.is_shard(class_dim);
  if (probs) {
    return cross_entropy_probs(x, target, reduction, label_smoothing, weight, class_dim,
                               class_sharded);
  }
  const DTensor t = weight.defined() ? follow_batch_shards(target, x) : target;
  const DTensor w = weight.defined() ? weight_like_classes(weight, x, class_dim) : DTensor();
  const DTensor w_b = w.defined() ? broadcast_weight(w, x.dim(), class_dim) : DTensor();
  if (!class_sharded) {
    // Whole rows on every rank: PyTorch's log_softmax (one vectorised op, its fused backward)
    // and the target pick, 2-3 full-size passes fewer than the loss-parallel steps below each
    // way (float32 [4096, 1000], one thread: forward 2.5-2.7 -> 1.3-1.5 ms, forward + backward
    // 4.7-4.9 -> 2.9-3.0 ms at best; PyTorch's 1.8-2.3 and 3.8-4.1 in the same windows).
    const DTensor lp = log_softmax(x, class_dim);
    DTensor loss = neg(gather_target(lp, t, ignore_index));
    const DTensor wt = w.defined() ? target_weights(w, t, ignore_index) : DTensor();
    if (wt.defined()) loss = loss * wt;
    if (label_smoothing != 0.0) {
      const DTensor smooth = neg(class_sum(lp, w_b, dims)) / static_cast<double>(classes);
      loss = loss * (1.0 - label_smoothing) + smooth * label_smoothing;
    }
    return reduce_rows(loss, t, ignore_index, reduction, wt);
  }
  // Stabilised by the row maximum, a constant for the gradient (it cancels in lse - x[t]).
  const DTensor z = x - amax(x, dims, /*keepdim=*/true).detach();
  // [sum exp(z), z[t], then as needed w[t], sum_c (w[c]) z[c], sum_c w[c]].
  std::vector<DTensor> parts = {sum(exp(z), dims), gather_target(z, t, ignore_index)};
  if (w.defined()) parts.push_back(target_weights(w, t, ignore_index));
  if (label_smoothing != 0.0) {
    parts.push_back(class_sum(z, w_b, dims));
    if (w.defined()) parts.push_back(expand(sum(w, {}), t.shape()));
  }
  // The class-sharded partial sums travel in one all-reduce.
  const DTensor reduced = resolve_partial(stack(parts, 0));
  const DTensor lse = log(select(reduced, 0, 0));
  DTensor loss = lse - select(reduced, 0, 1);
  const int64_t next = w.defined() ? 3 : 2;
  const DTensor wt = w.defined() ? select(reduced, 0, 2) : DTensor();
  if (wt.defined()) loss = loss * wt;
  if (label_smoothing != 0.0) {
    // -sum_c w[c] lp[c] / C = (lse * sum_c w[c] - sum_c w[c] z[c]) / C; lse - sum_c z[c] / C
    // without weights.
    const DTensor wz = select(reduced, 0, next);
    const DTensor smooth =
        w.defined() ? (lse * select(reduced, 0, next + 1) - wz) / static_cast<double>(classes)
                    : lse - wz / static_cast<double>(classes);
    loss = loss * (1.0 - label_smoothing) + smooth * label_smoothing;
  }
  return reduce_rows(loss, t, ignore_index, reduction, wt);
}

DTensor nll_loss(const DTensor& log_probs, const DTensor& target, Reduction reduction,
                 int64_t ignore_index, const DTensor& weight) {
  static const OpInfo& op = ops_op("nll_loss");
  DT_CHECK(log_probs.defined(), "[nll_loss] argument input is an undefined DTensor");
  DT_CHECK(target.defined(), "[nll_loss] argument target is an undefined DTensor");
  detail::check_reduction("nll_loss", reduction, false);
  const ArgValue args[] = {std::string_view(reduction_name(reduction)), ignore_index,
                           weight.defined()};
  const DTensor t = follow_batch_shards(target, log_probs);
  // Output 1, total_weight, is for the backward only (it keeps the mean's W).
  const DTensor loss = (weight.defined() ? dispatch_multi(op, {&log_probs, &t, &weight}, args)
                                         : dispatch_multi(op, {&log_probs, &t}, args))[0];
  // The class-sharded losses and the mean are reduced here (the documented placements); a sum
  // stays Partial.
  return reduction == Reduction::kSum ? loss : resolve_partial(loss);
}

}  // namespace dtensor
