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

// Whether the [progress] cases' time bound (a transfer completes well within the second its
// peer spends without an MPI call) applies: not under ThreadSanitizer (scripts/tsan.sh), whose
// instrumented copies made a 2 x 4 MiB ring hop take 0.86 s with the progress thread working.
// There the cases still move their data through the progress thread and check it.
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kTimeBoundsApply = false;
#else
inline constexpr bool kTimeBoundsApply = true;
#endif

}  // namespace dtensor::test
