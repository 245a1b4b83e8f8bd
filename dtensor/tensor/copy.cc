#include <cstring>

#include "dtensor/tensor/convert.h"
#include "dtensor/tensor/detail/copy_kernel.h"

namespace dtensor::detail {

CopyPlan make_copy_plan(IntSpan sizes, IntSpan dst_strides, IntSpan src_strides) {
  CopyPlan p;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 1) continue;
    if (!p.sizes.empty() && p.dst_strides.back() == dst_strides[i] * sizes[i] &&
        p.src_strides.back() == src_strides[i] * sizes[i]) {
      // The previous (outer) dim steps exactly over this one in both tensors: merge.
      p.sizes.back() *= sizes[i];
      p.dst_strides.back() = dst_strides[i];
      p.src_strides.back() = src_strides[i];
      continue;
    }
    p.sizes.push_back(sizes[i]);
    p.dst_strides.push_back(dst_strides[i]);
    p.src_strides.push_back(src_strides[i]);
  }
  if (p.sizes.empty()) {
    p.sizes.push_back(1);
    p.dst_strides.push_back(1);
    p.src_strides.push_back(1);
  }
  return p;
}

namespace {

// Walks the outer dims [0, last) of a copy plan in row-major order (an odometer), keeping the
// element offsets of the current outer index into dst and src.
struct OuterWalk {
  const CopyPlan& p;
  int64_t last;
  Shape counter = Shape(p.sizes.size(), 0);
  int64_t doff = 0, soff = 0;

  int64_t count() const {
    int64_t n = 1;
    for (int64_t d = 0; d < last; ++d) n *= p.sizes[d];
    return n;
  }
  void advance() {
    for (int64_t d = last - 1; d >= 0; --d) {
      doff += p.dst_strides[d];
      soff += p.src_strides[d];
      if (++counter[d] < p.sizes[d]) return;
      doff -= p.dst_strides[d] * p.sizes[d];
      soff -= p.src_strides[d] * p.sizes[d];
      counter[d] = 0;
    }
  }
};

template <typename D, typename S>
void copy_rows(char* dst_base, const char* src_base, const CopyPlan& p) {
  D* dst = reinterpret_cast<D*>(dst_base);
  const S* src = reinterpret_cast<const S*>(src_base);
  const int64_t nd = static_cast<int64_t>(p.sizes.size());
  const int64_t inner = p.sizes[nd - 1];
  const int64_t ds = p.dst_strides[nd - 1];
  const int64_t ss = p.src_strides[nd - 1];
  OuterWalk walk{p, nd - 1};
  const int64_t outer = walk.count();
  for (int64_t row = 0; row < outer; ++row, walk.advance()) {
    D* drow = dst + walk.doff;
    const S* srow = src + walk.soff;
    if constexpr (std::is_same_v<D, S>) {
      if (ds == 1 && ss == 1) {
        std::memcpy(drow, srow, static_cast<size_t>(inner) * sizeof(D));
      } else if (ss == 0) {
        const D v = srow[0];
        for (int64_t i = 0; i < inner; ++i) drow[i * ds] = v;
      } else {
        for (int64_t i = 0; i < inner; ++i) drow[i * ds] = srow[i * ss];
      }
    } else {
      if (ds == 1 && ss == 1) {
        for (int64_t i = 0; i < inner; ++i) drow[i] = convert<D>(srow[i]);
      } else {
        for (int64_t i = 0; i < inner; ++i) drow[i * ds] = convert<D>(srow[i * ss]);
      }
    }
  }
}

// Transposing copies (the src runs along dim nd-2 while dst runs along dim nd-1) walk the
// last two dims in square tiles, so that both sides stay in cache.
template <typename D, typename S>
void copy_tiled(char* dst_base, const char* src_base, const CopyPlan& p) {
  constexpr int64_t kTile = 32;
  D* dst = reinterpret_cast<D*>(dst_base);
  const S* src = reinterpret_cast<const S*>(src_base);
  const int64_t nd = static_cast<int64_t>(p.sizes.size());
  const int64_t rows = p.sizes[nd - 2];
  const int64_t cols = p.sizes[nd - 1];
  const int64_t drs = p.dst_strides[nd - 2];
  const int64_t dcs = p.dst_strides[nd - 1];
  const int64_t srs = p.src_strides[nd - 2];
  const int64_t scs = p.src_strides[nd - 1];
  OuterWalk walk{p, nd - 2};
  const int64_t outer = walk.count();
  for (int64_t o = 0; o < outer; ++o, walk.advance()) {
    for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
      const int64_t r1 = r0 + kTile < rows ? r0 + kTile : rows;
      for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
        const int64_t c1 = c0 + kTile < cols ? c0 + kTile : cols;
        for (int64_t r = r0; r < r1; ++r) {
          D* drow = dst + walk.doff + r * drs;
          const S* srow = src + walk.soff + r * srs;
          for (int64_t c = c0; c < c1; ++c) drow[c * dcs] = convert<D>(srow[c * scs]);
        }
      }
    }
  }
}

}  // namespace

void copy_cpu(const Tensor& dst, const Tensor& src) {
  DT_CHECK(dst.sizes() == src.sizes(), "[copy_] internal: shapes %s and %s differ",
           shape_str(dst.sizes()), shape_str(src.sizes()));
  DT_CHECK(dst.device().is_cpu() && src.device().is_cpu(),
           "[copy_] internal: copy_cpu needs CPU tensors (got %s and %s)", dst.device().str(),
           src.device().str());
  if (dst.numel() == 0) return;
  char* d = static_cast<char*>(dst.data_ptr());
  const char* s = static_cast<const char*>(src.data_ptr());
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    std::memcpy(d, s, dst.nbytes());
    return;
  }
  const CopyPlan plan = make_copy_plan(dst.sizes(), dst.strides(), src.strides());
  const size_t nd = plan.sizes.size();
  const bool tiled = nd >= 2 && plan.src_strides[nd - 1] > 1 && plan.src_strides[nd - 2] == 1 &&
                     plan.sizes[nd - 1] >= 8 && plan.sizes[nd - 2] >= 8;
  dispatch_dtype(dst.dtype(), [&]<typename D>() {
    dispatch_dtype(src.dtype(), [&]<typename S>() {
      if (tiled) {
        copy_tiled<D, S>(d, s, plan);
      } else {
        copy_rows<D, S>(d, s, plan);
      }
    });
  });
}

}  // namespace dtensor::detail
