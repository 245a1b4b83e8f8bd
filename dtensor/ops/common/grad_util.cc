#include "dtensor/ops/common/detail/grad_util.h"

#include <algorithm>

#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/view/view.h"

namespace dtensor::detail {

DTensor reduce_to(const DTensor& g, const DTensorSpec& spec) {
  const Shape& in = spec.shape();
  const int64_t lead = g.dim() - static_cast<int64_t>(in.size());
  // Dims the input has with size 1 (kept), then the leading dims it does not have (dropped):
  // two sums, so that the kept dims map one to one and keep their shards.
  Shape ones, leading;
  for (int64_t d = lead; d < g.dim(); ++d) {
    if (in[d - lead] == 1 && g.size(d) != 1) ones.push_back(d);
  }
  for (int64_t d = 0; d < lead; ++d) leading.push_back(d);
  DTensor out = g;
  if (!ones.empty()) out = sum(out, ones, /*keepdim=*/true);
  if (!leading.empty()) out = sum(out, leading, /*keepdim=*/false);
  return cast(out, spec.dtype());
}

DTensor unsqueeze_reduced(const DTensor& g, IntSpan dims, int64_t ndim) {
  Shape sorted;
  for (int64_t d : dims) sorted.push_back(normalize_dim(d, ndim, "backward"));
  if (dims.empty()) {
    for (int64_t d = 0; d < ndim; ++d) sorted.push_back(d);
  }
  std::sort(sorted.begin(), sorted.end());
  DTensor out = g;
  for (int64_t d : sorted) out = unsqueeze(out, d);
  return out;
}

DTensor equal_or_both_nan(const DTensor& x, const DTensor& value) {
  return logical_or(eq(x, value), logical_and(isnan(x), isnan(value)));
}

}  // namespace dtensor::detail
