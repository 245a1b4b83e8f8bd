// DTensor factories under mpirun (1, 2, 4 ranks): zeros/ones/empty/full/arange/eye and the
// like-factories give, on every placement list of every mesh the world allows (even, uneven and
// empty shards, two mesh dims on one tensor dim), exactly the single-device factory's block on
// each rank and its whole tensor through full_tensor, without a collective.
#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/core/factories.h"
#include "dtensor/tensor/compare.h"
#include "tests/common/dtensor_test_util.h"

namespace dt = dtensor;
using Catch::Contains;
using dt::test::Ints;

namespace {

using namespace dt::test::placements;

// A factory on a mesh and its single-device counterpart.
struct Case {
  std::string name;
  std::function<dt::DTensor(const dt::DeviceMesh&, const dt::Placements&)> sharded;
  dt::Tensor reference;
};

std::vector<Case> cases(int w) {
  const dt::Shape uneven = {3 * w + 1, 5};
  const dt::Shape empty_rows = {0, 3};
  std::vector<Case> out;
  for (const dt::Shape& shape : {uneven, empty_rows, dt::Shape{2 * w, w + 2}}) {
    const std::string s = dt::shape_str(shape);
    out.push_back({"zeros " + s,
                   [shape](const dt::DeviceMesh& m, const dt::Placements& p) {
                     return dt::zeros(shape, m, p, dt::kFloat32);
                   },
                   dt::zeros(shape, dt::kFloat32)});
    out.push_back({"ones int64 " + s,
                   [shape](const dt::DeviceMesh& m, const dt::Placements& p) {
                     return dt::ones(shape, m, p, dt::kInt64);
                   },
                   dt::ones(shape, dt::kInt64)});
    out.push_back({"full bfloat16 " + s,
                   [shape](const dt::DeviceMesh& m, const dt::Placements& p) {
                     return dt::full(shape, dt::Scalar(2.5), m, p, dt::kBFloat16);
                   },
                   dt::full(shape, dt::Scalar(2.5), dt::kBFloat16)});
  }
  // eye: square, wide and tall, so the diagonal crosses shard borders on either dim.
  for (const Ints& nm : {Ints{3 * w + 1, -1}, Ints{w + 1, 2 * w + 3}, Ints{2 * w + 3, 2}}) {
    out.push_back({"eye " + std::to_string(nm[0]) + "x" + std::to_string(nm[1]),
                   [nm](const dt::DeviceMesh& m, const dt::Placements& p) {
                     return dt::eye(nm[0], nm[1], m, p, dt::kFloat64);
                   },
                   dt::eye(nm[0], nm[1], dt::kFloat64)});
  }
  return out;
}

}  // namespace

TEST_CASE("factories match the single-device factory on every layout, with no collective",
          "[dtensor][factories]") {
  const int w = dt::world_size();
  int64_t checked = 0;
  for (const Ints& mesh_shape : dt::test::meshes_for_world(w)) {
    const dt::DeviceMesh mesh = dt::test::make_mesh(mesh_shape);
    for (const dt::Placements& p : dt::test::all_placements({R, S0, S1}, mesh_shape.size())) {
      for (const Case& c : cases(w)) {
        INFO(c.name << " mesh " << dt::shape_str(mesh.shape()) << " placements "
                    << dt::placements_str(p));
        dt::CommDebugMode comm;
        const dt::DTensor d = c.sharded(mesh, p);
        CHECK(comm.total_count() == 0);
        CHECK(d.shape() == c.reference.shape());
        CHECK(d.dtype() == c.reference.dtype());
        CHECK(d.placements() == p);
        if (mesh.contains_me()) {
          CHECK(dt::equal(d.to_local(), dt::test::expected_block(c.reference, mesh, p)));
        }
        CHECK(dt::equal(d.full_tensor(), c.reference));
        ++checked;
      }
    }
  }
  CHECK(checked > 0);
}

TEST_CASE("arange shards hold the single-device values, float steps included",
          "[dtensor][factories]") {
  const int w = dt::world_size();
  struct Args {
    double start, end, step;
    dt::DType dtype;
  };
  const std::vector<Args> args = {{0, double(3 * w + 1), 1, dt::kInt64},
                                  {-1.5, 2.0 * w, 0.1, dt::kFloat32},
                                  {5, -3, -0.7, dt::kFloat64},
                                  {0, 0, 1, dt::kInt64}};
  for (const Ints& mesh_shape : dt::test::meshes_for_world(w)) {
    const dt::DeviceMesh mesh = dt::test::make_mesh(mesh_shape);
    for (const dt::Placements& p : dt::test::all_placements({R, S0}, mesh_shape.size())) {
      for (const Args& a : args) {
        INFO("arange(" << a.start << ", " << a.end << ", " << a.step << ") mesh "
                       << dt::shape_str(mesh.shape()) << " " << dt::placements_str(p));
        const dt::Tensor ref = dt::arange(a.start, a.end, a.step, a.dtype);
        const dt::DTensor d = dt::arange(a.start, a.end, a.step, mesh, p, a.dtype);
        if (mesh.contains_me()) {
          CHECK(dt::equal(d.to_local(), dt::test::expected_block(ref, mesh, p)));
        }
        CHECK(dt::equal(d.full_tensor(), ref));
      }
    }
  }
}

TEST_CASE("like-factories keep the layout, Partial becomes Replicate", "[dtensor][factories]") {
  const int w = dt::world_size();
  const dt::DeviceMesh mesh = dt::test::make_mesh({w});
  const dt::Shape shape = {3 * w + 1, 4};
  for (const dt::Placement& p : {S0, S1, R, Psum}) {
    INFO("placement " << p.str());
    const dt::DTensor like =
        dt::distribute_tensor(dt::test::make_data({3 * w + 1, 4}, dt::kFloat64), mesh, {p});
    const dt::Placements expect = {p.is_partial() ? R : p};
    const dt::DTensor o = dt::ones_like(like);
    CHECK(o.placements() == expect);
    CHECK(dt::equal(o.full_tensor(), dt::ones(shape, dt::kFloat64)));
    const dt::DTensor f = dt::full_like(like, dt::Scalar(-3));
    CHECK(f.placements() == expect);
    CHECK(dt::equal(f.full_tensor(), dt::full(shape, dt::Scalar(-3), dt::kFloat64)));
    const dt::DTensor e = dt::empty_like(like);
    CHECK(e.placements() == expect);
    CHECK(e.to_local().shape() == o.to_local().shape());
    // rand_like / randn_like: tests/rng/test_dtensor_random_mpi.cc (the rng layer).
  }
}

TEST_CASE("factories refuse Partial and bad arguments on every rank", "[dtensor][factories]") {
  const int w = dt::world_size();
  const dt::DeviceMesh mesh = dt::test::make_mesh({w});
  CHECK_THROWS_WITH(dt::ones({4, 4}, mesh, {Psum}),
                    Contains("[ones] placements [P(sum)]") && Contains("cannot be Partial"));
  CHECK_THROWS_WITH(dt::zeros({4}, mesh, {S1}), Contains("[zeros]"));
  CHECK_THROWS_WITH(dt::eye(-1, 2, mesh, {R}), Contains("[eye] n = -1"));
  CHECK_THROWS_WITH(dt::eye(3, -5, mesh, {R}), Contains("m = -5"));
  CHECK_THROWS_WITH(dt::arange(0, 1, 0, mesh, {S0}), Contains("[arange] step 0"));
  CHECK_THROWS_WITH(dt::full({2}, dt::Scalar(1), dt::DeviceMesh(), {R}),
                    Contains("[full] the device mesh is an empty handle"));
}
