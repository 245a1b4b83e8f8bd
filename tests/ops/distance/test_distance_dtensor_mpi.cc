// The distances and H1 reductions on DTensors (mpirun at 1, 2 and 4 ranks): for every placement
// of the inputs on a 1-D and a 2-D mesh (uneven and empty shards), cdist, cosine_similarity and
// pairwise_distance (compositions, not covered by the registration suites) equal the op on the
// full tensors, values and gradients; the rows that avoid communication do (CommDebugMode):
// cdist with P or R sharded gathers nothing, with M sharded for p 1 leaves a Partial(sum);
// cosine_similarity / pairwise_distance over a sharded dim combine the sums instead of gathering
// the inputs; logcumsumexp along
// a sharded dim runs the block pipeline (no gather, bit-identical).
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/ops/distance/distance.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/scan/scan.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace tt = dtensor::test;
using dt::DTensor;
using dt::Placements;
using dt::Shard;
using dt::Tensor;

namespace {

using BinaryFn = std::function<DTensor(const DTensor&, const DTensor&)>;

// f on (a, b) laid out as (pa, pb) against f on local DTensors of the full tensors: values and
// the gradients of sum(out * out) (a nonlinear upstream).
void check_binary(const Tensor& a, const Tensor& b, const dt::DeviceMesh& mesh,
                  const Placements& pa, const Placements& pb, const BinaryFn& f) {
  INFO(tt::describe(mesh, {pa, pb}, a.sizes()) << " b " << dt::shape_str(b.sizes()));
  DTensor la = dt::local_dtensor(a.clone()), lb = dt::local_dtensor(b.clone());
  la.requires_grad_();
  lb.requires_grad_();
  const DTensor want = f(la, lb);
  dt::sum(want * want).backward();
  DTensor da = dt::distribute_tensor(a, mesh, pa, std::nullopt);
  DTensor db = dt::distribute_tensor(b, mesh, pb, std::nullopt);
  da.requires_grad_();
  db.requires_grad_();
  const DTensor got = f(da, db);
  CHECK(tt::same_values(got.full_tensor(), want.to_local(), 1e-10));
  dt::sum(got * got).backward();
  CHECK(tt::same_values(da.grad().full_tensor(), la.grad().to_local(), 1e-9));
  CHECK(tt::same_values(db.grad().full_tensor(), lb.grad().to_local(), 1e-9));
}

}  // namespace

TEST_CASE("dtensor cdist equals the full-tensor op for every placement and p") {
  const int64_t w = dt::world_size();
  const Tensor x1 = tt::det_input({2, 3 * w + 1, w + 1}, 1, -2.5, 0.45, dt::kFloat64);
  const Tensor x2 = tt::det_input({2, 2 * w + 1, w + 1}, 4, -2.0, 0.35, dt::kFloat64);
  const Tensor e1 = tt::det_input({w > 1 ? w - 1 : 1, 3}, 2, -1.0, 0.3, dt::kFloat64);
  const Tensor e2 = tt::det_input({2, 3}, 5, -1.5, 0.4, dt::kFloat64);
  const Tensor big1 = tt::det_input({30, 3}, 3, -2.0, 0.37, dt::kFloat64);
  const Tensor big2 = tt::det_input({2 * w + 1, 3}, 1, -1.5, 0.41, dt::kFloat64);
  const double inf = std::numeric_limits<double>::infinity();
  for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
    for (double p : {2.0, 1.0, inf, 3.0}) {
      const BinaryFn f = [p](const DTensor& a, const DTensor& b) { return dt::cdist(a, b, p); };
      for (const Placements& pa :
           tt::placement_lists(mesh.ndim(), tt::shard_choices(3, false), 3)) {
        for (const Placements& pb : {Placements(mesh.ndim(), dt::Replicate()), pa}) {
          check_binary(x1, x2, mesh, pa, pb, f);
        }
      }
      for (const Placements& pa :
           tt::placement_lists(mesh.ndim(), tt::shard_choices(2, false), 2)) {
        check_binary(e1, e2, mesh, pa, tt::reversed(pa), f);
      }
      // More than 25 rows: p 2 goes through a matmul (forward and backward).
      for (const Placements& pa :
           tt::placement_lists(mesh.ndim(), tt::shard_choices(2, false), 2)) {
        check_binary(big1, big2, mesh, pa, tt::reversed(pa), f);
      }
    }
  }
}

TEST_CASE("dtensor cdist: P, R and batch shards gather nothing; M shards give Partial for p 1") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = tt::family_meshes()[0];
  const Tensor x1 = tt::det_input({2, 2 * w, 3}, 1, -2.5, 0.45, dt::kFloat64);
  const Tensor x2 = tt::det_input({2, 3 * w, 3}, 4, -2.0, 0.35, dt::kFloat64);
  const Placements rep{dt::Replicate()};
  struct Case {
    Placements a, b, out;
  };
  for (const Case& c : {Case{{Shard(1)}, rep, {Shard(1)}}, Case{rep, {Shard(1)}, {Shard(2)}},
                        Case{{Shard(0)}, {Shard(0)}, {Shard(0)}}}) {
    INFO(dt::placements_str(c.a) << " " << dt::placements_str(c.b));
    DTensor a = dt::distribute_tensor(x1, mesh, c.a, std::nullopt);
    DTensor b = dt::distribute_tensor(x2, mesh, c.b, std::nullopt);
    a.requires_grad_();
    b.requires_grad_();
    dt::CommDebugMode comm;
    const DTensor out = dt::cdist(a, b);
    CHECK(comm.count(dt::CollectiveKind::kAllGather) == 0);
    if (w > 1) CHECK(out.placements() == c.out);
    CHECK(tt::same_values(out.full_tensor(), dt::cdist(x1, x2), 1e-12));
  }
  DTensor a = dt::distribute_tensor(x1, mesh, {Shard(2)}, std::nullopt);
  DTensor b = dt::distribute_tensor(x2, mesh, {Shard(2)}, std::nullopt);
  dt::CommDebugMode comm;
  const DTensor out = dt::cdist(a, b, 1.0);
  CHECK(comm.count(dt::CollectiveKind::kAllGather) == 0);
  if (w > 1) CHECK(out.placements()[0].is_partial());
  CHECK(tt::same_values(out.full_tensor(), dt::cdist(x1, x2, 1.0), 1e-12));
}

TEST_CASE("dtensor cosine_similarity and pairwise_distance equal the full-tensor ops") {
  const int64_t w = dt::world_size();
  const Tensor a = tt::det_input({3 * w + 1, w + 1, 3}, 1, -2.5, 0.45, dt::kFloat64);
  const Tensor b = tt::det_input({3 * w + 1, w + 1, 3}, 3, -2.0, 0.4, dt::kFloat64);
  const Tensor c = tt::det_input({w + 1, 3}, 6, -1.0, 0.3, dt::kFloat64);
  const std::vector<std::pair<std::string, BinaryFn>> fns = {
      {"cosine dim 1",
       [](const DTensor& x, const DTensor& y) { return dt::cosine_similarity(x, y); }},
      {"cosine dim -1",
       [](const DTensor& x, const DTensor& y) { return dt::cosine_similarity(x, y, -1, 1e-8); }},
      {"pairwise p 2",
       [](const DTensor& x, const DTensor& y) { return dt::pairwise_distance(x, y); }},
      {"pairwise p 1 keepdim", [](const DTensor& x, const DTensor& y) {
         return dt::pairwise_distance(x, y, 1.0, 1e-6, true);
       }}};
  for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
    for (const auto& [name, f] : fns) {
      INFO(name);
      for (const Placements& pa :
           tt::placement_lists(mesh.ndim(), tt::shard_choices(3, false), 3)) {
        check_binary(a, b, mesh, pa, tt::reversed(pa), f);
        check_binary(a, c, mesh, pa, Placements(mesh.ndim(), dt::Replicate()), f);
      }
    }
  }
  // The reduced dim sharded: the inputs are never gathered; only the per-row sums (the norms and
  // the result, 1/16 of an input here) cross ranks.
  const dt::DeviceMesh mesh = tt::family_meshes()[0];
  const Tensor wa = tt::det_input({5, 16 * w, 3}, 1, -2.5, 0.45, dt::kFloat64);
  const Tensor wb = tt::det_input({5, 16 * w, 3}, 3, -2.0, 0.4, dt::kFloat64);
  const DTensor da = dt::distribute_tensor(wa, mesh, {Shard(1)}, std::nullopt);
  const DTensor db = dt::distribute_tensor(wb, mesh, {Shard(1)}, std::nullopt);
  dt::CommDebugMode comm;
  const DTensor cs = dt::cosine_similarity(da, db);
  const DTensor pd = dt::pairwise_distance(da.transpose(1, 2), db.transpose(1, 2));
  int64_t moved = 0;
  for (auto kind : {dt::CollectiveKind::kAllReduce, dt::CollectiveKind::kAllGather,
                    dt::CollectiveKind::kReduceScatter, dt::CollectiveKind::kAllToAll}) {
    moved += comm.bytes(kind);
  }
  INFO(comm.str());
  CHECK(moved < wa.numel() * 8 / 2);
  CHECK(tt::same_values(cs.full_tensor(), dt::cosine_similarity(wa, wb), 1e-12));
  CHECK(tt::same_values(pd.full_tensor(),
                        dt::pairwise_distance(wa.transpose(1, 2), wb.transpose(1, 2)), 1e-12));
}

TEST_CASE("dtensor logcumsumexp along a sharded dim: the block pipeline, bit-identical") {
  const int64_t w = dt::world_size();
  const Tensor x = tt::det_input({3 * w + 1, 4}, 2, -3.0, 0.7, dt::kFloat64);
  for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
    for (const Placements& p : tt::placement_lists(mesh.ndim(), tt::shard_choices(2, false), 2)) {
      INFO(tt::describe(mesh, {p}, x.sizes()));
      const DTensor dx = dt::distribute_tensor(x, mesh, p, std::nullopt);
      dt::CommDebugMode comm;
      const DTensor out = dt::logcumsumexp(dx, 0);
      CHECK(comm.count(dt::CollectiveKind::kAllGather) == 0);
      CHECK(out.placements() == p);
      CHECK(dt::equal(out.full_tensor(), dt::logcumsumexp(x, 0)));
    }
  }
}
