// softmax_with_stats (dtensor/ops/softmax/softmax.cc), for attention's online softmax: a
// cross-family helper, internal (not installed).
#pragma once

#include "dtensor/tensor/tensor.h"

namespace dtensor {

namespace detail {
// softmax(x, -1) with each row's max and sum of exp(x - max) ([..., 1] each, strided views of
// one [..., 2] buffer on the CPU): what an online softmax (attention's blocks) needs, from the
// softmax's own two passes on the CPU. A row of only -inf has max -inf and sum 0 on the CPU
// (float32 / float64) and sum NaN elsewhere (CUDA and 16-bit floats compose amax and
// softmax); its probabilities are NaN either way. An empty last dim gives max -inf and sum 0
// everywhere. A row holding NaN has max and sum NaN everywhere, one holding +inf max +inf and
// sum NaN.
struct SoftmaxStats {
  Tensor out, row_max, row_sum;
};
SoftmaxStats softmax_with_stats(const Tensor& x);
}  // namespace detail

}  // namespace dtensor
