#include "tensor/shape.h"

#include <absl/strings/str_join.h>

#include "tensor/error.h"

namespace dtensor {

int64_t shape_numel(IntSpan sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

Shape contiguous_strides(IntSpan sizes) {
  Shape strides(sizes.size());
  int64_t acc = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = acc;
    acc *= sizes[i] > 1 ? sizes[i] : 1;
  }
  return strides;
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
  return "[" + absl::StrJoin(sizes, ", ") + "]";
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
      known *= out[i];
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
