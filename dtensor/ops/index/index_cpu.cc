#include <cstring>
#include <optional>
#include <type_traits>
#include <vector>

#include "dtensor/ops/common/detail/index_helpers.h"
#include "dtensor/ops/index/detail/index_cuda.h"
#include "dtensor/ops/index/detail/scatter_reduce_math.h"
#include "dtensor/ops/index/index.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

// Checks shared by gather and the scatters: same rank, index int, index no larger than
// `target` off `dim`; returns the normalised dim.
int64_t check_index(const char* op, IntSpan target, int64_t dim, const Tensor& index,
                    const Tensor* src) {
  DT_CHECK(index.defined(), "[%s] argument index is an undefined tensor", op);
  DT_CHECK(index.dtype() == kInt64 || index.dtype() == kInt32,
           "[%s] argument index has dtype %s, expected int64 or int32", op,
           dtype_name(index.dtype()));
  const int64_t ndim = static_cast<int64_t>(target.size());
  DT_CHECK(index.dim() == ndim,
           "[%s] argument index has %d dims, expected %d (the rank of the indexed tensor)", op,
           index.dim(), ndim);
  const int64_t d = normalize_dim(dim, ndim, op);
  for (int64_t k = 0; k < ndim; ++k) {
    DT_CHECK(k == d || index.size(k) <= target[k],
             "[%s] index of shape %s is larger than shape %s at dim %d", op,
             shape_str(index.sizes()), shape_str(target), k);
  }
  if (src != nullptr) {
    DT_CHECK(src->defined() && src->sizes() == index.sizes(),
             "[%s] argument src has shape %s, expected the index's shape %s", op,
             src->defined() ? shape_str(src->sizes()) : "undefined", shape_str(index.sizes()));
    DT_CHECK(src->device() == index.device(),
             "[%s] expected index and src on one device, got %s and %s", op,
             index.device().str(), src->device().str());
  }
  return d;
}

// The indexed tensor and the index on one device (the kernels read both there).
void check_same_device(const char* op, const Tensor& self, const Tensor& index) {
  DT_CHECK(self.device() == index.device(),
           "[%s] expected self and index on one device, got %s and %s", op, self.device().str(),
           index.device().str());
}

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
  for_each_target(out, dim, index, offset, masked, op, [&](int64_t p, int64_t at) {
    std::memcpy(o + at * item, v + p * item, item);
  });
}

// out (contiguous, in place; float32, float64, int32 or int64) reduced with src at index -
// offset along dim, each slot in the index's row-major order. Without include_self the first
// entry naming a slot replaces its value; "mean" then divides by the slot's count (floor
// division for integers, as PyTorch).
// src has out's dtype and is contiguous.
void scatter_reduce_cpu(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                        int64_t offset, bool masked, detail::ScatterReduceOp reduce,
                        bool include_self, const char* op) {
  using detail::ScatterReduceOp;
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
        case ScatterReduceOp::kMean: run(detail::ScatterCombineSum{}); break;
        case ScatterReduceOp::kProd: run(detail::ScatterCombineProd{}); break;
        case ScatterReduceOp::kAmax: run(detail::ScatterCombineMax{}); break;
        case ScatterReduceOp::kAmin: run(detail::ScatterCombineMin{}); break;
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

}  // namespace

Tensor gather(const Tensor& self, int64_t dim, const Tensor& index) {
  DT_CHECK(self.defined(), "[gather] argument self is an undefined tensor");
  const int64_t d = check_index("gather", self.sizes(), dim, index, nullptr);
  check_same_device("gather", self, index);
  const Tensor x = self.contiguous();
  Tensor out = empty(index.sizes(), TensorOptions(self.dtype(), self.device()));
  if (out.numel() == 0) return out;
  const Tensor idx = index.to(kInt64).contiguous();
  if (self.device().is_cuda()) {
    detail::gather_cuda(x, d, idx, out);
    return out;
  }
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
  return out;
}

Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  DT_CHECK(self.defined(), "[scatter_add] argument self is an undefined tensor");
  const int64_t d = check_index("scatter_add", self.sizes(), dim, index, &src);
  check_same_device("scatter_add", self, index);
  // 16-bit sums accumulate in float (many entries may land on one slot), then round once.
  const bool low_precision = self.dtype() == kFloat16 || self.dtype() == kBFloat16;
  Tensor out = low_precision ? self.to(kFloat32) : self.clone();
  if (index.numel() > 0) {
    if (out.device().is_cuda()) {
      detail::scatter_add_cuda(out, d, index.to(kInt64).contiguous(),
                               src.to(out.dtype()).contiguous(), 0, false, "scatter_add");
    } else {
      scatter_add_cpu(out, d, index, src, 0, false, "scatter_add");
    }
  }
  return low_precision ? out.to(self.dtype()) : out;
}

Tensor scatter_add_shard(IntSpan shape, int64_t dim, const Tensor& index, const Tensor& src,
                         int64_t index_offset) {
  const int64_t d = check_index("scatter_add_shard", shape, dim, index, &src);
  const bool low_precision = src.dtype() == kFloat16 || src.dtype() == kBFloat16;
  // 16-bit sums accumulate in float (many rows may land on one slot), then round once.
  const DType acc = low_precision ? kFloat32 : src.dtype();
  Tensor out = zeros(shape, TensorOptions(acc, src.device()));
  if (index.numel() > 0 && out.numel() > 0) {
    if (out.device().is_cuda()) {
      detail::scatter_add_cuda(out, d, index.to(kInt64).contiguous(), src.to(acc).contiguous(),
                               index_offset, true, "scatter_add_shard");
    } else {
      scatter_add_cpu(out, d, index, src, index_offset, true, "scatter_add_shard");
    }
  }
  return low_precision ? out.to(src.dtype()) : out;
}

Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
               int64_t index_offset) {
  DT_CHECK(self.defined(), "[scatter] argument self is an undefined tensor");
  const int64_t d = check_index("scatter", self.sizes(), dim, index, &src);
  check_same_device("scatter", self, index);
  const bool masked = index_offset != kNoOffset;
  const int64_t offset = masked ? index_offset : 0;
  Tensor out = self.clone();
  if (index.numel() == 0) return out;
  if (out.numel() == 0) {  // then dim has size 0 and every index is out of range
    const std::optional<int64_t> bad = detail::first_out_of_range(index, 0);
    DT_CHECK(masked, "[scatter] index %d out of range for dim %d of size 0", bad.value_or(0), d);
    return out;
  }
  if (out.device().is_cuda()) {
    detail::scatter_cuda(out, d, index.to(kInt64).contiguous(), src.to(out.dtype()).contiguous(),
                         offset, masked, "scatter");
  } else {
    scatter_cpu(out, d, index, src, offset, masked, "scatter");
  }
  return out;
}

Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Scalar& value,
               int64_t index_offset) {
  DT_CHECK(self.defined(), "[scatter] argument self is an undefined tensor");
  DT_CHECK(index.defined(), "[scatter] argument index is an undefined tensor");
  return scatter(self, dim, index,
                 full(index.sizes(), value, TensorOptions(self.dtype(), self.device())),
                 index_offset);
}

Tensor scatter_reduce(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                      std::string_view reduce, bool include_self, int64_t index_offset) {
  constexpr const char* op = "scatter_reduce";
  DT_CHECK(self.defined(), "[scatter_reduce] argument self is an undefined tensor");
  const detail::ScatterReduceOp r = detail::parse_scatter_reduce(reduce, op);
  const int64_t d = check_index(op, self.sizes(), dim, index, &src);
  check_same_device(op, self, index);
  DT_CHECK(self.dtype() != kBool,
           "[scatter_reduce] argument self has dtype bool, expected a floating or integer dtype");
  const bool masked = index_offset != kNoOffset;
  const int64_t offset = masked ? index_offset : 0;
  // 16-bit floats are reduced in float (many entries may land on one slot), then rounded once.
  const bool low_precision = self.dtype() == kFloat16 || self.dtype() == kBFloat16;
  Tensor out = low_precision ? self.to(kFloat32).contiguous() : self.clone();
  if (index.numel() > 0 && out.numel() == 0) {  // then dim has size 0: every index is out of range
    const std::optional<int64_t> bad = detail::first_out_of_range(index, 0);
    DT_CHECK(masked, "[scatter_reduce] index %d out of range for dim %d of size 0",
             bad.value_or(0), d);
  } else if (index.numel() > 0) {
    const Tensor s = src.to(out.dtype()).contiguous();
    if (out.device().is_cuda()) {
      detail::scatter_reduce_cuda(out, d, index.to(kInt64).contiguous(), s, offset, masked, r,
                                  include_self, op);
    } else {
      scatter_reduce_cpu(out, d, index, s, offset, masked, r, include_self, op);
    }
  }
  return low_precision ? out.to(self.dtype()) : out;
}

}  // namespace dtensor
