// DTensor forms of the matrix products: dispatch with the local kernels of matmul.h.
#include "dtensor/propagation/dispatch.h"
#include "ops/matmul/matmul.h"
#include "ops/ops_registry.h"
#include "ops/view/dtensor_op_util.h"

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
  const DTensor* in[] = {&x, &weight, &bias};
  const std::shared_ptr<const OutputSharding> sh = detail::sharding_for(info, in, {});
  // Strategy [P | S(last), S(1), R]: a replicated bias next to a Partial output is added on
  // coordinate 0 of those mesh dims only, so the sum over ranks counts it once.
  const Placements& out = sh->outputs[0]->placements();
  const Placements& pb = sh->needs_redistribute() && sh->required_inputs[2]
                             ? sh->required_inputs[2]->placements()
                             : bias.placements();
  const Shape& coord = x.device_mesh().get_coordinate();
  bool add_bias = true;
  for (size_t i = 0; i < out.size() && i < coord.size(); ++i) {
    if (out[i].is_partial() && pb[i].is_replicate() && coord[i] != 0) add_bias = false;
  }
  return dispatch(info, in, {}, [&](Locals l) {
    return add_bias ? linear(l[0], l[1], l[2]) : linear(l[0], l[1]);
  });
}

}  // namespace dtensor
