#include "dtensor/parallel/pipeline/clip_grad.h"

#include <cmath>

#include "dtensor/autograd/grad_mode.h"
#include "dtensor/nn/detail/grad_norm.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor::pipelining {

double clip_grad_norm_(const std::vector<DTensor>& params, double max_norm,
                       const CommunicatorPtr& pp, double norm_type, bool error_if_nonfinite) {
  DT_CHECK(norm_type > 0, "[clip_grad_norm_] norm_type must be positive or inf, got %g", norm_type);
  DT_CHECK(pp != nullptr, "[clip_grad_norm_] no pp group (this rank is not on the pp mesh)");
  autograd::NoGradGuard no_grad;
  const bool inf = std::isinf(norm_type);
  // This stage's part: per mesh, the sum of |g|^p (or max |g|) as a DTensor scalar that is
  // Partial over the dims its gradients are sharded on; full_tensor() reduces each mesh once.
  const nn::detail::GradNormParts parts = nn::detail::grad_norm_parts(params, norm_type);
  double local = 0;
  for (const auto& [mesh, acc] : parts.per_mesh) {
    if (!acc.device_mesh().contains_me()) continue;
    local = nn::detail::combine_norm_parts(
        local, acc.full_tensor().to(kFloat64).to_vector<double>().at(0), inf);
  }
  Tensor total = full({1}, local, TensorOptions(kFloat64));
  {
    // kMax propagates NaN (MPI's and NCCL's max do, SEMANTICS.md), so every rank sees the same
    // total.
    CollectiveLabel label("pipeline clip_grad");
    pp->all_reduce(total, inf ? ReduceOp::kMax : ReduceOp::kSum)->wait();
  }
  const double norm =
      nn::detail::finish_norm(total.data<double>()[0], norm_type, error_if_nonfinite);
  const double coef = max_norm / (norm + 1e-6);
  if (nn::detail::clip_scales(coef)) {
    for (const DTensor& g : parts.grads) mul_(g.to_local(), Scalar(coef));
  }
  return norm;
}

}  // namespace dtensor::pipelining
