// Collective deadlines: no blocking wait lasts forever.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace dtensor {

// Seconds a blocking collective may wait before the job is ended. Default 300, or the value
// of the environment variable DTENSOR_COLLECTIVE_TIMEOUT (seconds, may be fractional; a value
// that is not a positive finite number, "inf" and "nan" included, throws dtensor::Error) read
// at first use; set_collective_timeout overrides both (same rule).
double collective_timeout();
void set_collective_timeout(double seconds);

namespace detail {
// The value DTENSOR_COLLECTIVE_TIMEOUT = `env` stands for (nullptr or empty: the default 300);
// throws dtensor::Error "[collective_timeout] DTENSOR_COLLECTIVE_TIMEOUT='inf' is not a
// positive, finite number of seconds" for anything else ("inf", "nan", "-1", "0", "5s", ...).
double parse_collective_timeout(const char* env);

// Ends the job: prints `message` to stderr (prefixed with the world rank) and aborts every
// rank (MPI_Abort with a non-zero code). Deliberately not an exception: the peers are stuck in
// a collective and cannot be unwound.
[[noreturn]] void end_job_on_deadline(const std::string& message);

// Arms the collective deadline around a blocking call that cannot poll (a blocking MPI
// collective): while the object lives, a watchdog thread (started on first use, never joined;
// it wakes every 100 ms) ends the job with what() (through MPI_Abort where MPI allows any
// thread to call it, MPI_THREAD_MULTIPLE; else by exiting non-zero)
// once collective_timeout() seconds have passed. `what` is called on the watchdog thread, so
// it must stay callable while armed. Arming and disarming take one mutex each, nothing else.
class DeadlineWatch {
 public:
  explicit DeadlineWatch(std::function<std::string()> what);
  ~DeadlineWatch();
  DeadlineWatch(const DeadlineWatch&) = delete;
  DeadlineWatch& operator=(const DeadlineWatch&) = delete;

 private:
  uint64_t id_;
};

// The message a collective that missed its deadline ends the job with: "[all_reduce]
// collective deadline exceeded: not complete after 300 s on <communicator>, tensor [4, 8]
// float32. A peer rank is missing or stuck (...). <ending>". `tensor` names the tensor
// ("(no tensor)" when there is none); `ending` says what happens now.
std::string collective_deadline_message(std::string_view op, const std::string& communicator,
                                        const std::string& tensor, std::string_view ending);
}  // namespace detail

}  // namespace dtensor
