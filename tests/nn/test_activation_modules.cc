// The activation modules (dtensor/nn/activation.h) on one process (self mesh) and sharded: forward
// is the DTensor op with the module's arguments, torch.nn's defaults, no parameters, gradients
// flow.
#include <catch2/catch.hpp>

#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/softmax/softmax.h"
#include "dtensor/tensor/creation.h"
#include "tests/common/ops_dtensor_test_util.h"

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
