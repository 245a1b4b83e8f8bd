// group_norm's fused CPU kernels (every compiled SIMD target, float32 / float64 / 16-bit) against
// the composition they replace computed in float64: the forward against layer_norm of x viewed
// [N, G, -1] then the per-channel affine, the backward against PyTorch's formula in library ops
// (the CUDA path). Spatial sizes that are not multiples of the vector width, one channel per
// group, no spatial dims, weight and bias present or not, an empty batch.
#include <array>
#include <catch2/catch.hpp>
#include <vector>

#include "dtensor/ops/norm/detail/group_norm.h"
#include "dtensor/ops/norm/detail/norm_layers_impl.h"
#include "dtensor/tensor/creation.h"
#include "tests/common/local_op_test_util.h"
#include "tests/ops/common/simd_test_util.h"

namespace dt = dtensor;
using dt::DType;
using dt::Shape;
using dt::Tensor;
using dt::test::check_close;
using dt::test::for_each_simd_target;
using dt::test::rand_tensor;
using dt::test::rtol_for;

namespace {

struct Case {
  Shape shape;
  int64_t groups;
};

const Case kCases[] = {{{3, 6, 5}, 3}, {{2, 4, 3, 7}, 2}, {{2, 4, 1}, 4},
                       {{2, 6}, 2},    {{1, 2, 37}, 1},   {{0, 4, 3}, 2}};

// as float64, so the reference is computed from the very values the kernel read.
Tensor wide(const Tensor& t) {
  return t.defined() ? t.to(dt::kFloat64) : t;
}

}  // namespace

TEST_CASE("group_norm: the fused CPU kernels equal the composition", "[ops][norm]") {
  for_each_simd_target([](const std::string&) {
    for (const DType dtype : {dt::kFloat32, dt::kFloat64, dt::kFloat16, dt::kBFloat16}) {
      for (const Case& c : kCases) {
        for (const bool affine : {true, false}) {
          INFO(dt::dtype_name(dtype) << " " << dt::shape_str(c.shape) << " groups " << c.groups
                                     << (affine ? " affine" : ""));
          const Tensor x = rand_tensor(c.shape, dtype, 1, -2, 3);
          const Tensor g = rand_tensor(c.shape, dtype, 2);
          const int64_t ch[] = {c.shape[1]};
          const Tensor w = affine ? rand_tensor(ch, dtype, 3, 0.5, 1.5) : Tensor();
          const Tensor b = affine ? rand_tensor(ch, dtype, 4) : Tensor();
          const double tol = rtol_for(dtype), eps = 1e-5;
          REQUIRE(dt::detail::group_norm_fused_serves(x));

          const Tensor y = dt::detail::group_norm_fused(x, c.groups, w, b, eps);
          REQUIRE(y.dtype() == dtype);
          const Tensor ref =
              dt::detail::group_norm_composed(wide(x), c.groups, wide(w), wide(b), eps);
          check_close(y, c.shape, ref.to_vector<double>(), 4 * tol, 8 * tol);

          const auto got =
              dt::detail::group_norm_backward_local(g, x, c.groups, w, eps, {affine, affine});
          const auto want = dt::detail::group_norm_backward_composed(
              wide(g), wide(x), c.groups, wide(w), eps, {affine, affine});
          REQUIRE(got[0].dtype() == dtype);
          // Sums over up to N * HW elements in the compute type.
          check_close(got[0], c.shape, want[0].to_vector<double>(), 8 * tol, 16 * tol);
          for (int i = 1; i < 3; ++i) {
            REQUIRE(got[i].defined() == affine);
            if (affine) check_close(got[i], ch, want[i].to_vector<double>(), 8 * tol, 64 * tol);
          }
        }
      }
    }
  });
}
