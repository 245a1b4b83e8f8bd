// Collective deadlines: no blocking wait lasts forever.
#pragma once

#include <string>

namespace dtensor {

// Seconds a blocking collective may wait before the job is ended. Default 300, or the value
// of the environment variable DTENSOR_COLLECTIVE_TIMEOUT (seconds, may be fractional) read
// at first use; set_collective_timeout overrides both.
double collective_timeout();
void set_collective_timeout(double seconds);

namespace detail {
// Ends the job: prints `message` to stderr (prefixed with the world rank) and aborts every
// rank (MPI_Abort with a non-zero code). Deliberately not an exception: the peers are stuck in
// a collective and cannot be unwound.
[[noreturn]] void end_job_on_deadline(const std::string& message);
}  // namespace detail

}  // namespace dtensor
