#include "dtensor/detail/util.h"

#include "tensor/creation.h"
#include "tensor/shape_ops.h"

namespace dtensor::detail {

Shape unravel_index(int64_t index, IntSpan shape) {
  Shape coord(shape.size(), 0);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    coord[i] = index % shape[i];
    index /= shape[i];
  }
  return coord;
}

Device mesh_device(const DeviceMesh& mesh, const Tensor& hint) {
  if (hint.defined() && hint.device().type == mesh.device_type()) return hint.device();
  return Device(mesh.device_type(), 0);
}

Tensor empty_local(int64_t ndim, DType dtype, Device device) {
  const Shape zeros_shape(ndim, 0);
  return empty(zeros_shape, TensorOptions(dtype, device));
}

Tensor pad_dim_to(const Tensor& t, int64_t dim, int64_t size) {
  const int64_t extra = size - t.size(dim);
  if (extra == 0) return t;
  Shape pads(2 * t.dim(), 0);
  pads[2 * (t.dim() - 1 - dim) + 1] = extra;
  return pad(t, pads);
}

}  // namespace dtensor::detail
