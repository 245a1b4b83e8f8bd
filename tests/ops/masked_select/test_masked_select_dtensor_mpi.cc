// masked_select / nonzero on DTensors (mpirun at 1, 2, 4 ranks) and the engine mechanism they
// use (OpInfo::data_dependent_shape): results equal the full-tensor op for every placement list
// of the inputs on 1-D and 2-D meshes with even, uneven and empty shards; the output is
// Replicate with the selected count as its global shape; the propagation cache hit by a second
// call with the same specs and different mask data still gives that call's shape; gradients
// equal the single-device ones; registration and propagation refuse what the mechanism cannot
// serve (a Partial or sharded output row, a linear data-dependent op).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/collectives/comm_debug.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/core/propagation/sharding_propagation.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/masked_select/detail/masked_select.h"
#include "dtensor/ops/masked_select/masked_select.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/tensor/compare.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace tt = dtensor::test;
using dt::DTensor;
using dt::Placements;
using dt::Replicate;
using dt::Shard;
using dt::Tensor;

namespace {

Tensor bool_mask(dt::IntSpan shape, int salt) {
  return dt::gt(tt::det_input(shape, salt), dt::Scalar(0.0));
}

bool all_replicate(const DTensor& t) {
  for (const dt::Placement& p : t.placements()) {
    if (!p.is_replicate()) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("masked_select and nonzero on DTensors equal the full-tensor op") {
  const int64_t w = dt::world_size();
  struct Case {
    tt::Ints self, mask;
  };
  // Even (2w), uneven (3w+1), and empty-shard (w-1 rows, 0 rows) shapes; broadcasting both ways.
  const std::vector<Case> cases = {{{3 * w + 1, 5}, {3 * w + 1, 5}},
                                   {{2 * w, 1}, {4}},
                                   {{5}, {w + 1, 5}},
                                   {{w > 1 ? w - 1 : 1, 3}, {3}},
                                   {{0, 3}, {0, 3}}};
  int salt = 0;
  for (const Case& c : cases) {
    const Tensor x = tt::det_input(c.self, salt++);
    const Tensor m = bool_mask(c.mask, salt++);
    const Tensor want = dt::masked_select(x, m);
    const Tensor want_nz = dt::nonzero(x);
    for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
      for (const Placements& p :
           tt::placement_lists(mesh.ndim(), tt::shard_choices(2), c.self.size())) {
        for (const Placements& q :
             tt::placement_lists(mesh.ndim(), tt::shard_choices(2, false), c.mask.size())) {
          INFO(tt::describe(mesh, {p, q}, c.self) << " mask " << dt::shape_str(c.mask));
          const DTensor dx = dt::distribute_tensor(x, mesh, p, std::nullopt);
          const DTensor dm = dt::distribute_tensor(m, mesh, q, std::nullopt);
          const DTensor got = dt::masked_select(dx, dm);
          if (!mesh.contains_me()) continue;
          CHECK(all_replicate(got));
          CHECK(got.shape() == want.sizes());
          CHECK(tt::same_values(got.to_local(), want));
          CHECK(tt::same_values(got.full_tensor(), want));
        }
        const DTensor dx = dt::distribute_tensor(x, mesh, p, std::nullopt);
        const DTensor nz = dt::nonzero(dx);
        if (!mesh.contains_me()) continue;
        CHECK(all_replicate(nz));
        CHECK(nz.shape() == want_nz.sizes());
        CHECK(dt::equal(nz.to_local(), want_nz));
      }
    }
  }
}

TEST_CASE("a sharded masked_select gathers its inputs once and needs no size exchange") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = tt::make_mesh({w});
  const Tensor x = tt::det_input({3 * w + 1, 4});
  const Tensor m = bool_mask({3 * w + 1, 4}, 3);
  const DTensor dx = dt::distribute_tensor(x, mesh, {Shard(0)}, std::nullopt);
  const DTensor dm = dt::distribute_tensor(m, mesh, {Replicate()}, std::nullopt);
  dt::CommDebugMode comm;
  const DTensor got = dt::masked_select(dx, dm);
  // One all-gather of self (none on one rank), nothing for the output's size.
  CHECK(comm.count(dt::CollectiveKind::kAllGather) == (w > 1 ? 1 : 0));
  CHECK(comm.total_count() == (w > 1 ? 1 : 0));
  CHECK(tt::same_values(got.to_local(), dt::masked_select(x, m)));
}

TEST_CASE("the propagation cache never serves a stale data-dependent shape") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = tt::make_mesh({w});
  const Tensor x = tt::det_input({2 * w + 1, 3});
  const Placements r = {Replicate()};
  const DTensor dx = dt::distribute_tensor(x, mesh, {Shard(0)}, std::nullopt);
  // Same specs (shape, dtype, placements), different data: 15% / all / none of the mask true.
  const std::vector<Tensor> masks = {bool_mask({2 * w + 1, 3}, 1),
                                     dt::ones({2 * w + 1, 3}, dt::TensorOptions(dt::kBool)),
                                     dt::zeros({2 * w + 1, 3}, dt::TensorOptions(dt::kBool))};
  dt::clear_propagation_cache();
  for (int round = 0; round < 2; ++round) {
    for (size_t k = 0; k < masks.size(); ++k) {
      INFO("round " << round << " mask " << k);
      const DTensor dm = dt::distribute_tensor(masks[k], mesh, r, std::nullopt);
      const dt::PropagationCacheStats before = dt::propagation_cache_stats();
      const DTensor got = dt::masked_select(dx, dm);
      const dt::PropagationCacheStats after = dt::propagation_cache_stats();
      // Only the first call of all propagates; the others hit the cache.
      CHECK(after.misses - before.misses == (round == 0 && k == 0 ? 1 : 0));
      const Tensor want = dt::masked_select(x, masks[k]);
      CHECK(got.shape() == want.sizes());
      CHECK(tt::same_values(got.to_local(), want));
      // The output spec is usable downstream: a reduction of it equals the full one.
      CHECK(tt::same_values(dt::sum(got).full_tensor(), dt::sum(want)));
      const DTensor nz = dt::nonzero(dm);
      CHECK(dt::equal(nz.to_local(), dt::nonzero(masks[k])));
    }
  }
}

TEST_CASE("masked_select's gradient equals the single-device gradient") {
  const int64_t w = dt::world_size();
  const Tensor x = tt::det_input({3 * w + 1, 4}, 0, -2.5, 0.5, dt::kFloat64);
  const Tensor m = bool_mask({4}, 5);  // broadcast along self's rows: self's gradient is dense
  const Tensor m2 = bool_mask({3 * w + 1, 4}, 2);
  // Weights make each selected element's gradient distinct: d/dx sum(w * masked_select(x, m)).
  for (const Tensor& mask : {m, m2}) {
    const Tensor sel = dt::masked_select(x, mask);
    const int64_t n = sel.numel();
    const Tensor weight = tt::det_input({n}, 4, -1.0, 0.5, dt::kFloat64);
    // Expected: weight scattered at the true positions of the broadcast mask.
    const Tensor expected =
        dt::detail::masked_select_backward(weight, mask, dt::Shape{3 * w + 1, 4});
    for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
      for (const Placements& p : tt::placement_lists(mesh.ndim(), tt::shard_choices(2), 2)) {
        INFO(tt::describe(mesh, {p}, {3 * w + 1, 4}) << " mask " << dt::shape_str(mask.sizes()));
        DTensor dx = dt::distribute_tensor(x, mesh, p, std::nullopt);
        dx.requires_grad_();
        const DTensor dm =
            dt::distribute_tensor(mask, mesh, Placements(mesh.ndim(), Replicate()), std::nullopt);
        const DTensor dw =
            dt::distribute_tensor(weight, mesh, Placements(mesh.ndim(), Replicate()), std::nullopt);
        dt::sum(dt::mul(dt::masked_select(dx, dm), dw)).backward();
        REQUIRE(dx.grad().defined());
        bool partial = false;
        for (const dt::Placement& q : p) partial |= q.is_partial();
        if (!partial) CHECK(dx.grad().placements() == dx.placements());
        const Tensor g = dx.grad().full_tensor();
        if (mesh.contains_me()) CHECK(tt::same_values(g, expected, 1e-12));
      }
    }
  }
  // self broadcast against a larger mask: the gradient is summed over the broadcast dim.
  const dt::DeviceMesh mesh = tt::make_mesh({w});
  const Tensor row = tt::det_input({4}, 1, -1.0, 0.5, dt::kFloat64);
  const Tensor big = bool_mask({w + 2, 4}, 7);
  DTensor drow = dt::distribute_tensor(row, mesh, {Shard(0)}, std::nullopt);
  drow.requires_grad_();
  const DTensor dbig = dt::distribute_tensor(big, mesh, {Shard(0)}, std::nullopt);
  dt::sum(dt::masked_select(drow, dbig)).backward();
  // d/drow[j] = the number of rows of the mask true at column j.
  const Tensor want = dt::sum(big.to(dt::kFloat64), {0});
  CHECK(tt::same_values(drow.grad().full_tensor(), want, 1e-12));
}

TEST_CASE("the data-dependent mechanism refuses what it cannot serve, on every rank") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = tt::make_mesh({w});
  dt::OpInfo base;
  base.input_names = {"self"};
  base.data_dependent_shape = true;
  base.meta = [](const dt::OpSchema& s) {
    return dt::OutputMetas{dt::TensorMeta(dt::Shape{0}, s.input(0).dtype())};
  };
  base.kernel = dt::single_output([](const dt::KernelContext&, absl::Span<const Tensor> l) {
    return dt::masked_select(l[0], dt::ne(l[0], dt::Scalar(0.0)));
  });
  {  // A linear data-dependent op would produce Partial outputs: refused at registration.
    dt::OpInfo op = base;
    op.name = "test_dd_linear";
    op.linearity = dt::Linearity::kLinear;
    op.strategy = [](const dt::OpSchema&) { return dt::StrategyRows{}; };
    dt::Registry reg;
    CHECK_THROWS_WITH(reg.add(std::move(op)), Catch::Contains("data-dependent output shape"));
  }
  {  // A row with a sharded output: refused when propagating, the same on every rank.
    dt::OpInfo op = base;
    op.name = "test_dd_sharded_row";
    op.strategy = [](const dt::OpSchema&) { return dt::StrategyRows{{Shard(0), Shard(0)}}; };
    dt::Registry reg;
    const dt::OpInfo& info = reg.add(std::move(op));
    const DTensor dx =
        dt::distribute_tensor(tt::det_input({2 * w + 1}), mesh, {Shard(0)}, std::nullopt);
    const DTensor* in[] = {&dx};
    CHECK_THROWS_WITH(dt::dispatch_sharded(info, in, {}),
                      Catch::Contains("[test_dd_sharded_row] the op's output shape depends on "
                                      "the data, so its outputs must be Replicate"));
  }
  // A non-bool mask: the meta function's error, raised on every rank before any collective.
  const DTensor dx =
      dt::distribute_tensor(tt::det_input({2 * w + 1, 3}), mesh, {Shard(0)}, std::nullopt);
  CHECK_THROWS_WITH(dt::masked_select(dx, dx),
                    Catch::Contains("[masked_select] argument mask has dtype float32, expected "
                                    "bool"));
}

TEST_CASE("a rank outside the mesh is told it cannot know a data-dependent shape") {
  const int64_t w = dt::world_size();
  if (w < 2) return;  // every rank is in every mesh
  // The mesh of rank 0 alone: rank 0 selects, the others raise at the call (they hold no data,
  // so a shape there would be a guess).
  const dt::DeviceMesh sub(dt::kCPU, {1}, {0});
  const Tensor x = tt::det_input({3, 4}, 5);
  const Tensor m = bool_mask({3, 4}, 6);
  const DTensor dx = dt::distribute_tensor(x, sub, {Replicate()}, std::nullopt);
  const DTensor dm = dt::distribute_tensor(m, sub, {Replicate()}, std::nullopt);
  if (dt::world_rank() == 0) {
    const DTensor s = dt::masked_select(dx, dm);
    CHECK(dt::equal(s.to_local(), dt::masked_select(x, m)));
  } else {
    CHECK_THROWS_WITH(dt::masked_select(dx, dm),
                      Catch::Contains("[masked_select] the output's shape depends on the values "
                                      "held by the ranks of DeviceMesh(") &&
                          Catch::Contains("is outside that mesh"));
    CHECK_THROWS_WITH(dt::nonzero(dx), Catch::Contains("[nonzero] the output's shape depends"));
  }
}
