#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "dtensor/ops/softmax/softmax.h"
#include "dtensor/tensor/creation.h"
#include "tests/common/local_op_test_util.h"

namespace dt = dtensor;
using dt::DType;
using dt::Tensor;
using dt::test::check_close;
using dt::test::rand_tensor;
using dt::test::rtol_for;

namespace {

// Reference softmax / log_softmax in double along `dim` (non-negative), via at<double>().
std::vector<double> ref_softmax(const Tensor& x, int64_t dim, bool log) {
  const dt::Shape s = x.sizes();
  std::vector<double> out(static_cast<size_t>(x.numel()));
  const std::vector<double> v = x.to_vector<double>();
  const int64_t nd = x.dim();
  const int64_t d = nd == 0 ? 1 : s[dim];
  int64_t inner = 1;
  for (int64_t i = dim + 1; i < nd; ++i) inner *= s[i];
  for (int64_t base = 0; base < x.numel(); ++base) {
    if ((base / inner) % d != 0) continue;  // visit each slice once, from its first element
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < d; ++i) mx = std::max(mx, v[base + i * inner]);
    double sum = 0;
    for (int64_t i = 0; i < d; ++i) sum += std::exp(v[base + i * inner] - mx);
    for (int64_t i = 0; i < d; ++i) {
      const double z = v[base + i * inner] - mx;
      out[base + i * inner] = log ? z - std::log(sum) : std::exp(z) / sum;
    }
  }
  return out;
}

}  // namespace

TEST_CASE("softmax and log_softmax match a reference along every dim and dtype") {
  using S = std::vector<int64_t>;
  const S shape = GENERATE(S{5}, S{3, 7}, S{2, 3, 4}, S{4, 1, 3}, S{0, 4}, S{3, 0}, S{});
  for (DType d : {dt::kFloat32, dt::kFloat64, dt::kFloat16, dt::kBFloat16}) {
    const Tensor x = rand_tensor(shape, d, 1, -5, 5);
    const int64_t nd = static_cast<int64_t>(shape.size());
    for (int64_t dim = -std::max<int64_t>(nd, 1); dim < std::max<int64_t>(nd, 1); ++dim) {
      INFO(dt::dtype_name(d) << " shape " << dt::shape_str(shape) << " dim " << dim);
      const int64_t pd = dim < 0 ? dim + std::max<int64_t>(nd, 1) : dim;
      const Tensor y = dt::softmax(x, dim);
      CHECK(y.dtype() == d);
      check_close(y, shape, ref_softmax(x, pd, false), rtol_for(d), 1e-7);
      // log_softmax values are O(log C); one rounding of the output is relative to them.
      check_close(dt::log_softmax(x, dim), shape, ref_softmax(x, pd, true), rtol_for(d), 1e-6);
    }
  }
}

TEST_CASE("softmax works on non-contiguous inputs") {
  const Tensor base = rand_tensor({6, 5}, dt::kFloat32, 2, -3, 3);
  const Tensor xt = base.transpose(0, 1);  // [5, 6]
  check_close(dt::softmax(xt, 1), {5, 6}, ref_softmax(xt.contiguous(), 1, false), 3e-6, 1e-7);
  const Tensor xs = base.slice(1, 0, 5, 2);  // [6, 3] stepped
  check_close(dt::log_softmax(xs, 0), {6, 3}, ref_softmax(xs.contiguous(), 0, true), 3e-6, 1e-6);
  const Tensor xe = rand_tensor({1, 4}, dt::kFloat64, 3).expand({3, 4});
  check_close(dt::softmax(xe, -1), {3, 4}, ref_softmax(xe.contiguous(), 1, false), 1e-12);
}

TEST_CASE("softmax is numerically stable for large and infinite inputs") {
  const Tensor x = dt::from_vector<double>({1000, 1001, 1002, -1000}, {4}).to(dt::kFloat32);
  const double e0 = std::exp(-2.0), e1 = std::exp(-1.0), sum = e0 + e1 + 1.0;
  check_close(dt::softmax(x, 0), {4}, {e0 / sum, e1 / sum, 1.0 / sum, 0.0}, 3e-6, 1e-12);
  check_close(dt::log_softmax(x, 0), {4},
              {-2 - std::log(sum), -1 - std::log(sum), -std::log(sum), -2002 - std::log(sum)}, 3e-6,
              1e-5);
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor y = dt::from_vector<double>({-inf, 0.0, -inf, -inf}, {2, 2});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Row 0: the -inf entry gets probability 0; row 1 is all -inf: NaN as in PyTorch.
  check_close(dt::softmax(y, 1), {2, 2}, {0.0, 1.0, nan, nan}, 1e-12, 1e-12);
  const Tensor z = dt::from_vector<double>({nan, 1.0}, {2});
  check_close(dt::softmax(z, 0), {2}, {nan, nan}, 0.0);
}

TEST_CASE("softmax errors name the op") {
  REQUIRE_THROWS_WITH(dt::softmax(dt::zeros({2, 3}, dt::kInt64), 1),
                      Catch::Contains("[softmax] expected a floating dtype"));
  REQUIRE_THROWS_WITH(dt::log_softmax(dt::zeros({2, 3}), 2), Catch::Contains("[log_softmax]"));
  REQUIRE_THROWS_AS(dt::softmax(dt::zeros({2, 3}), -3), dt::Error);
  REQUIRE_THROWS_WITH(dt::softmax(Tensor(), 0), Catch::Contains("[softmax]"));
}
