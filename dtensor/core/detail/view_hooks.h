// The core's door to the ops layer for DTensor's view and copy members (x.view(...),
// x.transpose(...), x.clone(), ...): the members are declared and defined in the core
// (view_members.cc) and call the free functions of dtensor/ops/view through this table, which
// the ops library installs when it is loaded (dtensor/ops/view/view_dtensor.cc), as the
// autograd layer installs AutogradHooks (autograd_hooks.h). So the core keeps no dependency on
// the layers above it, and a member is exactly its free function (sharded, recorded, cached).
// Without the ops layer loaded a member raises "[DTensor::<member>] ... not linked".
// Internal (not installed).
#pragma once

#include <cstdint>

#include "dtensor/core/distributed_tensor.h"

namespace dtensor::detail {

struct ViewHooks {
  DTensor (*view)(const DTensor&, IntSpan);
  DTensor (*reshape)(const DTensor&, IntSpan);
  DTensor (*transpose)(const DTensor&, int64_t, int64_t);
  DTensor (*t)(const DTensor&);
  DTensor (*permute)(const DTensor&, IntSpan);
  DTensor (*unsqueeze)(const DTensor&, int64_t);
  DTensor (*squeeze_all)(const DTensor&);
  DTensor (*squeeze_dim)(const DTensor&, int64_t);
  DTensor (*flatten)(const DTensor&, int64_t, int64_t);
  DTensor (*expand)(const DTensor&, IntSpan);
  DTensor (*narrow)(const DTensor&, int64_t, int64_t, int64_t);
  DTensor (*slice)(const DTensor&, int64_t, int64_t, int64_t, int64_t);
  DTensor (*select)(const DTensor&, int64_t, int64_t);
  DTensor (*contiguous)(const DTensor&);
  DTensor (*clone)(const DTensor&);
};

// The installed table; nullptr while the ops layer is not loaded.
const ViewHooks* view_hooks();
// Installs `hooks` (the ops library, at load time); it must outlive every later call.
void set_view_hooks(const ViewHooks* hooks);

}  // namespace dtensor::detail
