#include "dtensor/ops/common/detail/elementwise_iter.h"

#include <absl/container/inlined_vector.h>

#include <cstdint>
#include <cstdlib>
#include <numeric>

namespace dtensor::detail {

namespace {

// Sizes and byte strides of the dims an iterator walks, outermost first.
struct Dims {
  Shape sizes;
  std::array<Shape, kMaxIterOperands> strides;
};

// Whether the memory operand k may touch overlaps the output's while operand k is not the
// output's very view (same first element, same strides): then the order of the writes shows,
// and the iterator keeps the output's row-major order. Also true for an output with a zero
// stride (several elements share one location, the last write wins).
bool order_matters(const Shape& sizes, const std::array<Shape, kMaxIterOperands>& strides,
                   const std::array<char*, kMaxIterOperands>& data, const int64_t* item, int nops) {
  auto range = [&](int k, char** lo, char** hi) {
    int64_t neg = 0, pos = 0;
    for (size_t d = 0; d < sizes.size(); ++d) {
      const int64_t span = strides[k][d] * (sizes[d] - 1);
      (span < 0 ? neg : pos) += span;
    }
    *lo = data[k] + neg;
    *hi = data[k] + pos + item[k];
  };
  for (int64_t s : strides[0]) {
    if (s == 0) return true;
  }
  char *out_lo, *out_hi;
  range(0, &out_lo, &out_hi);
  for (int k = 1; k < nops; ++k) {
    char *lo, *hi;
    range(k, &lo, &hi);
    if (hi <= out_lo || lo >= out_hi) continue;
    if (data[k] != data[0] || item[k] != item[0] || strides[k] != strides[0]) return true;
  }
  return false;
}

// Whether dim a, now outside dim b, should go inside it: the first operand (output first) whose
// strides along both are non-zero and differ has the smaller one along a.
bool goes_inside(const Dims& dims, int nops, size_t a, size_t b) {
  for (int k = 0; k < nops; ++k) {
    const int64_t sa = std::abs(dims.strides[k][a]), sb = std::abs(dims.strides[k][b]);
    if (sa == 0 || sb == 0 || sa == sb) continue;
    return sa < sb;
  }
  return false;
}

template <typename T>
void pack_typed(char* dst, const char* src, int64_t rows, int64_t cols, int64_t row_stride,
                int64_t col_stride) {
  T* d = reinterpret_cast<T*>(dst);
  for (int64_t c = 0; c < cols; ++c) {
    const char* s = src + c * col_stride;
    for (int64_t r = 0; r < rows; ++r) {
      d[r * kIterTile + c] = *reinterpret_cast<const T*>(s + r * row_stride);
    }
  }
}

}  // namespace

void pack_tile(char* dst, const char* src, int64_t rows, int64_t cols, int64_t row_stride,
               int64_t col_stride, int64_t item) {
  switch (item) {
    case 1:
      return pack_typed<uint8_t>(dst, src, rows, cols, row_stride, col_stride);
    case 2:
      return pack_typed<uint16_t>(dst, src, rows, cols, row_stride, col_stride);
    case 4:
      return pack_typed<uint32_t>(dst, src, rows, cols, row_stride, col_stride);
    case 8:
      return pack_typed<uint64_t>(dst, src, rows, cols, row_stride, col_stride);
    default:
      DT_FAIL("[ElementwiseIter] unsupported element size %d", item);
  }
}

ElementwiseIter::ElementwiseIter(const Tensor& out, std::initializer_list<const Tensor*> inputs)
    : nops_(1 + static_cast<int>(inputs.size())), numel_(out.numel()) {
  DT_CHECK(nops_ <= kMaxIterOperands, "[ElementwiseIter] at most %d inputs, got %d",
           kMaxIterOperands - 1, nops_ - 1);
  if (numel_ == 0) return;
  const int64_t nd = out.dim();
  const Tensor* ops[kMaxIterOperands] = {&out};
  int k = 1;
  for (const Tensor* t : inputs) ops[k++] = t;

  // Check shapes and record data pointers, item sizes and dim offsets (inputs are aligned
  // to out's trailing dims).
  int64_t lead[kMaxIterOperands];
  int64_t item[kMaxIterOperands];
  for (k = 0; k < nops_; ++k) {
    const Tensor& t = *ops[k];
    lead[k] = nd - t.dim();
    item[k] = static_cast<int64_t>(t.itemsize());
    DT_CHECK(lead[k] >= 0, "[ElementwiseIter] operand %d has more dims (%d) than the output (%d)",
             k, t.dim(), nd);
    for (int64_t d = 0; d < t.dim(); ++d) {
      const int64_t s = t.sizes()[d];
      DT_CHECK(s == out.sizes()[d + lead[k]] || s == 1,
               "[ElementwiseIter] operand %d of shape %s does not broadcast to %s", k,
               shape_str(t.sizes()), shape_str(out.sizes()));
    }
    data_[k] = static_cast<char*>(t.data_ptr());
    item_[k] = item[k];
  }
  // Byte stride of operand k along out's dim d (0 where it broadcasts).
  auto stride_of = [&](int k, int64_t d) -> int64_t {
    const int64_t dk = d - lead[k];
    if (dk < 0 || ops[k]->sizes()[dk] == 1) return 0;
    return ops[k]->strides()[dk] * item[k];
  };

  // Appends a dim (size > 1) outermost-first, merged into the previous one when every operand
  // steps across the pair uniformly (outer stride == inner stride * inner size).
  auto push = [&](int64_t size, const int64_t* st) __attribute__((always_inline)) {
    bool merge = !sizes_.empty();
    for (k = 0; merge && k < nops_; ++k) merge = strides_[k].back() == st[k] * size;
    if (merge) {
      sizes_.back() *= size;
      for (k = 0; k < nops_; ++k) strides_[k].back() = st[k];
    } else {
      sizes_.push_back(size);
      for (k = 0; k < nops_; ++k) strides_[k].push_back(st[k]);
    }
  };
  int64_t st[kMaxIterOperands];
  bool keep_order = false;
  if (out.is_contiguous()) {
    // A row-major output (the usual, freshly allocated one) is already in order.
    for (int64_t d = 0; d < nd; ++d) {
      if (out.sizes()[d] == 1) continue;
      for (k = 0; k < nops_; ++k) st[k] = stride_of(k, d);
      push(out.sizes()[d], st);
    }
  } else {
    // Otherwise order the dims of size > 1 by stride (insertion sort, stable on ties), unless
    // an input overlaps the output.
    Dims dims;
    for (int64_t d = 0; d < nd; ++d) {
      if (out.sizes()[d] == 1) continue;
      dims.sizes.push_back(out.sizes()[d]);
      for (k = 0; k < nops_; ++k) dims.strides[k].push_back(stride_of(k, d));
    }
    const size_t n = dims.sizes.size();
    keep_order = order_matters(dims.sizes, dims.strides, data_, item, nops_);
    absl::InlinedVector<size_t, 6> perm(n);
    std::iota(perm.begin(), perm.end(), size_t{0});
    if (!keep_order) {
      for (size_t i = 1; i < n; ++i) {
        for (size_t j = i; j > 0 && goes_inside(dims, nops_, perm[j - 1], perm[j]); --j) {
          std::swap(perm[j - 1], perm[j]);
        }
      }
    }
    for (size_t p : perm) {
      for (k = 0; k < nops_; ++k) st[k] = dims.strides[k][p];
      push(dims.sizes[p], st);
    }
  }

  // When the order of the writes shows, for_each keeps one thread and row-major order,
  // untiled; asked only where it could change something (ops large enough to split or to tile).
  // Otherwise the two innermost dims are tiled when an input walks the outer of them with a
  // smaller stride than the inner one (e.g. a transposed input into a row-major output); such
  // an input is read tile by tile into a packed row-major copy, along its own contiguous
  // direction.
  const int m = ndim();
  if (keep_order) {
    serial_ = true;
    return;
  }
  const bool tileable = m >= 2 && sizes_[m - 1] > kIterTile && sizes_[m - 2] > kIterTile;
  if (tileable || numel_ >= 2 * kGrainSize) {
    serial_ = order_matters(sizes_, strides_, data_, item, nops_);
  }
  if (!tileable || serial_) return;
  for (k = 1; k < nops_; ++k) {
    const int64_t outer = std::abs(strides_[k][m - 2]), inner = std::abs(strides_[k][m - 1]);
    packed_[k] = outer != 0 && outer < inner;
    tiled_ |= packed_[k];
  }
}

}  // namespace dtensor::detail
