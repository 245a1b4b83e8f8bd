// Helpers shared by the tensor tests: naive reference reads that use only sizes, strides,
// the storage offset and raw memory, independent of the copy kernel.
#pragma once

#include <cstring>
#include <vector>

#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::test {

// Element at storage position `pos` (in elements) of a CPU tensor, as double.
inline double raw_at(const Tensor& t, int64_t pos) {
  const char* base = static_cast<const char*>(t.storage().data());
  double out = 0;
  dispatch_dtype(t.dtype(), [&]<typename T>() {
    T v;
    std::memcpy(&v, base + pos * static_cast<int64_t>(sizeof(T)), sizeof(T));
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      out = static_cast<double>(static_cast<float>(v));
    } else {
      out = static_cast<double>(v);
    }
  });
  return out;
}

// All elements in row-major order via explicit index arithmetic.
inline std::vector<double> naive_values(const Tensor& t) {
  std::vector<double> out;
  const int64_t nd = t.dim();
  if (t.numel() == 0) return out;
  Shape idx(nd, 0);
  for (int64_t n = 0; n < t.numel(); ++n) {
    int64_t pos = t.storage_offset();
    for (int64_t d = 0; d < nd; ++d) pos += idx[d] * t.strides()[d];
    out.push_back(raw_at(t, pos));
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++idx[d] < t.sizes()[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// 0, 1, 2, ... as a contiguous tensor of `shape` and `dtype` (values wrap for bool).
inline Tensor iota(IntSpan shape, DType dtype = DType::kFloat32) {
  return arange(shape_numel(shape), TensorOptions(DType::kInt64)).to(dtype).reshape(shape);
}

inline std::vector<double> iota_values(int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<double>(i);
  return v;
}

}  // namespace dtensor::test
