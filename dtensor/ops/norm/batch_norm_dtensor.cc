// DTensor forms of batch_norm_sums and batch_norm_affine (registered in batch_norm_strategy.cc).
#include "dtensor/autograd/dispatch.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/ops/ops_registry.h"

namespace dtensor {

DTensor batch_norm_sums(const DTensor& input) {
  static const OpInfo& op = ops_op("batch_norm_sums");
  const DTensor* in[] = {&input};
  return dispatch(op, in);
}

DTensor batch_norm_affine(const DTensor& input, const DTensor& factors) {
  static const OpInfo& op = ops_op("batch_norm_affine");
  const DTensor* in[] = {&input, &factors};
  return dispatch(op, in);
}

}  // namespace dtensor
