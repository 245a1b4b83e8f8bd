#include "dtensor/tensor/shape.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include "dtensor/tensor/error.h"

namespace dtensor {

int64_t shape_numel(IntSpan sizes, std::string_view op) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t s : sizes) {
    if (s == 0) return 0;
    overflow = overflow || !detail::checked_mul(n, s, &n);
  }
  DT_CHECK(!overflow,
           "[%s] shape %s has more elements than int64 can count (at most 2^63 - 1 = "
           "9223372036854775807)",
           op, shape_str(sizes));
  return n;
}

int64_t shape_nbytes(IntSpan sizes, size_t itemsize, std::string_view op) {
  int64_t bytes = 0;
  DT_CHECK(detail::checked_mul(shape_numel(sizes, op), static_cast<int64_t>(itemsize), &bytes),
           "[%s] shape %s of %d-byte elements needs more than 2^63 - 1 bytes", op, shape_str(sizes),
           itemsize);
  return bytes;
}

Shape contiguous_strides(IntSpan sizes) {
  Shape strides(sizes.size());
  int64_t acc = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = acc;
    if (i > 0 && sizes[i] > 1) {
      DT_CHECK(detail::checked_mul(acc, sizes[i], &acc),
               "[contiguous_strides] the strides of shape %s do not fit int64", shape_str(sizes));
    }
  }
  return strides;
}

void check_strides(IntSpan sizes, IntSpan strides, std::string_view op) {
  DT_CHECK(strides.size() == sizes.size(),
           "[%s] stride %s has %d entries for shape %s (expected one stride per dim)", op,
           shape_str(strides), strides.size(), shape_str(sizes));
  int64_t last = 0;
  for (size_t d = 0; d < sizes.size(); ++d) {
    DT_CHECK(strides[d] >= 0,
             "[%s] stride %d at dim %d is negative (strides %s; negative strides are not "
             "supported, as in PyTorch)",
             op, strides[d], d, shape_str(strides));
    int64_t span = 0;
    DT_CHECK(sizes[d] <= 0 || (detail::checked_mul(sizes[d] - 1, strides[d], &span) &&
                               detail::checked_add(last, span, &last)),
             "[%s] shape %s with strides %s reaches past offset 2^63 - 1", op, shape_str(sizes),
             shape_str(strides));
  }
}

int64_t normalize_dim(int64_t dim, int64_t ndim, std::string_view op) {
  const int64_t n = ndim > 0 ? ndim : 1;
  DT_CHECK(dim >= -n && dim < n, "[%s] dim %d out of range for a %d-d tensor (expected %d..%d)", op,
           dim, ndim, -n, n - 1);
  return dim < 0 ? dim + n : dim;
}

Shape broadcast_shapes(IntSpan a, IntSpan b, std::string_view op) {
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t sa = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t sb = i < n - b.size() ? 1 : b[i - (n - b.size())];
    DT_CHECK(sa == sb || sa == 1 || sb == 1,
             "[%s] shapes %s and %s cannot be broadcast together (dim %d: %d vs %d)", op,
             shape_str(a), shape_str(b), static_cast<int64_t>(i), sa, sb);
    out[i] = sa == 1 ? sb : sa;
  }
  return out;
}

std::string shape_str(IntSpan sizes) {
  return absl::StrCat("[", absl::StrJoin(sizes, ", "), "]");
}

Shape infer_view_shape(IntSpan shape, int64_t numel, IntSpan from, std::string_view op) {
  Shape out(shape.begin(), shape.end());
  int64_t infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      DT_CHECK(infer < 0, "[%s] shape %s has more than one -1", op, shape_str(shape));
      infer = static_cast<int64_t>(i);
    } else {
      DT_CHECK(out[i] >= 0, "[%s] shape %s has a negative size %d (only -1 is allowed)", op,
               shape_str(shape), out[i]);
      // A product that overflows cannot equal numel (a real tensor's count): report it so.
      DT_CHECK(detail::checked_mul(known, out[i], &known),
               "[%s] shape %s is invalid for a tensor of %d elements (shape %s): its product "
               "overflows int64",
               op, shape_str(shape), numel, shape_str(from));
    }
  }
  if (infer >= 0) {
    DT_CHECK(known != 0 && numel % known == 0,
             "[%s] shape %s is invalid for a tensor of %d elements (shape %s)", op,
             shape_str(shape), numel, shape_str(from));
    out[infer] = numel / known;
  } else {
    DT_CHECK(known == numel, "[%s] shape %s is invalid for a tensor of %d elements (shape %s)", op,
             shape_str(shape), numel, shape_str(from));
  }
  return out;
}

}  // namespace dtensor
