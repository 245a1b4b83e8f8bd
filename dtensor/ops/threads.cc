// Intra-op threads: the count, DTENSOR_NUM_THREADS, OpenBLAS's count, and the pool that runs
// parallel_for's chunks.
//
// The pool is ours (std::thread), not OpenMP's: libgomp's idle workers spin without yielding
// (GOMP_SPINCOUNT, up to milliseconds), and only environment variables read when libgomp loads
// change that. Beside OpenBLAS's own threads that starved the GEMMs: bench_train at 1 rank on 2
// cores took 112 ms per step with 2 threads against 68 ms with 1 (37 ms with
// OMP_WAIT_POLICY=passive). Our workers poll briefly, yielding, then sleep.
#include "dtensor/ops/threads.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "dtensor/ops/common/detail/parallel_for.h"
#include "dtensor/ops/matmul/detail/openblas.h"
#include "dtensor/tensor/error.h"

namespace dtensor {

namespace {

// 0 until the environment has been read; then the count, or -1 for an invalid
// DTENSOR_NUM_THREADS (reported by the first get_num_threads, not at load time).
std::atomic<int> g_num_threads{0};
std::atomic<int64_t> g_regions{0};

// Applies DTENSOR_NUM_THREADS when the library loads, so that GEMMs run before any large
// elementwise op already use it (unless set_num_threads came first).
[[maybe_unused]] const bool g_env_read = [] {
  std::optional<int> n;
  bool valid = true;
  try {
    n = detail::parse_num_threads(std::getenv("DTENSOR_NUM_THREADS"));
  } catch (const Error&) {
    valid = false;
  }
  int unset = 0;
  if (g_num_threads.compare_exchange_strong(unset, valid ? n.value_or(1) : -1) && n) {
    try {
      detail::openblas().set_num_threads(*n);
    } catch (const Error&) {
      // OpenBLAS could not be loaded: every GEMM raises that error (outside static
      // initialisation, where it could only abort).
    }
  }
  return true;
}();

// Idle workers (and a caller waiting for them) poll for this long, yielding the core between
// polls, before they sleep: back-to-back ops then start without a wake-up, and a yielding poll
// leaves the core to OpenBLAS's threads (which also yield while they poll). Measured at 2
// threads on 2 cores (bench_kernels --threads 2): with no poll softmax [64, 4096] took 101 us
// and add [256, 4096] 123 us (a wake-up per op); 5 us doubled layer_norm_backward (86 vs 44
// us); 20, 50 and 200 us gave the same figures within this VM's noise (softmax 51-65 us, add
// 77-99 us, 200 ahead by a few percent in 3 of 4 interleaved rounds against 50), so 200 us,
// which also covers the longer gaps between ops of a loaded machine.
constexpr auto kPollFor = std::chrono::microseconds(200);

// True on the pool's workers, and on a caller while its chunks run: a parallel_for there runs
// on its own thread.
thread_local bool t_in_pool = false;

// The intra-op threads: workers started on demand (count - 1 of them; the caller runs chunk 0),
// one job at a time. A job's chunk w (w >= 1) runs on worker w; workers beyond a job's chunks
// stay asleep.
class Pool {
 public:
  pid_t pid() const { return pid_; }

  // Runs f over `chunks` chunks of [begin, begin + range); false (nothing run) when another
  // thread's job holds the pool, so the caller runs the range itself rather than wait, or when
  // no worker could be started.
  bool try_run(int64_t begin, int64_t range, int64_t chunks,
               absl::FunctionRef<void(int64_t, int64_t)> f) {
    const std::unique_lock<std::mutex> job(job_mutex_, std::try_to_lock);
    if (!job.owns_lock()) return false;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      while (static_cast<int64_t>(workers_.size()) < chunks - 1) {
        const int id = static_cast<int>(workers_.size()) + 1;
        try {
          workers_.emplace_back([this, id] { work(id); });
        } catch (const std::system_error&) {  // out of threads: split over the ones there are
          chunks = static_cast<int64_t>(workers_.size()) + 1;
          if (chunks == 1) return false;
          break;
        }
        workers_.back().detach();  // the pool lives until the process ends
      }
      f_ = &f;
      begin_ = begin;
      range_ = range;
      chunks_ = chunks;
      error_ = nullptr;
      pending_.store(chunks - 1, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
    }
    g_regions.fetch_add(1, std::memory_order_relaxed);
    wake_.notify_all();
    t_in_pool = true;
    run_chunk(0);
    t_in_pool = false;
    // Wait for the workers' chunks: poll, then sleep.
    const auto poll_end = std::chrono::steady_clock::now() + kPollFor;
    while (pending_.load(std::memory_order_acquire) != 0 &&
           std::chrono::steady_clock::now() < poll_end) {
      std::this_thread::yield();
    }
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    return true;
  }

 private:
  // noexcept: the caller must not leave try_run while workers still run f.
  void run_chunk(int64_t w) noexcept {
    const int64_t lo = begin_ + range_ * w / chunks_, hi = begin_ + range_ * (w + 1) / chunks_;
    try {
      if (lo < hi) (*f_)(lo, hi);
    } catch (...) {
      const std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
  }

  void work(int id) {
    t_in_pool = true;
    uint64_t seen = 0;
    for (;;) {
      // Wait for a new job: poll, then sleep.
      const auto poll_end = std::chrono::steady_clock::now() + kPollFor;
      while (generation_.load(std::memory_order_acquire) == seen &&
             std::chrono::steady_clock::now() < poll_end) {
        std::this_thread::yield();
      }
      {
        // Asleep until a job with a chunk for this worker (a job of fewer chunks leaves it be).
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] {
          return generation_.load(std::memory_order_acquire) != seen && id < chunks_;
        });
        seen = generation_.load(std::memory_order_acquire);
      }
      run_chunk(id);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        const std::lock_guard<std::mutex> lock(mutex_);
        done_.notify_one();
      }
    }
  }

  std::mutex job_mutex_;  // held by the caller for a whole job
  std::mutex mutex_;      // guards the job's fields and the workers list; the condvars' mutex
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> generation_{0};  // bumped once per job
  std::atomic<int64_t> pending_{0};      // workers' chunks not yet finished
  const absl::FunctionRef<void(int64_t, int64_t)>* f_ = nullptr;
  int64_t begin_ = 0, range_ = 0, chunks_ = 1;
  std::mutex error_mutex_;
  std::exception_ptr error_;
  const pid_t pid_ = getpid();
};

// The process's pool. Never destroyed: its detached workers outlive main. A child process
// (fork) has none of its parent's workers, so it starts a pool of its own and leaves the
// parent's copy be.
Pool& pool() {
  static std::atomic<Pool*> current{nullptr};
  static std::mutex replacing;
  Pool* p = current.load(std::memory_order_acquire);
  if (p == nullptr || p->pid() != getpid()) {
    const std::lock_guard<std::mutex> lock(replacing);
    p = current.load(std::memory_order_acquire);
    if (p == nullptr || p->pid() != getpid()) {
      p = new Pool;
      current.store(p, std::memory_order_release);
    }
  }
  return *p;
}

}  // namespace

namespace detail {

std::optional<int> parse_num_threads(const char* value) {
  if (value == nullptr || *value == '\0') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(value, &end, 10);
  // Digits only: strtol would also take leading spaces and a sign.
  DT_CHECK(*value >= '0' && *value <= '9' && *end == '\0' && errno == 0 && v >= 1 && v <= INT_MAX,
           "[DTENSOR_NUM_THREADS] expected a positive integer (the intra-op thread count), got "
           "'%s'",
           value);
  return static_cast<int>(v);
}

void parallel_for_threads(int64_t begin, int64_t end, int64_t grain,
                          absl::FunctionRef<void(int64_t, int64_t)> f) {
  const int64_t range = end - begin;
  const int64_t chunks = std::min<int64_t>(get_num_threads(), range / (grain > 0 ? grain : 1));
  if (chunks <= 1 || t_in_pool || !pool().try_run(begin, range, chunks, f)) f(begin, end);
}

int64_t parallel_regions_started() {
  return g_regions.load(std::memory_order_relaxed);
}

}  // namespace detail

void set_num_threads(int n) {
  DT_CHECK(n >= 1, "[set_num_threads] expected a thread count >= 1, got %d", n);
  g_num_threads.store(n, std::memory_order_relaxed);
  detail::openblas().set_num_threads(n);
}

int get_num_threads() {
  const int n = g_num_threads.load(std::memory_order_relaxed);
  if (n > 0) return n;
  // Invalid DTENSOR_NUM_THREADS (or a call during static initialisation, before g_env_read):
  // parse again, so the error names the value.
  detail::parse_num_threads(std::getenv("DTENSOR_NUM_THREADS"));
  return 1;
}

}  // namespace dtensor
