// The convolution modules (dtensor/nn/conv.h) on one process: parameter names and shapes,
// PyTorch's initialisation bounds (1/sqrt(fan_in), reproducible under manual_seed), forward equal
// to the functional op, backward reaching the parameters, and argument errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "dtensor/nn/nn.h"
#include "dtensor/ops/conv/conv.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/creation.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
using dt::Shape;

namespace {

double max_abs(const dt::Tensor& t) {
  double m = 0;
  for (double v : t.to_vector<double>()) m = std::max(m, std::fabs(v));
  return m;
}

bool same(const dt::Tensor& a, const dt::Tensor& b) {
  if (a.sizes() != b.sizes()) return false;
  const auto x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::fabs(x[i] - y[i]) > 1e-5 * (1 + std::fabs(y[i]))) return false;
  }
  return true;
}

// m against PyTorch's values (tests/nn/torch_nn_references.py): weight det_input(shape, 3, -1,
// 0.25), bias [0.5, -0.25], input det_input(in_shape, 1) (float64); out, then the gradients of
// sum(out * det_input(out shape, 5, -1, 0.25)) for the input, the weight and (db not empty)
// the bias.
void check_against_torch(nn::Module& m, const Shape& in_shape, const std::vector<double>& out,
                         const std::vector<double>& dx, const std::vector<double>& dw,
                         const std::vector<double>& db = {}) {
  namespace tt = dtensor::test;
  const dt::Tensor w0 = m.param("weight").to_local();
  m.set_parameter("weight",
                  nn::local_dtensor(tt::det_input(w0.shape(), 3, -1.0, 0.25, dt::kFloat64)));
  if (m.has_param("bias"))
    m.set_parameter("bias",
                    nn::local_dtensor(dt::from_vector(std::vector<double>{0.5, -0.25}, {2})));
  dt::DTensor x = nn::local_dtensor(tt::det_input(in_shape, 1, -2.5, 0.5, dt::kFloat64));
  x.requires_grad_(true);
  const dt::DTensor y = m(x);
  REQUIRE(static_cast<size_t>(y.numel()) == out.size());
  CHECK(same(y.to_local(), dt::from_vector(out, y.shape())));
  dt::sum(dt::mul(y, nn::local_dtensor(tt::det_input(y.shape(), 5, -1.0, 0.25, dt::kFloat64))))
      .backward();
  CHECK(same(x.grad().to_local(), dt::from_vector(dx, in_shape)));
  CHECK(same(m.param("weight").grad().to_local(), dt::from_vector(dw, w0.shape())));
  if (!db.empty()) CHECK(same(m.param("bias").grad().to_local(), dt::from_vector(db, {2})));
}
}  // namespace

TEST_CASE("Conv and ConvTranspose modules: shapes, PyTorch's init bounds, forward", "[nn]") {
  dt::manual_seed(3);
  nn::Conv2d a(6, 8, {3, 2}, {2}, {1}, {1}, 2);
  dt::manual_seed(3);
  nn::Conv2d b(6, 8, {3, 2}, {2}, {1}, {1}, 2);
  CHECK(a.type_name() == "Conv2d");
  CHECK(a.param("weight").shape() == Shape{8, 3, 3, 2});
  CHECK(a.param("bias").shape() == Shape{8});
  CHECK(a.kernel_size() == Shape{3, 2});
  CHECK(a.stride() == Shape{2, 2});
  const dt::Tensor wa = a.param("weight").to_local();
  CHECK(wa.to_vector<double>() == b.param("weight").to_local().to_vector<double>());
  // fan_in = 3 * 3 * 2 = 18: every value within 1/sqrt(18), and the range is used.
  const double bound = 1.0 / std::sqrt(18.0);
  CHECK(max_abs(wa) <= bound);
  CHECK(max_abs(wa) > 0.8 * bound);
  CHECK(max_abs(a.param("bias").to_local()) <= bound);

  const dt::Tensor x = dt::randn({2, 6, 7, 5}, dt::TensorOptions(dt::kFloat32));
  const dt::DTensor y = a.forward(nn::local_dtensor(x));
  CHECK(same(y.to_local(), dt::conv2d(x, wa, a.param("bias").to_local(), {2}, {1}, {1}, 2)));

  nn::ConvTranspose2d t(4, 6, {3}, {2}, {1}, {1}, 2, false);
  CHECK(t.type_name() == "ConvTranspose2d");
  CHECK(t.param("weight").shape() == Shape{4, 3, 3, 3});
  CHECK_FALSE(t.has_param("bias"));
  CHECK(max_abs(t.param("weight").to_local()) <= 1.0 / std::sqrt(27.0));  // fan_in 3 * 9
  const dt::Tensor xt = dt::randn({1, 4, 3, 3}, dt::TensorOptions(dt::kFloat32));
  const dt::DTensor yt = t.forward(nn::local_dtensor(xt));
  CHECK(yt.shape() == Shape{1, 6, 6, 6});
  CHECK(same(yt.to_local(), dt::conv_transpose2d(xt, t.param("weight").to_local(), dt::Tensor(),
                                                 {2}, {1}, {1}, 2)));

  nn::Conv1d c1(3, 4, {3});
  nn::Conv3d c3(2, 2, {2}, {1}, {1});
  nn::ConvTranspose1d t1(3, 2, {2}, {2});
  nn::ConvTranspose3d t3(2, 2, {2});
  CHECK(c1.param("weight").shape() == Shape{4, 3, 3});
  CHECK(c3.param("weight").shape() == Shape{2, 2, 2, 2, 2});
  CHECK(t1.param("weight").shape() == Shape{3, 2, 2});
  CHECK(t3.param("weight").shape() == Shape{2, 2, 2, 2, 2});
  CHECK(c1.forward(nn::local_dtensor(dt::randn({2, 3, 9}, dt::TensorOptions(dt::kFloat32))))
            .shape() == Shape{2, 4, 7});
  CHECK(t1.forward(nn::local_dtensor(dt::randn({2, 3, 4}, dt::TensorOptions(dt::kFloat32))))
            .shape() == Shape{2, 2, 8});
}

TEST_CASE("Conv2d backward reaches weight and bias, bad arguments raise", "[nn]") {
  dt::manual_seed(5);
  nn::Conv2d m(2, 3, {3}, {1}, {1});
  dt::DTensor x = nn::local_dtensor(dt::randn({2, 2, 4, 4}, dt::TensorOptions(dt::kFloat32)));
  dt::sum(m.forward(x)).backward();
  CHECK(m.param("weight").grad().defined());
  CHECK(m.param("bias").grad().shape() == Shape{3});
  // d sum(y) / d bias = N * H * W per channel.
  for (double v : m.param("bias").grad().to_local().to_vector<double>()) CHECK(v == 32.0);
  CHECK_THROWS_WITH(nn::Conv2d(3, 4, {3}, {1}, {0}, {1}, 2), Catch::Contains("divisible"));
  CHECK_THROWS_WITH(nn::Conv2d(3, 4, {3, 3, 3}), Catch::Contains("expected 1 or 2 values"));
}

TEST_CASE("Conv and ConvTranspose modules take an unbatched input, as PyTorch", "[nn]") {
  // PyTorch 2.15 (tests/nn/torch_nn_references.py, "... unbatched input"): [C, *spatial] runs
  // as a batch of one; before round 6 the modules raised "expected a batched input".
  namespace tt = dtensor::test;
  nn::Conv1d c(2, 2, {2}, {1}, {0}, {1}, 1, false, {.dtype = dt::kFloat64});
  check_against_torch(c, {2, 5}, {1.0, -0.125, -2.625, 0.375, 1.125, 0.375, -3.125, 0.25},
                      {-1.3125, 1.25, -1.5, 3.3125, 0.375, 0.875, -2.0625, 1.8125, -1.875, 1.5},
                      {-2.125, -1.75, -1.625, -1.25, -0.5, 0.25, 0.5, 1.25});
  nn::ConvTranspose2d t(1, 2, {2}, {2}, {0}, {0}, 1, true, {1}, {.dtype = dt::kFloat64});
  check_against_torch(
      t, {1, 2, 2},
      {1.0,    -2.5, 0.125,  2.75,   -0.5,   1.5,    1.25,  -0.25, 0.625, -0.25, 1.125,
       -3.25,  0.25, 0.75,   -0.75,  1.75,   -2.75,  -0.75, 1.625, 0.125, 1.25,  -2.25,
       -1.375, 1.25, -0.875, -0.375, -3.375, -0.875, 0.125, -0.75, 1.625, -2.75},
      {0.4375, -0.0625, 1.1875, -1.375}, {-2.375, 1.125, 2.0, 2.75, 2.75, -0.625, 0.25, -3.125});
  // Inputs of other numbers of dims still raise (the op's message).
  CHECK_THROWS_WITH(c(nn::local_dtensor(tt::det_input({5}, 0, -2.5, 0.5, dt::kFloat64))),
                    Catch::Contains("batched input"));
}

TEST_CASE("Conv padding 'same' / 'valid' and padding_mode reflect / replicate / circular", "[nn]") {
  // PyTorch 2.15 (tests/nn/torch_nn_references.py, "Conv padding='same' ..."): weight
  // det_input(shape, 3, -1, 0.25), bias [0.5, -0.25], input det_input(shape, 1), gradients of
  // sum(out * det_input(out shape, 5, -1, 0.25)).
  const nn::ModuleOptions f64{.dtype = dt::kFloat64};
  {  // Conv1d(1,2,4,padding='same')
    nn::Conv1d m(1, 2, {4}, {1}, "same", {1}, 1, true, "zeros", f64);
    check_against_torch(
        m, {1, 1, 6},
        {-1.5, 4.25, -2.375, -2.125, 2.125, -1.25, -2.375, -4.5, 4.375, -3.25, -2.375, 0.75},
        {2.375, -0.0625, -0.875, 3.6875, -0.6875, -0.75},
        {6.25, -3.875, -0.75, 2.75, -4.875, 4.75, -4.125, -2.625}, {0.25, 2.75});
  }
  {  // Conv2d(1,2,(2,3),padding='same',dilation=(1,2),padding_mode='reflect')
    nn::Conv2d m(1, 2, {2, 3}, {1}, "same", {1, 2}, 1, true, "reflect", f64);
    check_against_torch(
        m, {1, 1, 4, 5},
        {-4.0,  2.625,  2.375, -8.375, 4.25,   -1.25, 1.25,   3.75, -2.875, 0.125,
         1.5,   -2.875, 3.75,  1.25,   -5.375, 2.25,  -2.125, 4.5,  2.0,    -4.625,
         -3.25, -0.125, 1.625, -7.125, 2.0,    -3.5,  1.0,    2.75, -1.875, -2.375,
         -3.75, -0.625, 2.5,   2.0,    -8.125, -3.0,  0.125,  3.25, 2.75,   -7.375},
        {-0.5625, -0.0625, 1.1875, -1.125, 0.0,    -0.625, -0.625,  2.9375,  -0.25,  1.1875,
         1.6875,  -1.125,  -0.75,  6.0,    0.1875, 1.375,  -0.4375, -2.0625, 5.9375, -0.6875},
        {-7.875, -10.0, 9.375, -7.5, -4.125, 2.875, -2.875, 10.75, 3.25, 6.5, 10.5, 1.625},
        {4.75, 3.5});
  }
  {  // Conv1d(2,2,3,padding=2,padding_mode='replicate',bias=False)
    nn::Conv1d m(2, 2, {3}, {1}, {2}, {1}, 1, false, "replicate", f64);
    check_against_torch(
        m, {2, 5},
        {-4.5, -1.875, 6.25, -3.375, -4.75, 6.375, 3.75, 0.0, -0.875, 5.75, -3.375, -4.25, 5.375,
         -0.75},
        {0.125, -0.3125, 1.8125, -0.875, 0.0625, -1.1875, -0.6875, 1.5625, -1.0, -0.3125},
        {-2.625, 5.5, -2.625, -2.625, 5.5, -2.625, 1.625, -5.75, -4.625, 4.875, -2.5, -1.375}, {});
  }
  {  // Conv2d(1,2,3,stride=2,padding=(1,2),padding_mode='circular')
    nn::Conv2d m(1, 2, {3}, {2}, {1, 2}, {1}, 1, true, "circular", f64);
    check_against_torch(
        m, {1, 1, 4, 4},
        {-1.375, -0.875, -1.375, 1.125, 1.625, 1.125, 4.125, -4.375, 4.125, -6.875, -0.25, -6.875},
        {2.8125, -0.1875, -1.1875, 1.6875, 1.6875, -0.9375, -2.5, 2.25, 2.6875, -0.625, -1.625,
         0.8125, 1.75, -0.6875, -3.125, 2.75},
        {-3.375, 3.0, 2.0, 2.375, -7.75, -3.25, -1.0, 2.625, 3.0, 2.25, -1.875, -0.5, -5.0, 4.625,
         -0.875, 4.625, -2.25, 0.5},
        {0.25, 2.75});
  }
  {  // Conv3d(1,2,2,padding='valid')
    nn::Conv3d m(1, 2, {2}, {1}, std::string("valid"), {1}, 1, true, "zeros", f64);
    check_against_torch(m, {1, 1, 2, 3, 2}, {10.625, -5.5, 5.75, -0.5},
                        {-0.0625, -0.625, 1.0625, -1.5, -0.375, 0.375, 1.8125, 0.5625, -1.625,
                         1.3125, 0.5625, -0.75},
                        {-0.125, 2.25, -0.875, 0.125, 1.75, -1.375, -0.375, 2.0, -2.0, 1.5, -0.5,
                         -2.5, 2.5, 0.5, -1.5, 2.0},
                        {-0.5, 1.0});
  }
  nn::Conv1d half(1, 2, {4}, {1}, "same");
  CHECK(half.padding() == Shape{1});  // the left padding; the extra one goes on the right
  CHECK(half.padding_mode() == "zeros");
  // PyTorch's errors (ValueError there).
  CHECK_THROWS_WITH(nn::Conv1d(1, 1, {3}, {2}, "same"),
                    Catch::Contains("padding='same' is not supported for strided convolutions"));
  CHECK_THROWS_WITH(nn::Conv1d(1, 1, {3}, {1}, "full"),
                    Catch::Contains("Invalid padding string 'full'"));
  CHECK_THROWS_WITH(nn::Conv1d(1, 1, {3}, {1}, {0}, {1}, 1, true, "mirror"),
                    Catch::Contains("padding_mode must be one of"));
  // A braced {} after bias is the options, as before padding_mode was an option (it compiled
  // then and must still: padding_mode takes strings only).
  nn::Conv2d braced(3, 4, {3}, {1}, {0}, {1}, 1, true, {});
  CHECK(braced.padding_mode() == "zeros");
  CHECK(braced.named_parameters().size() == 2);  // weight and bias
  nn::Conv2d reflect(3, 4, {3}, {1}, {1}, {1}, 1, false, std::string("reflect"));
  CHECK(reflect.padding_mode() == "reflect");
  CHECK(reflect.named_parameters().size() == 1);
}
