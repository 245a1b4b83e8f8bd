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
#include <string_view>
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

// What rows outside [0, size) hold: zeros, or (a convolution's padding_mode, pad's mode) the row
// reflected at the edge (without repeating it), the edge row, or the row wrapped around.
enum class HaloPad { kZeros, kReflect, kReplicate, kCircular };

// The global row that row i (any integer) reads under `pad`, -1 for a zero row; size > 0.
int64_t halo_source_row(int64_t i, int64_t size, HaloPad pad);

// Global rows [begin, end) of dim `dim` of x for this rank (range[r] for rank r at coordinate r
// of mesh dim m; every rank passes every rank's range, the same on all). Rows outside
// [0, x.size(dim)) are as `pad` says: zeros (a convolution's padding), or rows of x, which then
// come from whichever shard holds them (reflect: from inside the first / last shard; circular:
// the wrap-around neighbour; replicate: the edge row). x is sharded Shard(dim) on mesh dim m
// (any other mesh dims Replicate), x.size(dim) > 0 unless `pad` is zeros. Returns a local
// DTensor whose gradient flows back to x: the own rows directly, the others through the
// exchange's backward, so every rank must call it (also with an empty range: the exchange stays
// in every rank's graph).
struct RowRange {
  int64_t begin = 0, end = 0;
};
DTensor halo_rows(const DTensor& x, int64_t dim, int64_t m, const std::vector<RowRange>& range,
                  HaloPad pad = HaloPad::kZeros);

// conv{1,2,3}d of x padded along its spatial dims by `pads` (pad's order: the last dim's
// (left, right) first) in `mode` ("reflect", "replicate" or "circular"; nn::ConvNd's
// padding_mode), zero convolution padding: through the halo exchange with that mode when x is
// height-sharded where a zeros-padded convolution would take it (stride 1 along the height, an
// output as high as the input, replicated weight and bias), so the height is not gathered; else
// undefined (pad, then convolve). On that path a padding the mode refuses for the global shape
// (pad's rule, any spatial dim) raises "[conv<N>d padding_mode='<mode>'] ..." on every rank,
// before any local work or communication.
DTensor halo_padded_convolution(const DTensor& x, const DTensor& weight, const DTensor& bias,
                                IntSpan pads, std::string_view mode, IntSpan stride,
                                IntSpan dilation, int64_t groups);

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
