// Internal: how the GEMM drivers read their operands, shared by the CPU one (matmul_cpu.cc,
// BLAS) and the CUDA one (matmul_cuda.cc, cuBLAS): the layout of an operand's last two dims and
// the walk over the batch dims.
#pragma once

#include <algorithm>
#include <cstdint>

#include "dtensor/tensor/shape.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// How BLAS can read a row-major matrix view of r x c elements with strides (sr, sc): as is
// (trans = false, leading dim ld) or as the transpose of a row-major matrix (trans = true).
// Strides of size-1 dims do not matter. ok = false means the view needs a contiguous copy.
struct MatLayout {
  bool ok = false;
  bool trans = false;
  int64_t ld = 0;
};

inline MatLayout blas_layout(int64_t r, int64_t c, int64_t sr, int64_t sc) {
  if ((sc == 1 || c <= 1) && (r <= 1 || sr >= std::max<int64_t>(1, c))) {
    return {true, false, r <= 1 ? std::max<int64_t>(1, c) : sr};
  }
  if ((sr == 1 || r <= 1) && (c <= 1 || sc >= std::max<int64_t>(1, r))) {
    return {true, true, c <= 1 ? std::max<int64_t>(1, r) : sc};
  }
  return {};
}

// The layout of x's last two dims.
inline MatLayout matrix_layout(const Tensor& x) {
  return blas_layout(x.size(-2), x.size(-1), x.stride(-2), x.stride(-1));
}

// Walks the first `dims` batch dims of out in row-major order (the last fastest), giving the
// element offset of each batch in the operands a and b (whose strides may be 0: broadcast).
class BatchWalk {
 public:
  BatchWalk(const Tensor& a, const Tensor& b, const Tensor& out, int64_t dims)
      : a_(a), b_(b), out_(out), idx_(static_cast<size_t>(dims), 0) {}

  int64_t a_offset() const { return offset(a_); }
  int64_t b_offset() const { return offset(b_); }

  void next() {
    for (int64_t d = static_cast<int64_t>(idx_.size()) - 1; d >= 0; --d) {
      if (++idx_[d] < out_.size(d)) break;
      idx_[d] = 0;
    }
  }

 private:
  int64_t offset(const Tensor& x) const {
    int64_t off = 0;
    for (size_t d = 0; d < idx_.size(); ++d) off += idx_[d] * x.stride(static_cast<int64_t>(d));
    return off;
  }

  const Tensor& a_;
  const Tensor& b_;
  const Tensor& out_;
  Shape idx_;
};

}  // namespace dtensor::detail
