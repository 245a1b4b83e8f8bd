// The collectives log's Work decorator (dtensor/collectives/debug_log.h, topic "collectives"):
// wraps an issued operation's Work and, when it is first seen complete (wait() or is_completed()),
// logs one line with the operation, its bytes, the communicator and the time from issue to
// completion (including an issue that completes the operation itself). Used only while the topic is
// on, so the hot path never pays for it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "dtensor/collectives/communicator.h"

namespace dtensor::detail {

// Issues the operation `op` (moving `bytes` per rank on `comm`) with `issue` and wraps its Work;
// the time is taken from before the issue.
WorkPtr log_collective(std::string_view op, int64_t bytes, const Communicator& comm,
                       const std::function<WorkPtr()>& issue);

}  // namespace dtensor::detail
