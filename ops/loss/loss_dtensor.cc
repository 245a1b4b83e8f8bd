// DTensor cross entropy, composed of DTensor ops (so it is sharded, cached and differentiable
// like any op), with PyTorch's loss-parallel path for class-sharded logits.
//
// Worked example, [N, C] logits with placements [S(1)] on 2 ranks, C = 5 (blocks of 3 and 2):
// amax over the classes gives P(max) row maxima; subtracting them needs the whole maximum
// (all-reduce(max) #1); exp, the class sum and the target pick (gather_target: each rank picks
// the targets in its class block) are P(sum); they are stacked and reduced together
// (all-reduce(sum) #2); lse = log(sum exp(x - M)), loss = lse - (x - M)[t]. The full logits are
// never gathered. A batch-sharded mean adds one all-reduce of (sum, count).
#include <limits>

#include "autograd/dispatch.h"
#include "ops/elementwise/elementwise.h"
#include "ops/loss/loss.h"
#include "ops/ops_registry.h"
#include "ops/reduction/reduction.h"
#include "ops/view/view.h"
#include "tensor/error.h"

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

DTensor gather_target(const DTensor& input, const DTensor& target, int64_t ignore_index) {
  static const OpInfo& op = ops_op("gather_target");
  const ArgValue args[] = {ignore_index};
  return dispatch(op, {&input, &target}, args);
}

}  // namespace

DTensor cross_entropy(const DTensor& logits, const DTensor& target, Reduction reduction,
                      int64_t ignore_index, double label_smoothing) {
  DT_CHECK(logits.defined(), "[%s] argument input is an undefined DTensor", kOp);
  DT_CHECK(target.defined(), "[%s] argument target is an undefined DTensor", kOp);
  DT_CHECK(target.device_mesh() == logits.device_mesh(),
           "[%s] inputs live on different meshes (argument target)", kOp);
  DT_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0,
           "[%s] label_smoothing must be in [0, 1], got %g", kOp, label_smoothing);
  DT_CHECK(logits.dim() >= 1, "[%s] argument input is 0-d, expected [C], [N, C] or [N, C, ...]",
           kOp);
  const int64_t class_dim = logits.dim() == 1 ? 0 : 1;
  const int64_t classes = logits.size(class_dim);
  const int64_t dims[] = {class_dim};

  // Partial logits are reduced first (softmax is not linear).
  const DTensor x = resolve_partial(logits);
  // Stabilised by the row maximum, a constant for the gradient (it cancels in lse - x[t]).
  const DTensor z = x - amax(x, dims, /*keepdim=*/true).detach();
  std::vector<DTensor> parts = {sum(exp(z), dims), gather_target(z, target, ignore_index)};
  if (label_smoothing != 0.0) parts.push_back(sum(z, dims));
  // The class-sharded partial sums travel in one all-reduce.
  const DTensor reduced = resolve_partial(stack(parts, 0));
  const DTensor lse = log(select(reduced, 0, 0));
  DTensor loss = lse - select(reduced, 0, 1);
  if (label_smoothing != 0.0) {
    const DTensor smooth = lse - select(reduced, 0, 2) / static_cast<double>(classes);
    loss = loss * (1.0 - label_smoothing) + smooth * label_smoothing;
  }
  // Ignored targets contribute 0 and are not counted by the mean.
  const DTensor valid = cast(ne(target, Scalar(ignore_index)), loss.dtype());
  loss = loss * valid;
  switch (reduction) {
    case Reduction::kNone:
      return loss;
    case Reduction::kSum:
      return sum(loss, {});
    case Reduction::kMean:
      break;
  }
  // Exact for uneven shards and ignored targets: (sum, count) reduced together, then divided.
  // With no target counted the mean is 0/0 = NaN and its gradient 0, as PyTorch's: the sum is
  // divided by at least 1 (dividing by 0 would send inf back, and inf * 0 = NaN through the
  // mask above), then NaN is filled in, which passes no gradient.
  const DTensor totals = resolve_partial(stack({sum(loss, {}), sum(valid, {})}, 0));
  const DTensor count = select(totals, 0, 1);
  return masked_fill(select(totals, 0, 0) / clamp_min(count, Scalar(1.0)), eq(count, Scalar(0.0)),
                     Scalar(std::numeric_limits<double>::quiet_NaN()));
}

}  // namespace dtensor
