// einsum's backward formula: another einsum per operand (registered in einsum_strategy.cc).
#include "dtensor/ops/matmul/detail/einsum_backward.h"

#include <absl/container/inlined_vector.h>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/matmul/detail/einsum.h"
#include "dtensor/ops/matmul/einsum.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/register_all.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {

namespace {

// g's letters -> operand i's, for the gradient of operand i of a resolved one- or two-operand
// equation (see the comments inside).
DTensor operand_grad(const EinsumEquation& e, absl::Span<const Shape> shapes, int64_t i,
                     const DTensor& g, const DTensor* other) {
  const std::string& li = e.inputs[i];
  const Shape& shape = shapes[i];
  std::string unique;
  Shape unique_shape;
  for (size_t d = 0; d < li.size(); ++d) {
    if (unique.find(li[d]) == std::string::npos) {
      unique += li[d];
      unique_shape.push_back(shape[d]);
    }
  }
  // The letters g and the other operand provide; those only in this operand (summed away by
  // the forward) are restored below.
  const std::string provided = e.output + (other != nullptr ? e.inputs[1 - i] : std::string());
  std::string kept;
  for (char c : unique) {
    if (provided.find(c) != std::string::npos) kept += c;
  }
  EinsumEquation ge;
  ge.inputs = {e.output};
  if (other != nullptr) ge.inputs.push_back(e.inputs[1 - i]);
  ge.output = kept;
  DTensor grad = other != nullptr ? einsum(ge.str(), {g, *other}) : einsum(ge.str(), {g});
  // Summed-away letters come back as size-1 dims; letters this operand broadcast (size 1
  // against a larger size) are summed back to size 1; then the size-1 dims are expanded to
  // this operand's sizes (summed-away letters, and letters the others hold with size 1).
  Shape broadcast;
  for (size_t k = 0; k < unique.size(); ++k) {
    if (kept.find(unique[k]) == std::string::npos) {
      grad = unsqueeze(grad, static_cast<int64_t>(k));
    } else if (unique_shape[k] == 1 && grad.size(static_cast<int64_t>(k)) != 1) {
      broadcast.push_back(static_cast<int64_t>(k));
    }
  }
  if (!broadcast.empty()) grad = sum(grad, broadcast, /*keepdim=*/true);
  if (grad.shape() != unique_shape) grad = expand(grad, unique_shape);
  if (unique.size() == li.size()) return grad;
  // Repeated letters: the gradient lives on the diagonal. Each repeat is renamed to a fresh
  // letter f and multiplied by an identity I[c, f]: for "iij", grad[i, f, j] = G[i, j] I[i, f].
  std::string used = e.output;
  for (const std::string& in : e.inputs) used += in;
  std::string target = li;
  EinsumEquation de;
  de.inputs = {unique};
  std::vector<DTensor> operands = {grad};
  char next = 'a';
  for (size_t d = 0; d < li.size(); ++d) {
    if (li.find(li[d]) == d) continue;
    auto is_free = [&](char c) { return used.find(c) == std::string::npos; };
    while (next != 0 && !is_free(next)) next = next == 'z' ? 'A' : next == 'Z' ? 0 : next + 1;
    DT_CHECK(next != 0, "[einsum] backward: no free letter left to rebuild the diagonal of '%s'",
             li);
    used += next;
    target[d] = next;
    de.inputs.push_back(std::string{li[d], next});
    const TensorOptions opts(g.dtype(), g.device());
    operands.push_back(DTensor::from_local(eye(shape[d], shape[d], opts), g.device_mesh(),
                                           Placements(g.device_mesh().ndim(), Replicate())));
  }
  de.output = target;
  return einsum(de.str(), operands);
}

}  // namespace

DTensorList einsum_backward(const autograd::BackwardContext& c, absl::Span<const DTensor> g) {
  std::vector<Shape> shapes;
  for (int64_t i = 0; i < c.num_inputs(); ++i) shapes.push_back(c.input_spec(i).shape());
  const EinsumEquation e = detail::parse_einsum("einsum", c.arg<std::string_view>(0), shapes);
  DTensorList out(c.num_inputs());
  for (int64_t i = 0; i < c.num_inputs(); ++i) {
    if (!c.needs_input_grad(i) || !g[0].defined()) continue;
    const DTensor* other = c.num_inputs() == 2 ? &c.input(1 - i) : nullptr;
    out[i] = operand_grad(e, shapes, i, g[0], other);
  }
  return out;
}

}  // namespace dtensor::detail
