// The direct CPU kernels of max pools and linear interpolation (pool_direct_cpu.cc, issue 44)
// against the tap-table kernels they replace (pool_cpu.cc), bit for bit: values and indices over
// random shapes and args (1-D to 3-D windows, stride 1, 2 and more, padding, dilation, ceil_mode,
// windows of padding only; rows wide enough for the vector lanes) on inputs full of ties, NaNs
// and -inf; linear / bilinear / trilinear over random
// sizes, scales and align_corners. float32 and float64 (the dtypes the direct kernels take).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "dtensor/ops/pool/detail/windows.h"
#include "dtensor/ops/pool/pool.h"
#include "dtensor/tensor/creation.h"

namespace dt = dtensor;
namespace dd = dtensor::detail;
using dt::Tensor;

namespace {

int64_t uniform(std::mt19937& gen, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(gen);
}

// Values from a small set, so windows tie, with NaNs and infinities among them.
Tensor tie_input(std::mt19937& gen, const dt::Shape& shape, dt::DType dtype) {
  const double inf = std::numeric_limits<double>::infinity();
  const double pool[] = {-inf, -2.0, -0.0, 0.0, 1.0, 1.0, 2.0, 3.0, inf, std::nan("")};
  std::vector<double> v(static_cast<size_t>(dt::shape_numel(shape)));
  for (double& e : v) e = pool[uniform(gen, 0, 9)];
  return dt::from_vector<double>(v, shape).to(dtype);
}

Tensor normal_input(std::mt19937& gen, const dt::Shape& shape, dt::DType dtype) {
  std::normal_distribution<double> n(0.0, 3.0);
  std::vector<double> v(static_cast<size_t>(dt::shape_numel(shape)));
  for (double& e : v) e = n(gen);
  return dt::from_vector<double>(v, shape).to(dtype);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.numel() == b.numel() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

// x as [planes, spatial elements] and its spatial dims.
Tensor planes_of(const Tensor& x, int64_t nd, dt::Shape* spatial) {
  const dt::IntSpan s = x.sizes();
  const size_t lead = s.size() - static_cast<size_t>(nd);
  spatial->assign(s.begin() + static_cast<std::ptrdiff_t>(lead), s.end());
  return x.contiguous().reshape({-1, dt::shape_numel(*spatial)});
}

std::string show(const dt::Shape& s) {
  std::string r = "{";
  for (int64_t v : s) r += std::to_string(v) + ",";
  return r + "}";
}

}  // namespace

TEST_CASE("direct max pool equals the tap kernel bit for bit: ties, NaN, -inf, padding") {
  std::mt19937 gen(44);
  int empty_windows = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const int64_t nd = uniform(gen, 1, 3);
    dt::Shape kernel, stride, padding, dilation, shape{uniform(gen, 1, 2), uniform(gen, 1, 3)};
    for (int64_t j = 0; j < nd; ++j) {
      kernel.push_back(uniform(gen, 1, 4));
      stride.push_back(uniform(gen, 1, 3));
      dilation.push_back(uniform(gen, 1, 3));
      padding.push_back(uniform(gen, 0, ((kernel[j] - 1) * dilation[j] + 1) / 2));
      const int64_t lo = std::max<int64_t>(1, dilation[j] * (kernel[j] - 1) + 1 - 2 * padding[j]);
      // The last dim wide enough for the vector lanes (up to 16 outputs each), inner ones small.
      shape.push_back(uniform(gen, lo, lo + (j + 1 == nd ? 80 : 7)));
    }
    const bool ceil_mode = uniform(gen, 0, 1) == 1;
    const dt::DType dtype = uniform(gen, 0, 1) == 1 ? dt::kFloat32 : dt::kFloat64;
    const Tensor x = tie_input(gen, shape, dtype);
    INFO("trial " << trial << " shape " << show(shape) << " kernel " << show(kernel) << " stride "
                  << show(stride) << " padding " << show(padding) << " dilation " << show(dilation)
                  << " ceil_mode " << ceil_mode);
    // The direct path: the public function on a float32 / float64 CPU tensor.
    const dd::WindowArgs a = dd::pool_args(dd::WindowKind::kMaxPool, nd, kernel, stride, padding,
                                           dilation, ceil_mode, true, std::nullopt);
    const dt::Shape out_shape = dd::window_out_shape(a, x.sizes());
    const auto [values, indices] = dd::window_max_forward(x, a);
    // The tap kernel on the same planes.
    dt::Shape spatial;
    const Tensor xp = planes_of(x, nd, &spatial);
    const Tensor v = dt::empty({xp.size(0), values.numel() / xp.size(0)}, dt::TensorOptions(dtype));
    const Tensor i = dt::empty(v.sizes(), dt::TensorOptions(dt::kInt64));
    dd::window_max_planes(xp, dd::tap_tensors(dd::window_taps(a, spatial), x.device()), v, i);
    CHECK(values.sizes() == out_shape);
    CHECK(same_bits(values.contiguous(), v));
    CHECK(same_bits(indices.contiguous(), i));
    const int64_t* ip = i.data<int64_t>();
    for (int64_t k = 0; k < i.numel(); ++k) empty_windows += ip[k] < 0 ? 1 : 0;
  }
  // The draw reaches windows of padding only (index -1, value -inf).
  CHECK(empty_windows > 0);
}

TEST_CASE("direct linear / bilinear / trilinear interpolate equals the tap kernel bit for bit") {
  std::mt19937 gen(4444);
  const char* const modes[] = {"", "linear", "bilinear", "trilinear"};
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t nd = uniform(gen, 1, 3);
    dt::Shape shape{uniform(gen, 1, 2), uniform(gen, 1, 3)}, size;
    std::vector<double> scales;
    const bool by_size = uniform(gen, 0, 1) == 1;
    for (int64_t j = 0; j < nd; ++j) {
      shape.push_back(uniform(gen, 1, 9));
      if (by_size) {
        size.push_back(uniform(gen, 1, 13));
      } else {
        const double choices[] = {0.5, 0.7, 1.0, 1.5, 2.0, 3.0, 2.3};
        scales.push_back(choices[uniform(gen, 0, 6)]);
      }
    }
    if (!by_size) {
      bool empty_out = false;
      for (int64_t j = 0; j < nd; ++j) {
        empty_out = empty_out || std::floor(static_cast<double>(shape[2 + j]) * scales[j]) < 1;
      }
      if (empty_out) continue;
    }
    const std::optional<bool> align =
        uniform(gen, 0, 2) == 0 ? std::nullopt : std::optional<bool>(uniform(gen, 0, 1) == 1);
    const dt::DType dtype = uniform(gen, 0, 1) == 1 ? dt::kFloat32 : dt::kFloat64;
    const Tensor x = normal_input(gen, shape, dtype);
    INFO("trial " << trial << " shape " << show(shape) << " size " << show(size)
                  << " align_corners " << align.value_or(false));
    const dd::WindowArgs a = dd::interpolate_args(x.sizes(), size, scales, modes[nd], align);
    const Tensor out = dt::interpolate(x, size, scales, modes[nd], align);
    dt::Shape spatial;
    const Tensor xp = planes_of(x, nd, &spatial);
    const Tensor ref = dt::empty({xp.size(0), out.numel() / xp.size(0)}, dt::TensorOptions(dtype));
    dd::window_sum_planes(xp, dd::tap_tensors(dd::window_taps(a, spatial), x.device()), ref);
    CHECK(same_bits(out.contiguous(), ref));
  }
}
