// Local random ops: value grids, statistics on 10^6 samples, dropout, randint, errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "dtensor/rng/random.h"
#include "dtensor/tensor/compare.h"

using namespace dtensor;

namespace {

constexpr int64_t kN = 1000000;

struct Moments {
  double mean = 0, var = 0;
};

Moments moments(const std::vector<double>& v) {
  Moments m;
  for (double x : v) m.mean += x;
  m.mean /= double(v.size());
  for (double x : v) m.var += (x - m.mean) * (x - m.mean);
  m.var /= double(v.size());
  return m;
}

}  // namespace

TEST_CASE("rand is uniform on the unit interval for every floating dtype", "[rng][random]") {
  manual_seed(31);
  for (DType d : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    INFO(dtype_name(d));
    const Tensor t = rand({kN}, d);
    CHECK(t.dtype() == d);
    CHECK(t.numel() == kN);
    const std::vector<double> v = t.to_vector<double>();
    for (double x : v) REQUIRE((x >= 0.0 && x < 1.0));
    const Moments m = moments(v);
    CHECK(std::abs(m.mean - 0.5) < 0.002);
    // bf16/fp16 are quantised to 2^-8 / 2^-11 steps: variance (1 - 2^-2b) / 12.
    CHECK(std::abs(m.var - 1.0 / 12.0) < 0.002);
  }
}

TEST_CASE("16-bit uniforms lie on the type's grid and are < 1", "[rng][random]") {
  manual_seed(5);
  const std::vector<float> bf = rand({100000}, kBFloat16).to_vector<float>();
  const std::vector<float> hf = rand({100000}, kFloat16).to_vector<float>();
  int distinct_bf = 0;
  std::vector<bool> seen(256, false);
  for (float x : bf) {
    const double k = double(x) * 256.0;
    REQUIRE(k == std::floor(k));
    REQUIRE(x < 1.0f);
    if (!seen[int(k)]) ++distinct_bf, seen[int(k)] = true;
  }
  CHECK(distinct_bf == 256);  // every grid point, including 0 and 255/256, occurs
  for (float x : hf) {
    const double k = double(x) * 2048.0;
    REQUIRE(k == std::floor(k));
    REQUIRE(x < 1.0f);
  }
  // float32: multiples of 2^-24
  for (float x : rand({1000}).to_vector<float>()) {
    const double k = double(x) * 16777216.0;
    REQUIRE(k == std::floor(k));
  }
}

TEST_CASE("randn has mean 0 and variance 1", "[rng][random]") {
  manual_seed(32);
  for (DType d : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    INFO(dtype_name(d));
    const std::vector<double> v = randn({kN}, d).to_vector<double>();
    for (double x : v) REQUIRE(std::isfinite(x));
    const Moments m = moments(v);
    CHECK(std::abs(m.mean) < 0.005);
    CHECK(std::abs(m.var - 1.0) < (d == kBFloat16 ? 0.015 : 0.01));
  }
  // normal_ with mean/std
  Tensor t = empty({kN}, kFloat32);
  normal_(t, 3.0, 0.5);
  const Moments m = moments(t.to_vector<double>());
  CHECK(std::abs(m.mean - 3.0) < 0.003);
  CHECK(std::abs(m.var - 0.25) < 0.003);
}

TEST_CASE("uniform_ covers low to high and works on strided views", "[rng][random]") {
  manual_seed(33);
  Tensor t = empty({kN}, kFloat64);
  uniform_(t, -2.0, 6.0);
  const std::vector<double> v = t.to_vector<double>();
  for (double x : v) REQUIRE((x >= -2.0 && x < 6.0));
  const Moments m = moments(v);
  CHECK(std::abs(m.mean - 2.0) < 0.02);
  CHECK(std::abs(m.var - 64.0 / 12.0) < 0.02);
  // A transposed view is filled in its logical (row-major) order.
  Tensor base = zeros({6, 4});
  Tensor view = base.transpose(0, 1);
  manual_seed(1);
  uniform_(view);
  manual_seed(1);
  CHECK(equal(view.contiguous(), rand({4, 6})));
}

TEST_CASE("bernoulli hits rate p in any dtype", "[rng][random]") {
  manual_seed(34);
  for (double p : {0.0, 0.1, 0.5, 0.9, 1.0}) {
    for (DType d : {kFloat32, kBool, kInt64, kBFloat16}) {
      INFO("p " << p << " " << dtype_name(d));
      const std::vector<double> v = bernoulli({kN}, p, d).to_vector<double>();
      double ones = 0;
      for (double x : v) {
        REQUIRE((x == 0.0 || x == 1.0));
        ones += x;
      }
      CHECK(std::abs(ones / kN - p) < 0.002);
      if (p == 0.0 || p == 1.0) CHECK(ones == p * kN);
    }
  }
  Tensor t = empty({1000}, kInt32);
  bernoulli_(t, 1.0);
  CHECK(equal(t, ones({1000}, kInt32)));
}

TEST_CASE("dropout keeps 1 - p of the elements and scales them by 1 / (1 - p)", "[rng][random]") {
  manual_seed(35);
  const Tensor x = rand({kN});
  const std::vector<float> xv = x.to_vector<float>();
  for (double p : {0.1, 0.5, 0.8}) {
    INFO("p " << p);
    const DropoutResult r = dropout_with_mask(x, p);
    CHECK(r.mask.dtype() == kBool);
    const std::vector<float> y = r.output.to_vector<float>();
    const std::vector<double> mk = r.mask.to_vector<double>();
    const float scale = float(1.0 / (1.0 - p));
    double kept = 0;
    for (int64_t i = 0; i < kN; ++i) {
      if (mk[i] != 0.0) {
        kept += 1;
        REQUIRE(y[i] == xv[i] * scale);
      } else {
        REQUIRE(y[i] == 0.0f);
      }
    }
    CHECK(std::abs(kept / kN - (1.0 - p)) < 0.002);
  }
  // Same seed: dropout equals dropout_with_mask's output; mask equals dropout_mask spec.
  manual_seed(9);
  const Tensor a = dropout(x, 0.3);
  manual_seed(9);
  const DropoutResult b = dropout_with_mask(x, 0.3);
  CHECK(equal(a, b.output));
  // p == 1 gives zeros; eval mode returns the input itself.
  CHECK(equal(dropout(x, 1.0), zeros({kN})));
  const Tensor e = dropout(x, 0.5, /*train=*/false);
  CHECK(e.data_ptr() == x.data_ptr());
  // float64 and a strided input
  Tensor x64 = rand({300, 200}, kFloat64).transpose(0, 1);
  manual_seed(10);
  const DropoutResult r64 = dropout_with_mask(x64, 0.25);
  const std::vector<double> xin = x64.to_vector<double>(), yout = r64.output.to_vector<double>();
  const std::vector<double> mk = r64.mask.to_vector<double>();
  for (size_t i = 0; i < xin.size(); ++i) {
    REQUIRE(yout[i] == (mk[i] != 0.0 ? xin[i] * (1.0 / 0.75) : 0.0));
  }
  REQUIRE_THROWS_WITH(dropout(x, 1.5), Catch::Contains("[dropout]"));
  REQUIRE_THROWS_WITH(dropout(ones({3}, kInt32), 0.5), Catch::Contains("[dropout]"));
}

TEST_CASE("randint stays in its range and is roughly uniform", "[rng][random]") {
  manual_seed(36);
  for (DType d : {kInt64, kInt32, kFloat32, kFloat64}) {
    INFO(dtype_name(d));
    const std::vector<double> v = randint(-3, 7, {kN}, d).to_vector<double>();
    std::vector<int64_t> counts(10, 0);
    for (double x : v) {
      REQUIRE((x >= -3 && x < 7 && x == std::floor(x)));
      ++counts[int64_t(x) + 3];
    }
    for (int64_t c : counts) CHECK(std::abs(double(c) / kN - 0.1) < 0.003);
  }
  // Wide int64 ranges: both halves occur.
  const std::vector<int64_t> w = randint(INT64_MIN / 2, INT64_MAX / 2, {1000}).to_vector<int64_t>();
  int neg = 0;
  for (int64_t x : w) {
    REQUIRE((x >= INT64_MIN / 2 && x < INT64_MAX / 2));
    neg += x < 0;
  }
  CHECK((neg > 400 && neg < 600));
  Tensor t = empty({50}, kInt32);
  random_(t, 5, 6);
  CHECK(equal(t, full({50}, 5, kInt32)));
  REQUIRE_THROWS_WITH(randint(3, 3, {4}), Catch::Contains("[randint]"));
  REQUIRE_THROWS_WITH(randint(0, 2, {4}, kBool), Catch::Contains("[randint]"));
}

TEST_CASE("random ops reject bad arguments without advancing the generator", "[rng][random]") {
  manual_seed(37);
  REQUIRE_THROWS_WITH(rand({4}, kInt64), Catch::Contains("[rand]") && Catch::Contains("int64"));
  REQUIRE_THROWS_WITH(randn({4}, kBool), Catch::Contains("[randn]"));
  REQUIRE_THROWS_WITH(bernoulli({4}, -0.1), Catch::Contains("[bernoulli]"));
  REQUIRE_THROWS_WITH(uniform_(empty({2}), 1.0, 0.0), Catch::Contains("[uniform_]"));
  REQUIRE_THROWS_WITH(normal_(empty({2}), 0.0, -1.0), Catch::Contains("[normal_]"));
  // An undefined tensor is refused by every in-place filler, naming it.
  REQUIRE_THROWS_WITH(uniform_(Tensor()), Catch::Contains("[uniform_] the tensor is undefined"));
  REQUIRE_THROWS_WITH(normal_(Tensor()), Catch::Contains("[normal_] the tensor is undefined"));
  REQUIRE_THROWS_WITH(bernoulli_(Tensor(), 0.5),
                      Catch::Contains("[bernoulli_] the tensor is undefined"));
  REQUIRE_THROWS_WITH(random_(Tensor(), 0, 4),
                      Catch::Contains("[random_] the tensor is undefined"));
  CHECK(default_generator().offset() == 0);
  // Zero-size tensors are fine and reserve nothing.
  CHECK(rand({0, 3}).numel() == 0);
  CHECK(randn({2, 0}).numel() == 0);
  CHECK(default_generator().offset() == 0);
  // 0-d tensors get one value.
  const Tensor s = rand({});
  CHECK(s.dim() == 0);
  CHECK(default_generator().offset() == 4);
}
