// Helpers for the common/elementwise/reduction op tests: inputs with known values in several
// memory layouts, and naive double-precision index arithmetic the references use (independent
// of the library's iteration helpers).
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/tensor.h"
#include "tests/common/tolerance.h"

namespace dtensor::ewtest {

inline double rtol_for(DType d) {
  return test::rtol_for(d, 1e-6);
}
inline double atol_for(DType d) {
  return rtol_for(d) * 1e-3;
}

// n values uniform in [lo, hi) (rounded to integers for integer dtypes, 0/1 for bool), then
// rounded to `dtype` so references see exactly what the tensor holds.
inline std::vector<double> random_values(int64_t n, DType dtype, uint32_t seed, double lo = -3,
                                         double hi = 3) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) {
    x = dist(gen);
    if (dtype == DType::kBool)
      x = x > (lo + hi) / 2 ? 1.0 : 0.0;
    else if (!is_floating(dtype))
      x = std::nearbyint(x);
  }
  return from_vector<double>(v, {n}).to(dtype).to_vector<double>();
}

inline Tensor make(const std::vector<double>& v, IntSpan shape, DType dtype) {
  return from_vector<double>(v, shape).to(dtype);
}

// The same logical tensor in different layouts: contiguous; with the last two dims stored
// transposed (dim >= 2); as a step-2 slice of a wider buffer (dim >= 1).
inline std::vector<std::pair<std::string, Tensor>> layouts(const Tensor& base) {
  std::vector<std::pair<std::string, Tensor>> out;
  out.emplace_back("contiguous", base);
  if (base.dim() >= 2) {
    Tensor t = base.transpose(-1, -2).contiguous().transpose(-1, -2);
    out.emplace_back("transposed", t);
  }
  if (base.dim() >= 1) {
    Shape wide(base.sizes());
    wide.back() *= 2;
    Tensor buf = zeros(wide, TensorOptions(base.dtype()));
    Tensor view = buf.slice(-1, 0, wide.back(), 2);
    view.copy_(base);
    out.emplace_back("step-2 slice", view);
  }
  return out;
}

// Row-major multi-index of linear index i in `shape`.
inline std::vector<int64_t> unravel(int64_t i, IntSpan shape) {
  std::vector<int64_t> idx(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = shape[d] == 0 ? 0 : i % shape[d];
    i = shape[d] == 0 ? 0 : i / shape[d];
  }
  return idx;
}

// Linear index in `in_shape` of output element `out_i` of `out_shape` under broadcasting.
inline int64_t broadcast_source(int64_t out_i, IntSpan out_shape, IntSpan in_shape) {
  const std::vector<int64_t> idx = unravel(out_i, out_shape);
  const size_t lead = out_shape.size() - in_shape.size();
  int64_t lin = 0;
  for (size_t d = 0; d < in_shape.size(); ++d) {
    const int64_t j = in_shape[d] == 1 ? 0 : idx[d + lead];
    lin = lin * in_shape[d] + j;
  }
  return lin;
}

// Checks got against expected values (shape, dtype and elementwise closeness; NaN matches NaN,
// infinities must match exactly).
inline void check_values(const Tensor& got, IntSpan shape, DType dtype,
                         const std::vector<double>& expect, double rtol, double atol) {
  REQUIRE(shape_str(got.sizes()) == shape_str(shape));
  REQUIRE(dtype_name(got.dtype()) == dtype_name(dtype));
  const std::vector<double> g = got.to_vector<double>();
  REQUIRE(g.size() == expect.size());
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 5; ++i) {
    bool ok;
    if (std::isnan(expect[i]))
      ok = std::isnan(g[i]);
    else if (std::isinf(expect[i]))
      ok = g[i] == expect[i];
    else
      ok = std::fabs(g[i] - expect[i]) <= atol + rtol * std::fabs(expect[i]);
    if (!ok) {
      ++bad;
      FAIL_CHECK("element " << i << ": got " << g[i] << ", expected " << expect[i]);
    }
  }
  CHECK(bad == 0);
}

// The expected value rounded to dtype (so integer/bool/exact results compare bit for bit).
inline double round_to(double v, DType dtype) {
  return from_vector<double>({v}, {1}).to(dtype).to_vector<double>()[0];
}

}  // namespace dtensor::ewtest
