// CPU layer_norm / rms_norm kernels (norm_cpu.cc), called by norm.cc after its checks; the
// counterparts of norm_cuda.h's.
#pragma once

#include <cstdint>
#include <optional>

#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// The dtype of the statistics and weight/bias gradient accumulators for input dtype d.
inline DType norm_stats_dtype(DType d) {
  return d == kFloat64 ? kFloat64 : kFloat32;
}

// Normalises each slice of the last `n` elements of the floating CPU tensor x (checked by the
// caller, as weight and bias), as norm_cuda. When defined, `mean` and `rstd` (contiguous, one
// element per slice, norm_stats_dtype) receive the statistics. Returns a new contiguous tensor.
Tensor norm_cpu(const Tensor& x, int64_t n, const Tensor& weight, const Tensor& bias,
                std::optional<double> eps, bool rms, const Tensor& mean, const Tensor& rstd);

// Backward of norm_cpu from its statistics (mean unused for rms), as norm_backward_cuda: writes
// grad_x when defined and adds into dw / db (zeroed, norm_stats_dtype) when defined. x holds at
// least one element.
void norm_backward_cpu(const Tensor& grad_out, const Tensor& x, int64_t n, const Tensor& mean,
                       const Tensor& rstd, const Tensor& weight, bool rms, const Tensor& gx,
                       const Tensor& dw, const Tensor& db);

}  // namespace dtensor::detail
