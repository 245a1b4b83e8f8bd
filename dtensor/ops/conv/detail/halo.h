// The halo exchange of spatially sharded window ops (convolutions, pools): a DTensor sharded
// along one dim on one mesh dim (torch.chunk layout) gives each rank a contiguous range of that
// dim's global rows, its own rows extended by its neighbours' edge rows, without gathering the
// tensor. Every rank's range is known to all (computed from global sizes), so each rank sends
// another rank only the rows of its shard that rank's range reaches, point to point (PyTorch's
// tensor-parallel convolution): the two neighbours' (kernel - 1)-row edges for a conv, ranks
// further along only where shards are thinner than the halo; nothing when no range leaves its
// shard. Differentiable: each received piece's gradient is sent back to its owner, which adds
// it to its shard's gradient.
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
// own rows directly, the neighbours' through the exchange's backward, so every rank must call
// it (also with an empty range: the exchange stays in every rank's graph).
struct RowRange {
  int64_t begin = 0, end = 0;
};
DTensor halo_rows(const DTensor& x, int64_t dim, int64_t m, const std::vector<RowRange>& range);

// The order in which rank `rank` posts its point-to-point sends (to send_peers[i]) and receives
// (from recv_peers[i]) of one exchange: peer by peer in increasing rank, the lower rank of each
// pair sending first. A backend whose ungrouped sends and receives run in issue order (NCCL's,
// on one stream) would hang on two neighbours that both posted their receive first; with every
// rank following this order the pairs are served in one global order (lower rank, then higher),
// which cannot cycle. Each step: whether it is a send, and its index in send_peers / recv_peers.
struct PostStep {
  bool send;
  size_t index;
};
std::vector<PostStep> p2p_post_order(int64_t rank, const std::vector<int64_t>& send_peers,
                                     const std::vector<int64_t>& recv_peers);

}  // namespace dtensor::detail
