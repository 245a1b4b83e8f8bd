// Creating local tensors. `device` defaults to the CPU, `dtype` to float32.
#pragma once

#include <vector>

#include "dtensor/tensor/tensor.h"

namespace dtensor {

// The dtype and device of a new tensor (float32 on the CPU by default); converts from a DType,
// a Device or a DeviceType, so creation functions accept any of them.
struct TensorOptions {
  DType dtype = DType::kFloat32;  // element type
  Device device = Device();       // where the storage lives
  // float32 on the CPU, or the given dtype and/or device.
  TensorOptions() = default;
  TensorOptions(DType d) : dtype(d) {}
  TensorOptions(Device dev) : device(dev) {}
  TensorOptions(DeviceType t) : device(t) {}
  TensorOptions(DType d, Device dev) : dtype(d), device(dev) {}
};

Tensor empty(IntSpan shape, TensorOptions opts = {});  // uninitialised contents
// New tensors filled with 0, 1 or `value`.
Tensor zeros(IntSpan shape, TensorOptions opts = {});
Tensor ones(IntSpan shape, TensorOptions opts = {});
Tensor full(IntSpan shape, const Scalar& value, TensorOptions opts = {});
// Same shape, dtype and device as `like`.
Tensor empty_like(const Tensor& like);
Tensor zeros_like(const Tensor& like);
// [start, end) with `step`; dtype int64 unless opts says otherwise.
Tensor arange(int64_t end, TensorOptions opts = TensorOptions(DType::kInt64));
Tensor arange(double start, double end, double step = 1.0,
              TensorOptions opts = TensorOptions(DType::kInt64));
// The number of elements arange(start, end, step) has (checked as arange checks its args).
int64_t arange_numel(double start, double end, double step);
// Elements [first, first + count) of arange(start, ..., step): start + i * step for each i,
// rounded to the dtype exactly as arange rounds them (a shard of an arange).
Tensor arange_slice(double start, double step, int64_t first, int64_t count,
                    TensorOptions opts = TensorOptions(DType::kInt64));
// The n x m identity (m = -1: m = n): ones on the diagonal, zeros elsewhere.
Tensor eye(int64_t n, int64_t m = -1, TensorOptions opts = {});
// Rows [row0, row0 + rows) and columns [col0, col0 + cols) of an identity matrix (a shard of
// an eye).
Tensor eye_block(int64_t rows, int64_t cols, int64_t row0, int64_t col0, TensorOptions opts = {});
// Copies `values` into a new CPU tensor of `shape` (numel must match) of T's dtype, then moves
// it to `device`.
template <typename T>
Tensor from_vector(const std::vector<T>& values, IntSpan shape, Device device = Device());
// A contiguous tensor over memory the caller owns (no copy, no ownership taken).
Tensor from_blob(void* data, IntSpan shape, DType dtype, Device device = Device());

}  // namespace dtensor
