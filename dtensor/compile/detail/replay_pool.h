// The memory a compiled step's replays reuse (the memory plan's "buffers freed at last use and
// reused", kept from replay to replay). Storage::allocate on the replaying thread asks the graph's
// pool first (dtensor/tensor/detail/storage_pool.h's StoragePool), so a replay neither frees nor
// allocates the memory of the values it makes step after step. Freeing was most of a replay's own
// time: glibc gave the heap's top back to the system at each free (munmap, a TLB flush) and the
// next allocation faulted its pages in again. PyTorch's CUDA graph pools keep a captured graph's
// memory so.
//
// CPU memory follows a static offset plan. A graph replays the same allocations and frees every
// time, so its first two replays record them (sizes in order, and when each was freed: before
// which allocation of its replay, or of the next one for a value carried over, as a gradient the
// next zero_grad frees); when both made the same allocations the pool gives every allocation
// freed on the replaying thread an offset in ONE arena, no two allocations alive at once
// overlapping (the timeline a circle of one replay's allocations; interval packing, several
// orders tried, the smallest arena kept), and later replays take allocation i's memory at its
// offset. The arena is then about the most bytes a replay has alive at once (the sum of what is
// alive, not of each size's maximum, which exact-size reuse kept: 1.5-3.3x the eager peak on the
// tests' model). Allocations that outlive the next replay's own (outputs the caller keeps, state
// kept across steps) or that another thread frees (a scheduled collective's) stay out of the
// arena: the allocator's, as in eager mode; the communication thread's allocations are never
// planned (their order against the replay's is not fixed).
// Safety: an allocation is given its offset only when the allocations that last held those bytes
// before it (MemoryPlan::preds, carried ones included) are dead, and a replay starts on the arena
// only when no storage of it but carried ones is alive (else on a new arena; the old one lives
// until its storages go). A replay that deviates from the plan (another size at index i, or
// memory the plan reuses still in use) takes nothing more from the arena until its end (so it
// never overlaps live memory), and the next replays record again; after kMaxPlans such plans the
// pool keeps exact sizes instead (below). Other devices keep exact sizes too: a value whose last
// reader ran goes back to the pool and the next allocation of the same size takes it; after
// each replay the pool keeps of each size at most the most that replay had out at once.
#pragma once

#include <absl/container/flat_hash_map.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <utility>
#include <vector>

#include "dtensor/tensor/detail/storage_pool.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::compiler {

class Recording;  // replay_pool.cc
class Arena;
class FlightScope;

// The static offset plan: per CPU allocation of a replay, in order, its size and its offset in
// the arena (-1: outside it), and the allocations before it whose memory it reuses (preds_: each
// must be dead when it is given).
struct MemoryPlan {
  struct Slot {
    size_t nbytes = 0;
    int64_t offset = -1;
    uint32_t preds_begin = 0, preds_count = 0;
    // Freed by the next replay, before its own allocation of this slot (a gradient, freed by
    // the next zero_grad): alive from replay to replay.
    bool carried = false;
  };
  // A scheduled move's task (the f-th submitted in a replay): the replay's allocations made when
  // it was issued and when it was waited for, and its own allocations' slots [first, +count)
  // (after the replay's). Each is planned alive from its issue to its free (freed by the task
  // itself: to the wait), whatever the communication thread's timing in between.
  struct Flight {
    int64_t issued = 0, landed = 0;
    uint32_t first = 0, count = 0;
  };
  std::vector<Slot> slots;
  std::vector<Flight> flights;
  std::vector<uint32_t> land_order;  // the flights by `landed` (a replay checks they landed)
  std::vector<uint32_t> preds;
  int64_t arena_bytes = 0;
  int64_t live_peak = 0;  // the most bytes of planned allocations alive at once when recorded
};

// Packs intervals as a plan packs a replay's allocations (`size` bytes alive over the
// allocations [start, end), the timeline a circle of `period` allocations: no two alive at once
// overlap), searching until the arena is `bound` or the work budget is spent. Per interval its
// offset, the arena, the fixed orders' arena (before the perturbed orders and the search), and
// the work done. Internal: a plan's packing, exposed for its test.
struct PackInterval {
  int64_t size, start, end;
};
struct PackedIntervals {
  std::vector<int64_t> offsets;
  int64_t arena = 0, fixed_arena = 0, work = 0;
};
PackedIntervals pack_intervals(std::vector<PackInterval> items, int64_t period, int64_t bound);

class ReplayPool final : public dtensor::detail::StoragePool {
 public:
  // Plans given up after this many deviated (or recordings of two replays that differed): the
  // pool then keeps exact sizes.
  static constexpr int kMaxPlans = 3;
  ReplayPool() { dtensor::detail::register_storage_pool(this); }
  ~ReplayPool() override;
  ReplayPool(const ReplayPool&) = delete;
  ReplayPool& operator=(const ReplayPool&) = delete;
  // Empties `t`. With exact sizes, its storage is kept when `t` held the only reference to it
  // (memory the library allocated that no other handle or view shares: not a value the user, a
  // parameter, a gradient or a later node still holds) and the pool holds fewer than limit()
  // storages; otherwise (and for planned CPU memory, which the plan reuses) it is released as
  // usual.
  void recycle(Tensor& t);
  // Planned (or recorded) CPU memory for the replay's next allocation, or a kept storage of
  // exactly `nbytes` on `device`, or an undefined one (the allocator's).
  Storage take(size_t nbytes, Device device) override;
  // Scheduled moves (Graph::run): issued(f) on the replaying thread just before the replay's f-th
  // task is submitted, landed(f) once it has been waited for; the task runs in a FlightScope,
  // whose allocations (on the thread that runs it) take_flight serves: planned CPU memory (or
  // recorded), else the allocator's. A replay issues at most set_flights(n) tasks.
  void set_flights(uint32_t n) { flight_count_ = n; }
  void issued(uint32_t f);
  void landed(uint32_t f);
  Storage take_flight(uint32_t f, uint32_t index, size_t nbytes, Device device);
  // The start of a replay (ReplayPoolScope): a fresh arena when a storage of the last one is
  // still alive (its memory is then not the plan's to give).
  void start();
  // The end of a replay (ReplayPoolScope): turns a recording into a plan, notes a deviation, and
  // with exact sizes keeps of each size at most the storages that replay needed at its start (the
  // most it drew from the pool at once, counting the allocations the pool could not serve), and
  // frees the rest: a pool holds no storage a replay like the last one would not take.
  // `complete`: the replay ran to its end (a recording of one unwound by an exception is not a
  // plan: the next replay records again).
  void trim(bool complete = true);
  // At most this many storages are kept with exact sizes (a graph's produced values: a replay
  // never needs more); 0 turns reuse off.
  void set_limit(size_t limit) { limit_ = limit; }
  size_t limit() const { return limit_; }
  // Frees every kept storage and the arena now (waiting for a replay of the pool on another
  // thread to end); the plan stays (the next replay makes a new arena).
  void release();
  // The bytes kept now between replays (the arena and the kept storages: memory_stats() counts
  // them as cached).
  int64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  // The plan's arena size (0 without a plan), and the most bytes of planned allocations alive at
  // once in the replay it was recorded from.
  int64_t arena_bytes() const { return plan_ready_ ? plan_.arena_bytes : 0; }
  int64_t planned_live_peak() const { return plan_ready_ ? plan_.live_peak : 0; }
  // Replays that deviated from their plan so far (test hook).
  int deviations() const { return deviations_; }

 private:
  friend class FlightScope;
  void release_all() override;
  // Exact-size reuse.
  struct Key {
    size_t nbytes;
    Device device;
    bool operator==(const Key&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.nbytes, static_cast<int>(k.device.type), k.device.index);
    }
  };
  struct SizeClass {
    std::vector<Storage> kept;
    // Since the replay began: storages asked for (served or not) minus storages kept, and the
    // most of that, the number the replay needed at its start (trim).
    int64_t drawn = 0, most_drawn = 0;
  };
  Storage take_kept(size_t nbytes, Device device);
  Storage take_planned(size_t nbytes);
  void deviate() {
    serving_.store(false, std::memory_order_relaxed);
    deviated_.store(true, std::memory_order_relaxed);
  }
  // Frees kept storages from the back of `c` until it keeps `keep`.
  void shrink(const Key& key, SizeClass& c, size_t keep);
  // Lets go of the arena (counted as held again first when it was cached).
  void drop_arena();
  void uncache_arena();
  enum class Mode { kRecord, kPlanned, kExact };
  Mode mode_ = Mode::kRecord;
  absl::flat_hash_map<Key, SizeClass> classes_;
  size_t count_ = 0, limit_ = 0;
  Recording* recording_ = nullptr;  // while a replay records (one reference)
  MemoryPlan plan_;
  bool plan_ready_ = false;
  Arena* arena_ = nullptr;  // one reference; its other ones are its storages alive
  // The bytes of the arena counted as cached (between replays: all but the carried values).
  int64_t cached_ = 0;
  // The first of the two recorded replays, while the second records.
  Recording* previous_ = nullptr;
  // The replay in progress: the index of its next CPU allocation, whether the arena still serves
  // it, and whether it deviated.
  // Read by the communication thread too (a task's allocations).
  size_t next_ = 0;
  std::atomic<bool> serving_{false}, deviated_{false};
  // The flights a replay may issue, which of them landed, and how many of plan_.land_order were
  // found landed by the replay's allocations so far.
  uint32_t flight_count_ = 0;
  std::vector<uint8_t> landed_;
  size_t land_checked_ = 0;
  int plans_failed_ = 0, deviations_ = 0;
  std::atomic<int64_t> bytes_{0};  // read by kept_bytes() on any thread
};

// A scheduled move's task, on the thread that runs it: its allocations go to the pool's plan for
// flight f (ReplayPool::take_flight). No-op with a null pool.
class FlightScope final : public dtensor::detail::StoragePool {
 public:
  FlightScope(ReplayPool* pool, uint32_t f);
  ~FlightScope() override;
  FlightScope(const FlightScope&) = delete;
  FlightScope& operator=(const FlightScope&) = delete;
  // Only CPU allocations are numbered (a recording keeps those only), so that a task allocating
  // on another device too numbers its CPU ones the same on replay.
  Storage take(size_t nbytes, Device device) override {
    if (!device.is_cpu()) return Storage();
    return pool_->take_flight(flight_, next_++, nbytes, device);
  }

 private:
  void release_all() override {}
  ReplayPool* pool_;
  uint32_t flight_, next_ = 0;
  dtensor::detail::StoragePool* previous_ = nullptr;
  // The thread's flight it replaces (a recording and a flight index).
  const void* previous_recording_ = nullptr;
  int64_t previous_flight_ = -1;
};

// Frees the storages `g` keeps between replays (Graph's friend): a step re-capturing a layout
// frees the graph it replaces first, so that its capture does not run beside memory kept for
// replays that will not come.
class Graph;
void release_kept_storages(const Graph& g);

// Installs a pool as this thread's for the scope (Graph::run's walk; nullptr: none) and starts
// its replay (ReplayPool::start), then trims it (ReplayPool::trim), ends its use (which releases
// it if empty_cpu_cache() asked meanwhile) and puts back the pool it replaced.
class ReplayPoolScope {
 public:
  explicit ReplayPoolScope(ReplayPool* pool)
      : pool_(pool), exceptions_(std::uncaught_exceptions()) {
    if (pool_ != nullptr) {
      pool_->begin_use();
      pool_->start();
    }
    previous_ = dtensor::detail::set_storage_pool(pool);
  }
  ~ReplayPoolScope() {
    dtensor::detail::set_storage_pool(previous_);
    if (pool_ == nullptr) return;
    pool_->trim(std::uncaught_exceptions() == exceptions_);
    pool_->end_use();
  }
  ReplayPoolScope(const ReplayPoolScope&) = delete;
  ReplayPoolScope& operator=(const ReplayPoolScope&) = delete;

 private:
  ReplayPool* pool_;
  dtensor::detail::StoragePool* previous_;  // an outer replay's (a node calling user code)
  int exceptions_;                          // in flight at the start (an unwound replay)
};

}  // namespace dtensor::compiler
