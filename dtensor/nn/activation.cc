// Activation modules: each forward is one DTensor op.
#include "dtensor/nn/activation.h"

#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/softmax/softmax.h"

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

}  // namespace dtensor::nn
