// CUDA kernels of advanced indexing (advanced_index_cuda.cu; advanced_index_no_cuda.cc throws
// when CUDA is off). Callers (advanced_index_cpu.cc) check the arguments and pass contiguous
// tensors: self / out viewed as [p, m, q], the linear index `lin` (int64, n entries, each in
// [0, m) or -1 for "not in this block") and the result / values as [p, n, q].
#pragma once

#include <cstdint>

#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// out[a][i][b] = self[a][lin[i]][b], or zero where lin[i] is -1. Any dtype (raw bits).
void index_gather_cuda(const Tensor& self, const Tensor& lin, const Tensor& out, int64_t p,
                       int64_t m, int64_t q);
// out[a][lin[i]][b] = values[a][i][b] (the largest i naming a slot wins: a claim pass over m
// slots, or a radix sort of the n (slot, i) pairs when m > 4 n, then the writes; any dtype) or,
// with accumulate, += atomically (float32, float64, int32, int64, integers wrapping; bool ORs).
// Entries with lin[i] == -1 are skipped. In place on out.
void index_put_cuda(const Tensor& out, const Tensor& lin, const Tensor& values, bool accumulate,
                    int64_t p, int64_t m, int64_t q);

}  // namespace dtensor::detail
