// CUDA layer_norm / rms_norm (norm_cuda.cu; norm_no_cuda.cc throws when CUDA is off).
#pragma once

#include <optional>

#include "tensor/tensor.h"

namespace dtensor::detail {

// Normalises each slice of the last `n` elements of the floating CUDA tensor x (layer_norm:
// subtract the mean; rms: do not), times weight and plus bias when defined (checked by the
// caller: shape normalized_shape, x's dtype and device). eps defaults to the compute type's
// epsilon as on the CPU. Accumulates in float (float32, 16-bit) or double (float64); one block
// per slice on the current stream. Returns a new contiguous tensor on x's device.
Tensor norm_cuda(const Tensor& x, int64_t n, const Tensor& weight, const Tensor& bias,
                 std::optional<double> eps, bool rms, const char* op);

}  // namespace dtensor::detail
