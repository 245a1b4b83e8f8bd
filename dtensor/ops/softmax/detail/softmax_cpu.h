// CPU softmax kernels (softmax_cpu.cc): the Highway row kernels dispatched over contiguous
// [outer, d, inner] tensors, in chunks of `outer` on the intra-op threads.
#pragma once

#include <cstdint>

#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// softmax (log = false) or log_softmax of x into y; `stats` (inner == 1 only) receives each
// row's max and sum of exp(x - max) as [.., 2] pairs, or is null.
void softmax_forward_rows(const Tensor& x, const Tensor& y, int64_t outer, int64_t d, int64_t inner,
                          bool log, const Tensor* stats);

// The gradient gx from grad_out g and the forward's output y.
void softmax_backward_rows(const Tensor& g, const Tensor& y, const Tensor& gx, int64_t outer,
                           int64_t d, int64_t inner, bool log);

}  // namespace dtensor::detail
