// CUDA softmax / log_softmax (softmax_cuda.cu; softmax_no_cuda.cc throws when CUDA is off).
#pragma once

#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// softmax (log = false) or log_softmax of a floating CUDA tensor x along the normalised dim
// `dim` (0 for a 0-d x), with the CPU kernel's formulas and accumulation (float for
// float32/16-bit, double for float64). Returns a new contiguous tensor on x's device; one block
// per slice, on the current stream.
Tensor softmax_cuda(const Tensor& x, int64_t dim, bool log, const char* op);

// softmax_backward (log = false) or log_softmax_backward of CUDA tensors grad_out and out (one
// shape, floating dtype and device, checked by the caller) along the normalised dim `dim`:
// out * (grad_out - sum(grad_out * out)) or grad_out - exp(out) * sum(grad_out), accumulated as
// softmax_cuda. One block per slice; returns a new contiguous tensor on out's device.
Tensor softmax_backward_cuda(const Tensor& grad_out, const Tensor& out, int64_t dim, bool log,
                             const char* op);

}  // namespace dtensor::detail
