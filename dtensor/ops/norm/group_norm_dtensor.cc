// DTensor form of the fused group_norm op (registered in group_norm_strategy.cc) and where it
// serves (detail/group_norm.h).
#include "dtensor/autograd/dispatch.h"
#include "dtensor/ops/norm/detail/group_norm.h"
#include "dtensor/ops/norm/detail/norm_inputs.h"
#include "dtensor/ops/ops_registry.h"

namespace dtensor::detail {

bool group_norm_fused_serves(const DTensor& x) {
  if (x.device().is_cuda()) return false;
  for (const Placement& p : x.placements()) {
    if (!p.is_replicate() && !p.is_shard(0)) return false;
  }
  return true;
}

DTensor group_norm_fused(const DTensor& x, int64_t num_groups, const DTensor& weight,
                         const DTensor& bias, double eps) {
  static const OpInfo& op = ops_op("group_norm");
  const ArgValue args[] = {eps, num_groups, weight.defined(), bias.defined()};
  return dispatch(op, detail::norm_inputs(x, weight, bias), args);
}

}  // namespace dtensor::detail
