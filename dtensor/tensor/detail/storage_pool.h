// Storage::allocate's hooks (dtensor/tensor/storage.cc): a compiled step's capture notes every
// allocation (CaptureRecorder::note_allocation, dtensor/tensor/detail/capture_hook.h) and its
// replay hands out kept storages (StoragePool). Both are per thread, read with one access.
#pragma once

#include <cstddef>

#include "dtensor/tensor/storage.h"

namespace dtensor::detail {

class CaptureRecorder;

// Storages kept for reuse by a compiled step's replay (dtensor/compile/graph.cc): while a graph
// replays, Storage::allocate on the replaying thread first asks the graph's pool for a storage
// of exactly `nbytes` on `device` that nothing else references (a value that died at its last
// reader in this or an earlier replay), so a replay neither frees nor allocates the memory of
// the values it makes step after step (as PyTorch's CUDA graph pools keep theirs).
class StoragePool {
 public:
  virtual ~StoragePool() = default;
  // A storage nothing else references, or an undefined one when the pool has none that fits.
  virtual Storage take(size_t nbytes, Device device) = 0;
};
// A pool's storages count in memory_stats() as cached (as the CPU allocator's own large-block
// cache does: memory kept for reuse), not as held by tensors: a pool calls note_storage_kept when
// it takes a storage in and note_storage_reused when it hands it out again or lets it go.
void note_storage_kept(const Storage& s);
void note_storage_reused(const Storage& s);
// Installs `pool` for this thread (nullptr: none) and returns the one it replaces; a replay sets
// it for its walk only.
StoragePool* set_storage_pool(StoragePool* pool);

// What Storage::allocate consults: this thread's capture recorder (each allocation is reported
// to it) and pool. Null when neither is set, so that an eager allocation pays one call and one
// test, as it did for the recorder alone.
struct AllocationHooks {
  CaptureRecorder* recorder = nullptr;
  StoragePool* pool = nullptr;
};
const AllocationHooks* active_allocation_hooks();

}  // namespace dtensor::detail
