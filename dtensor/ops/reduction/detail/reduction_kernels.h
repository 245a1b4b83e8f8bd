// The reduction kernel interface between reduction.cc (checks, output dtypes, allocation) and
// the per-device kernels (reduction_cpu.cc).
#pragma once

#include <cstdint>

#include "dtensor/ops/common/detail/reduce_iter.h"

namespace dtensor::detail {

// kStd: var's square root, taken in double before the one rounding to the output dtype (a float32
// variance may overflow where its root does not, as in PyTorch's kernel).
enum class ReduceOp : uint8_t { kSum, kMean, kVar, kMax, kMin, kStd };

// out (contiguous, plan.out_shape) = op over the plan's reduced elements of `in`. Sum of
// integer/bool inputs writes int64; everything else writes in's dtype. `correction` is var's.
void reduce_cpu(ReduceOp op, const Tensor& out, const Tensor& in, const ReducePlan& plan,
                int64_t correction);

// indices (int64, contiguous) = position of the max (is_max) or min within the reduced
// elements (row-major over the reduced dims); values (in's dtype) = that element, when defined.
// plan.red_numel must be > 0.
void arg_reduce_cpu(bool is_max, const Tensor& values, const Tensor& indices, const Tensor& in,
                    const ReducePlan& plan);

}  // namespace dtensor::detail
