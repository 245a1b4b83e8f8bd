#include <atomic>
#include <cstdint>
#include <cstdlib>

#include "tensor/error.h"
#include "tensor/memory_stats.h"
#include "tensor/storage.h"

namespace dtensor {

namespace {
constexpr size_t kCpuAlignment = 64;
std::atomic<int64_t> g_current{0};
std::atomic<int64_t> g_peak{0};
std::atomic<int64_t> g_allocations{0};

void note_alloc(int64_t bytes) {
  const int64_t now = g_current.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  g_allocations.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

MemoryStats memory_stats() {
  return {g_current.load(std::memory_order_relaxed), g_peak.load(std::memory_order_relaxed),
          g_allocations.load(std::memory_order_relaxed)};
}

void reset_peak_memory_stats() {
  g_peak.store(g_current.load(std::memory_order_relaxed), std::memory_order_relaxed);
  g_allocations.store(0, std::memory_order_relaxed);
}

namespace detail {

size_t cpu_allocation_size(size_t nbytes) {
  // aligned_alloc needs a size that is a multiple of the alignment. Zero-byte requests get
  // one line too, so that every CPU storage has a valid, non-null base pointer.
  size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
  if (rounded == 0) rounded = kCpuAlignment;
  DT_CHECK(rounded >= nbytes, "[Storage::allocate] nbytes %d is too large", nbytes);
  return rounded;
}

void* cpu_allocate(size_t nbytes) {
  const size_t rounded = cpu_allocation_size(nbytes);
  void* p = std::aligned_alloc(kCpuAlignment, rounded);
  DT_CHECK(p != nullptr, "[Storage::allocate] out of host memory allocating %d bytes", nbytes);
  note_alloc(static_cast<int64_t>(rounded));
  return p;
}

void cpu_free(void* p, void* ctx) {
  // ctx carries the rounded size (Storage::allocate), for the statistics.
  if (p == nullptr) return;
  g_current.fetch_sub(static_cast<int64_t>(reinterpret_cast<uintptr_t>(ctx)),
                      std::memory_order_relaxed);
  std::free(p);
}

}  // namespace detail
}  // namespace dtensor
