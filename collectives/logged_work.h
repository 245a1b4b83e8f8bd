// The collectives log's Work decorator (collectives/debug_log.h, topic "collectives"): wraps an
// issued operation's Work and, when it is first seen complete (wait() or is_completed()),
// logs one line with the operation, its bytes, the communicator and the time from issue to
// completion. Used only while the topic is on, so the hot path never pays for it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "collectives/communicator.h"

namespace dtensor::detail {

// Wraps `work` (the operation `op` moving `bytes` per rank on `comm`, issued just now).
WorkPtr log_collective(std::string_view op, int64_t bytes, const Communicator& comm, WorkPtr work);

}  // namespace dtensor::detail
