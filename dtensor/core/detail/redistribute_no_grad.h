// The unrecorded DTensor redistribute: what DTensor::redistribute computes, without the
// autograd node (internal: the members of distributed_tensor.h and the autograd layer's
// backward formulas call it; users call DTensor::redistribute, which autograd records, and a
// public name for this would drop gradients silently).
#pragma once

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/core/dtensor_spec.h"

namespace dtensor::detail {

// `t` laid out as `dst` (same mesh, or another: redistribute_local's rules); `t` itself when
// its spec already is `dst`. `reuse_local` as in redistribute_local.
DTensor redistribute_no_grad(const DTensor& t, const DTensorSpec& dst, bool reuse_local = false);

}  // namespace dtensor::detail
