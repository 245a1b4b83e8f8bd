// The activation modules (dtensor/nn/activation.h) on one process (self mesh) and sharded: forward
// is the DTensor op with the module's arguments, torch.nn's defaults, no parameters, gradients
// flow.
#include <catch2/catch.hpp>

#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/softmax/softmax.h"
#include "dtensor/rng/generator.h"
#include "dtensor/tensor/creation.h"
#include "tests/common/ops_dtensor_test_util.h"
#include "tests/nn/inventory_reference.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
namespace tt = dtensor::test;
using dt::DTensor;
using dt::Tensor;

TEST_CASE("activation modules call their op with torch.nn's defaults", "[nn]") {
  const Tensor x = tt::det_input({4, 6}, 2, -8.0, 2.5, dt::kFloat32);  // -8 .. 17
  const DTensor in = nn::local_dtensor(x);
  struct Case {
    std::shared_ptr<nn::Module> m;
    const char* type;
    Tensor want;
  };
  const std::vector<Case> cases = {
      {std::make_shared<nn::Softplus>(), "Softplus", dt::softplus(x, 1.0, 20.0)},
      {std::make_shared<nn::Softplus>(2.0, 5.0), "Softplus", dt::softplus(x, 2.0, 5.0)},
      {std::make_shared<nn::ELU>(), "ELU", dt::elu(x, 1.0)},
      {std::make_shared<nn::ELU>(0.5), "ELU", dt::elu(x, 0.5)},
      {std::make_shared<nn::CELU>(), "CELU", dt::celu(x, 1.0)},
      {std::make_shared<nn::CELU>(2.0), "CELU", dt::celu(x, 2.0)},
      {std::make_shared<nn::LeakyReLU>(), "LeakyReLU", dt::leaky_relu(x, 0.01)},
      {std::make_shared<nn::LeakyReLU>(0.2), "LeakyReLU", dt::leaky_relu(x, 0.2)},
      {std::make_shared<nn::ReLU6>(), "ReLU6", dt::relu6(x)},
      {std::make_shared<nn::GLU>(), "GLU", dt::glu(x, -1)},
      {std::make_shared<nn::GLU>(0), "GLU", dt::glu(x, 0)},
      {std::make_shared<nn::Softmin>(1), "Softmin", dt::softmin(x, 1)},
      {std::make_shared<nn::Softmin>(0), "Softmin", dt::softmin(x, 0)},
  };
  for (const Case& c : cases) {
    INFO(c.type);
    CHECK(c.m->type_name() == c.type);
    CHECK(c.m->parameters().empty());
    CHECK(tt::same_values((*c.m)(in).to_local(), c.want, 0));
  }
  CHECK(nn::Softplus().beta() == 1.0);
  CHECK(nn::Softplus().threshold() == 20.0);
  CHECK(nn::ELU().alpha() == 1.0);
  CHECK(nn::CELU().alpha() == 1.0);
  CHECK(nn::LeakyReLU().negative_slope() == 0.01);
  CHECK(nn::GLU().dim() == -1);
  CHECK_THROWS_WITH(nn::CELU(0.0)(in), Catch::Contains("[celu] alpha cannot be 0 for CELU"));
  CHECK_THROWS_WITH(nn::GLU(0)(nn::local_dtensor(x.narrow(0, 0, 3))),
                    Catch::Contains("[glu] halving dimension must be even"));
}

TEST_CASE("activation modules in a Sequential-like chain pass gradients", "[nn]") {
  const Tensor x = tt::det_input({3, 8}, 1, -2.0, 0.5, dt::kFloat64);
  DTensor in = nn::local_dtensor(x);
  in.requires_grad_();
  nn::GLU glu;
  nn::ELU elu(0.5);
  nn::Softmin softmin(1);
  dt::sum(dt::mul(softmin(elu(glu(in))), nn::local_dtensor(tt::det_input({3, 4}, 5)))).backward();
  REQUIRE(in.grad().defined());
  CHECK(in.grad().shape() == dt::Shape{3, 8});
}

TEST_CASE("round-9 activation modules give PyTorch's values and gradients", "[nn]") {
  const nn::ModuleOptions f64 = tt::inventory::f64();
  const std::vector<tt::inventory::ModuleCase> cases = {
      {"Hardtanh()", std::make_shared<nn::Hardtanh>(), "Hardtanh"},
      {"Hardtanh(-0.5,2)", std::make_shared<nn::Hardtanh>(-0.5, 2.0), "Hardtanh"},
      {"Hardswish()", std::make_shared<nn::Hardswish>(), "Hardswish"},
      // PyTorch's float64 hardsigmoid_backward multiplies by 1/6 rounded to float32 (its grad
      // is 1.8e-8 relative off the exact 1/6 dtensor's gives).
      {"Hardsigmoid()", std::make_shared<nn::Hardsigmoid>(), "Hardsigmoid", 1e-7},
      {"Mish()", std::make_shared<nn::Mish>(), "Mish"},
      {"SELU()", std::make_shared<nn::SELU>(), "SELU"},
      {"LogSigmoid()", std::make_shared<nn::LogSigmoid>(), "LogSigmoid"},
      {"Softsign()", std::make_shared<nn::Softsign>(), "Softsign"},
      {"Tanhshrink()", std::make_shared<nn::Tanhshrink>(), "Tanhshrink"},
      {"Threshold(0.5,-3)", std::make_shared<nn::Threshold>(0.5, -3.0), "Threshold"},
      {"Hardshrink()", std::make_shared<nn::Hardshrink>(), "Hardshrink"},
      {"Hardshrink(1)", std::make_shared<nn::Hardshrink>(1.0), "Hardshrink"},
      {"Softshrink()", std::make_shared<nn::Softshrink>(), "Softshrink"},
      {"Softshrink(1)", std::make_shared<nn::Softshrink>(1.0), "Softshrink"},
      {"Softmax2d() 4d", std::make_shared<nn::Softmax2d>(), "Softmax2d"},
      {"Softmax2d() 3d", std::make_shared<nn::Softmax2d>(), "Softmax2d"},
      {"PReLU()", std::make_shared<nn::PReLU>(1, 0.25, f64), "PReLU"},
      {"PReLU(3) 3d", std::make_shared<nn::PReLU>(3, 0.1, f64), "PReLU"},
      {"RReLU() eval", std::make_shared<nn::RReLU>(), "RReLU"},
      {"RReLU(0.1,0.3) eval", std::make_shared<nn::RReLU>(0.1, 0.3), "RReLU"},
  };
  tt::inventory::check_modules(cases);
  CHECK(nn::Hardtanh().min_val() == -1.0);
  CHECK(nn::Hardtanh().max_val() == 1.0);
  CHECK(nn::Hardshrink().lambd() == 0.5);
  CHECK(nn::Softshrink().lambd() == 0.5);
  CHECK(nn::RReLU().lower() == 1.0 / 8.0);
  CHECK(nn::RReLU().upper() == 1.0 / 3.0);
  nn::PReLU prelu(4, 0.25, f64);
  CHECK(prelu.num_parameters() == 4);
  CHECK(tt::same_values(prelu.param("weight").to_local(),
                        dt::full({4}, 0.25, dt::TensorOptions(dt::kFloat64)), 0));
  CHECK_THROWS_WITH(nn::Hardtanh(1.0, 0.0),
                    Catch::Contains("[Hardtanh] max_val (0) must be greater than min_val (1)"));
  CHECK_THROWS_WITH(nn::RReLU(0.5, 0.2), Catch::Contains("[RReLU] lower bound 0.5 should be less "
                                                         "than or equal to the upper bound 0.2"));
  const DTensor x2 = nn::local_dtensor(tt::det_input({2, 4}, 1, -2.0, 0.5, dt::kFloat64));
  CHECK_THROWS_WITH(nn::Softshrink(-1.0)(x2),
                    Catch::Contains("[Softshrink] lambd must be >= 0, got -1"));
  CHECK_THROWS_WITH(nn::Softmax2d()(x2),
                    Catch::Contains("[Softmax2d] expected input to be 3D or 4D, got 2D instead"));
  CHECK_THROWS_WITH(nn::PReLU(3, 0.25, f64)(x2),
                    Catch::Contains("[PReLU] Mismatch of parameter numbers and input channel size. "
                                    "Found parameter numbers = 3 and channel size = 4"));
}

TEST_CASE("RReLU in training draws each negative slope uniform between lower and upper", "[nn]") {
  const Tensor x = tt::det_input({64, 32}, 3, -2.5, 0.5, dt::kFloat64);
  DTensor in = nn::local_dtensor(x);
  in.requires_grad_();
  dt::Generator gen(7);
  nn::RReLU m(0.1, 0.3, &gen);
  const DTensor y = m(in);
  dt::sum(y).backward();
  const std::vector<double> xv = x.to_vector<double>(), yv = y.to_local().to_vector<double>(),
                            gv = in.grad().to_local().to_vector<double>();
  double lo = 1.0, hi = 0.0, mean = 0.0;
  int64_t n = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    if (xv[i] > 0) {
      CHECK(yv[i] == xv[i]);
      CHECK(gv[i] == 1.0);
      continue;
    }
    if (xv[i] < 0) CHECK(std::abs(yv[i] / xv[i] - gv[i]) < 1e-15);  // slope = gradient
    lo = std::min(lo, gv[i]);
    hi = std::max(hi, gv[i]);
    mean += gv[i];
    ++n;
  }
  CHECK(lo >= 0.1);
  CHECK(hi < 0.3);
  CHECK(std::abs(mean / static_cast<double>(n) - 0.2) < 0.01);
  CHECK(hi - lo > 0.19);
}
