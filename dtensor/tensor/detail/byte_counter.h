// Bytes held now, their peak and an allocation count: the bookkeeping behind memory_stats() (the
// CPU allocator) and meta_memory_stats() (meta storages). Process-wide, atomic, relaxed (any
// thread may allocate; the figures are statistics, not synchronisation).
#pragma once

#include <atomic>
#include <cstdint>

#include "dtensor/tensor/memory_stats.h"

namespace dtensor::detail {

class ByteCounter {
 public:
  void add(int64_t bytes) {
    const int64_t now = current_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    int64_t peak = peak_.load(std::memory_order_relaxed);
    while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
    allocations_.fetch_add(1, std::memory_order_relaxed);
  }
  void sub(int64_t bytes) { current_.fetch_sub(bytes, std::memory_order_relaxed); }
  MemoryStats stats(int64_t cached_bytes = 0) const {
    return {current_.load(std::memory_order_relaxed), peak_.load(std::memory_order_relaxed),
            allocations_.load(std::memory_order_relaxed), cached_bytes};
  }
  // The peak becomes the current bytes and the allocation count zero.
  void reset_peak() {
    peak_.store(current_.load(std::memory_order_relaxed), std::memory_order_relaxed);
    allocations_.store(0, std::memory_order_relaxed);
  }

 private:
  std::atomic<int64_t> current_{0};
  std::atomic<int64_t> peak_{0};
  std::atomic<int64_t> allocations_{0};
};

}  // namespace dtensor::detail
