#include <absl/container/flat_hash_map.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "dtensor/tensor/detail/byte_counter.h"
#include "dtensor/tensor/detail/storage_pool.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/memory_stats.h"
#include "dtensor/tensor/storage.h"

namespace dtensor {

namespace {
constexpr size_t kCpuAlignment = 64;
detail::ByteCounter g_bytes;  // memory_stats()
// The large-block cache (memory_stats.h): freed blocks per exact (rounded) size. Exact sizes
// keep Storage's size bookkeeping (ctx = the rounded request) true for a reused block, and a
// loop asks for the same sizes again.
// 128 KiB: glibc's default mmap threshold; smaller blocks come from its heap, warm already.
constexpr size_t kCacheMinBytes = size_t{128} << 10;
struct BlockCache {
  std::mutex mu;
  absl::flat_hash_map<size_t, std::vector<void*>> free_blocks;
  size_t bytes = 0;
  size_t limit = 0;
};
BlockCache& block_cache() {
  static BlockCache* cache = [] {
    auto* c = new BlockCache();  // never destroyed: blocks may be freed during static teardown
    // Under AddressSanitizer blocks go back at once, so that a use after free is still caught.
#if defined(__SANITIZE_ADDRESS__)
    size_t mb = 0;
#else
    size_t mb = 512;
#endif
    if (const char* env = std::getenv("DTENSOR_CPU_CACHE_MB"); env != nullptr && *env != '\0') {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(env, &end, 10);
      DT_CHECK(end != nullptr && *end == '\0',
               "[cpu allocator] DTENSOR_CPU_CACHE_MB='%s' is not a number of MiB (expected e.g. "
               "512, or 0 to turn the cache off)",
               env);
      mb = static_cast<size_t>(v);
    }
    c->limit = mb << 20;
    return c;
  }();
  return *cache;
}
}  // namespace

// The rounded bytes of CPU storages kept alive by compiled steps' replay pools
// (detail/storage_pool.h): cached, not current.
std::atomic<int64_t> g_kept{0};

MemoryStats memory_stats() {
  int64_t cached = g_kept.load(std::memory_order_relaxed);
  {
    BlockCache& c = block_cache();
    std::lock_guard<std::mutex> lock(c.mu);
    cached += static_cast<int64_t>(c.bytes);
  }
  return g_bytes.stats(cached);
}

void empty_cpu_cache() {
  // First the compiled steps' replay pools: their storages' large blocks land in the cache.
  detail::release_storage_pools();
  BlockCache& c = block_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  for (auto& [size, blocks] : c.free_blocks) {
    for (void* p : blocks) std::free(p);
  }
  c.free_blocks.clear();
  c.bytes = 0;
}

void reset_peak_memory_stats() {
  g_bytes.reset_peak();
}

namespace detail {

void note_storage_kept(const Storage& s) {
  if (!s.device().is_cpu()) return;  // memory_stats() counts CPU memory only
  const auto rounded = static_cast<int64_t>(cpu_allocation_size(s.nbytes()));
  g_bytes.sub(rounded);
  g_kept.fetch_add(rounded, std::memory_order_relaxed);
}

void note_storage_reused(const Storage& s) {
  if (!s.device().is_cpu()) return;
  const auto rounded = static_cast<int64_t>(cpu_allocation_size(s.nbytes()));
  g_kept.fetch_sub(rounded, std::memory_order_relaxed);
  g_bytes.add(rounded);
}

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
  if (rounded >= kCacheMinBytes) {
    BlockCache& c = block_cache();
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.free_blocks.find(rounded);
    if (it != c.free_blocks.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      c.bytes -= rounded;
      g_bytes.add(static_cast<int64_t>(rounded));
      return p;
    }
  }
  void* p = std::aligned_alloc(kCpuAlignment, rounded);
  DT_CHECK(p != nullptr, "[Storage::allocate] out of host memory allocating %d bytes", nbytes);
  g_bytes.add(static_cast<int64_t>(rounded));
  return p;
}

void cpu_free(void* p, void* ctx) {
  // ctx carries the rounded size (Storage::allocate), for the statistics.
  if (p == nullptr) return;
  const size_t rounded = static_cast<size_t>(reinterpret_cast<uintptr_t>(ctx));
  g_bytes.sub(static_cast<int64_t>(rounded));
  if (rounded >= kCacheMinBytes) {
    BlockCache& c = block_cache();
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.bytes + rounded <= c.limit) {
      c.free_blocks[rounded].push_back(p);
      c.bytes += rounded;
      return;
    }
  }
  std::free(p);
}

}  // namespace detail
}  // namespace dtensor
