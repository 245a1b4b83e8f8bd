// The margin, embedding and likelihood losses (loss.h): composites of DTensor ops that
// follow PyTorch 2.15's formulas op by op, so that values (and, through autograd, gradients)
// agree with PyTorch's in float64 and a batch-sharded input equals the unsharded result bit for
// bit (every op but the final reduction is row-local).
#include <cmath>
#include <numbers>
#include <string>

#include "dtensor/core/check_ranks.h"
#include "dtensor/core/factories.h"
#include "dtensor/ops/distance/distance.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/index/index.h"
#include "dtensor/ops/loss/detail/pointwise_loss.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/scan/scan.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

using detail::check_reduction;

// kNone keeps the per-element losses, kSum sums them, kMean averages them (the global count).
DTensor reduce(const DTensor& loss, Reduction reduction) {
  if (reduction == Reduction::kNone) return loss;
  return reduction == Reduction::kSum ? sum(loss, {}) : mean(loss, {});
}

void check_floating(std::string_view op, std::string_view what, const DTensor& x) {
  DT_CHECK(x.defined(), "[%s] %s is undefined (expected a floating DTensor)", op, what);
  DT_CHECK(is_floating(x.dtype()), "[%s] %s must be floating, got %s", op, what,
           dtype_name(x.dtype()));
}

// A target of labels or values in the input's dtype: an integer one is cast (PyTorch promotes
// it), another floating dtype is refused.
DTensor like_input(std::string_view op, std::string_view what, const DTensor& t, const DTensor& x) {
  DT_CHECK(t.defined(), "[%s] %s is undefined", op, what);
  if (t.dtype() == x.dtype()) return t;
  DT_CHECK(!is_floating(t.dtype()), "[%s] %s of dtype %s does not match input's %s", op, what,
           dtype_name(t.dtype()), dtype_name(x.dtype()));
  return cast(t, x.dtype());
}

void check_class_target(std::string_view op, const DTensor& t) {
  DT_CHECK(t.dtype() == DType::kInt64 || t.dtype() == DType::kInt32,
           "[%s] target must be int64 or int32 class indices, got %s", op, dtype_name(t.dtype()));
}

// Every rank that may hold different target values agrees on whether one lies outside
// [lo, classes): "[op] target 7 out of range for 5 classes (raised on rank R)".
void check_target_range(std::string_view op, const DTensor& t, int64_t lo, int64_t classes) {
  std::string error;
  for (int64_t v : t.to_local().to(DType::kInt64).to_vector<int64_t>()) {
    if (v < lo || v >= classes) {
      error = absl::StrFormat("[%s] target %d out of range for %d classes", op, v, classes);
      break;
    }
  }
  check_on_all_ranks(t.spec(), error);
}

// The class dim of a [N, C] or [C] input of a multi-class margin loss (PyTorch's shape checks).
void check_margin_input(std::string_view op, const DTensor& x, const DTensor& t, bool same) {
  check_floating(op, "input", x);
  DT_CHECK((x.dim() == 1 || x.dim() == 2) && x.size(x.dim() - 1) > 0,
           "[%s] expected a non-empty [N, C] or [C] input, got %s", op, shape_str(x.shape()));
  const Shape want = same ? x.shape() : (x.dim() == 2 ? Shape{x.size(0)} : Shape{});
  DT_CHECK(t.shape() == want, "[%s] target of shape %s does not match input of shape %s", op,
           shape_str(t.shape()), shape_str(x.shape()));
}

// max(0, margin + d_pos - d_neg), d_neg replaced by min(d_neg, d_swap) with swap.
DTensor triplet(const DTensor& anchor, const DTensor& positive, const DTensor& negative,
                Reduction reduction, double margin, bool swap, std::string_view op,
                const DTensorDistance& distance) {
  check_reduction(op, reduction, false);
  DT_CHECK(margin > 0, "[%s] margin must be greater than 0, got %g", op, margin);
  DT_CHECK(anchor.dim() == positive.dim() && positive.dim() == negative.dim(),
           "[%s] the anchor, positive, and negative tensors are expected to have the same number "
           "of dimensions, but got: anchor %dD, positive %dD, and negative %dD inputs",
           op, anchor.dim(), positive.dim(), negative.dim());
  const DTensor d_pos = distance(anchor, positive);
  DTensor d_neg = distance(anchor, negative);
  if (swap) d_neg = minimum(d_neg, distance(positive, negative));
  return reduce(clamp_min(d_pos + margin - d_neg, 0.0), reduction);
}

DTensor local(const Tensor& t) {
  return t.defined() ? local_dtensor(t) : DTensor();
}

}  // namespace

DTensor margin_ranking_loss(const DTensor& input1, const DTensor& input2, const DTensor& target,
                            Reduction reduction, double margin) {
  constexpr std::string_view op = "margin_ranking_loss";
  check_reduction(op, reduction, false);
  check_floating(op, "input1", input1);
  DT_CHECK(input1.dim() == input2.dim() && input1.dim() == target.dim(),
           "[%s] all input tensors should have the same number of dims, got input1 %s, input2 "
           "%s, target %s",
           op, shape_str(input1.shape()), shape_str(input2.shape()), shape_str(target.shape()));
  const DTensor t = like_input(op, "target", target, input1);
  return reduce(clamp_min(neg(t) * (input1 - input2) + margin, 0.0), reduction);
}

DTensor hinge_embedding_loss(const DTensor& input, const DTensor& target, Reduction reduction,
                             double margin) {
  constexpr std::string_view op = "hinge_embedding_loss";
  check_reduction(op, reduction, false);
  check_floating(op, "input", input);
  const DTensor t = like_input(op, "target", target, input);
  const DTensor zeros = zeros_like(input);
  const DTensor output_margin = where(ne(t, 1.0), clamp_min(margin - input, 0.0), zeros);
  const DTensor output_self = where(ne(t, -1.0), input, zeros);
  return reduce(output_margin + output_self, reduction);
}

DTensor cosine_embedding_loss(const DTensor& input1, const DTensor& input2, const DTensor& target,
                              Reduction reduction, double margin) {
  constexpr std::string_view op = "cosine_embedding_loss";
  check_reduction(op, reduction, false);
  check_floating(op, "input1", input1);
  const int64_t d = target.dim();
  DT_CHECK(d == 0 || d == 1, "[%s] 0D or 1D target tensor expected, multi-target not supported",
           op);
  DT_CHECK(input1.dim() == d + 1 && input2.dim() == d + 1,
           "[%s] %dD target tensor expects %dD input tensors, but found inputs with sizes %s "
           "and %s",
           op, d, d + 1, shape_str(input1.shape()), shape_str(input2.shape()));
  constexpr double kEpsilon = 1e-12;  // ATen's EPSILON
  const DTensor t = like_input(op, "target", target, input1);
  const int64_t dims[] = {d};
  const DTensor prod_sum = sum(input1 * input2, dims);
  const DTensor mag_square1 = sum(input1 * input1, dims) + kEpsilon;
  const DTensor mag_square2 = sum(input2 * input2, dims) + kEpsilon;
  const DTensor cos = prod_sum / sqrt(mag_square1 * mag_square2);
  const DTensor zeros = zeros_like(cos);
  const DTensor pos = 1.0 - cos;
  const DTensor negative = clamp_min(cos - margin, 0.0);
  return reduce(where(eq(t, 1.0), pos, zeros) + where(eq(t, -1.0), negative, zeros), reduction);
}

DTensor soft_margin_loss(const DTensor& input, const DTensor& target, Reduction reduction) {
  constexpr std::string_view op = "soft_margin_loss";
  check_reduction(op, reduction, false);
  check_floating(op, "input", input);
  const DTensor t = like_input(op, "target", target, input);
  return reduce(log1p(exp(neg(input) * t)), reduction);  // ATen: log1p, exact far in the tail
}

DTensor multilabel_soft_margin_loss(const DTensor& input, const DTensor& target,
                                    Reduction reduction, const DTensor& weight) {
  constexpr std::string_view op = "multilabel_soft_margin_loss";
  check_reduction(op, reduction, false);
  check_floating(op, "input", input);
  DT_CHECK(input.dim() >= 1, "[%s] input must have at least 1 dim (the classes), got a 0-d one",
           op);
  const DTensor t = like_input(op, "target", target, input);
  DTensor loss = neg(t * log_sigmoid(input) + (1.0 - t) * log_sigmoid(neg(input)));
  if (weight.defined()) loss = loss * like_input(op, "weight", weight, input);
  const int64_t class_dim = input.dim() - 1;
  const int64_t dims[] = {class_dim};
  return reduce(sum(loss, dims) / static_cast<double>(input.size(class_dim)), reduction);
}

DTensor multi_margin_loss(const DTensor& input, const DTensor& target, Reduction reduction,
                          int64_t p, double margin, const DTensor& weight) {
  constexpr std::string_view op = "multi_margin_loss";
  check_reduction(op, reduction, false);
  DT_CHECK(p == 1 || p == 2, "[%s] only p == 1 and p == 2 supported, got p %d", op, p);
  check_class_target(op, target);
  check_margin_input(op, input, target, false);
  const int64_t C = input.size(input.dim() - 1);
  DT_CHECK(!weight.defined() || (weight.dim() == 1 && weight.size(0) == C),
           "[%s] weight must be one-dimensional of size %d (the classes), got %s", op, C,
           weight.defined() ? shape_str(weight.shape()) : std::string());
  check_target_range(op, target, 0, C);
  const DTensor x = input.dim() == 1 ? unsqueeze(input, 0) : input;
  const DTensor t = reshape(cast(target, DType::kInt64), {x.size(0), 1});
  // z[i, c] = margin - x[i, t_i] + x[i, c], counted where c != t_i and z > 0 (strictly).
  const DTensor z = (margin - gather(x, 1, t)) + x;
  const DTensor counted = logical_and(gt(z, 0.0), eq(one_hot(squeeze(t, 1), C), 0));
  DTensor h = where(counted, p == 1 ? z : z * z, zeros_like(x));
  if (weight.defined())
    h = h * unsqueeze(index_select(like_input(op, "weight", weight, input), 0, squeeze(t, 1)), 1);
  const int64_t dims[] = {1};
  DTensor loss = sum(h, dims) / static_cast<double>(C);
  if (input.dim() == 1) loss = squeeze(loss, 0);
  return reduce(loss, reduction);
}

DTensor multilabel_margin_loss(const DTensor& input, const DTensor& target, Reduction reduction) {
  constexpr std::string_view op = "multilabel_margin_loss";
  check_reduction(op, reduction, false);
  check_class_target(op, target);
  check_margin_input(op, input, target, true);
  const int64_t C = input.size(input.dim() - 1);
  check_target_range(op, target, -1, C);
  const DTensor x = input.dim() == 1 ? unsqueeze(input, 0) : input;
  const DTensor t = cast(input.dim() == 1 ? unsqueeze(target, 0) : target, DType::kInt64);
  // listed[i, j]: entry j comes before the first -1 of row i; is_target[i, k]: class k listed.
  const DTensor listed = eq(cumsum(cast(lt(t, 0), DType::kInt64), 1), 0);
  const DTensor index = clamp_min(t, 0);
  const int64_t dims_j[] = {1};
  const DTensor is_target =
      gt(sum(one_hot(index, C) * unsqueeze(cast(listed, DType::kInt64), 2), dims_j), 0);
  // z[i, j, k] = 1 - x[i, t_ij] + x[i, k], counted where j is listed, k is not and z > 0.
  const DTensor z = unsqueeze(1.0 - gather(x, 1, index), 2) + unsqueeze(x, 1);
  const DTensor counted = logical_and(
      gt(z, 0.0), logical_and(unsqueeze(listed, 2), unsqueeze(logical_not(is_target), 1)));
  const int64_t dims_jk[] = {1, 2};
  DTensor loss = sum(where(counted, z, zeros_like(z)), dims_jk) / static_cast<double>(C);
  if (input.dim() == 1) loss = squeeze(loss, 0);
  return reduce(loss, reduction);
}

DTensor triplet_margin_loss(const DTensor& anchor, const DTensor& positive, const DTensor& negative,
                            Reduction reduction, double margin, double p, double eps, bool swap) {
  return triplet(
      anchor, positive, negative, reduction, margin, swap, "triplet_margin_loss",
      [p, eps](const DTensor& a, const DTensor& b) { return pairwise_distance(a, b, p, eps); });
}

DTensor triplet_margin_with_distance_loss(const DTensor& anchor, const DTensor& positive,
                                          const DTensor& negative, Reduction reduction,
                                          const DTensorDistance& distance_function, double margin,
                                          bool swap) {
  const DTensorDistance pairwise = [](const DTensor& a, const DTensor& b) {
    return pairwise_distance(a, b);
  };
  return triplet(anchor, positive, negative, reduction, margin, swap,
                 "triplet_margin_with_distance_loss",
                 distance_function ? distance_function : pairwise);
}

DTensor poisson_nll_loss(const DTensor& input, const DTensor& target, Reduction reduction,
                         bool log_input, bool full, double eps) {
  constexpr std::string_view op = "poisson_nll_loss";
  check_reduction(op, reduction, false);
  check_floating(op, "input", input);
  const DTensor t = like_input(op, "target", target, input);
  DTensor loss = log_input ? exp(input) - t * input : input - t * log(input + eps);
  if (full) {
    const DTensor stirling = t * log(t) - t + 0.5 * log(2 * std::numbers::pi * t);
    loss = loss + masked_fill(stirling, le(t, 1.0), 0.0);
  }
  return reduce(loss, reduction);
}

DTensor gaussian_nll_loss(const DTensor& input, const DTensor& target, const DTensor& var,
                          Reduction reduction, bool full, double eps) {
  constexpr std::string_view op = "gaussian_nll_loss";
  check_reduction(op, reduction, false);
  check_floating(op, "input", input);
  DTensor v = like_input(op, "var", var, input);
  // any(var < 0) made whole on every rank (one small all-reduce where var is sharded; a Partial
  // var is reduced first by lt), so that every rank raises.
  DT_CHECK(!any(lt(v, 0.0)).full_tensor().item<bool>(), "[%s] var has negative entry/entries", op);
  if (v.shape() != input.shape()) {
    const Shape& s = input.shape();
    int64_t mismatched = 0;
    if (v.dim() == input.dim()) {
      for (int64_t d = 0; d < v.dim(); ++d) mismatched += v.size(d) != s[d] ? v.size(d) : 0;
    }
    if (input.dim() >= 1 && v.shape() == Shape(s.begin(), s.end() - 1)) {
      v = unsqueeze(v, -1);
    } else {
      DT_CHECK(v.dim() == input.dim() && mismatched == 1,
               "[%s] var is of incorrect size: %s for input %s (expected the input's shape, "
               "that shape less the last dim, or one dim of size 1)",
               op, shape_str(v.shape()), shape_str(s));
    }
  }
  // PyTorch clamps a clone of var under no_grad: the value is clamped, the gradient passes as
  // if it were not. v - v.detach() is exactly 0 (finite v), so the sum is the clamped value.
  const DTensor held = v.detach();
  v = clamp_min(held, eps) + (v - held);
  DTensor loss = 0.5 * (log(v) + square(input - like_input(op, "target", target, input)) / v);
  if (full) loss = loss + 0.5 * std::log(2 * std::numbers::pi);
  return reduce(loss, reduction);
}

DTensor gaussian_nll_loss(const DTensor& input, const DTensor& target, double var,
                          Reduction reduction, bool full, double eps) {
  DT_CHECK(!(var < 0), "[gaussian_nll_loss] var has negative entry/entries");
  return gaussian_nll_loss(input, target, var * ones_like(input), reduction, full, eps);
}

// ---- Tensor forms: the composites on local DTensors --------------------------------------------

Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                           Reduction reduction, double margin) {
  return margin_ranking_loss(local(input1), local(input2), local(target), reduction, margin)
      .to_local();
}
Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target, Reduction reduction,
                            double margin) {
  return hinge_embedding_loss(local(input), local(target), reduction, margin).to_local();
}
Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                             Reduction reduction, double margin) {
  return cosine_embedding_loss(local(input1), local(input2), local(target), reduction, margin)
      .to_local();
}
Tensor soft_margin_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  return soft_margin_loss(local(input), local(target), reduction).to_local();
}
Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target, Reduction reduction,
                                   const Tensor& weight) {
  return multilabel_soft_margin_loss(local(input), local(target), reduction, local(weight))
      .to_local();
}
Tensor multi_margin_loss(const Tensor& input, const Tensor& target, Reduction reduction, int64_t p,
                         double margin, const Tensor& weight) {
  return multi_margin_loss(local(input), local(target), reduction, p, margin, local(weight))
      .to_local();
}
Tensor multilabel_margin_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  return multilabel_margin_loss(local(input), local(target), reduction).to_local();
}
Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           Reduction reduction, double margin, double p, double eps, bool swap) {
  return triplet_margin_loss(local(anchor), local(positive), local(negative), reduction, margin, p,
                             eps, swap)
      .to_local();
}
Tensor triplet_margin_with_distance_loss(const Tensor& anchor, const Tensor& positive,
                                         const Tensor& negative, Reduction reduction,
                                         const TensorDistance& distance_function, double margin,
                                         bool swap) {
  DTensorDistance distance;
  if (distance_function) {
    distance = [&distance_function](const DTensor& a, const DTensor& b) {
      return local_dtensor(distance_function(a.to_local(), b.to_local()));
    };
  }
  return triplet_margin_with_distance_loss(local(anchor), local(positive), local(negative),
                                           reduction, distance, margin, swap)
      .to_local();
}
Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, Reduction reduction,
                        bool log_input, bool full, double eps) {
  return poisson_nll_loss(local(input), local(target), reduction, log_input, full, eps).to_local();
}
Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var,
                         Reduction reduction, bool full, double eps) {
  return gaussian_nll_loss(local(input), local(target), local(var), reduction, full, eps)
      .to_local();
}

}  // namespace dtensor
