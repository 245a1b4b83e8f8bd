// DTensor forms of the matrix products: each looks its op up once and dispatches it
// (strategies and kernels are registered in matmul_strategy.cc).
#include "dtensor/autograd/dispatch.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/ops_registry.h"

namespace dtensor {
namespace {

// baddbmm / addmm: beta * input + alpha * (a @ b), args (beta, alpha [runtime]).
DTensor scaled_product(const OpInfo& info, const DTensor& input, const DTensor& a, const DTensor& b,
                       const Scalar& beta, const Scalar& alpha) {
  const ArgValue args[] = {scalar_arg(beta), scalar_arg(alpha)};
  return dispatch(info, {&input, &a, &b}, args);
}

}  // namespace

DTensor mm(const DTensor& a, const DTensor& b) {
  static const OpInfo& info = ops_op("mm");
  return dispatch(info, {&a, &b});
}

DTensor bmm(const DTensor& a, const DTensor& b) {
  static const OpInfo& info = ops_op("bmm");
  return dispatch(info, {&a, &b});
}

DTensor matmul(const DTensor& a, const DTensor& b) {
  static const OpInfo& info = ops_op("matmul");
  return dispatch(info, {&a, &b});
}

DTensor baddbmm(const DTensor& self, const DTensor& a, const DTensor& b, const Scalar& beta,
                const Scalar& alpha) {
  static const OpInfo& info = ops_op("baddbmm");
  return scaled_product(info, self, a, b, beta, alpha);
}

DTensor dot(const DTensor& a, const DTensor& b) {
  static const OpInfo& info = ops_op("dot");
  return dispatch(info, {&a, &b});
}

DTensor outer(const DTensor& a, const DTensor& b) {
  static const OpInfo& info = ops_op("outer");
  return dispatch(info, {&a, &b});
}

DTensor addmm(const DTensor& bias, const DTensor& a, const DTensor& b, const Scalar& beta,
              const Scalar& alpha) {
  static const OpInfo& info = ops_op("addmm");
  return scaled_product(info, bias, a, b, beta, alpha);
}

DTensor linear(const DTensor& x, const DTensor& weight, const DTensor& bias) {
  if (!bias.defined()) {
    static const OpInfo& info = ops_op("linear");
    return dispatch(info, {&x, &weight});
  }
  static const OpInfo& info = ops_op("linear.bias");
  return dispatch(info, {&x, &weight, &bias});
}

}  // namespace dtensor
