// The reductions and distances of issue 44 (H1) against PyTorch 2.15 (torch_distance_references.h):
// median / mode (PyTorch's index and tie rules), logcumsumexp, var_mean / std_mean,
// cosine_similarity, pairwise_distance and cdist, values of the Tensor functions and values and
// gradients of the DTensor functions on local DTensors (through autograd); dtypes, empty and
// 0-d inputs, the errors. (Every strategy row, the finite-difference gradcheck and the sharded
// gradients: the registration suites; the composites on meshes: test_distance_dtensor_mpi.)
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "dtensor/dtensor.h"
#include "dtensor/ops/scan/detail/scan_kernels.h"
#include "tests/ops/common/ew_test_util.h"
#include "tests/ops/distance/torch_distance_references.h"

namespace dt = dtensor;
using dt::DTensor;
using dt::Shape;
using dt::Tensor;
using dtensor::ewtest::check_values;

namespace {

const torch_ref::Case& ref(const std::string& name) {
  for (const torch_ref::Case& c : torch_ref::kCases) {
    if (c.name == name) return c;
  }
  FAIL("no reference case " << name);
  return torch_ref::kCases.front();
}

Tensor t(const std::vector<double>& v, Shape shape) {
  return dt::from_vector<double>(v, shape);
}

void check(const Tensor& got, const std::vector<double>& expect, double tol = 1e-12) {
  check_values(got, got.sizes(), got.dtype(), expect, tol, tol);
}

// Runs `f` on local DTensors of `inputs` (requiring grad), checks its outputs against the case
// and the gradients of sum(upstream * outputs) against PyTorch's.
template <typename F>
void check_case(const std::string& name, const std::vector<Tensor>& inputs, F f,
                double tol = 1e-12) {
  INFO(name);
  const torch_ref::Case& c = ref(name);
  std::vector<DTensor> leaves;
  for (const Tensor& x : inputs) {
    leaves.push_back(dt::local_dtensor(x.clone()));
    leaves.back().requires_grad_();
  }
  const std::vector<DTensor> outs = f(leaves);
  REQUIRE(outs.size() == c.outputs.size());
  std::vector<DTensor> roots, grads;
  for (size_t o = 0; o < outs.size(); ++o) {
    check(outs[o].to_local(), c.outputs[o], tol);
    if (o < c.upstream.size()) {
      roots.push_back(outs[o]);
      grads.push_back(dt::local_dtensor(t(c.upstream[o], outs[o].shape())));
    }
  }
  if (c.grads.empty()) return;
  dt::autograd::backward(roots, grads);
  for (size_t i = 0; i < leaves.size(); ++i) check(leaves[i].grad().to_local(), c.grads[i], tol);
}

std::vector<double> as_double(const Tensor& x) {
  return x.to(dt::kFloat64).to_vector<double>();
}

}  // namespace

TEST_CASE("median and mode match PyTorch: lower median, index and tie rules, NaN", "[distance]") {
  const Tensor ties = t(torch_ref::kTies, {4, 6});
  check(dt::median(ties), ref("median_all").outputs[0]);
  const auto pair = [](const dt::ValuesIndices& v) {
    return std::vector<std::vector<double>>{as_double(v.values), as_double(v.indices)};
  };
  CHECK(pair(dt::median(ties, 1)) == ref("median_dim1").outputs);
  CHECK(pair(dt::median(ties, 0, true)) == ref("median_dim0_keep").outputs);
  CHECK(dt::median(ties, 0, true).values.sizes() == Shape{1, 6});
  CHECK(pair(dt::mode(ties, 1)) == ref("mode_dim1").outputs);
  CHECK(pair(dt::mode(ties, 0)) == ref("mode_dim0").outputs);
  const Tensor nans = t(torch_ref::kNans, {2, 4});
  check(dt::median(nans, 1).values, ref("median_nan_dim1").outputs[0]);
  CHECK(as_double(dt::median(nans, 1).indices) == ref("median_nan_dim1").outputs[1]);
  CHECK(pair(dt::mode(nans, 1)) == ref("mode_nan_dim1").outputs);
  CHECK(std::isnan(dt::median(nans).item<double>()));
  // The gradient of the whole-tensor median is shared among the elements equal to it.
  check_case("median_all", {ties},
             [](const std::vector<DTensor>& x) { return std::vector<DTensor>{dt::median(x[0])}; });
  // A NaN median: among the NaN elements (was NaN everywhere).
  check_case("median_all_nan", {nans},
             [](const std::vector<DTensor>& x) { return std::vector<DTensor>{dt::median(x[0])}; });
  // The indices' gradient rule (value_selecting_backward) along dim, on int-like ties.
  std::vector<DTensor> leaf{dt::local_dtensor(ties.clone())};
  leaf[0].requires_grad_();
  dt::median(leaf[0], -1).values.backward(dt::local_dtensor(dt::ones({4}, dt::kFloat64)));
  const std::vector<double> g = leaf[0].grad().to_local().to_vector<double>();
  const std::vector<double>& idx = ref("median_dim1").outputs[1];
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t j = 0; j < 6; ++j) CHECK(g[r * 6 + j] == (j == idx[r] ? 1.0 : 0.0));
  }
}

TEST_CASE("median and mode: dtypes, 0-d, empty inputs and errors", "[distance]") {
  const Tensor ties = t(torch_ref::kTies, {4, 6});
  for (dt::DType dtype : {dt::kFloat32, dt::kBFloat16, dt::kInt64, dt::kInt32}) {
    INFO(dt::dtype_name(dtype));
    const dt::ValuesIndices m = dt::median(ties.to(dtype), 1);
    CHECK(m.values.dtype() == dtype);
    CHECK(as_double(m.values) == ref("median_dim1").outputs[0]);
    CHECK(as_double(m.indices) == ref("median_dim1").outputs[1]);
    CHECK(as_double(dt::mode(ties.to(dtype), 0).indices) == ref("mode_dim0").outputs[1]);
  }
  const Tensor scalar = dt::full({}, dt::Scalar(5.0), dt::TensorOptions(dt::kFloat64));
  CHECK(dt::median(scalar, 0).values.dim() == 0);
  CHECK(dt::mode(scalar).indices.item<int64_t>() == 0);
  CHECK(std::isnan(dt::median(dt::empty({0, 3}, dt::TensorOptions(dt::kFloat32))).item<double>()));
  CHECK(dt::median(dt::empty({0, 3}, dt::TensorOptions(dt::kFloat64)), 1).values.sizes() ==
        Shape{0});
  CHECK_THROWS_WITH(dt::median(dt::empty({2, 0}, dt::TensorOptions(dt::kFloat64)), 1),
                    Catch::Contains("[median]") && Catch::Contains("size 0"));
  CHECK_THROWS_WITH(dt::mode(ties, 2), Catch::Contains("[mode]"));
}

TEST_CASE("logcumsumexp matches PyTorch: values with -inf, gradients, dtypes", "[distance]") {
  const Tensor x = t(torch_ref::kLcse, {3, 5});
  check(dt::logcumsumexp(x, 1), ref("logcumsumexp_dim1").outputs[0]);
  check(dt::logcumsumexp(x, -2), ref("logcumsumexp_dim0").outputs[0]);
  check_case("logcumsumexp_dim1", {x}, [](const std::vector<DTensor>& in) {
    return std::vector<DTensor>{dt::logcumsumexp(in[0], 1)};
  });
  check_case("logcumsumexp_dim0", {x}, [](const std::vector<DTensor>& in) {
    return std::vector<DTensor>{dt::logcumsumexp(in[0], 0)};
  });
  // float32 / bf16 accumulate in float64 and round once per element.
  check_values(dt::logcumsumexp(x.to(dt::kFloat32), 1), {3, 5}, dt::kFloat32,
               ref("logcumsumexp_dim1").outputs[0], 1e-6, 1e-6);
  check_values(dt::logcumsumexp(x.to(dt::kBFloat16), 1), {3, 5}, dt::kBFloat16,
               ref("logcumsumexp_dim1").outputs[0], 2e-2, 2e-2);
  const double inf = std::numeric_limits<double>::infinity();
  check(dt::logcumsumexp(t({-inf, -inf, inf, 1.0}, {4}), 0), {-inf, -inf, inf, inf});
  CHECK(dt::logcumsumexp(dt::empty({2, 0}, dt::TensorOptions(dt::kFloat64)), 1).sizes() ==
        Shape{2, 0});
  CHECK_THROWS_WITH(dt::logcumsumexp(x.to(dt::kInt64), 0),
                    Catch::Contains("[logcumsumexp]") && Catch::Contains("floating"));
}

TEST_CASE("var_mean and std_mean match PyTorch: both outputs and their gradients", "[distance]") {
  const Tensor x = t(torch_ref::kVm, {3, 4});
  const int64_t d1[] = {1}, d0[] = {0};
  const auto [v, m] = dt::var_mean(x, d1);
  check(v, ref("var_mean_dim1").outputs[0]);
  check(m, ref("var_mean_dim1").outputs[1]);
  const auto [s, m0] = dt::std_mean(x, d0, 0, true);
  CHECK(s.sizes() == Shape{1, 4});
  check(s, ref("std_mean_dim0_c0_keep").outputs[0]);
  check(m0, ref("std_mean_dim0_c0_keep").outputs[1]);
  check_case("var_mean_dim1", {x}, [](const std::vector<DTensor>& in) {
    const int64_t d[] = {1};
    auto [a, b] = dt::var_mean(in[0], d);
    return std::vector<DTensor>{a, b};
  });
  check_case("std_mean_dim0_c0_keep", {x}, [](const std::vector<DTensor>& in) {
    const int64_t d[] = {0};
    auto [a, b] = dt::std_mean(in[0], d, 0, true);
    return std::vector<DTensor>{a, b};
  });
  // One output used: the other's gradient is absent, not zero-filled wrongly.
  DTensor leaf = dt::local_dtensor(x.clone());
  leaf.requires_grad_();
  dt::sum(dt::var_mean(leaf, d1).second).backward();
  check(leaf.grad().to_local(), std::vector<double>(12, 0.25));
  CHECK_THROWS_WITH(dt::var_mean(x.to(dt::kInt64)), Catch::Contains("[var_mean]"));
}

TEST_CASE("cosine_similarity and pairwise_distance match PyTorch", "[distance]") {
  const Tensor a = t(torch_ref::kCosA, {3, 4}), b = t(torch_ref::kCosB, {3, 4});
  const Tensor c = t(torch_ref::kCosC, {4});
  check(dt::cosine_similarity(a, b), ref("cosine_dim1").outputs[0]);
  check(dt::cosine_similarity(a, c, -1), ref("cosine_bcast_dim_m1").outputs[0]);
  std::vector<double> z = torch_ref::kCosA;
  for (int i = 4; i < 8; ++i) z[i] = 0;
  check(dt::cosine_similarity(t(z, {3, 4}), b), ref("cosine_zero_row").outputs[0]);
  // A zero row: PyTorch's finite gradient (the norm's gradient is 0 there, the clamp's value eps).
  check_case(
      "cosine_zero_row", {t(z, {3, 4}), b},
      [](const std::vector<DTensor>& in) {
        return std::vector<DTensor>{dt::cosine_similarity(in[0], in[1])};
      },
      1e-9);
  check_case("cosine_dim1", {a, b}, [](const std::vector<DTensor>& in) {
    return std::vector<DTensor>{dt::cosine_similarity(in[0], in[1])};
  });
  check_case("cosine_bcast_dim_m1", {a, c}, [](const std::vector<DTensor>& in) {
    return std::vector<DTensor>{dt::cosine_similarity(in[0], in[1], -1)};
  });
  const double inf = std::numeric_limits<double>::infinity();
  for (const auto& [p, keep, name] :
       {std::tuple{2.0, false, "pairwise_p2"}, std::tuple{1.0, true, "pairwise_p1_keep"},
        std::tuple{inf, false, "pairwise_pinf"}}) {
    const double pp = p;
    const bool kk = keep;
    check(dt::pairwise_distance(a, b, pp, 1e-6, kk), ref(name).outputs[0]);
    CHECK(dt::pairwise_distance(a, b, pp, 1e-6, kk).sizes() == (kk ? Shape{3, 1} : Shape{3}));
    check_case(name, {a, b}, [pp, kk](const std::vector<DTensor>& in) {
      return std::vector<DTensor>{dt::pairwise_distance(in[0], in[1], pp, 1e-6, kk)};
    });
  }
}

TEST_CASE("cdist matches PyTorch for p 2, 1, inf, 3, 0, 1.5: values and gradients", "[distance]") {
  const Tensor x1 = t(torch_ref::kX1, {2, 3, 4}), x2 = t(torch_ref::kX2, {2, 5, 4});
  const double inf = std::numeric_limits<double>::infinity();
  for (const auto& [p, name] :
       {std::pair{2.0, "cdist_p2"}, std::pair{1.0, "cdist_p1"}, std::pair{inf, "cdist_pinf"},
        std::pair{3.0, "cdist_p3"}, std::pair{0.0, "cdist_p0"}, std::pair{1.5, "cdist_p1.5"}}) {
    const double pp = p;
    check(dt::cdist(x1, x2, pp), ref(name).outputs[0], 1e-10);
    check_case(
        name, {x1, x2},
        [pp](const std::vector<DTensor>& in) {
          return std::vector<DTensor>{dt::cdist(in[0], in[1], pp)};
        },
        1e-10);
    // float32 and bf16 run in float64 and round once.
    check_values(dt::cdist(x1.to(dt::kFloat32), x2.to(dt::kFloat32), pp), {2, 3, 5}, dt::kFloat32,
                 ref(name).outputs[0], 1e-5, 1e-5);
    check_values(dt::cdist(x1.to(dt::kBFloat16), x2.to(dt::kBFloat16), pp), {2, 3, 5},
                 dt::kBFloat16, ref(name).outputs[0], 3e-2, 3e-2);
  }
  // p < 1 where a component of a difference is 0: that component's gradient is 0 (PyTorch's
  // subgradient; was 0 * inf = NaN).
  check_case("cdist_p0.5_zero_diff", {t(torch_ref::kCdA, {2, 3}), t(torch_ref::kCdB, {3, 3})},
             [](const std::vector<DTensor>& in) {
               return std::vector<DTensor>{dt::cdist(in[0], in[1], 0.5)};
             });
  // A NaN component (the parity sweep's edge inputs): p 0 counts it NaN (it counted 1); its
  // gradient is NaN for p 1 and 3 (it was 0: sign(NaN) was taken as 0), the others' theirs.
  for (const auto& [p, name] : {std::pair{0.0, "cdist_p0_nan"}, std::pair{1.0, "cdist_p1_nan"},
                                std::pair{3.0, "cdist_p3_nan"}}) {
    const double pp = p;
    check_case(name, {t(torch_ref::kCdN, {2, 3}), t(torch_ref::kCdB, {3, 3})},
               [pp](const std::vector<DTensor>& in) {
                 return std::vector<DTensor>{dt::cdist(in[0], in[1], pp)};
               });
  }
  // 2-D inputs, empty P and M, non-contiguous inputs.
  const Tensor a = x1.reshape({6, 4}), b = x2.reshape({10, 4});
  CHECK(dt::cdist(a, b).sizes() == Shape{6, 10});
  CHECK(dt::cdist(dt::empty({0, 4}, dt::TensorOptions(dt::kFloat64)), b).sizes() == Shape{0, 10});
  check(dt::cdist(dt::empty({2, 0}, dt::TensorOptions(dt::kFloat64)),
                  dt::empty({3, 0}, dt::TensorOptions(dt::kFloat64))),
        std::vector<double>(6, 0.0));
  const Tensor at = a.reshape({4, 6}).transpose(0, 1);  // [6, 4], strided
  check(dt::cdist(at, b), as_double(dt::cdist(at.contiguous(), b)));
  CHECK_THROWS_WITH(dt::cdist(x1, x2.reshape({2, 4, 5})), Catch::Contains("[cdist]"));
  CHECK_THROWS_WITH(dt::cdist(x1, x2, -1.0), Catch::Contains("p must be >= 0"));
  CHECK_THROWS_WITH(dt::cdist(x1.to(dt::kInt64), x2.to(dt::kInt64)), Catch::Contains("floating"));
}

TEST_CASE("cdist p inf on float32 inputs: the gradient goes to every largest component",
          "[distance]") {
  // The largest |x1 - x2| component of each pair gets the gradient: PyTorch compares the float32
  // |diff| with the float32 distance; dtensor compared the exact double |diff|, which equals the
  // rounded distance only by chance, and lost the gradient of most pairs (the parity sweep).
  const torch_ref::Case& c = ref("cdist_pinf_f32");
  DTensor a = dt::local_dtensor(t(torch_ref::kX1, {2, 3, 4}).to(dt::kFloat32));
  DTensor b = dt::local_dtensor(t(torch_ref::kX2, {2, 5, 4}).to(dt::kFloat32));
  a.requires_grad_();
  b.requires_grad_();
  const DTensor out = dt::cdist(a, b, std::numeric_limits<double>::infinity());
  check_values(out.to_local(), {2, 3, 5}, dt::kFloat32, c.outputs[0], 0, 0);
  dt::autograd::backward({out}, {dt::local_dtensor(t(c.upstream[0], {2, 3, 5}).to(dt::kFloat32))});
  check_values(a.grad().to_local(), {2, 3, 4}, dt::kFloat32, c.grads[0], 1e-6, 1e-6);
  check_values(b.grad().to_local(), {2, 5, 4}, dt::kFloat32, c.grads[1], 1e-6, 1e-6);
}

TEST_CASE("cdist p 2 with more than 25 rows goes through a matmul: values and gradients",
          "[distance]") {
  // Against the definition, written here: out = |x1_i - x2_j|, d out / d x1_i = (x1_i - x2_j) /
  // out.
  const int64_t b = 2, p = 30, r = 7, m = 5;
  std::vector<double> v1(b * p * m), v2(b * r * m), u(b * p * r);
  for (size_t i = 0; i < v1.size(); ++i) v1[i] = std::sin(0.31 * i + 0.2) * 2;
  for (size_t i = 0; i < v2.size(); ++i) v2[i] = std::cos(0.57 * i) * 2;
  for (size_t i = 0; i < u.size(); ++i) u[i] = std::sin(0.13 * i + 1.0);
  std::vector<double> want(b * p * r), g1(v1.size(), 0.0), g2(v2.size(), 0.0);
  for (int64_t n = 0; n < b; ++n) {
    for (int64_t i = 0; i < p; ++i) {
      for (int64_t j = 0; j < r; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < m; ++k) {
          const double d = v1[(n * p + i) * m + k] - v2[(n * r + j) * m + k];
          acc += d * d;
        }
        const double dist = std::sqrt(acc), c = u[(n * p + i) * r + j] / dist;
        want[(n * p + i) * r + j] = dist;
        for (int64_t k = 0; k < m; ++k) {
          const double d = v1[(n * p + i) * m + k] - v2[(n * r + j) * m + k];
          g1[(n * p + i) * m + k] += c * d;
          g2[(n * r + j) * m + k] -= c * d;
        }
      }
    }
  }
  const Tensor x1 = t(v1, {b, p, m}), x2 = t(v2, {b, r, m});
  check(dt::cdist(x1, x2), want, 1e-9);
  check(dt::cdist(x2, x1).transpose(1, 2).contiguous(), want, 1e-9);
  DTensor d1 = dt::local_dtensor(x1.clone()), d2 = dt::local_dtensor(x2.clone());
  d1.requires_grad_();
  d2.requires_grad_();
  dt::cdist(d1, d2).backward(dt::local_dtensor(t(u, {b, p, r})));
  check(d1.grad().to_local(), g1, 1e-9);
  check(d2.grad().to_local(), g2, 1e-9);
  // A point repeated: distance 0 (clamped, not NaN) and no gradient through it.
  const Tensor same = dt::cdist(x1, x1.narrow(1, 0, 26));
  CHECK(same.to_vector<double>()[0] == 0.0);
}

TEST_CASE("median: the sort-and-pick path (CUDA's) equals the CPU's nth_element path",
          "[distance]") {
  // Rows with ties, a NaN, and random small integers (many ties), float64 and bf16.
  std::vector<double> v = torch_ref::kTies;
  for (int i = 0; i < 8; ++i) v.push_back(torch_ref::kNans[i % 8]);
  for (int i = 0; i < 4 * 6; ++i) v.push_back(static_cast<double>((i * 7 + 3) % 5));
  v.resize(9 * 6);
  for (dt::DType dtype : {dt::kFloat64, dt::kBFloat16, dt::kInt32}) {
    INFO(dt::dtype_name(dtype));
    Tensor x = t(v, {9, 6});
    if (dtype == dt::kInt32) x = dt::where(dt::isnan(x), dt::zeros_like(x), x);
    x = x.to(dtype);
    const dt::ValuesIndices sorted = dt::sort(x, 1);
    Tensor values = dt::empty({9, 1}, dt::TensorOptions(dtype));
    Tensor indices = dt::empty({9, 1}, dt::TensorOptions(dt::kInt64));
    dt::detail::pick_rows(dt::detail::PickOp::kMedian, sorted.values, sorted.indices, values,
                          indices);
    const dt::ValuesIndices m = dt::median(x, 1, true);
    CHECK(dt::equal(indices, m.indices));
    check(values.to(dt::kFloat64), as_double(m.values));
  }
}

TEST_CASE("cdist broadcasts the batch dims, and its gradient sums back over them", "[distance]") {
  const Tensor x1 = t(torch_ref::kX1, {2, 3, 4});
  const Tensor x2 = t(torch_ref::kX2, {2, 5, 4}).narrow(0, 1, 1).reshape({5, 4});
  const Tensor want = dt::cdist(x1, x2.expand({2, 5, 4}).contiguous());
  check(dt::cdist(x1, x2), as_double(want));
  check(dt::cdist(x1.narrow(0, 0, 1), x2.expand({3, 5, 4})),
        as_double(dt::cdist(x1.narrow(0, 0, 1).expand({3, 3, 4}).contiguous(),
                            x2.expand({3, 5, 4}).contiguous())));
  DTensor d1 = dt::local_dtensor(x1.clone()), d2 = dt::local_dtensor(x2.clone());
  d1.requires_grad_();
  d2.requires_grad_();
  dt::sum(dt::cdist(d1, d2, 1.5)).backward();
  DTensor e1 = dt::local_dtensor(x1.clone()), e2 = dt::local_dtensor(x2.expand({2, 5, 4}).clone());
  e1.requires_grad_();
  e2.requires_grad_();
  dt::sum(dt::cdist(e1, e2, 1.5)).backward();
  CHECK(d2.grad().shape() == Shape{5, 4});
  check(d1.grad().to_local(), as_double(e1.grad().to_local()));
  const int64_t batch[] = {0};
  check(d2.grad().to_local(), as_double(dt::sum(e2.grad().to_local(), batch)));
  CHECK_THROWS_WITH(dt::cdist(x1, t({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 1, 4})),
                    Catch::Contains("[cdist]") && Catch::Contains("broadcast"));
}
