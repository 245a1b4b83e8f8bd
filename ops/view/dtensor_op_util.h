// Small helpers shared by the DTensor sides of the view, softmax, norm, embedding and loss
// families (internal).
#pragma once

#include <absl/types/span.h>

#include <cstdint>
#include <memory>
#include <string_view>

#include "dtensor/distributed_tensor.h"
#include "dtensor/propagation/op_schema.h"
#include "dtensor/propagation/sharding_propagation.h"
#include "tensor/tensor.h"

namespace dtensor::detail {

// The registered op `name`: ops_op() of ops/ops_registry.h. Until ops_registry.cc is part of
// the ops library (it is being wired by another owner), the reference to it is weak so the
// library still links, and a call throws "[name] the op registry ... is not built".
const OpInfo& family_op(std::string_view name);

// The sharding dispatch() will use for `op` on `inputs` (cached propagation). Checks first, as
// dispatch does, that every input is defined and that all live on one mesh. Kernels whose
// local arguments depend on the chosen placements (a view's local target shape, an embedding
// shard's row offset) call this before dispatch; the second lookup is a cache hit.
std::shared_ptr<const OutputSharding> sharding_for(const OpInfo& op,
                                                   absl::Span<const DTensor* const> inputs,
                                                   absl::Span<const ArgValue> args);

// A tensor of `shape` whose strides are all zero over a single element: view ops applied to it
// infer output shapes and validate their arguments with the Tensor op's own error messages,
// without allocating the global size.
Tensor meta_tensor(IntSpan shape, DType dtype);

// Appends the all-Partial(max) and all-Partial(min) rows of `width` placements: pure data
// movement (views, cat, split) commutes with every reduce op, not only the linear ones.
void add_partial_passthrough_rows(StrategyRows& rows, int64_t width);

// One row of `width` placements all equal to `p`.
Placements uniform_row(int64_t width, Placement p);

}  // namespace dtensor::detail
