// batch_norm, group_norm and instance_norm (dtensor/ops/norm/norm.h) on one process:
// values, running-statistic updates and gradients (through local DTensors) against PyTorch's
// (norm_layers_references.h), a finite-difference check of the training-mode batch-norm
// gradient, float32 / bfloat16 against float64, and the errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/tensor/compare.h"
#include "dtensor/tensor/creation.h"
#include "tests/ops/norm/norm_layers_references.h"

namespace dt = dtensor;
namespace ref = norm_layers_ref;
using dt::DTensor;
using dt::Tensor;

namespace {

// Element i = lo + scale * ((i * 37 + salt) % 101), float64 (the generator's det()).
Tensor det(dt::IntSpan shape, int salt, double lo = -1.0, double scale = 0.04) {
  std::vector<double> v(static_cast<size_t>(dt::shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = lo + scale * static_cast<double>((i * 37 + salt) % 101);
  return dt::from_vector<double>(v, shape);
}

bool close(const Tensor& got, const std::vector<double>& want, double tol = 1e-10) {
  const Tensor w = dt::from_vector<double>(want, got.shape());
  const bool ok = dt::allclose(got.to(dt::kFloat64), w, tol, tol);
  if (!ok) UNSCOPED_INFO("got " << got.str() << "\nwant " << w.str());
  return ok;
}

struct Run {
  Tensor y, gx, gw, gb;
};

// y = f(x, w, b) on local DTensors, then the gradients of sum(y * r), r = det(y's shape, 11,
// -0.5, 0.01) as in the generator.
template <class F>
Run run_grad(const Tensor& x, const Tensor& w, const Tensor& b, F f) {
  DTensor dx = dt::local_dtensor(x.clone());
  dx.requires_grad_();
  DTensor dw, db;
  if (w.defined()) (dw = dt::local_dtensor(w.clone())).requires_grad_();
  if (b.defined()) (db = dt::local_dtensor(b.clone())).requires_grad_();
  const DTensor y = f(dx, dw, db);
  const DTensor r = dt::local_dtensor(det(y.shape(), 11, -0.5, 0.01));
  dt::sum(dt::mul(y, r)).backward();
  Run out{y.to_local(), dx.grad().to_local(), Tensor(), Tensor()};
  if (w.defined()) out.gw = dw.grad().to_local();
  if (b.defined()) out.gb = db.grad().to_local();
  return out;
}

const Tensor kW = det({3}, 5, 0.5, 0.05), kB = det({3}, 6, -0.3, 0.02);
const Tensor kRm = det({3}, 7, -0.2, 0.01), kRv = det({3}, 8, 0.5, 0.02);

}  // namespace

TEST_CASE("batch_norm training equals PyTorch's: values, running statistics, gradients") {
  const Tensor x = det({4, 3, 5}, 1);
  Tensor rm = kRm.clone(), rv = kRv.clone();
  CHECK(close(dt::batch_norm(x, rm, rv, kW, kB, true, 0.1, 1e-5), ref::bn_train_y));
  CHECK(close(rm, ref::bn_train_rm));
  CHECK(close(rv, ref::bn_train_rv));  // unbiased variance in the update
  Tensor rm2 = kRm.clone(), rv2 = kRv.clone();
  const Run g = run_grad(x, kW, kB, [&](const DTensor& a, const DTensor& w, const DTensor& b) {
    return dt::batch_norm(a, dt::local_dtensor(rm2), dt::local_dtensor(rv2), w, b, true, 0.1, 1e-5);
  });
  CHECK(close(g.y, ref::bn_train_y));
  CHECK(close(rm2, ref::bn_train_rm));  // the DTensor form updates the buffer in place too
  CHECK(close(g.gx, ref::bn_train_gx, 1e-9));
  CHECK(close(g.gw, ref::bn_train_gw, 1e-9));
  CHECK(close(g.gb, ref::bn_train_gb, 1e-9));

  const Tensor x2 = det({5, 2}, 3);
  const Run p =
      run_grad(x2, Tensor(), Tensor(), [](const DTensor& a, const DTensor&, const DTensor&) {
        return dt::batch_norm(a, DTensor(), DTensor(), DTensor(), DTensor(), true, 0.3, 1e-3);
      });
  CHECK(close(p.y, ref::bn_plain_y));
  CHECK(close(p.gx, ref::bn_plain_gx, 1e-9));
}

TEST_CASE("batch_norm eval, group_norm and instance_norm equal PyTorch's") {
  const Tensor xe = det({4, 3, 2, 3}, 2);
  const Run e = run_grad(xe, kW, kB, [](const DTensor& a, const DTensor& w, const DTensor& b) {
    return dt::batch_norm(a, dt::local_dtensor(kRm), dt::local_dtensor(kRv), w, b, false);
  });
  CHECK(close(dt::batch_norm(xe, kRm, kRv, kW, kB), ref::bn_eval_y));
  CHECK(close(e.y, ref::bn_eval_y));
  CHECK(close(e.gx, ref::bn_eval_gx, 1e-9));
  CHECK(close(e.gw, ref::bn_eval_gw, 1e-9));
  CHECK(close(e.gb, ref::bn_eval_gb, 1e-9));

  const Tensor xg = det({3, 6, 2, 2}, 4);
  const Tensor w6 = det({6}, 5, 0.5, 0.05), b6 = det({6}, 6, -0.3, 0.02);
  CHECK(close(dt::group_norm(xg, 3, w6, b6), ref::gn_y));
  const Run g = run_grad(xg, w6, b6, [](const DTensor& a, const DTensor& w, const DTensor& b) {
    return dt::group_norm(a, 3, w, b);
  });
  CHECK(close(g.gx, ref::gn_gx, 1e-9));
  CHECK(close(g.gw, ref::gn_gw, 1e-9));
  CHECK(close(g.gb, ref::gn_gb, 1e-9));

  const Tensor xi = det({3, 3, 5}, 9);
  Tensor rm = kRm.clone(), rv = kRv.clone();
  CHECK(close(dt::instance_norm(xi, rm, rv, kW, kB, true, 0.2), ref::in_train_y));
  CHECK(close(rm, ref::in_train_rm));
  CHECK(close(rv, ref::in_train_rv));
  const Run i = run_grad(xi, kW, kB, [](const DTensor& a, const DTensor& w, const DTensor& b) {
    return dt::instance_norm(a, DTensor(), DTensor(), w, b, true, 0.2);
  });
  CHECK(close(i.gx, ref::in_train_gx, 1e-9));
  CHECK(close(i.gw, ref::in_train_gw, 1e-9));
  CHECK(close(i.gb, ref::in_train_gb, 1e-9));
}

TEST_CASE("training batch_norm's gradient matches central finite differences") {
  const Tensor x = det({3, 2, 4}, 13, -1.0, 0.03);
  const Tensor r = det({3, 2, 4}, 11, -0.5, 0.01);
  const Run g = run_grad(x, kW.narrow(0, 0, 2), Tensor(),
                         [](const DTensor& a, const DTensor& w, const DTensor&) {
                           return dt::batch_norm(a, DTensor(), DTensor(), w, DTensor(), true);
                         });
  auto loss = [&](const Tensor& xx) {
    return dt::sum(
               dt::mul(dt::batch_norm(xx, Tensor(), Tensor(), kW.narrow(0, 0, 2), Tensor(), true),
                       r))
        .item<double>();
  };
  const std::vector<double> xv = x.to_vector<double>(), gv = g.gx.to_vector<double>();
  const double h = 1e-6;
  for (size_t i = 0; i < xv.size(); ++i) {
    std::vector<double> p = xv, m = xv;
    p[i] += h, m[i] -= h;
    const double fd = (loss(dt::from_vector<double>(p, x.shape())) -
                       loss(dt::from_vector<double>(m, x.shape()))) /
                      (2 * h);
    CHECK(std::abs(fd - gv[i]) < 1e-6);
  }
}

TEST_CASE("float32 and bfloat16 normalisation layers agree with float64") {
  const Tensor x = det({4, 3, 5}, 1);
  const Tensor want = dt::batch_norm(x, Tensor(), Tensor(), kW, kB, true);
  const Tensor want_g = dt::group_norm(x, 3, kW, kB);
  for (const auto& [dtype, tol] : {std::pair{dt::kFloat32, 1e-5}, std::pair{dt::kBFloat16, 5e-2}}) {
    INFO(dt::dtype_name(dtype));
    const Tensor got =
        dt::batch_norm(x.to(dtype), Tensor(), Tensor(), kW.to(dtype), kB.to(dtype), true);
    CHECK(got.dtype() == dtype);
    CHECK(dt::allclose(got.to(dt::kFloat64), want, tol, tol));
    const Tensor gg = dt::group_norm(x.to(dtype), 3, kW.to(dtype), kB.to(dtype));
    CHECK(dt::allclose(gg.to(dt::kFloat64), want_g, tol, tol));
  }
}

TEST_CASE("float32 batch statistics keep a large mean's variance") {
  // E[x^2] - E[x]^2 in float32 would cancel most of the variance at mean 1000, std ~1.
  const Tensor big = dt::add(det({4, 3, 5}, 1), 1000.0);
  const Tensor want = dt::batch_norm(big, Tensor(), Tensor(), kW, kB, true);
  const Tensor got = dt::batch_norm(big.to(dt::kFloat32), Tensor(), Tensor(), kW.to(dt::kFloat32),
                                    kB.to(dt::kFloat32), true);
  CHECK(dt::allclose(got.to(dt::kFloat64), want, 1e-3, 1e-3));
  // bfloat16 (8 bits of mantissa) at mean 100: the per-channel shift stays float32, so the
  // outputs carry bfloat16's rounding of x and of the result only.
  const Tensor mid = dt::add(det({4, 3, 5}, 1), 100.0);
  const Tensor want16 =
      dt::batch_norm(mid.to(dt::kBFloat16).to(dt::kFloat64), Tensor(), Tensor(), kW, kB, true);
  const Tensor got16 = dt::batch_norm(mid.to(dt::kBFloat16), Tensor(), Tensor(),
                                      kW.to(dt::kBFloat16), kB.to(dt::kBFloat16), true);
  CHECK(got16.dtype() == dt::kBFloat16);
  CHECK(dt::allclose(got16.to(dt::kFloat64), want16, 2e-2, 2e-2));
}

TEST_CASE("batch_norm_sums: per-channel float64 sums of x and x^2, and their gradient") {
  const Tensor x = det({3, 2, 5}, 1);
  const std::vector<double> v = x.to_vector<double>();
  std::vector<double> want(4, 0.0);
  for (size_t i = 0; i < v.size(); ++i) {
    const size_t k = (i / 5) % 2;
    want[k] += v[i];
    want[2 + k] += v[i] * v[i];
  }
  for (const dt::DType dtype : {dt::kFloat64, dt::kFloat32, dt::kBFloat16}) {
    INFO(dt::dtype_name(dtype));
    const Tensor xd = x.to(dtype);
    const Tensor s = dt::batch_norm_sums(xd);
    CHECK(s.dtype() == dt::kFloat64);
    CHECK(s.shape() == dt::Shape{2, 2});
    CHECK(close(dt::batch_norm_sums(xd.to(dt::kFloat64)), s.to_vector<double>(), 1e-12));
    CHECK(close(s, want, dtype == dt::kBFloat16 ? 1e-1 : 1e-5));
    const Tensor g = dt::from_vector<double>({0.5, -1.0, 0.25, 2.0}, {2, 2});
    const Tensor gx = dt::batch_norm_sums_backward(g, xd);
    CHECK(gx.dtype() == dtype);
    std::vector<double> want_gx(v.size());
    const std::vector<double> xv = xd.to(dt::kFloat64).to_vector<double>();
    for (size_t i = 0; i < v.size(); ++i) {
      const size_t k = (i / 5) % 2;
      want_gx[i] = g.to_vector<double>()[k] + 2 * g.to_vector<double>()[2 + k] * xv[i];
    }
    CHECK(close(gx, want_gx, dtype == dt::kBFloat16 ? 1e-2 : 1e-6));
  }
  // Empty batch: zero sums.
  CHECK(close(dt::batch_norm_sums(det({0, 3}, 1)), {0, 0, 0, 0, 0, 0}));
}

TEST_CASE("normalisation layer errors name the op and the argument") {
  const Tensor x = det({4, 3, 5}, 1);
  REQUIRE_THROWS_WITH(dt::batch_norm(x, Tensor(), Tensor()),
                      Catch::Contains("[batch_norm] running_mean"));
  REQUIRE_THROWS_WITH(dt::batch_norm(x, Tensor(), Tensor(), det({4}, 1), Tensor(), true),
                      Catch::Contains("[batch_norm] weight has shape [4]"));
  REQUIRE_THROWS_WITH(dt::batch_norm(det({1, 3}, 1), Tensor(), Tensor(), Tensor(), Tensor(), true),
                      Catch::Contains("more than 1 value per channel"));
  REQUIRE_THROWS_WITH(dt::group_norm(x, 2), Catch::Contains("divisible by num_groups"));
  REQUIRE_THROWS_WITH(dt::instance_norm(det({4, 3}, 1)), Catch::Contains("[instance_norm] input"));
}
