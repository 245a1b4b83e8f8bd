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

}  // namespace dtensor
