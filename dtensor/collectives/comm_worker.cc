#include "dtensor/collectives/comm_worker.h"

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/cuda_support.h"
#include "dtensor/collectives/fake_communicator.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/tensor/detail/capture_hook.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

// What the submitting thread's CommDebugMode should see of a task: the labels it was submitted
// under and, once it ran, what it issued.
struct DebugCapture {
  CommDebugMode::Attribution labels;
  std::vector<CommDebugMode::Record> records;
};

// The Work of one task.
class AsyncWork final : public Work {
 public:
  AsyncWork(std::unique_ptr<DebugCapture> capture, bool silent)
      : capture_(std::move(capture)), silent_(silent) {}

  bool is_completed() override { return done_.load(std::memory_order_acquire); }

  void wait() override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return done_.load(std::memory_order_relaxed); });
    }
    // The first wait hands what the task issued to this thread's CommDebugModes.
    if (capture_ != nullptr && !replayed_.exchange(true)) {
      CommDebugMode::replay(capture_->records);
    }
    if (error_) std::rethrow_exception(error_);
  }

  // Runs on the communication thread (or inline). The task (and what it captured: the
  // collective's tensors) is destroyed before the Work completes, so a waiter that goes on to
  // allocate never finds those buffers still held by this thread.
  void run(std::function<void()> task) {
    try {
      if (capture_ != nullptr) {
        CommDebugMode mode;
        const CommDebugMode::OpScope labels(capture_->labels.op, capture_->labels.module,
                                            capture_->labels.backward);
        try {
          task();
        } catch (...) {
          capture_->records = mode.records();
          throw;
        }
        capture_->records = mode.records();
      } else if (silent_) {
        const CommDebugMode::Silence silence;  // inline on a thread whose scopes counted it
        task();
      } else {
        task();
      }
    } catch (...) {
      error_ = std::current_exception();
    }
    task = nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    done_.store(true, std::memory_order_release);
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> done_{false};
  std::exception_ptr error_;
  std::unique_ptr<DebugCapture> capture_;
  bool silent_;
  std::atomic<bool> replayed_{false};
};

struct Task {
  std::shared_ptr<AsyncWork> work;
  std::function<void()> fn;
};

// A submitted task not yet run (queued or running): its number and the communicator it uses
// (null: any).
struct Unfinished {
  uint64_t seq;
  const Communicator* uses;
};

struct Worker {
  std::mutex mu;
  std::condition_variable cv;       // tasks queued or stop requested
  std::condition_variable done_cv;  // a task finished
  std::deque<Task> queue;
  std::deque<Unfinished> unfinished;  // in submission order, which is also run order
  uint64_t submitted = 0;             // tasks are numbered from 1
  uint64_t finished = 0;              // the number of the last task run
  std::thread thread;
  bool stop = false;
  std::atomic<int64_t> outstanding{0};  // submitted, not yet run
};

Worker& worker() {
  static Worker* w = new Worker();  // never destroyed: used until the Runtime stops it
  return *w;
}

thread_local bool t_on_comm_thread = false;

void worker_loop(Worker& w) {
  t_on_comm_thread = true;
  // The CUDA device is per thread: compute where the Runtime put this process.
  try {
    detail::select_cuda_device(local_rank());
  } catch (...) {
    // No device to select: tasks on CUDA tensors report their own errors.
  }
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(w.mu);
      w.cv.wait(lock, [&] { return w.stop || !w.queue.empty(); });
      if (w.queue.empty()) return;  // stop requested and nothing left
      task = std::move(w.queue.front());
      w.queue.pop_front();
    }
    task.work->run(std::move(task.fn));
    std::lock_guard<std::mutex> lock(w.mu);
    w.finished = w.unfinished.front().seq;
    w.unfinished.pop_front();
    w.outstanding.fetch_sub(1, std::memory_order_acq_rel);
    w.done_cv.notify_all();  // drain_async_for may wait for this very task
  }
}

// DTENSOR_ASYNC: false for "0".
bool env_threaded() {
  if (const char* env = std::getenv("DTENSOR_ASYNC"); env != nullptr && *env != '\0') {
    DT_CHECK(std::strcmp(env, "0") == 0 || std::strcmp(env, "1") == 0,
             "[async] DTENSOR_ASYNC='%s' is not 0 or 1 (0: async operations run inline, 1 or "
             "unset: on the communication thread)",
             env);
    return std::strcmp(env, "1") == 0;
  }
  return true;
}

bool mpi_multiple() {
  // The fake backend has no MPI, and threads as a real MPI_THREAD_MULTIPLE run would.
  if (detail::fake_world() != nullptr) return true;
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  return provided >= MPI_THREAD_MULTIPLE;
}

std::atomic<int> g_forced{-1};  // set_async_threaded: -1 none, 0 inline, 1 threaded

}  // namespace

bool async_threaded() {
  static const bool multiple = mpi_multiple();
  static const bool env = env_threaded();
  const int forced = g_forced.load(std::memory_order_relaxed);
  return multiple && (forced < 0 ? env : forced == 1);
}

void set_async_threaded(bool threaded) {
  drain_async();
  g_forced.store(threaded ? 1 : 0, std::memory_order_relaxed);
}

bool on_comm_thread() {
  return t_on_comm_thread;
}

bool async_outstanding() {
  return worker().outstanding.load(std::memory_order_acquire) > 0;
}

namespace {

WorkPtr submit(std::function<void()> task, bool capture_debug, const Communicator* uses) {
  detail::refuse_in_capture(
      "an async collective (async_op = true, or a data-parallel gradient bucket): it runs on the "
      "communication thread, outside the step being captured",
      /*even_inside=*/true);
  std::unique_ptr<DebugCapture> capture;
  if (capture_debug && CommDebugMode::active()) {
    capture = std::make_unique<DebugCapture>();
    capture->labels = CommDebugMode::current_attribution();
  }
  auto work = std::make_shared<AsyncWork>(std::move(capture), !capture_debug);
  if (!async_threaded() || on_comm_thread()) {
    work->run(std::move(task));  // inline (a task submitting another runs it in place, in order)
    return work;
  }
  Worker& w = worker();
  {
    std::lock_guard<std::mutex> lock(w.mu);
    if (!w.thread.joinable()) {
      w.stop = false;
      w.thread = std::thread(worker_loop, std::ref(w));
    }
    w.outstanding.fetch_add(1, std::memory_order_acq_rel);
    w.unfinished.push_back(Unfinished{++w.submitted, uses});
    w.queue.push_back(Task{work, std::move(task)});
  }
  w.cv.notify_one();
  return work;
}

}  // namespace

WorkPtr submit_async(std::function<void()> task, bool capture_debug) {
  return submit(std::move(task), capture_debug, nullptr);
}

WorkPtr submit_async(const Communicator& uses, std::function<void()> task, bool capture_debug) {
  // A communicator that orders across communicators (NCCL) may also use others behind its back
  // (the NCCL backend's slot exchange runs on its MPI twin, which for the world is the CPU world
  // communicator itself): its tasks hold back everything, as undeclared ones do.
  return submit(std::move(task), capture_debug,
                uses.orders_across_communicators() ? nullptr : &uses);
}

void drain_async() {
  if (on_comm_thread()) return;
  Worker& w = worker();
  std::unique_lock<std::mutex> lock(w.mu);
  w.done_cv.wait(lock, [&] { return w.outstanding.load(std::memory_order_acquire) == 0; });
}

void drain_async_for(const Communicator& comm) {
  if (!async_outstanding() || on_comm_thread()) return;
  const bool every = comm.orders_across_communicators();
  Worker& w = worker();
  std::unique_lock<std::mutex> lock(w.mu);
  // The last unfinished task that may use `comm`: tasks run in order, so once it has run, so
  // have the earlier ones that use it.
  uint64_t last = 0;
  for (auto it = w.unfinished.rbegin(); it != w.unfinished.rend(); ++it) {
    if (every || it->uses == nullptr || it->uses == &comm) {
      last = it->seq;
      break;
    }
  }
  w.done_cv.wait(lock, [&] { return w.finished >= last; });
}

namespace detail {

void stop_comm_thread() {
  Worker& w = worker();
  std::thread t;
  {
    std::lock_guard<std::mutex> lock(w.mu);
    if (!w.thread.joinable()) return;
    w.stop = true;
    t = std::move(w.thread);
  }
  w.cv.notify_all();
  t.join();  // the loop runs every queued task before it returns
}

}  // namespace detail
}  // namespace dtensor
