// Cases that need the communication thread (dtensor/collectives/comm_worker.h) or the progress
// thread it runs (dtensor/collectives/p2p_progress.h): where it cannot run they check nothing,
// and their ctest entry must say "skipped", not "passed".
#pragma once

#include <cstdio>
#include <string_view>

#include "dtensor/collectives/comm_worker.h"
#include "dtensor/collectives/runtime.h"

namespace dtensor::test {

// Whether the communication thread runs here (async_threaded()); otherwise rank 0 prints the
// "[skipped]" line that an entry registered with SKIP_MARKER or PROGRESS_ENTRY
// (dtensor_add_mpi_test, cmake/DtensorHelpers.cmake) reports as skipped, naming the `thread`
// the case needed. Call it on every rank and return when it is false.
inline bool async_threaded_or_skip(std::string_view thread = "progress thread") {
  if (async_threaded()) return true;
  if (world_rank() == 0) {
    std::printf("[skipped] no %.*s: MPI without MPI_THREAD_MULTIPLE or DTENSOR_ASYNC=0\n",
                static_cast<int>(thread.size()), thread.data());
  }
  return false;
}

}  // namespace dtensor::test
