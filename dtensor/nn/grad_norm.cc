#include "dtensor/nn/detail/grad_norm.h"

#include <cmath>

#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"

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

}  // namespace dtensor::nn::detail
