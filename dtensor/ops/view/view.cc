#include "dtensor/ops/view/view.h"

#include "dtensor/tensor/shape.h"

namespace dtensor {

Tensor view(const Tensor& x, IntSpan shape) {
  return x.view(shape);
}

Tensor reshape(const Tensor& x, IntSpan shape) {
  return x.reshape(shape);
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  return x.transpose(dim0, dim1);
}

Tensor t(const Tensor& x) {
  DT_CHECK(x.dim() <= 2, "[t] expected a tensor with at most 2 dims, got %d-d of shape %s", x.dim(),
           shape_str(x.sizes()));
  return x.dim() < 2 ? x : x.transpose(0, 1);
}

Tensor permute(const Tensor& x, IntSpan dims) {
  return x.permute(dims);
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  return x.unsqueeze(dim);
}

Tensor squeeze(const Tensor& x) {
  return x.squeeze();
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  return x.squeeze(dim);
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  return x.flatten(start_dim, end_dim);
}

Tensor expand(const Tensor& x, IntSpan shape) {
  return x.expand(shape);
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  return x.narrow(dim, start, length);
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return x.slice(dim, start, end, step);
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  return x.select(dim, index);
}

}  // namespace dtensor
