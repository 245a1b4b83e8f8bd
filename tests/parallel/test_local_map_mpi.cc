// local_map (dtensor/parallel/local_map.h) under mpirun at 1, 2 and 4 ranks: column- and
// row-parallel linears written on local shards against the DTensor linear and the single-device
// one (forward and gradients, uneven and empty shards), redistribute_inputs, in_grad_placements,
// pass-through inputs, the error cases (raised on every rank), outputs' global shapes inferred
// from every rank's local size (its all-gather counted; layouts that fit no torch.chunk split
// raise) and dtensor::compile.
#include <absl/strings/str_format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <optional>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/compile/compile.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/parallel/local_map.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/creation.h"
#include "tests/parallel/parallel_test_util.h"

namespace dt = dtensor;
using Catch::Contains;
using dt::test::max_diff;

namespace {

constexpr double kTol = 1e-12;

dt::DeviceMesh tp_mesh() {
  return dt::init_device_mesh(dt::kCPU, {dt::world_size()}, {"tp"});
}

// The same float64 values on every rank.
dt::Tensor same_randn(dt::IntSpan shape, uint64_t seed) {
  dt::Generator g(seed);
  return dt::randn(shape, dt::kFloat64, &g);
}

// A leaf on `mesh` with `p` that requires grad.
dt::DTensor leaf(const dt::Tensor& t, const dt::DeviceMesh& mesh, dt::PlacementSpan p) {
  dt::DTensor x = dt::distribute_tensor(t, mesh, p);
  x.requires_grad_();
  return x;
}

// The single-device leaf of `t`.
dt::DTensor local_leaf(const dt::Tensor& t) {
  dt::DTensor x = dt::local_dtensor(t.clone());
  x.requires_grad_();
  return x;
}

// A linear's input x [B, in], weight w [out, in] and loss weights g [B, out] (seeds seed..seed+2).
struct LinearCase {
  dt::Tensor x, w, g;
};
LinearCase linear_case(int64_t B, int64_t in_features, int64_t out_features, uint64_t seed) {
  return {same_randn({B, in_features}, seed), same_randn({out_features, in_features}, seed + 1),
          same_randn({B, out_features}, seed + 2)};
}

// A local linear: y = x w^T on the local pieces.
dt::DTensorList local_linear(absl::Span<const dt::DTensor> in) {
  return dt::DTensorList{dt::linear(in[0], in[1])};
}

// sum(y * g): a loss whose gradient at y is g.
dt::DTensor weighted_sum(const dt::DTensor& y, const dt::DTensor& g) {
  return dt::sum(dt::mul(y, g));
}

// The collectives `comm` attributes to local_map's exchange of output sizes.
int64_t local_map_count(const dt::CommDebugMode& comm) {
  int64_t count = 0;
  for (const auto& r : comm.records()) {
    if (r.op == "local_map") count += r.count;
  }
  return count;
}

}  // namespace

TEST_CASE("local_map column-parallel linear equals the DTensor and the single-device linear",
          "[local_map]") {
  const dt::DeviceMesh mesh = tp_mesh();
  const int64_t n = mesh.size(0);
  // out = 2n + 1 rows: uneven at 2 ranks (3, 2), an empty shard at 4 (3, 3, 3, 0).
  const int64_t out_features = GENERATE_COPY(2 * n, 2 * n + 1);
  // Without out_shapes the global shape is inferred from every rank's local size (one
  // all-gather); with it nothing is exchanged.
  const bool give_shape = GENERATE(true, false);
  const int64_t B = 3, in_features = 5;
  CAPTURE(out_features, give_shape);
  const auto [x, w, g] = linear_case(B, in_features, out_features, 1);

  // x's local gradient is this rank's term of the sum over w's rows: a partial sum.
  std::vector<std::optional<dt::Shape>> shapes;
  if (give_shape) shapes.push_back(dt::Shape{B, out_features});
  auto colwise = dt::local_map(
      local_linear, {{dt::Shard(-1)}},
      {dt::Placements{dt::Replicate()}, dt::Placements{dt::Shard(0)}}, mesh,
      {.in_grad_placements = {dt::Placements{dt::Partial()}, std::nullopt}, .out_shapes = shapes});
  dt::DTensor xd = leaf(x, mesh, {dt::Replicate()});
  dt::DTensor wd = leaf(w, mesh, {dt::Shard(0)});
  // A non-leaf view of x keeps the gradient as it arrives (a leaf's .grad takes its placements).
  const dt::DTensor xm = dt::mul(xd, 1.0);
  xm.retain_grad();
  dt::DTensorList y;
  {
    dt::CommDebugMode comm;
    y = colwise({xm, wd});
    // Forward: no communication but the exchange of sizes (none on one rank).
    const int64_t exchange = give_shape || n == 1 ? 0 : 1;
    CHECK(comm.total_count() == exchange);
    CHECK(comm.count(dt::CollectiveKind::kAllGather) == exchange);
    CHECK(local_map_count(comm) == exchange);
  }
  REQUIRE(y.size() == 1);
  CHECK(y[0].placements() == dt::Placements{dt::Shard(1)});
  CHECK(y[0].shape() == dt::Shape{B, out_features});
  weighted_sum(y[0], dt::distribute_tensor(g, mesh, {dt::Shard(1)})).backward();

  // The DTensor linear.
  dt::DTensor xe = leaf(x, mesh, {dt::Replicate()});
  dt::DTensor we = leaf(w, mesh, {dt::Shard(0)});
  const dt::DTensor ye = dt::linear(xe, we);
  weighted_sum(ye, dt::distribute_tensor(g, mesh, ye.placements())).backward();

  // The single-device linear.
  dt::DTensor xs = local_leaf(x), ws = local_leaf(w);
  const dt::DTensor ys = dt::linear(xs, ws);
  weighted_sum(ys, dt::local_dtensor(g)).backward();

  CHECK(max_diff(y[0].full_tensor(), ys.to_local()) <= kTol);
  CHECK(max_diff(y[0].full_tensor(), ye.full_tensor()) <= kTol);
  // in_grad_placements honoured: x's gradient arrives Partial (a Replicate source keeps it);
  // the leaf's .grad is then reduced to x's placements.
  CHECK(xm.grad().placements() == dt::Placements{dt::Partial()});
  CHECK(xd.grad().placements() == dt::Placements{dt::Replicate()});
  CHECK(wd.grad().placements() == dt::Placements{dt::Shard(0)});
  CHECK(max_diff(xd.grad().full_tensor(), xs.grad().to_local()) <= kTol);
  CHECK(max_diff(wd.grad().full_tensor(), ws.grad().to_local()) <= kTol);
  CHECK(max_diff(xd.grad().full_tensor(), xe.grad().full_tensor()) <= kTol);
  CHECK(max_diff(wd.grad().full_tensor(), we.grad().full_tensor()) <= kTol);
}

TEST_CASE("local_map on a 2-d dp x tp mesh: a batch-sharded column-parallel linear",
          "[local_map]") {
  if (dt::world_size() != 4) return;
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {2, 2}, {"dp", "tp"});
  // Uneven on both mesh dims: 5 rows over dp (3, 2), 5 output features over tp (3, 2).
  const int64_t B = 5, in_features = 4, out_features = 5;
  const bool give_shape = GENERATE(true, false);
  CAPTURE(give_shape);
  const auto [x, w, g] = linear_case(B, in_features, out_features, 17);
  std::vector<std::optional<dt::Shape>> shapes;
  if (give_shape) shapes.push_back(dt::Shape{B, out_features});
  // x's local gradient sums over this rank's w rows (Partial on tp); w's over this rank's
  // batch rows (Partial on dp).
  auto colwise = dt::local_map(local_linear, {{dt::Shard(0), dt::Shard(1)}},
                               {dt::Placements{dt::Shard(0), dt::Replicate()},
                                dt::Placements{dt::Replicate(), dt::Shard(0)}},
                               mesh,
                               {.in_grad_placements = {dt::Placements{dt::Shard(0), dt::Partial()},
                                                       dt::Placements{dt::Partial(), dt::Shard(0)}},
                                .out_shapes = shapes});
  dt::DTensor xd = leaf(x, mesh, {dt::Shard(0), dt::Replicate()});
  dt::DTensor wd = leaf(w, mesh, {dt::Replicate(), dt::Shard(0)});
  const dt::DTensor y = colwise({xd, wd})[0];
  CHECK(y.shape() == dt::Shape{B, out_features});
  weighted_sum(y, dt::distribute_tensor(g, mesh, {dt::Shard(0), dt::Shard(1)})).backward();
  dt::DTensor xs = local_leaf(x), ws = local_leaf(w);
  weighted_sum(dt::linear(xs, ws), dt::local_dtensor(g)).backward();
  CHECK(max_diff(y.full_tensor(), dt::linear(xs, ws).to_local()) <= kTol);
  CHECK(xd.grad().placements() == dt::Placements{dt::Shard(0), dt::Replicate()});
  CHECK(wd.grad().placements() == dt::Placements{dt::Replicate(), dt::Shard(0)});
  CHECK(max_diff(xd.grad().full_tensor(), xs.grad().to_local()) <= kTol);
  CHECK(max_diff(wd.grad().full_tensor(), ws.grad().to_local()) <= kTol);
}

TEST_CASE("local_map without in_grad_placements reads the local gradient as the input's",
          "[local_map]") {
  // The same column-parallel linear with x's gradient left at its default (Replicate): each
  // rank's local gradient is taken as the whole gradient, so x.grad is Replicate and holds only
  // this rank's term (PyTorch's to_local() default): the user must say Partial.
  const dt::DeviceMesh mesh = tp_mesh();
  const int64_t n = mesh.size(0);
  const dt::Tensor x = same_randn({2, 3}, 4);
  const dt::Tensor w = same_randn({2 * n, 3}, 5);
  auto colwise =
      dt::local_map(local_linear, {{dt::Shard(1)}},
                    {dt::Placements{dt::Replicate()}, dt::Placements{dt::Shard(0)}}, mesh);
  dt::DTensor xd = leaf(x, mesh, {dt::Replicate()});
  dt::DTensor wd = leaf(w, mesh, {dt::Shard(0)});
  dt::sum(colwise({xd, wd})[0]).backward();
  CHECK(xd.grad().placements() == dt::Placements{dt::Replicate()});
  // This rank's term: the sum of its own rows of w.
  const dt::Tensor mine = w.narrow(0, 2 * mesh.get_local_rank(0), 2);
  const dt::Tensor expect = dt::sum(dt::local_dtensor(mine), {0}, true).to_local().expand({2, 3});
  CHECK(max_diff(xd.grad().to_local(), expect.contiguous()) <= kTol);
}

TEST_CASE("local_map row-parallel linear with a Partial output, then redistributed",
          "[local_map]") {
  const dt::DeviceMesh mesh = tp_mesh();
  const int64_t n = mesh.size(0);
  const int64_t in_features = GENERATE_COPY(2 * n, 2 * n + 1);
  const int64_t B = 4, out_features = 3;
  CAPTURE(in_features);
  const auto [x, w, g] = linear_case(B, in_features, out_features, 6);

  auto rowwise = dt::local_map(local_linear, {{dt::Partial()}},
                               {dt::Placements{dt::Shard(1)}, dt::Placements{dt::Shard(1)}}, mesh);
  dt::DTensor xd = leaf(x, mesh, {dt::Shard(1)});
  dt::DTensor wd = leaf(w, mesh, {dt::Shard(1)});
  dt::DTensor partial;
  {
    dt::CommDebugMode comm;
    partial = rowwise({xd, wd})[0];
    CHECK(comm.total_count() == 0);  // a Partial output's shape is its local shape
  }
  CHECK(partial.placements() == dt::Placements{dt::Partial()});
  CHECK(partial.shape() == dt::Shape{B, out_features});
  const dt::DTensor y = partial.redistribute({dt::Replicate()});
  weighted_sum(y, dt::distribute_tensor(g, mesh, {dt::Replicate()})).backward();

  dt::DTensor xs = local_leaf(x), ws = local_leaf(w);
  const dt::DTensor ys = dt::linear(xs, ws);
  weighted_sum(ys, dt::local_dtensor(g)).backward();
  CHECK(max_diff(y.to_local(), ys.to_local()) <= kTol);
  CHECK(xd.grad().placements() == dt::Placements{dt::Shard(1)});
  CHECK(max_diff(xd.grad().full_tensor(), xs.grad().to_local()) <= kTol);
  CHECK(max_diff(wd.grad().full_tensor(), ws.grad().to_local()) <= kTol);
}

TEST_CASE("local_map redistribute_inputs moves a Replicate input to Shard", "[local_map]") {
  const dt::DeviceMesh mesh = tp_mesh();
  const int64_t n = mesh.size(0);
  const int64_t rows = GENERATE_COPY(2 * n, 2 * n + 1);
  CAPTURE(rows);
  const dt::Tensor t = same_randn({rows, 3}, 9);
  dt::DTensor x = leaf(t, mesh, {dt::Replicate()});
  dt::Shape seen;
  auto twice = dt::local_map(
      [&seen](absl::Span<const dt::DTensor> in) {
        seen = in[0].shape();
        return dt::DTensorList{dt::mul(in[0], 2.0)};
      },
      {{dt::Shard(0)}}, {dt::Placements{dt::Shard(0)}}, mesh,
      {.redistribute_inputs = true, .out_shapes = {dt::Shape{rows, 3}}});
  const dt::DTensor y = twice({x})[0];
  const auto b = dt::chunk_bounds(rows, n, mesh.get_local_rank(0));
  CHECK(seen == dt::Shape{b.size, 3});
  CHECK(y.placements() == dt::Placements{dt::Shard(0)});
  CHECK(max_diff(y.full_tensor(), dt::mul(dt::local_dtensor(t), 2.0).to_local()) <= kTol);
  dt::sum(y).backward();
  // The gradient flows back through the redistribute to x's placements.
  CHECK(x.grad().placements() == dt::Placements{dt::Replicate()});
  CHECK(max_diff(x.grad().full_tensor(), dt::full({rows, 3}, 2.0, dt::kFloat64)) <= kTol);

  // Without redistribute_inputs the same call raises on every rank, naming both lists.
  auto strict =
      dt::local_map([](absl::Span<const dt::DTensor> in) { return dt::DTensorList{in[0]}; },
                    {{dt::Shard(0)}}, {dt::Placements{dt::Shard(0)}}, mesh);
  CHECK_THROWS_WITH(strict({x}), Contains("[local_map] input 0 has placements [R] but "
                                          "in_placements[0] is [S(0)]") &&
                                     Contains("redistribute_inputs"));
}

TEST_CASE("local_map passes local and undefined inputs through", "[local_map]") {
  const dt::DeviceMesh mesh = tp_mesh();
  const int64_t n = mesh.size(0);
  const dt::Tensor t = same_randn({2 * n, 3}, 10);
  const dt::Tensor s = same_randn({3}, 11);
  const dt::DTensor x = dt::distribute_tensor(t, mesh, {dt::Shard(0)});
  const dt::DTensor scale = dt::local_dtensor(s);
  bool saw_undefined = false;
  auto scaled = dt::local_map(
      [&](absl::Span<const dt::DTensor> in) {
        CHECK(dt::is_local(in[1]));
        CHECK(in[1].to_local().data_ptr() == s.data_ptr());  // unchanged, not copied
        saw_undefined = !in[2].defined();
        return dt::DTensorList{dt::mul(in[0], in[1])};
      },
      {{dt::Shard(0)}}, {dt::Placements{dt::Shard(0)}, std::nullopt, std::nullopt}, mesh);
  const dt::DTensor y = scaled({x, scale, dt::DTensor()})[0];
  CHECK(saw_undefined);
  CHECK(max_diff(y.full_tensor(), dt::mul(dt::local_dtensor(t), scale).to_local()) <= kTol);

  // No input on the mesh: the outputs come back as the function returned them (local).
  auto ident =
      dt::local_map([](absl::Span<const dt::DTensor> in) { return dt::DTensorList{in[0]}; },
                    {{dt::Shard(0)}}, {}, mesh);
  const dt::DTensor back = ident({scale})[0];
  CHECK(dt::is_local(back));
  CHECK(back.to_local().data_ptr() == s.data_ptr());
}

TEST_CASE("local_map errors are raised on every rank", "[local_map]") {
  const dt::DeviceMesh mesh = tp_mesh();
  const int64_t n = mesh.size(0);
  const dt::DTensor x = dt::distribute_tensor(same_randn({2 * n, 3}, 12), mesh, {dt::Shard(0)});
  const auto ident = [](absl::Span<const dt::DTensor> in) { return dt::DTensorList{in[0]}; };
  // Placements differ (Shard(-1) counts from the last dim: S(1) of a 2-d input).
  CHECK_THROWS_WITH(
      dt::local_map(ident, {{dt::Shard(0)}}, {dt::Placements{dt::Shard(-1)}}, mesh)({x}),
      Contains("[local_map] input 0 has placements [S(0)] but in_placements[0] is [S(-1)]"));
  // A Shard(-1) that names the input's dim matches.
  CHECK_NOTHROW(dt::local_map(ident, {{dt::Shard(0)}}, {dt::Placements{dt::Shard(-2)}}, mesh)({x}));
  // Output count.
  CHECK_THROWS_WITH(
      dt::local_map(ident, {{dt::Shard(0)}, {dt::Replicate()}}, {}, mesh)({x}),
      Contains("[local_map] the function returned 1 outputs on rank 0 but out_placements has 2"));
  // out_shapes of another length than out_placements, at construction.
  CHECK_THROWS_WITH(dt::local_map(ident, {{dt::Shard(0)}}, {}, mesh,
                                  {.out_shapes = {std::nullopt, std::nullopt}}),
                    Contains("[local_map] out_shapes has 2 entries but out_placements has 1"));
  // Input count against in_placements.
  CHECK_THROWS_WITH(dt::local_map(ident, {{dt::Shard(0)}},
                                  {dt::Placements{dt::Shard(0)}, std::nullopt}, mesh)({x}),
                    Contains("[local_map] got 1 inputs but 2 in_placements"));
  // A DTensor on the mesh with no in_placements entry.
  CHECK_THROWS_WITH(dt::local_map(ident, {{dt::Shard(0)}}, {std::nullopt}, mesh)({x}),
                    Contains("[local_map] input 0 is a DTensor on the mesh with placements [S(0)] "
                             "but in_placements[0] is std::nullopt"));
  // Placement lists of the wrong length, at construction.
  CHECK_THROWS_WITH(dt::local_map(ident, {{dt::Shard(0), dt::Replicate()}}, {}, mesh),
                    Contains("[local_map] out_placements[0] is [S(0), R], 2 placements for a 1-d "
                             "mesh"));
  CHECK_THROWS_WITH(dt::local_map(ident, {{dt::Shard(0)}}, {dt::Placements{}}, mesh),
                    Contains("[local_map] in_placements[0] is [], 0 placements for a 1-d mesh"));
  // At one rank every 1-rank mesh is a self mesh: a DTensor on another one passes through as a
  // local input, and a function's output on the mesh is local too.
  if (n == 1) return;
  // An input on another mesh.
  const dt::DeviceMesh other = dt::init_device_mesh(dt::kCPU, {1, n}, {"a", "b"});
  const dt::DTensor elsewhere =
      dt::distribute_tensor(same_randn({2, 3}, 13), other, {dt::Replicate(), dt::Replicate()});
  CHECK_THROWS_WITH(
      dt::local_map(ident, {{dt::Shard(0)}}, {}, mesh)({x, elsewhere}),
      Contains("[local_map] input 1 is on DeviceMesh(") && Contains("expected the local_map mesh"));
  // An output that is not local.
  const auto leak = [&x](absl::Span<const dt::DTensor>) { return dt::DTensorList{x}; };
  CHECK_THROWS_WITH(dt::local_map(leak, {{dt::Shard(0)}}, {}, mesh)({x}),
                    Contains("[local_map] output 0 on rank 0 is a DTensor on a mesh, not a local "
                             "DTensor"));
}

TEST_CASE("local_map infers an uneven output's global shape from every rank's local size",
          "[local_map]") {
  const dt::DeviceMesh mesh = tp_mesh();
  const int64_t n = mesh.size(0);
  const auto ident = [](absl::Span<const dt::DTensor> in) { return dt::DTensorList{in[0]}; };
  // 2n + 1 rows: (3, 2) at 2 ranks, (3, 3, 3, 0) at 4; n - 1 rows: (1, 0) at 2, (1, 1, 1, 0) at
  // 4, none at 1.
  const int64_t rows = GENERATE_COPY(2 * n + 1, n - 1, int64_t{0});
  const int64_t dim = GENERATE(0, 1);
  CAPTURE(rows, dim);
  const dt::Shape shape = dim == 0 ? dt::Shape{rows, 3} : dt::Shape{3, rows};
  const dt::DTensor x = dt::distribute_tensor(same_randn(shape, 14), mesh, {dt::Shard(dim)});
  // Shard(-1) for dim 1: a negative dim counts from the output's last dim.
  const dt::Placements p{dt::Shard(dim == 0 ? 0 : -1)};
  const dt::DTensor y = dt::local_map(ident, {p}, {p}, mesh)({x})[0];
  CHECK(y.shape() == shape);
  CHECK(y.placements() == dt::Placements{dt::Shard(dim)});
  CHECK(max_diff(y.full_tensor(), x.full_tensor()) == 0);
  // run_check agrees with the inferred shape (from_local's full check passes).
  const dt::DTensor checked = dt::local_map(ident, {p}, {p}, mesh, {.run_check = true})({x})[0];
  CHECK(checked.shape() == shape);
  CHECK(max_diff(checked.full_tensor(), x.full_tensor()) == 0);
}

TEST_CASE("local_map exchanges sizes once per call, only for Shard outputs without out_shapes",
          "[local_map]") {
  const dt::DeviceMesh mesh = tp_mesh();
  const int64_t n = mesh.size(0);
  const dt::DTensor x = dt::distribute_tensor(same_randn({2 * n, 3}, 18), mesh, {dt::Shard(0)});
  const dt::DTensor r = dt::distribute_tensor(same_randn({2, 3}, 19), mesh, {dt::Replicate()});
  // Two outputs sharded over the same mesh dim, a Replicate and a Partial one.
  const auto four = [](absl::Span<const dt::DTensor> in) {
    return dt::DTensorList{in[0], dt::mul(in[0], 2.0), in[1], dt::mul(in[1], 3.0)};
  };
  const std::vector<dt::Placements> out{
      {dt::Shard(0)}, {dt::Shard(1)}, {dt::Replicate()}, {dt::Partial()}};
  const std::vector<std::optional<dt::Placements>> in{dt::Placements{dt::Shard(0)},
                                                      dt::Placements{dt::Replicate()}};
  const int64_t one = n == 1 ? 0 : 1;
  {
    dt::CommDebugMode comm;
    const dt::DTensorList y = dt::local_map(four, out, in, mesh)({x, r});
    CHECK(comm.total_count() == one);
    CHECK(comm.count(dt::CollectiveKind::kAllGather) == one);
    CHECK(local_map_count(comm) == one);
    // Even pieces: the shapes PyTorch infers too ([2, 3] locals: 2n rows, or 3n columns).
    CHECK(y[0].shape() == dt::Shape{2 * n, 3});
    CHECK(y[1].shape() == dt::Shape{2, 3 * n});
    CHECK(y[2].shape() == dt::Shape{2, 3});
    CHECK(y[3].shape() == dt::Shape{2, 3});
  }
  {
    dt::CommDebugMode comm;
    dt::local_map(four, out, in, mesh,
                  {.out_shapes = {dt::Shape{2 * n, 3}, dt::Shape{2, 3 * n}, std::nullopt,
                                  std::nullopt}})({x, r});
    CHECK(comm.total_count() == 0);
  }
}

TEST_CASE("local_map infers shapes on a 2-d mesh: nested and crossed Shard placements",
          "[local_map]") {
  if (dt::world_size() != 4) return;
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {2, 2}, {"a", "b"});
  const auto ident = [](absl::Span<const dt::DTensor> in) { return dt::DTensorList{in[0]}; };
  // [S(0), S(0)] of 5 rows: mesh dim a splits 3 / 2, b splits those 2 / 1 and 1 / 1; of 3
  // rows: 1 / 1 and 1 / 0; [S(1), S(0)] of [5, 3]: 3 / 2 columns, 2 / 1 rows.
  const std::vector<dt::Placements> layouts{
      {dt::Shard(0), dt::Shard(0)}, {dt::Shard(1), dt::Shard(0)}, {dt::Shard(0), dt::Replicate()}};
  for (const dt::Placements& p : layouts) {
    for (const dt::Shape& shape : {dt::Shape{5, 3}, dt::Shape{3, 5}, dt::Shape{1, 1}}) {
      CAPTURE(dt::placements_str(p), dt::shape_str(shape));
      const dt::DTensor x = dt::distribute_tensor(same_randn(shape, 20), mesh, p);
      const dt::DTensor y = dt::local_map(ident, {p}, {p}, mesh)({x})[0];
      CHECK(y.shape() == shape);
      CHECK(max_diff(y.full_tensor(), x.full_tensor()) == 0);
    }
  }
}

TEST_CASE("local_map raises on every rank when local sizes fit no chunk layout", "[local_map]") {
  const dt::DeviceMesh mesh = tp_mesh();
  const int64_t n = mesh.size(0);
  if (n == 1) return;  // one rank's piece is always the whole
  const dt::DTensor x = dt::distribute_tensor(same_randn({n, 3}, 21), mesh, {dt::Shard(0)});
  const int64_t r = mesh.get_local_rank(0);
  // Rank r returns r + 1 rows: rank 0 smaller than rank 1, no torch.chunk layout.
  const auto growing = [r](absl::Span<const dt::DTensor>) {
    return dt::DTensorList{dt::local_dtensor(same_randn({r + 1, 3}, 22))};
  };
  auto f = dt::local_map(growing, {{dt::Shard(0)}}, {dt::Placements{dt::Shard(0)}}, mesh);
  CHECK_THROWS_WITH(
      f({x}), Contains("[local_map] output 0 with placements [S(0)]: the local sizes along the "
                       "sharded dims (rank 0: [1], rank 1: [2]") &&
                  Contains("are not the torch.chunk pieces of any global size") &&
                  Contains("pass out_shapes[0]"));
  // Pieces of the right sum in the wrong order (2n rows as 1, 3, 2, 2, ...): raises too.
  const auto shifted = [r](absl::Span<const dt::DTensor>) {
    const int64_t rows = r == 0 ? 1 : (r == 1 ? 3 : 2);
    return dt::DTensorList{dt::local_dtensor(same_randn({rows, 3}, 23))};
  };
  CHECK_THROWS_WITH(
      dt::local_map(shifted, {{dt::Shard(0)}}, {dt::Placements{dt::Shard(0)}}, mesh)({x}),
      Contains("rank 0: [1], rank 1: [3]"));
  // Outputs of different ndim on different ranks.
  const auto ragged = [r](absl::Span<const dt::DTensor>) {
    return dt::DTensorList{
        dt::local_dtensor(r == 0 ? same_randn({2, 3}, 24) : same_randn({2, 3, 1}, 24))};
  };
  CHECK_THROWS_WITH(
      dt::local_map(ragged, {{dt::Shard(0)}}, {dt::Placements{dt::Shard(0)}}, mesh)({x}),
      Contains("[local_map] output 0 with placements [S(0)]: the ranks' local outputs differ in "
               "ndim"));
  // With out_shapes the sizes are not exchanged: a given shape is taken as it is, and run_check
  // (from_local's) still catches pieces that do not fit it.
  CHECK_THROWS_WITH(dt::local_map(growing, {{dt::Shard(0)}}, {dt::Placements{dt::Shard(0)}}, mesh,
                                  {.out_shapes = {dt::Shape{n, 3}}, .run_check = true})({x}),
                    Contains("[from_local]"));
  // run_check catches what the exchange does not look at: Replicate replicas of different shapes.
  const auto replicas = [r](absl::Span<const dt::DTensor>) {
    return dt::DTensorList{dt::local_dtensor(same_randn({r + 1, 3}, 25))};
  };
  CHECK_THROWS_WITH(dt::local_map(replicas, {{dt::Replicate()}}, {dt::Placements{dt::Shard(0)}},
                                  mesh, {.run_check = true})({x}),
                    Contains("[from_local]"));
}

TEST_CASE("local_map inside a dtensor::compile capture", "[local_map][compile]") {
  const dt::DeviceMesh mesh = tp_mesh();
  const int64_t n = mesh.size(0);
  const dt::Tensor x = same_randn({3, 4}, 15);
  const dt::Tensor w = same_randn({2 * n + 1, 4}, 16);
  // Without out_shapes the capture exchanges the sizes once; the replays reuse the shape.
  const bool give_shape = GENERATE(true, false);
  CAPTURE(give_shape);
  std::vector<std::optional<dt::Shape>> shapes;
  if (give_shape) shapes.push_back(dt::Shape{3, 2 * n + 1});
  auto colwise = dt::local_map(local_linear, {{dt::Shard(1)}},
                               {dt::Placements{dt::Replicate()}, dt::Placements{dt::Shard(0)}},
                               mesh, {.out_shapes = shapes});
  // A step over a parameter w (Shard(0), uneven): x is the step's input.
  const auto step_over = [&colwise](const dt::DTensor& weight) {
    return [&colwise, weight](const dt::DTensorList& b) {
      const dt::DTensor loss = dt::sum(dt::mul(colwise({b[0], weight})[0], 0.5));
      loss.backward();
      return dt::DTensorList{loss.detach()};
    };
  };
  const dt::DTensor we = leaf(w, mesh, {dt::Shard(0)}), wc = leaf(w, mesh, {dt::Shard(0)});
  const auto eager = step_over(we);
  dt::CompiledStep step = dt::compile(step_over(wc));
  const dt::DTensor xd = dt::distribute_tensor(x, mesh, {dt::Replicate()});
  for (int call = 0; call < 3; ++call) {
    CAPTURE(call);
    const dt::DTensorList want = eager({xd});
    dt::CommDebugMode comm;
    const dt::DTensorList got = step({xd});
    // The capture (call 0) exchanges the sizes as eager does; a replay does not.
    CHECK(local_map_count(comm) == (call == 0 && !give_shape && n > 1 ? 1 : 0));
    CHECK(max_diff(got[0].full_tensor(), want[0].full_tensor()) == 0);
    // The gradient accumulates over the calls, in the replays as in the eager steps.
    CHECK(wc.grad().placements() == dt::Placements{dt::Shard(0)});
    CHECK(max_diff(wc.grad().full_tensor(), we.grad().full_tensor()) == 0);
  }
  CHECK(step.replays() == 2);
}

TEST_CASE("local_map raises on every rank when one rank's function returns bad outputs",
          "[local_map]") {
  const dt::DeviceMesh mesh = tp_mesh();
  const int64_t n = mesh.size(0);
  if (n == 1) return;
  const dt::DTensor x = dt::distribute_tensor(same_randn({2 * n, 3}, 26), mesh, {dt::Shard(0)});
  const int64_t r = mesh.get_local_rank(0);
  const int last = mesh.ranks().back();
  const std::vector<std::optional<dt::Placements>> in{dt::Placements{dt::Shard(0)}};
  // A Shard output without out_shapes: its sizes are exchanged, and with them each rank's
  // verdict on its outputs, so the rank that returned a bad one is named on every rank.
  const auto undefined_on_last = [r, n](absl::Span<const dt::DTensor> a) {
    return dt::DTensorList{r == n - 1 ? dt::DTensor() : a[0]};
  };
  {
    dt::CommDebugMode comm;
    CHECK_THROWS_WITH(
        dt::local_map(undefined_on_last, {{dt::Shard(0)}}, in, mesh)({x}),
        Contains(absl::StrFormat("[local_map] output 0 is undefined on rank %d", last)));
    CHECK(local_map_count(comm) == 1);
  }
  const auto two_on_first = [r](absl::Span<const dt::DTensor> a) {
    return r == 0 ? dt::DTensorList{a[0], a[0]} : dt::DTensorList{a[0]};
  };
  CHECK_THROWS_WITH(dt::local_map(two_on_first, {{dt::Shard(0)}}, in, mesh)({x}),
                    Contains("[local_map] the function returned 2 outputs on rank 0 but "
                             "out_placements has 1"));
  const auto mesh_on_last = [r, n, &x](absl::Span<const dt::DTensor> a) {
    return dt::DTensorList{r == n - 1 ? x : a[0]};
  };
  CHECK_THROWS_WITH(
      dt::local_map(mesh_on_last, {{dt::Shard(0)}}, in, mesh)({x}),
      Contains(absl::StrFormat("[local_map] output 0 on rank %d is a DTensor on a mesh", last)));
  // Nothing exchanged (a Replicate output): the checks are local, so only a rank whose own
  // outputs are bad raises; here every rank's are.
  const auto none = [](absl::Span<const dt::DTensor>) { return dt::DTensorList{}; };
  CHECK_THROWS_WITH(dt::local_map(none, {{dt::Replicate()}}, in, mesh)({x}),
                    Contains("[local_map] the function returned 0 outputs on rank"));
}

TEST_CASE("local_map on a 2x2 mesh: one all-gather over the mesh, errors on every rank",
          "[local_map]") {
  if (dt::world_size() != 4) return;
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {2, 2}, {"a", "b"});
  const int64_t a = mesh.get_local_rank(0), b = mesh.get_local_rank(1);
  const dt::Placements rs{dt::Replicate(), dt::Shard(0)};
  const dt::DTensor x = dt::distribute_tensor(same_randn({5, 3}, 27), mesh, rs);
  // Outputs sharded over three different sets of mesh dims: {b}, {a}, {a, b}; one exchange.
  const dt::DTensor r =
      dt::distribute_tensor(same_randn({2, 3}, 30), mesh, {dt::Replicate(), dt::Replicate()});
  const auto three = [](absl::Span<const dt::DTensor> in) {
    return dt::DTensorList{in[0], in[1], in[1]};
  };
  {
    dt::CommDebugMode comm;
    const dt::DTensorList y =
        dt::local_map(three, {rs, {dt::Shard(1), dt::Replicate()}, {dt::Shard(0), dt::Shard(1)}},
                      {rs, dt::Placements{dt::Replicate(), dt::Replicate()}}, mesh)({x, r});
    CHECK(comm.total_count() == 1);
    CHECK(comm.count(dt::CollectiveKind::kAllGather) == 1);
    CHECK(local_map_count(comm) == 1);
    // Rows 3 / 2 over b; 3 columns on each a; rows over a and columns over b.
    CHECK(y[0].shape() == dt::Shape{5, 3});
    CHECK(y[1].shape() == dt::Shape{2, 6});
    CHECK(y[2].shape() == dt::Shape{4, 6});
  }
  // The ranks at a = 1 return pieces that fit no chunk layout (1 row, then 2), those at a = 0
  // fine ones (2, 2): every rank raises, naming the a = 1 group, after the one all-gather (the
  // a = 0 ranks used to go on to their next collective).
  const auto bad_second = [a, b](absl::Span<const dt::DTensor>) {
    return dt::DTensorList{dt::local_dtensor(same_randn({a == 0 ? 2 : b + 1, 3}, 28))};
  };
  {
    dt::CommDebugMode comm;
    CHECK_THROWS_WITH(dt::local_map(bad_second, {rs}, {rs}, mesh)({x}),
                      Contains("[local_map] output 0 with placements [R, S(0)]: the local sizes "
                               "along the sharded dims (rank 2: [1], rank 3: [2])") &&
                          Contains("are not the torch.chunk pieces"));
    CHECK(local_map_count(comm) == 1);
  }
  // Both groups fit a layout but of different sizes (3 / 2 at a = 0, 2 / 2 at a = 1): replicas
  // disagree, every rank raises.
  const auto uneven_replicas = [a, b](absl::Span<const dt::DTensor>) {
    const int64_t rows = a == 0 ? 3 - b : 2;
    return dt::DTensorList{dt::local_dtensor(same_randn({rows, 3}, 29))};
  };
  CHECK_THROWS_WITH(dt::local_map(uneven_replicas, {rs}, {rs}, mesh)({x}),
                    Contains("[local_map] output 0 with placements [R, S(0)]: rank 0 and rank 2 "
                             "differ only on mesh dims that do not shard it") &&
                        Contains("[2, -1, 3] on rank 0, [2, -1, 2] on rank 2"));
}
