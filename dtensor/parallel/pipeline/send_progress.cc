#include "dtensor/parallel/pipeline/send_progress.h"

#include <algorithm>
#include <chrono>

#include "dtensor/collectives/comm_worker.h"
#include "dtensor/collectives/fake_communicator.h"

namespace dtensor::pipelining::detail {

namespace {
constexpr std::chrono::microseconds kFirstPoll{50};
constexpr std::chrono::microseconds kLongestPoll{400};
}  // namespace

void SendProgress::add(WorkPtr work) {
  if (fake_backend() || !async_threaded()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    works_.push_back(std::move(work));
    stopping_ = false;
    added_ = true;
  }
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  cv_.notify_one();
}

void SendProgress::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  works_.clear();
}

void SendProgress::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  auto pause = kFirstPoll;
  while (true) {
    cv_.wait(lock, [this] { return stopping_ || !works_.empty(); });
    if (stopping_) return;
    std::vector<WorkPtr> works = works_;
    lock.unlock();
    // Each test enters MPI, which moves every pending message of this process, not only its own.
    std::vector<WorkPtr> done;
    for (const WorkPtr& w : works) {
      if (w->is_completed()) done.push_back(w);
    }
    lock.lock();
    for (const WorkPtr& w : done) works_.erase(std::find(works_.begin(), works_.end(), w));
    pause = done.empty() ? std::min(pause * 2, kLongestPoll) : kFirstPoll;
    // A new send cuts the pause short: its receiver may already be waiting for it.
    cv_.wait_for(lock, pause, [this] { return stopping_ || added_; });
    if (added_) pause = kFirstPoll;
    added_ = false;
  }
}

}  // namespace dtensor::pipelining::detail
