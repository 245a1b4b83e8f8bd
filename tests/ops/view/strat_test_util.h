// Helpers for the DTensor suites of the view, softmax, norm, embedding and loss families:
// meshes, placement enumeration, deterministic inputs, comparison against the full-tensor op.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "collectives/runtime.h"
#include "device_mesh/device_mesh.h"
#include "dtensor/distributed_tensor.h"
#include "tensor/compare.h"
#include "tensor/creation.h"

namespace dtensor::strat_test {

using Ints = std::vector<int64_t>;

// A 1-D mesh over the world and a 2-D one ([2, w/2], or [1, w] for odd worlds).
inline std::vector<DeviceMesh> meshes() {
  const int64_t w = world_size();
  std::vector<DeviceMesh> out;
  out.push_back(init_device_mesh(kCPU, {w}));
  out.push_back(w % 2 == 0 ? init_device_mesh(kCPU, {2, w / 2}) : init_device_mesh(kCPU, {1, w}));
  return out;
}

// R, S(d) for every d < ndim, and P(sum) when `partial`.
inline std::vector<Placement> choices(int64_t ndim, bool partial = true) {
  std::vector<Placement> c = {Replicate()};
  for (int64_t d = 0; d < ndim; ++d) c.push_back(Shard(d));
  if (partial) c.push_back(Partial());
  return c;
}

// Every placement list of `choices` over `mesh_ndim` mesh dims.
inline std::vector<Placements> lists(int64_t mesh_ndim, const std::vector<Placement>& c) {
  std::vector<Placements> out = {Placements()};
  for (int64_t m = 0; m < mesh_ndim; ++m) {
    std::vector<Placements> next;
    for (const Placements& p : out) {
      for (const Placement& x : c) {
        Placements q = p;
        q.push_back(x);
        next.push_back(q);
      }
    }
    out = std::move(next);
  }
  return out;
}

// Element i = lo + step * ((i * 7 + salt) % 11): distinct small values, exact in float32.
inline Tensor input(const Ints& shape, int salt = 0, double lo = -2.5, double step = 0.5,
                    DType dtype = kFloat32) {
  const int64_t n = shape_numel(IntSpan(shape.data(), shape.size()));
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = lo + step * static_cast<double>((i * 7 + salt) % 11);
  return from_vector<double>(v, IntSpan(shape.data(), shape.size())).to(dtype);
}

// Same shape and dtype and values within `tol` (relative to 1 + |want|); NaNs must match.
inline bool close(const Tensor& got, const Tensor& want, double tol = 1e-5) {
  if (got.dtype() != want.dtype() || got.sizes() != want.sizes()) return false;
  const std::vector<double> a = got.to(kFloat64).to_vector<double>();
  const std::vector<double> b = want.to(kFloat64).to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) {
      if (std::isnan(a[i]) != std::isnan(b[i])) return false;
      continue;
    }
    if (std::abs(a[i] - b[i]) > tol * (1.0 + std::abs(b[i]))) return false;
  }
  return true;
}

inline std::string describe(const DeviceMesh& mesh, const Ints& shape, const Placements& p) {
  return mesh.str() + " shape " + shape_str(IntSpan(shape.data(), shape.size())) + " " +
         placements_str(p);
}

}  // namespace dtensor::strat_test
