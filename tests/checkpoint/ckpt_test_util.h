// Shared by the checkpoint tests: closed-form tensor contents (so a load job can check what an
// earlier save job at another world size wrote), meshes by world size and placement lists.
#pragma once

#include <string>
#include <vector>

#include "dtensor/collectives/runtime.h"
#include "dtensor/core/distributed_tensor.h"
#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/tensor/creation.h"

namespace ckpt_test {

namespace dt = dtensor;

// Element i of tensor number `id`: a value every dtype represents exactly (bool: a pattern).
inline dt::Tensor expected_full(dt::IntSpan shape, dt::DType dtype, int id) {
  const int64_t n = dt::shape_numel(shape);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    v[i] = dtype == dt::kBool ? double((i + id) % 3 == 0) : double(i % 251) * 0.25 - 7 + id;
  }
  return dt::from_vector(v, shape).to(dtype);
}

// The DTensor with expected_full's contents laid out by (mesh, placements); no communication.
inline dt::DTensor expected(dt::IntSpan shape, dt::DType dtype, int id, const dt::DeviceMesh& mesh,
                            dt::PlacementSpan placements) {
  return dt::distribute_tensor(expected_full(shape, dtype, id), mesh, placements, std::nullopt);
}

// Zeros with the same layout: a load target.
inline dt::DTensor target(dt::IntSpan shape, dt::DType dtype, const dt::DeviceMesh& mesh,
                          dt::PlacementSpan placements) {
  return dt::distribute_tensor(dt::zeros(shape, dt::TensorOptions(dtype)), mesh, placements,
                               std::nullopt);
}

inline dt::DeviceMesh mesh_1d() {
  return dt::init_device_mesh(dt::kCPU, {dt::world_size()});
}
// 2x2 at 4 ranks, 2x1 at 2, 1x1 at 1.
inline dt::DeviceMesh mesh_2d() {
  const int64_t w = dt::world_size();
  return w >= 4 ? dt::init_device_mesh(dt::kCPU, {2, 2}) : dt::init_device_mesh(dt::kCPU, {w, 1});
}

inline std::vector<dt::Placements> placements_1d() {
  return {{dt::Shard(0)}, {dt::Shard(1)}, {dt::Replicate()}};
}
inline std::vector<dt::Placements> placements_2d() {
  return {{dt::Shard(0), dt::Shard(1)},       {dt::Shard(0), dt::Shard(0)},
          {dt::Replicate(), dt::Shard(0)},    {dt::Shard(1), dt::Replicate()},
          {dt::Replicate(), dt::Replicate()}, {dt::Shard(1), dt::Shard(0)}};
}

inline void barrier() {
  dt::world_communicator()->barrier()->wait();
}

}  // namespace ckpt_test
