// The vectorised layer_norm / rms_norm kernels (every compiled SIMD target) against float64
// references on sizes that are not multiples of the vector width, their statistics, and the
// backward kernels against central finite differences in float64.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "dtensor/ops/norm/norm.h"
#include "dtensor/tensor/creation.h"
#include "tests/common/local_op_test_util.h"
#include "tests/ops/common/simd_test_util.h"

namespace dt = dtensor;
using dt::DType;
using dt::Tensor;
using dt::test::check_close;
using dt::test::for_each_simd_target;
using dt::test::rand_tensor;
using dt::test::rtol_for;

namespace {

const DType kFloating[] = {dt::kFloat32, dt::kFloat64, dt::kFloat16, dt::kBFloat16};

struct RefNorm {
  std::vector<double> y, mean, rstd;
};

// Forward in double over contiguous rows of n elements.
RefNorm ref_norm(const Tensor& x, int64_t n, const Tensor& w, const Tensor& b, double eps,
                 bool rms) {
  const auto v = x.to_vector<double>();
  const auto wv = w.defined() ? w.to_vector<double>() : std::vector<double>();
  const auto bv = b.defined() ? b.to_vector<double>() : std::vector<double>();
  RefNorm r;
  r.y.resize(v.size());
  const size_t rows = n > 0 ? v.size() / n : 0;
  for (size_t row = 0; row < rows; ++row) {
    double mean = 0, var = 0;
    if (!rms) {
      for (int64_t i = 0; i < n; ++i) mean += v[row * n + i];
      mean /= n;
    }
    for (int64_t i = 0; i < n; ++i) var += (v[row * n + i] - mean) * (v[row * n + i] - mean);
    const double rstd = 1 / std::sqrt(var / n + eps);
    r.mean.push_back(mean);
    r.rstd.push_back(rstd);
    for (int64_t i = 0; i < n; ++i) {
      double y = (v[row * n + i] - mean) * rstd;
      if (!wv.empty()) y *= wv[i];
      if (!bv.empty()) y += bv[i];
      r.y[row * n + i] = y;
    }
  }
  return r;
}

struct RefGrads {
  std::vector<double> gx, gw, gb;
  std::vector<double> gx_scale;  // |terms| of grad_x, bounding its rounding error
};

// Backward in double from the forward's statistics (recomputed in double from x).
RefGrads ref_backward(const Tensor& g, const Tensor& x, int64_t n, const Tensor& w, double eps,
                      bool rms) {
  const auto gv = g.to_vector<double>(), xv = x.to_vector<double>();
  const auto wv = w.defined() ? w.to_vector<double>() : std::vector<double>(n, 1.0);
  const RefNorm f = ref_norm(x, n, Tensor(), Tensor(), eps, rms);
  RefGrads r;
  r.gx.resize(xv.size());
  r.gx_scale.resize(xv.size());
  r.gw.assign(n, 0.0);
  r.gb.assign(n, 0.0);
  for (size_t row = 0; row < f.mean.size(); ++row) {
    double a = 0, c = 0, abs_a = 0, abs_c = 0;
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = row * n + i;
      const double xhat = (xv[k] - f.mean[row]) * f.rstd[row];
      a += gv[k] * wv[i];
      c += gv[k] * wv[i] * xhat;
      abs_a += std::fabs(gv[k] * wv[i]);
      abs_c += std::fabs(gv[k] * wv[i] * xhat);
      r.gw[i] += gv[k] * xhat;
      r.gb[i] += gv[k];
    }
    if (rms) a = abs_a = 0;
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = row * n + i;
      const double xhat = (xv[k] - f.mean[row]) * f.rstd[row];
      r.gx[k] = f.rstd[row] * (gv[k] * wv[i] - a / n - xhat * c / n);
      r.gx_scale[k] =
          f.rstd[row] * (std::fabs(gv[k] * wv[i]) + abs_a / n + std::fabs(xhat) * (1 + abs_c / n));
    }
  }
  return r;
}

}  // namespace

TEST_CASE("vectorised layer_norm and rms_norm match float64 on odd sizes, every SIMD target",
          "[norm][simd]") {
  for_each_simd_target([](const std::string&) {
    for (DType d : kFloating) {
      for (int64_t n : {1, 7, 9, 33, 100, 1025}) {
        for (bool affine : {false, true}) {
          for (bool rms : {false, true}) {
            INFO(dt::dtype_name(d) << " n = " << n << " affine " << affine << " rms " << rms);
            const dt::Shape xs = {3, n}, ns = {n};
            const Tensor x = rand_tensor(xs, d, static_cast<uint64_t>(n), -3, 5);
            const Tensor w = affine ? rand_tensor(ns, d, 2, 0.5, 2) : Tensor();
            const Tensor b = affine && !rms ? rand_tensor(ns, d, 3) : Tensor();
            const double eps = 1e-5;
            const RefNorm ref = ref_norm(x, n, w, b, eps, rms);
            const double tol = 2 * rtol_for(d);
            if (rms) {
              const dt::RmsNormResult r = dt::native_rms_norm(x, ns, w, eps);
              check_close(r.output, xs, ref.y, tol, tol);
              check_close(dt::rms_norm(x, ns, w, eps), xs, ref.y, tol, tol);
              CHECK(r.rstd.dtype() == (d == dt::kFloat64 ? dt::kFloat64 : dt::kFloat32));
              check_close(r.rstd, {3, 1}, ref.rstd, tol);
            } else {
              const dt::LayerNormResult r = dt::native_layer_norm(x, ns, w, b, eps);
              check_close(r.output, xs, ref.y, tol, tol);
              check_close(dt::layer_norm(x, ns, w, b, eps), xs, ref.y, tol, tol);
              check_close(r.mean, {3, 1}, ref.mean, tol, tol);
              check_close(r.rstd, {3, 1}, ref.rstd, tol);
            }
          }
        }
      }
    }
  });
}

TEST_CASE("norm statistics keep the leading dims, with offsets and empty shapes", "[norm][simd]") {
  const Tensor x = rand_tensor({2, 3, 4, 5}, dt::kFloat32, 7);
  const auto r = dt::native_layer_norm(x, {4, 5});
  CHECK(r.mean.sizes() == dt::Shape{2, 3, 1, 1});
  CHECK(r.rstd.sizes() == dt::Shape{2, 3, 1, 1});
  CHECK(dt::native_rms_norm(x, {5}).rstd.sizes() == dt::Shape{2, 3, 4, 1});
  // A large common offset: the centred two-pass variance keeps float32 accurate to rounding of
  // the mean (|mean| * 2^-23 * rstd per output).
  const double offset = 1e3;
  const Tensor xo = rand_tensor({4, 1000}, dt::kFloat32, 8, offset - 1, offset + 1);
  const RefNorm ref = ref_norm(xo, 1000, Tensor(), Tensor(), 1e-5, false);
  check_close(dt::layer_norm(xo, {1000}), {4, 1000}, ref.y, 0, 8 * offset * 1.2e-7 * 1.8);
  // Empty: no rows, or empty rows (statistics NaN, as a mean over nothing).
  CHECK(dt::layer_norm(dt::zeros({0, 6}), {6}).numel() == 0);
  const auto e = dt::native_layer_norm(dt::zeros({3, 0}), {0});
  CHECK(e.output.numel() == 0);
  check_close(e.mean, {3, 1}, {NAN, NAN, NAN}, 0);
}

TEST_CASE("layer_norm_backward and rms_norm_backward match central finite differences",
          "[norm][backward]") {
  using S = dt::Shape;
  for (const auto& [xs, ns] : std::vector<std::pair<S, S>>{
           {{3, 5}, {5}}, {{2, 3, 4}, {3, 4}}, {{4, 1}, {1}}, {{1, 9}, {9}}}) {
    for (bool rms : {false, true}) {
      for (bool affine : {false, true}) {
        INFO("x " << dt::shape_str(xs) << " normalized " << dt::shape_str(ns) << " rms " << rms
                  << " affine " << affine);
        const Tensor x = rand_tensor(xs, dt::kFloat64, 41, -2, 2);
        const Tensor g = rand_tensor(xs, dt::kFloat64, 42, -1, 1);
        const Tensor w = affine ? rand_tensor(ns, dt::kFloat64, 43, 0.5, 2) : Tensor();
        const Tensor b = affine && !rms ? rand_tensor(ns, dt::kFloat64, 44) : Tensor();
        const double eps = 1e-3;
        // L(x, w, b) = sum(g * norm(x; w, b)).
        const auto loss = [&](const Tensor& xx, const Tensor& ww, const Tensor& bb) {
          const Tensor y =
              rms ? dt::rms_norm(xx, ns, ww, eps) : dt::layer_norm(xx, ns, ww, bb, eps);
          const auto yv = y.to_vector<double>(), gv = g.to_vector<double>();
          double l = 0;
          for (size_t k = 0; k < yv.size(); ++k) l += gv[k] * yv[k];
          return l;
        };
        const auto fd = [&](const Tensor& t, auto&& with) {
          std::vector<double> v = t.to_vector<double>(), out(v.size());
          const double h = 1e-6;
          for (size_t i = 0; i < v.size(); ++i) {
            std::vector<double> p = v, m = v;
            p[i] += h;
            m[i] -= h;
            out[i] = (with(dt::from_vector<double>(p, t.sizes())) -
                      with(dt::from_vector<double>(m, t.sizes()))) /
                     (2 * h);
          }
          return out;
        };
        Tensor gx, gw, gb;
        if (rms) {
          const auto st = dt::native_rms_norm(x, ns, w, eps);
          const auto gr = dt::rms_norm_backward(g, x, ns, st.rstd, w);
          gx = gr.grad_x;
          gw = gr.grad_weight;
        } else {
          const auto st = dt::native_layer_norm(x, ns, w, b, eps);
          const auto gr = dt::layer_norm_backward(g, x, ns, st.mean, st.rstd, w);
          gx = gr.grad_x;
          gw = gr.grad_weight;
          gb = gr.grad_bias;
          check_close(gb, ns,
                      fd(affine ? b : dt::zeros(ns, dt::kFloat64),
                         [&](const Tensor& t) { return loss(x, w, t); }),
                      1e-6, 1e-8);
        }
        check_close(gx, xs, fd(x, [&](const Tensor& t) { return loss(t, w, b); }), 1e-6, 1e-8);
        CHECK(gw.defined() == affine);
        if (affine) {
          check_close(gw, ns, fd(w, [&](const Tensor& t) { return loss(x, t, b); }), 1e-6, 1e-8);
        }
      }
    }
  }
}

TEST_CASE("norm backward kernels in every dtype agree with float64 on odd sizes",
          "[norm][backward][simd]") {
  for_each_simd_target([](const std::string&) {
    for (DType d : kFloating) {
      for (int64_t n : {1, 9, 33, 1000}) {
        for (bool rms : {false, true}) {
          INFO(dt::dtype_name(d) << " n = " << n << " rms " << rms);
          const dt::Shape xs = {5, n}, ns = {n};
          const Tensor x = rand_tensor(xs, d, 51, -2, 3);
          const Tensor g = rand_tensor(xs, d, 52, -1, 1);
          const Tensor w = rand_tensor(ns, d, 53, 0.5, 2);
          const double eps = 1e-5;
          const RefGrads ref = ref_backward(g, x, n, w, eps, rms);
          Tensor gx, gw, gb;
          if (rms) {
            const auto r =
                dt::rms_norm_backward(g, x, ns, dt::native_rms_norm(x, ns, w, eps).rstd, w);
            gx = r.grad_x;
            gw = r.grad_weight;
          } else {
            const auto st = dt::native_layer_norm(x, ns, w, Tensor(), eps);
            const auto r = dt::layer_norm_backward(g, x, ns, st.mean, st.rstd, w);
            gx = r.grad_x;
            gw = r.grad_weight;
            gb = r.grad_bias;
            CHECK(gb.dtype() == d);
            check_close(gb, ns, ref.gb, 4 * rtol_for(d), 4 * rtol_for(d));
          }
          CHECK(gx.dtype() == d);
          CHECK(gw.dtype() == d);
          check_close(gx, xs, ref.gx, 4 * rtol_for(d), 1e-6, ref.gx_scale);
          check_close(gw, ns, ref.gw, 4 * rtol_for(d), 4 * rtol_for(d));
        }
      }
    }
  });
}

TEST_CASE("norm weight and bias gradients are partial sums over the rows a caller holds",
          "[norm][backward]") {
  const Tensor x = rand_tensor({7, 3, 10}, dt::kFloat32, 61, -2, 2);
  const Tensor g = rand_tensor({7, 3, 10}, dt::kFloat32, 62);
  const Tensor w = rand_tensor({10}, dt::kFloat32, 63, 0.5, 2);
  const auto full = dt::native_layer_norm(x, {10}, w);
  const auto gf = dt::layer_norm_backward(g, x, {10}, full.mean, full.rstd, w);
  std::vector<double> gw(10, 0.0), gb(10, 0.0);
  for (auto [lo, hi] : {std::pair<int64_t, int64_t>{0, 4}, {4, 7}}) {  // uneven row shards
    const Tensor xs = x.slice(0, lo, hi), gs = g.slice(0, lo, hi);
    const auto st = dt::native_layer_norm(xs, {10}, w);
    const auto gr = dt::layer_norm_backward(gs, xs, {10}, st.mean, st.rstd, w);
    const auto a = gr.grad_weight.to_vector<double>(), b = gr.grad_bias.to_vector<double>();
    for (int i = 0; i < 10; ++i) {
      gw[i] += a[i];
      gb[i] += b[i];
    }
  }
  check_close(gf.grad_weight, {10}, gw, 1e-5, 1e-5);
  check_close(gf.grad_bias, {10}, gb, 1e-5, 1e-5);
  // output_mask drops what is not wanted.
  const auto only_x =
      dt::layer_norm_backward(g, x, {10}, full.mean, full.rstd, w, {true, false, false});
  CHECK(only_x.grad_x.defined());
  CHECK(!only_x.grad_weight.defined());
  CHECK(!only_x.grad_bias.defined());
  const auto rs = dt::native_rms_norm(x, {10});
  const auto no_w = dt::rms_norm_backward(g, x, {10}, rs.rstd, Tensor(), {false, true});
  CHECK(!no_w.grad_x.defined());
  CHECK(!no_w.grad_weight.defined());
}

TEST_CASE("norm backward errors name the op and the argument", "[norm][backward]") {
  const Tensor x = dt::zeros({2, 3});
  const auto st = dt::native_layer_norm(x, {3});
  REQUIRE_THROWS_WITH(dt::layer_norm_backward(dt::zeros({3, 2}), x, {3}, st.mean, st.rstd, {}),
                      Catch::Contains("[layer_norm_backward] grad_out of shape [3, 2]"));
  REQUIRE_THROWS_WITH(
      dt::layer_norm_backward(x, x, {3}, st.mean.to(dt::kFloat64), st.rstd, {}),
      Catch::Contains("[layer_norm_backward] mean must hold one float32 value per normalised row"));
  REQUIRE_THROWS_WITH(dt::rms_norm_backward(x, x, {3}, dt::zeros({3}), {}),
                      Catch::Contains("[rms_norm_backward] rstd must hold"));
  REQUIRE_THROWS_WITH(dt::rms_norm_backward(x, x, {2}, st.rstd, {}),
                      Catch::Contains("[rms_norm_backward] normalized_shape [2] does not match"));
}
