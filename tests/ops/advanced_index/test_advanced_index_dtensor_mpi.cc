// Advanced indexing on DTensors (mpirun at 1, 2, 4 ranks): index and index_put (both modes)
// equal the full-tensor op for every placement list of self, the index tensors and values on
// 1-D and 2-D meshes (even, uneven and empty shards); self sharded along an indexed dim gives a
// Partial index result / a sharded index_put result without communication; an index out of range
// held by one rank is raised on every rank; the gradients of sharded calls equal central finite
// differences of the full-tensor computation (float64).
#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/ops/advanced_index/advanced_index.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/tensor/compare.h"
#include "dtensor/tensor/creation.h"
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

// An int64 index of `shape` with values in [lo, lo + span) (negatives included when lo < 0).
Tensor index_tensor(dt::IntSpan shape, int salt, int64_t lo, int64_t span) {
  const Tensor raw = tt::det_input(shape, salt, 0, 1, dt::kInt64);  // 0..10
  return dt::remainder(raw, dt::Scalar(span)) + dt::Scalar(lo);
}

// One indexing pattern: self's shape, the index tensors (nullopt: a slice), values' shape.
struct Pattern {
  std::string name;
  dt::Shape self;
  std::vector<std::optional<Tensor>> indices;
  dt::Shape values;
};

std::vector<Pattern> patterns(int64_t w) {
  const int64_t n = 3 * w + 1;
  return {
      // x[:, i] with 2 entries: the index's shards are empty from 3 ranks on; dim 2 of size 2.
      {"x[:, i]", {n, 5, 2}, {std::nullopt, index_tensor({2}, 1, -5, 10)}, {n, 2, 2}},
      // x[i, :, j]: separated, the broadcast dim first.
      {"x[i, :, j]",
       {n, 4, 3},
       {index_tensor({2 * w + 1}, 2, -n, 2 * n), std::nullopt, index_tensor({1}, 3, 0, 3)},
       {2 * w + 1, 1}},
      // x[:, i, j]: adjacent, broadcast [n, 1] x [2].
      {"x[:, i, j]",
       {3, n, 5},
       {std::nullopt, index_tensor({n, 1}, 4, 0, n), index_tensor({2}, 5, -5, 10)},
       {n, 2}},
  };
}

std::vector<std::optional<DTensor>> distribute_indices(
    const std::vector<std::optional<Tensor>>& indices, const dt::DeviceMesh& mesh,
    const Placements& p) {
  std::vector<std::optional<DTensor>> out;
  for (const auto& t : indices) {
    if (!t) {
      out.emplace_back(std::nullopt);
      continue;
    }
    Placements fit = p;  // S(d) beyond the index's rank -> Replicate
    for (auto& q : fit) {
      if (q.is_shard() && q.dim() >= t->dim()) q = Replicate();
    }
    out.emplace_back(dt::distribute_tensor(*t, mesh, fit, std::nullopt));
  }
  return out;
}

}  // namespace

TEST_CASE("index and index_put on DTensors equal the full-tensor op") {
  const int64_t w = dt::world_size();
  for (const Pattern& c : patterns(w)) {
    const Tensor x = tt::det_input(c.self, 1);
    const Tensor v = tt::det_input(c.values, 2);
    const Tensor want = dt::index(x, c.indices);
    const Tensor want_put = dt::index_put(x, c.indices, v);
    const Tensor want_acc = dt::index_put(x, c.indices, v, true);
    for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
      for (const Placements& p : tt::placement_lists(mesh.ndim(), tt::shard_choices(3), 3)) {
        const DTensor dx = dt::distribute_tensor(x, mesh, p, std::nullopt);
        for (const Placements& q : tt::all_placements(tt::shard_choices(2, false), mesh.ndim())) {
          INFO(c.name << " " << tt::describe(mesh, {p, q}, c.self));
          const auto di = distribute_indices(c.indices, mesh, q);
          CHECK(tt::same_values(dt::index(dx, di).full_tensor(), want));
          // values laid out like the indices (its dims beyond them replicated) or like self.
          for (const Placements& r : {q, Placements(mesh.ndim(), Replicate())}) {
            Placements fit = r;
            for (auto& s : fit) {
              if (s.is_shard() && s.dim() >= static_cast<int64_t>(c.values.size())) s = Replicate();
            }
            const DTensor dv = dt::distribute_tensor(v, mesh, fit, std::nullopt);
            CHECK(tt::same_values(dt::index_put(dx, di, dv).full_tensor(), want_put));
            CHECK(tt::same_values(dt::index_put(dx, di, dv, true).full_tensor(), want_acc));
          }
        }
      }
    }
  }
}

TEST_CASE("index and index_put on int64 and bool DTensors equal the full-tensor op") {
  // The rows left out for these dtypes: Partial(avg) for integers (index_put accumulate offers
  // only sum), and every Partial row for bool (index's [P | S(d_j)] and accumulate's
  // [P | P, P..]: OR is no sum). Inputs in those placements are redistributed first; the
  // results stay exact. A few placements per mesh, Partial(sum) and Partial(avg) for int64.
  const int64_t w = dt::world_size();
  const dt::Placement avg = Partial(dt::ReduceOp::kAvg);
  for (dt::DType dtype : {dt::kInt64, dt::kBool}) {
    const bool ints = dtype == dt::kInt64;
    for (const Pattern& c : patterns(w)) {
      const Tensor x = tt::det_input(c.self, 1, ints ? -5.0 : -1.0, ints ? 1.0 : 0.5, dtype);
      const Tensor v = tt::det_input(c.values, 2, ints ? -5.0 : -1.0, ints ? 1.0 : 0.5, dtype);
      const Tensor want = dt::index(x, c.indices);
      const Tensor want_put = dt::index_put(x, c.indices, v);
      const Tensor want_acc = dt::index_put(x, c.indices, v, true);
      const std::vector<dt::DeviceMesh> meshes = tt::family_meshes();
      for (size_t mi = 0; mi < meshes.size(); ++mi) {
        const dt::DeviceMesh& mesh = meshes[mi];
        std::vector<Placements> selfs, idxs, vals;
        if (mi == 0) {  // 1-D: every choice
          selfs = {{Replicate()}, {Shard(0)}, {Shard(1)}, {Shard(2)}};
          idxs = {{Replicate()}, {Shard(0)}};
          vals = {{Replicate()}, {Shard(0)}};
          if (ints) {
            selfs.push_back(Placements{Partial()});
            selfs.push_back(Placements{avg});
            vals.push_back(Placements{Partial()});
            vals.push_back(Placements{avg});
          }
        } else {  // 2-D: a few nested lists
          selfs = {{Shard(0), Shard(1)}, {Shard(1), Shard(2)}, {Replicate(), Shard(0)}};
          idxs = {{Shard(0), Replicate()}, {Replicate(), Shard(0)}};
          vals = {{Replicate(), Replicate()}, {Shard(0), Replicate()}};
          if (ints) {
            selfs.push_back(Placements{Partial(), Shard(1)});
            selfs.push_back(Placements{Shard(2), avg});
            vals.push_back(Placements{Partial(), Replicate()});
            vals.push_back(Placements{Replicate(), avg});
          }
        }
        for (const Placements& p : selfs) {
          const DTensor dx = dt::distribute_tensor(x, mesh, p, std::nullopt);
          for (const Placements& q : idxs) {
            const auto di = distribute_indices(c.indices, mesh, q);
            INFO(dt::dtype_name(dtype)
                 << " " << c.name << " " << tt::describe(mesh, {p, q}, c.self));
            CHECK(tt::same_values(dt::index(dx, di).full_tensor(), want));
            for (const Placements& r : vals) {
              Placements fit = r;
              for (auto& s : fit) {
                if (s.is_shard() && s.dim() >= static_cast<int64_t>(c.values.size())) {
                  s = Replicate();
                }
              }
              INFO("values " << tt::describe(mesh, {fit}, c.values));
              const DTensor dv = dt::distribute_tensor(v, mesh, fit, std::nullopt);
              CHECK(tt::same_values(dt::index_put(dx, di, dv).full_tensor(), want_put));
              CHECK(tt::same_values(dt::index_put(dx, di, dv, true).full_tensor(), want_acc));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("indexing a tensor sharded along an indexed dim needs no communication") {
  const int64_t w = dt::world_size();
  const int64_t n = 3 * w + 1;
  auto mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = tt::det_input({4, n});
  const std::vector<std::optional<Tensor>> idx = {std::nullopt, index_tensor({6}, 3, -n, 2 * n)};
  const Tensor v = tt::det_input({4, 6}, 5);
  const DTensor dx = dt::distribute_tensor(x, mesh, {Shard(1)}, std::nullopt);
  const auto di = distribute_indices(idx, mesh, {Replicate()});
  const DTensor dv = dt::distribute_tensor(v, mesh, {Replicate()}, std::nullopt);
  DTensor picked, put, added;
  {
    dt::CommDebugMode debug;
    picked = dt::index(dx, di);
    put = dt::index_put(dx, di, dv);
    added = dt::index_put(dx, di, dv, true);
    CHECK(debug.total_count() == 0);
  }
  if (w > 1) CHECK(picked.placements() == Placements{Partial()});
  CHECK(put.placements() == Placements{Shard(1)});
  CHECK(added.placements() == Placements{Shard(1)});
  CHECK(tt::same_values(picked.full_tensor(), dt::index(x, idx)));
  CHECK(tt::same_values(put.full_tensor(), dt::index_put(x, idx, v)));
  CHECK(tt::same_values(added.full_tensor(), dt::index_put(x, idx, v, true)));

  // In place: self keeps its placements.
  // (a clone: at 1 rank the local shard may share x's storage)
  DTensor y = dt::distribute_tensor(x.clone(), mesh, {Shard(1)}, std::nullopt);
  const DTensor& same = dt::index_put_(y, di, dv, true);
  CHECK(&same == &y);
  CHECK(y.placements() == Placements{Shard(1)});
  CHECK(tt::same_values(y.full_tensor(), dt::index_put(x, idx, v, true)));

  // An index out of range held by the last rank only: every rank raises it.
  Tensor bad = dt::zeros({w}, dt::TensorOptions(dt::kInt64));
  bad.narrow(0, w - 1, 1).fill_(n);
  const DTensor d_bad = dt::distribute_tensor(bad, mesh, {Shard(0)}, std::nullopt);
  const std::vector<std::optional<DTensor>> bad_idx = {std::nullopt, d_bad};
  CHECK_THROWS_WITH(dt::index(dx, bad_idx),
                    Catch::Contains("[index] index " + std::to_string(n) +
                                    " out of range for dim 1 of size " + std::to_string(n)));
  CHECK_THROWS_WITH(
      dt::index_put(dx, bad_idx,
                    dt::distribute_tensor(dt::zeros({1}), mesh, {Replicate()}, std::nullopt)),
      Catch::Contains("[index_put] index"));
  if (w > 1) {
    CHECK_THROWS_WITH(dt::index(dx, bad_idx),
                      Catch::Contains("(raised on rank " + std::to_string(w - 1) + ")"));
  }
  // The mesh still works afterwards.
  CHECK(tt::same_values(dt::index(dx, di).full_tensor(), dt::index(x, idx)));
}

TEST_CASE("index and index_put gradients: sharded equals finite differences on full tensors") {
  const int64_t w = dt::world_size();
  for (const Pattern& c : patterns(w)) {
    const Tensor x = tt::det_input(c.self, 1, -2.5, 0.5, dt::kFloat64);
    const Tensor v = tt::det_input(c.values, 2, -2.5, 0.5, dt::kFloat64);
    const Tensor wx = tt::det_input(dt::index(x, c.indices).sizes(), 3, -2.5, 0.5, dt::kFloat64);
    const Tensor wp = tt::det_input(c.self, 4, -2.5, 0.5, dt::kFloat64);
    // Central differences of a linear function of one element of `t`.
    auto numeric = [](Tensor t, const auto& f) {
      std::vector<double> g(static_cast<size_t>(t.numel()));
      Tensor flat = t.view({t.numel()});
      for (int64_t e = 0; e < t.numel(); ++e) {
        const double orig = flat.at<double>({e});
        flat.narrow(0, e, 1).fill_(orig + 1e-3);
        const double up = f();
        flat.narrow(0, e, 1).fill_(orig - 1e-3);
        const double down = f();
        flat.narrow(0, e, 1).fill_(orig);
        g[e] = (up - down) / 2e-3;
      }
      return dt::from_vector<double>(g, t.sizes());
    };
    auto total = [](const Tensor& t) { return dt::sum(t).item<double>(); };
    Tensor xs = x.clone(), vs = v.clone();
    const Tensor gx = numeric(xs, [&] { return total(dt::index(xs, c.indices) * wx); });
    for (bool accumulate : {false, true}) {
      // With repeated positions and no accumulate the function is not the gradient formula's
      // (PyTorch's rule gives every entry the gradient): compare only where it applies.
      const Tensor gpx =
          numeric(xs, [&] { return total(dt::index_put(xs, c.indices, vs, accumulate) * wp); });
      const Tensor gpv =
          numeric(vs, [&] { return total(dt::index_put(xs, c.indices, vs, accumulate) * wp); });
      for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
        for (const Placements& p :
             tt::placement_lists(mesh.ndim(), tt::shard_choices(3, false), 3)) {
          INFO(c.name << " accumulate " << accumulate << " " << tt::describe(mesh, {p}, c.self));
          const auto di = distribute_indices(c.indices, mesh, tt::reversed(p));
          if (!accumulate) {
            DTensor dx = dt::distribute_tensor(x, mesh, p, std::nullopt);
            dx.requires_grad_();
            const DTensor dwx =
                dt::distribute_tensor(wx, mesh, Placements(mesh.ndim(), Replicate()), std::nullopt);
            dt::sum(dt::index(dx, di) * dwx).backward();
            CHECK(tt::same_values(dx.grad().full_tensor(), gx, 1e-6));
          }
          DTensor dx = dt::distribute_tensor(x, mesh, p, std::nullopt);
          DTensor dv =
              dt::distribute_tensor(v, mesh, Placements(mesh.ndim(), Replicate()), std::nullopt);
          dx.requires_grad_();
          dv.requires_grad_();
          const DTensor dwp = dt::distribute_tensor(wp, mesh, p, std::nullopt);
          dt::sum(dt::index_put(dx, di, dv, accumulate) * dwp).backward();
          CHECK(tt::same_values(dx.grad().full_tensor(), gpx, 1e-6));
          if (accumulate || c.name == "x[:, i]") {  // the others' indices may repeat a position
            CHECK(tt::same_values(dv.grad().full_tensor(), gpv, 1e-6));
          }
        }
      }
    }
  }
}
