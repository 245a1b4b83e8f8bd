// The activations and pointwise ops of issue 44 (softplus, elu, celu, leaky_relu, relu6, glu,
// softmin, logaddexp, xlogy, copysign), mpirun at 1, 2 and 4 ranks: values and gradients against
// PyTorch 2.15's at the kinks and special values (0, -0.0, +-inf, NaN, large |x|; the values in
// torch_activation_refs.h are what torch_activation_refs.py prints), for replicated and sharded
// (uneven) inputs and the Tensor forms; the Tensor forms over dtypes and strided layouts; dtype
// rules and errors; Partial inputs; glu's and softmin's dim.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/softmax/softmax.h"
#include "tests/common/ops_dtensor_test_util.h"
#include "tests/ops/elementwise/torch_activation_refs.h"

namespace dt = dtensor;
namespace tt = dtensor::test;
namespace refs = torch_refs;
using dt::DTensor;
using dt::Partial;
using dt::Placements;
using dt::Replicate;
using dt::Shard;
using dt::Tensor;

namespace {

Tensor f64(const std::vector<double>& v, dt::Shape shape = {}) {
  if (shape.empty()) shape = {static_cast<int64_t>(v.size())};
  return dt::from_vector<double>(v, shape);
}

// PyTorch's values: NaN where it has NaN, the same infinities, finite values within `tol`
// relative, and (for forward values, `zero_sign`) zeros of the same sign: relu6, elu,
// leaky_relu keep -0.0, copysign makes it.
bool matches_torch(const Tensor& got, const std::vector<double>& want, bool zero_sign,
                   double tol = 1e-12) {
  if (got.dtype() != dt::kFloat64) return false;
  const std::vector<double> g = got.to_vector<double>();
  if (g.size() != want.size()) return false;
  for (size_t i = 0; i < g.size(); ++i) {
    const double a = g[i], b = want[i];
    bool ok;
    if (std::isnan(b)) {
      ok = std::isnan(a);
    } else if (std::isinf(b) || b == 0) {
      ok = a == b && (!zero_sign || std::signbit(a) == std::signbit(b));
    } else {
      ok = std::abs(a - b) <= tol * std::abs(b);
    }
    if (!ok) {
      UNSCOPED_INFO("element " << i << ": got " << a << ", PyTorch " << b);
      return false;
    }
  }
  return true;
}

using DFn = std::function<DTensor(const DTensor&)>;
using TFn = std::function<Tensor(const Tensor&)>;

// The DTensor and Tensor forms of a unary reference case.
std::pair<DFn, TFn> unary_fns(const refs::UnaryRef& r) {
  const std::string op = r.op;
  const double p0 = r.p0, p1 = r.p1;
  if (op == "softplus") {
    return {[=](const DTensor& t) { return dt::softplus(t, p0, p1); },
            [=](const Tensor& t) { return dt::softplus(t, p0, p1); }};
  }
  if (op == "elu") {
    return {[=](const DTensor& t) { return dt::elu(t, p0); },
            [=](const Tensor& t) { return dt::elu(t, p0); }};
  }
  if (op == "celu") {
    return {[=](const DTensor& t) { return dt::celu(t, p0); },
            [=](const Tensor& t) { return dt::celu(t, p0); }};
  }
  if (op == "leaky_relu") {
    return {[=](const DTensor& t) { return dt::leaky_relu(t, p0); },
            [=](const Tensor& t) { return dt::leaky_relu(t, p0); }};
  }
  REQUIRE(op == "relu6");
  return {[](const DTensor& t) { return dt::relu6(t); },
          [](const Tensor& t) { return dt::relu6(t); }};
}

using BinaryD = DTensor (*)(const DTensor&, const DTensor&);
using BinaryT = Tensor (*)(const Tensor&, const Tensor&);
std::pair<BinaryD, BinaryT> binary_fns(const std::string& op) {
  if (op == "logaddexp") return {&dt::logaddexp, &dt::logaddexp};
  if (op == "xlogy") return {&dt::xlogy, &dt::xlogy};
  REQUIRE(op == "copysign");
  return {&dt::copysign, &dt::copysign};
}

}  // namespace

TEST_CASE(
    "softplus, elu, celu, leaky_relu and relu6 give PyTorch's values and gradients at "
    "the kinks and special values") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = f64(refs::kUnaryX);  // 19 elements: uneven shards from 2 ranks
  for (const refs::UnaryRef& r : refs::kUnaryRefs) {
    const auto [fd, fl] = unary_fns(r);
    INFO(r.op << "(" << r.p0 << ", " << r.p1 << ")");
    CHECK(matches_torch(fl(x), r.y, true));
    for (const Placements& p : {Placements{Replicate()}, Placements{Shard(0)}}) {
      INFO(dt::placements_str(p));
      DTensor a = dt::distribute_tensor(x, mesh, p, std::nullopt);
      a.requires_grad_();
      const DTensor y = fd(a);
      CHECK(matches_torch(y.full_tensor(), r.y, true));
      dt::sum(y).backward();  // upstream ones, as the references
      CHECK(matches_torch(a.grad().full_tensor(), r.dx, false));
    }
  }
}

TEST_CASE(
    "logaddexp, xlogy and copysign give PyTorch's values and gradients on every pair of "
    "special values") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor a0 = f64(refs::kBinarySelf), b0 = f64(refs::kBinaryOther);  // 49 pairs
  const Placements r = {Replicate()}, s = {Shard(0)};
  for (const refs::BinaryRef& ref : refs::kBinaryRefs) {
    const auto [fd, fl] = binary_fns(ref.op);
    INFO(ref.op);
    CHECK(matches_torch(fl(a0, b0), ref.y, true));
    for (const auto& [pa, pb] : {std::pair{r, r}, {s, s}, {s, r}, {r, s}}) {
      INFO(dt::placements_str(pa) << ", " << dt::placements_str(pb));
      DTensor a = dt::distribute_tensor(a0, mesh, pa, std::nullopt);
      DTensor b = dt::distribute_tensor(b0, mesh, pb, std::nullopt);
      a.requires_grad_();
      b.requires_grad_();
      const DTensor y = fd(a, b);
      CHECK(matches_torch(y.full_tensor(), ref.y, true));
      dt::sum(y).backward();
      CHECK(matches_torch(a.grad().full_tensor(), ref.dself, false));
      CHECK(matches_torch(b.grad().full_tensor(), ref.dother, false));
    }
  }
}

TEST_CASE("glu gives PyTorch's values and gradients; its dim is whole on each rank") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = f64(refs::kGluX, {4, 6});
  CHECK(matches_torch(dt::glu(x, 1), refs::kGluY1, true));
  CHECK(matches_torch(dt::glu(x, -1), refs::kGluY1, true));
  CHECK(matches_torch(dt::glu(x, 0), refs::kGluY0, true));
  const Tensor up1 = f64(refs::kGluUp, {4, 3});
  for (int64_t dim : {1, 0}) {
    for (const Placements& p :
         {Placements{Replicate()}, Placements{Shard(0)}, Placements{Shard(1)}}) {
      INFO("dim " << dim << " " << dt::placements_str(p));
      DTensor a = dt::distribute_tensor(x, mesh, p, std::nullopt);
      a.requires_grad_();
      DTensor y;
      {
        dt::CommDebugMode comm;
        y = dt::glu(a, dim);
        // A shard of another dim stays, with no communication; the glu dim is never sharded.
        if (w > 1 && p[0].is_shard() && p[0].dim() != dim) {
          CHECK(comm.total_count() == 0);
          CHECK(y.placements() == p);
        }
        if (w > 1) CHECK_FALSE(y.placements()[0].is_shard(dim));
      }
      CHECK(matches_torch(y.full_tensor(), dim == 1 ? refs::kGluY1 : refs::kGluY0, true));
      if (dim == 1) {  // upstream kGluUp: sum(y * up)
        const DTensor up = dt::distribute_tensor(up1, mesh, {Replicate()}, std::nullopt);
        dt::sum(dt::mul(y, up)).backward();
        CHECK(matches_torch(a.grad().full_tensor(), refs::kGluDx1, false));
      } else {
        dt::sum(y).backward();
        CHECK(matches_torch(a.grad().full_tensor(), refs::kGluDx0, false));
      }
    }
  }
}

TEST_CASE("softmin gives PyTorch's values and gradients (rows with -inf, +inf, a wide spread)") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = f64(refs::kSoftminX, {5, 4});
  const Tensor up = f64(refs::kSoftminUp, {5, 4});
  for (int64_t dim : {1, 0}) {
    const std::vector<double>& want_y = dim == 1 ? refs::kSoftminY1 : refs::kSoftminY0;
    const std::vector<double>& want_dx = dim == 1 ? refs::kSoftminDx1 : refs::kSoftminDx0;
    CHECK(matches_torch(dt::softmin(x, dim), want_y, true));
    for (const Placements& p :
         {Placements{Replicate()}, Placements{Shard(0)}, Placements{Shard(1)}}) {
      INFO("dim " << dim << " " << dt::placements_str(p));
      DTensor a = dt::distribute_tensor(x, mesh, p, std::nullopt);
      a.requires_grad_();
      const DTensor y = dt::softmin(a, dim);
      if (w > 1) CHECK_FALSE(y.placements()[0].is_shard(dim));
      CHECK(matches_torch(y.full_tensor(), want_y, true));
      const DTensor u = dt::distribute_tensor(up, mesh, {Replicate()}, std::nullopt);
      dt::sum(dt::mul(y, u)).backward();
      CHECK(matches_torch(a.grad().full_tensor(), want_dx, false));
    }
  }
}

TEST_CASE(
    "the activations' Tensor forms: 16-bit and strided inputs, glu as its halves, "
    "softmin as softmax(-x)") {
  // A [6, 8] input read transposed (non-contiguous) and as is, in every floating dtype: the
  // result equals the float64 one within the dtype's rounding.
  const Tensor base = tt::det_input({6, 8}, 3, -4.0, 0.75, dt::kFloat64);
  for (dt::DType d : {dt::kFloat32, dt::kFloat64, dt::kBFloat16, dt::kFloat16}) {
    const double tol = d == dt::kBFloat16 ? 1e-2 : d == dt::kFloat16 ? 2e-3 : 1e-6;
    for (const Tensor& x64 : {base, base.transpose(0, 1)}) {
      const Tensor x = x64.to(d);
      const Tensor xr = x.to(dt::kFloat64);  // the values x holds
      INFO(dt::dtype_name(d) << " " << dt::shape_str(x.sizes()));
      const std::vector<std::pair<TFn, const char*>> fns = {
          {[](const Tensor& t) { return dt::relu6(t); }, "relu6"},
          {[](const Tensor& t) { return dt::softplus(t, 2.0, 5.0); }, "softplus"},
          {[](const Tensor& t) { return dt::elu(t, 0.5); }, "elu"},
          {[](const Tensor& t) { return dt::celu(t, 2.0); }, "celu"},
          {[](const Tensor& t) { return dt::leaky_relu(t, 0.2); }, "leaky_relu"},
          {[](const Tensor& t) { return dt::glu(t, 0); }, "glu 0"},
          {[](const Tensor& t) { return dt::glu(t, 1); }, "glu 1"},
          {[](const Tensor& t) { return dt::softmin(t, 1); }, "softmin"},
      };
      for (const auto& [f, name] : fns) {
        INFO(name);
        const Tensor got = f(x);
        CHECK(got.dtype() == d);
        CHECK(tt::same_values(got.to(dt::kFloat64), f(xr), tol));
      }
      const Tensor y = dt::xlogy(x, dt::abs(x));
      CHECK(tt::same_values(y.to(dt::kFloat64), dt::xlogy(xr, dt::abs(xr)), tol));
    }
  }
  // glu is a * sigmoid(b) of the halves; softmin is softmax of the negation, bit for bit.
  const Tensor x = tt::det_input({4, 6}, 5, -3.0, 0.5, dt::kFloat64);
  CHECK(tt::same_values(dt::glu(x, 1), dt::mul(x.narrow(1, 0, 3), dt::sigmoid(x.narrow(1, 3, 3))),
                        1e-15));
  CHECK(tt::same_values(dt::softmin(x, 0), dt::softmax(dt::neg(x), 0), 0));
  // Empty inputs give empty results.
  CHECK(dt::glu(dt::zeros({0, 4}, dt::TensorOptions(dt::kFloat32)), -1).sizes() == dt::Shape{0, 2});
  CHECK(dt::glu(dt::zeros({4, 0}, dt::TensorOptions(dt::kFloat32)), -1).sizes() == dt::Shape{4, 0});
  CHECK(dt::softplus(dt::zeros({0}, dt::TensorOptions(dt::kFloat32))).numel() == 0);
}

TEST_CASE("the activations' dtype rules and errors, Tensor and DTensor") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor ints = f64({-3, 0, 4, 7, 9}).to(dt::kInt64);
  const Tensor bools = f64({1, 0, 1, 1, 0}).to(dt::kBool);
  const Tensor f = f64({-1.5, 0, 2, 6.5, 0.25}).to(dt::kFloat32);
  auto on_mesh = [&](const Tensor& t) {
    return dt::distribute_tensor(t, mesh, {Shard(0)}, std::nullopt);
  };
  // relu6 keeps integers (PyTorch's hardtanh), refuses bool.
  CHECK(tt::same_values(dt::relu6(ints), f64({0, 0, 4, 6, 6}).to(dt::kInt64)));
  CHECK(
      tt::same_values(dt::relu6(on_mesh(ints)).full_tensor(), f64({0, 0, 4, 6, 6}).to(dt::kInt64)));
  CHECK_THROWS_WITH(dt::relu6(bools), Catch::Contains("[relu6] not supported for bool"));
  CHECK_THROWS_WITH(dt::relu6(on_mesh(bools)), Catch::Contains("[relu6] not supported for bool"));
  // The others take floating inputs only.
  CHECK_THROWS_WITH(dt::softplus(ints), Catch::Contains("[softplus] expected a floating input"));
  CHECK_THROWS_WITH(dt::elu(ints), Catch::Contains("[elu] expected a floating input"));
  CHECK_THROWS_WITH(dt::leaky_relu(bools), Catch::Contains("[leaky_relu] expected a floating"));
  CHECK_THROWS_WITH(dt::glu(ints.narrow(0, 0, 4)), Catch::Contains("[glu] expected a floating"));
  CHECK_THROWS_WITH(dt::softmin(ints, 0), Catch::Contains("[softmin]"));
  CHECK_THROWS_WITH(
      dt::softplus(on_mesh(ints)),
      Catch::Contains("[softplus] argument self has dtype int64, expected a floating"));
  CHECK_THROWS_WITH(dt::celu(on_mesh(ints)),
                    Catch::Contains("[celu] argument self has dtype int64, expected a floating"));
  CHECK_THROWS_WITH(dt::softmin(on_mesh(ints), 0), Catch::Contains("[softmin]"));
  // celu's alpha 0, glu's odd or missing dim.
  CHECK_THROWS_WITH(dt::celu(f, 0.0), Catch::Contains("[celu] alpha cannot be 0 for CELU"));
  CHECK_THROWS_WITH(dt::celu(on_mesh(f), 0.0),
                    Catch::Contains("[celu] alpha cannot be 0 for CELU"));
  CHECK_THROWS_WITH(dt::glu(f), Catch::Contains("[glu] halving dimension must be even, but "
                                                "dimension 0 is size 5"));
  CHECK_THROWS_WITH(dt::glu(on_mesh(f)), Catch::Contains("[glu] halving dimension must be even"));
  CHECK_THROWS_WITH(dt::glu(dt::zeros(dt::Shape{}, dt::TensorOptions(dt::kFloat32))),
                    Catch::Contains("[glu] glu does not support scalars"));
  CHECK_THROWS_WITH(dt::glu(f.view({5, 1}), 2), Catch::Contains("[glu]"));
  CHECK_THROWS_WITH(dt::glu(on_mesh(f.view({5, 1})), 2), Catch::Contains("[glu]"));
  // logaddexp: result_type, floating only; xlogy and copysign compute integers in float32.
  CHECK_THROWS_WITH(
      dt::logaddexp(ints, ints),
      Catch::Contains("[logaddexp] argument self has dtype int64, expected a floating"));
  CHECK_THROWS_WITH(
      dt::logaddexp(on_mesh(ints), on_mesh(ints)),
      Catch::Contains("[logaddexp] argument self has dtype int64, expected a floating"));
  CHECK(dt::logaddexp(ints, f).dtype() == dt::kFloat32);
  CHECK(tt::same_values(dt::xlogy(ints, ints), f64({refs::kNaN, 0, 4 * std::log(4.0),
                                                    7 * std::log(7.0), 9 * std::log(9.0)})
                                                   .to(dt::kFloat32)));
  CHECK(tt::same_values(dt::copysign(ints, f), f64({-3, 0, 4, 7, 9}).to(dt::kFloat32)));
  CHECK(tt::same_values(dt::copysign(bools, bools), f64({1, 0, 1, 1, 0}).to(dt::kFloat32)));
  CHECK(dt::xlogy(on_mesh(ints), on_mesh(ints)).dtype() == dt::kFloat32);
  CHECK(dt::copysign(on_mesh(bools), on_mesh(ints)).dtype() == dt::kFloat32);
  // A 0-d float64 other does not promote a float16 self (PyTorch's result_type).
  const Tensor h = f.to(dt::kFloat16),
               s = dt::full(dt::Shape{}, dt::Scalar(2.0), dt::TensorOptions(dt::kFloat64));
  CHECK(dt::logaddexp(h, s).dtype() == dt::kFloat16);
  CHECK(dt::xlogy(h, s).dtype() == dt::kFloat16);
  CHECK(dt::copysign(h, s).dtype() == dt::kFloat16);
}

TEST_CASE("Partial inputs: relu6 and logaddexp pass Partial(max/min), the others reduce first") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = tt::det_input({6, 4}, 1, -3.0, 1.5, dt::kFloat64);  // -3 .. 12
  const Tensor y = tt::det_input({6, 4}, 4, -2.0, 0.5, dt::kFloat64);
  const Placements pmax = {Partial(dt::ReduceOp::kMax)}, pmin = {Partial(dt::ReduceOp::kMin)};
  const Placements psum = {Partial()}, rep = {Replicate()};
  // Shares that differ across ranks (distribute_tensor would give every rank x itself, where
  // any row passes): the last rank holds the extreme, the others 5 per rank further from it.
  const int64_t me = dt::world_rank();
  const auto shares = [&](const Tensor& v, const Placements& p, double step) {
    return DTensor::from_local(v + dt::Scalar(step * static_cast<double>(w - 1 - me)), mesh, p,
                               false, v.shape());
  };
  const DTensor a = shares(x, pmax, -5.0);
  const DTensor b = shares(x, pmin, 5.0);
  const DTensor r = dt::distribute_tensor(y, mesh, rep, std::nullopt);
  DTensor ra, rb, la, lb;
  {
    dt::CommDebugMode comm;
    ra = dt::relu6(a);
    rb = dt::relu6(b);
    la = dt::logaddexp(a, r);
    lb = dt::logaddexp(r, b);
    CHECK(comm.total_count() == 0);
  }
  if (w > 1) {
    CHECK(ra.placements() == pmax);
    CHECK(rb.placements() == pmin);
    CHECK(la.placements() == pmax);
    CHECK(lb.placements() == pmin);
  }
  CHECK(tt::same_values(ra.full_tensor(), dt::relu6(x), 0));
  CHECK(tt::same_values(rb.full_tensor(), dt::relu6(x), 0));
  CHECK(tt::same_values(la.full_tensor(), dt::logaddexp(x, y), 1e-15));
  CHECK(tt::same_values(lb.full_tensor(), dt::logaddexp(y, x), 1e-15));
  // Both Partial(max): max f(a_i, b_i) is not f(max a, max b) (here a's maximum is on the
  // last rank and the other's on rank 0), so they are reduced.
  const DTensor y_max = DTensor::from_local(y - dt::Scalar(5.0 * static_cast<double>(me)), mesh,
                                            pmax, false, y.shape());
  const DTensor both = dt::logaddexp(a, y_max);
  CHECK(tt::same_values(both.full_tensor(), dt::logaddexp(x, y), 1e-15));
  // Not linear: a Partial(sum) input is reduced first, and the values are the full op's.
  const DTensor ps = dt::distribute_tensor(x, mesh, psum, std::nullopt);
  const std::vector<std::pair<DFn, TFn>> fns = {
      {[](const DTensor& t) { return dt::softplus(t); },
       [](const Tensor& t) { return dt::softplus(t); }},
      {[](const DTensor& t) { return dt::elu(t); }, [](const Tensor& t) { return dt::elu(t); }},
      {[](const DTensor& t) { return dt::celu(t, 2.0); },
       [](const Tensor& t) { return dt::celu(t, 2.0); }},
      {[](const DTensor& t) { return dt::leaky_relu(t); },
       [](const Tensor& t) { return dt::leaky_relu(t); }},
      {[](const DTensor& t) { return dt::relu6(t); }, [](const Tensor& t) { return dt::relu6(t); }},
      {[](const DTensor& t) { return dt::glu(t, 1); },
       [](const Tensor& t) { return dt::glu(t, 1); }},
      {[](const DTensor& t) { return dt::softmin(t, 1); },
       [](const Tensor& t) { return dt::softmin(t, 1); }},
      {[&](const DTensor& t) { return dt::xlogy(t, dt::abs(r)); },
       [&](const Tensor& t) { return dt::xlogy(t, dt::abs(y)); }},
      {[&](const DTensor& t) { return dt::copysign(t, r); },
       [&](const Tensor& t) { return dt::copysign(t, y); }},
      {[&](const DTensor& t) { return dt::logaddexp(t, r); },
       [&](const Tensor& t) { return dt::logaddexp(t, y); }},
  };
  for (size_t i = 0; i < fns.size(); ++i) {
    INFO("case " << i);
    const DTensor out = fns[i].first(ps);
    CHECK(out.placements()[0] != Partial());  // (logaddexp's may be a free Partial(max))
    CHECK(tt::same_values(out.full_tensor(), fns[i].second(x), 1e-14));
  }
}
