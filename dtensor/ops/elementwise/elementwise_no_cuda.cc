// The elementwise CUDA entry points when dtensor is built without CUDA (no CUDA tensor can
// exist then, so these are reached only through a bug).
#include "dtensor/ops/elementwise/detail/elementwise_cuda.h"

namespace dtensor::detail {

namespace {
[[noreturn]] void no_cuda(const char* op) {
  DT_FAIL("[%s] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)", op);
}
}  // namespace

void binary_cuda(BinaryOp, const Tensor&, const Tensor&, const Tensor&) {
  no_cuda("binary");
}
void binary_scalar_cuda(BinaryOp, const Tensor&, const Tensor&, const Scalar&, bool) {
  no_cuda("binary");
}
void compare_cuda(CompareOp, const Tensor&, const Tensor&, const Tensor&) {
  no_cuda("compare");
}
void compare_scalar_cuda(CompareOp, const Tensor&, const Tensor&, const Scalar&) {
  no_cuda("compare");
}
void unary_cuda(UnaryOp, const Tensor&, const Tensor&, const Scalar&) {
  no_cuda("unary");
}
void nan_to_num_cuda(const Tensor&, const Tensor&, double, double, double) {
  no_cuda("nan_to_num");
}
void where_cuda(const Tensor&, const Tensor&, const Tensor&, const Tensor&) {
  no_cuda("where");
}
void param_activation_cuda(ParamActivation, const Tensor&, const Tensor&, double, double) {
  no_cuda("param_activation");
}
void activation_backward_cuda(ActivationGrad, const Tensor&, const Tensor&, const Tensor&) {
  no_cuda("activation_backward");
}

}  // namespace dtensor::detail
