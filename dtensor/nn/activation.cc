// Activation modules: each forward is one DTensor op.
#include "dtensor/nn/activation.h"

#include <utility>

#include "dtensor/core/factories.h"
#include "dtensor/nn/functional.h"
#include "dtensor/nn/layers.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/softmax/softmax.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/rng/dtensor_random.h"
#include "dtensor/tensor/error.h"

namespace dtensor::nn {

DTensor Softplus::forward(const DTensor& x) {
  return dtensor::softplus(x, beta_, threshold_);
}
DTensor ELU::forward(const DTensor& x) {
  return dtensor::elu(x, alpha_);
}
DTensor CELU::forward(const DTensor& x) {
  return dtensor::celu(x, alpha_);
}
DTensor LeakyReLU::forward(const DTensor& x) {
  return dtensor::leaky_relu(x, negative_slope_);
}
DTensor ReLU6::forward(const DTensor& x) {
  return dtensor::relu6(x);
}
DTensor GLU::forward(const DTensor& x) {
  return dtensor::glu(x, dim_);
}
DTensor Softmin::forward(const DTensor& x) {
  return dtensor::softmin(x, dim_);
}

DTensor ReLU::forward(const DTensor& x) {
  return dtensor::relu(x);
}

GELU::GELU(std::string approximate) : approximate_(std::move(approximate)) {
  DT_CHECK(approximate_ == "none" || approximate_ == "tanh",
           "[GELU] approximate must be 'none' or 'tanh', got '%s'", approximate_);
}
DTensor GELU::forward(const DTensor& x) {
  return dtensor::gelu(x, approximate_ == "tanh" ? GeluApproximate::kTanh : GeluApproximate::kNone);
}
DTensor SiLU::forward(const DTensor& x) {
  return dtensor::silu(x);
}
DTensor Tanh::forward(const DTensor& x) {
  return dtensor::tanh(x);
}
DTensor Sigmoid::forward(const DTensor& x) {
  return dtensor::sigmoid(x);
}
DTensor Softmax::forward(const DTensor& x) {
  return dtensor::softmax(x, dim_);
}
DTensor LogSoftmax::forward(const DTensor& x) {
  return dtensor::log_softmax(x, dim_);
}

namespace {
// `value` everywhere x is, with x's dtype and placements (a where branch).
DTensor constant_like(const DTensor& x, double value) {
  return full_like(x, Scalar(value));
}
}  // namespace

Hardtanh::Hardtanh(double min_val, double max_val) : min_val_(min_val), max_val_(max_val) {
  DT_CHECK(max_val > min_val, "[Hardtanh] max_val (%g) must be greater than min_val (%g)", max_val,
           min_val);
}
DTensor Hardtanh::forward(const DTensor& x) {
  // Boundary values take the constant branch: gradient 0 there, as PyTorch's hardtanh_backward.
  return where(le(x, Scalar(min_val_)), constant_like(x, min_val_),
               where(ge(x, Scalar(max_val_)), constant_like(x, max_val_), x));
}
DTensor Hardswish::forward(const DTensor& x) {
  return dtensor::hardswish(x);
}
DTensor Hardsigmoid::forward(const DTensor& x) {
  return dtensor::hardsigmoid(x);
}
DTensor Mish::forward(const DTensor& x) {
  return dtensor::mish(x);
}
DTensor SELU::forward(const DTensor& x) {
  return dtensor::selu(x);
}
DTensor LogSigmoid::forward(const DTensor& x) {
  return dtensor::log_sigmoid(x);
}
DTensor Softsign::forward(const DTensor& x) {
  return div(x, add(abs(x), Scalar(1.0)));
}
DTensor Tanhshrink::forward(const DTensor& x) {
  return sub(x, dtensor::tanh(x));
}
DTensor Threshold::forward(const DTensor& x) {
  return where(gt(x, Scalar(threshold_)), x, constant_like(x, value_));
}
DTensor Hardshrink::forward(const DTensor& x) {
  return where(gt(abs(x), Scalar(lambd_)), x, constant_like(x, 0.0));
}
DTensor Softshrink::forward(const DTensor& x) {
  DT_CHECK(lambd_ >= 0.0, "[Softshrink] lambd must be >= 0, got %g", lambd_);
  return where(gt(x, Scalar(lambd_)), sub(x, Scalar(lambd_)),
               where(lt(x, Scalar(-lambd_)), add(x, Scalar(lambd_)), constant_like(x, 0.0)));
}
DTensor Softmax2d::forward(const DTensor& x) {
  DT_CHECK(x.dim() == 3 || x.dim() == 4,
           "[Softmax2d] expected input to be 3D or 4D, got %dD instead", x.dim());
  return dtensor::softmax(x, -3);
}

PReLU::PReLU(int64_t num_parameters, double init, ModuleOptions opts)
    : num_parameters_(num_parameters), init_(init) {
  DT_CHECK(num_parameters >= 1, "[PReLU] num_parameters must be >= 1, got %d", num_parameters);
  register_parameter("weight", detail::constant_parameter({num_parameters}, init, opts));
}
void PReLU::reset_own_parameters(Generator* /*gen*/) {
  fill_(param("weight"), Scalar(init_));
}
DTensor PReLU::forward(const DTensor& x) {
  const int64_t channels = x.dim() >= 2 ? x.size(1) : 1;
  DT_CHECK(num_parameters_ == 1 || num_parameters_ == channels,
           "[PReLU] Mismatch of parameter numbers and input channel size. Found parameter numbers "
           "= %d and channel size = %d",
           num_parameters_, channels);
  DTensor w = functional::on_mesh(param("weight"), x.device_mesh(), "PReLU", "weight");
  if (num_parameters_ > 1) {
    Shape shape(static_cast<size_t>(x.dim() - 1), 1);
    shape[0] = num_parameters_;
    w = reshape(w, shape);  // [C, 1, ..]: broadcast along dim 1
  } else if (x.dim() == 0) {
    w = reshape(w, Shape{});
  }
  return where(gt(x, Scalar(0.0)), x, mul(w, x));
}

RReLU::RReLU(double lower, double upper, Generator* gen) : lower_(lower), upper_(upper), gen_(gen) {
  DT_CHECK(lower <= upper,
           "[RReLU] lower bound %g should be less than or equal to the upper bound %g", lower,
           upper);
}
DTensor RReLU::forward(const DTensor& x) {
  if (!is_training()) return dtensor::leaky_relu(x, (lower_ + upper_) / 2.0);
  const DTensor slope = add(mul(rand_like(x, gen_), Scalar(upper_ - lower_)), Scalar(lower_));
  return where(gt(x, Scalar(0.0)), x, mul(x, slope));
}

}  // namespace dtensor::nn
