// index / index_put on local tensors: the argument checks (dtypes, devices, shapes, then
// ranges) and the whole-tensor call of the block kernels (advanced_index_cpu.cc).
#include "dtensor/ops/advanced_index/advanced_index.h"

#include <string>
#include <vector>

#include "dtensor/ops/advanced_index/detail/advanced_index.h"
#include "dtensor/ops/common/detail/op_checks.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

// The index tensors of a list, checked (dtype, device, range): `self`'s dims, no offsets.
std::vector<Tensor> checked_indices(const char* op, const Tensor& self, TensorIndices indices,
                                    const Shape& dims) {
  std::vector<Tensor> out;
  for (int64_t d : dims) {
    const Tensor& t = *indices[d];
    DT_CHECK(t.defined(), "[%s] argument indices[%d] is an undefined tensor", op, d);
    const std::string dtype_error = detail::index_dtype_error(op, t.dtype(), d);
    DT_CHECK(dtype_error.empty(), "%s", dtype_error);
    DT_CHECK(t.device() == self.device(),
             "[%s] expected self and indices[%d] on one device, got %s and %s", op, d,
             self.device().str(), t.device().str());
    out.push_back(t);
  }
  return out;
}

// Range checks on every index, then the sizes and (zero) offsets of the whole self.
void check_ranges(const char* op, const Tensor& self, const Shape& dims,
                  absl::Span<const Tensor> indices, Shape* sizes, Shape* offsets) {
  for (size_t j = 0; j < dims.size(); ++j) {
    const std::string err = detail::index_range_error(op, indices[j], dims[j], self.size(dims[j]));
    DT_CHECK(err.empty(), "%s", err);
    sizes->push_back(self.size(dims[j]));
    offsets->push_back(0);
  }
}

}  // namespace

Tensor index(const Tensor& self, TensorIndices indices) {
  detail::check_defined("index", self, "self");
  const Shape dims = detail::indexed_dims("index", indices, self.dim());
  const std::vector<Tensor> idx = checked_indices("index", self, indices, dims);
  detail::local_index_plan("index", self, dims, idx);  // shape errors before range errors
  Shape sizes, offsets;
  check_ranges("index", self, dims, idx, &sizes, &offsets);
  return detail::index_block(self, dims, idx, sizes, offsets);
}

Tensor index_put(const Tensor& self, TensorIndices indices, const Tensor& values, bool accumulate) {
  detail::check_defined("index_put", self, "self");
  const Shape dims = detail::indexed_dims("index_put", indices, self.dim());
  const std::vector<Tensor> idx = checked_indices("index_put", self, indices, dims);
  detail::local_index_plan("index_put", self, dims, idx);
  Shape sizes, offsets;
  check_ranges("index_put", self, dims, idx, &sizes, &offsets);
  return detail::index_put_block(self, dims, idx, values, accumulate, sizes, offsets);
}

Tensor& index_put_(Tensor& self, TensorIndices indices, const Tensor& values, bool accumulate) {
  const Tensor out = index_put(self, indices, values, accumulate);
  self.copy_(out);
  return self;
}

}  // namespace dtensor
