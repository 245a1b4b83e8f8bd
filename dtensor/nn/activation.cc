// Activation modules: each forward is one DTensor op.
#include "dtensor/nn/activation.h"

#include <utility>

#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/softmax/softmax.h"
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

}  // namespace dtensor::nn
