// DTensor einsum (mpirun at 1, 2, 4 ranks): for every input placement list on 1-D and 2-D
// meshes, uneven and empty shards included, the result equals einsum of the full tensors; the
// generated rows run without communication where they should; a loop hits the propagation
// cache; int32 operands keep int32 through sums and Partial outputs; the result never shares
// an input's storage; gradients on sharded inputs equal the single-device gradients, and those
// match finite differences (a chain of three operands, which the registered op's samples cannot
// hold).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "dtensor/autograd/engine.h"
#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/core/propagation/sharding_propagation.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/einsum.h"
#include "dtensor/ops/reduction/reduction.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace tt = dtensor::test;
using dt::DTensor;
using dt::Partial;
using dt::Placements;
using dt::Replicate;
using dt::Shape;
using dt::Shard;
using dt::Tensor;

namespace {

struct Case {
  std::string eq;
  std::vector<Shape> shapes;
};

// Sizes 3w+1 (uneven), w+1 and w-1 (empty shards at 1, 2 and 4 ranks: size 0 at one rank),
// 2 (empty shards at 4 ranks).
std::vector<Case> cases(int64_t w) {
  return {
      {"mk,kn->mn", {{3 * w + 1, w + 1}, {w + 1, 2}}},
      {"bmk,bkn->bmn", {{w + 1, 3, 2}, {w + 1, 2, 2 * w + 1}}},
      {"i,j->ij", {{3 * w + 1}, {2}}},
      {"ikl,lkj->ji", {{3, w + 1, 2}, {2, w + 1, 3 * w + 1}}},
      {"ij->ji", {{3 * w + 1, 2}}},
      {"ij->j", {{3 * w + 1, w - 1}}},
      {"ii", {{w + 1, w + 1}}},
      {"ii,ij->j", {{3, 3}, {3, w + 2}}},
      {"ij,jk->k", {{2 * w + 1, 3}, {3, w + 1}}},
      {"bij,bjk->bik", {{1, 3, w + 1}, {2 * w, w + 1, 2}}},
      {"ik,jk", {{2, 1}, {3 * w + 1, 2}}},
      {"...ij,jk->...ik", {{2, w + 1, 3}, {3, 2}}},
      {"ij,jk,kl->il", {{3 * w + 1, 2}, {2, w + 1}, {w + 1, 3}}},
  };
}

std::vector<Tensor> full_inputs(const Case& c) {
  std::vector<Tensor> full;
  int salt = 1;
  for (const Shape& s : c.shapes) full.push_back(tt::det_input(s, salt++));
  return full;
}

DTensor dist(const Tensor& t, const dt::DeviceMesh& mesh, const Placements& p) {
  return dt::distribute_tensor(t, mesh, p, std::nullopt);
}

// Placement lists for operand i given operand 0's list `p0`: on 1-D meshes every list, on 2-D
// meshes p0 (where it fits), its reverse and all-Replicate.
std::vector<Placements> partners(const dt::DeviceMesh& mesh, const Placements& p0, int64_t ndim) {
  auto fits = [&](const Placements& p) {
    for (const auto& q : p) {
      if (q.is_shard() && q.dim() >= ndim) return false;
    }
    return true;
  };
  if (mesh.ndim() == 1) return tt::placement_lists(1, tt::shard_choices(ndim), ndim);
  std::vector<Placements> out;
  for (const Placements& p : {p0, tt::reversed(p0)}) {
    if (fits(p)) out.push_back(p);
  }
  out.push_back(Placements(mesh.ndim(), Replicate()));
  return out;
}

}  // namespace

TEST_CASE("DTensor einsum equals einsum of the full tensors for every placement") {
  const int64_t w = dt::world_size();
  for (const Case& c : cases(w)) {
    const std::vector<Tensor> full = full_inputs(c);
    const Tensor want = dt::einsum(c.eq, full);
    for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
      const int64_t nd0 = static_cast<int64_t>(c.shapes[0].size());
      for (const Placements& p0 : tt::placement_lists(mesh.ndim(), tt::shard_choices(nd0), nd0)) {
        std::vector<DTensor> ops = {dist(full[0], mesh, p0)};
        if (full.size() == 1) {
          INFO(c.eq << " " << tt::describe(mesh, {p0}, full[0].sizes()));
          REQUIRE(tt::same_values(dt::einsum(c.eq, ops).full_tensor(), want));
          continue;
        }
        const int64_t nd1 = static_cast<int64_t>(c.shapes[1].size());
        for (const Placements& p1 : partners(mesh, p0, nd1)) {
          std::vector<DTensor> two = {ops[0], dist(full[1], mesh, p1)};
          for (size_t i = 2; i < full.size(); ++i) {
            two.push_back(dist(full[i], mesh, Placements(mesh.ndim(), Shard(0))));
          }
          INFO(c.eq << " " << tt::describe(mesh, {p0, p1}, full[0].sizes()));
          REQUIRE(tt::same_values(dt::einsum(c.eq, two).full_tensor(), want));
        }
      }
    }
  }
}

TEST_CASE("DTensor einsum picks the generated rows without communication") {
  const int64_t w = dt::world_size();
  auto mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = tt::det_input({w * 2 + 1, 8}, 1), y = tt::det_input({8, w + 3}, 2);
  const Tensor bx = tt::det_input({w + 1, 3, 4}, 3), by = tt::det_input({w + 1, 4, 2}, 4);
  struct Expect {
    const char* eq;
    std::vector<Tensor> in;
    std::vector<Placements> p;
    Placements out;
  };
  const std::vector<Expect> expects = {
      {"mk,kn->mn", {x, y}, {{Shard(0)}, {Replicate()}}, {Shard(0)}},
      {"mk,kn->mn", {x, y}, {{Replicate()}, {Shard(1)}}, {Shard(1)}},
      {"mk,kn->mn", {x, y}, {{Shard(1)}, {Shard(0)}}, {Partial()}},
      {"mk,kn->nm", {x, y}, {{Shard(1)}, {Shard(0)}}, {Partial()}},
      {"mk,kn->nm", {x, y}, {{Shard(0)}, {Replicate()}}, {Shard(1)}},
      {"bmk,bkn->bmn", {bx, by}, {{Shard(0)}, {Shard(0)}}, {Shard(0)}},
      {"bmk,bkn->mbn", {bx, by}, {{Shard(2)}, {Shard(1)}}, {Partial()}},
      {"mk->k", {x}, {{Shard(0)}}, {Partial()}},
      {"mk->km", {x}, {{Shard(0)}}, {Shard(1)}},
      {"mk,kn->mn", {x, y}, {{Partial()}, {Replicate()}}, {Partial()}},
  };
  for (const Expect& e : expects) {
    std::vector<DTensor> in;
    for (size_t i = 0; i < e.in.size(); ++i) in.push_back(dist(e.in[i], mesh, e.p[i]));
    INFO(e.eq << " " << dt::placements_str(e.p[0]));
    dt::CommDebugMode comm;
    const DTensor out = dt::einsum(e.eq, in);
    CHECK(comm.total_count() == 0);
    CHECK(out.placements() == e.out);
    CHECK(tt::same_values(out.full_tensor(), dt::einsum(e.eq, e.in)));
  }
  // 2-D mesh: batch on dp, contraction on tp.
  if (w == 4) {
    auto mesh2 = dt::init_device_mesh(dt::kCPU, {2, 2}, {"dp", "tp"});
    const DTensor a = dt::distribute_tensor(bx, mesh2, {Shard(0), Shard(2)}, std::nullopt);
    const DTensor b = dt::distribute_tensor(by, mesh2, {Shard(0), Shard(1)}, std::nullopt);
    dt::CommDebugMode comm;
    const DTensor c = dt::einsum("bmk,bkn->bmn", {a, b});
    CHECK(comm.total_count() == 0);
    CHECK(c.placements() == Placements{Shard(0), Partial()});
    CHECK(tt::same_values(c.full_tensor(), dt::einsum("bmk,bkn->bmn", {bx, by})));
  }
  REQUIRE_THROWS_WITH(
      dt::einsum("mk,kn->mn", {dist(x, mesh, {Shard(0)}), dist(x, mesh, {Shard(0)})}),
      Catch::Contains("[einsum] letter 'k' has size 8 in operand 0 and"));
  REQUIRE_THROWS_WITH(dt::einsum("mk,kn->mn", {dist(x, mesh, {Shard(0)})}),
                      Catch::Contains("has 2 operand terms but 1 operands were given"));
}

TEST_CASE("DTensor int32 einsum with summed letters keeps int32 for every placement") {
  const int64_t w = dt::world_size();
  auto mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = tt::det_input({2 * w + 1, 3}, 1, -5, 1, dt::kInt32);
  const Tensor y = tt::det_input({3, w + 2}, 2, -5, 1, dt::kInt32);
  const Tensor k = tt::det_input({w + 3}, 3, -5, 1, dt::kInt32);
  struct Int32Case {
    const char* eq;
    std::vector<Tensor> in;
  };
  const std::vector<Int32Case> cases = {{"ij->j", {x}},
                                        {"ij->", {x}},
                                        {"ij,k->k", {x, k}},
                                        {"ij,jk->k", {x, y}},
                                        {"ij,jk->ik", {x, y}}};
  for (const Int32Case& c : cases) {
    const Tensor want = dt::einsum(c.eq, c.in);
    REQUIRE(want.dtype() == dt::kInt32);
    const std::vector<Placements> choices = {{Shard(0)}, {Shard(1)}, {Replicate()}};
    for (const Placements& p0 : choices) {
      for (const Placements& p1 : choices) {
        if (c.in.size() == 1 && p1 != choices[0]) continue;
        std::vector<DTensor> in;
        for (size_t i = 0; i < c.in.size(); ++i) {
          const Placements& p = i == 0 ? p0 : p1;
          if (p[0].is_shard() && p[0].dim() >= c.in[i].dim()) continue;
          in.push_back(dist(c.in[i], mesh, p));
        }
        if (in.size() != c.in.size()) continue;
        INFO(c.eq << " " << dt::placements_str(p0) << " " << dt::placements_str(p1));
        const DTensor out = dt::einsum(c.eq, in);
        CHECK(out.dtype() == dt::kInt32);
        CHECK(out.to_local().dtype() == dt::kInt32);
        CHECK(tt::same_values(out.full_tensor(), want));
      }
    }
  }
}

TEST_CASE("DTensor einsum never returns an input's storage") {
  const int64_t w = dt::world_size();
  auto mesh = dt::init_device_mesh(dt::kCPU, {w});
  struct Alias {
    const char* eq;
    Shape shape;
    Placements p;
  };
  const std::vector<Alias> cases = {
      {"ij->ij", {2 * w, 3}, {Shard(0)}},     {"ij->ij", {2 * w, 3}, {Replicate()}},
      {"...", {2 * w, 3}, {Shard(1)}},        {"ij->ji", {1, 4}, {Replicate()}},
      {"bhd->hbd", {1, 3, 2}, {Replicate()}}, {"ii->i", {1, 1}, {Replicate()}}};
  for (const Alias& c : cases) {
    INFO(c.eq << " " << dt::placements_str(c.p));
    const Tensor full = tt::det_input(c.shape, 1);
    const DTensor x = dist(full, mesh, c.p);
    const DTensor y = dt::einsum(c.eq, {x});
    CHECK_FALSE(y.to_local().storage().is_same(x.to_local().storage()));
    Tensor local = y.to_local();
    local.fill_(dt::Scalar(42.0));  // in place on the result's shard: the input is untouched
    CHECK(tt::same_values(x.full_tensor(), full));
  }
}

TEST_CASE("a loop of DTensor einsums is all cache hits after the first step") {
  const int64_t w = dt::world_size();
  auto mesh = dt::init_device_mesh(dt::kCPU, {w});
  const DTensor a = dist(tt::det_input({w * 2 + 1, 8}, 1), mesh, {Shard(0)});
  const DTensor b = dist(tt::det_input({8, 3}, 2), mesh, {Replicate()});
  dt::clear_propagation_cache();
  for (int step = 0; step < 20; ++step) {
    // A fresh std::string each step: the equation is interned, so the key matches.
    const std::string eq = std::string("mk,kn") + (step % 2 ? "" : "->mn");
    const DTensor c = dt::einsum(eq, {a, b});
    REQUIRE(c.placements() == Placements{Shard(0)});
  }
  const auto st = dt::propagation_cache_stats();
  CHECK(st.misses == 1);
  CHECK(st.hits == 19);
}

namespace {

// Gradients of sum(v * einsum(eq, inputs)) with respect to every input, on `mesh` with the
// inputs laid out as `layout`, gathered.
std::vector<Tensor> grads(const std::string& eq, const std::vector<Tensor>& full,
                          const dt::DeviceMesh& mesh, const std::vector<Placements>& layout,
                          const Tensor& v) {
  std::vector<DTensor> leaves;
  for (size_t i = 0; i < full.size(); ++i) {
    DTensor d = dist(full[i], mesh, layout[i]);
    d.requires_grad_();
    leaves.push_back(d);
  }
  const DTensor out = dt::einsum(eq, leaves);
  const DTensor vv = dist(v, mesh, Placements(mesh.ndim(), Replicate()));
  dt::sum(dt::mul(out, vv)).backward();
  std::vector<Tensor> g;
  for (size_t i = 0; i < leaves.size(); ++i) {
    REQUIRE(leaves[i].grad().defined());
    CHECK(leaves[i].grad().placements() == layout[i]);
    g.push_back(leaves[i].grad().full_tensor());
  }
  return g;
}

}  // namespace

TEST_CASE("DTensor einsum gradients on sharded inputs equal the single-device gradients") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh self = dt::self_mesh();
  for (const Case& c : cases(w)) {
    const std::vector<Tensor> full = full_inputs(c);
    const Tensor out = dt::einsum(c.eq, full);
    const Tensor v = tt::det_input(out.sizes(), 7, -1.0, 0.25);
    const std::vector<Tensor> want =
        grads(c.eq, full, self, std::vector<Placements>(full.size(), {Replicate()}), v);
    for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
      const int64_t nd0 = static_cast<int64_t>(c.shapes[0].size());
      for (const Placements& p0 : tt::placement_lists(mesh.ndim(), tt::shard_choices(nd0), nd0)) {
        std::vector<Placements> layout = {p0};
        for (size_t i = 1; i < full.size(); ++i) {
          const int64_t nd = static_cast<int64_t>(c.shapes[i].size());
          bool fits = true;
          for (const auto& q : p0) fits &= !q.is_shard() || q.dim() < nd;
          layout.push_back(fits ? tt::reversed(p0) : Placements(mesh.ndim(), Shard(0)));
        }
        INFO(c.eq << " " << tt::describe(mesh, {layout[0], layout.back()}, full[0].sizes()));
        const std::vector<Tensor> got = grads(c.eq, full, mesh, layout, v);
        for (size_t i = 0; i < full.size(); ++i) {
          INFO("operand " << i);
          CHECK(tt::same_values(got[i], want[i]));
        }
      }
    }
  }
}

TEST_CASE("DTensor einsum gradients match finite differences (float64, self mesh)") {
  const dt::DeviceMesh self = dt::self_mesh();
  const std::vector<Case> checks = {
      {"ij,jk,kl->il", {{2, 3}, {3, 2}, {2, 3}}},
      {"iij,jk->ki", {{2, 2, 3}, {3, 2}}},
      {"bij,bjk", {{1, 2, 3}, {2, 3, 2}}},
      {"...i,i->", {{2, 3}, {3}}},
  };
  for (const Case& c : checks) {
    std::vector<Tensor> full;
    int salt = 3;
    for (const Shape& s : c.shapes)
      full.push_back(tt::det_input(s, salt++, -1.3, 0.37, dt::kFloat64));
    const Tensor v = tt::det_input(dt::einsum(c.eq, full).sizes(), 11, -1.1, 0.3, dt::kFloat64);
    const std::vector<Tensor> g =
        grads(c.eq, full, self, std::vector<Placements>(full.size(), {Replicate()}), v);
    auto f = [&](const std::vector<Tensor>& in) {
      const std::vector<double> y = dt::einsum(c.eq, in).to_vector<double>();
      const std::vector<double> vw = v.to_vector<double>();
      double s = 0;
      for (size_t k = 0; k < y.size(); ++k) s += y[k] * vw[k];
      return s;
    };
    for (size_t i = 0; i < full.size(); ++i) {
      const std::vector<double> gi = g[i].to_vector<double>();
      std::vector<double> base = full[i].to_vector<double>();
      for (size_t j = 0; j < base.size(); ++j) {
        const double eps = 1e-6;
        std::vector<Tensor> plus = full, minus = full;
        std::vector<double> p = base, m = base;
        p[j] += eps;
        m[j] -= eps;
        plus[i] = dt::from_vector<double>(p, full[i].sizes());
        minus[i] = dt::from_vector<double>(m, full[i].sizes());
        INFO(c.eq << " operand " << i << " element " << j);
        CHECK(gi[j] == Approx((f(plus) - f(minus)) / (2 * eps)).margin(1e-7));
      }
    }
  }
}
