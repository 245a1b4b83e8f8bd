// The two float32 CPU convolution backends (conv/detail/conv_onednn.h): on random geometries
// (1-D / 2-D / 3-D, groups, stride, padding, dilation, transposed with output_padding, batch 1
// and 0) oneDNN and im2col both give the forward and both backward outputs of the float64
// convolution within float32's rounding bound, DTENSOR_CONV selects the backend per call, and a
// bad value raises. The cases that need oneDNN print "[skipped]" where libdnnl does not load
// (their ctest entries then report skipped: SKIP_MARKER in tests.cmake); where it loads they
// check as ever, so wrong results from it still fail.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dtensor/ops/conv/conv.h"
#include "dtensor/ops/conv/detail/conv_onednn.h"
#include "dtensor/tensor/error.h"
#include "tests/common/env_test_util.h"
#include "tests/common/local_op_test_util.h"

namespace dt = dtensor;
using dt::Shape;
using dt::Tensor;

namespace {

// Sets DTENSOR_CONV for the scope ("" unsets it), restoring the old value after.
class ForceConv : public dt::test::ScopedEnv {
 public:
  explicit ForceConv(const char* value) : ScopedEnv("DTENSOR_CONV", value) {}
};

struct Geometry {
  int64_t nd, n, groups, ci_g, co_g;
  Shape size, k, stride, pad, dil, out_pad;
  bool transposed;
};

// A small LCG: the geometries are the same on every run.
struct Lcg {
  uint64_t s;
  int64_t next(int64_t lo, int64_t hi) {  // uniform in [lo, hi]
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + static_cast<int64_t>((s >> 33) % static_cast<uint64_t>(hi - lo + 1));
  }
};

// A random geometry whose output is not empty (the spatial size covers the dilated kernel).
Geometry random_geometry(Lcg& r, int64_t n) {
  Geometry g;
  g.nd = r.next(1, 3);
  g.n = n;
  g.groups = r.next(1, 3);
  g.ci_g = r.next(1, 4);
  g.co_g = r.next(1, 4);
  g.transposed = r.next(0, 3) == 0;
  for (int64_t i = 0; i < g.nd; ++i) {
    g.k.push_back(r.next(1, 3));
    g.stride.push_back(r.next(1, 2));
    g.dil.push_back(r.next(1, 2));
    g.pad.push_back(r.next(0, 2));
    const int64_t span = (g.k.back() - 1) * g.dil.back() + 1;
    // conv: size + 2 pad >= span; conv_transpose: size > 2 pad (a non-empty output either way).
    const int64_t lo = std::max({span - 2 * g.pad.back(), 2 * g.pad.back() + 1, int64_t{1}});
    g.size.push_back(r.next(lo, lo + 6));
    // output_padding must be below stride or dilation (PyTorch's rule).
    g.out_pad.push_back(g.transposed ? r.next(0, std::max(g.stride.back(), g.dil.back()) - 1) : 0);
  }
  return g;
}

struct Result {
  Tensor y, gx, gw, gb;
};

// convolution and its three gradients (grad_output: a fixed function of the output's shape).
Result run(const Geometry& g, dt::DType dtype) {
  Shape xs = {g.n, g.groups * (g.transposed ? g.co_g : g.ci_g)};
  // convolution's weight [C_out, C_in / groups, *k] is conv_transpose's [C_in, C_out / groups]:
  // the same for both, its input having groups * co_g channels.
  Shape ws = {g.groups * g.co_g, g.ci_g};
  for (int64_t i = 0; i < g.nd; ++i) {
    xs.push_back(g.size[i]);
    ws.push_back(g.k[i]);
  }
  const Tensor x = dt::test::rand_tensor(xs, dtype, 1);
  const Tensor w = dt::test::rand_tensor(ws, dtype, 2);
  const Tensor b =
      dt::test::rand_tensor({g.transposed ? g.groups * g.ci_g : g.groups * g.co_g}, dtype, 3);
  Result r;
  r.y = dt::convolution(x, w, b, g.stride, g.pad, g.dil, g.transposed, g.out_pad, g.groups);
  const Tensor go = dt::test::rand_tensor(r.y.sizes(), dtype, 4);
  const dt::ConvGrads grads =
      dt::convolution_backward(go, x, w, g.stride, g.pad, g.dil, g.transposed, g.out_pad, g.groups);
  r.gx = grads.grad_input;
  r.gw = grads.grad_weight;
  r.gb = grads.grad_bias;
  return r;
}

// max |got - want| <= bound: values are in [-1, 1], so an output summing `terms` products has
// a float32 rounding error below terms * 2^-23 (plus the float32 rounding of the inputs).
bool within(const Tensor& got, const Tensor& want, int64_t terms) {
  if (got.sizes() != want.sizes()) return false;
  const std::vector<double> a = got.to_vector<double>(), b = want.to_vector<double>();
  const double bound = 2.0 * static_cast<double>(terms + 1) * std::ldexp(1.0, -23);
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(std::abs(a[i] - b[i]) <= bound)) return false;
  }
  return true;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.to_vector<float>() == b.to_vector<float>();
}

bool onednn_loads() {
  try {
    ForceConv force("onednn");
    dt::detail::ConvGeometry g;
    return dt::detail::conv_use_onednn(g);
  } catch (const dt::Error&) {
    return false;
  }
}

// Whether oneDNN loads; otherwise prints the "[skipped]" line that reports the case skipped.
bool onednn_loads_or_skip() {
  if (onednn_loads()) return true;
  std::printf("[skipped] oneDNN does not load here: %s\n",
              dt::detail::conv_backend_info_str().c_str());
  return false;
}

// Checks the float32 backend DTENSOR_CONV=`backend` against float64 on 60 random geometries;
// returns the geometries' float32 results.
std::vector<Result> check_against_float64(const char* backend) {
  Lcg r{44};
  std::vector<Result> results;
  for (int i = 0; i < 60; ++i) {
    const Geometry g = random_geometry(r, i % 10 == 0 ? 0 : (i % 3 == 0 ? 1 : r.next(2, 3)));
    CAPTURE(backend, i, g.nd, g.n, g.groups, g.ci_g, g.co_g, g.size, g.k, g.stride, g.pad, g.dil,
            g.out_pad, g.transposed);
    const Result want = run(g, dt::kFloat64);
    Result res;
    {
      ForceConv force(backend);
      res = run(g, dt::kFloat32);
    }
    // Products summed per output: a conv output reads ci_g * K inputs, an input gradient at
    // most co_g * K outputs, a weight gradient every output position of every sample.
    int64_t k = 1, out = 1;
    for (int64_t d = 0; d < g.nd; ++d) k *= g.k[d];
    for (int64_t d = 2; d < want.y.dim(); ++d) out *= want.y.size(d);
    const int64_t im_c = g.transposed ? g.co_g : g.ci_g, col_c = g.transposed ? g.ci_g : g.co_g;
    CHECK(within(res.y, want.y, std::max(im_c, col_c) * k + 1));
    CHECK(within(res.gx, want.gx, std::max(im_c, col_c) * k));
    int64_t positions = g.n;
    for (int64_t d = 2; d < want.y.dim(); ++d) positions *= std::max(want.y.size(d), g.size[d - 2]);
    CHECK(within(res.gw, want.gw, positions));
    CHECK(within(res.gb, want.gb, g.n * out));
    results.push_back(res);
  }
  return results;
}

}  // namespace

TEST_CASE("float32 convolutions: im2col agrees with float64 on random geometries") {
  check_against_float64("im2col");
}

TEST_CASE("float32 convolutions: oneDNN agrees with float64 on random geometries") {
  if (!onednn_loads_or_skip()) return;
  const std::vector<Result> onednn = check_against_float64("onednn");
  const std::vector<Result> im2col = check_against_float64("im2col");
  // The variable reaches the kernels: some case's bits differ between the two settings
  // (another summation order); were it ignored, every case would be equal.
  int differ = 0;
  for (size_t i = 0; i < onednn.size(); ++i) {
    if (!same_bits(onednn[i].y, im2col[i].y) || !same_bits(onednn[i].gx, im2col[i].gx) ||
        !same_bits(onednn[i].gw, im2col[i].gw)) {
      ++differ;
    }
  }
  CHECK(differ > 0);
}

TEST_CASE("DTENSOR_CONV selects the float32 convolution backend per call") {
  dt::detail::ConvGeometry k3;  // a 3x3 conv, padding 1
  k3.n = 1;
  k3.ci = k3.co = 4;
  k3.im = k3.col = {1, 8, 8};
  k3.k = {1, 3, 3};
  k3.pad = {0, 1, 1};
  dt::detail::ConvGeometry k1 = k3;  // a 1x1 conv: the GEMM on the input itself
  k1.k = {1, 1, 1};
  k1.pad = {0, 0, 0};
  {
    ForceConv force("im2col");
    CHECK_FALSE(dt::detail::conv_use_onednn(k3));
    CHECK_FALSE(dt::detail::conv_use_onednn(k1));
    CHECK(dt::detail::conv_backend_info_str().find("im2col") == 0);
  }
  if (onednn_loads()) {
    {
      ForceConv force("");
      CHECK(dt::detail::conv_use_onednn(k3));
      CHECK_FALSE(dt::detail::conv_use_onednn(k1));
      CHECK(dt::detail::conv_backend_info_str().find("oneDNN") == 0);
    }
    ForceConv force("onednn");
    CHECK(dt::detail::conv_use_onednn(k1));
  }
  ForceConv force("gemm");
  CHECK_THROWS_WITH(dt::detail::conv_use_onednn(k3),
                    Catch::Contains("[convolution] DTENSOR_CONV=gemm: expected onednn or im2col"));
  const Tensor x = dt::test::rand_tensor({1, 4, 8, 8}, dt::kFloat32, 1);
  const Tensor w = dt::test::rand_tensor({4, 4, 3, 3}, dt::kFloat32, 2);
  CHECK_THROWS_WITH(dt::conv2d(x, w, Tensor(), {1}, {1}), Catch::Contains("DTENSOR_CONV=gemm"));
}

// A sharded convolution runs the kernel on a slice: data parallel on a batch slice, a
// height-sharded (halo) one on a slab of rows extended by its neighbours' edge rows, without
// height padding where those rows stand in for it. oneDNN could pick another kernel or blocking
// for another minibatch or height, and so other bits than the single-device op; on the ResNet
// shape of bench_ops2 (where it prints max |halo - gather| 0) it gives the same bits, forward and
// grad_input (grad_weight is a sum over the batch: sharded, it is all-reduced in another order
// with either backend). The float32 sharded-vs-single-device checks (train_resnet) hold within
// their tolerance either way; this pins that the kernel choice does not depend on the slice.
TEST_CASE("oneDNN float32 conv: a batch slice or a haloed row slab gives the full tensor's bits") {
  if (!onednn_loads_or_skip()) return;
  ForceConv force("");
  const Tensor x = dt::test::rand_tensor({8, 64, 56, 56}, dt::kFloat32, 1);
  const Tensor w = dt::test::rand_tensor({64, 64, 3, 3}, dt::kFloat32, 2);
  const Tensor y = dt::conv2d(x, w, Tensor(), {1}, {1});
  const Tensor go = dt::test::rand_tensor(y.sizes(), dt::kFloat32, 3);
  const dt::ConvGrads full =
      dt::convolution_backward(go, x, w, {1, 1}, {1, 1}, {1, 1}, false, {0, 0}, 1);
  // Batch: samples 4..7.
  const Tensor xb = x.narrow(0, 4, 4).contiguous();
  CHECK(same_bits(dt::conv2d(xb, w, Tensor(), {1}, {1}), y.narrow(0, 4, 4).contiguous()));
  const dt::ConvGrads gb = dt::convolution_backward(go.narrow(0, 4, 4).contiguous(), xb, w, {1, 1},
                                                    {1, 1}, {1, 1}, false, {0, 0}, 1);
  CHECK(same_bits(gb.grad_input, full.grad_input.narrow(0, 4, 4).contiguous()));
  // Height: output rows 28..55 of rank 1 of 2 read input rows 27..56 (row 56 is padding).
  const Tensor xh = x.narrow(2, 27, 29).contiguous();
  const Tensor yh = dt::convolution(xh, w, Tensor(), {1, 1}, {0, 1}, {1, 1}, false, {0, 0}, 1);
  // xh has 29 rows: output rows 28..54; the last output row needs the bottom padding.
  CHECK(same_bits(yh, y.narrow(2, 28, 27).contiguous()));
}

// Channels that make oneDNN pick its blocked layouts for every argument: convolution_backward
// then runs both gradients in one call (conv_backward_onednn: grad_output reordered once, the
// weight pass's blocked input and weight gradient placed over the data pass's dead buffers).
TEST_CASE("oneDNN float32 conv backward on blocked layouts agrees with float64") {
  if (!onednn_loads_or_skip()) return;
  ForceConv force("");
  for (const int64_t stride : {1, 2}) {
    CAPTURE(stride);
    Result want, got;
    for (const dt::DType dtype : {dt::kFloat64, dt::kFloat32}) {
      const Tensor x = dt::test::rand_tensor({2, 32, 12, 12}, dtype, 1);
      const Tensor w = dt::test::rand_tensor({48, 32, 3, 3}, dtype, 2);
      const Tensor y = dt::conv2d(x, w, Tensor(), {stride}, {1});
      const Tensor go = dt::test::rand_tensor(y.sizes(), dtype, 3);
      const dt::ConvGrads gr =
          dt::convolution_backward(go, x, w, {stride, stride}, {1, 1}, {1, 1}, false, {0, 0}, 1);
      (dtype == dt::kFloat64 ? want : got) = Result{y, gr.grad_input, gr.grad_weight, Tensor()};
    }
    CHECK(within(got.y, want.y, 32 * 9 + 1));
    CHECK(within(got.gx, want.gx, 48 * 9));
    CHECK(within(got.gw, want.gw, 2 * 12 * 12));
  }
}
