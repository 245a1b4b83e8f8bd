// The DTensor inputs of the norm ops (layer_norm, rms_norm, group_norm's fused op), shared by
// their DTensor forms (norm_dtensor.cc, group_norm_dtensor.cc).
#pragma once

#include <absl/container/inlined_vector.h>

#include "dtensor/core/distributed_tensor.h"

namespace dtensor::detail {

// x, then weight and bias where defined (the ops' has_weight / has_bias args say which).
inline absl::InlinedVector<const DTensor*, 3> norm_inputs(const DTensor& x, const DTensor& weight,
                                                          const DTensor& bias) {
  absl::InlinedVector<const DTensor*, 3> in = {&x};
  if (weight.defined()) in.push_back(&weight);
  if (bias.defined()) in.push_back(&bias);
  return in;
}

}  // namespace dtensor::detail
