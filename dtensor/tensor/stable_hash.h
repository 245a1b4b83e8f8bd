// A hash that is the same in every process (FNV-1a over bytes), for values ranks compare with
// each other; absl::Hash is seeded per process and cannot be compared across ranks.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dtensor {

inline constexpr uint64_t kStableHashSeed = 1469598103934665603ull;

inline uint64_t stable_hash(const void* data, size_t nbytes, uint64_t hash = kStableHashSeed) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < nbytes; ++i) hash = (hash ^ p[i]) * 1099511628211ull;
  return hash;
}

}  // namespace dtensor
