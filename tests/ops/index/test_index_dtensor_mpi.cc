// Indexing on DTensors (mpirun at 1, 2, 4 ranks): gather / scatter_add / scatter_reduce /
// index_add / index_select / take_along_dim / one_hot / masked_fill equal the full-tensor op for
// every placement list of their inputs on 1-D and 2-D meshes; a table sharded along the gathered
// dim gives a Partial result without communication, a scatter (or scatter_reduce) into one stays
// sharded without communication; an index out of range on one rank is raised on every rank;
// scatter_reduce's gradients in the cases with zeros and ties equal the values worked out by hand.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/index/index.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/compare.h"
#include "tests/common/ops_dtensor_test_util.h"

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
  CHECK_THROWS_WITH(
      dt::scatter_add(rows, 1, d_bad, vals),
      Catch::Contains("[scatter_add] index") && Catch::Contains("out of range for dim 1"));
  // src of another shape than the index: the meta names the op (shared with scatter).
  const DTensor wide = dt::distribute_tensor(tt::det_input({w, 3}), mesh, {Shard(0)}, std::nullopt);
  CHECK_THROWS_WITH(dt::scatter_add(rows, 1, d_bad, wide),
                    Catch::Contains("[scatter_add] src (shape [") &&
                        Catch::Contains("must have the index's shape"));
  CHECK_THROWS_WITH(
      dt::scatter(rows, 1, d_bad, wide),
      Catch::Contains("[scatter] src (shape [") && Catch::Contains("must have the index's shape"));
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
  const DTensor lines =
      dt::distribute_tensor(tt::det_input({w, n}), mesh, {Shard(0)}, std::nullopt);
  CHECK_THROWS_WITH(
      dt::scatter(lines, 1, d_bad, dt::Scalar(1.0)),
      Catch::Contains("[scatter] index") && Catch::Contains("out of range for dim 1"));
}

namespace {
const char* const kReductions[] = {"sum", "prod", "mean", "amax", "amin"};
}  // namespace

TEST_CASE("scatter_reduce on DTensors equals the full-tensor op for every reduction") {
  const int64_t w = dt::world_size();
  const int64_t n = 3 * w + 1;
  const Tensor x = tt::det_input({n, 5});
  // Along dim 1: 4 entries per row into 5 columns (repeats, untouched columns).
  const Tensor idx =
      dt::remainder(tt::det_input({n, 4}, 3, 0, 1, dt::kInt64), dt::Scalar(int64_t{5}));
  const Tensor src = tt::det_input({n, 4}, 7);
  // Along dim 0: 2w + 1 rows of entries into n rows.
  const Tensor rows =
      dt::remainder(tt::det_input({2 * w + 1, 5}, 1, 0, 1, dt::kInt64), dt::Scalar(n));
  const Tensor row_src = tt::det_input({2 * w + 1, 5}, 8);
  int64_t k = 0;
  for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
    for (const Placements& p : tt::all_placements(tt::shard_choices(2), mesh.ndim())) {
      const DTensor dx = dt::distribute_tensor(x, mesh, p, std::nullopt);
      for (const Placements& q : tt::all_placements(tt::shard_choices(2, false), mesh.ndim())) {
        const bool include_self = k++ % 2 == 0;
        INFO(tt::describe(mesh, {p, q}, {n, 5}) << " include_self " << include_self);
        const DTensor di = dt::distribute_tensor(idx, mesh, q, std::nullopt);
        const DTensor ds = dt::distribute_tensor(src, mesh, q, std::nullopt);
        const DTensor dr = dt::distribute_tensor(rows, mesh, q, std::nullopt);
        const DTensor drs = dt::distribute_tensor(row_src, mesh, q, std::nullopt);
        for (const char* reduce : kReductions) {
          INFO(reduce);
          CHECK(
              tt::same_values(dt::scatter_reduce(dx, 1, di, ds, reduce, include_self).full_tensor(),
                              dt::scatter_reduce(x, 1, idx, src, reduce, include_self)));
          CHECK(tt::same_values(
              dt::scatter_reduce(dx, 0, dr, drs, reduce, !include_self).full_tensor(),
              dt::scatter_reduce(x, 0, rows, row_src, reduce, !include_self)));
        }
      }
    }
  }
  // Integers (mean rounds down), sharded every way but Partial.
  const Tensor xi = tt::det_input({n, 5}, 2, -6, 1, dt::kInt64);
  const Tensor si = tt::det_input({n, 4}, 5, -6, 1, dt::kInt64);
  for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
    for (const Placements& p : tt::all_placements(tt::shard_choices(2, false), mesh.ndim())) {
      INFO(tt::describe(mesh, {p}, {n, 5}));
      const DTensor dx = dt::distribute_tensor(xi, mesh, p, std::nullopt);
      const DTensor di = dt::distribute_tensor(idx, mesh, p, std::nullopt);
      const DTensor ds = dt::distribute_tensor(si, mesh, p, std::nullopt);
      for (const char* reduce : kReductions) {
        for (bool include_self : {true, false}) {
          INFO(reduce << " include_self " << include_self);
          CHECK(dt::equal(dt::scatter_reduce(dx, 1, di, ds, reduce, include_self).full_tensor(),
                          dt::scatter_reduce(xi, 1, idx, si, reduce, include_self)));
        }
      }
    }
  }
}

TEST_CASE("scatter_reduce into a table sharded along the scattered dim needs no communication") {
  const ScatterCase c;
  const auto& [w, mesh, n, table, idx, src, d_table, d_idx, d_src] = c;
  for (const char* reduce : kReductions) {
    for (bool include_self : {true, false}) {
      INFO(reduce << " include_self " << include_self);
      DTensor out;
      {
        dt::CommDebugMode debug;
        out = dt::scatter_reduce(d_table, 1, d_idx, d_src, reduce, include_self);
        CHECK(debug.total_count() == 0);
      }
      CHECK(out.placements() == Placements{Shard(1)});
      CHECK(dt::equal(out.full_tensor(),
                      dt::scatter_reduce(table, 1, idx, src, reduce, include_self)));
    }
  }
  // An empty index: a copy of self.
  const DTensor none = dt::distribute_tensor(dt::zeros({4, 0}, dt::TensorOptions(dt::kInt64)), mesh,
                                             {Replicate()}, std::nullopt);
  const DTensor no_src =
      dt::distribute_tensor(dt::zeros({4, 0}), mesh, {Replicate()}, std::nullopt);
  CHECK(dt::equal(dt::scatter_reduce(d_table, 1, none, no_src, "prod").full_tensor(), table));

  // amax / amin of Partial(max) / Partial(min) self and src (rank 0 holds the extreme, the others
  // less extreme values) with a replicated index stay Partial, without communication.
  const double r = static_cast<double>(dt::world_rank());
  const Tensor x = tt::det_input({4, n}, 3);
  for (const auto& [reduce, op] :
       {std::pair{"amax", dt::ReduceOp::kMax}, std::pair{"amin", dt::ReduceOp::kMin}}) {
    const dt::Scalar shift(op == dt::ReduceOp::kMax ? -r : r);
    const DTensor dx = DTensor::from_local(x + shift, mesh, {Partial(op)});
    const DTensor ds = DTensor::from_local(src + shift, mesh, {Partial(op)});
    for (bool include_self : {true, false}) {
      INFO(reduce << " include_self " << include_self);
      DTensor out;
      {
        dt::CommDebugMode debug;
        out = dt::scatter_reduce(dx, 1, d_idx, ds, reduce, include_self);
        CHECK(debug.total_count() == 0);
      }
      if (w > 1) CHECK(out.placements() == Placements{Partial(op)});
      CHECK(dt::equal(out.full_tensor(), dt::scatter_reduce(x, 1, idx, src, reduce, include_self)));
    }
  }

  // An index out of range held by the last rank only: every rank raises it.
  Tensor bad = dt::zeros({w, 2}, dt::TensorOptions(dt::kInt64));
  bad.narrow(0, w - 1, 1).fill_(n);
  const DTensor d_bad = dt::distribute_tensor(bad, mesh, {Shard(0)}, std::nullopt);
  const DTensor lines =
      dt::distribute_tensor(tt::det_input({w, n}), mesh, {Shard(0)}, std::nullopt);
  const DTensor vals = dt::distribute_tensor(tt::det_input({w, 2}), mesh, {Shard(0)}, std::nullopt);
  CHECK_THROWS_WITH(
      dt::scatter_reduce(lines, 1, d_bad, vals, "amax"),
      Catch::Contains("[scatter_reduce] index") && Catch::Contains("out of range for dim 1"));
  CHECK_THROWS_WITH(dt::scatter_reduce(lines, 1, d_bad, vals, "max"),
                    Catch::Contains("[scatter_reduce] reduce must be one of sum, prod, mean, "
                                    "amax, amin, got 'max'"));
}

TEST_CASE(
    "scatter_reduce gradients: prod with zeros, amax and amin ties, sharded as on one "
    "device") {
  const int64_t w = dt::world_size();
  auto mesh = dt::init_device_mesh(dt::kCPU, {w});
  const auto f64 = [](std::vector<double> v, dt::IntSpan shape) {
    return dt::from_vector<double>(v, shape);
  };
  const Tensor idx = dt::from_vector<double>({0, 0, 1, 2, 2, 2}, {2, 3}).to(dt::kInt64);
  // Rows sharded (empty shards from 3 ranks on), the index and src alike.
  auto grads = [&](const Tensor& self, const Tensor& src, const char* reduce, bool include_self) {
    DTensor a = dt::distribute_tensor(self, mesh, {Shard(0)}, std::nullopt);
    DTensor b = dt::distribute_tensor(src, mesh, {Shard(0)}, std::nullopt);
    a.requires_grad_();
    b.requires_grad_();
    const DTensor di = dt::distribute_tensor(idx, mesh, {Shard(0)}, std::nullopt);
    dt::sum(dt::scatter_reduce(a, 1, di, b, reduce, include_self)).backward();
    return std::pair{a.grad().full_tensor(), b.grad().full_tensor()};
  };
  // prod. Row 0: position 0 holds self 0 and src 5, 0 (two zeros), position 1 self 2 and src 7.
  // Row 1: position 2 holds self 6 and src 6, 0, 1 (a single zero in src).
  const Tensor self = f64({0, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor src = f64({5, 0, 7, 6, 0, 1}, {2, 3});
  auto [gs, gv] = grads(self, src, "prod", true);
  CHECK(tt::same_values(gs, f64({0, 7, 1, 1, 1, 0}, {2, 3})));
  CHECK(tt::same_values(gv, f64({0, 0, 2, 0, 36, 0}, {2, 3})));
  std::tie(gs, gv) = grads(self, src, "prod", false);
  CHECK(tt::same_values(gs, f64({0, 0, 1, 1, 1, 0}, {2, 3})));
  CHECK(tt::same_values(gv, f64({0, 5, 1, 0, 6, 0}, {2, 3})));
  // amax with ties: the gradient is split evenly among the values equal to the result (as
  // PyTorch). An excluded self (include_self false) that equals the result takes no share: our
  // rule, kept on purpose (docs/SEMANTICS.md). PyTorch 2.15 counts it, then drops its share:
  // src gets {1/3, 1/3, 1, 1/3, 0, 1/3} here (tests/ops/torch_grad_conventions.py), shares of a
  // position summing to 2/3 of its gradient and set by a self the output does not depend on.
  const Tensor tied = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor tied_src = f64({1, 1, 0, 6, 2, 6}, {2, 3});
  const double t = 1.0 / 3;
  std::tie(gs, gv) = grads(tied, tied_src, "amax", true);
  CHECK(tt::same_values(gs, f64({t, 1, 1, 1, 1, t}, {2, 3})));
  CHECK(tt::same_values(gv, f64({t, t, 0, t, 0, t}, {2, 3})));
  std::tie(gs, gv) = grads(tied, tied_src, "amax", false);
  CHECK(tt::same_values(gs, f64({0, 0, 1, 1, 1, 0}, {2, 3})));
  CHECK(tt::same_values(gv, f64({0.5, 0.5, 1, 0.5, 0, 0.5}, {2, 3})));
  // amin, mirrored: negate everything.
  std::tie(gs, gv) = grads(-tied, -tied_src, "amin", true);
  CHECK(tt::same_values(gs, f64({t, 1, 1, 1, 1, t}, {2, 3})));
  CHECK(tt::same_values(gv, f64({t, t, 0, t, 0, t}, {2, 3})));
  std::tie(gs, gv) = grads(-tied, -tied_src, "amin", false);
  CHECK(tt::same_values(gs, f64({0, 0, 1, 1, 1, 0}, {2, 3})));
  CHECK(tt::same_values(gv, f64({0.5, 0.5, 1, 0.5, 0, 0.5}, {2, 3})));
  // A NaN result (row 0, position 0: self 1, src 3 and NaN) equals no value reduced there: each
  // of them gets NaN, as PyTorch 2.15's (measured; amax's own rule), not a gradient sent
  // nowhere (they got 0). The other positions keep their shares.
  const double nan = std::nan("");
  for (const double sign : {1.0, -1.0}) {
    const char* reduce = sign > 0 ? "amax" : "amin";
    INFO(reduce);
    const Tensor nan_src = f64({3, nan, 0, 6, 2, 6}, {2, 3});
    std::tie(gs, gv) = grads(tied * sign, nan_src * sign, reduce, true);
    CHECK(tt::same_values(gs, f64({nan, 1, 1, 1, 1, t}, {2, 3})));
    CHECK(tt::same_values(gv, f64({nan, nan, 0, t, 0, t}, {2, 3})));
    std::tie(gs, gv) = grads(tied * sign, nan_src * sign, reduce, false);
    CHECK(tt::same_values(gs, f64({0, 0, 1, 1, 1, 0}, {2, 3})));
    CHECK(tt::same_values(gv, f64({nan, nan, 1, 0.5, 0, 0.5}, {2, 3})));
  }
  // mean: each value gets the gradient over its position's count.
  std::tie(gs, gv) = grads(tied, tied_src, "mean", true);
  CHECK(tt::same_values(gs, f64({t, 0.5, 1, 1, 1, 0.25}, {2, 3})));
  CHECK(tt::same_values(gv, f64({t, t, 0.5, 0.25, 0.25, 0.25}, {2, 3})));
}
