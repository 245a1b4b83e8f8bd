// DTensor matrix products (mpirun at 1, 2, 4 ranks): for every input placement list on 1-D and
// 2-D meshes, uneven and empty shapes included, the result equals the product of the full
// tensors; the Megatron strategies are chosen without communication; and a 100-step
// training-style loop hits the propagation cache on every step after the first.
#include <catch2/catch.hpp>
#include <cstdio>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/core/propagation/sharding_propagation.h"
#include "dtensor/core/redistribute.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/reduction/reduction.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace tt = dtensor::test;
using dt::DTensor;
using dt::Partial;
using dt::Placements;
using dt::Replicate;
using dt::Shard;
using dt::Tensor;

namespace {
const Placements kP = {Partial()};
}  // namespace

TEST_CASE("DTensor mm equals the full product for every pair of placements") {
  const int64_t w = dt::world_size();
  struct Dims {
    int64_t n, k, m;
  };
  const Dims shapes[] = {{w * 3 + 1, w + 1, 5}, {2 * w, 2 * w, w}, {0, 3, 2}, {4, 0, 3}};
  for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
    for (const Dims& s : shapes) {
      const Tensor x = tt::det_input(dt::Shape{s.n, s.k}, 1);
      const Tensor y = tt::det_input(dt::Shape{s.k, s.m}, 2);
      const Tensor want = dt::mm(x, y);
      const auto lists = tt::placement_lists(mesh.ndim(), tt::standard_choices(), 2);
      for (const Placements& pa : lists) {
        const DTensor a = dt::distribute_tensor(x, mesh, pa, std::nullopt);
        // Every pair on 1-D meshes; a few partners per list on 2-D meshes.
        std::vector<Placements> pbs =
            mesh.ndim() == 1 ? lists
                             : std::vector<Placements>{pa, tt::reversed(pa),
                                                       Placements(mesh.ndim(), Replicate())};
        for (const Placements& pb : pbs) {
          INFO(tt::describe(mesh, {pa, pb}, x.sizes()));
          const DTensor b = dt::distribute_tensor(y, mesh, pb, std::nullopt);
          REQUIRE(tt::same_values(dt::mm(a, b).full_tensor(), want));
        }
      }
    }
  }
}

TEST_CASE("DTensor bmm, matmul, addmm and linear equal the full-tensor op") {
  const int64_t w = dt::world_size();
  const std::vector<dt::Placement> choices3 = {Replicate(), Shard(0), Shard(1), Shard(2),
                                               Partial()};
  for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
    const Tensor x3 = tt::det_input(dt::Shape{w + 1, 3, 2 * w + 1}, 1);
    const Tensor y3 = tt::det_input(dt::Shape{w + 1, 2 * w + 1, 2}, 2);
    const Tensor y2 = tt::det_input(dt::Shape{2 * w + 1, 2}, 3);
    const Tensor v = tt::det_input(dt::Shape{2 * w + 1}, 4);
    const Tensor bias_m = tt::det_input(dt::Shape{2}, 5);
    const Tensor bias_nm = tt::det_input(dt::Shape{3, 2}, 6);
    const Tensor x2 = tt::det_input(dt::Shape{3, 2 * w + 1}, 7);
    const Tensor weight = tt::det_input(dt::Shape{w + 2, 2 * w + 1}, 8);  // [out, in]
    const Tensor bias_out = tt::det_input(dt::Shape{w + 2}, 9);
    for (const Placements& pa : tt::placement_lists(mesh.ndim(), choices3, 3)) {
      const DTensor a3 = dt::distribute_tensor(x3, mesh, pa, std::nullopt);
      for (const Placements& pb : {pa, tt::reversed(pa), Placements(mesh.ndim(), Replicate())}) {
        INFO("bmm/matmul/linear " << tt::describe(mesh, {pa, pb}, x3.sizes()));
        const DTensor b3 = dt::distribute_tensor(y3, mesh, pb, std::nullopt);
        REQUIRE(tt::same_values(dt::bmm(a3, b3).full_tensor(), dt::bmm(x3, y3)));
        REQUIRE(tt::same_values(dt::matmul(a3, b3).full_tensor(), dt::matmul(x3, y3)));
        bool fits2 = true;
        for (const auto& p : pb) fits2 &= !p.is_shard(2);
        if (fits2) {
          const DTensor b2 = dt::distribute_tensor(y2, mesh, pb, std::nullopt);
          REQUIRE(tt::same_values(dt::matmul(a3, b2).full_tensor(), dt::matmul(x3, y2)));
          const DTensor wt = dt::distribute_tensor(weight, mesh, pb, std::nullopt);
          REQUIRE(tt::same_values(dt::linear(a3, wt).full_tensor(), dt::linear(x3, weight)));
          const DTensor bo = dt::distribute_tensor(
              bias_out, mesh, Placements(mesh.ndim(), Replicate()), std::nullopt);
          REQUIRE(tt::same_values(dt::linear(a3, wt, bo).full_tensor(),
                                  dt::linear(x3, weight, bias_out)));
        }
      }
    }
    for (const Placements& pa : tt::placement_lists(mesh.ndim(), tt::standard_choices(), 2)) {
      const DTensor a2 = dt::distribute_tensor(x2, mesh, pa, std::nullopt);
      for (const Placements& pb : {pa, tt::reversed(pa), Placements(mesh.ndim(), Replicate())}) {
        INFO("addmm/matmul " << tt::describe(mesh, {pa, pb}, x2.sizes()));
        const DTensor b2 = dt::distribute_tensor(y2, mesh, pb, std::nullopt);
        const DTensor bnm = dt::distribute_tensor(bias_nm, mesh, pb, std::nullopt);
        Placements p1;
        for (const auto& p : pb) p1.push_back(p.is_shard(1) ? Replicate() : p);
        const DTensor bm = dt::distribute_tensor(bias_m, mesh, p1, std::nullopt);
        const DTensor vv = dt::distribute_tensor(v, mesh, p1, std::nullopt);
        REQUIRE(tt::same_values(dt::addmm(bnm, a2, b2, 0.5, 2).full_tensor(),
                                dt::addmm(bias_nm, x2, y2, 0.5, 2)));
        REQUIRE(tt::same_values(dt::addmm(bm, a2, b2).full_tensor(), dt::addmm(bias_m, x2, y2)));
        REQUIRE(tt::same_values(dt::matmul(a2, vv).full_tensor(), dt::matmul(x2, v)));
        REQUIRE(tt::same_values(dt::matmul(vv, vv).full_tensor(), dt::matmul(v, v)));
      }
    }
  }
}

TEST_CASE("Megatron strategies need no communication") {
  const int64_t w = dt::world_size();
  auto mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = tt::det_input({w * 2 + 1, 8}, 1), y = tt::det_input({8, w + 3}, 2);
  auto dist = [&](const Tensor& t, Placements p) {
    return dt::distribute_tensor(t, mesh, p, std::nullopt);
  };
  CHECK(dt::mm(dist(x, {Shard(0)}), dist(y, {Replicate()})).placements() == Placements{Shard(0)});
  CHECK(dt::mm(dist(x, {Replicate()}), dist(y, {Shard(1)})).placements() == Placements{Shard(1)});
  CHECK(dt::mm(dist(x, {Shard(1)}), dist(y, {Shard(0)})).placements() == kP);
  // Tensor-parallel MLP: colwise linear then rowwise linear -> Partial(sum), then one reduce.
  const Tensor in = tt::det_input({2, 3, 8}, 3);
  const Tensor w1 = tt::det_input({w * 2, 8}, 4), b1 = tt::det_input({w * 2}, 5);
  const Tensor w2 = tt::det_input({6, w * 2}, 6), b2 = tt::det_input({6}, 7);
  const DTensor h = dt::linear(dist(in, {Replicate()}), dist(w1, {Shard(0)}), dist(b1, {Shard(0)}));
  CHECK(h.placements() == Placements{Shard(2)});
  const DTensor hr = dt::relu(h);
  const DTensor w2s = dist(w2, {Shard(1)}), b2r = dist(b2, {Replicate()});
  DTensor o;
  {
    // Rowwise with a replicated bias: [P | S(-1), S(1), R], the bias added on coordinate 0
    // only; no move at any world size (on one rank too, where every collective is modelled
    // as free).
    dt::CommDebugMode comm;
    o = dt::linear(hr, w2s, b2r);
    CHECK(comm.total_count() == 0);
  }
  CHECK(o.placements() == kP);
  const Tensor want = dt::linear(dt::relu(dt::linear(in, w1, b1)), w2, b2);
  CHECK(tt::same_values(o.full_tensor(), want));
  // The local values: the bias is in coordinate 0's partial sum only.
  const Tensor part = dt::linear(hr.to_local(), w2s.to_local());
  CHECK(tt::same_values(o.to_local(), dt::world_rank() == 0 ? dt::add(part, b2) : part));
  // 2-D mesh: dp x tp.
  if (w == 4) {
    auto mesh2 = dt::init_device_mesh(dt::kCPU, {2, 2}, {"dp", "tp"});
    const DTensor a = dt::distribute_tensor(x, mesh2, {Shard(0), Shard(1)}, std::nullopt);
    const DTensor b = dt::distribute_tensor(y, mesh2, {Replicate(), Shard(0)}, std::nullopt);
    const DTensor c = dt::mm(a, b);
    CHECK(c.placements() == Placements{Shard(0), Partial()});
    CHECK(tt::same_values(c.full_tensor(), dt::mm(x, y)));
  }
  REQUIRE_THROWS_WITH(dt::mm(dist(x, {Shard(0)}), dist(x, {Shard(0)})),
                      Catch::Contains("[mm] shapes") && Catch::Contains("cannot be multiplied"));
}

TEST_CASE("a 100-step elementwise + matmul + reduction loop is all cache hits after step 1") {
  const int64_t w = dt::world_size();
  auto mesh = dt::init_device_mesh(dt::kCPU, {w});
  const DTensor x =
      dt::distribute_tensor(tt::det_input({4, 8}, 1), mesh, {Replicate()}, std::nullopt);
  const DTensor w1 =
      dt::distribute_tensor(tt::det_input({w * 2 + 1, 8}, 2), mesh, {Shard(0)}, std::nullopt);
  const DTensor w2 =
      dt::distribute_tensor(tt::det_input({3, w * 2 + 1}, 3), mesh, {Shard(1)}, std::nullopt);
  dt::clear_propagation_cache();
  int64_t ops_per_step = 0;
  for (int step = 0; step < 100; ++step) {
    const DTensor h = dt::relu(dt::linear(x, w1));               // [S(1)]
    const DTensor o = dt::linear(h, w2);                         // [P(sum)]
    const DTensor s = dt::mul(dt::add(o, o), 1.0 / (step + 1));  // scalar changes each step
    const DTensor loss = dt::mean(s, {});                        // still P(sum)
    REQUIRE(loss.placements() == kP);
    if (step == 0) ops_per_step = dt::propagation_cache_stats().misses;
  }
  const auto st = dt::propagation_cache_stats();
  if (dt::world_rank() == 0) {
    std::printf("propagation cache, 100 steps of %lld ops: %lld hits, %lld misses\n",
                static_cast<long long>(ops_per_step), static_cast<long long>(st.hits),
                static_cast<long long>(st.misses));
  }
  CHECK(ops_per_step == 6);
  CHECK(st.misses == ops_per_step);
  CHECK(st.hits == 99 * ops_per_step);
}
