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

#include "dtensor/ops/common/detail/parallel_for.h"
#include "dtensor/tensor/tensor.h"

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
  // Units of work for_each splits across threads: outer steps (each one innermost row), or, when
  // tiled, (outer step, block of kIterTile rows) pairs; for ndim() >= 2.
  int64_t units() const {
    const int nd = ndim();
    const int64_t n = sizes_[nd - 1];
    if (!tiled_) return numel_ / n;
    const int64_t rows = sizes_[nd - 2];
    return numel_ / (n * rows) * ((rows + kIterTile - 1) / kIterTile);
  }
  bool serial() const { return serial_; }

  // Calls loop(char* const* ptrs, const int64_t* byte_strides, int64_t n) once per innermost
  // row (or row of a tile, or chunk of a single row): ptrs[k] points at operand k's first
  // element of the row, its next element is byte_strides[k] bytes further. Nothing runs for
  // zero-size ops. On a large op the calls run on the intra-op threads (dtensor/ops/threads.h), on
  // disjoint rows, in any order: the loop must only compute its row's outputs from its inputs
  // (no state carried between calls). Ops whose order of writes shows (an input overlapping the
  // output other than as its very view, an output with a zero stride) run on one thread, in
  // row-major order.
  template <typename Loop>
  void for_each(Loop&& loop) const;

 private:
  // Runs units [begin, end) in order (for_each's body on one thread).
  template <typename Loop>
  void run_units(int64_t begin, int64_t end, Loop& loop) const;

  int nops_ = 0;
  int64_t numel_ = 0;
  bool tiled_ = false;
  bool serial_ = false;  // the order of the writes shows: one thread, row-major
  std::array<bool, kMaxIterOperands> packed_ = {};   // tiled input read through a packed copy
  std::array<int64_t, kMaxIterOperands> item_ = {};  // element size in bytes, per operand
  Shape sizes_;                                      // merged sizes, innermost last
  std::array<Shape, kMaxIterOperands> strides_;      // bytes, per operand
  std::array<char*, kMaxIterOperands> data_ = {};    // first element, per operand
};

template <typename Loop>
void ElementwiseIter::for_each(Loop&& loop) const {
  if (numel_ == 0) return;
  std::array<int64_t, kMaxIterOperands> inner = {};
  const int nd = ndim();
  if (nd == 0) {
    std::array<char*, kMaxIterOperands> ptrs = data_;
    loop(ptrs.data(), inner.data(), int64_t{1});
    return;
  }
  for (int k = 0; k < nops_; ++k) inner[k] = strides_[k][nd - 1];
  if (nd == 1) {
    // One row: chunks of it.
    const auto chunk = [&](int64_t lo, int64_t hi) {
      std::array<char*, kMaxIterOperands> ptrs;
      for (int k = 0; k < nops_; ++k) ptrs[k] = data_[k] + lo * inner[k];
      loop(ptrs.data(), inner.data(), hi - lo);
    };
    if (serial_) return chunk(0, numel_);
    return parallel_for(0, numel_, kGrainSize, chunk);
  }
  const int64_t units = this->units();
  if (serial_ || numel_ < 2 * kGrainSize) return run_units(0, units, loop);
  parallel_for(0, units, row_grain(numel_ / units),
               [&](int64_t lo, int64_t hi) { run_units(lo, hi, loop); });
}

template <typename Loop>
void ElementwiseIter::run_units(int64_t begin, int64_t end, Loop& loop) const {
  const int nd = ndim();
  const int body = tiled_ ? 2 : 1;
  const int64_t n = sizes_[nd - 1];
  const int64_t rows = tiled_ ? sizes_[nd - 2] : 1;
  const int64_t blocks = tiled_ ? (rows + kIterTile - 1) / kIterTile : 1;
  std::array<int64_t, kMaxIterOperands> inner = {};
  for (int k = 0; k < nops_; ++k) inner[k] = strides_[k][nd - 1];
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
  // The counter and pointers of unit `begin`'s step (the outer dims, innermost last).
  Shape counter(nd - body, 0);
  std::array<char*, kMaxIterOperands> ptrs = data_;
  int64_t block = 0;
  if (begin > 0) {
    block = begin % blocks;
    for (int64_t d = nd - body - 1, rest = begin / blocks; d >= 0; --d) {
      counter[d] = rest % sizes_[d];
      rest /= sizes_[d];
      for (int k = 0; k < nops_; ++k) ptrs[k] += counter[d] * strides_[k][d];
    }
  }
  for (int64_t unit = begin; unit < end; ++unit) {
    if (!tiled_) {
      loop(ptrs.data(), inner.data(), n);
    } else {
      const int64_t r0 = block * kIterTile;
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
      if (++block < blocks) continue;
      block = 0;
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
