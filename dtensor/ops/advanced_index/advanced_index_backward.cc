// Backward formulas of advanced indexing (registered in advanced_index_strategy.cc): index's
// gradient is an accumulating index_put into zeros; index_put's sends the gradient to self (with
// the written positions zeroed unless accumulate) and gathers the values' share with index.
#include "dtensor/ops/advanced_index/detail/advanced_index_backward.h"

#include <optional>
#include <vector>

#include "dtensor/autograd/function.h"
#include "dtensor/core/factories.h"
#include "dtensor/ops/advanced_index/advanced_index.h"
#include "dtensor/ops/common/detail/grad_util.h"

namespace dtensor::detail {

using autograd::BackwardContext;
using Grads = absl::Span<const DTensor>;

namespace {

// The list of optional DTensor indices of a recorded call (inputs from `first`).
std::vector<std::optional<DTensor>> recorded_indices(const BackwardContext& c, int64_t first) {
  const Shape& dims = c.arg<Shape>(0);
  std::vector<std::optional<DTensor>> out(static_cast<size_t>(dims.back() + 1));
  for (size_t j = 0; j < dims.size(); ++j) out[dims[j]] = c.input(first + static_cast<int64_t>(j));
  return out;
}

}  // namespace

DTensorList index_grad(const BackwardContext& c, Grads g) {
  DTensorList out(static_cast<size_t>(c.num_inputs()));
  if (!c.needs_input_grad(0) || !g[0].defined()) return out;
  const std::vector<std::optional<DTensor>> idx = recorded_indices(c, 1);
  out[0] = index_put(zeros_like(c.input_spec(0)), idx, g[0], /*accumulate=*/true);
  return out;
}

DTensorList index_put_grad(const BackwardContext& c, Grads g) {
  DTensorList out(static_cast<size_t>(c.num_inputs()));
  if (!g[0].defined()) return out;
  const bool accumulate = c.arg<bool>(1);
  const std::vector<std::optional<DTensor>> idx = recorded_indices(c, 2);
  if (c.needs_input_grad(0)) {
    if (accumulate) {
      out[0] = g[0];
    } else {
      const DeviceMesh& mesh = g[0].device_mesh();
      const Placements whole(static_cast<size_t>(mesh.ndim()), Replicate());
      out[0] = index_put(g[0], idx, zeros({}, mesh, whole, g[0].dtype()), false);
    }
  }
  if (c.needs_input_grad(1)) out[1] = detail::reduce_to(index(g[0], idx), c.input_spec(1));
  return out;
}

}  // namespace dtensor::detail
