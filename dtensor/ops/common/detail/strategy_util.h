// Helpers shared by the op families' registrations (strategies and meta functions).
#pragma once

#include <absl/types/span.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dtensor/core/propagation/op_schema.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// A tensor of `shape` whose strides are all zero over a single element: view ops applied to it
// infer output shapes and validate their arguments with the Tensor op's own error messages,
// without allocating the global size.
Tensor meta_tensor(IntSpan shape, DType dtype);

// Appends the all-Partial(max) and all-Partial(min) rows of `width` placements: pure data
// movement (views, cat, split) commutes with every reduce op, not only the linear ones.
void add_partial_passthrough_rows(StrategyRows& rows, int64_t width);

// Rows of a single-input, single-output data-movement op that keeps input dim d at output dim
// map[d] (-1: the dim is replicated first): [S(map[d]) | S(d)], plus the Partial pass-through
// rows (views, flip, roll, repeat, tril).
StrategyRows mapped_rows(absl::Span<const int64_t> map);

// One row of `width` placements all equal to `p`.
Placements uniform_row(int64_t width, Placement p);

// Rows of an op that needs dim `dim` whole and keeps every other dim of its `ndim`-dim
// tensors (outputs and inputs, `width` of them, all of one rank) sharded alike: S(d) on all,
// for each d != dim (softmax, split, cumsum, sort).
StrategyRows rows_all_but(int64_t ndim, int64_t dim, int64_t width);

// A sample input of `shape` and `dtype` whose elements are integers in [low, high].
SampleInput sample(Shape shape, DType dtype = DType::kFloat64, double low = -5, double high = 5);

// A dim size for samples that leaves the last rank of a mesh dim of `w` ranks an empty shard:
// w - 1 (torch.chunk: one element per rank but the last; 1 when w is 1). Every op's samples
// have a shardable dim of this size, so the suites that run every op run it on empty shards.
inline int64_t short_size(int64_t w) {
  return w > 1 ? w - 1 : 1;
}

// An OpInfo with its name, input names (used in error messages) and linearity set: the first
// lines of every registration; the caller adds meta, strategy, kernel, backward and samples.
OpInfo make_op(std::string_view name, std::vector<std::string> input_names,
               Linearity linearity = Linearity::kNone);

// The OpInfo of an op that only backward formulas call (embedding_backward, select_backward,
// ...): not differentiable itself (no double backward), saves nothing, linear in its first
// input (the gradient) by default. The caller adds meta, strategy, kernel, samples.
OpInfo gradient_op(const char* name, std::vector<std::string> input_names,
                   Linearity linearity = Linearity::kLinearInFirst);

// The broadcast shape of the schema's inputs `first`..`last` (NumPy rules); throws
// "[op] cannot broadcast shapes [2, 3] and [4] (argument other)".
Shape broadcast_inputs(const OpSchema& s, int64_t first = 0, int64_t last = -1);

}  // namespace dtensor::detail
