// Meshes and placement lists the cross-mesh redistribute suites walk (tests/core's values,
// tests/autograd's gradients).
#pragma once

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "tests/common/dtensor_test_util.h"

namespace dtensor::test::cross_mesh {

namespace dt = ::dtensor;
using namespace dt::test::placements;

struct NamedMesh {
  std::string name;
  dt::DeviceMesh mesh;
};

inline dt::DeviceMesh mesh_over(const Ints& shape, std::vector<int> ranks) {
  return dt::DeviceMesh(dt::kCPU, dt::IntSpan(shape.data(), shape.size()), std::move(ranks));
}

inline std::vector<int> range(int first, int count) {
  std::vector<int> r(static_cast<size_t>(count));
  std::iota(r.begin(), r.end(), first);
  return r;
}

// The meshes this world can hold: all ranks, the first half, the second half (disjoint from
// the first), all ranks reversed as a 2-d mesh, and a 3-d mesh at 8 ranks. Built in the same
// order on every rank (mesh construction is collective over the world).
inline std::vector<NamedMesh> meshes_of_world(int w) {
  std::vector<NamedMesh> m;
  m.push_back({"all", mesh_over({w}, range(0, w))});
  const int half = std::max(1, w / 2);
  m.push_back({"first half", mesh_over({half}, range(0, half))});
  if (w >= 2) m.push_back({"second half", mesh_over({w - half}, range(half, w - half))});
  if (w >= 4) {
    std::vector<int> reversed = range(0, w);
    std::reverse(reversed.begin(), reversed.end());
    m.push_back({"all reversed 2-d", mesh_over({2, w / 2}, reversed)});
  }
  if (w == 8) m.push_back({"all 3-d", mesh_over({2, 2, 2}, range(0, 8))});
  if (w == 1) m.push_back({"all 2-d", mesh_over({1, 1}, {0})});
  return m;
}

// Placement lists to try on a mesh: every list over {R, S0, S1, P(sum)} on 1-d meshes, a few
// on 2-d and 3-d ones (nested sharding and Partial included).
inline std::vector<dt::Placements> lists_for(const dt::DeviceMesh& mesh) {
  switch (mesh.ndim()) {
    case 1:
      return {{R}, {S0}, {S1}, {Psum}};
    case 2:
      return {{S0, S1}, {S1, S0}, {S0, S0}, {R, S1}, {Psum, S0}, {R, R}};
    default:
      return {{S0, S1, S0}, {R, S1, Psum}, {S1, R, R}};
  }
}

inline bool has_partial(const dt::Placements& p) {
  return std::any_of(p.begin(), p.end(), [](const dt::Placement& q) { return q.is_partial(); });
}

}  // namespace dtensor::test::cross_mesh
