// Helpers for the DTensor op-family suites (tests/ops/<family>/test_*_dtensor.cc): meshes the
// world allows, placement enumeration, deterministic inputs and result comparison.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "collectives/runtime.h"
#include "dtensor/distributed_tensor.h"
#include "tensor/compare.h"
#include "tensor/creation.h"

namespace dtensor::testing {

// A 1-D mesh over the world and a 2-D one ([2, w/2], or [1, w] for odd worlds).
inline std::vector<DeviceMesh> family_meshes() {
  const int64_t w = world_size();
  std::vector<DeviceMesh> meshes;
  meshes.push_back(init_device_mesh(kCPU, {w}));
  if (w % 2 == 0) {
    meshes.push_back(init_device_mesh(kCPU, {2, w / 2}));
  } else {
    meshes.push_back(init_device_mesh(kCPU, {1, w}));
  }
  return meshes;
}

// Every list of `choices` over `mesh_ndim` mesh dims whose Shard dims fit a rank-`ndim`
// tensor.
inline std::vector<Placements> placement_lists(int64_t mesh_ndim,
                                               const std::vector<Placement>& choices,
                                               int64_t ndim) {
  std::vector<Placements> out = {Placements()};
  for (int64_t m = 0; m < mesh_ndim; ++m) {
    std::vector<Placements> next;
    for (const Placements& p : out) {
      for (const Placement& c : choices) {
        if (c.is_shard() && c.dim() >= ndim) continue;
        Placements q = p;
        q.push_back(c);
        next.push_back(q);
      }
    }
    out = std::move(next);
  }
  return out;
}

inline std::vector<Placement> standard_choices() {
  return {Replicate(), Shard(0), Shard(1), Partial()};
}

// Element i = lo + step * ((i * 7 + salt) % 11): small values, exact in every float dtype.
inline Tensor det_input(IntSpan shape, int salt = 0, double lo = -2.5, double step = 0.5,
                        DType dtype = kFloat32) {
  const int64_t n = shape_numel(shape);
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = lo + step * static_cast<double>((i * 7 + salt) % 11);
  return from_vector<double>(v, shape).to(dtype);
}

// Same dtype and shape, and values equal (exact for non-floating dtypes, allclose otherwise;
// NaNs in the same places count as equal).
inline bool same_values(const Tensor& got, const Tensor& want, double tol = 1e-5) {
  if (got.dtype() != want.dtype() || got.sizes() != want.sizes()) return false;
  if (!is_floating(want.dtype())) return equal(got, want);
  const std::vector<double> a = got.to_vector<double>(), b = want.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) {
      if (std::isnan(a[i]) != std::isnan(b[i])) return false;
      continue;
    }
    if (std::isinf(a[i]) || std::isinf(b[i])) {
      if (a[i] != b[i]) return false;
      continue;
    }
    if (std::abs(a[i] - b[i]) > tol * (1.0 + std::abs(b[i]))) return false;
  }
  return true;
}

inline std::string describe(const DeviceMesh& mesh, std::initializer_list<Placements> ps,
                            IntSpan shape) {
  std::string s = mesh.str() + " shape " + shape_str(shape) + " placements";
  for (const Placements& p : ps) s += " " + placements_str(p);
  return s;
}

}  // namespace dtensor::testing
