// The halo exchange of spatially sharded window ops (convolutions, pools): a DTensor sharded
// along one dim on one mesh dim (torch.chunk layout) gives each rank a contiguous range of that
// dim's global rows, its own rows extended by its neighbours' edge rows, without gathering the
// tensor. Every rank's range is known to all (computed from global sizes), so each rank sends
// only the prefix / suffix of its shard that another rank's range reaches, in one all-gather of
// those edges over the mesh dim (2 h rows per rank for a conv of halo h; nothing when no range
// leaves its shard). Differentiable: the gradient of the edges is reduce-scattered back.
#pragma once

#include <cstdint>
#include <vector>

#include "dtensor/core/distributed_tensor.h"

namespace dtensor::detail {

// Every rank's shard of `size` rows along a dim split over `world` ranks (torch.chunk layout):
// rank q holds [start[q], start[q] + rows[q]).
struct ChunkLayout {
  std::vector<int64_t> start, rows;
};
ChunkLayout chunk_layout(int64_t size, int64_t world);

// The mesh dim on which x is sharded along `dim` when that is its only shard (Shard(dim) on one
// mesh dim, Replicate on the others, the layout halo_rows takes), else -1.
int64_t halo_mesh_dim(const DTensor& x, int64_t dim);

// Global rows [begin, end) of dim `dim` of x for this rank (range[r] for rank r at coordinate r
// of mesh dim m; every rank passes every rank's range, the same on all). Rows outside
// [0, x.size(dim)) are zeros (a convolution's padding). x is sharded Shard(dim) on mesh dim m
// (any other mesh dims Replicate). Returns a local DTensor whose gradient flows back to x: the
// own rows directly, the neighbours' through the exchange's reduce-scatter, so every rank must
// call it (also with an empty range: the exchange stays in every rank's graph).
struct RowRange {
  int64_t begin = 0, end = 0;
};
DTensor halo_rows(const DTensor& x, int64_t dim, int64_t m, const std::vector<RowRange>& range);

}  // namespace dtensor::detail
