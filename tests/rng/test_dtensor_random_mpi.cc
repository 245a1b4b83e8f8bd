// DTensor random ops under mpirun (1, 2, 4, 8 ranks): for one generator state every random op on
// a DTensor of any placement list, on 1-D, 2-D and 3-D meshes (ranks beyond a mesh's size stay
// outside it), equals bit for bit the local op on the full tensor; generator offsets stay in
// step across the world; manual_seed(seed, mesh) detects mismatching seeds on every rank;
// Partial DTensors are refused. Checks inside loops use CHECK so a failing rank keeps issuing
// the collectives its peers expect.
#include <absl/strings/str_format.h>

#include <catch2/catch.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dtensor/collectives/runtime.h"
#include "dtensor/core/distributed_tensor.h"
#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/rng/dtensor_random.h"
#include "dtensor/tensor/compare.h"
#include "dtensor/tensor/creation.h"

namespace dt = dtensor;
using Catch::Contains;
using Ints = std::vector<int64_t>;

namespace {

const dt::Placement R = dt::Replicate();
const dt::Placement S0 = dt::Shard(0);
const dt::Placement S1 = dt::Shard(1);
const dt::Placement S2 = dt::Shard(2);

// 1-D, 2-D (2x2, 1x4, ...) and 3-D meshes that fit the world; the rest of the world is outside.
std::vector<Ints> meshes_for_world(int w) {
  switch (w) {
    case 1:
      return {{1}, {1, 1}, {1, 1, 1}};
    case 2:
      return {{2}, {1, 2}, {2, 1}, {2, 1, 1}};
    case 4:
      return {{4}, {2, 2}, {1, 4}, {2, 1, 2}};
    case 8:
      return {{8}, {2, 2}, {1, 4}, {2, 4}, {2, 2, 2}};
    default:
      return {{w}};
  }
}

dt::DeviceMesh make_mesh(const Ints& shape) {
  return dt::init_device_mesh(dt::kCPU, dt::IntSpan(shape.data(), shape.size()));
}

std::vector<dt::Placements> all_placements(const std::vector<dt::Placement>& choices, size_t ndim) {
  std::vector<dt::Placements> out = {dt::Placements()};
  for (size_t m = 0; m < ndim; ++m) {
    std::vector<dt::Placements> next;
    for (const dt::Placements& p : out) {
      for (const dt::Placement& c : choices) {
        dt::Placements q = p;
        q.push_back(c);
        next.push_back(q);
      }
    }
    out = next;
  }
  return out;
}

// The block of `full` this rank holds under `placements`, cut with narrow(): the reference for
// to_local() (an empty tensor of zero sizes outside the mesh).
dt::Tensor expected_block(const dt::Tensor& full, const dt::DeviceMesh& mesh,
                          const dt::Placements& placements) {
  if (!mesh.contains_me()) return dt::empty(dt::Shape(full.dim(), 0), full.dtype());
  const dt::LocalShard s = dt::compute_local_shape_and_offset(full.shape(), mesh.shape(),
                                                              mesh.get_coordinate(), placements);
  dt::Tensor t = full;
  for (int64_t d = 0; d < full.dim(); ++d) t = t.narrow(d, s.offset[d], s.shape[d]);
  return t;
}

// Deterministic, distinct, nonzero data (so a dropped element shows as 0).
dt::Tensor make_data(const Ints& shape, dt::DType dtype) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 37) % 29 + 1);
  return dt::from_vector(v, dt::IntSpan(shape.data(), shape.size())).to(dtype);
}

dt::IntSpan span(const Ints& v) {
  return dt::IntSpan(v.data(), v.size());
}

// One random op: on a DTensor (through the default generator) and its reference on the full
// tensor (through the same generator, from the same state).
struct RandomOp {
  std::string name;
  std::function<dt::DTensor(const Ints&, const dt::DeviceMesh&, const dt::Placements&)> dist;
  std::function<dt::Tensor(const Ints&)> full;
};

std::vector<RandomOp> random_ops() {
  std::vector<RandomOp> ops;
  for (dt::DType dtype : {dt::kFloat32, dt::kFloat64, dt::kBFloat16}) {
    ops.push_back({absl::StrFormat("rand %s", dt::dtype_name(dtype)),
                   [dtype](const Ints& s, const dt::DeviceMesh& m, const dt::Placements& p) {
                     return dt::rand(span(s), m, p, dtype);
                   },
                   [dtype](const Ints& s) { return dt::rand(span(s), dtype); }});
  }
  for (dt::DType dtype : {dt::kFloat32, dt::kFloat64}) {
    ops.push_back({absl::StrFormat("randn %s", dt::dtype_name(dtype)),
                   [dtype](const Ints& s, const dt::DeviceMesh& m, const dt::Placements& p) {
                     return dt::randn(span(s), m, p, dtype);
                   },
                   [dtype](const Ints& s) { return dt::randn(span(s), dtype); }});
  }
  for (dt::DType dtype : {dt::kInt64, dt::kInt32}) {
    ops.push_back({absl::StrFormat("randint %s", dt::dtype_name(dtype)),
                   [dtype](const Ints& s, const dt::DeviceMesh& m, const dt::Placements& p) {
                     return dt::randint(-5, 1000, span(s), m, p, dtype);
                   },
                   [dtype](const Ints& s) { return dt::randint(-5, 1000, span(s), dtype); }});
  }
  ops.push_back({"bernoulli bool",
                 [](const Ints& s, const dt::DeviceMesh& m, const dt::Placements& p) {
                   return dt::bernoulli(span(s), 0.3, m, p, dt::kBool);
                 },
                 [](const Ints& s) { return dt::bernoulli(span(s), 0.3, dt::kBool); }});
  ops.push_back(
      {"uniform_ float16",
       [](const Ints& s, const dt::DeviceMesh& m, const dt::Placements& p) {
         const dt::DTensor t =
             dt::distribute_tensor(dt::zeros(span(s), dt::kFloat16), m, p, std::nullopt);
         return dt::uniform_(t, -2.0, 3.0);
       },
       [](const Ints& s) { return dt::uniform_(dt::zeros(span(s), dt::kFloat16), -2.0, 3.0); }});
  ops.push_back({"normal_ float32",
                 [](const Ints& s, const dt::DeviceMesh& m, const dt::Placements& p) {
                   const dt::DTensor t =
                       dt::distribute_tensor(dt::zeros(span(s)), m, p, std::nullopt);
                   return dt::normal_(t, 1.0, 2.0);
                 },
                 [](const Ints& s) { return dt::normal_(dt::zeros(span(s)), 1.0, 2.0); }});
  ops.push_back({"dropout float32",
                 [](const Ints& s, const dt::DeviceMesh& m, const dt::Placements& p) {
                   const dt::DTensor x =
                       dt::distribute_tensor(make_data(s, dt::kFloat32), m, p, std::nullopt);
                   return dt::dropout(x, 0.4);
                 },
                 [](const Ints& s) { return dt::dropout(make_data(s, dt::kFloat32), 0.4); }});
  ops.push_back({"dropout mask bfloat16",
                 [](const Ints& s, const dt::DeviceMesh& m, const dt::Placements& p) {
                   const dt::DTensor x =
                       dt::distribute_tensor(make_data(s, dt::kBFloat16), m, p, std::nullopt);
                   return dt::dropout_with_mask(x, 0.25).mask;
                 },
                 [](const Ints& s) {
                   return dt::dropout_with_mask(make_data(s, dt::kBFloat16), 0.25).mask;
                 }});
  return ops;
}

// Runs `op` as a DTensor op and as a local op from the same generator state and compares the
// local shard, the full tensor and the generator state afterwards.
void check_op(const RandomOp& op, const Ints& shape, const dt::DeviceMesh& mesh,
              const dt::Placements& p) {
  dt::Generator& gen = dt::default_generator();
  const dt::GeneratorState before = gen.state();
  const dt::DTensor d = op.dist(shape, mesh, p);
  const dt::GeneratorState after = gen.state();
  gen.set_state(before);
  const dt::Tensor full = op.full(shape);
  CHECK(gen.state() == after);  // same advance as the local op on the full tensor
  if (full.numel() > 0) CHECK(after.offset > before.offset);
  CHECK(d.shape() == dt::Shape(shape.begin(), shape.end()));
  CHECK(d.placements() == p);
  CHECK(d.to_local().dtype() == full.dtype());
  const dt::Tensor block = expected_block(full, mesh, p);
  CHECK(d.to_local().shape() == block.shape());
  if (mesh.contains_me()) {
    CHECK(dt::equal(d.to_local(), block));
    CHECK(dt::equal(d.full_tensor(), full));
  } else {
    CHECK(d.to_local().numel() == (full.dim() == 0 ? 1 : 0));  // a 0-d local has one element
  }
}

uint64_t round4(uint64_t x) {
  return (x + 3) / 4 * 4;
}

}  // namespace

TEST_CASE("random DTensors equal the full random tensor on every mesh and placement",
          "[rng][dtensor]") {
  const int w = dt::world_size();
  const std::vector<RandomOp> ops = random_ops();
  // Even, uneven (trailing ranks get smaller or empty shards) and zero-size shapes.
  const std::vector<Ints> shapes = {{8, 4}, {w * 3 + 1, 5}, {5, 3}, {1, 7}, {0, 3}, {3, 0}};
  int64_t cases = 0;
  for (const Ints& mesh_shape : meshes_for_world(w)) {
    const dt::DeviceMesh mesh = make_mesh(mesh_shape);
    dt::manual_seed(1234, mesh);
    for (const dt::Placements& p : all_placements({R, S0, S1}, mesh_shape.size())) {
      for (const Ints& shape : shapes) {
        for (const RandomOp& op : ops) {
          INFO(op.name << " on mesh " << dt::shape_str(span(mesh_shape)) << " shape "
                       << dt::shape_str(span(shape)) << " placements " << dt::placements_str(p));
          check_op(op, shape, mesh, p);
          ++cases;
        }
      }
    }
  }
  CHECK(cases > 0);
}

TEST_CASE("random DTensors of 1-D and 3-D shapes, nested sharding", "[rng][dtensor]") {
  const int w = dt::world_size();
  const std::vector<RandomOp> ops = random_ops();
  for (const Ints& mesh_shape : meshes_for_world(w)) {
    const dt::DeviceMesh mesh = make_mesh(mesh_shape);
    dt::manual_seed(99, mesh);
    for (const dt::Placements& p : all_placements({R, S0, S2}, mesh_shape.size())) {
      for (const Ints& shape : std::vector<Ints>{{2, 3, 5}, {w + 1, 1, 3}}) {
        for (size_t k = 0; k < ops.size(); k += 2) {
          INFO(ops[k].name << " on mesh " << dt::shape_str(span(mesh_shape)) << " shape "
                           << dt::shape_str(span(shape)) << " placements "
                           << dt::placements_str(p));
          check_op(ops[k], shape, mesh, p);
        }
      }
    }
    for (const dt::Placements& p : all_placements({R, S0}, mesh_shape.size())) {
      for (const Ints& shape : std::vector<Ints>{{13}, {w}, {0}}) {
        for (const RandomOp& op : ops) {
          INFO(op.name << " on mesh " << dt::shape_str(span(mesh_shape)) << " shape "
                       << dt::shape_str(span(shape)) << " placements " << dt::placements_str(p));
          check_op(op, shape, mesh, p);
        }
      }
    }
    // A 0-d random DTensor (every placement Replicate).
    const dt::Placements reps(mesh_shape.size(), R);
    for (const RandomOp& op : ops) {
      INFO(op.name << " 0-d on mesh " << dt::shape_str(span(mesh_shape)));
      check_op(op, {}, mesh, reps);
    }
  }
}

TEST_CASE("a DTensor random op with an explicit generator", "[rng][dtensor]") {
  const int w = dt::world_size();
  const dt::DeviceMesh mesh = make_mesh({w});
  dt::Generator g(42), ref(42);
  const dt::GeneratorState default_before = dt::default_generator().state();
  const Ints shape = {2 * w + 1, 3};
  const dt::DTensor a = dt::randn(span(shape), mesh, {S0}, dt::kFloat32, &g);
  const dt::DTensor b = dt::rand(span(shape), mesh, {S1}, dt::kFloat64, &g);
  const dt::Tensor ra = dt::randn(span(shape), dt::kFloat32, &ref);
  const dt::Tensor rb = dt::rand(span(shape), dt::kFloat64, &ref);
  CHECK(g.state() == ref.state());
  CHECK(dt::default_generator().state() == default_before);
  CHECK(dt::equal(a.to_local(), expected_block(ra, mesh, {S0})));
  CHECK(dt::equal(b.to_local(), expected_block(rb, mesh, {S1})));
  CHECK(dt::equal(a.full_tensor(), ra));
  // A placement list in a std::vector (any contiguous range) works like braces.
  const std::vector<dt::Placement> s0 = {S0};
  dt::Generator gv(7), rv(7);
  CHECK(dt::equal(dt::randint(0, 9, span(shape), mesh, s0, dt::kInt64, &gv).full_tensor(),
                  dt::randint(0, 9, span(shape), dt::kInt64, &rv)));
  // Different calls draw different words.
  CHECK_FALSE(dt::equal(dt::rand(span(shape), mesh, {R}, dt::kFloat32, &g).to_local(),
                        dt::rand(span(shape), mesh, {R}, dt::kFloat32, &g).to_local()));
}

TEST_CASE("OffsetBasedRNGTracker reserves the global numel and returns the local shard",
          "[rng][dtensor]") {
  const int w = dt::world_size();
  const int me = dt::world_rank();
  const dt::DeviceMesh mesh = make_mesh({w});
  dt::Generator g(5);
  dt::OffsetBasedRNGTracker tracker(&g);
  CHECK(&tracker.generator() == &g);
  CHECK(tracker.get_seed() == 5);
  tracker.set_offset(6);  // not a multiple of 4: the next op starts at 8
  CHECK(tracker.get_offset() == 6);
  const int64_t rows = 3 * w + 1;
  const dt::DTensorSpec spec(mesh, {S0}, dt::TensorMeta(dt::Shape{rows, 3}, dt::kFloat64));
  const dt::RNGRegion r =
      tracker.reserve(spec, dt::RandomSpec::normal(dt::kFloat64), dt::Device(), "test");
  CHECK(r.seed == 5);
  CHECK(r.offset == 8);
  // normal float64: 4 words per element, global numel rows * 3.
  CHECK(tracker.get_offset() == 8 + round4(static_cast<uint64_t>(rows * 3 * 4)));
  // torch.chunk rule: chunk = ceil(rows / w).
  const int64_t chunk = (rows + w - 1) / w;
  const int64_t start = std::min<int64_t>(me * chunk, rows);
  const int64_t len = std::min<int64_t>(chunk, rows - start);
  CHECK(r.shard.shape == dt::Shape{len, 3});
  CHECK(r.shard.offset == dt::Shape{start, 0});
  // fill() on a wrong-shaped local tensor is refused before reserving.
  const uint64_t off = tracker.get_offset();
  REQUIRE_THROWS_WITH(tracker.fill(dt::empty({rows + 1, 3}, dt::kFloat64), spec,
                                   dt::RandomSpec::uniform(dt::kFloat64), "test"),
                      Contains("[test] the local tensor has shape"));
  CHECK(tracker.get_offset() == off);
  // The default tracker draws from the default generator.
  CHECK(&dt::default_rng_tracker().generator() == &dt::default_generator());
}

TEST_CASE("generator offsets stay in step after mixed sharded and replicated ops",
          "[rng][dtensor]") {
  const int w = dt::world_size();
  const dt::DeviceMesh world = make_mesh({w});
  const std::vector<Ints> meshes = meshes_for_world(w);
  std::vector<dt::DeviceMesh> built;
  for (const Ints& m : meshes) built.push_back(make_mesh(m));
  dt::manual_seed(2024, world);
  uint64_t expected = 0;
  auto add = [&expected](uint64_t words) { expected = round4(expected) + round4(words); };
  const int64_t rows = 2 * w + 3;
  for (size_t i = 0; i < built.size(); ++i) {
    const dt::DeviceMesh& mesh = built[i];
    const size_t nd = meshes[i].size();
    dt::Placements shard(nd, S0), rep(nd, R), mixed(nd, R);
    mixed[nd - 1] = S1;
    dt::rand({rows, 5}, mesh, shard);  // 1 word / element
    add(rows * 5);
    dt::randn({rows, 5}, mesh, rep, dt::kFloat64);  // 4
    add(rows * 5 * 4);
    dt::randint(0, 10, {3, rows}, mesh, mixed);  // 2
    add(3 * rows * 2);
    const dt::DTensor x = dt::distribute_tensor(dt::ones({rows, 1}), mesh, shard, std::nullopt);
    dt::dropout(x, 0.5);  // 1
    add(rows);
    dt::dropout(x, 0.5, /*train=*/false);  // nothing
    dt::dropout(x, 0.0);                   // nothing
    dt::bernoulli({1}, 0.5, mesh, rep);    // 1
    add(1);
    dt::rand({0, 4}, mesh, shard);  // nothing
    dt::rand({7}, dt::kFloat32);    // a local op: 7
    add(7);
  }
  const uint64_t mine = dt::default_generator().offset();
  CHECK(mine == expected);
  // Every rank, in every mesh or not, has the same offset.
  const dt::Tensor in = dt::from_vector(std::vector<int64_t>{static_cast<int64_t>(mine)}, {1});
  const dt::Tensor out = dt::empty({w}, dt::kInt64);
  dt::world_communicator()->all_gather(out, in)->wait();
  for (int64_t v : out.to_vector<int64_t>()) CHECK(static_cast<uint64_t>(v) == mine);
}

TEST_CASE("manual_seed(seed, mesh) seeds the default generators when the seeds agree",
          "[rng][dtensor]") {
  const int w = dt::world_size();
  for (const Ints& mesh_shape : meshes_for_world(w)) {
    const dt::DeviceMesh mesh = make_mesh(mesh_shape);
    dt::rand({3});  // move the offset away from 0
    REQUIRE_NOTHROW(dt::manual_seed(777, mesh));
    CHECK(dt::default_generator().seed() == 777);
    CHECK(dt::default_generator().offset() == 0);
    CHECK(dt::initial_seed() == 777);
    dt::manual_seed(uint64_t{0xFFFFFFFFFFFFFFFFull}, mesh);  // the full 64-bit range round-trips
    CHECK(dt::default_generator().seed() == 0xFFFFFFFFFFFFFFFFull);
  }
  dt::manual_seed(1234);  // the local version still exists
  CHECK(dt::default_generator().seed() == 1234);
}

TEST_CASE("manual_seed(seed, mesh) with different seeds raises on every rank", "[rng][dtensor]") {
  const int w = dt::world_size();
  const int me = dt::world_rank();
  if (w < 2) return;
  dt::manual_seed(5);
  const dt::DeviceMesh world = make_mesh({w});
  REQUIRE_THROWS_WITH(dt::manual_seed(me == 1 ? 99 : 1234, world),
                      Contains("[manual_seed] ranks passed different seeds: rank 0: 1234, "
                               "rank 1: 99"));
  CHECK(dt::default_generator().seed() == 5);  // unchanged on a mismatch
  CHECK(dt::initial_seed() == 5);

  // World ranks are listed in mesh order.
  std::vector<int> reversed;
  for (int r = w - 1; r >= 0; --r) reversed.push_back(r);
  const dt::DeviceMesh rev(dt::kCPU, {w}, reversed);
  REQUIRE_THROWS_WITH(
      dt::manual_seed(me == 0 ? 3 : 1234, rev),
      Contains(absl::StrFormat("rank %d: 1234", w - 1)) && Contains("rank 1: 1234, rank 0: 3"));

  if (w >= 4) {
    // A 2x2 mesh (ranks 4.. outside when w == 8: they communicate nothing and do not throw).
    const dt::DeviceMesh m22 = make_mesh({2, 2});
    if (m22.contains_me()) {
      REQUIRE_THROWS_WITH(dt::manual_seed(me == 3 ? 7 : 1234, m22),
                          Contains("ranks passed different seeds: rank 0: 1234, rank 1: 1234, "
                                   "rank 2: 1234, rank 3: 7"));
    } else {
      REQUIRE_NOTHROW(dt::manual_seed(1234, m22));
    }
  }
  if (w >= 8) {
    const dt::DeviceMesh m222 = make_mesh({2, 2, 2});
    REQUIRE_THROWS_WITH(dt::manual_seed(me == 6 ? 8 : 9, m222),
                        Contains("rank 5: 9, rank 6: 8, rank 7: 9"));
  }
  // Afterwards the mesh still works (no rank is stuck in a collective).
  REQUIRE_NOTHROW(dt::manual_seed(11, world));
  CHECK(dt::default_generator().seed() == 11);
}

TEST_CASE("random ops on a Partial DTensor are refused", "[rng][dtensor]") {
  const int w = dt::world_size();
  const dt::DeviceMesh mesh = make_mesh({w});
  dt::manual_seed(3, mesh);
  const uint64_t off = dt::default_generator().offset();
  const dt::DTensor x =
      dt::distribute_tensor(dt::ones({4, 4}), mesh, {dt::Partial()}, std::nullopt);
  REQUIRE_THROWS_WITH(dt::dropout(x, 0.5),
                      "[dropout] random ops on a Partial DTensor are not supported (placements "
                      "[P(sum)]): redistribute to Replicate or Shard first");
  REQUIRE_THROWS_WITH(dt::dropout_with_mask(x, 0.5), Contains("[dropout] random ops on a Partial"));
  REQUIRE_THROWS_WITH(dt::uniform_(x), Contains("[uniform_] random ops on a Partial DTensor"));
  REQUIRE_THROWS_WITH(dt::normal_(x), Contains("[normal_] random ops on a Partial DTensor"));
  REQUIRE_THROWS_WITH(dt::rand({4, 4}, mesh, {dt::Partial(dt::ReduceOp::kMax)}),
                      Contains("[rand] random ops on a Partial DTensor are not supported "
                               "(placements [P(max)])"));
  REQUIRE_THROWS_WITH(dt::randint(0, 3, {4}, mesh, {dt::Partial()}),
                      Contains("[randint] random ops on a Partial"));
  const dt::DeviceMesh m2 = make_mesh({1, w});
  REQUIRE_THROWS_WITH(dt::randn({4, 4}, m2, {S0, dt::Partial(dt::ReduceOp::kAvg)}),
                      Contains("(placements [S(0), P(avg)])"));
  CHECK(dt::default_generator().offset() == off);  // nothing reserved
}

TEST_CASE("DTensor random ops reject bad arguments before drawing", "[rng][dtensor]") {
  const int w = dt::world_size();
  const dt::DeviceMesh mesh = make_mesh({w});
  const uint64_t off = dt::default_generator().offset();
  REQUIRE_THROWS_AS(dt::rand({4}, mesh, {S0}, dt::kInt64), dt::Error);
  REQUIRE_THROWS_WITH(dt::rand({4}, mesh, {S0}, dt::kInt64), Contains("[rand]"));
  REQUIRE_THROWS_WITH(dt::randn({4}, mesh, {S0, R}), Contains("[randn]"));
  REQUIRE_THROWS_WITH(dt::rand({-1, 2}, mesh, {S0}), Contains("[rand]"));
  REQUIRE_THROWS_WITH(dt::rand({4}, mesh, {S1}), Contains("[rand]"));
  REQUIRE_THROWS_WITH(dt::randint(5, 5, {4}, mesh, {S0}), Contains("[randint]"));
  REQUIRE_THROWS_WITH(dt::bernoulli({4}, 1.5, mesh, {S0}), Contains("[bernoulli]"));
  const dt::DTensor ints =
      dt::distribute_tensor(dt::zeros({4}, dt::kInt64), mesh, {S0}, std::nullopt);
  REQUIRE_THROWS_WITH(dt::uniform_(ints), Contains("[uniform_]"));
  REQUIRE_THROWS_WITH(dt::dropout(ints, 0.5), Contains("[dropout] input must be floating"));
  const dt::DTensor f = dt::distribute_tensor(dt::zeros({4}), mesh, {S0}, std::nullopt);
  REQUIRE_THROWS_WITH(dt::dropout(f, -0.1), Contains("[dropout] expects p in [0, 1]"));
  REQUIRE_THROWS_WITH(dt::uniform_(dt::DTensor()), Contains("[uniform_]"));
  REQUIRE_THROWS_WITH(dt::manual_seed(1, dt::DeviceMesh()), Contains("[manual_seed]"));
  CHECK(dt::default_generator().offset() == off);
  // dropout without training returns the input itself.
  CHECK(dt::dropout(f, 0.5, false).to_local().data_ptr() == f.to_local().data_ptr());
}

// The random like-factories keep the layout, Partial becoming Replicate (moved from
// tests/core/test_factories_mpi.cc, which links the core alone): rand_like is rand of the same
// layout, the same values as a fresh rand with one seed.
TEST_CASE("rand_like / randn_like keep the layout, Partial becomes Replicate", "[dtensor]") {
  const int w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const dt::Shape shape = {3 * w + 1, 4};
  for (const dt::Placement& p : {S0, S1, R, dt::Placement(dt::Partial())}) {
    INFO("placement " << p.str());
    const dt::DTensor like = dt::distribute_tensor(dt::zeros(shape, dt::kFloat64), mesh, {p});
    const dt::Placements expect = {p.is_partial() ? R : p};
    dt::Generator a(1234), b(1234);
    const dt::DTensor r1 = dt::rand_like(like, &a);
    const dt::DTensor r2 = dt::rand(shape, mesh, expect, dt::kFloat64, &b);
    CHECK(r1.placements() == expect);
    CHECK(dt::equal(r1.to_local(), r2.to_local()));
    const dt::DTensor n1 = dt::randn_like(like, &a);
    CHECK(n1.placements() == expect);
    CHECK(n1.shape() == shape);
  }
}
