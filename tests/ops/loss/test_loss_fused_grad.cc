// The one-pass input gradient of mse, l1, smooth_l1, huber and bce_with_logits times a 0-d
// incoming gradient (pointwise_loss_simd_cpu.cc, every SIMD target) against the two-pass path
// it shortcuts (the per-element terms times a full-size gradient), on rows that are not a
// multiple of the vector width, with differences inside and outside the smooth_l1 / huber band,
// exact zeros and NaN.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "dtensor/ops/loss/detail/pointwise_loss.h"
#include "dtensor/tensor/creation.h"
#include "tests/common/local_op_test_util.h"
#include "tests/ops/common/simd_test_util.h"

namespace dt = dtensor;
using dt::Tensor;
using dt::detail::LossKind;
using dt::detail::LossPart;

TEST_CASE("pointwise loss gradients: one pass after a 0-d gradient equals the two passes",
          "[ops][loss]") {
  struct Kind {
    LossKind kind;
    double param;
  };
  const Kind kinds[] = {{LossKind::kMse, 0},        {LossKind::kL1, 0},
                        {LossKind::kSmoothL1, 0.5}, {LossKind::kSmoothL1, 0},
                        {LossKind::kHuber, 2.5},    {LossKind::kBceWithLogits, 0}};
  dt::test::for_each_simd_target([&](const std::string&) {
    for (const dt::DType dtype : {dt::kFloat32, dt::kFloat64}) {
      const int64_t n[] = {1003};
      Tensor x = dt::test::rand_tensor(n, dt::kFloat64, 1, -3, 3);
      const Tensor y = dt::test::rand_tensor(n, dt::kFloat64, 2, -3, 3).to(dtype);
      // x == y (a zero difference: sign 0) and a NaN input.
      std::vector<double> xv = x.to_vector<double>();
      xv[5] = y.to_vector<double>()[5];
      xv[17] = std::numeric_limits<double>::quiet_NaN();
      x = dt::from_vector<double>(xv, n).to(dtype);
      const Tensor g0 = dt::full({}, dt::Scalar(0.75), dt::TensorOptions(dtype));
      const Tensor gfull = dt::full(n, dt::Scalar(0.75), dt::TensorOptions(dtype));
      for (const Kind& k : kinds) {
        INFO(dt::detail::loss_name(k.kind) << " param " << k.param << " " << dt::dtype_name(dtype));
        const double scale = 1.0 / 1003;
        const Tensor fused = dt::detail::pointwise_loss_grad(k.kind, LossPart::kGradInput, k.param,
                                                             g0, x, y, Tensor(), Tensor(), scale);
        const Tensor twopass = dt::detail::pointwise_loss_grad(
            k.kind, LossPart::kGradInput, k.param, gfull, x, y, Tensor(), Tensor(), scale);
        REQUIRE(fused.dtype() == dtype);
        // Results are about 0.75 / 1003: the absolute floor scaled to them.
        dt::test::check_close(fused, n, twopass.to_vector<double>(), 4 * dt::test::rtol_for(dtype),
                              3e-3 * dt::test::rtol_for(dtype));
      }
    }
  });
}
