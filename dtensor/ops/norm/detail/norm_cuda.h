// CUDA layer_norm / rms_norm (norm_cuda.cu; norm_no_cuda.cc throws when CUDA is off).
#pragma once

#include <optional>

#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// Normalises each slice of the last `n` elements of the floating CUDA tensor x (layer_norm:
// subtract the mean; rms: do not), times weight and plus bias when defined (checked by the
// caller: shape normalized_shape, x's dtype and device). eps defaults to the compute type's
// epsilon as on the CPU. Accumulates in float (float32, 16-bit) or double (float64); one block
// per slice on the current stream. When defined, `mean` and `rstd` (contiguous, one element per
// slice, float32 or float64 for float64 x, on x's device) receive the statistics. Returns a new
// contiguous tensor on x's device.
Tensor norm_cuda(const Tensor& x, int64_t n, const Tensor& weight, const Tensor& bias,
                 std::optional<double> eps, bool rms, const char* op, const Tensor& mean = Tensor(),
                 const Tensor& rstd = Tensor());

// Backward of norm_cuda from its statistics (mean unused for rms), with the formulas of
// dtensor/ops/norm/norm.h. Writes, when defined: grad_x (x's shape and dtype, contiguous), and adds
// the per-row contributions to dw (sum of grad_out * xhat) and db (sum of grad_out), which are
// zero-initialised contiguous tensors of n elements in the statistics' dtype. grad_out, x,
// weight, mean and rstd may be non-contiguous.
void norm_backward_cuda(const Tensor& grad_out, const Tensor& x, int64_t n, const Tensor& mean,
                        const Tensor& rstd, const Tensor& weight, bool rms, const Tensor& grad_x,
                        const Tensor& dw, const Tensor& db);

}  // namespace dtensor::detail
