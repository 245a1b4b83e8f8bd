// Iteration over the elements of an elementwise op: operand 0 is the output, the others are
// inputs broadcast (NumPy rules) to the output's shape. Arbitrary strides (stride 0 included)
// and per-operand dtypes are allowed. Like PyTorch's TensorIterator, size-1 dims are dropped,
// the remaining dims are ordered so the innermost walks the smallest strides (the output's
// first, then the inputs' to break ties), and neighbouring dims are merged where every operand
// is contiguous across them, so a contiguous same-shape op runs as one call of the inner loop
// over all elements. When an input still runs across the inner dim (a transposed input into a
// row-major output), the two innermost dims are walked in square tiles and that input is read
// into a packed row-major copy of each tile along its own contiguous direction, so neither
// side strides through memory. An input that overlaps the output without being the same view
// keeps the output's row-major order, untiled, as before. Every element is computed exactly as
// in any other order: the results are the same bit for bit.
#pragma once

#include <algorithm>
#include <array>
#include <initializer_list>
#include <memory>

#include "tensor/tensor.h"

namespace dtensor::detail {

inline constexpr int kMaxIterOperands = 4;
// Side of the tiles (in elements) for transposed inputs (64 measured best on the dev box for a
// 1024 x 1024 float transpose-add; 32 was slower).
inline constexpr int64_t kIterTile = 64;

// Copies the rows x cols block of `item`-byte elements at `src` (element (r, c) at
// src + r * row_stride + c * col_stride) into `dst` as rows of kIterTile elements.
void pack_tile(char* dst, const char* src, int64_t rows, int64_t cols, int64_t row_stride,
               int64_t col_stride, int64_t item);

class ElementwiseIter {
 public:
  // `out` has the broadcast shape of `inputs` (the caller checked it and allocated out); at
  // most kMaxIterOperands - 1 inputs, all on the CPU.
  ElementwiseIter(const Tensor& out, std::initializer_list<const Tensor*> inputs);

  int64_t numel() const { return numel_; }
  int noperands() const { return nops_; }
  // Dims left after dropping size-1 dims and merging (0 for a one-element op).
  int ndim() const { return static_cast<int>(sizes_.size()); }
  // Whether the two innermost dims are walked in tiles (see the file comment).
  bool tiled() const { return tiled_; }
  // Merged sizes and byte strides of operand k, outermost first (for tests).
  const Shape& sizes() const { return sizes_; }
  const Shape& strides(int k) const { return strides_[k]; }

  // Calls loop(char* const* ptrs, const int64_t* byte_strides, int64_t n) once per innermost
  // row (or row of a tile): ptrs[k] points at operand k's first element of the row, its next
  // element is byte_strides[k] bytes further. Nothing runs for zero-size ops.
  template <typename Loop>
  void for_each(Loop&& loop) const;

 private:
  int nops_ = 0;
  int64_t numel_ = 0;
  bool tiled_ = false;
  std::array<bool, kMaxIterOperands> packed_ = {};   // tiled input read through a packed copy
  std::array<int64_t, kMaxIterOperands> item_ = {};  // element size in bytes, per operand
  Shape sizes_;                                      // merged sizes, innermost last
  std::array<Shape, kMaxIterOperands> strides_;      // bytes, per operand
  std::array<char*, kMaxIterOperands> data_ = {};    // first element, per operand
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
  // One step of the loop body covers the innermost dim (rows), or the two innermost (tiles).
  const int body = tiled_ ? 2 : 1;
  const int64_t rows = tiled_ ? sizes_[nd - 2] : 1;
  std::unique_ptr<char[]> buffer;  // packed tiles of the transposed inputs
  std::array<char*, kMaxIterOperands> tile = {};
  std::array<char*, kMaxIterOperands> row_ptrs;
  std::array<int64_t, kMaxIterOperands> row_strides = inner;
  if (tiled_) {
    int64_t bytes = 0;
    for (int k = 0; k < nops_; ++k) bytes += packed_[k] ? kIterTile * kIterTile * item_[k] : 0;
    buffer.reset(new char[bytes]);
    bytes = 0;
    for (int k = 0; k < nops_; ++k) {
      if (!packed_[k]) continue;
      tile[k] = buffer.get() + bytes;
      bytes += kIterTile * kIterTile * item_[k];
      row_strides[k] = item_[k];
    }
  }
  Shape counter(nd - body, 0);
  const int64_t steps = numel_ / (n * rows);
  for (int64_t step = 0; step < steps; ++step) {
    if (!tiled_) {
      loop(ptrs.data(), inner.data(), n);
    } else {
      for (int64_t r0 = 0; r0 < rows; r0 += kIterTile) {
        const int64_t rn = std::min(kIterTile, rows - r0);
        for (int64_t c0 = 0; c0 < n; c0 += kIterTile) {
          const int64_t cn = std::min(kIterTile, n - c0);
          for (int k = 0; k < nops_; ++k) {
            if (tile[k]) {
              pack_tile(tile[k], ptrs[k] + r0 * strides_[k][nd - 2] + c0 * inner[k], rn, cn,
                        strides_[k][nd - 2], inner[k], item_[k]);
            }
          }
          for (int64_t r = 0; r < rn; ++r) {
            for (int k = 0; k < nops_; ++k) {
              row_ptrs[k] = tile[k] ? tile[k] + r * kIterTile * item_[k]
                                    : ptrs[k] + (r0 + r) * strides_[k][nd - 2] + c0 * inner[k];
            }
            loop(row_ptrs.data(), row_strides.data(), cn);
          }
        }
      }
    }
    for (int d = nd - body - 1; d >= 0; --d) {
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
