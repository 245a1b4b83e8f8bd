// DTensor forms of the matrix products: dispatch with the local kernels of matmul.h.
#include "dtensor/propagation/dispatch.h"
#include "ops/matmul/matmul.h"
#include "ops/ops_registry.h"

namespace dtensor {
namespace {
using Locals = absl::Span<const Tensor>;

ArgValue scalar_arg(const Scalar& s) {
  if (s.kind() == Scalar::Kind::kDouble) return s.to_double();
  if (s.kind() == Scalar::Kind::kBool) return s.to_bool();
  return s.to_int();
}
}  // namespace

DTensor mm(const DTensor& a, const DTensor& b) {
  static const OpInfo& info = ops_op("mm");
  return dispatch(info, {&a, &b}, {}, [](Locals l) { return mm(l[0], l[1]); });
}

DTensor bmm(const DTensor& a, const DTensor& b) {
  static const OpInfo& info = ops_op("bmm");
  return dispatch(info, {&a, &b}, {}, [](Locals l) { return bmm(l[0], l[1]); });
}

DTensor matmul(const DTensor& a, const DTensor& b) {
  static const OpInfo& info = ops_op("matmul");
  return dispatch(info, {&a, &b}, {}, [](Locals l) { return matmul(l[0], l[1]); });
}

DTensor addmm(const DTensor& bias, const DTensor& a, const DTensor& b, const Scalar& beta,
              const Scalar& alpha) {
  static const OpInfo& info = ops_op("addmm");
  const ArgValue args[] = {scalar_arg(beta), scalar_arg(alpha)};
  return dispatch(info, {&bias, &a, &b}, args,
                  [&](Locals l) { return addmm(l[0], l[1], l[2], beta, alpha); });
}

DTensor linear(const DTensor& x, const DTensor& weight, const DTensor& bias) {
  if (!bias.defined()) {
    static const OpInfo& info = ops_op("linear");
    return dispatch(info, {&x, &weight}, {}, [](Locals l) { return linear(l[0], l[1]); });
  }
  static const OpInfo& info = ops_op("linear.bias");
  return dispatch(info, {&x, &weight, &bias}, {},
                  [](Locals l) { return linear(l[0], l[1], l[2]); });
}

}  // namespace dtensor
