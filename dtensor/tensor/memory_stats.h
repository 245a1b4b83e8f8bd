// Current and peak bytes held by the CPU allocator (every CPU Storage::allocate), so that
// data-parallel memory savings (fully_shard) are measurable: memory_stats() before and after a
// step, or reset_peak_memory_stats() then peak_bytes after it. Counters are process-wide and
// atomic (any thread may allocate). The bytes are the allocator's (64-byte rounded) sizes;
// from_blob memory is the caller's and is not counted. CUDA memory is not counted here (the
// stream-ordered pool has its own statistics).
#pragma once

#include <cstdint>

namespace dtensor {

struct MemoryStats {
  int64_t current_bytes = 0;  // held now
  int64_t peak_bytes = 0;     // most held at once since start or the last reset
  int64_t allocations = 0;    // allocations since start or the last reset
  // Kept for reuse, not in current_bytes: freed large blocks, and the storages compiled steps
  // keep between replays (dtensor/compile/graph.h, the memory plan; freed with their step and by
  // empty_cpu_cache()).
  int64_t cached_bytes = 0;
};

MemoryStats memory_stats();
// Sets the peak to the current bytes and the allocation count to zero.
void reset_peak_memory_stats();

// What the meta tensors (device "meta", dtensor/tensor/device.h) would hold on the CPU: the same
// figures as memory_stats() (the allocator's rounded size of each meta Storage alive, its peak
// and allocation count; cached_bytes 0), so that a dry run reads the memory of a step whose
// tensors allocate nothing. memory_stats() never counts meta storage (it holds no memory).
MemoryStats meta_memory_stats();
void reset_peak_meta_memory_stats();

// Large-block cache. Fresh host memory costs a page fault per 4 KiB page on first touch (16 MB:
// ~4,000 faults, about as long as a 4-rank all-reduce of it here), and glibc returns large
// freed blocks to the OS (mmap'd blocks at once, the heap's top when it grows past a
// threshold), so a loop that allocates the same tensors every step (a redistribute's result,
// an optimizer's temporaries, the activations autograd keeps until backward) would pay them
// every time. Freed CPU blocks of at least 128 KiB (glibc's default mmap threshold) are
// therefore kept, per exact size, and handed out again to the next allocation of that size
// (as PyTorch's CUDA caching allocator does for device memory).
// At most DTENSOR_CPU_CACHE_MB MiB (read at first use; default 512; 0 turns the cache off) are
// kept per process (0 by default in AddressSanitizer builds, so that a use after free is still
// caught); a block freed beyond that goes back to the system. Thread-safe.
// Gives every cached block back to the system, and every compiled step's kept storages
// (memory_stats().cached_bytes becomes 0; a step replaying on another thread meanwhile gives its
// storages back when that replay ends).
void empty_cpu_cache();

}  // namespace dtensor
