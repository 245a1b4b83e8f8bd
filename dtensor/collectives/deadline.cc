#include "dtensor/collectives/deadline.h"

#include <absl/strings/str_format.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "dtensor/tensor/error.h"

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

namespace {

// Prints the message and ends the process: through MPI_Abort (which stops every rank) when
// `abort_mpi`, else by exiting non-zero (mpirun then ends the job).
[[noreturn]] void end_job(const std::string& message, int rank, bool abort_mpi) {
  std::fprintf(stderr, "[rank %d] %s\n", rank, message.c_str());
  std::fflush(stderr);
  if (abort_mpi) MPI_Abort(MPI_COMM_WORLD, 3);
  // MPI_Abort does not return; without MPI there are no peers to stop.
  std::_Exit(3);
}

}  // namespace

[[noreturn]] void end_job_on_deadline(const std::string& message) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  const bool active = initialized && !finalized;
  int rank = 0;
  if (active) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  end_job(message, rank, active);
}

}  // namespace detail

namespace detail {

namespace {

// What the watchdog watches: one entry per armed DeadlineWatch (a handful at most: one per
// thread inside a blocking call).
struct Watchdog {
  using Clock = std::chrono::steady_clock;
  struct Entry {
    uint64_t id;
    Clock::time_point deadline;
    std::function<std::string()> what;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Entry> armed;
  uint64_t next_id = 1;
  bool started = false;
  // Read on the first arming thread (which may call MPI): the watchdog thread itself calls MPI
  // (MPI_Abort) only where the library allows any thread to (MPI_THREAD_MULTIPLE).
  int world_rank = 0;
  bool abort_mpi = false;

  // The thread checks every 100 ms, armed or not: arming is then a mutex and a push, with no
  // wake-up per collective (a blocking collective arms from an empty list every time).
  void run() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      const Clock::time_point now = Clock::now();
      for (const Entry& e : armed) {
        // With the lock held to the end: the blocked thread cannot disarm (and free what
        // `what` reads) while the message is built; end_job does not return.
        if (now >= e.deadline) end_job(e.what(), world_rank, abort_mpi);
      }
      cv.wait_for(lock, std::chrono::milliseconds(100));
    }
  }
};

Watchdog& watchdog() {
  static Watchdog* w = new Watchdog();  // never destroyed: its thread is never joined
  return *w;
}

}  // namespace

DeadlineWatch::DeadlineWatch(std::function<std::string()> what) {
  Watchdog& w = watchdog();
  using Clock = Watchdog::Clock;
  // Saturated: a huge timeout (1e12 s, "never") would overflow the clock's int64 nanoseconds.
  const double seconds = collective_timeout();
  const Clock::time_point now = Clock::now();
  const Clock::time_point deadline = seconds >= 1e9
                                         ? Clock::time_point::max()
                                         : now + std::chrono::duration_cast<Clock::duration>(
                                                     std::chrono::duration<double>(seconds));
  std::lock_guard<std::mutex> lock(w.mu);
  if (!w.started) {
    int initialized = 0, finalized = 0, provided = MPI_THREAD_SINGLE;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) {
      MPI_Comm_rank(MPI_COMM_WORLD, &w.world_rank);
      MPI_Query_thread(&provided);
      w.abort_mpi = provided >= MPI_THREAD_MULTIPLE;
    }
    std::thread([&w] { w.run(); }).detach();
    w.started = true;
  }
  id_ = w.next_id++;
  w.armed.push_back({id_, deadline, std::move(what)});
}

DeadlineWatch::~DeadlineWatch() {
  Watchdog& w = watchdog();
  std::lock_guard<std::mutex> lock(w.mu);
  for (size_t i = 0; i < w.armed.size(); ++i) {
    if (w.armed[i].id == id_) {
      w.armed[i] = std::move(w.armed.back());
      w.armed.pop_back();
      break;
    }
  }
}

}  // namespace detail

}  // namespace dtensor
