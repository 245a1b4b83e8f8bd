#include "dtensor/core/detail/util.h"

#include "dtensor/collectives/runtime.h"
#include "dtensor/tensor/creation.h"

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
  // A meta tensor's results stay meta whatever the mesh's device (a dry run's model is meta on
  // the mesh its real run would use, as PyTorch's meta-initialised FSDP2 modules are).
  if (hint.defined() && hint.device().is_meta()) return hint.device();
  if (mesh.device_type() == DeviceType::kCPU) return Device();
  // This process's CUDA device (the one its NCCL communicators serve), whatever hint's index.
  if (hint.defined() && hint.device().is_cuda() && hint.device().index == local_cuda_device()) {
    return hint.device();
  }
  return Device(DeviceType::kCUDA, local_cuda_device());
}

Tensor empty_local(int64_t ndim, DType dtype, Device device) {
  const Shape zeros_shape(ndim, 0);
  return empty(zeros_shape, TensorOptions(dtype, device));
}

}  // namespace dtensor::detail
