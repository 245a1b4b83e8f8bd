// Public activation gradients (elementwise.h): argument checks, output allocation and device
// dispatch. The kernels are activation_backward_cpu (elementwise_unary_cpu.cc) and
// activation_backward_cuda (elementwise_cuda.cu).
#include "dtensor/ops/common/detail/op_checks.h"
#include "dtensor/ops/elementwise/detail/elementwise_cuda.h"
#include "dtensor/ops/elementwise/detail/elementwise_kernels.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/tensor/creation.h"

namespace dtensor {

namespace {

using detail::ActivationGrad;

// grad and `input` (the forward's input or output, named `what`) must agree in shape, dtype and
// device, and be floating.
Tensor activation_backward(const char* op, ActivationGrad kind, const Tensor& grad,
                           const Tensor& input, const char* what) {
  detail::check_defined(op, grad, "grad");
  detail::check_defined(op, input, what);
  detail::check_same_device(op, grad, input, what);
  DT_CHECK(grad.sizes() == input.sizes(), "[%s] grad of shape %s does not match %s of shape %s", op,
           shape_str(grad.sizes()), what, shape_str(input.sizes()));
  DT_CHECK(grad.dtype() == input.dtype() && is_floating(grad.dtype()),
           "[%s] expected grad and %s of one floating dtype, got %s and %s", op, what,
           dtype_name(grad.dtype()), dtype_name(input.dtype()));
  Tensor out = empty(grad.sizes(), TensorOptions(grad.dtype(), grad.device()));
  (grad.device().is_cuda() ? detail::activation_backward_cuda : detail::activation_backward_cpu)(
      kind, out, grad, input);
  return out;
}

}  // namespace

Tensor gelu_backward(const Tensor& grad, const Tensor& x, GeluApproximate approximate) {
  return activation_backward(
      "gelu_backward",
      approximate == GeluApproximate::kTanh ? ActivationGrad::kGeluTanh : ActivationGrad::kGelu,
      grad, x, "x");
}

Tensor silu_backward(const Tensor& grad, const Tensor& x) {
  return activation_backward("silu_backward", ActivationGrad::kSilu, grad, x, "x");
}

Tensor sigmoid_backward(const Tensor& grad, const Tensor& out) {
  return activation_backward("sigmoid_backward", ActivationGrad::kSigmoid, grad, out, "out");
}

Tensor tanh_backward(const Tensor& grad, const Tensor& out) {
  return activation_backward("tanh_backward", ActivationGrad::kTanh, grad, out, "out");
}

}  // namespace dtensor
