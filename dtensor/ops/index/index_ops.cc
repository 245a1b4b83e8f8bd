// Tensor forms of index_select, take_along_dim and one_hot (composed of gather, expand and
// comparisons), and the host-side index range check the DTensor kernels agree on.
#include <absl/strings/str_format.h>

#include <algorithm>

#include "dtensor/ops/common/detail/index_helpers.h"
#include "dtensor/ops/common/detail/op_checks.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/index/index.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {

namespace detail {

std::optional<int64_t> first_out_of_range(const Tensor& index, int64_t size) {
  const Tensor idx = index.to(Device(kCPU), kInt64).contiguous();
  const int64_t* p = idx.numel() > 0 ? idx.data<int64_t>() : nullptr;
  for (int64_t i = 0; i < idx.numel(); ++i) {
    if (p[i] < 0 || p[i] >= size) return p[i];
  }
  return std::nullopt;
}

AlongDimShapes take_along_dim_shapes(IntSpan self, IntSpan indices, int64_t dim) {
  const int64_t ndim = static_cast<int64_t>(self.size());
  DT_CHECK(self.size() == indices.size(),
           "[take_along_dim] self (shape %s) and indices (shape %s) must have the same number "
           "of dims",
           shape_str(self), shape_str(indices));
  AlongDimShapes r{Shape(self.begin(), self.end()), Shape(indices.begin(), indices.end()),
                   normalize_dim(dim, ndim, "take_along_dim")};
  for (int64_t k = 0; k < ndim; ++k) {
    if (k == r.dim) continue;
    const int64_t a = self[k], b = indices[k];
    DT_CHECK(a == b || a == 1 || b == 1,
             "[take_along_dim] cannot broadcast self (shape %s) and indices (shape %s) at dim %d",
             shape_str(self), shape_str(indices), k);
    r.self[k] = r.indices[k] = a == 1 ? b : a;
  }
  return r;
}

ScatterReduceOp parse_scatter_reduce(std::string_view reduce, std::string_view op) {
  if (reduce == "sum") return ScatterReduceOp::kSum;
  if (reduce == "prod") return ScatterReduceOp::kProd;
  if (reduce == "mean") return ScatterReduceOp::kMean;
  if (reduce == "amax") return ScatterReduceOp::kAmax;
  if (reduce == "amin") return ScatterReduceOp::kAmin;
  DT_FAIL("[%s] reduce must be one of sum, prod, mean, amax, amin, got '%s'", op, reduce);
}

std::string_view scatter_reduce_name(ScatterReduceOp op) {
  switch (op) {
    case ScatterReduceOp::kSum:
      return "sum";
    case ScatterReduceOp::kProd:
      return "prod";
    case ScatterReduceOp::kMean:
      return "mean";
    case ScatterReduceOp::kAmax:
      return "amax";
    case ScatterReduceOp::kAmin:
      return "amin";
  }
  return "sum";
}

SelectShapes index_select_shapes(IntSpan self_shape, int64_t dim, int64_t index_numel) {
  const int64_t ndim = static_cast<int64_t>(self_shape.size());
  SelectShapes r{Shape(ndim, 1), Shape(self_shape.begin(), self_shape.end()),
                 normalize_dim(dim, ndim, "index_select")};
  r.along[r.dim] = r.out[r.dim] = index_numel;
  return r;
}

SelectShapes index_add_shapes(IntSpan self_shape, int64_t dim, IntSpan index_shape,
                              IntSpan source_shape) {
  DT_CHECK(index_shape.size() <= 1, "[index_add] argument index must be 0-d or 1-d, got shape %s",
           shape_str(index_shape));
  DT_CHECK(!self_shape.empty(), "[index_add] argument self must have at least one dim");
  const SelectShapes s = index_select_shapes(self_shape, dim, shape_numel(index_shape));
  DT_CHECK(Shape(source_shape.begin(), source_shape.end()) == s.out,
           "[index_add] source has shape %s, expected %s (self's shape with dim %d of the "
           "index's length)",
           shape_str(source_shape), shape_str(s.out), s.dim);
  return s;
}

}  // namespace detail

Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index) {
  detail::check_defined("index_select", self, "self");
  detail::check_defined("index_select", index, "index");
  DT_CHECK(index.dim() <= 1, "[index_select] argument index must be 0-d or 1-d, got shape %s",
           shape_str(index.sizes()));
  if (self.dim() == 0) {
    normalize_dim(dim, 1, "index_select");
    return gather(self.view({1}), 0, index.reshape({1})).view({});
  }
  const detail::SelectShapes s = detail::index_select_shapes(self.sizes(), dim, index.numel());
  return gather(self, s.dim, index.reshape(s.along).expand(s.out));
}

Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                 const Scalar& alpha) {
  detail::check_defined("index_add", self, "self");
  detail::check_defined("index_add", index, "index");
  detail::check_defined("index_add", source, "source");
  const detail::SelectShapes s =
      detail::index_add_shapes(self.sizes(), dim, index.sizes(), source.sizes());
  const Tensor scaled = alpha.to<double>() == 1.0 ? source : source * alpha;
  return scatter_add(self, s.dim, index.reshape(s.along).expand(s.out).contiguous(), scaled);
}

Tensor take_along_dim(const Tensor& self, const Tensor& indices, int64_t dim) {
  detail::check_defined("take_along_dim", self, "self");
  detail::check_defined("take_along_dim", indices, "indices");
  const detail::AlongDimShapes s =
      detail::take_along_dim_shapes(self.sizes(), indices.sizes(), dim);
  return gather(self.expand(s.self), s.dim, indices.expand(s.indices));
}

Tensor one_hot(const Tensor& index, int64_t num_classes) {
  detail::check_defined("one_hot", index, "self");
  DT_CHECK(index.dtype() == kInt64, "[one_hot] argument self has dtype %s, expected int64",
           dtype_name(index.dtype()));
  DT_CHECK(num_classes >= -1, "[one_hot] num_classes must be -1 or >= 0, got %d", num_classes);
  if (num_classes < 0) {
    DT_CHECK(index.numel() > 0, "[one_hot] cannot infer num_classes from an empty tensor");
    num_classes = amax(index).to(Device(kCPU)).item<int64_t>() + 1;
  }
  if (const auto bad = detail::first_out_of_range(index, num_classes)) {
    DT_FAIL("[one_hot] class %d out of range for %d classes", *bad, num_classes);
  }
  const Tensor classes = arange(num_classes, TensorOptions(kInt64, index.device()));
  return eq(index.unsqueeze(index.dim()), classes).to(kInt64);
}

}  // namespace dtensor
