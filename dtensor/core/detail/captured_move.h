// What a redistribute recorded into a captured step carries for the passes of dtensor/compile/
// that rewrite moves (the gradient bucketing pass fuses several one-collective moves into one):
// the CaptureEvent's payload of a "redistribute" node (dtensor/tensor/detail/capture_hook.h).
#pragma once

#include <memory>

#include "dtensor/core/dtensor_spec.h"
#include "dtensor/core/redistribute.h"

namespace dtensor::detail {

struct CapturedMove {
  std::shared_ptr<const DTensorSpec> src;
  std::shared_ptr<const DTensorSpec> dst;
  std::shared_ptr<const RedistributePlan> plan;  // null for a cross-mesh move
};

}  // namespace dtensor::detail
