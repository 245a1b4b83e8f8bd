// Device-side index math shared by the CUDA kernels of the tensor and ops layers: an offset
// calculator that turns the linear (row-major) index of an element into the byte offset of
// that element in each of N operands of one shape with arbitrary strides (stride 0 for
// broadcast dims). Include only from .cu files.
#pragma once

#include <array>
#include <cstdint>

#include "dtensor/tensor/error.h"
#include "dtensor/tensor/shape.h"

namespace dtensor::detail {

inline constexpr int kCudaMaxDims = 16;

template <int N>
struct OffsetCalc {
  int ndim = 0;  // after dropping size-1 dims and merging; 0 = one element
  int64_t sizes[kCudaMaxDims] = {};
  int64_t strides[N][kCudaMaxDims] = {};  // bytes

  // Byte offsets of element `i` (row-major over the merged dims) in every operand.
  __device__ __forceinline__ void get(int64_t i, int64_t (&off)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t sz = sizes[d];
      const int64_t q = i / sz;
      const int64_t r = i - q * sz;
      i = q;
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += r * strides[k][d];
    }
  }
};

// Builds the calculator for operands of shape `sizes` with element strides `strides[k]` and
// element sizes `itemsize[k]`. Dims are merged where every operand steps over them
// contiguously, so a contiguous op has one dim. Throws when more than kCudaMaxDims dims remain.
template <int N>
OffsetCalc<N> make_offset_calc(IntSpan sizes, const std::array<IntSpan, N>& strides,
                               const std::array<int64_t, N>& itemsize) {
  OffsetCalc<N> c;
  int nd = 0;
  int64_t msizes[64];
  int64_t mstr[N][64];
  DT_CHECK(sizes.size() <= 64, "[cuda] tensors with %d dims are not supported (max 64)",
           static_cast<int64_t>(sizes.size()));
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    bool merge = nd > 0;
    for (int k = 0; merge && k < N; ++k) {
      merge = mstr[k][nd - 1] == strides[k][d] * sizes[d];
    }
    if (merge) {
      msizes[nd - 1] *= sizes[d];
      for (int k = 0; k < N; ++k) mstr[k][nd - 1] = strides[k][d];
      continue;
    }
    msizes[nd] = sizes[d];
    for (int k = 0; k < N; ++k) mstr[k][nd] = strides[k][d];
    ++nd;
  }
  DT_CHECK(nd <= kCudaMaxDims,
           "[cuda] %d non-mergeable dims after coalescing (shape %s); CUDA kernels support %d",
           static_cast<int64_t>(nd), shape_str(sizes), static_cast<int64_t>(kCudaMaxDims));
  c.ndim = nd;
  for (int d = 0; d < nd; ++d) {
    c.sizes[d] = msizes[d];
    for (int k = 0; k < N; ++k) c.strides[k][d] = mstr[k][d] * itemsize[k];
  }
  return c;
}

}  // namespace dtensor::detail
