// The planning save and load run (internal): plan.h's public plans are built from these, and
// save / load execute their items, so who writes and reads what is decided in one place.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "dtensor/checkpoint/plan.h"
#include "dtensor/device_mesh/device_mesh.h"

namespace dtensor::checkpoint::detail {

// The chunks this rank writes (plan_writes' choice of writers), in the state's order.
// Collective over `world`; `state` must have passed validate_state.
std::vector<WriteItem> local_writes(const DeviceMesh& world, const StateDict& state);

// The chunks of `index` that this rank reads for target `name` (`t`), each with the part of it
// the rank's shard takes; none when the rank holds no part of `t`. Throws "[checkpoint::load]
// tensor 'name' ..." when `index` lacks it, its shape or dtype differ from the target's, or the
// chunks do not cover the shard. `dir` only names the checkpoint in messages.
std::vector<ReadItem> tensor_reads(const std::string& name, const DTensor& t,
                                   const std::map<std::string, TensorInfo>& index,
                                   const std::string& dir);

}  // namespace dtensor::checkpoint::detail
