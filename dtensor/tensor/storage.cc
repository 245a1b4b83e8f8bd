#include "dtensor/tensor/storage.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "dtensor/tensor/detail/byte_counter.h"
#include "dtensor/tensor/detail/capture_hook.h"
#include "dtensor/tensor/detail/storage_pool.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/memory_stats.h"

namespace dtensor {
namespace {
detail::ByteCounter g_meta;  // meta_memory_stats(): the rounded bytes meta storages would hold

// The allocator's deleter and ctx for `nbytes` on `device` (allocate; release_data of a pool's
// slot).
void set_allocator_deleter(Device device, size_t nbytes, Deleter* deleter, void** ctx) {
  if (device.is_cpu()) {
    *deleter = &detail::cpu_free;
    // The rounded size travels in ctx so that cpu_free can keep memory_stats() exact.
    *ctx = reinterpret_cast<void*>(detail::cpu_allocation_size(nbytes));
  } else {
    *deleter = &detail::cuda_free;
    // The ordinal travels in ctx so that cuda_free can make the right device current.
    *ctx = reinterpret_cast<void*>(static_cast<intptr_t>(device.index));
  }
}

// cpu_free, cuda_free, or detail::pooled_free (a slot of a compiled step's arena,
// detail/storage_pool.h): memory the library allocated.
bool library_deleter(Deleter d) {
  return d == &detail::cpu_free || d == &detail::cuda_free || d == &detail::pooled_free;
}
}  // namespace

MemoryStats meta_memory_stats() {
  return g_meta.stats();
}

void reset_peak_meta_memory_stats() {
  g_meta.reset_peak();
}

Storage::Impl::~Impl() {
  if (deleter != nullptr && data != nullptr) {
    deleter(data, ctx);
  } else if (device.is_meta()) {
    // The rounded size travels in ctx, as for the CPU (meta_memory_stats).
    g_meta.sub(static_cast<int64_t>(reinterpret_cast<uintptr_t>(ctx)));
  }
}

namespace {
// A compiled step's replay: the storage of a value that died, kept for this allocation (never a
// meta one: a pool keeps only storages with memory); undefined when the pool has none.
[[gnu::noinline, gnu::cold]] Storage take_from_pool(const detail::AllocationHooks& hooks,
                                                    size_t nbytes, Device device) {
  Storage kept = hooks.pool->take(nbytes, device);
  if (kept.defined() && hooks.recorder != nullptr) hooks.recorder->note_allocation(kept.id());
  return kept;
}

[[gnu::noinline, gnu::cold]] void note_allocation(const detail::AllocationHooks& hooks,
                                                  const Storage& s) {
  if (hooks.recorder != nullptr) hooks.recorder->note_allocation(s.id());
}
}  // namespace

Storage Storage::allocate(size_t nbytes, Device device) {
  // A capture or a replay in progress on this thread: one inline read of the thread's hooks and
  // one test on the eager path; the hooks' work is out of line.
  const detail::AllocationHooks& hooks = detail::t_hooks;
  const bool hooked =
      (reinterpret_cast<uintptr_t>(hooks.recorder) | reinterpret_cast<uintptr_t>(hooks.pool)) != 0;
  if (hooked && hooks.pool != nullptr) [[unlikely]] {
    Storage kept = take_from_pool(hooks, nbytes, device);
    if (kept.defined()) return kept;
  }
  Storage s;
  s.impl_ = std::make_shared<Impl>();
  s.impl_->nbytes = nbytes;
  s.impl_->device = device;
  if (device.is_meta()) [[unlikely]] {
    detail::g_meta_storage_made.store(true, std::memory_order_relaxed);
    // No memory and no deleter; meta_memory_stats counts what the CPU allocator would hold.
    const size_t rounded = detail::cpu_allocation_size(nbytes);
    s.impl_->ctx = reinterpret_cast<void*>(rounded);
    g_meta.add(static_cast<int64_t>(rounded));
    return s;
  }
  set_allocator_deleter(device, nbytes, &s.impl_->deleter, &s.impl_->ctx);
  s.impl_->data = s.allocate_data();
  if (hooked) [[unlikely]]
    note_allocation(hooks, s);
  return s;
}

void* Storage::allocate_data() const {
  return impl_->device.is_cpu() ? detail::cpu_allocate(impl_->nbytes)
                                : detail::cuda_allocate(impl_->nbytes, impl_->device.index);
}

// A meta storage's ctx is its rounded size while it counts as held in meta_memory_stats, null
// once released (FSDP frees gathered parameters so): the figures follow what a real run holds.
void Storage::release_data() const {
  if (impl_ != nullptr && impl_->device.is_meta()) {
    g_meta.sub(static_cast<int64_t>(reinterpret_cast<uintptr_t>(impl_->ctx)));
    impl_->ctx = nullptr;
    return;
  }
  DT_CHECK(impl_ != nullptr && library_deleter(impl_->deleter),
           "[Storage::release_data] only memory from Storage::allocate can be released");
  if (impl_->data == nullptr) return;
  impl_->deleter(impl_->data, impl_->ctx);
  impl_->data = nullptr;
  // A pool's slot went back to its pool: the next memory (reallocate_data) is the allocator's.
  if (impl_->deleter == &detail::pooled_free) {
    set_allocator_deleter(impl_->device, impl_->nbytes, &impl_->deleter, &impl_->ctx);
  }
}

void Storage::reallocate_data() const {
  if (impl_ != nullptr && impl_->device.is_meta()) {
    if (impl_->ctx != nullptr) return;
    const size_t rounded = detail::cpu_allocation_size(impl_->nbytes);
    impl_->ctx = reinterpret_cast<void*>(rounded);
    g_meta.add(static_cast<int64_t>(rounded));
    return;
  }
  DT_CHECK(impl_ != nullptr && library_deleter(impl_->deleter),
           "[Storage::reallocate_data] only memory from Storage::allocate can be reallocated");
  if (impl_->data != nullptr) return;
  impl_->data = allocate_data();
}

bool Storage::allocated(const Impl& i) {
  return i.data != nullptr && library_deleter(i.deleter);
}

bool Storage::sole_owner() const {
  if (impl_ == nullptr || impl_.use_count() != 1 || !allocated(*impl_)) return false;
  // use_count() is a relaxed read; the acquire fence pairs with the release of the last other
  // reference (shared_ptr's decrement is acq_rel), so that thread's reads and writes of the
  // memory happen before the caller's writes into it.
  std::atomic_thread_fence(std::memory_order_acquire);
  return true;
}

bool Storage::try_swap_data(const Storage& other) const {
  if (impl_ == nullptr || other.impl_ == nullptr || impl_ == other.impl_ || !allocated(*impl_) ||
      !allocated(*other.impl_) || impl_->nbytes != other.impl_->nbytes ||
      impl_->device != other.impl_->device || impl_->deleter != other.impl_->deleter) {
    return false;
  }
  std::swap(impl_->data, other.impl_->data);
  std::swap(impl_->ctx, other.impl_->ctx);
  ++impl_->version;
  ++other.impl_->version;
  return true;
}

Storage Storage::from_blob(void* data, size_t nbytes, Device device, Deleter deleter, void* ctx) {
  DT_CHECK(data != nullptr || nbytes == 0,
           "[Storage::from_blob] data is null but nbytes is %d (expected a valid pointer)", nbytes);
  Storage s;
  s.impl_ = std::make_shared<Impl>();
  s.impl_->data = data;
  s.impl_->nbytes = nbytes;
  s.impl_->device = device;
  s.impl_->deleter = deleter;
  s.impl_->ctx = ctx;
  if (device.is_meta()) detail::g_meta_storage_made.store(true, std::memory_order_relaxed);
  return s;
}

namespace detail {
namespace {
// The live storage pools (release_storage_pools). Never destroyed: a pool may go during static
// teardown.
struct PoolRegistry {
  std::mutex mu;
  std::vector<StoragePool*> pools;
};
PoolRegistry& pool_registry() {
  static auto* registry = new PoolRegistry();
  return *registry;
}
}  // namespace

void register_storage_pool(StoragePool* pool) {
  PoolRegistry& r = pool_registry();
  const std::lock_guard<std::mutex> lock(r.mu);
  r.pools.push_back(pool);
}

// Under the registry's lock: a release in progress on another thread ends before the pool goes.
void unregister_storage_pool(StoragePool* pool) {
  PoolRegistry& r = pool_registry();
  const std::lock_guard<std::mutex> lock(r.mu);
  r.pools.erase(std::remove(r.pools.begin(), r.pools.end(), pool), r.pools.end());
}

void pooled_free(void* data, void* ctx) {
  static_cast<PooledMemory*>(ctx)->give_back(data);
}

void release_storage_pools() {
  PoolRegistry& r = pool_registry();
  const std::lock_guard<std::mutex> lock(r.mu);
  for (StoragePool* pool : r.pools) pool->release_or_defer();
}

// in_use_ is held by the replaying thread for its use and by a releasing thread for a release.
// A release that finds the pool in use leaves a request; the user reads it after giving in_use_
// back, and the releaser looks at in_use_ again after leaving it (both sequentially consistent:
// at least one of them sees the other), so no request is lost.
void StoragePool::begin_use() {
  while (in_use_.exchange(true)) std::this_thread::yield();  // a release on another thread
}

void StoragePool::end_use() {
  in_use_.store(false);
  while (release_asked_.load() && !in_use_.exchange(true)) {
    release_asked_.store(false);
    release_all();
    in_use_.store(false);
  }
}

void StoragePool::release_or_defer() {
  for (;;) {
    if (!in_use_.exchange(true)) {
      release_asked_.store(false);
      release_all();
      in_use_.store(false);
      return;
    }
    release_asked_.store(true);
    if (in_use_.load()) return;  // its end_use releases it
  }
}

}  // namespace detail

}  // namespace dtensor
