// Helpers shared by the op-family tests of matmul, view, softmax, norm, embedding and loss:
// deterministic pseudo-random inputs and an element-wise closeness check against double
// reference values computed by the tests' own loops.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/shape.h"
#include "dtensor/tensor/tensor.h"
#include "tests/common/tolerance.h"

namespace dtensor::test {

// Values uniform in [lo, hi) from a fixed LCG, then converted to dtype (integers are rounded
// to the nearest integer).
inline Tensor rand_tensor(IntSpan shape, DType dtype, uint64_t seed, double lo = -1.0,
                          double hi = 1.0) {
  uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (auto& x : v) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x = lo + (hi - lo) * static_cast<double>(s >> 11) / 9007199254740992.0;
    if (!is_floating(dtype)) x = std::nearbyint(x);
  }
  return from_vector<double>(v, shape).to(dtype);
}

inline double rtol_for(DType d) {
  return test::rtol_for(d, 3e-6);
}

// got (any dtype) equals `expect` in shape and, elementwise, |got - expect| <= rtol * scale +
// atol where scale is |expect| or, when given, the matching entry of `scales` (e.g. the sum of
// |a_ik * b_kj| for a dot product, which bounds its rounding error).
inline void check_close(const Tensor& got, IntSpan shape, const std::vector<double>& expect,
                        double rtol, double atol = 1e-12, const std::vector<double>& scales = {}) {
  REQUIRE(shape_str(got.sizes()) == shape_str(shape));
  const std::vector<double> g = got.to_vector<double>();
  REQUIRE(g.size() == expect.size());
  for (size_t i = 0; i < g.size(); ++i) {
    const double scale = scales.empty() ? std::fabs(expect[i]) : scales[i];
    if (std::isnan(expect[i])) {
      INFO("element " << i << " expected NaN, got " << g[i]);
      CHECK(std::isnan(g[i]));
      continue;
    }
    INFO("element " << i << ": got " << g[i] << ", expected " << expect[i]);
    CHECK(std::fabs(g[i] - expect[i]) <= rtol * scale + atol);
  }
}

}  // namespace dtensor::test
