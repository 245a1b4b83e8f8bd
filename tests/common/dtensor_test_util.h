// Helpers shared by the DTensor mpirun suites.
#pragma once

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "dtensor/collectives/runtime.h"
#include "dtensor/core/distributed_tensor.h"
#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/tensor/compare.h"
#include "dtensor/tensor/creation.h"

namespace dtensor::test {

using Ints = std::vector<int64_t>;

// Meshes that fit the world (ranks beyond a mesh's size stay outside it). World 1 uses
// [1]-shaped meshes.
inline std::vector<Ints> meshes_for_world(int w) {
  switch (w) {
    case 1:
      return {{1}, {1, 1}, {1, 1, 1}};
    case 2:
      return {{2}, {1, 2}, {2, 1}};
    case 4:
      return {{4}, {2, 2}, {1, 4}, {4, 1}};
    case 8:
      return {{8}, {4}, {2, 2}, {2, 4}, {2, 2, 2}};
    default:
      return {{w}};
  }
}

inline DeviceMesh make_mesh(const Ints& shape) {
  return init_device_mesh(kCPU, IntSpan(shape.data(), shape.size()));
}

// Small integers in [-15, 15] (sums of up to 8 of them stay exact in bfloat16), spread so that a
// misplaced block shows. `salt` gives different tensors of the same shape.
inline Tensor make_data(const Ints& shape, DType dtype, int salt = 0) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(((i * 37 + salt * 11) % 31) - 15);
  return from_vector(v, IntSpan(shape.data(), shape.size())).to(dtype);
}

// Every placement list over `choices` for a mesh of `ndim` dims.
inline std::vector<Placements> all_placements(const std::vector<Placement>& choices, size_t ndim) {
  std::vector<Placements> out = {Placements()};
  for (size_t m = 0; m < ndim; ++m) {
    std::vector<Placements> next;
    for (const Placements& p : out) {
      for (const Placement& c : choices) {
        Placements q = p;
        q.push_back(c);
        next.push_back(q);
      }
    }
    out = next;
  }
  return out;
}

// The block of `full` at `coord` under `placements` (shards only), computed by narrowing with
// the offsets of compute_local_shape_and_offset: the reference for to_local().
inline Tensor expected_block(const Tensor& full, const DeviceMesh& mesh,
                             const Placements& placements) {
  if (!mesh.contains_me()) return Tensor();
  const LocalShard s =
      compute_local_shape_and_offset(full.shape(), mesh.shape(), mesh.get_coordinate(), placements);
  Tensor t = full;
  for (int64_t d = 0; d < full.dim(); ++d) t = t.narrow(d, s.offset[d], s.shape[d]);
  return t.contiguous();
}

inline std::string describe(const Ints& mesh, const Ints& shape, DType dtype) {
  std::string s = "mesh " + shape_str(IntSpan(mesh.data(), mesh.size())) + " shape " +
                  shape_str(IntSpan(shape.data(), shape.size())) + " " +
                  std::string(dtype_name(dtype));
  return s;
}

// Short names for the placements the suites enumerate (`using namespace test::placements;`).
namespace placements {
inline const Placement R = Replicate();
inline const Placement S0 = Shard(0);
inline const Placement S1 = Shard(1);
inline const Placement Psum = Partial();
inline const Placement Pavg = Partial(ReduceOp::kAvg);
inline const Placement Pmax = Partial(ReduceOp::kMax);
inline const Placement Pmin = Partial(ReduceOp::kMin);
}  // namespace placements

}  // namespace dtensor::test
