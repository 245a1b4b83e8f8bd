// The vectorised softmax kernels (every compiled SIMD target) against float64 references on
// sizes that are not multiples of the vector width, non-last dims and strided inputs, extreme
// values; and the backward kernels against central finite differences in float64.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "dtensor/ops/common/detail/softmax_stats.h"
#include "dtensor/ops/softmax/softmax.h"
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

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// The slices of a contiguous tensor along `dim` (non-negative): each(f) calls f(base, stride)
// per slice, element i of the slice being at flat index base + i * stride.
struct Slices {
  int64_t outer = 1, d = 1, inner = 1;
  explicit Slices(const dt::Shape& s, int64_t dim) {
    for (int64_t i = 0; i < static_cast<int64_t>(s.size()); ++i) {
      if (i < dim) outer *= s[i];
      if (i > dim) inner *= s[i];
    }
    d = s.empty() ? 1 : s[dim];
  }
  template <typename F>
  void each(F&& f) const {
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < inner; ++j) f(o * d * inner + j, inner);
    }
  }
};

// Reference softmax / log_softmax in double (PyTorch's formula, NaN rules included).
std::vector<double> ref_softmax(const Tensor& x, int64_t dim, bool log) {
  const std::vector<double> v = x.to_vector<double>();
  std::vector<double> out(v.size());
  const Slices sl(x.sizes(), dim);
  sl.each([&](int64_t base, int64_t st) {
    double mx = -kInf;
    bool nan = false;
    for (int64_t i = 0; i < sl.d; ++i) {
      nan = nan || std::isnan(v[base + i * st]);
      mx = std::max(mx, v[base + i * st]);
    }
    double sum = 0;
    for (int64_t i = 0; i < sl.d; ++i) sum += std::exp(v[base + i * st] - mx);
    for (int64_t i = 0; i < sl.d; ++i) {
      const double z = v[base + i * st] - mx;
      double r = log ? z - std::log(sum) : std::exp(z) / sum;
      if (nan || !std::isfinite(mx)) r = kNan;
      out[base + i * st] = r;
    }
  });
  return out;
}

// Reference backward in double from the forward's output y and the output gradient g, and
// per element the sum of the |terms| the formula combines (a bound on its rounding error).
struct RefBackward {
  std::vector<double> value, scale;
};

RefBackward ref_backward(const Tensor& g, const Tensor& y, int64_t dim, bool log) {
  const std::vector<double> gv = g.to_vector<double>(), yv = y.to_vector<double>();
  RefBackward r{std::vector<double>(gv.size()), std::vector<double>(gv.size())};
  const Slices sl(y.sizes(), dim);
  sl.each([&](int64_t base, int64_t st) {
    double s = 0, abs_s = 0;
    for (int64_t i = 0; i < sl.d; ++i) {
      const int64_t k = base + i * st;
      s += log ? gv[k] : gv[k] * yv[k];
      abs_s += std::fabs(log ? gv[k] : gv[k] * yv[k]);
    }
    for (int64_t i = 0; i < sl.d; ++i) {
      const int64_t k = base + i * st;
      const double e = std::exp(yv[k]);
      r.value[k] = log ? gv[k] - e * s : yv[k] * (gv[k] - s);
      r.scale[k] =
          log ? std::fabs(gv[k]) + e * abs_s : std::fabs(yv[k]) * (std::fabs(gv[k]) + abs_s);
    }
  });
  return r;
}

const DType kFloating[] = {dt::kFloat32, dt::kFloat64, dt::kFloat16, dt::kBFloat16};

// check_close that also accepts infinities: an infinite expectation must be matched exactly.
void check_close_inf(const Tensor& got, dt::IntSpan shape, std::vector<double> expect, double rtol,
                     double atol) {
  std::vector<double> g = got.to_vector<double>();
  REQUIRE(g.size() == expect.size());
  for (size_t i = 0; i < g.size(); ++i) {
    if (!std::isinf(expect[i])) continue;
    INFO("element " << i << ": got " << g[i] << ", expected " << expect[i]);
    CHECK(g[i] == expect[i]);
    expect[i] = g[i] = 0;
  }
  check_close(dt::from_vector<double>(g, shape), shape, expect, rtol, atol);
}

}  // namespace

TEST_CASE("vectorised softmax matches float64 on odd sizes, every dim, dtype and SIMD target",
          "[softmax][simd]") {
  for_each_simd_target([](const std::string&) {
    for (DType d : kFloating) {
      for (int64_t n : {1, 2, 7, 8, 9, 31, 33, 100, 257, 4097}) {
        INFO(dt::dtype_name(d) << " n = " << n);
        uint64_t seed = static_cast<uint64_t>(n) * 7 + 1;
        // The softmax dim last (row kernel), in the middle and first (gathered columns).
        const std::vector<std::pair<dt::Shape, int64_t>> cases = {
            {{3, n}, 1}, {{2, n, 3}, 1}, {{n, 5}, 0}};
        for (const auto& [shape, dim] : cases) {
          INFO("shape " << dt::shape_str(shape) << " dim " << dim);
          const Tensor x = rand_tensor(shape, d, seed++, -8, 8);
          check_close(dt::softmax(x, dim), shape, ref_softmax(x, dim, false), rtol_for(d), 1e-7);
          // log_softmax values are O(log n + 16); one rounding is relative to them.
          check_close(dt::log_softmax(x, dim), shape, ref_softmax(x, dim, true), rtol_for(d),
                      2 * rtol_for(d));
        }
      }
    }
  });
}

TEST_CASE("vectorised softmax on strided and expanded inputs equals the contiguous result",
          "[softmax][simd]") {
  const Tensor base = rand_tensor({37, 19}, dt::kFloat32, 5, -4, 4);
  const Tensor xt = base.transpose(0, 1);  // [19, 37]
  CHECK(dt::softmax(xt, 1).to_vector<float>() ==
        dt::softmax(xt.contiguous(), 1).to_vector<float>());
  const Tensor xs = base.slice(0, 0, 37, 3);  // [13, 19] stepped
  check_close(dt::log_softmax(xs, 0), xs.sizes(), ref_softmax(xs.contiguous(), 0, true), 3e-6,
              6e-6);
  const Tensor xe = rand_tensor({1, 45}, dt::kFloat64, 6).expand({3, 45});
  check_close(dt::softmax(xe, -1), {3, 45}, ref_softmax(xe.contiguous(), 1, false), 1e-12);
}

TEST_CASE("vectorised softmax handles large magnitudes, infinities, NaN and empty shapes",
          "[softmax][simd]") {
  for_each_simd_target([](const std::string&) {
    for (DType d : {dt::kFloat32, dt::kFloat64}) {
      INFO(dt::dtype_name(d));
      // Large magnitudes: only the largest few entries of a row survive; no overflow.
      const Tensor big = rand_tensor({4, 37}, d, 11, -3e4, 3e4);
      check_close(dt::softmax(big, 1), {4, 37}, ref_softmax(big, 1, false), rtol_for(d), 1e-30);
      check_close(dt::log_softmax(big, 1), {4, 37}, ref_softmax(big, 1, true), rtol_for(d), 1e-2);
      // Rows (19 wide: a full block and a tail): some -inf entries; all -inf; a +inf; a NaN.
      std::vector<double> v(4 * 19);
      for (int64_t i = 0; i < 4 * 19; ++i) v[i] = std::sin(static_cast<double>(i));
      for (int64_t i = 0; i < 19; i += 3) v[i] = -kInf;
      for (int64_t i = 19; i < 38; ++i) v[i] = -kInf;
      v[2 * 19 + 17] = kInf;
      v[3 * 19 + 18] = kNan;
      const Tensor x = dt::from_vector<double>(v, {4, 19}).to(d);
      const auto sm = ref_softmax(x, 1, false), lsm = ref_softmax(x, 1, true);
      for (int64_t i = 19; i < 4 * 19; ++i) REQUIRE(std::isnan(sm[i]));
      check_close(dt::softmax(x, 1), {4, 19}, sm, rtol_for(d), 1e-12);
      check_close_inf(dt::log_softmax(x, 1), {4, 19}, lsm, rtol_for(d), 1e-6);
      // The same rows along dim 0 (the gathered path).
      const Tensor xt = x.transpose(0, 1).contiguous();
      check_close(dt::softmax(xt, 0), {19, 4}, ref_softmax(xt, 0, false), rtol_for(d), 1e-12);
      // Empty and one-element slices.
      CHECK(dt::softmax(dt::zeros({0, 5}, dt::TensorOptions(d)), 1).numel() == 0);
      CHECK(dt::log_softmax(dt::zeros({5, 0}, dt::TensorOptions(d)), 1).numel() == 0);
      check_close(dt::softmax(dt::full({3, 1}, 7.5, dt::TensorOptions(d)), 1), {3, 1}, {1, 1, 1},
                  0.0);
      check_close(dt::log_softmax(dt::full({3, 1}, -7.5, dt::TensorOptions(d)), 1), {3, 1},
                  {0, 0, 0}, 0.0, 0.0);
    }
  });
}

TEST_CASE("softmax_with_stats gives the softmax and each row's max and sum of exponentials",
          "[softmax][simd]") {
  for_each_simd_target([](const std::string&) {
    for (DType d : kFloating) {
      // Rows of 1, 19 (a block and a tail) and 300 (several blocks, the max rising late), one
      // row of only -inf, and [2, 3, n] batch dims.
      for (int64_t n : {1, 19, 300}) {
        INFO(dt::dtype_name(d) << " n = " << n);
        std::vector<double> v =
            rand_tensor({2, 3, n}, DType::kFloat64, 40 + n, -6, 6).to_vector<double>();
        v[static_cast<size_t>(n - 1)] = 9.0;  // the max at a row's end
        for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(4 * n + i)] = -kInf;
        const Tensor x = dt::from_vector<double>(v, {2, 3, n}).to(d);
        const dt::detail::SoftmaxStats st = dt::detail::softmax_with_stats(x);
        const std::vector<double> xv = x.to_vector<double>();
        std::vector<double> want_max(6), want_sum(6);
        for (int64_t r = 0; r < 6; ++r) {
          double mx = -kInf, sum = 0;
          for (int64_t i = 0; i < n; ++i) mx = std::max(mx, xv[r * n + i]);
          for (int64_t i = 0; i < n; ++i) sum += std::exp(xv[r * n + i] - mx);
          want_max[r] = mx;
          want_sum[r] = sum;
        }
        const auto probs = ref_softmax(x, 2, false);
        const std::vector<double> got = st.out.to_vector<double>();
        for (size_t i = 0; i < probs.size(); ++i) {
          if (i / static_cast<size_t>(n) == 4) {
            CHECK(std::isnan(got[i]));  // the row that sees no key
          } else {
            CHECK(got[i] == Approx(probs[i]).epsilon(rtol_for(d)).margin(1e-7));
          }
        }
        REQUIRE(st.row_max.sizes() == dt::Shape{2, 3, 1});
        REQUIRE(st.row_sum.sizes() == dt::Shape{2, 3, 1});
        const std::vector<double> mx = st.row_max.to_vector<double>();
        const std::vector<double> sm = st.row_sum.to_vector<double>();
        for (size_t r = 0; r < 6; ++r) {
          INFO("row " << r);
          CHECK(mx[r] == want_max[r]);
          if (r == 4) {
            // No key: sum 0 where the fused kernel runs (float32 / float64), NaN in the
            // composite form (16-bit floats).
            CHECK((sm[r] == 0.0 || (std::isnan(sm[r]) && dt::is_reduced_float(d))));
          } else {
            CHECK(sm[r] == Approx(want_sum[r]).epsilon(4 * rtol_for(d)));
          }
        }
      }
    }
  });
}

TEST_CASE("softmax_with_stats: leading -inf blocks, NaN, +inf and empty rows", "[softmax][simd]") {
  for_each_simd_target([](const std::string&) {
    for (DType d : {dt::kFloat32, dt::kFloat64}) {
      INFO(dt::dtype_name(d));
      // Row 0: 100 leading -inf (whole blocks of every target) then finite values (a padding or
      // sliding-window mask); row 1 holds a NaN; row 2 a +inf.
      const int64_t n = 130;
      std::vector<double> v(static_cast<size_t>(3 * n));
      for (int64_t i = 0; i < 3 * n; ++i) v[static_cast<size_t>(i)] = std::cos(0.1 * i);
      for (int64_t i = 0; i < 100; ++i) v[static_cast<size_t>(i)] = -kInf;
      v[static_cast<size_t>(n + 77)] = kNan;
      v[static_cast<size_t>(2 * n + 5)] = kInf;
      const Tensor x = dt::from_vector<double>(v, {3, n}).to(d);
      const dt::detail::SoftmaxStats st = dt::detail::softmax_with_stats(x);
      const std::vector<double> xv = x.to_vector<double>();
      double mx = -kInf, sum = 0;
      for (int64_t i = 0; i < n; ++i) mx = std::max(mx, xv[static_cast<size_t>(i)]);
      for (int64_t i = 0; i < n; ++i) sum += std::exp(xv[static_cast<size_t>(i)] - mx);
      const std::vector<double> m = st.row_max.to_vector<double>();
      const std::vector<double> s = st.row_sum.to_vector<double>();
      CHECK(m[0] == mx);
      CHECK(s[0] == Approx(sum).epsilon(4 * rtol_for(d)));
      check_close(st.out.narrow(0, 0, 1), {1, n}, ref_softmax(x.narrow(0, 0, 1), 1, false),
                  rtol_for(d), 1e-7);
      CHECK((std::isnan(m[1]) && std::isnan(s[1])));  // NaN: max and sum NaN, as composed
      CHECK(m[2] == kInf);
      CHECK(std::isnan(s[2]));
      // An empty last dim: no key, max -inf and sum 0.
      const dt::detail::SoftmaxStats e =
          dt::detail::softmax_with_stats(dt::zeros({2, 0}, dt::TensorOptions(d)));
      CHECK(e.out.sizes() == dt::Shape{2, 0});
      CHECK(e.row_max.to_vector<double>() == std::vector<double>{-kInf, -kInf});
      CHECK(e.row_sum.to_vector<double>() == std::vector<double>{0, 0});
    }
  });
}

TEST_CASE("softmax_backward and log_softmax_backward match central finite differences",
          "[softmax][backward]") {
  using S = dt::Shape;
  for (const auto& [shape, dim] :
       std::vector<std::pair<S, int64_t>>{{{3, 5}, 1}, {{4, 3, 2}, 1}, {{4, 3}, 0}, {{1, 9}, -1}}) {
    for (bool log : {false, true}) {
      INFO("shape " << dt::shape_str(shape) << " dim " << dim << " log " << log);
      const Tensor x = rand_tensor(shape, dt::kFloat64, 21, -2, 2);
      const Tensor g = rand_tensor(shape, dt::kFloat64, 22, -1, 1);
      const auto fwd = [&](const Tensor& t) {
        return log ? dt::log_softmax(t, dim) : dt::softmax(t, dim);
      };
      const Tensor y = fwd(x);
      const Tensor gx = log ? dt::log_softmax_backward(g, y, dim) : dt::softmax_backward(g, y, dim);
      // L(x) = sum(g * f(x)); dL/dx_i by central differences.
      const std::vector<double> xv = x.to_vector<double>(), gv = g.to_vector<double>();
      std::vector<double> fd(xv.size());
      const double h = 1e-6;
      for (size_t i = 0; i < xv.size(); ++i) {
        double l[2];
        for (int s = 0; s < 2; ++s) {
          std::vector<double> xp = xv;
          xp[i] += s == 0 ? h : -h;
          const auto yp = fwd(dt::from_vector<double>(xp, shape)).to_vector<double>();
          l[s] = 0;
          for (size_t k = 0; k < yp.size(); ++k) l[s] += gv[k] * yp[k];
        }
        fd[i] = (l[0] - l[1]) / (2 * h);
      }
      check_close(gx, shape, fd, 1e-6, 1e-8);
    }
  }
}

TEST_CASE("softmax backward kernels in every dtype agree with float64 on odd sizes",
          "[softmax][backward][simd]") {
  for_each_simd_target([](const std::string&) {
    for (DType d : kFloating) {
      for (int64_t n : {1, 9, 33, 1000}) {
        for (const auto& [shape, dim] :
             std::vector<std::pair<dt::Shape, int64_t>>{{{3, n}, 1}, {{n, 4}, 0}}) {
          for (bool log : {false, true}) {
            INFO(dt::dtype_name(d)
                 << " shape " << dt::shape_str(shape) << " dim " << dim << " log " << log);
            const Tensor x = rand_tensor(shape, d, 31, -3, 3);
            const Tensor y = log ? dt::log_softmax(x, dim) : dt::softmax(x, dim);
            const Tensor g = rand_tensor(shape, d, 32, -1, 1);
            const Tensor gx =
                log ? dt::log_softmax_backward(g, y, dim) : dt::softmax_backward(g, y, dim);
            CHECK(gx.dtype() == d);
            // Reference from the same (rounded) g and y, in double.
            // Results in float16's subnormal range carry fewer bits: absolute tolerance there.
            const double atol = d == dt::kFloat16 ? 6.1e-5 * rtol_for(d) : 0.0;
            const RefBackward ref = ref_backward(g, y, dim, log);
            check_close(gx, shape, ref.value, 2 * rtol_for(d), atol, ref.scale);
          }
        }
      }
    }
  });
}

TEST_CASE("softmax backward errors name the op and the argument", "[softmax][backward]") {
  const Tensor a = dt::zeros({2, 3});
  REQUIRE_THROWS_WITH(
      dt::softmax_backward(a, dt::zeros({3, 2}), 1),
      Catch::Contains("[softmax_backward] grad_out of shape [2, 3] does not match"));
  REQUIRE_THROWS_WITH(dt::log_softmax_backward(a, dt::zeros({2, 3}, dt::kFloat64), 1),
                      Catch::Contains("[log_softmax_backward] grad_out (float32"));
  REQUIRE_THROWS_WITH(dt::softmax_backward(a, a, 2), Catch::Contains("[softmax_backward]"));
  REQUIRE_THROWS_WITH(
      dt::softmax_backward(dt::zeros({2}, dt::kInt64), dt::zeros({2}, dt::kInt64), 0),
      Catch::Contains("[softmax_backward] expected a floating dtype"));
}
