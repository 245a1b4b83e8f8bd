// Shapes, strides and the index arithmetic every layer shares, including the one chunking
// rule (torch.chunk) that sharding, tensor.chunk and redistribute all use.
#pragma once

#include <absl/container/inlined_vector.h>
#include <absl/types/span.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace dtensor {

// Sizes or strides of a tensor. Inline up to 6 dims: no heap allocation on the hot path.
using Shape = absl::InlinedVector<int64_t, 6>;
using IntSpan = absl::Span<const int64_t>;

// Size arithmetic is overflow-checked: a product or sum of sizes, strides or offsets that does
// not fit int64 raises dtensor::Error naming the shape (it would otherwise wrap, e.g. giving
// zeros({1 << 32, 1 << 32}) 0 elements, and index past the memory).

// Product of the sizes (1 for a 0-d shape; 0 when any size is 0, however large the others).
// Throws "[op] shape [...] has more elements than int64 can count (at most 2^63 - 1)".
int64_t shape_numel(IntSpan sizes, std::string_view op = "numel");
// shape_numel * itemsize, checked the same way: "[op] shape [...] of <itemsize>-byte elements
// needs more than 2^63 - 1 bytes".
int64_t shape_nbytes(IntSpan sizes, size_t itemsize, std::string_view op);

// Row-major strides for `sizes` (size-0 and size-1 dims count as 1). Throws like shape_numel
// when a stride does not fit.
Shape contiguous_strides(IntSpan sizes);

// Checks strides given by a caller (e.g. a global stride passed to from_local): one per size,
// none negative ("[op] stride -2 at dim 1 is negative ..."), and the furthest element offset,
// sum of (size - 1) * stride, fits int64. Negative strides are refused as in PyTorch, which
// has no negative-stride tensors.
void check_strides(IntSpan sizes, IntSpan strides, std::string_view op);

namespace detail {
// a * b / a + b into *out; false (and *out unspecified) when the result does not fit int64.
inline bool checked_mul(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}
inline bool checked_add(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}
}  // namespace detail

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
  // Written so that nothing overflows for any n (chunk * i is formed only when it is <= n).
  const int64_t chunk = k > 0 ? n / k + (n % k != 0 ? 1 : 0) : 0;
  const int64_t full = chunk > 0 ? n / chunk : 0;  // chunks that start inside [0, n]
  const int64_t begin = i <= full ? chunk * i : n;
  const int64_t end = i + 1 <= full ? chunk * (i + 1) : n;
  return {begin < n ? begin : n, end - (begin < n ? begin : n)};
}

}  // namespace dtensor
