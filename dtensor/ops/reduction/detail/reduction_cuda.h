// CUDA entry points of the reduction kernels, with the contracts of reduce_cpu and
// arg_reduce_cpu (reduction_kernels.h): same accumulation types (double for floating inputs,
// int64 for integer sums), same NaN and tie rules. They launch on the current stream without
// synchronising. Built from reduction_cuda.cu when CUDA is on; reduction_no_cuda.cc throws
// otherwise.
#pragma once

#include "dtensor/ops/reduction/detail/reduction_kernels.h"

namespace dtensor::detail {

void reduce_cuda(ReduceOp op, const Tensor& out, const Tensor& in, const ReducePlan& plan,
                 int64_t correction);
void arg_reduce_cuda(bool is_max, const Tensor& values, const Tensor& indices, const Tensor& in,
                     const ReducePlan& plan);

}  // namespace dtensor::detail
