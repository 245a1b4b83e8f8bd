// Errors that depend on data only some ranks hold (an index out of range in one rank's batch
// shard, a target outside the class range) must be raised on every rank that would otherwise
// wait for the failing one in a collective (DESIGN.md item 10). An op's local kernel checks its
// shard without throwing and passes the outcome here.
#pragma once

#include <absl/types/span.h>

#include <cstdint>
#include <string_view>

#include "dtensor/core/dtensor_spec.h"
#include "dtensor/device_mesh/device_mesh.h"

namespace dtensor {

// Every rank of the groups that `mesh_dims` span (the ranks whose coordinates differ from this
// rank's only on those dims) calls this with its own `local_error` (empty: nothing wrong).
// When any of them has one, all of them throw the same dtensor::Error: the message of the
// lowest failing world rank followed by " (raised on rank R)". Costs one small all-reduce per
// mesh dim of size > 1 in `mesh_dims`, plus broadcasts of the message when something failed;
// with no such dim nothing is exchanged and a rank with an error throws it as it is. Dims on which
// the checked data is replicated need not be listed: every rank there finds the same error. Throws
// "[check_on_all_ranks] ..." for a rank outside the mesh.
void check_on_all_ranks(const DeviceMesh& mesh, absl::Span<const int64_t> mesh_dims,
                        std::string_view local_error);

// The same over the mesh dims on which `data` is not Replicate (where ranks may hold different
// values of the checked data, e.g. a batch-sharded index tensor): free when it is replicated
// everywhere.
void check_on_all_ranks(const DTensorSpec& data, std::string_view local_error);

// The other half, for errors no op checks for: from a catch block of an operation on `mesh`
// (DTensor dispatch, redistribute, the autograd engine), reports the exception in flight to the
// other ranks of the mesh, dim by dim (report_failure_in_flight in
// dtensor/collectives/communicator.h), so that their next collective on the mesh raises "<message>
// (raised on rank R; ...)" instead of waiting for this rank. Free until something fails; the caller
// rethrows. Never throws; a rank outside the mesh reports nothing.
void report_failure_on_mesh(const DeviceMesh& mesh, std::string_view op) noexcept;

}  // namespace dtensor
