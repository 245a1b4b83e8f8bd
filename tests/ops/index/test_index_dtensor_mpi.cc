// Indexing on DTensors (mpirun at 1, 2, 4 ranks): gather / scatter_add / index_add /
// index_select / take_along_dim / one_hot / masked_fill equal the full-tensor op for every
// placement list of their inputs on 1-D and 2-D meshes; a table sharded along the gathered dim gives a Partial
// result without communication, a scatter into one stays sharded without communication; an
// index out of range on one rank is raised on every rank.
#include <catch2/catch.hpp>
#include <string>

#include "collectives/comm_debug.h"
#include "ops/elementwise/elementwise.h"
#include "ops/index/index.h"
#include "ops/reduction/reduction.h"
#include "ops/view/view.h"
#include "tensor/compare.h"
#include "tests/ops/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace tt = dtensor::test;
using dt::DTensor;
using dt::Partial;
using dt::Placements;
using dt::Replicate;
using dt::Shard;
using dt::Tensor;

TEST_CASE("index ops on DTensors equal the full-tensor op") {
  const int64_t w = dt::world_size();
  const int64_t n = 3 * w + 1;
  const Tensor x = tt::det_input({n, 5});
  const Tensor idx = dt::remainder(tt::det_input({n, 4}, 3, 0, 1, dt::kInt64),
                                   dt::Scalar(int64_t{5}));  // in [0, 5)
  const Tensor rows = dt::remainder(tt::det_input({2 * w + 1}, 1, 0, 1, dt::kInt64), dt::Scalar(n));
  const Tensor mask = dt::gt(tt::det_input({5}, 2), dt::Scalar(0.0));
  for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
    for (const Placements& p : tt::all_placements(tt::shard_choices(2), mesh.ndim())) {
      for (const Placements& q : tt::all_placements(tt::shard_choices(2, false), mesh.ndim())) {
        INFO(tt::describe(mesh, {p, q}, {n, 5}));
        const DTensor dx = dt::distribute_tensor(x, mesh, p, std::nullopt);
        const DTensor di = dt::distribute_tensor(idx, mesh, q, std::nullopt);
        CHECK(tt::same_values(dt::gather(dx, 1, di).full_tensor(), dt::gather(x, 1, idx)));
        const Tensor src = tt::det_input({n, 4}, 7);
        const DTensor ds = dt::distribute_tensor(src, mesh, q, std::nullopt);
        CHECK(tt::same_values(dt::scatter_add(dx, 1, di, ds).full_tensor(),
                              dt::scatter_add(x, 1, idx, src)));
        CHECK(tt::same_values(dt::take_along_dim(dx, dt::narrow(di, 1, 0, 1), 1).full_tensor(),
                              dt::take_along_dim(x, idx.narrow(1, 0, 1), 1)));
      }
      const DTensor dx = dt::distribute_tensor(x, mesh, p, std::nullopt);
      for (const Placements& q : tt::all_placements(tt::shard_choices(1, false), mesh.ndim())) {
        const DTensor dr = dt::distribute_tensor(rows, mesh, q, std::nullopt);
        INFO(tt::describe(mesh, {p, q}, {n, 5}));
        CHECK(tt::same_values(dt::index_select(dx, 0, dr).full_tensor(),
                              dt::index_select(x, 0, rows)));
        const Tensor source = tt::det_input({2 * w + 1, 5}, 8);
        for (const Placements& r : tt::all_placements(tt::shard_choices(2), mesh.ndim())) {
          const DTensor ds = dt::distribute_tensor(source, mesh, r, std::nullopt);
          CHECK(tt::same_values(dt::index_add(dx, 0, dr, ds, 2.0).full_tensor(),
                                dt::index_add(x, 0, rows, source, 2.0)));
        }
      }
      const DTensor dm =
          dt::distribute_tensor(mask, mesh, Placements(mesh.ndim(), Replicate()), std::nullopt);
      CHECK(tt::same_values(dt::masked_fill(dx, dm, 3.5).full_tensor(),
                            dt::masked_fill(x, mask, 3.5)));
      const DTensor di =
          dt::distribute_tensor(idx, mesh, Placements(mesh.ndim(), Replicate()), std::nullopt);
      CHECK(tt::same_values(dt::one_hot(di).full_tensor(), dt::one_hot(idx)));
    }
  }
}

TEST_CASE("gather from a table sharded along the gathered dim is Partial, no communication") {
  const int64_t w = dt::world_size();
  auto mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor table = tt::det_input({4, 3 * w + 1});
  const Tensor idx =
      dt::remainder(tt::det_input({4, 6}, 5, 0, 1, dt::kInt64), dt::Scalar(3 * w + 1));
  const DTensor dt_table = dt::distribute_tensor(table, mesh, {Shard(1)}, std::nullopt);
  const DTensor dt_idx = dt::distribute_tensor(idx, mesh, {Replicate()}, std::nullopt);
  DTensor picked;
  {
    dt::CommDebugMode debug;
    picked = dt::gather(dt_table, 1, dt_idx);
    CHECK(debug.total_count() == 0);
  }
  if (w > 1) CHECK(picked.placements() == Placements{Partial()});
  CHECK(tt::same_values(picked.full_tensor(), dt::gather(table, 1, idx)));

  // An index out of range held by the last rank only: every rank raises it.
  Tensor bad = dt::zeros({w, 2}, dt::TensorOptions(dt::kInt64));
  bad.narrow(0, w - 1, 1).fill_(3 * w + 1);
  const DTensor dt_bad = dt::distribute_tensor(bad, mesh, {Shard(0)}, std::nullopt);
  const DTensor rows =
      dt::distribute_tensor(tt::det_input({w, 3 * w + 1}), mesh, {Shard(0)}, std::nullopt);
  CHECK_THROWS_WITH(dt::gather(rows, 1, dt_bad),
                    Catch::Contains("[gather] index") && Catch::Contains("out of range for dim 1"));
  if (w > 1) {
    CHECK_THROWS_WITH(dt::gather(rows, 1, dt_bad),
                      Catch::Contains("(raised on rank " + std::to_string(w - 1) + ")"));
    CHECK_THROWS_WITH(dt::one_hot(dt_bad, 2),
                      Catch::Contains("[one_hot] class") && Catch::Contains("(raised on rank"));
  }
  // The mesh still works afterwards.
  CHECK(tt::same_values(dt::gather(dt_table, 1, dt_idx).full_tensor(), dt::gather(table, 1, idx)));
}

// A [4, 3w+1] table sharded along dim 1 and a replicated [4, 6] index (repeats included) and
// src, for the scatters into a table sharded along the scattered dim.
struct ScatterCase {
  int64_t w = dt::world_size();
  dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  int64_t n = 3 * w + 1;
  Tensor table = tt::det_input({4, n});
  Tensor idx = dt::remainder(tt::det_input({4, 6}, 5, 0, 1, dt::kInt64), dt::Scalar(n));
  Tensor src = tt::det_input({4, 6}, 6);
  DTensor d_table = dt::distribute_tensor(table, mesh, {Shard(1)}, std::nullopt);
  DTensor d_idx = dt::distribute_tensor(idx, mesh, {Replicate()}, std::nullopt);
  DTensor d_src = dt::distribute_tensor(src, mesh, {Replicate()}, std::nullopt);
};

TEST_CASE("scatter_add into a table sharded along the scattered dim needs no communication") {
  const ScatterCase c;
  const auto& [w, mesh, n, table, idx, src, d_table, d_idx, d_src] = c;
  DTensor out;
  {
    dt::CommDebugMode debug;
    out = dt::scatter_add(d_table, 1, d_idx, d_src);
    CHECK(debug.total_count() == 0);
  }
  CHECK(out.placements() == Placements{Shard(1)});
  CHECK(tt::same_values(out.full_tensor(), dt::scatter_add(table, 1, idx, src)));

  // An index out of range held by the last rank only: every rank raises it.
  Tensor bad = dt::zeros({w, 2}, dt::TensorOptions(dt::kInt64));
  bad.narrow(0, w - 1, 1).fill_(n);
  const DTensor d_bad = dt::distribute_tensor(bad, mesh, {Shard(0)}, std::nullopt);
  const DTensor rows = dt::distribute_tensor(tt::det_input({w, n}), mesh, {Shard(0)}, std::nullopt);
  const DTensor vals = dt::distribute_tensor(tt::det_input({w, 2}), mesh, {Shard(0)}, std::nullopt);
  CHECK_THROWS_WITH(dt::scatter_add(rows, 1, d_bad, vals),
                    Catch::Contains("[scatter_add] index") &&
                        Catch::Contains("out of range for dim 1"));
}

TEST_CASE("scatter into a table sharded along the scattered dim needs no communication") {
  // Repeated positions included: the last entry wins on every layout.
  const ScatterCase c;
  const auto& [w, mesh, n, table, idx, src, d_table, d_idx, d_src] = c;
  DTensor out, filled;
  {
    dt::CommDebugMode debug;
    out = dt::scatter(d_table, 1, d_idx, d_src);
    filled = dt::scatter(d_table, 1, d_idx, dt::Scalar(7.0));
    CHECK(debug.total_count() == 0);
  }
  CHECK(out.placements() == Placements{Shard(1)});
  CHECK(dt::equal(out.full_tensor(), dt::scatter(table, 1, idx, src)));
  CHECK(dt::equal(filled.full_tensor(), dt::scatter(table, 1, idx, dt::Scalar(7.0))));
  // Rows sharded alike (index rows = table rows): also local, also exact.
  const DTensor rows = dt::distribute_tensor(table, mesh, {Shard(0)}, std::nullopt);
  const DTensor rows_idx = dt::distribute_tensor(idx, mesh, {Shard(0)}, std::nullopt);
  const DTensor rows_src = dt::distribute_tensor(src, mesh, {Shard(0)}, std::nullopt);
  CHECK(dt::equal(dt::scatter(rows, 1, rows_idx, rows_src).full_tensor(),
                  dt::scatter(table, 1, idx, src)));
  // Gradients: self's is the upstream gradient with the written positions zeroed, src's the
  // gather of it (PyTorch's rule), on the sharded layout as on one device.
  DTensor a = dt::distribute_tensor(table, mesh, {Shard(1)}, std::nullopt);
  DTensor b = dt::distribute_tensor(src, mesh, {Replicate()}, std::nullopt);
  a.requires_grad_();
  b.requires_grad_();
  const Tensor up = tt::det_input({4, n}, 9);
  dt::sum(dt::scatter(a, 1, d_idx, b) * dt::distribute_tensor(up, mesh, {Shard(1)}, std::nullopt))
      .backward();
  CHECK(dt::equal(a.grad().full_tensor(), dt::scatter(up, 1, idx, dt::Scalar(0.0))));
  CHECK(tt::same_values(b.grad().full_tensor(), dt::gather(up, 1, idx)));

  // An index out of range held by the last rank only: every rank raises it.
  Tensor bad = dt::zeros({w, 2}, dt::TensorOptions(dt::kInt64));
  bad.narrow(0, w - 1, 1).fill_(n);
  const DTensor d_bad = dt::distribute_tensor(bad, mesh, {Shard(0)}, std::nullopt);
  const DTensor lines = dt::distribute_tensor(tt::det_input({w, n}), mesh, {Shard(0)}, std::nullopt);
  CHECK_THROWS_WITH(dt::scatter(lines, 1, d_bad, dt::Scalar(1.0)),
                    Catch::Contains("[scatter] index") &&
                        Catch::Contains("out of range for dim 1"));
}
