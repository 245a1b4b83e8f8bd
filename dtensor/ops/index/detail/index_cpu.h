// CPU kernels of the index family (index_cpu.cc), called by index.cc after its checks. Every
// tensor is contiguous; `out` is written in place.
#pragma once

#include <cstdint>

#include "dtensor/ops/common/detail/index_helpers.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// out[p] = x[.., idx[p] along d, ..] (idx int64); raises "[gather] index 7 out of range ...".
void gather_cpu(const Tensor& x, int64_t d, const Tensor& idx, const Tensor& out);
// out += src at index - offset along dim; entries outside [0, out.size(dim)) raise "[op] ..."
// or, when `masked`, are skipped.
void scatter_add_cpu(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                     int64_t offset, bool masked, const char* op);
// out[index - offset along dim] = src (the last entry wins); out of range as scatter_add_cpu.
void scatter_cpu(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                 int64_t offset, bool masked, const char* op);
// out reduced with src (out's dtype) at index - offset along dim; out of range as
// scatter_add_cpu.
void scatter_reduce_cpu(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                        int64_t offset, bool masked, ScatterReduceOp reduce, bool include_self,
                        const char* op);

}  // namespace dtensor::detail
