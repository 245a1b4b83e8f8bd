// The index family's shape helpers and scatter_reduce's reductions (index_ops.cc, index_cpu.cc),
// used by its kernels and registration and by embedding's (first_out_of_range): a cross-family
// helper, not installed.
#pragma once

#include "dtensor/ops/index/index.h"

namespace dtensor {

namespace detail {
// The reductions of scatter_reduce.
enum class ScatterReduceOp : uint8_t { kSum, kProd, kMean, kAmax, kAmin };
// Parses reduce ("sum", "prod", "mean", "amax", "amin"); raises "[op] reduce must be one of sum,
// prod, mean, amax, amin, got 'max'".
ScatterReduceOp parse_scatter_reduce(std::string_view reduce, std::string_view op);
// "sum", "prod", ...: a string literal (static storage, usable as an op's ArgValue).
std::string_view scatter_reduce_name(ScatterReduceOp op);
// The first element of an integer index tensor outside [0, size), if any (read on the host).
std::optional<int64_t> first_out_of_range(const Tensor& index, int64_t size);
// take_along_dim's operands broadcast on every dim but `dim` (normalised here): the shapes
// self and indices are expanded to, and dim. Checks ranks and broadcastability.
struct AlongDimShapes {
  Shape self, indices;
  int64_t dim;
};
AlongDimShapes take_along_dim_shapes(IntSpan self, IntSpan indices, int64_t dim);
// The index of index_select(self of `self_shape`, dim, index of `index_numel` elements),
// viewed with its elements along dim ([1, .., k, .., 1]), and the shape it expands to.
struct SelectShapes {
  Shape along, out;
  int64_t dim;
};
SelectShapes index_select_shapes(IntSpan self_shape, int64_t dim, int64_t index_numel);
// The same for index_add, checking the index's rank and that source's shape is `out`.
SelectShapes index_add_shapes(IntSpan self_shape, int64_t dim, IntSpan index_shape,
                              IntSpan source_shape);
}  // namespace detail

}  // namespace dtensor
