// Dispatch on real meshes (mpirun at 1, 2 and 4 ranks): for every input placement list the
// DTensor result equals the op on the full tensors, the cost model picks the expected
// strategies, ranks outside the mesh get empty outputs, and a training-style loop hits the
// cache on every step after the first.
#include <catch2/catch.hpp>
#include <cstdio>
#include <vector>

#include "dtensor/collectives/runtime.h"
#include "dtensor/core/distributed_tensor.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/core/propagation/sharding_propagation.h"
#include "dtensor/tensor/compare.h"
#include "dtensor/tensor/creation.h"
#include "test_ops.h"

namespace dt = dtensor;
namespace tt = dtensor::testing;
using dt::Partial;
using dt::Placements;
using dt::Replicate;
using dt::Shard;

namespace {

const dt::Placement R = Replicate();
const dt::Placement S0 = Shard(0);
const dt::Placement S1 = Shard(1);

// 1-D over the world, plus 2-D and 3-D meshes when the world allows them.
std::vector<dt::DeviceMesh> test_meshes() {
  const int64_t w = dt::world_size();
  std::vector<dt::DeviceMesh> meshes;
  meshes.push_back(dt::init_device_mesh(dt::kCPU, {w}));
  if (w % 2 == 0) {
    meshes.push_back(dt::init_device_mesh(dt::kCPU, {2, w / 2}));
  } else {
    meshes.push_back(dt::init_device_mesh(dt::kCPU, {1, w}));
  }
  if (w % 4 == 0) meshes.push_back(dt::init_device_mesh(dt::kCPU, {2, 2, w / 4}));
  return meshes;
}

// Every list of `choices` over `mesh_ndim` mesh dims.
std::vector<Placements> all_placements(int64_t mesh_ndim,
                                       const std::vector<dt::Placement>& choices) {
  std::vector<Placements> out = {Placements()};
  for (int64_t m = 0; m < mesh_ndim; ++m) {
    std::vector<Placements> next;
    for (const Placements& p : out) {
      for (const dt::Placement& c : choices) {
        Placements q = p;
        q.push_back(c);
        next.push_back(q);
      }
    }
    out = std::move(next);
  }
  return out;
}

// Keeps the placements valid for a tensor of rank `ndim` (Shard dims in range).
bool fits(const Placements& p, int64_t ndim) {
  for (const dt::Placement& x : p) {
    if (x.is_shard() && x.dim() >= ndim) return false;
  }
  return true;
}

Placements reversed(const Placements& p) {
  return Placements(p.rbegin(), p.rend());
}

std::string ctx(const dt::DeviceMesh& mesh, const Placements& a, const Placements& b,
                const dt::Shape& shape) {
  return mesh.str() + " a=" + dt::placements_str(a) + " b=" + dt::placements_str(b) +
         " shape=" + dt::shape_str(shape);
}

bool close(const dt::Tensor& got, const dt::Tensor& want) {
  return got.sizes() == want.sizes() && dt::allclose(got, want, 1e-5, 1e-5);
}

// The sharding propagation chooses for `op` on `inputs` (without running anything).
std::shared_ptr<const dt::OutputSharding> choose(const dt::OpInfo& op,
                                                 std::vector<const dt::DTensor*> inputs,
                                                 std::vector<dt::ArgValue> args = {}) {
  std::vector<const dt::DTensorSpec*> specs;
  for (const dt::DTensor* t : inputs) specs.push_back(&t->spec());
  return dt::propagate(dt::OpSchema(op, specs, args));
}

}  // namespace

TEST_CASE("elementwise test ops equal the full-tensor result for every placement") {
  const std::vector<dt::Placement> choices = {R, S0, S1, Partial()};
  const int64_t w = dt::world_size();
  const std::vector<dt::Shape> shapes = {{w * 3 + 1, 5}, {4, 2 * w}, {0, 3}, {2, 1}};
  for (const dt::DeviceMesh& mesh : test_meshes()) {
    for (const dt::Shape& shape : shapes) {
      const dt::Tensor x = tt::make_input(shape, 0);
      const dt::Tensor y = tt::make_input(shape, 3);
      for (const Placements& pa : all_placements(mesh.ndim(), choices)) {
        const dt::DTensor a = dt::distribute_tensor(x, mesh, pa, std::nullopt);
        INFO(ctx(mesh, pa, {}, shape));
        REQUIRE(close(tt::t_relu(a).full_tensor(), tt::naive_relu(x)));
        REQUIRE(close(tt::t_scale(a, -1.5).full_tensor(), tt::naive_scale(x, -1.5)));
        for (const Placements& pb : {pa, Placements(mesh.ndim(), R), reversed(pa)}) {
          INFO(ctx(mesh, pa, pb, shape));
          const dt::DTensor b = dt::distribute_tensor(y, mesh, pb, std::nullopt);
          const dt::DTensor c = tt::t_add(a, b, 0.5);
          REQUIRE(c.shape() == shape);
          REQUIRE(close(c.full_tensor(), tt::naive_add(x, y, 0.5)));
        }
      }
    }
  }
}

TEST_CASE("reduction and matmul test ops equal the full-tensor result") {
  const std::vector<dt::Placement> choices = {R, S0, S1, Partial()};
  const int64_t w = dt::world_size();
  struct MmShape {
    int64_t n, k, m;
  };
  const std::vector<MmShape> mm_shapes = {
      {w * 3 + 1, w + 1, 5}, {2 * w, 2 * w, w}, {0, 3, 2}, {4, 0, 3}};
  for (const dt::DeviceMesh& mesh : test_meshes()) {
    for (const auto& s : mm_shapes) {
      const dt::Tensor x = tt::make_input(dt::Shape{s.n, s.k}, 1);
      const dt::Tensor y = tt::make_input(dt::Shape{s.k, s.m}, 2);
      const dt::Tensor want = tt::naive_mm(x, y);
      for (const Placements& pa : all_placements(mesh.ndim(), choices)) {
        const dt::DTensor a = dt::distribute_tensor(x, mesh, pa, std::nullopt);
        for (int64_t dim : {0, 1}) {
          for (bool keepdim : {false, true}) {
            INFO(ctx(mesh, pa, {}, x.sizes()) << " sum dim " << dim << " keepdim " << keepdim);
            REQUIRE(
                close(tt::t_sum(a, dim, keepdim).full_tensor(), tt::naive_sum(x, dim, keepdim)));
          }
        }
        for (const Placements& pb : {pa, reversed(pa), Placements(mesh.ndim(), R)}) {
          INFO(ctx(mesh, pa, pb, x.sizes()));
          const dt::DTensor b = dt::distribute_tensor(y, mesh, pb, std::nullopt);
          const dt::DTensor c = tt::t_mm(a, b);
          REQUIRE(c.shape() == want.sizes());
          REQUIRE(close(c.full_tensor(), want));
        }
      }
    }
  }
}

TEST_CASE("the cost model picks the expected strategy") {
  const int64_t w = dt::world_size();
  const auto& ops = tt::test_ops();
  auto mesh = dt::init_device_mesh(dt::kCPU, {w});
  const dt::Tensor x = tt::make_input({64, 8});
  const dt::Tensor y = tt::make_input({8, 4});
  auto dist = [&](const dt::Tensor& t, Placements p) {
    return dt::distribute_tensor(t, mesh, p, std::nullopt);
  };

  SECTION("Megatron rows need no redistribution") {
    const dt::DTensor a0 = dist(x, {S0}), a1 = dist(x, {S1}), ar = dist(x, {R});
    const dt::DTensor b0 = dist(y, {S0}), b1 = dist(y, {S1}), br = dist(y, {R});
    auto s = choose(*ops.mm, {&a0, &br});
    CHECK(s->outputs[0]->placements() == Placements{S0});
    CHECK_FALSE(s->needs_redistribute());
    s = choose(*ops.mm, {&ar, &b1});
    CHECK(s->outputs[0]->placements() == Placements{S1});
    CHECK_FALSE(s->needs_redistribute());
    s = choose(*ops.mm, {&a1, &b0});
    CHECK(s->outputs[0]->placements() == Placements{Partial()});
    CHECK_FALSE(s->needs_redistribute());
    s = choose(*ops.mm, {&ar, &br});
    CHECK(s->outputs[0]->placements() == Placements{R});
    CHECK(s->cost == 0);
    if (w > 1) {
      // a big, b small: gathering b beats moving a.
      s = choose(*ops.mm, {&a0, &b0});
      CHECK(s->outputs[0]->placements() == Placements{S0});
      REQUIRE(s->needs_redistribute());
      CHECK(s->required_inputs[0] == nullptr);
      CHECK(s->required_inputs[1]->placements() == Placements{R});
      CHECK(s->cost > 0);
    }
  }
  SECTION("Partial passes through linear ops and is reduce-scattered before nonlinear ones") {
    const dt::DTensor p = dist(x, {Partial()}), p2 = dist(x, {Partial()}), r = dist(x, {R});
    auto s = choose(*ops.add, {&p, &p2}, {1.0});
    CHECK(s->outputs[0]->placements() == Placements{Partial()});
    CHECK_FALSE(s->needs_redistribute());
    s = choose(*ops.scale, {&p}, {2.0});
    CHECK(s->outputs[0]->placements() == Placements{Partial()});
    if (w > 1) {
      // P + R: partitioning the replicated side (local) beats all-reducing the partial one.
      s = choose(*ops.add, {&p, &r}, {1.0});
      CHECK(s->outputs[0]->placements() == Placements{Partial()});
      REQUIRE(s->needs_redistribute());
      CHECK(s->required_inputs[0] == nullptr);
      CHECK(s->required_inputs[1]->placements() == Placements{Partial()});
      // relu(P): a reduce-scatter (into the first shard row) is cheaper than an all-reduce.
      s = choose(*ops.relu, {&p});
      CHECK(s->outputs[0]->placements() == Placements{S0});
      REQUIRE(s->needs_redistribute());
      CHECK(s->required_inputs[0]->placements() == Placements{S0});
    }
  }
  SECTION("reducing a sharded dim gives Partial(sum), other dims keep their shard") {
    const dt::DTensor a0 = dist(x, {S0}), a1 = dist(x, {S1});
    auto s = choose(*ops.sum, {&a0}, {int64_t{0}, false});
    CHECK(s->outputs[0]->placements() == Placements{Partial()});
    s = choose(*ops.sum, {&a1}, {int64_t{0}, false});
    CHECK(s->outputs[0]->placements() == Placements{S0});
    s = choose(*ops.sum, {&a1}, {int64_t{0}, true});
    CHECK(s->outputs[0]->placements() == Placements{S1});
    CHECK_FALSE(s->needs_redistribute());
  }
  SECTION("2-D mesh: rows combine per mesh dim") {
    if (w == 4) {
      auto mesh2 = dt::init_device_mesh(dt::kCPU, {2, 2}, {"dp", "tp"});
      const dt::DTensor a = dt::distribute_tensor(x, mesh2, {S0, S1}, std::nullopt);
      const dt::DTensor b = dt::distribute_tensor(y, mesh2, {R, S0}, std::nullopt);
      auto s = choose(*ops.mm, {&a, &b});
      CHECK(s->outputs[0]->placements() == Placements{S0, Partial()});
      CHECK_FALSE(s->needs_redistribute());
      const dt::DTensor c = tt::t_mm(a, b);
      CHECK(close(c.full_tensor(), tt::naive_mm(x, y)));
      // 3-D mesh [2, 2, 1]: the size-1 dim takes any row for free.
      auto mesh3 = dt::init_device_mesh(dt::kCPU, {2, 2, 1});
      const dt::DTensor a3 = dt::distribute_tensor(x, mesh3, {S0, S1, R}, std::nullopt);
      const dt::DTensor b3 = dt::distribute_tensor(y, mesh3, {R, S0, R}, std::nullopt);
      s = choose(*ops.mm, {&a3, &b3});
      CHECK(s->outputs[0]->placements() == Placements{S0, Partial(), R});
      CHECK_FALSE(s->needs_redistribute());
    }
  }
  SECTION("2-D mesh: a Partial output the call creates is charged its all-reduce") {
    if (w == 4) {
      // a @ a^T, a [64, 8] laid out [S(0), R]: gathering a^T (small) and computing on both tp
      // ranks gives [S(0), R]; chunking both replicated operands along K on the tp dim is free
      // for the inputs but leaves [S(0), P(sum)] to all-reduce, which costs more here.
      auto mesh2 = dt::init_device_mesh(dt::kCPU, {2, 2}, {"dp", "tp"});
      const dt::DTensor a = dt::distribute_tensor(x, mesh2, {S0, R}, std::nullopt);
      const dt::DTensor at =
          dt::distribute_tensor(x.transpose(0, 1).contiguous(), mesh2, {S1, R}, std::nullopt);
      auto s = choose(*ops.mm, {&a, &at});
      CHECK(s->outputs[0]->placements() == Placements{S0, R});
      REQUIRE(s->needs_redistribute());
      CHECK(s->required_inputs[0] == nullptr);
      CHECK(s->required_inputs[1]->placements() == Placements{R, R});
      // Inputs that arrive chunked are used as they are: taking them costs nothing, so the
      // Partial output is not charged (rowwise-parallel linear keeps its one all-reduce).
      const dt::DTensor ak = dt::distribute_tensor(x, mesh2, {S0, S1}, std::nullopt);
      const dt::DTensor atk =
          dt::distribute_tensor(x.transpose(0, 1).contiguous(), mesh2, {R, S0}, std::nullopt);
      s = choose(*ops.mm, {&ak, &atk});
      CHECK(s->outputs[0]->placements() == Placements{S0, Partial()});
      CHECK_FALSE(s->needs_redistribute());
    }
  }
}

TEST_CASE("ranks outside the mesh get empty local outputs") {
  const int64_t w = dt::world_size();
  const int64_t n = w >= 2 ? w / 2 : 1;
  auto mesh = dt::init_device_mesh(dt::kCPU, {n});
  const dt::Tensor x = tt::make_input({7, 3});
  const dt::DTensor a = dt::distribute_tensor(x, mesh, {S0}, std::nullopt);
  const dt::DTensor b = dt::distribute_tensor(x, mesh, {R}, std::nullopt);
  const dt::DTensor c = tt::t_add(tt::t_relu(a), b);
  CHECK(c.shape() == dt::Shape{7, 3});
  if (mesh.contains_me()) {
    CHECK(close(c.full_tensor(), tt::naive_add(tt::naive_relu(x), x, 1.0)));
  } else {
    CHECK(c.to_local().defined());
    CHECK(c.to_local().numel() == 0);
  }
}

TEST_CASE("a 100-step loop hits the propagation cache on every step after the first") {
  const int64_t w = dt::world_size();
  auto mesh = dt::init_device_mesh(dt::kCPU, {w});
  const dt::Tensor xw = tt::make_input({w * 2 + 1, 6}, 1);
  const dt::Tensor xx = tt::make_input({6, 4}, 2);
  const dt::DTensor weight = dt::distribute_tensor(xw, mesh, {S0}, std::nullopt);
  dt::DTensor h = dt::distribute_tensor(xx, mesh, {R}, std::nullopt);
  dt::clear_propagation_cache();
  constexpr int kOpsPerStep = 5;
  for (int step = 0; step < 100; ++step) {
    const dt::DTensor y = tt::t_mm(weight, h);  // [S(0)]
    const dt::DTensor z = tt::t_relu(tt::t_scale(y, 1.0 / (step + 1)));
    const dt::DTensor s = tt::t_sum(tt::t_add(z, y, 0.1 * step), 0);  // P(sum)
    REQUIRE(s.placements() == Placements{Partial()});
    if (step == 0) {
      const auto st = dt::propagation_cache_stats();
      CHECK(st.misses == kOpsPerStep);
      CHECK(st.hits == 0);
    }
  }
  const auto st = dt::propagation_cache_stats();
  if (dt::world_rank() == 0) {
    std::printf("propagation cache after 100 steps: %lld hits, %lld misses, %lld entries\n",
                static_cast<long long>(st.hits), static_cast<long long>(st.misses),
                static_cast<long long>(st.entries));
  }
  CHECK(st.misses == kOpsPerStep);
  CHECK(st.hits == 99 * kOpsPerStep);
}
