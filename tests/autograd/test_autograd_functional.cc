// torch.autograd.functional over DTensors on one process (dtensor/autograd/functional.h): vjp,
// jvp, vhp, hvp, jacobian and hessian of a two-input function (matmul, tanh, exp, sum, softmax,
// log_softmax) against PyTorch 2.15 at 1e-12 (torch_functional_references.py), create_graph to
// third order, strict and the argument errors.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "dtensor/autograd/engine.h"
#include "dtensor/autograd/functional.h"
#include "dtensor/core/factories.h"
#include "tests/autograd/functional_functions.h"
#include "tests/autograd/functional_references.inc"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace af = dtensor::autograd::functional;
namespace refs = dtensor::test::functional_refs;
using Catch::Contains;
using dt::DTensor;
using dt::Shape;

namespace {

DTensor range(Shape shape, double div, double sub) {
  std::vector<double> v;
  for (int64_t i = 0; i < dt::shape_numel(shape); ++i) v.push_back(i / div - sub);
  return dt::local_dtensor(dt::from_vector<double>(v, shape));
}

// The inputs and the vectors of the reference script.
std::vector<DTensor> inputs() {
  return {range({3, 4}, 7, 0.5), range({4, 2}, 5, 0.3)};
}
std::vector<DTensor> v_out() {
  return {range({3, 2}, 3, 0.8), range({3}, 2, 0.4)};
}
std::vector<DTensor> v_in() {
  return {range({3, 4}, 11, 0.3), range({4, 2}, 4, 1)};
}

bool equals(const DTensor& got, const std::vector<double>& want, Shape shape) {
  return got.shape() == shape &&
         dt::test::same_values(got.full_tensor(), dt::from_vector<double>(want, shape), 1e-12);
}

}  // namespace

TEST_CASE("autograd.functional vjp and jvp equal PyTorch's") {
  const af::FunctionalResult vjp = af::vjp(dt::test::functional_g, inputs(), v_out());
  REQUIRE(vjp.outputs.size() == 2);
  CHECK(equals(vjp.outputs[0], refs::kOut0, {3, 2}));
  CHECK(equals(vjp.outputs[1], refs::kOut1, {3}));
  CHECK(equals(vjp.result[0], refs::kVjpX, {3, 4}));
  CHECK(equals(vjp.result[1], refs::kVjpW, {4, 2}));
  CHECK_FALSE(vjp.result[0].requires_grad());  // detached without create_graph
  CHECK_FALSE(vjp.outputs[0].requires_grad());
  const af::FunctionalResult jvp = af::jvp(dt::test::functional_g, inputs(), v_in());
  CHECK(equals(jvp.result[0], refs::kJvp0, {3, 2}));
  CHECK(equals(jvp.result[1], refs::kJvp1, {3}));
}

TEST_CASE("autograd.functional vhp and hvp equal PyTorch's") {
  const af::FunctionalResult vhp = af::vhp(dt::test::functional_s, inputs(), v_in());
  CHECK(equals(vhp.outputs[0], refs::kScalar, {}));
  CHECK(equals(vhp.result[0], refs::kVhpX, {3, 4}));
  CHECK(equals(vhp.result[1], refs::kVhpW, {4, 2}));
  const af::FunctionalResult hvp = af::hvp(dt::test::functional_s, inputs(), v_in());
  CHECK(equals(hvp.result[0], refs::kHvpX, {3, 4}));
  CHECK(equals(hvp.result[1], refs::kHvpW, {4, 2}));
}

TEST_CASE("autograd.functional jacobian and hessian equal PyTorch's") {
  const auto jac = af::jacobian(dt::test::functional_g, inputs());
  REQUIRE(jac.size() == 2);
  CHECK(equals(jac[0][0], refs::kJac00, {3, 2, 3, 4}));
  CHECK(equals(jac[0][1], refs::kJac01, {3, 2, 4, 2}));
  CHECK(equals(jac[1][0], refs::kJac10, {3, 3, 4}));
  CHECK(equals(jac[1][1], refs::kJac11, {3, 4, 2}));
  const auto hess = af::hessian(dt::test::functional_s, inputs());
  REQUIRE(hess.size() == 2);
  CHECK(equals(hess[0][0], refs::kHess00, {3, 4, 3, 4}));
  CHECK(equals(hess[0][1], refs::kHess01, {3, 4, 4, 2}));
  CHECK(equals(hess[1][0], refs::kHess10, {4, 2, 3, 4}));
  CHECK(equals(hess[1][1], refs::kHess11, {4, 2, 4, 2}));
  CHECK_FALSE(hess[0][1].requires_grad());
}

TEST_CASE("autograd.functional create_graph: third order equals PyTorch's") {
  std::vector<DTensor> in = inputs();
  in[0].requires_grad_();
  const af::FunctionalResult hvp =
      af::hvp(dt::test::functional_s, in, v_in(), /*create_graph=*/true);
  const DTensor hx[] = {dt::sum(hvp.result[1])}, x[] = {in[0]};
  CHECK(equals(dt::autograd::grad(hx, x)[0], refs::kHvpWGradX, {3, 4}));
  const auto jac = af::jacobian(dt::test::functional_g, in, /*create_graph=*/true);
  const DTensor jx[] = {dt::sum(jac[0][1])};
  CHECK(equals(dt::autograd::grad(jx, x)[0], refs::kJac01GradX, {3, 4}));
  CHECK_FALSE(in[0].grad().defined());
}

TEST_CASE("autograd.functional strict, unused inputs and argument errors") {
  const af::Function tanh_x = [](const std::vector<DTensor>& in) {
    return std::vector<DTensor>{dt::tanh(in[0])};
  };
  const std::vector<DTensor> ones = {dt::ones_like(inputs()[0])};
  // Not strict: zeros for the input the output does not depend on.
  const af::FunctionalResult r = af::vjp(tanh_x, inputs(), ones);
  CHECK(equals(r.result[1], std::vector<double>(8, 0.0), {4, 2}));
  CHECK(equals(af::jacobian(tanh_x, inputs())[0][1], std::vector<double>(96, 0.0), {3, 4, 4, 2}));
  CHECK_THROWS_WITH(af::vjp(tanh_x, inputs(), ones, false, /*strict=*/true),
                    Contains("[autograd.functional] vjp: The output of the user-provided function "
                             "is independent of input 1. This is not allowed in strict mode."));
  CHECK_THROWS_WITH(af::jacobian(tanh_x, inputs(), false, /*strict=*/true),
                    Contains("[autograd.functional] jacobian: Output 0 of the user-provided "
                             "function is independent of input 1."));
  // A linear function: its jacobian does not require grad; zeros, or PyTorch's strict message.
  const af::Function linear = [](const std::vector<DTensor>& in) {
    return std::vector<DTensor>{dt::sum(in[0]) + dt::sum(in[1])};
  };
  CHECK(equals(af::hessian(linear, inputs())[0][1], std::vector<double>(96, 0.0), {3, 4, 4, 2}));
  CHECK(equals(af::vhp(linear, inputs(), v_in()).result[1], std::vector<double>(8, 0.0), {4, 2}));
  for (const char* fn : {"hessian", "vhp"}) {
    CHECK_THROWS_WITH(fn[0] == 'h' ? af::hessian(linear, inputs(), false, true)[0]
                                   : af::vhp(linear, inputs(), v_in(), false, true).result,
                      Contains(std::string("[autograd.functional] ") + fn +
                               ": While computing the hessian, found that the jacobian of the "
                               "user-provided function with respect to input 0 is independent "
                               "of the input. This is not allowed in strict mode."));
  }
  CHECK_THROWS_WITH(af::hessian(dt::test::functional_g, inputs()),
                    Contains("[autograd.functional] hessian: The function given to hessian should "
                             "return a single Tensor"));
  CHECK_THROWS_WITH(af::vjp(dt::test::functional_g, inputs()),
                    Contains("[autograd.functional] vjp: The vector v can only be None if the "
                             "user-provided function returns a single Tensor with a single "
                             "element."));
  CHECK_THROWS_WITH(af::jvp(dt::test::functional_g, inputs(), {v_in()[0]}),
                    Contains("[autograd.functional] jvp: v is a tuple of invalid length"));
  CHECK_THROWS_WITH(af::vjp(dt::test::functional_g, inputs(), {v_out()[1], v_out()[1]}),
                    Contains("Entry 0 in v has invalid size: should be [3, 2] but got [3]"));
}

TEST_CASE("autograd.functional strict with create_graph: results must require grad") {
  // PyTorch's _fill_in_zeros: a linear function's vjp / jvp, a quadratic's vhp / hvp.
  const af::Function linear = [](const std::vector<DTensor>& in) {
    return std::vector<DTensor>{dt::sum(in[0]) + dt::sum(in[1])};
  };
  const af::Function square = [](const std::vector<DTensor>& in) {
    return std::vector<DTensor>{dt::sum(in[0] * in[0]) + dt::sum(in[1] * in[1])};
  };
  const std::string jacobian_message =
      "The jacobian of the user-provided function is independent of input 0. This is not "
      "allowed in strict mode when create_graph=True.";
  const std::string hessian_message =
      "The hessian of the user-provided function is independent of input 0. This is not "
      "allowed in strict mode when create_graph=True.";
  CHECK_THROWS_WITH(af::vjp(linear, inputs(), {}, true, true),
                    Contains("[autograd.functional] vjp: " + jacobian_message));
  CHECK_THROWS_WITH(af::jvp(linear, inputs(), v_in(), true, true),
                    Contains("[autograd.functional] jvp: " + jacobian_message));
  CHECK_THROWS_WITH(af::vhp(square, inputs(), v_in(), true, true),
                    Contains("[autograd.functional] vhp: " + hessian_message));
  CHECK_THROWS_WITH(af::hvp(square, inputs(), v_in(), true, true),
                    Contains("[autograd.functional] hvp: " + hessian_message));
  // Not strict, or not create_graph: the same products (ones, v, 2 v).
  CHECK(equals(af::vjp(linear, inputs(), {}, true).result[1], std::vector<double>(8, 1.0), {4, 2}));
  CHECK(equals(af::vjp(linear, inputs(), {}, false, true).result[1], std::vector<double>(8, 1.0),
               {4, 2}));
  CHECK(
      dt::test::same_values(af::hvp(square, inputs(), v_in(), false, true).result[1].full_tensor(),
                            (v_in()[1] * 2.0).full_tensor(), 1e-12));
  // hessian checks the function's output as PyTorch's ensure_single_output_function.
  const af::Function constant = [](const std::vector<DTensor>& in) {
    return std::vector<DTensor>{dt::sum(in[0].detach())};
  };
  CHECK_THROWS_WITH(af::hessian(constant, inputs(), false, true),
                    Contains("[autograd.functional] hessian: Output 0 of the user-provided "
                             "function does not require gradients. The outputs must be computed "
                             "in a differentiable manner from the input when running in strict "
                             "mode."));
}
