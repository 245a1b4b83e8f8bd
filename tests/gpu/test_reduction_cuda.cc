// Reductions on CUDA against the CPU: every dtype where allowed, single/multiple/all dims,
// keepdim, non-contiguous inputs, uneven and zero-size shapes, NaN and tie rules.
#include <limits>

#include "dtensor/ops/reduction/reduction.h"
#include "tests/gpu/gpu_test_util.h"

using namespace dtensor;
using namespace dtensor::gpu_test;

namespace {

std::vector<Tensor> inputs(DType d) {
  return {make_input({7, 13, 3}, d, 61), make_input({5, 9, 4}, d, 62).permute({2, 0, 1}),
          make_input({1000}, d, 63), make_input({3, 0, 2}, d, 64)};
}

const std::vector<std::vector<int64_t>> kDims = {{}, {0}, {-1}, {1}, {0, 2}, {2, 0, 1}};

}  // namespace

TEST_CASE("cuda reduction: sum, mean, var, amax, amin", "[gpu][reduction]") {
  for (DType d : all_dtypes()) {
    for (const Tensor& x : inputs(d)) {
      const Tensor g = x.to(kGpu);
      const int64_t nd = x.dim();
      for (const auto& dims : kDims) {
        bool valid = true;
        for (int64_t v : dims) valid = valid && v < nd && v >= -nd;
        if (!valid) continue;
        for (bool keep : {false, true}) {
          INFO(dtype_name(d) << " " << shape_str(x.sizes()) << " dims " << shape_str(dims)
                             << " keepdim " << keep);
          check_matches(sum(g, dims, keep), sum(x, dims, keep));
          if (is_floating(d)) {
            check_matches(mean(g, dims, keep), mean(x, dims, keep));
            check_matches(var(g, dims, 1, keep), var(x, dims, 1, keep));
            check_matches(var(g, dims, 0, keep), var(x, dims, 0, keep));
          }
          if (x.numel() > 0) {
            check_matches(amax(g, dims, keep), amax(x, dims, keep));
            check_matches(amin(g, dims, keep), amin(x, dims, keep));
          }
        }
      }
    }
  }
}

TEST_CASE("cuda reduction: argmax, argmin, max/min with indices", "[gpu][reduction]") {
  for (DType d : all_dtypes()) {
    const Tensor x = make_input({6, 17, 5}, d, 71, -2, 2);  // integer inputs have many ties
    const Tensor g = x.to(kGpu);
    check_matches(argmax(g), argmax(x));
    check_matches(argmin(g, std::nullopt, true), argmin(x, std::nullopt, true));
    for (int64_t dim : {0, 1, -1}) {
      check_matches(argmax(g, dim), argmax(x, dim));
      check_matches(argmin(g.transpose(0, 2), dim, true), argmin(x.transpose(0, 2), dim, true));
      const auto gm = max(g, dim), cm = max(x, dim);
      check_matches(gm.values, cm.values);
      check_matches(gm.indices, cm.indices);
      const auto gn = min(g, dim, true), cn = min(x, dim, true);
      check_matches(gn.values, cn.values);
      check_matches(gn.indices, cn.indices);
    }
    check_matches(max(g), max(x));
    check_matches(min(g), min(x));
  }
}

TEST_CASE("cuda reduction: NaN propagation and empty reductions", "[gpu][reduction]") {
  Tensor x = make_input({4, 6}, kFloat32, 81);
  x.narrow(0, 1, 1).narrow(1, 3, 1).fill_(Scalar(std::numeric_limits<double>::quiet_NaN()));
  x.narrow(0, 1, 1).narrow(1, 5, 1).fill_(Scalar(std::numeric_limits<double>::quiet_NaN()));
  const Tensor g = x.to(kGpu);
  const int64_t d1[] = {1};
  check_matches(amax(g, d1), amax(x, d1));
  check_matches(amin(g, d1), amin(x, d1));
  check_matches(argmax(g, 1), argmax(x, 1));  // the first NaN
  check_matches(sum(g, d1), sum(x, d1));
  const Tensor e = make_input({0, 3}, kFloat64, 82);
  const int64_t d0[] = {0};
  check_matches(sum(e.to(kGpu), d0), sum(e, d0));    // zeros
  check_matches(mean(e.to(kGpu), d0), mean(e, d0));  // NaN
  REQUIRE_THROWS_WITH(amax(e.to(kGpu), d0), Catch::Contains("[amax]"));
  REQUIRE_THROWS_WITH(argmax(e.to(kGpu), 0), Catch::Contains("[argmax]"));
  REQUIRE_THROWS_WITH(mean(make_input({3}, kInt32, 83).to(kGpu)), Catch::Contains("[mean]"));
}

TEST_CASE("cuda reduction: more outputs than one grid (> 65535) and rows longer than a block",
          "[gpu][reduction]") {
  // 70000 outputs: the kernels cap the grid at 65535 blocks and stride over the rest.
  for (DType d : {kFloat32, kBFloat16, kInt32, kFloat64}) {
    INFO(dtype_name(d));
    const Tensor x = make_input({70000, 3}, d, 91, -2, 2);
    const Tensor g = x.to(kGpu);
    const int64_t d1[] = {1};
    const int64_t d0[] = {0};
    check_matches(sum(g, d1), sum(x, d1));
    check_matches(amax(g, d1), amax(x, d1));
    check_matches(argmin(g, 1), argmin(x, 1));
    // The transposed view reduces over the strided dim: outputs along the long contiguous dim.
    check_matches(sum(g.transpose(0, 1), d1), sum(x.transpose(0, 1), d1));
    if (is_floating(d)) {
      check_matches(var(g, d1, 1), var(x, d1, 1));
      // One row of 210000 elements (far longer than a block), and 3 long columns.
      check_matches(mean(g), mean(x), 4);
      check_matches(sum(g, d0), sum(x, d0), 4);
    }
  }
}
