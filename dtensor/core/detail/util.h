// Internal helpers shared by the dtensor layer's .cc files.
#pragma once

#include <cstdint>
#include <string_view>

#include "dtensor/core/placement.h"
#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// Normalises a Shard dim of mesh dim `mesh_dim` against a tensor of `ndim` dims; throws
// "[op] Shard dim 3 out of range for a 2-d tensor (expected -2..1; mesh dim 1, placements
// [S(0), S(3)])".
int64_t normalize_shard_dim(int64_t dim, int64_t ndim, int64_t mesh_dim, PlacementSpan placements,
                            std::string_view op);

// Row-major coordinate of linear index `index` in a mesh of shape `shape`.
Shape unravel_index(int64_t index, IntSpan shape);

// The device a mesh's local tensors live on: the CPU, or this process's CUDA device
// (local_cuda_device(), where its NCCL communicators live) for a CUDA mesh. `hint` is unused
// beyond that (kept so callers pass the tensor being placed).
Device mesh_device(const DeviceMesh& mesh, const Tensor& hint);

// A tensor of `ndim` zero sizes (the local shard of a rank outside the mesh).
Tensor empty_local(int64_t ndim, DType dtype, Device device);

}  // namespace dtensor::detail
