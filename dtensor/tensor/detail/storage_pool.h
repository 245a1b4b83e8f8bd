// Storage::allocate's hooks (dtensor/tensor/storage.cc): a compiled step's capture notes every
// allocation (CaptureRecorder::note_allocation, dtensor/tensor/detail/capture_hook.h) and its
// replay hands out kept storages (StoragePool). Both are per thread, read with one access.
#pragma once

#include <atomic>
#include <cstddef>

#include "dtensor/tensor/storage.h"

namespace dtensor::detail {

class CaptureRecorder;

// Storages kept for reuse by a compiled step's replay (dtensor/compile/graph.cc): while a graph
// replays, Storage::allocate on the replaying thread first asks the graph's pool for `nbytes` on
// `device`: its slot in the graph's planned arena (dtensor/compile/replay_pool.cc), or, where
// there is no plan, a kept storage of exactly that size that nothing else references (a value
// that died at its last reader in this or an earlier replay). So a replay neither frees nor
// allocates the memory of the values it makes step after step (as PyTorch's CUDA graph pools
// keep theirs).
//
// empty_cpu_cache() releases every pool (release_storage_pools): a pool registers itself for its
// lifetime (register_storage_pool in its constructor, unregister_storage_pool first thing in its
// destructor, so that no release reaches a half-destroyed pool). The thread using a pool brackets
// that use with begin_use/end_use; a release asked for meanwhile (by another thread, or by code
// the replay runs) is not done under it but by end_use, so that nothing empties a pool while
// its replay takes from it.
class StoragePool {
 public:
  virtual ~StoragePool() = default;
  // A storage nothing else references, or an undefined one when the pool has none that fits.
  virtual Storage take(size_t nbytes, Device device) = 0;
  // The replaying thread's use: begin_use waits while another thread releases the pool;
  // end_use does a release asked for during the use.
  void begin_use();
  void end_use();

 protected:
  // Frees every kept storage; called with the pool not in use.
  virtual void release_all() = 0;

 private:
  friend void release_storage_pools();
  // Releases the pool now, or (in use) leaves the release to end_use.
  void release_or_defer();
  std::atomic<bool> in_use_{false}, release_asked_{false};
};
// Memory a pool hands out of a block of its own (a slot of a compiled step's arena,
// dtensor/compile/detail/replay_pool.h): the pool makes the Storage with Storage::from_blob,
// deleter pooled_free and ctx a PooledMemory, and Storage treats it as memory the library allocated
// (sole_owner may be true, release_data may free it). pooled_free gives the slot back
// (give_back(data), on whichever thread drops the last reference); release_data does so and
// makes the storage's next memory (reallocate_data) the allocator's.
class PooledMemory {
 public:
  virtual void give_back(void* data) = 0;

 protected:
  ~PooledMemory() = default;
};
void pooled_free(void* data, void* ctx);

// A pool's storages count in memory_stats() as cached (as the CPU allocator's own large-block
// cache does: memory kept for reuse), not as held by tensors: a pool calls note_storage_kept when
// it takes a storage in and note_storage_reused when it hands it out again or lets it go.
void note_storage_kept(const Storage& s);
void note_storage_reused(const Storage& s);
// Installs `pool` for this thread (nullptr: none) and returns the one it replaces; a replay sets
// it for its walk only.
StoragePool* set_storage_pool(StoragePool* pool);
// The live pools (thread-safe); release_storage_pools releases each (empty_cpu_cache()): at
// once when it is not in use, else when its use ends.
void register_storage_pool(StoragePool* pool);
void unregister_storage_pool(StoragePool* pool);
void release_storage_pools();

// What Storage::allocate consults: this thread's capture recorder (each allocation is reported
// to it) and pool, read inline from the thread's hooks (capture_hook.h), one test when neither
// is set.
struct AllocationHooks {
  CaptureRecorder* recorder = nullptr;
  StoragePool* pool = nullptr;
};

}  // namespace dtensor::detail
