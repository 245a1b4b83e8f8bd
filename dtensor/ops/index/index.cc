// gather, scatter_add, scatter, scatter_reduce on local tensors: the argument checks and the
// CPU / CUDA switch (kernels in index_cpu.cc and index_cuda.cu).
#include "dtensor/ops/index/index.h"

#include <optional>

#include "dtensor/ops/common/detail/index_helpers.h"
#include "dtensor/ops/common/detail/op_checks.h"
#include "dtensor/ops/index/detail/index_cpu.h"
#include "dtensor/ops/index/detail/index_cuda.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

// Checks shared by gather and the scatters: same rank, index int, index no larger than
// `target` off `dim`; returns the normalised dim.
int64_t check_index(const char* op, IntSpan target, int64_t dim, const Tensor& index,
                    const Tensor* src) {
  DT_CHECK(index.defined(), "[%s] argument index is an undefined tensor", op);
  detail::check_index_dtype(op, index.dtype(), "index");
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
             "[%s] expected index and src on one device, got %s and %s", op, index.device().str(),
             src->device().str());
  }
  return d;
}

// The indexed tensor and the index on one device (the kernels read both there).
void check_same_device(const char* op, const Tensor& self, const Tensor& index) {
  DT_CHECK(self.device() == index.device(),
           "[%s] expected self and index on one device, got %s and %s", op, self.device().str(),
           index.device().str());
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
  } else {
    detail::gather_cpu(x, d, idx, out);
  }
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
      detail::scatter_add_cpu(out, d, index, src, 0, false, "scatter_add");
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
      detail::scatter_add_cpu(out, d, index, src, index_offset, true, "scatter_add_shard");
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
    detail::scatter_cpu(out, d, index, src, offset, masked, "scatter");
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
    DT_CHECK(masked, "[scatter_reduce] index %d out of range for dim %d of size 0", bad.value_or(0),
             d);
  } else if (index.numel() > 0) {
    const Tensor s = src.to(out.dtype()).contiguous();
    if (out.device().is_cuda()) {
      detail::scatter_reduce_cuda(out, d, index.to(kInt64).contiguous(), s, offset, masked, r,
                                  include_self, op);
    } else {
      detail::scatter_reduce_cpu(out, d, index, s, offset, masked, r, include_self, op);
    }
  }
  return low_precision ? out.to(self.dtype()) : out;
}

}  // namespace dtensor
