#include "dtensor/collectives/p2p_progress.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "dtensor/collectives/comm_worker.h"
#include "dtensor/collectives/fake_communicator.h"

namespace dtensor::detail {

namespace {
constexpr std::chrono::microseconds kFirstPoll{50};
constexpr std::chrono::microseconds kLongestPoll{400};
}  // namespace

// The process's progress thread and what it tests.
struct ProgressThread {
  struct Entry {
    WorkPtr work;
    P2PProgress* owner;
  };
  std::mutex mu;
  std::condition_variable cv;       // entries added, or stop requested
  std::condition_variable done_cv;  // a round of tests ended
  std::vector<Entry> entries;
  bool added = false;     // an entry came since the last round
  bool stopping = false;  // stop_progress_thread
  bool testing = false;   // a round is testing a snapshot of `entries` (unlocked)
  uint64_t rounds = 0;
  std::thread thread;

  static ProgressThread& get() {
    static auto* p = new ProgressThread();  // never destroyed: owners may outlive statics
    return *p;
  }

  void loop() {
    std::unique_lock<std::mutex> lock(mu);
    auto pause = kFirstPoll;
    while (true) {
      cv.wait(lock, [this] { return stopping || !entries.empty(); });
      if (stopping) return;
      if (added) {
        // New Works are first tested one short pause after they come, not at once: an owner
        // that waits right away (a hop with nothing to compute behind it) then stops before the
        // first round and spins alone, instead of the two threads testing side by side (a bare
        // ring hop took 0.85 ms that way, against 0.45 ms; bench_ring_attention at cp 2).
        added = false;
        pause = kFirstPoll;
        cv.wait_for(lock, kFirstPoll, [this] { return stopping; });
        if (stopping) return;
        if (entries.empty()) continue;
      }
      std::vector<Entry> snapshot = entries;
      testing = true;
      lock.unlock();
      // Each test enters MPI, which moves every pending message of this process, not only its
      // own. A test that throws ends that Work's polling; its error goes to the owner.
      struct Done {
        const Work* work;
        P2PProgress* owner;
        std::exception_ptr error;
      };
      std::vector<Done> done;
      for (const Entry& e : snapshot) {
        try {
          if (e.work->is_completed()) done.push_back({e.work.get(), e.owner, nullptr});
        } catch (...) {
          done.push_back({e.work.get(), e.owner, std::current_exception()});
        }
      }
      snapshot.clear();  // the owners hold their Works until stop() has returned
      lock.lock();
      for (const Done& d : done) {
        // The owner is alive: one that stops during a round waits for the round to end, so it
        // also receives an error raised while it was stopping.
        if (d.error && !d.owner->error_) d.owner->error_ = d.error;
        const auto it = std::find_if(entries.begin(), entries.end(), [&](const Entry& e) {
          return e.work.get() == d.work && e.owner == d.owner;
        });
        if (it != entries.end()) entries.erase(it);  // else its owner stopped meanwhile
      }
      testing = false;
      ++rounds;
      done_cv.notify_all();
      pause = done.empty() ? std::min(pause * 2, kLongestPoll) : kFirstPoll;
      // A new Work cuts the pause short: its peer may already be waiting for it.
      cv.wait_for(lock, pause, [this] { return stopping || added; });
    }
  }
};

bool needs_host_progress(const Communicator& comm, Device device) {
  return device.is_cpu() && comm.backend() == "mpi" && !fake_backend() && async_threaded();
}

P2PProgress::~P2PProgress() {
  (void)stop();
}

void P2PProgress::add(WorkPtr work, const Communicator& comm, Device device) {
  if (!needs_host_progress(comm, device)) return;
  ProgressThread& p = ProgressThread::get();
  {
    std::lock_guard<std::mutex> lock(p.mu);
    p.entries.push_back({std::move(work), this});
    p.added = true;
    p.stopping = false;
    registered_ = true;
    if (!p.thread.joinable()) p.thread = std::thread([&p] { p.loop(); });
  }
  p.cv.notify_one();
}

std::exception_ptr P2PProgress::stop() {
  if (!registered_) return nullptr;  // nothing of ours reached the thread since the last stop
  ProgressThread& p = ProgressThread::get();
  std::unique_lock<std::mutex> lock(p.mu);
  std::erase_if(p.entries, [this](const ProgressThread::Entry& e) { return e.owner == this; });
  // A round under way may be testing our Works from its snapshot: let it end.
  if (p.testing) {
    const uint64_t round = p.rounds;
    p.done_cv.wait(lock, [&] { return !p.testing || p.rounds != round; });
  }
  registered_ = false;
  return std::exchange(error_, nullptr);
}

void stop_progress_thread() {
  ProgressThread& p = ProgressThread::get();
  std::thread t;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    if (!p.thread.joinable()) return;
    p.stopping = true;
    p.entries.clear();
    t = std::move(p.thread);
  }
  p.cv.notify_all();
  t.join();
}

}  // namespace dtensor::detail
