#include "collectives/deadline.h"

#include <absl/strings/str_format.h>
#include <mpi.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "tensor/error.h"

namespace dtensor {

namespace {

constexpr double kDefaultTimeoutSeconds = 300.0;

std::atomic<double> g_timeout{-1.0};  // < 0: not read yet
std::once_flag g_env_once;

double timeout_from_env() {
  return detail::parse_collective_timeout(std::getenv("DTENSOR_COLLECTIVE_TIMEOUT"));
}

}  // namespace

namespace detail {

std::string collective_deadline_message(std::string_view op, const std::string& communicator,
                                        const std::string& tensor, std::string_view ending) {
  return absl::StrFormat(
      "[%s] collective deadline exceeded: not complete after %g s on %s, tensor %s. A peer rank "
      "is missing or stuck (timeout: DTENSOR_COLLECTIVE_TIMEOUT or set_collective_timeout). %s",
      op, collective_timeout(), communicator, tensor, ending);
}

double parse_collective_timeout(const char* env) {
  if (env == nullptr || *env == '\0') return kDefaultTimeoutSeconds;
  char* end = nullptr;
  double v = std::strtod(env, &end);
  // strtod also accepts "inf", "nan" and hexadecimal floats: "inf" would disable the deadline.
  DT_CHECK(end != env && *end == '\0' && std::isfinite(v) && v > 0.0,
           "[collective_timeout] DTENSOR_COLLECTIVE_TIMEOUT='%s' is not a positive, finite number "
           "of seconds",
           env);
  return v;
}

}  // namespace detail

double collective_timeout() {
  std::call_once(g_env_once, [] {
    double expected = -1.0;
    double v = timeout_from_env();
    g_timeout.compare_exchange_strong(expected, v);  // keeps a value set by the API
  });
  return g_timeout.load(std::memory_order_relaxed);
}

void set_collective_timeout(double seconds) {
  DT_CHECK(std::isfinite(seconds) && seconds > 0.0,
           "[set_collective_timeout] seconds %g must be positive and finite", seconds);
  g_timeout.store(seconds, std::memory_order_relaxed);
}

namespace detail {

[[noreturn]] void end_job_on_deadline(const std::string& message) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  int rank = 0;
  if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "[rank %d] %s\n", rank, message.c_str());
  std::fflush(stderr);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 3);
  // MPI_Abort does not return; without MPI there are no peers to stop.
  std::_Exit(3);
}

}  // namespace detail

}  // namespace dtensor
