// Shapes, strides and the index arithmetic every layer shares, including the one chunking
// rule (torch.chunk) that sharding, tensor.chunk and redistribute all use.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include <absl/container/inlined_vector.h>
#include <absl/types/span.h>

namespace dtensor {

// Sizes or strides of a tensor. Inline up to 6 dims: no heap allocation on the hot path.
using Shape = absl::InlinedVector<int64_t, 6>;
using IntSpan = absl::Span<const int64_t>;

// Product of the sizes (1 for a 0-d shape).
int64_t shape_numel(IntSpan sizes);

// Row-major strides for `sizes`.
Shape contiguous_strides(IntSpan sizes);

// Maps a possibly negative dim into [0, ndim); throws "[op] dim d out of range for a n-d
// tensor (expected -n..n-1)". `ndim` 0 is treated as 1 (as PyTorch does for scalars).
int64_t normalize_dim(int64_t dim, int64_t ndim, std::string_view op);

// `shape` with its one -1 (if any) resolved against `numel` (view/reshape of a tensor of shape
// `from`); throws "[op] shape [2, -1] is invalid for a tensor of 7 elements (shape [7])",
// "[op] shape ... has more than one -1" or "... a negative size".
Shape infer_view_shape(IntSpan shape, int64_t numel, IntSpan from, std::string_view op);

// NumPy broadcasting of two shapes; throws naming `op` when they are incompatible.
Shape broadcast_shapes(IntSpan a, IntSpan b, std::string_view op);

// "[2, 3]"
std::string shape_str(IntSpan sizes);

// torch.chunk semantics: splitting `n` items into `k` chunks gives chunks of ceil(n / k)
// items; trailing chunks may be smaller or empty. E.g. n = 5, k = 4: sizes 2, 2, 1, 0.
// Returns chunk `i`'s (offset, size); the offset is clamped to n for empty chunks.
struct ChunkBounds {
  int64_t offset;
  int64_t size;
};
constexpr ChunkBounds chunk_bounds(int64_t n, int64_t k, int64_t i) {
  const int64_t chunk = k > 0 ? (n + k - 1) / k : 0;
  const int64_t begin = chunk * i < n ? chunk * i : n;
  const int64_t end = chunk * (i + 1) < n ? chunk * (i + 1) : n;
  return {begin, end - begin};
}

}  // namespace dtensor
