// Gradients through DTensor::redistribute under mpirun (1, 2, 4 ranks; the values are tested
// in tests/core, which links no autograd): the in-place (moved-from) form records as the copying
// one, an async redistribute records as the blocking one, and a cross-mesh redistribute sends
// the gradient back to the source mesh.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "dtensor/core/redistribute.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "tests/common/dtensor_test_util.h"
#include "tests/core/cross_mesh_test_util.h"

namespace dt = dtensor;
using dt::test::Ints;

namespace {

using namespace dt::test::placements;
using namespace dt::test::cross_mesh;

}  // namespace

TEST_CASE("redistribute: a DTensor given up records the same gradient", "[redistribute]") {
  const int w = dt::world_size();
  const dt::DeviceMesh mesh = dt::test::make_mesh({w});
  // Autograd records the in-place form as the copying one: the same gradient either way.
  const Ints shape{w * 2 + 1, 3};
  const dt::Tensor x = dt::test::make_data(shape, dt::kFloat32);
  dt::Tensor grads[2];
  for (int moved = 0; moved < 2; ++moved) {
    dt::DTensor leaf = dt::distribute_tensor(x, mesh, {R});
    leaf.requires_grad_();
    dt::DTensor part = dt::mul(leaf.redistribute({Psum}), 3.0);  // fresh memory, Partial
    REQUIRE(part.placements() == dt::Placements{Psum});
    const void* mem = part.to_local().data_ptr();
    const dt::DTensor full = moved ? std::move(part).redistribute({R}) : part.redistribute({R});
    CHECK(dt::equal(full.to_local(), dt::mul(x, dt::Scalar(3.0))));
    if (w > 1) CHECK((full.to_local().data_ptr() == mem) == (moved == 1));
    dt::sum(dt::mul(full, full)).backward();
    REQUIRE(leaf.grad().defined());
    grads[moved] = leaf.grad().full_tensor();
  }
  CHECK(dt::equal(grads[0], grads[1]));
  CHECK(dt::equal(grads[1], dt::mul(x, dt::Scalar(18.0))));
}

TEST_CASE("redistribute: async_op records the same gradient", "[redistribute][async]") {
  const int w = dt::world_size();
  const dt::DeviceMesh mesh = dt::test::make_mesh({w});
  const dt::Tensor x = dt::test::make_data({w * 3 + 1, 5}, dt::kFloat32);
  // Gradients flow back through an async redistribute as through the blocking one.
  dt::DTensor leaf = dt::distribute_tensor(x, mesh, {S0});
  leaf.requires_grad_();
  dt::sum(dt::mul(leaf.redistribute({R}, true), 2.0)).backward();
  REQUIRE(leaf.grad().defined());
  CHECK(leaf.grad().placements() == dt::Placements{S0});
  CHECK(dt::equal(leaf.grad().full_tensor(),
                  dt::full(x.shape(), 2.0, dt::TensorOptions(dt::kFloat32))));
}

TEST_CASE("cross-mesh redistribute: the gradient flows back to the source mesh",
          "[redistribute][cross_mesh]") {
  const int w = dt::world_size();
  const std::vector<NamedMesh> meshes = meshes_of_world(w);
  const dt::Tensor x = dt::test::make_data({6, 5}, dt::kFloat64, 1);
  const dt::Tensor s = dt::test::make_data({6, 5}, dt::kFloat64, 2);
  for (const NamedMesh& from : meshes) {
    for (const NamedMesh& to : meshes) {
      if (from.mesh == to.mesh) continue;
      for (const dt::Placements& sp : lists_for(from.mesh)) {
        if (has_partial(sp)) continue;  // a leaf is not Partial
        const dt::Placements dp = lists_for(to.mesh).front();
        INFO(from.name << " " << dt::placements_str(sp) << " -> " << to.name << " "
                       << dt::placements_str(dp));
        dt::DTensor a = dt::distribute_tensor(x, from.mesh, sp);
        a.requires_grad_();
        const dt::DTensor scale = dt::distribute_tensor(s, to.mesh, dp);
        dt::sum(a.redistribute(to.mesh, dp) * scale).backward();
        // d sum(y * s) / dx = s, on the source mesh with the source's placements.
        REQUIRE(a.grad().defined());
        CHECK(a.grad().device_mesh() == from.mesh);
        CHECK(a.grad().placements() == sp);
        const dt::Tensor g = a.grad().full_tensor();
        if (from.mesh.contains_me()) CHECK(dt::equal(g, s));
      }
    }
  }
}
