#include "dtensor/collectives/logged_work.h"

#include <absl/strings/str_format.h>

#include <atomic>
#include <chrono>
#include <utility>

#include "dtensor/collectives/debug_log.h"

namespace dtensor::detail {

namespace {

using Clock = std::chrono::steady_clock;

class LoggedWork final : public Work {
 public:
  LoggedWork(std::string what, WorkPtr inner, Clock::time_point start)
      : what_(std::move(what)), inner_(std::move(inner)), start_(start) {}
  ~LoggedWork() override {
    if (!logged_.load()) log_line(LogTopic::kCollectives, what_ + ": never waited on");
  }

  bool is_completed() override {
    const bool done = inner_->is_completed();
    if (done) done_now();
    return done;
  }
  void wait() override {
    inner_->wait();
    done_now();
  }

 private:
  // Once, whichever thread sees the completion first: a point-to-point Work is tested by the
  // progress thread (p2p_progress.h) while its owner may test or wait on it.
  void done_now() {
    if (logged_.exchange(true)) return;
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - start_).count();
    log_line(LogTopic::kCollectives, absl::StrFormat("%s: %.1f us", what_, us));
  }

  std::string what_;
  WorkPtr inner_;
  Clock::time_point start_;
  std::atomic<bool> logged_{false};
};

}  // namespace

WorkPtr log_collective(std::string_view op, int64_t bytes, const Communicator& comm,
                       const std::function<WorkPtr()>& issue) {
  // The clock starts before the issue: a backend may complete the operation inside it (the
  // MPI backend's blocking collectives).
  const Clock::time_point start = Clock::now();
  WorkPtr work = issue();
  std::string what =
      absl::StrFormat("%s %d B per rank on %s", op, bytes, describe_communicator(comm));
  return std::make_shared<LoggedWork>(std::move(what), std::move(work), start);
}

}  // namespace dtensor::detail
