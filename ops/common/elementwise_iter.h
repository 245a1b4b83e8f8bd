// Iteration over the elements of an elementwise op: operand 0 is the output, the others are
// inputs broadcast (NumPy rules) to the output's shape. Arbitrary strides (stride 0 included)
// and per-operand dtypes are allowed. Size-1 dims are dropped and neighbouring dims merged
// where every operand is contiguous across them, so a contiguous same-shape op runs as one
// call of the inner loop over all elements.
#pragma once

#include <array>
#include <initializer_list>

#include "tensor/tensor.h"

namespace dtensor::detail {

inline constexpr int kMaxIterOperands = 4;

class ElementwiseIter {
 public:
  // `out` has the broadcast shape of `inputs` (the caller checked it and allocated out); at
  // most kMaxIterOperands - 1 inputs, all on the CPU.
  ElementwiseIter(const Tensor& out, std::initializer_list<const Tensor*> inputs);

  int64_t numel() const { return numel_; }
  int noperands() const { return nops_; }
  // Dims left after dropping size-1 dims and merging (0 for a one-element op).
  int ndim() const { return static_cast<int>(sizes_.size()); }

  // Calls loop(char* const* ptrs, const int64_t* byte_strides, int64_t n) once per innermost
  // row: ptrs[k] points at operand k's first element of the row, its next element is
  // byte_strides[k] bytes further. Nothing runs for zero-size ops.
  template <typename Loop>
  void for_each(Loop&& loop) const;

 private:
  int nops_ = 0;
  int64_t numel_ = 0;
  Shape sizes_;                                    // merged sizes, innermost last
  std::array<Shape, kMaxIterOperands> strides_;    // bytes, per operand
  std::array<char*, kMaxIterOperands> data_ = {};  // first element, per operand
};

template <typename Loop>
void ElementwiseIter::for_each(Loop&& loop) const {
  if (numel_ == 0) return;
  std::array<char*, kMaxIterOperands> ptrs = data_;
  std::array<int64_t, kMaxIterOperands> inner = {};
  const int nd = ndim();
  if (nd == 0) {
    loop(ptrs.data(), inner.data(), int64_t{1});
    return;
  }
  for (int k = 0; k < nops_; ++k) inner[k] = strides_[k][nd - 1];
  const int64_t n = sizes_[nd - 1];
  if (nd == 1) {
    loop(ptrs.data(), inner.data(), n);
    return;
  }
  Shape counter(nd - 1, 0);
  const int64_t rows = numel_ / n;
  for (int64_t r = 0; r < rows; ++r) {
    loop(ptrs.data(), inner.data(), n);
    for (int d = nd - 2; d >= 0; --d) {
      if (++counter[d] < sizes_[d]) {
        for (int k = 0; k < nops_; ++k) ptrs[k] += strides_[k][d];
        break;
      }
      counter[d] = 0;
      for (int k = 0; k < nops_; ++k) ptrs[k] -= strides_[k][d] * (sizes_[d] - 1);
    }
  }
}

}  // namespace dtensor::detail
