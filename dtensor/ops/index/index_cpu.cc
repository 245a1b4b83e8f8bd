// CPU kernels of the index family: gather and the scatters on contiguous tensors, in the
// index's row-major order. The Tensor functions (checks, device switch) are in index.cc.
#include "dtensor/ops/index/detail/index_cpu.h"

#include <cstring>
#include <optional>
#include <type_traits>
#include <vector>

#include "dtensor/ops/common/detail/index_helpers.h"
#include "dtensor/ops/index/detail/scatter_reduce_math.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {
namespace {

// Calls f(position in index, element offset in a contiguous tensor of `target` shape without
// the dim term) for every element of an index of shape `ishape`, in row-major order.
template <typename F>
void for_each_index(IntSpan ishape, IntSpan target, int64_t dim, F&& f) {
  const int64_t n = shape_numel(ishape);
  if (n == 0) return;
  const Shape strides = contiguous_strides(target);
  const int64_t ndim = static_cast<int64_t>(ishape.size());
  Shape c(ndim, 0);
  int64_t base = 0;  // sum of c[k] * strides[k] over k != dim
  for (int64_t p = 0; p < n; ++p) {
    f(p, base);
    for (int64_t k = ndim - 1; k >= 0; --k) {
      if (++c[k] < ishape[k]) {
        if (k != dim) base += strides[k];
        break;
      }
      if (k != dim) base -= (ishape[k] - 1) * strides[k];
      c[k] = 0;
    }
  }
}

// Calls f(position in index, element offset in `out`) for every entry of `index` whose
// index - offset falls in [0, out.size(dim)), in the index's row-major order; the others raise
// "[op] index 7 out of range ..." or, when `masked`, are skipped. out is contiguous.
template <typename F>
void for_each_target(const Tensor& out, int64_t dim, const Tensor& index, int64_t offset,
                     bool masked, const char* op, F&& f) {
  const Tensor idx = index.to(kInt64).contiguous();
  const int64_t* ip = idx.numel() > 0 ? idx.data<int64_t>() : nullptr;
  const int64_t size = out.size(dim), stride = contiguous_strides(out.sizes())[dim];
  for_each_index(idx.sizes(), out.sizes(), dim, [&](int64_t p, int64_t base) {
    const int64_t r = ip[p] - offset;
    if (r < 0 || r >= size) {
      DT_CHECK(masked, "[%s] index %d out of range for dim %d of size %d", op, ip[p], dim, size);
      return;
    }
    f(p, base + r * stride);
  });
}

}  // namespace

// out[p] = x[.., idx[p] along d, ..] (x, idx int64 and out contiguous, on the CPU); raises
// "[gather] index 7 out of range for dim d of size s".
void gather_cpu(const Tensor& x, int64_t d, const Tensor& idx, const Tensor& out) {
  const int64_t* ip = idx.data<int64_t>();
  const int64_t size = x.size(d), stride = contiguous_strides(x.sizes())[d];
  const size_t item = x.itemsize();
  const auto* src = static_cast<const char*>(x.data_ptr());
  auto* dst = static_cast<char*>(out.data_ptr());
  for_each_index(idx.sizes(), x.sizes(), d, [&](int64_t p, int64_t base) {
    DT_CHECK(ip[p] >= 0 && ip[p] < size, "[gather] index %d out of range for dim %d of size %d",
             ip[p], d, size);
    std::memcpy(dst + p * item, src + (base + ip[p] * stride) * item, item);
  });
}

// out (contiguous, in place) += src at index - offset along dim.
void scatter_add_cpu(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                     int64_t offset, bool masked, const char* op) {
  const Tensor s = src.to(out.dtype()).contiguous();
  dispatch_dtype(out.dtype(), [&]<typename T>() {
    using C = compute_t<T>;
    T* o = static_cast<T*>(out.data_ptr());
    const T* v = static_cast<const T*>(s.data_ptr());
    for_each_target(out, dim, index, offset, masked, op, [&](int64_t p, int64_t at) {
      if constexpr (std::is_same_v<T, bool>) {
        o[at] = o[at] || v[p];
      } else {
        o[at] = static_cast<T>(static_cast<C>(o[at]) + static_cast<C>(v[p]));
      }
    });
  });
}

// out (contiguous, in place)[index - offset along dim] = src. Repeated positions: the last
// entry in the index's row-major order wins (the CUDA kernel claims slots so that it agrees).
void scatter_cpu(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                 int64_t offset, bool masked, const char* op) {
  const Tensor s = src.to(out.dtype()).contiguous();
  const size_t item = out.itemsize();
  auto* o = static_cast<char*>(out.data_ptr());
  const auto* v = static_cast<const char*>(s.data_ptr());
  for_each_target(out, dim, index, offset, masked, op,
                  [&](int64_t p, int64_t at) { std::memcpy(o + at * item, v + p * item, item); });
}

// out (contiguous, in place; float32, float64, int32 or int64) reduced with src at index -
// offset along dim, each slot in the index's row-major order. Without include_self the first
// entry naming a slot replaces its value; "mean" then divides by the slot's count (floor
// division for integers, as PyTorch).
// src has out's dtype and is contiguous.
void scatter_reduce_cpu(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                        int64_t offset, bool masked, ScatterReduceOp reduce, bool include_self,
                        const char* op) {
  // Entries per slot: for mean's divisor, and without include_self to spot a slot's first entry.
  const bool counted = reduce == ScatterReduceOp::kMean || !include_self;
  std::vector<int64_t> count(counted ? static_cast<size_t>(out.numel()) : 0, 0);
  dispatch_dtype(out.dtype(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                  std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>) {
      T* o = static_cast<T*>(out.data_ptr());
      const T* v = static_cast<const T*>(src.data_ptr());
      auto run = [&](auto combine) {
        for_each_target(out, dim, index, offset, masked, op, [&](int64_t p, int64_t at) {
          if (counted && count[at]++ == 0 && !include_self) {
            o[at] = v[p];
          } else {
            o[at] = combine(o[at], v[p]);
          }
        });
      };
      switch (reduce) {
        case ScatterReduceOp::kSum:
        case ScatterReduceOp::kMean:
          run(detail::ScatterCombineSum{});
          break;
        case ScatterReduceOp::kProd:
          run(detail::ScatterCombineProd{});
          break;
        case ScatterReduceOp::kAmax:
          run(detail::ScatterCombineMax{});
          break;
        case ScatterReduceOp::kAmin:
          run(detail::ScatterCombineMin{});
          break;
      }
      if (reduce != ScatterReduceOp::kMean) return;
      for (int64_t i = 0; i < out.numel(); ++i) {
        if (count[i] > 0) o[i] = detail::scatter_mean(o[i], count[i] + (include_self ? 1 : 0));
      }
    } else {
      DT_FAIL("[%s] unexpected dtype %s for the reduction", op, dtype_name(out.dtype()));
    }
  });
}

}  // namespace dtensor::detail
