// The storages a compiled step's replays reuse (the memory plan's "buffers freed at last use and
// reused", kept from replay to replay). A value whose last reader ran goes back to its graph's
// pool instead of to the allocator, and the next allocation of the same size on the replaying
// thread (Storage::allocate, through dtensor/tensor/detail/storage_pool.h's StoragePool) takes it
// back: a replay then neither frees nor allocates the memory of the values it makes step after
// step. Freeing was most of a replay's own time: glibc gave the heap's top back to the system at
// each free (munmap, a TLB flush) and the next allocation faulted its pages in again. PyTorch's
// CUDA graph pools keep a captured graph's memory so.
#pragma once

#include <absl/container/flat_hash_map.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "dtensor/tensor/detail/storage_pool.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::compiler {

class ReplayPool final : public dtensor::detail::StoragePool {
 public:
  ReplayPool() { dtensor::detail::register_storage_pool(this); }
  ~ReplayPool() override;
  ReplayPool(const ReplayPool&) = delete;
  ReplayPool& operator=(const ReplayPool&) = delete;
  // Empties `t`. Its storage is kept when `t` held the only reference to it (memory the library
  // allocated that no other handle or view shares: not a value the user, a parameter, a
  // gradient or a later node still holds) and the pool holds fewer than limit() storages;
  // otherwise it is released as usual.
  void recycle(Tensor& t);
  // A kept storage of exactly `nbytes` on `device`, or an undefined one.
  Storage take(size_t nbytes, Device device) override;
  // The end of a replay: keeps of each size at most the storages that replay needed at its
  // start (the most it drew from the pool at once, counting the allocations the pool could not
  // serve), and frees the rest: a pool holds no storage a replay like the last one would not
  // take. Called by ReplayPoolScope.
  void trim();
  // At most this many storages are kept (a graph's produced values: a replay never needs more).
  void set_limit(size_t limit) { limit_ = limit; }
  size_t limit() const { return limit_; }
  // Frees every kept storage now (waiting for a replay of the pool on another thread to end).
  void release();
  // The bytes of the storages kept now (between replays: memory_stats() counts them as cached).
  int64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

 private:
  void release_all() override;
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
  // Frees kept storages from the back of `c` until it keeps `keep`.
  void shrink(const Key& key, SizeClass& c, size_t keep);
  absl::flat_hash_map<Key, SizeClass> classes_;
  size_t count_ = 0, limit_ = 0;
  std::atomic<int64_t> bytes_{0};  // read by kept_bytes() on any thread
};

// Frees the storages `g` keeps between replays (Graph's friend): a step re-capturing a layout
// frees the graph it replaces first, so that its capture does not run beside memory kept for
// replays that will not come.
class Graph;
void release_kept_storages(const Graph& g);

// Installs a pool as this thread's for the scope (Graph::run's walk; nullptr: none), then trims
// it (ReplayPool::trim), ends its use (which releases it if empty_cpu_cache() asked meanwhile)
// and puts back the pool it replaced.
class ReplayPoolScope {
 public:
  explicit ReplayPoolScope(ReplayPool* pool) : pool_(pool) {
    if (pool_ != nullptr) pool_->begin_use();
    previous_ = dtensor::detail::set_storage_pool(pool);
  }
  ~ReplayPoolScope() {
    dtensor::detail::set_storage_pool(previous_);
    if (pool_ == nullptr) return;
    pool_->trim();
    pool_->end_use();
  }
  ReplayPoolScope(const ReplayPoolScope&) = delete;
  ReplayPoolScope& operator=(const ReplayPoolScope&) = delete;

 private:
  ReplayPool* pool_;
  dtensor::detail::StoragePool* previous_;  // an outer replay's (a node calling user code)
};

}  // namespace dtensor::compiler
