// Helpers of the suites that run ops on DTensors (tests/ops/<family>/test_*_dtensor*.cc, and the
// autograd, nn and CUDA suites), on top of tests/common/dtensor_test_util.h: the meshes a family
// suite runs on, placement lists whose shards fit the tensor, deterministic inputs, and
// comparison within float tolerance.
#pragma once

#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

#include "tests/common/dtensor_test_util.h"

namespace dtensor::test {

// A 1-D mesh over the world and a 2-D one ([2, w/2], or [1, w] for odd worlds).
inline std::vector<DeviceMesh> family_meshes() {
  const int64_t w = world_size();
  return {make_mesh({w}), make_mesh(w % 2 == 0 ? Ints{2, w / 2} : Ints{1, w})};
}

// R, S(0), S(1), P(sum).
inline std::vector<Placement> standard_choices() {
  return {Replicate(), Shard(0), Shard(1), Partial()};
}

// R, S(d) for every d < ndim, and P(sum) when `partial`.
inline std::vector<Placement> shard_choices(int64_t ndim, bool partial = true) {
  std::vector<Placement> c = {Replicate()};
  for (int64_t d = 0; d < ndim; ++d) c.push_back(Shard(d));
  if (partial) c.push_back(Partial());
  return c;
}

// Every list of `choices` over `mesh_ndim` mesh dims, leaving out the Shard dims a rank-`ndim`
// tensor does not have.
inline std::vector<Placements> placement_lists(int64_t mesh_ndim,
                                               const std::vector<Placement>& choices,
                                               int64_t ndim) {
  std::vector<Placement> fit;
  for (const Placement& c : choices) {
    if (!c.is_shard() || c.dim() < ndim) fit.push_back(c);
  }
  return all_placements(fit, static_cast<size_t>(mesh_ndim));
}

// Element i = lo + step * ((i * 7 + salt) % 11): small values, exact in every float dtype.
inline Tensor det_input(IntSpan shape, int salt = 0, double lo = -2.5, double step = 0.5,
                        DType dtype = kFloat32) {
  const int64_t n = shape_numel(shape);
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = lo + step * static_cast<double>((i * 7 + salt) % 11);
  return from_vector<double>(v, shape).to(dtype);
}

// Same dtype and shape, and values equal (exact for non-floating dtypes and infinities, within
// `tol` relative to 1 + |want| otherwise; NaNs in the same places count as equal).
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

// `p` in reverse mesh-dim order (a second, differently nested layout for a two-input op).
inline Placements reversed(const Placements& p) {
  return Placements(p.rbegin(), p.rend());
}

// "DeviceMesh(...) shape [5, 3] placements [S(0)] [R]" for INFO messages.
inline std::string describe(const DeviceMesh& mesh, std::initializer_list<Placements> ps,
                            IntSpan shape) {
  std::string s = mesh.str() + " shape " + shape_str(shape) + " placements";
  for (const Placements& p : ps) s += " " + placements_str(p);
  return s;
}

// Whether some rank of `mesh` holds an empty shard of a non-empty tensor of `shape` laid out as
// `placements` (Partial counts as whole): the zero-size shards that the suites running every
// registered op must reach for each op (a sharded dim of size world - 1 or less, a column
// block that is empty on the last rank, ...).
inline bool some_shard_empty(IntSpan shape, const DeviceMesh& mesh, const Placements& placements) {
  if (shape_numel(shape) == 0) return false;
  Placements sharded = placements;
  for (Placement& p : sharded) {
    if (p.is_partial()) p = Replicate();
  }
  for (int64_t i = 0; i < mesh.size(); ++i) {
    Shape coord(mesh.shape().size());
    for (int64_t d = mesh.ndim() - 1, rest = i; d >= 0; --d) {
      coord[static_cast<size_t>(d)] = rest % mesh.size(d);
      rest /= mesh.size(d);
    }
    if (shape_numel(compute_local_shape_and_offset(shape, mesh.shape(), coord, sharded).shape) ==
        0) {
      return true;
    }
  }
  return false;
}

}  // namespace dtensor::test
