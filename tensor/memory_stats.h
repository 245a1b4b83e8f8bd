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
};

MemoryStats memory_stats();
// Sets the peak to the current bytes and the allocation count to zero.
void reset_peak_memory_stats();

}  // namespace dtensor
