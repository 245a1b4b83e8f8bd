// The target rules of cross_entropy, shared by its Tensor (loss.cc) and DTensor
// (loss_dtensor.cc) forms: which kind of target a call has, and the errors for the others.
#pragma once

#include <cstdint>

#include "dtensor/ops/loss/detail/pointwise_loss.h"
#include "dtensor/tensor/dtype.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/shape.h"

namespace dtensor::detail {

// Whether a target holds class probabilities: PyTorch's test, a target of the input's shape
// (a class-index target lacks the class dim, so the two never have one shape).
inline bool probability_target(IntSpan input, IntSpan target) {
  return !input.empty() && input == target;
}

// A target that is neither kind (`probs`: it has the input's shape): a floating one of another
// shape (class indices are integers), or a class-probability one of another dtype than the
// input's floating one (PyTorch would promote; here the target must match). For class
// probabilities, ignore_index must be negative (it is ignored; PyTorch refuses a non-negative
// one too). Shape and dtype are global, so every rank raises alike.
inline void check_cross_entropy_target(IntSpan input, DType input_dtype, IntSpan target,
                                       DType target_dtype, bool probs, int64_t ignore_index) {
  constexpr const char* op = "cross_entropy";
  if (!probs) {
    DT_CHECK(!is_floating(target_dtype),
             "[%s] argument target has dtype %s, expected int64 or int32 (class indices), or "
             "class probabilities of the input's shape %s (got target shape %s)",
             op, dtype_name(target_dtype), shape_str(input), shape_str(target));
    return;
  }
  DT_CHECK(target_dtype == input_dtype && is_floating(input_dtype),
           "[%s] argument target holds class probabilities (the input's shape %s) and has dtype "
           "%s, expected the input's floating dtype %s",
           op, shape_str(input), dtype_name(target_dtype), dtype_name(input_dtype));
  DT_CHECK(ignore_index < 0,
           "[%s] ignore_index %d is not supported with class-probability targets (expected a "
           "negative one, which is ignored)",
           op, ignore_index);
}

// The argument checks of both forms of cross_entropy, in order: the target (above),
// label_smoothing in [0, 1], the reduction (batchmean refused). Returns whether the target holds
// class probabilities.
inline bool check_cross_entropy_args(IntSpan input, DType input_dtype, IntSpan target,
                                     DType target_dtype, int64_t ignore_index,
                                     double label_smoothing, Reduction reduction) {
  constexpr const char* op = "cross_entropy";
  const bool probs = probability_target(input, target);
  check_cross_entropy_target(input, input_dtype, target, target_dtype, probs, ignore_index);
  DT_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0,
           "[%s] label_smoothing must be in [0, 1], got %g", op, label_smoothing);
  check_reduction(op, reduction, false);
  return probs;
}

// The class weights' rule of nll_loss and cross_entropy, both forms: a [classes] floating
// tensor (its shape and dtype are global, so every rank raises alike).
inline void check_class_weight_meta(const char* op, IntSpan weight, DType weight_dtype,
                                    int64_t classes) {
  DT_CHECK(weight.size() == 1 && weight[0] == classes,
           "[%s] weight of shape %s, expected [%d] (one weight per class)", op, shape_str(weight),
           classes);
  DT_CHECK(is_floating(weight_dtype), "[%s] weight has dtype %s, expected a floating dtype", op,
           dtype_name(weight_dtype));
}

}  // namespace dtensor::detail
