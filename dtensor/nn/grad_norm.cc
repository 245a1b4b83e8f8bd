#include "dtensor/nn/detail/grad_norm.h"

#include <algorithm>
#include <cmath>

#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/tensor/error.h"

namespace dtensor::nn::detail {

GradNormParts grad_norm_parts(const std::vector<DTensor>& params, double norm_type) {
  const bool inf = std::isinf(norm_type);
  GradNormParts parts;
  for (const DTensor& p : params) {
    const DTensor& g = p.grad();
    if (!g.defined()) continue;
    parts.grads.push_back(g);
    const DTensor a = abs(cast(g, kFloat64));
    const DTensor part = inf ? amax(a) : sum(pow(a, Scalar(norm_type)));
    DTensor& acc = parts.per_mesh[g.device_mesh().str()];
    acc = !acc.defined() ? part : inf ? maximum(acc, part) : acc + part;
  }
  return parts;
}

double combine_norm_parts(double total, double part, bool inf) {
  if (!inf) return total + part;
  return std::isnan(total) || std::isnan(part) ? std::nan("") : std::max(total, part);
}

double finish_norm(double total, double norm_type, bool error_if_nonfinite) {
  const double norm = std::isinf(norm_type) ? total : std::pow(total, 1.0 / norm_type);
  DT_CHECK(!error_if_nonfinite || std::isfinite(norm),
           "[clip_grad_norm_] the total norm of order %g for gradients from `parameters` is "
           "non-finite (%g), so it cannot be clipped; to scale the gradients by the non-finite "
           "norm anyway, set error_if_nonfinite = false",
           norm_type, norm);
  return norm;
}

}  // namespace dtensor::nn::detail
