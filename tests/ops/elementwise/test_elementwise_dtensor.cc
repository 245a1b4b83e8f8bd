// DTensor elementwise ops (mpirun at 1, 2, 4 ranks): for every input placement list on 1-D and
// 2-D meshes, including uneven, broadcast and zero-size shapes, the result's full_tensor()
// equals the local op on the full tensors; Partial passes through exactly the linear ops;
// in-place ops keep self's placements.
#include <algorithm>
#include <catch2/catch.hpp>
#include <limits>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/core/propagation/sharding_propagation.h"
#include "dtensor/ops/elementwise/elementwise.h"
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

struct ShapePair {
  dt::Shape a, b;
};

std::vector<ShapePair> binary_shapes() {
  const int64_t w = dt::world_size();
  return {{{w * 3 + 1, 5}, {w * 3 + 1, 5}},  // uneven
          {{4, 2 * w + 1}, {2 * w + 1}},     // broadcast a missing dim
          {{w + 1, 1}, {1, 3}},              // broadcast size-1 dims on both sides
          {{0, 3}, {0, 3}}};                 // zero-size
}

Placements reversed(const Placements& p) {
  return Placements(p.rbegin(), p.rend());
}

}  // namespace

TEST_CASE("binary DTensor ops equal the full-tensor op for every placement") {
  using Fn = DTensor (*)(const DTensor&, const DTensor&);
  using LocalFn = Tensor (*)(const Tensor&, const Tensor&);
  struct Op {
    const char* name;
    Fn d;
    LocalFn l;
  };
  const Op ops[] = {{"add", dt::add, dt::add},
                    {"sub", dt::sub, dt::sub},
                    {"mul", dt::mul, dt::mul},
                    {"div", dt::div, dt::div},
                    {"maximum", dt::maximum, dt::maximum},
                    {"eq", dt::eq, dt::eq},
                    {"lt", dt::lt, dt::lt},
                    {"ge", dt::ge, dt::ge}};
  for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
    for (const ShapePair& s : binary_shapes()) {
      const Tensor x = tt::det_input(s.a, 0);
      const Tensor y = tt::det_input(s.b, 3, 0.5, 0.25);  // positive: safe denominators
      for (const Placements& pa :
           tt::placement_lists(mesh.ndim(), tt::standard_choices(), s.a.size())) {
        const DTensor a = dt::distribute_tensor(x, mesh, pa, std::nullopt);
        std::vector<Placements> pbs = {Placements(mesh.ndim(), Replicate()), reversed(pa)};
        if (s.a.size() == s.b.size()) pbs.push_back(pa);
        for (const Placements& pb : pbs) {
          bool fits = true;
          for (const auto& p : pb)
            fits &= !p.is_shard() || p.dim() < static_cast<int64_t>(s.b.size());
          if (!fits) continue;
          const DTensor b = dt::distribute_tensor(y, mesh, pb, std::nullopt);
          for (const Op& op : ops) {
            INFO(op.name << " " << tt::describe(mesh, {pa, pb}, s.a));
            const DTensor c = op.d(a, b);
            REQUIRE(tt::same_values(c.full_tensor(), op.l(x, y)));
          }
        }
      }
    }
  }
}

TEST_CASE("scalar, unary, where and cast DTensor ops equal the full-tensor op") {
  const int64_t w = dt::world_size();
  const std::vector<dt::Shape> shapes = {{w * 3 + 1, 5}, {2, 2 * w}, {0, 4}, {w + 1}};
  for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
    for (const dt::Shape& shape : shapes) {
      const Tensor x = tt::det_input(shape, 1);
      const Tensor pos = tt::det_input(shape, 2, 0.5, 0.25);
      const Tensor cond = dt::gt(x, dt::Scalar(0.0));
      for (const Placements& p :
           tt::placement_lists(mesh.ndim(), tt::standard_choices(), shape.size())) {
        INFO(tt::describe(mesh, {p}, shape));
        const DTensor a = dt::distribute_tensor(x, mesh, p, std::nullopt);
        const DTensor q = dt::distribute_tensor(pos, mesh, p, std::nullopt);
        CHECK(tt::same_values((a + 2.5).full_tensor(), x + dt::Scalar(2.5)));
        CHECK(tt::same_values((a * -1.5).full_tensor(), x * dt::Scalar(-1.5)));
        CHECK(tt::same_values((a / 4).full_tensor(), x / dt::Scalar(4)));
        CHECK(tt::same_values((2.0 - a).full_tensor(), dt::Scalar(2.0) - x));
        CHECK(tt::same_values((3.0 / q).full_tensor(), dt::Scalar(3.0) / pos));
        CHECK(tt::same_values(dt::gt(a, 0.5).full_tensor(), dt::gt(x, dt::Scalar(0.5))));
        CHECK(tt::same_values(dt::pow(a, 2).full_tensor(), dt::pow(x, dt::Scalar(2))));
        CHECK(tt::same_values((-a).full_tensor(), dt::neg(x)));
        CHECK(tt::same_values(dt::abs(a).full_tensor(), dt::abs(x)));
        CHECK(tt::same_values(dt::exp(a).full_tensor(), dt::exp(x)));
        CHECK(tt::same_values(dt::log(q).full_tensor(), dt::log(pos)));
        CHECK(tt::same_values(dt::sqrt(q).full_tensor(), dt::sqrt(pos)));
        CHECK(tt::same_values(dt::relu(a).full_tensor(), dt::relu(x)));
        CHECK(tt::same_values(dt::sigmoid(a).full_tensor(), dt::sigmoid(x)));
        CHECK(tt::same_values(dt::tanh(a).full_tensor(), dt::tanh(x)));
        CHECK(tt::same_values(dt::silu(a).full_tensor(), dt::silu(x)));
        CHECK(tt::same_values(dt::gelu(a, dt::GeluApproximate::kTanh).full_tensor(),
                              dt::gelu(x, dt::GeluApproximate::kTanh)));
        CHECK(tt::same_values(dt::cast(a, dt::kFloat64).full_tensor(), dt::cast(x, dt::kFloat64)));
        const DTensor c =
            dt::distribute_tensor(cond, mesh, Placements(mesh.ndim(), Replicate()), std::nullopt);
        CHECK(tt::same_values(dt::where(c, a, q).full_tensor(), dt::where(cond, x, pos)));
      }
    }
  }
}

TEST_CASE("integer and bool DTensor elementwise results are exact") {
  const int64_t w = dt::world_size();
  const dt::Shape shape = {w * 2 + 1, 3};
  const Tensor x = tt::det_input(shape, 0, -5, 1, dt::kInt64);
  const Tensor y = tt::det_input(shape, 4, 1, 1, dt::kInt32);  // nonzero
  for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
    for (const Placements& p : tt::placement_lists(mesh.ndim(), tt::standard_choices(), 2)) {
      INFO(tt::describe(mesh, {p}, shape));
      const DTensor a = dt::distribute_tensor(x, mesh, p, std::nullopt);
      const DTensor b = dt::distribute_tensor(y, mesh, reversed(p), std::nullopt);
      CHECK(tt::same_values((a + b).full_tensor(), x + y));
      CHECK(tt::same_values((a * b).full_tensor(), x * y));
      CHECK(tt::same_values((a / b).full_tensor(), x / y));  // true division: float32
      CHECK(tt::same_values(dt::ne(a, b).full_tensor(), dt::ne(x, y)));
      CHECK(tt::same_values((a * 2.5).full_tensor(), x * dt::Scalar(2.5)));  // int * float
    }
  }
}

TEST_CASE("Partial passes through linear elementwise ops only") {
  const int64_t w = dt::world_size();
  auto mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = tt::det_input({6, 4}, 0), y = tt::det_input({6, 4}, 5, 0.5, 0.25);
  const DTensor p = dt::distribute_tensor(x, mesh, {Partial()}, std::nullopt);
  const DTensor q = dt::distribute_tensor(y, mesh, {Partial()}, std::nullopt);
  const DTensor r = dt::distribute_tensor(y, mesh, {Replicate()}, std::nullopt);
  const Placements P = {Partial()};
  CHECK((p + q).placements() == P);
  CHECK((p - q).placements() == P);
  CHECK((p * r).placements() == P);
  CHECK((r * p).placements() == P);
  CHECK((p / r).placements() == P);
  CHECK((p * 3.0).placements() == P);
  CHECK((p / 3.0).placements() == P);
  CHECK((-p).placements() == P);
  CHECK(tt::same_values((p + q).full_tensor(), x + y));
  CHECK(tt::same_values((p * r).full_tensor(), x * y));
  CHECK(tt::same_values((p / r).full_tensor(), x / y));
  if (w > 1) {
    CHECK(dt::relu(p).placements() != P);
    CHECK((p + 1.0).placements() != P);  // a scalar must be added once, not once per rank
    CHECK((r / p).placements() != P);
    CHECK(dt::gt(p, q).placements() != P);
  }
  CHECK(tt::same_values((p + 1.0).full_tensor(), x + dt::Scalar(1.0)));
  CHECK(tt::same_values(dt::relu(p).full_tensor(), dt::relu(x)));
}

TEST_CASE("in-place DTensor ops keep self's placements") {
  const int64_t w = dt::world_size();
  const dt::Shape shape = {w * 3 + 1, 5};
  const Tensor x = tt::det_input(shape, 0), y = tt::det_input(shape, 6, 0.5, 0.25);
  for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
    for (const Placements& p : tt::placement_lists(mesh.ndim(), tt::standard_choices(), 2)) {
      INFO(tt::describe(mesh, {p}, shape));
      const DTensor b = dt::distribute_tensor(y, mesh, reversed(p), std::nullopt);
      // A clone: on a 1-rank mesh the local shard may be a view of x itself.
      DTensor a = dt::distribute_tensor(x.clone(), mesh, p, std::nullopt);
      const DTensor& r = dt::add_(a, b);
      CHECK(&r == &a);
      CHECK(a.placements() == p);
      CHECK(tt::same_values(a.full_tensor(), x + y));
      dt::mul_(a, 2.0);
      CHECK(a.placements() == p);
      CHECK(tt::same_values(a.full_tensor(), (x + y) * dt::Scalar(2.0)));
      dt::div_(a, b);
      CHECK(tt::same_values(a.full_tensor(), ((x + y) * dt::Scalar(2.0)) / y));
    }
  }
  if (w > 1) {
    auto mesh = dt::init_device_mesh(dt::kCPU, {w});
    const DTensor self =
        dt::distribute_tensor(x, mesh, {Partial(dt::ReduceOp::kMax)}, std::nullopt);
    const DTensor other = dt::distribute_tensor(y, mesh, {Replicate()}, std::nullopt);
    REQUIRE_THROWS_AS(dt::mul_(self, other), dt::Error);
    REQUIRE_THROWS_WITH(dt::mul_(self, other),
                        Catch::Contains("[mul_] in-place op would change placements of argument "
                                        "self from [P(max)]") &&
                            Catch::Contains("(schema: mul_("));
  }
}

TEST_CASE("copy_, fill_ and zero_ overwrite in place, keeping self's placements") {
  const int64_t w = dt::world_size();
  const dt::Shape shape = {w * 3 + 1, 5};
  const Tensor x = tt::det_input(shape, 0), y = tt::det_input(shape, 6, 0.5, 0.25);
  const Tensor row = tt::det_input({5}, 3);
  for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
    for (const Placements& p : tt::placement_lists(mesh.ndim(), tt::standard_choices(), 2)) {
      INFO(tt::describe(mesh, {p}, shape));
      DTensor a = dt::distribute_tensor(x.clone(), mesh, p, std::nullopt);
      // src in another layout (a Partial src into a Partial self moves nothing), a broadcast
      // row, and another dtype converted.
      dt::copy_(a, dt::distribute_tensor(y, mesh, reversed(p), std::nullopt));
      CHECK(a.placements() == p);
      CHECK(tt::same_values(a.full_tensor(), y));
      dt::copy_(a, dt::distribute_tensor(row.to(dt::kFloat64), mesh,
                                         Placements(p.size(), Replicate()), std::nullopt));
      CHECK(tt::same_values(a.full_tensor(), row.expand(shape).contiguous()));
      dt::zero_(a);
      CHECK(a.placements() == p);
      CHECK(tt::same_values(a.full_tensor(), dt::zeros(shape)));
      const bool partial =
          std::any_of(p.begin(), p.end(), [](const dt::Placement& q) { return q.is_partial(); });
      if (!partial) {
        dt::fill_(a, 1.5);
        CHECK(tt::same_values(a.full_tensor(), dt::full(shape, 1.5)));
      } else if (w > 1) {
        CHECK_THROWS_WITH(dt::fill_(a, 1.5),
                          Catch::Contains("in-place op would change placements"));
      }
    }
  }
}

TEST_CASE("copy_ and zero_ keep a Partial(max) or Partial(min) self, with no communication") {
  const int64_t w = dt::world_size();
  auto mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = tt::det_input({w + 2, 3}, 0), y = tt::det_input({w + 2, 3}, 4, -1.0, 0.75);
  const double rank = static_cast<double>(dt::world_rank());
  for (const dt::ReduceOp op : {dt::ReduceOp::kMax, dt::ReduceOp::kMin}) {
    INFO("Partial(" << (op == dt::ReduceOp::kMax ? "max" : "min") << ")");
    const Placements pp = {Partial(op)};
    // Every rank holds its own share (rank 0 the extreme), as after a max over sharded rows.
    const double away = op == dt::ReduceOp::kMax ? -rank : rank;
    DTensor self = DTensor::from_local(x + dt::Scalar(away), mesh, pp);
    const DTensor src = DTensor::from_local(y + dt::Scalar(2 * away), mesh, pp);
    {
      dt::CommDebugMode comm;
      dt::copy_(self, src);
      CHECK(comm.total_count() == 0);
    }
    CHECK(self.placements() == pp);
    CHECK(tt::same_values(self.full_tensor(), y));
    // A replicated src becomes each rank's share as it is (the extreme of equal values).
    dt::copy_(self, dt::distribute_tensor(x, mesh, {Replicate()}, std::nullopt));
    CHECK(self.placements() == pp);
    CHECK(tt::same_values(self.full_tensor(), x));
    dt::zero_(self);
    CHECK(self.placements() == pp);
    CHECK(tt::same_values(self.full_tensor(), dt::zeros({w + 2, 3})));
  }
}

TEST_CASE(
    "copy_ of another dtype into a Partial self is refused on every rank; selu's gradient "
    "stays finite for large inputs") {
  const int64_t w = dt::world_size();
  auto mesh = dt::init_device_mesh(dt::kCPU, {w});
  const DTensor ints =
      dt::distribute_tensor(dt::zeros({4}, dt::kInt64), mesh, {Partial()}, std::nullopt);
  const DTensor halves = dt::distribute_tensor(dt::full({4}, 0.5), mesh, {Partial()}, std::nullopt);
  CHECK_THROWS_WITH(dt::copy_(ints, halves),
                    Catch::Contains("[copy_] self is Partial") && Catch::Contains("int64"));
  DTensor x = dt::distribute_tensor(dt::full({3}, 100.0), mesh, {Replicate()}, std::nullopt);
  x.requires_grad_();
  dt::sum(dt::selu(x)).backward();
  for (double g : x.grad().full_tensor().to_vector<double>())
    CHECK(g == Approx(1.0507009873554805));
}

TEST_CASE("elementwise errors name the op and the argument") {
  const int64_t w = dt::world_size();
  auto mesh = dt::init_device_mesh(dt::kCPU, {w});
  const DTensor a = dt::distribute_tensor(tt::det_input({4, 3}), mesh, {Shard(0)}, std::nullopt);
  const DTensor b = dt::distribute_tensor(tt::det_input({4, 2}), mesh, {Shard(0)}, std::nullopt);
  REQUIRE_THROWS_WITH(dt::add(a, b),
                      Catch::Contains("[add] cannot broadcast shapes [4, 3] and [4, 2] "
                                      "(argument other)"));
  const DTensor c = dt::distribute_tensor(tt::det_input({4, 3}), mesh, {Shard(0)}, std::nullopt);
  REQUIRE_THROWS_WITH(dt::where(a, a, c),
                      Catch::Contains("[where] argument condition must be bool"));
  auto mesh2 = dt::init_device_mesh(dt::kCPU, {1, w});
  const DTensor d =
      dt::distribute_tensor(tt::det_input({4, 3}), mesh2, {Replicate(), Replicate()}, std::nullopt);
  REQUIRE_THROWS_WITH(dt::mul(a, d),
                      Catch::Contains("[mul] inputs live on different meshes (argument other)"));
}

TEST_CASE("dtype errors of unary DTensor ops are raised in meta, on every rank") {
  // A mesh of rank 0 alone: the other ranks run no kernel, yet must raise the same error.
  const dt::DeviceMesh all = tt::make_mesh({dt::world_size()});
  const dt::DeviceMesh first(dt::kCPU, std::vector<int64_t>{1}, std::vector<int>{0});
  for (const dt::DeviceMesh& mesh : {all, first}) {
    const Placements r = {Replicate()};
    const DTensor ints = dt::distribute_tensor(dt::full({3}, 2, dt::TensorOptions(dt::kInt64)),
                                               mesh, r, std::nullopt);
    const DTensor bools = dt::distribute_tensor(dt::full({3}, 1, dt::TensorOptions(dt::kBool)),
                                                mesh, r, std::nullopt);
    CHECK_THROWS_WITH(dt::frac(ints), Catch::Contains("[frac] argument self has dtype int64"));
    CHECK_THROWS_WITH(dt::gelu(ints), Catch::Contains("[gelu] argument self has dtype int64"));
    CHECK_THROWS_WITH(dt::silu(ints), Catch::Contains("expected a floating dtype"));
    using Unary = DTensor (*)(const DTensor&);
    for (Unary fn : {Unary{&dt::round}, Unary{&dt::floor}, Unary{&dt::ceil}, Unary{&dt::trunc}}) {
      CHECK_THROWS_WITH(fn(bools), Catch::Contains("not supported for bool tensors"));
    }
    CHECK_THROWS_WITH(dt::abs(bools), Catch::Contains("[abs] not supported for bool"));
    CHECK_THROWS_WITH(dt::relu(bools), Catch::Contains("[relu] not supported for bool"));
    // Integers stay legal where PyTorch allows them: rounding is the identity.
    const DTensor rounded = dt::round(ints);
    if (mesh.contains_me()) CHECK(tt::same_values(rounded.to_local(), ints.to_local()));
  }
}

TEST_CASE("pointwise math on DTensors: Partial lerp, integer division by zero on one rank") {
  const int64_t w = dt::world_size();
  auto mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = tt::det_input({6, 4}, 0), y = tt::det_input({6, 4}, 5, 0.5, 0.25);
  // lerp with a scalar weight is linear in (start, end) together: P, P -> P, no communication.
  const DTensor p = dt::distribute_tensor(x, mesh, {Partial()}, std::nullopt);
  const DTensor q = dt::distribute_tensor(y, mesh, {Partial()}, std::nullopt);
  const DTensor l = dt::lerp(p, q, 0.3);
  CHECK(l.placements() == Placements{Partial()});
  CHECK(tt::same_values(l.full_tensor(), dt::lerp(x, y, 0.3), 1e-6));
  if (w > 1) CHECK(dt::clamp(p, -1.0, 1.0).placements() != Placements{Partial()});

  // An integer zero divisor held by the last rank's shard only: every rank raises the same
  // error (no rank left waiting in a later collective), and the next op still works.
  const Tensor a = dt::arange(4 * w, dt::TensorOptions(dt::kInt64)) + 1;
  Tensor b = dt::full({4 * w}, 3, dt::TensorOptions(dt::kInt64));
  b.narrow(0, 4 * w - 1, 1).fill_(0);
  const DTensor da = dt::distribute_tensor(a, mesh, {Shard(0)}, std::nullopt);
  const DTensor db = dt::distribute_tensor(b, mesh, {Shard(0)}, std::nullopt);
  CHECK_THROWS_WITH(dt::fmod(da, db), Catch::Contains("[fmod] integer division by zero"));
  // Agreed across ranks: the message of the rank that found it, on every rank.
  if (w > 1) {
    CHECK_THROWS_WITH(dt::fmod(da, db),
                      Catch::Contains("(raised on rank " + std::to_string(w - 1) + ")"));
  }
  CHECK_THROWS_WITH(dt::remainder(da, db), Catch::Contains("[remainder] integer division"));
  CHECK_THROWS_WITH(dt::fmod(da, dt::Scalar(int64_t{0})),
                    Catch::Contains("[fmod.Scalar] integer division"));
  const Tensor ok = dt::full({4 * w}, -3, dt::TensorOptions(dt::kInt64));
  const DTensor dok = dt::distribute_tensor(ok, mesh, {Shard(0)}, std::nullopt);
  CHECK(tt::same_values(dt::remainder(da, dok).full_tensor(), dt::remainder(a, ok)));
  CHECK(tt::same_values(dt::bitwise_xor(da, dok).full_tensor(), dt::bitwise_xor(a, ok)));
  CHECK(tt::same_values(dt::clamp(da, dt::Scalar(int64_t{2}), dt::Scalar(int64_t{5})).full_tensor(),
                        dt::clamp(a, dt::Scalar(int64_t{2}), dt::Scalar(int64_t{5}))));
}

TEST_CASE("dtype errors of the pointwise math are raised in meta, on every rank") {
  const dt::DeviceMesh all = tt::make_mesh({dt::world_size()});
  const dt::DeviceMesh first(dt::kCPU, std::vector<int64_t>{1}, std::vector<int>{0});
  for (const dt::DeviceMesh& mesh : {all, first}) {
    const Placements r = {Replicate()};
    const DTensor f = dt::distribute_tensor(dt::zeros({3}), mesh, r, std::nullopt);
    const DTensor ints = dt::distribute_tensor(dt::full({3}, 2, dt::TensorOptions(dt::kInt64)),
                                               mesh, r, std::nullopt);
    const DTensor bools = dt::distribute_tensor(dt::full({3}, 1, dt::TensorOptions(dt::kBool)),
                                                mesh, r, std::nullopt);
    CHECK_THROWS_WITH(dt::bitwise_and(f, ints),
                      Catch::Contains("[bitwise_and] argument self has dtype float32"));
    CHECK_THROWS_WITH(dt::bitwise_not(f), Catch::Contains("[bitwise_not]"));
    CHECK_THROWS_WITH(dt::fmod(bools, bools),
                      Catch::Contains("[fmod] argument self has dtype bool"));
    CHECK_THROWS_WITH(dt::hypot(ints, ints),
                      Catch::Contains("[hypot] argument self has dtype int64"));
    CHECK_THROWS_WITH(dt::lerp(f, ints, 0.5),
                      Catch::Contains("[lerp.Scalar] argument end has dtype int64"));
    CHECK_THROWS_WITH(dt::addcdiv(f, ints, ints), Catch::Contains("[addcdiv] integer division"));
    CHECK_THROWS_WITH(dt::clamp(bools, 0.0, 1.0),
                      Catch::Contains("[clamp] argument self has dtype bool"));
    // square / sign of bool are PyTorch's int64 / bool (they raised "not supported for bool").
    const DTensor sq = dt::square(bools), sg = dt::sign(bools);
    CHECK(sq.dtype() == dt::kInt64);
    CHECK(sg.dtype() == dt::kBool);
    if (mesh.contains_me()) {
      CHECK(tt::same_values(sq.to_local(), dt::full({3}, 1, dt::TensorOptions(dt::kInt64))));
      CHECK(tt::same_values(sg.to_local(), bools.to_local()));
    }
    // Integer results that are legal stay exact on every layout.
    const DTensor n = dt::bitwise_not(ints);
    if (mesh.contains_me()) CHECK(tt::same_values(n.to_local(), dt::bitwise_not(ints.to_local())));
  }
}

TEST_CASE("Partial(max/min) passes through monotone unary ops, crossed through neg") {
  const int64_t w = dt::world_size();
  auto mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = tt::det_input({6, 4}, 1);
  const Placements pmax = {Partial(dt::ReduceOp::kMax)}, pmin = {Partial(dt::ReduceOp::kMin)};
  const DTensor a = dt::distribute_tensor(x, mesh, pmax, std::nullopt);
  const DTensor b = dt::distribute_tensor(x, mesh, pmin, std::nullopt);
  DTensor na, ea, rb, fb;
  {
    dt::CommDebugMode debug;
    na = -a;
    ea = dt::exp(a);
    rb = dt::relu(b);
    fb = dt::floor(b);
    CHECK(debug.total_count() == 0);
  }
  if (w > 1) {
    CHECK(na.placements() == pmin);
    CHECK(ea.placements() == pmax);
    CHECK(rb.placements() == pmin);
    CHECK(fb.placements() == pmin);
    // Not monotone over the extended reals (a rank's partial may be -inf): reduced first.
    CHECK(dt::log(a).placements() != pmax);
  }
  CHECK(tt::same_values(na.full_tensor(), -x));
  CHECK(tt::same_values(ea.full_tensor(), dt::exp(x)));
  CHECK(tt::same_values(rb.full_tensor(), dt::relu(x)));
  CHECK(tt::same_values(fb.full_tensor(), dt::floor(x)));
}

TEST_CASE(
    "add / sub of one Partial(max/min) input and a replicated one keep a Partial, as PyTorch") {
  // max(a_i) + b = max(a_i + b): PyTorch 2.15 keeps P(max) + R as P(max) (and add_ works in
  // place); dtensor reduced first and its add_ raised (docs/SEMANTICS.md, round 4).
  const int64_t w = dt::world_size();
  auto mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = tt::det_input({5, 3}, 1), y = tt::det_input({5, 3}, 2);
  const Placements pmax = {Partial(dt::ReduceOp::kMax)}, pmin = {Partial(dt::ReduceOp::kMin)};
  const DTensor r = dt::distribute_tensor(y, mesh, {Replicate()}, std::nullopt);
  const Tensor mine = x + dt::Scalar(double(dt::world_rank()));  // rank-dependent partials
  for (const Placements& p : {pmax, pmin}) {
    const DTensor a = DTensor::from_local(mine, mesh, p);
    const Tensor want = x + dt::Scalar(p == pmax ? double(w - 1) : 0.0) + y;
    DTensor s1, s2, s3;
    {
      dt::CommDebugMode debug;
      s1 = dt::add(a, r);
      s2 = dt::add(r, a);
      s3 = DTensor::from_local(mine.clone(), mesh, p);
      dt::add_(s3, r);
      CHECK(debug.total_count() == 0);
    }
    CHECK(s1.placements() == p);
    CHECK(s2.placements() == p);
    CHECK(s3.placements() == p);
    for (const DTensor& s : {s1, s2, s3}) CHECK(tt::same_values(s.full_tensor(), want));
    // sub: non-increasing in other, so R - P(max) is P(min).
    const Placements crossed = p == pmax ? pmin : pmax;
    const Tensor part = x + dt::Scalar(p == pmax ? double(w - 1) : 0.0);
    DTensor d1, d2, d3;
    {
      dt::CommDebugMode debug;
      d1 = dt::sub(a, r);
      d2 = dt::sub(r, a);
      d3 = DTensor::from_local(mine.clone(), mesh, p);
      dt::sub_(d3, r);
      CHECK(debug.total_count() == 0);
    }
    CHECK(d1.placements() == p);
    if (w > 1) CHECK(d2.placements() == crossed);
    CHECK(d3.placements() == p);
    CHECK(tt::same_values(d1.full_tensor(), part - y));
    CHECK(tt::same_values(d2.full_tensor(), y - part));
    CHECK(tt::same_values(d3.full_tensor(), part - y));
  }
  if (w > 1) {
    // Both Partial: max(a_i + b_i) is not max(a) + max(b); one input is reduced first.
    const DTensor a = DTensor::from_local(mine, mesh, pmax);
    const DTensor b =
        DTensor::from_local(y + dt::Scalar(double(w - 1 - dt::world_rank())), mesh, pmax);
    CHECK(tt::same_values(dt::add(a, b).full_tensor(), x + y + dt::Scalar(2.0 * double(w - 1))));
  }
}

// Gradients at the kinks and edges, PyTorch 2.15's: the values are what
// tests/ops/torch_grad_conventions.py prints (torch 2.15.0, float64); docs/SEMANTICS.md,
// "Gradients". Each input is sharded along its one dim (uneven, empty shards from 4 ranks) or
// replicated.
TEST_CASE(
    "gradients at the kinks are PyTorch's: hardswish at -3 and 3, clamp at its bounds, "
    "ties with tensor bounds split, atan2 at the origin, maximum / minimum with a NaN, remainder's "
    "divisor") {
  const int64_t w = dt::world_size();
  auto mesh = dt::init_device_mesh(dt::kCPU, {w});
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  const auto f64 = [](std::vector<double> v) {
    const int64_t n = static_cast<int64_t>(v.size());
    return dt::from_vector<double>(v, {n});
  };
  const std::vector<Placements> layouts = {{Replicate()}, {Shard(0)}};
  // The gradient of sum(f(x)) with respect to x, for each layout of x.
  auto grad = [&](const Tensor& x, auto f) {
    std::vector<Tensor> out;
    for (const Placements& p : layouts) {
      DTensor a = dt::distribute_tensor(x, mesh, p, std::nullopt);
      a.requires_grad_();
      dt::sum(f(a)).backward();
      out.push_back(a.grad().full_tensor());
    }
    return out;
  };
  auto all_equal = [](const std::vector<Tensor>& got, const Tensor& want) {
    for (const Tensor& g : got) {
      if (!tt::same_values(g, want, 1e-12)) return false;
    }
    return true;
  };

  // hardswish: 0 at -3 (not -0.5), 1 at 3 (not 1.5), 1 for NaN.
  const Tensor hs = f64({-4, -3, -1, 0, 1, 3, 4, nan});
  auto hardswish = [](const DTensor& t) { return dt::hardswish(t); };
  CHECK(all_equal(grad(hs, hardswish), f64({0, 0, 1.0 / 6, 0.5, 5.0 / 6, 1, 1, 1})));

  // relu: 0 at and below 0, 1 above and for NaN (PyTorch's threshold_backward: out <= 0 ? 0 : g).
  const Tensor rl = f64({-1, 0, 2, nan});
  auto relu = [](const DTensor& t) { return dt::relu(t); };
  CHECK(all_equal(grad(rl, relu), f64({0, 0, 1, 1})));

  // Scalar bounds: the gradient passes strictly inside (0 at a bound and for NaN).
  const Tensor xs = f64({-2, -1, 0, 1, 2, nan});
  const Tensor inside = f64({0, 0, 1, 0, 0, 0});
  CHECK(all_equal(grad(xs, [](const DTensor& t) { return dt::clamp(t, -1.0, 1.0); }), inside));
  CHECK(all_equal(grad(xs, [](const DTensor& t) { return dt::clip(t, -1.0, 1.0); }), inside));
  CHECK(all_equal(grad(xs, [](const DTensor& t) { return dt::clamp_min(t, -1.0); }),
                  f64({0, 0, 1, 1, 1, 0})));
  CHECK(all_equal(grad(xs, [](const DTensor& t) { return dt::clamp_max(t, 1.0); }),
                  f64({1, 1, 1, 0, 0, 0})));
  CHECK(all_equal(grad(xs, [](const DTensor& t) { return dt::clamp(t, 1.0, 1.0); }),
                  f64({0, 0, 0, 0, 0, 0})));
  CHECK(all_equal(grad(xs, [](const DTensor& t) { return dt::clamp(t, 1.0, -1.0); }),
                  f64({0, 0, 0, 0, 0, 0})));

  // atan2(y, x): 0 for both where x^2 + y^2 is 0 (the origin; 1e-170 squared underflows).
  {
    const Tensor ys = f64({0, 1e-170, 0, 1, -2}), xs2 = f64({0, 0, 1e-170, 0, 3});
    const Tensor want_y = f64({0, 0, 0, 0, 3.0 / 13}), want_x = f64({0, 0, 0, -1, 2.0 / 13});
    for (const Placements& p : layouts) {
      DTensor a = dt::distribute_tensor(ys, mesh, p, std::nullopt);
      DTensor b = dt::distribute_tensor(xs2, mesh, p, std::nullopt);
      a.requires_grad_();
      b.requires_grad_();
      dt::sum(dt::atan2(a, b)).backward();
      CHECK(tt::same_values(a.grad().full_tensor(), want_y, 1e-15));
      CHECK(tt::same_values(b.grad().full_tensor(), want_x, 1e-15));
    }
  }

  // maximum / minimum: a tie splits, the loser gets 0, and both get the whole gradient where
  // either is NaN (PyTorch's masked_fill(self < other, 0) keeps it on an unordered pair).
  {
    const Tensor as = f64({nan, 2, 1, 1, nan}), bs = f64({1, nan, 1, 2, nan});
    for (const Placements& p : layouts) {
      for (const bool is_max : {true, false}) {
        DTensor a = dt::distribute_tensor(as, mesh, p, std::nullopt);
        DTensor b = dt::distribute_tensor(bs, mesh, p, std::nullopt);
        a.requires_grad_();
        b.requires_grad_();
        dt::sum(is_max ? dt::maximum(a, b) : dt::minimum(a, b)).backward();
        CHECK(tt::same_values(a.grad().full_tensor(), f64({1, 1, 0.5, is_max ? 0.0 : 1.0, 1}),
                              1e-15));
        CHECK(tt::same_values(b.grad().full_tensor(), f64({1, 1, 0.5, is_max ? 1.0 : 0.0, 1}),
                              1e-15));
      }
    }
  }

  // remainder(x, y): y gets -g times PyTorch's floor division (from fmod, the quotient the
  // value used), not floor(x / y): at (1, 0.1) x / y rounds to 10 but the value 0.0999... is
  // 1 - 9 * 0.1; -1 % inf is inf (quotient -1); y = 0 gives -x / 0.
  {
    constexpr double inf = std::numeric_limits<double>::infinity();
    const Tensor xs3 = f64({1, -1, 3, 0.7, -1, 5, 5}), ys3 = f64({0.1, 0.1, 0.3, 0.1, inf, 0, -3});
    for (const Placements& p : layouts) {
      DTensor a = dt::distribute_tensor(xs3, mesh, p, std::nullopt);
      DTensor b = dt::distribute_tensor(ys3, mesh, p, std::nullopt);
      b.requires_grad_();
      dt::sum(dt::remainder(a, b)).backward();
      CHECK(tt::same_values(b.grad().full_tensor(), f64({-9, 10, -10, -6, 1, -inf, 2}), 1e-15));
    }
  }

  // Tensor bounds: every (x, min, max) in {0, 1, 2}^3 (x slowest), then a NaN in each place:
  // (nan, 0, 1), (nan, 1, 0), (0, nan, 1), (2, nan, 1), (0, 1, nan), (2, 1, nan).
  std::vector<double> gx, glo, ghi;
  for (int i = 0; i < 27; ++i) {
    gx.push_back(i / 9);
    glo.push_back(i / 3 % 3);
    ghi.push_back(i % 3);
  }
  gx.insert(gx.end(), {nan, nan, 0, 2, 0, 2});
  glo.insert(glo.end(), {0, 1, nan, nan, 1, 1});
  ghi.insert(ghi.end(), {1, 0, 1, 1, nan, nan});
  const Tensor x = f64(gx), lo = f64(glo), hi = f64(ghi);
  const double h = 0.5;
  const Tensor want_x = f64({1, h, h, 0, 0, 0, 0, 0, 0, 0, h, 1, 0, 1, h, 0, 0,
                             0, 0, 0, h, 0, 0, h, 0, 0, 1, 1, 1, 1, 0, 0, 1});
  const Tensor want_lo = f64({0, h, h, 0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, h, 0, 0,
                              1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  const Tensor want_hi = f64({0, 0, 0, 1, 0, 0, 1, 1, 0, 1, h, 0, 1, 0, 0, 1, 1,
                              0, 1, 1, h, 1, 1, h, 1, 1, 0, 0, 1, 0, 0, 0, 0});
  for (const auto& [px, pb] :
       {std::pair{layouts[0], layouts[0]}, {layouts[1], layouts[1]}, {layouts[1], layouts[0]}}) {
    INFO("x " << dt::placements_str(px) << ", bounds " << dt::placements_str(pb));
    DTensor a = dt::distribute_tensor(x, mesh, px, std::nullopt);
    DTensor b = dt::distribute_tensor(lo, mesh, pb, std::nullopt);
    DTensor c = dt::distribute_tensor(hi, mesh, pb, std::nullopt);
    for (DTensor* t : {&a, &b, &c}) t->requires_grad_();
    dt::sum(dt::clamp(a, b, c)).backward();
    CHECK(tt::same_values(a.grad().full_tensor(), want_x, 0));
    CHECK(tt::same_values(b.grad().full_tensor(), want_lo, 0));
    CHECK(tt::same_values(c.grad().full_tensor(), want_hi, 0));
  }
  // Broadcast bounds: each bound gets the sum of its halves.
  DTensor a = dt::distribute_tensor(dt::from_vector<double>({-1, 0, 1, 0.5, -1, 1}, {2, 3}), mesh,
                                    {Shard(1)}, std::nullopt);
  DTensor b = dt::distribute_tensor(f64({-1}), mesh, {Replicate()}, std::nullopt);
  DTensor c = dt::distribute_tensor(f64({1}), mesh, {Replicate()}, std::nullopt);
  for (DTensor* t : {&a, &b, &c}) t->requires_grad_();
  dt::sum(dt::clamp(a, b, c)).backward();
  CHECK(tt::same_values(a.grad().full_tensor(),
                        dt::from_vector<double>({0.5, 1, 0.5, 1, 0.5, 0.5}, {2, 3}), 0));
  CHECK(tt::same_values(b.grad().full_tensor(), f64({1}), 0));
  CHECK(tt::same_values(c.grad().full_tensor(), f64({1}), 0));
}

TEST_CASE(
    "pow of an int32 base with a float64 exponent: the exponent's gradient is float64 "
    "(PyTorch's)") {
  // Values: tests/ops/torch_grad_conventions.py. log of the int base was taken in float32, so
  // the gradient was off from the second significant float32 digit on (1.102790414
  // for 1.1027904114).
  const int64_t w = dt::world_size();
  auto mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = dt::from_vector<double>({1, 2, 4}, {3}).to(dt::kInt32);
  const Tensor e = dt::from_vector<double>({2, 0.5, -1}, {3});
  for (const Placements& p : {Placements{Replicate()}, Placements{Shard(0)}}) {
    DTensor a = dt::distribute_tensor(x, mesh, p, std::nullopt);
    DTensor b = dt::distribute_tensor(e, mesh, p, std::nullopt);
    b.requires_grad_();
    const DTensor y = dt::pow(a, b);
    CHECK(y.dtype() == dt::kFloat64);
    dt::sum(y).backward();
    CHECK(tt::same_values(
        b.grad().full_tensor(),
        dt::from_vector<double>({0, 0.9802581434685472, 0.34657359027997264}, {3}), 1e-15));
  }
}

TEST_CASE("comparisons of 16-bit floats with a scalar round the scalar to their dtype") {
  // tests/ops/torch_grad_conventions.py: float16 [0.1, 0.2] == 0.1 is [true, false] (0.1 rounds
  // to the float16 0.0999755859375); it compared with the float 0.1 and gave [false, false].
  const int64_t w = dt::world_size();
  auto mesh = dt::init_device_mesh(dt::kCPU, {w});
  const auto bools = [](std::vector<double> v) {
    return dt::from_vector<double>(v, {static_cast<int64_t>(v.size())}).to(dt::kBool);
  };
  for (dt::DType dtype : {dt::kFloat16, dt::kBFloat16}) {
    const Tensor x = dt::from_vector<double>({0.1, 0.2}, {2}).to(dtype);
    CHECK(dt::equal(dt::eq(x, dt::Scalar(0.1)), bools({1, 0})));
    CHECK(dt::equal(dt::lt(x, dt::Scalar(0.1)), bools({0, 0})));
    CHECK(dt::equal(dt::ge(x, dt::Scalar(0.1)), bools({1, 1})));
    for (const Placements& p : {Placements{Replicate()}, Placements{Shard(0)}}) {
      const DTensor d = dt::distribute_tensor(x, mesh, p, std::nullopt);
      CHECK(dt::equal(dt::eq(d, dt::Scalar(0.1)).full_tensor(), bools({1, 0})));
    }
  }
}

TEST_CASE("clamp with one tensor bound is maximum / minimum, values and gradients (PyTorch's)") {
  // tests/ops/torch_grad_conventions.py; an undefined bound raised "[clamp.Tensor] argument max
  // is an undefined DTensor" where PyTorch takes None.
  const int64_t w = dt::world_size();
  auto mesh = dt::init_device_mesh(dt::kCPU, {w});
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor xs = dt::from_vector<double>({1, 2, 3, nan}, {4});
  const Tensor bs = dt::from_vector<double>({2, 2, 2, 2}, {4});
  const Tensor up = dt::from_vector<double>({0, 0.5, 1, 1}, {4});
  const Tensor down = dt::from_vector<double>({1, 0.5, 0, 1}, {4});
  for (const Placements& p : {Placements{Replicate()}, Placements{Shard(0)}}) {
    for (const bool lower : {true, false}) {
      INFO(dt::placements_str(p) << (lower ? " min" : " max"));
      DTensor x = dt::distribute_tensor(xs, mesh, p, std::nullopt);
      DTensor b = dt::distribute_tensor(bs, mesh, p, std::nullopt);
      x.requires_grad_();
      b.requires_grad_();
      const DTensor y = lower ? dt::clamp(x, b, DTensor()) : dt::clamp(x, DTensor(), b);
      const Tensor want =
          dt::from_vector<double>({lower ? 2.0 : 1.0, 2, lower ? 3.0 : 2.0, nan}, {4});
      CHECK(tt::same_values(y.full_tensor(), want, 0.0));
      dt::sum(y).backward();
      CHECK(tt::same_values(x.grad().full_tensor(), lower ? up : down, 0.0));
      CHECK(tt::same_values(b.grad().full_tensor(), lower ? down : up, 0.0));
    }
  }
}
