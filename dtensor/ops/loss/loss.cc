// The nll-family losses on local tensors (nll_loss, cross_entropy, gather_target_log_probs,
// reduce_loss): argument checks and the switch to the CPU kernels (loss_cpu.cc) or the CUDA ones
// (loss_cuda.cu).
#include "dtensor/ops/loss/loss.h"

#include <iterator>
#include <string_view>

#include "dtensor/ops/common/detail/op_checks.h"
#include "dtensor/ops/loss/detail/cross_entropy.h"
#include "dtensor/ops/loss/detail/loss_cpu.h"
#include "dtensor/ops/loss/detail/loss_cuda.h"
#include "dtensor/ops/loss/detail/pointwise_loss.h"
#include "dtensor/ops/softmax/softmax.h"
#include "dtensor/tensor/shape.h"

namespace dtensor {
namespace {

using detail::LossLayout;

void check_target(const Tensor& target, const char* op) {
  detail::check_defined(op, target, "target");
  detail::check_index_dtype(op, target.dtype(), "target");
}

// A [N, C, d...] (or [C]) input seen as [outer, classes, inner].
LossLayout layout_of(const Tensor& input) {
  const int64_t class_dim = input.dim() == 1 ? 0 : 1;
  LossLayout l;
  for (int64_t d = 0; d < input.dim(); ++d) {
    if (d < class_dim) l.outer *= input.size(d);
    if (d > class_dim) l.inner *= input.size(d);
  }
  l.classes = input.size(class_dim);
  return l;
}

LossLayout check_loss_args(const Tensor& input, const Tensor& target, const char* op) {
  detail::check_defined(op, input, "input");
  check_target(target, op);
  detail::check_same_device(op, input, target, "target");
  detail::check_floating_dtype(op, input.dtype(), "input");
  DT_CHECK(input.dim() >= 1,
           "[%s] expected an input of shape [C], [N, C] or [N, C, d1, ...], "
           "got a 0-d tensor",
           op);
  Shape expected = input.sizes();
  expected.erase(expected.begin() + (input.dim() == 1 ? 0 : 1));
  DT_CHECK(target.sizes() == expected,
           "[%s] target of shape %s does not match input of shape %s (expected target shape %s)",
           op, shape_str(target.sizes()), shape_str(input.sizes()), shape_str(expected));
  return layout_of(input);
}

// nll_loss's class weights: a [classes] floating tensor on the input's device (undefined: none).
void check_class_weight(const Tensor& weight, const Tensor& input, int64_t classes,
                        const char* op) {
  if (!weight.defined()) return;
  detail::check_class_weight_meta(op, weight.sizes(), weight.dtype(), classes);
  DT_CHECK(weight.device() == input.device(),
           "[%s] weight is on %s, expected the input's device %s", op, weight.device().str(),
           input.device().str());
}

// Reduction's names in the enum's order: the one table reduction_name and parse_reduction read.
constexpr const char* kReductionNames[] = {"none", "mean", "sum", "batchmean"};
static_assert(std::size(kReductionNames) == static_cast<size_t>(Reduction::kBatchMean) + 1,
              "one name per Reduction");

}  // namespace

const char* reduction_name(Reduction reduction) {
  const auto i = static_cast<size_t>(reduction);
  return i < std::size(kReductionNames) ? kReductionNames[i] : "?";
}

namespace detail {

Reduction parse_reduction(std::string_view r, std::string_view op) {
  for (size_t i = 0; i < std::size(kReductionNames); ++i) {
    if (r == kReductionNames[i]) return static_cast<Reduction>(i);
  }
  DT_FAIL("[%s] unknown reduction '%s' (expected 'none', 'mean' or 'sum')", op, r);
}

}  // namespace detail

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction,
                int64_t ignore_index, const Tensor& weight) {
  const LossLayout l = check_loss_args(log_probs, target, "nll_loss");
  detail::check_reduction("nll_loss", reduction, false);
  check_class_weight(weight, log_probs, l.classes, "nll_loss");
  if (log_probs.device().is_cuda()) {
    return detail::nll_loss_cuda(log_probs, target, l.outer, l.classes, l.inner, reduction,
                                 ignore_index, 0.0, weight);
  }
  return detail::nll_loss_cpu(log_probs, target, l.outer, l.classes, l.inner, reduction,
                              ignore_index, 0.0, weight);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction,
                     int64_t ignore_index, double label_smoothing, const Tensor& weight) {
  const char* op = "cross_entropy";
  detail::check_defined(op, logits, "input");
  detail::check_defined(op, target, "target");
  const bool probs =
      detail::check_cross_entropy_args(logits.sizes(), logits.dtype(), target.sizes(),
                                       target.dtype(), ignore_index, label_smoothing, reduction);
  const int64_t class_dim = logits.dim() == 1 ? 0 : 1;
  if (probs) {
    detail::check_same_device(op, logits, target, "target");
    const LossLayout l = layout_of(logits);
    check_class_weight(weight, logits, l.classes, op);
    const Tensor lp = log_softmax(logits, class_dim);
    if (lp.device().is_cuda()) {
      return detail::cross_entropy_probs_cuda(lp, target, l, reduction, label_smoothing, weight);
    }
    return detail::cross_entropy_probs_cpu(lp, target, l, reduction, label_smoothing, weight);
  }
  const LossLayout l = check_loss_args(logits, target, op);
  check_class_weight(weight, logits, l.classes, op);
  const Tensor lp = log_softmax(logits, class_dim);
  if (lp.device().is_cuda()) {
    return detail::nll_loss_cuda(lp, target, l.outer, l.classes, l.inner, reduction, ignore_index,
                                 label_smoothing, weight);
  }
  return detail::nll_loss_cpu(lp, target, l.outer, l.classes, l.inner, reduction, ignore_index,
                              label_smoothing, weight);
}

Tensor gather_target_log_probs(const Tensor& log_probs, const Tensor& target, int64_t class_offset,
                               int64_t ignore_index) {
  const char* op = "gather_target_log_probs";
  const LossLayout l = check_loss_args(log_probs, target, op);
  if (log_probs.device().is_cuda()) {
    return detail::gather_target_log_probs_cuda(log_probs, target, l.outer, l.classes, l.inner,
                                                class_offset, ignore_index);
  }
  return detail::gather_target_log_probs_cpu(log_probs, target, l.outer, l.classes, l.inner,
                                             class_offset, ignore_index);
}

Tensor reduce_loss(const Tensor& losses, const Tensor& target, Reduction reduction,
                   int64_t ignore_index) {
  const char* op = "reduce_loss";
  DT_CHECK(losses.defined(), "[%s] expected a defined losses tensor", op);
  check_target(target, op);
  DT_CHECK(losses.sizes() == target.sizes(),
           "[%s] losses of shape %s do not match target of shape %s", op, shape_str(losses.sizes()),
           shape_str(target.sizes()));
  DT_CHECK(losses.device() == target.device(),
           "[%s] expected losses and target on the same device, got %s and %s", op,
           losses.device().str(), target.device().str());
  detail::check_reduction(op, reduction, false);
  if (losses.device().is_cuda()) {
    return detail::reduce_loss_cuda(losses, target, reduction, ignore_index);
  }
  return detail::reduce_loss_cpu(losses, target, reduction, ignore_index);
}

}  // namespace dtensor
