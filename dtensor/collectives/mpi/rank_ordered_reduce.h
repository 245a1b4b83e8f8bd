// Floating sums, averages and products over 3 or more ranks, reduced in rank order.
//
// MPI leaves the association of a reduction to the algorithm it picks, and Open MPI picks by
// message size: recursive doubling ((a0 + a1) + (a2 + a3)) for small messages, a segmented ring
// (each segment's sum starting at another rank) for large ones. The same element could then
// reduce to different bits depending on the size of the message it travels in: a gradient
// reduced alone differed in its last bit from the same gradient reduced inside a bucket
// (dtensor::compile's bucketing pass, data parallel's buckets), and P -> R by one all-reduce from
// P -> S -> R by a reduce-scatter and an all-gather. Here every element is reduced as
// ((x0 op x1) op x2) ... op x(n-1), x_r being rank r's value, whatever the message: the
// association depends on the rank count alone, so bucketing and the plan never change a bit.
// Two ranks need nothing (a0 + a1 == a1 + a0 exactly), nor do integers, max and min (exact in
// any order): they keep MPI's own reduction. One dtensor collective is then several MPI calls:
// an MPI error in one of them on one rank (the consistency check has already matched kinds,
// sizes and dtypes, so only a failing transport) leaves its peers in the next call until the
// collective deadline ends the job, as a blocking MPI call that fails on one rank does.
//
// All-reduce: when all the ranks' contributions together are at most kGatherAllBytes, every rank
// gathers every contribution (MPI_Allgather, one collective) and folds them; above, by segments
// of at most kSegmentBytes, a reduce-scatter by rank-ordered folds (MPI_Alltoallv: rank r
// receives everyone's chunk r of the segment, chunks as torch.chunk) and an all-gather of the
// folded chunks: the bytes a ring all-reduce moves, in two collectives per segment. Reduce-
// scatter: MPI_Alltoall of the blocks (by segments above kSegmentBytes) and the fold. The scratch
// these receive into stays under kSegmentBytes per thread whatever the message. Cost against
// MPI_Allreduce / MPI_Reduce_scatter_block: docs/PERFORMANCE.md, "Redistribute", P->R and
// P->S(0) (the Communicator column against raw MPI).
#pragma once

#include <mpi.h>

#include <cstdint>

#include "dtensor/collectives/communicator.h"

namespace dtensor::detail {

// Whether `op` over `dtype` on `world` ranks is reduced here (float32 and float64 sums,
// averages and products on 3 or more ranks; float16 / bfloat16 arrive widened to float32).
bool rank_ordered(DType dtype, ReduceOp op, int world);

// The largest all-reduce (bytes per rank times ranks) gathered whole before folding: 32 KB per
// rank on 4 ranks, where Open MPI's all-gather then beats its own all-reduce (measured on 2
// cores, 4 and 8 ranks); the receive and the fold grow with the rank count, hence the product.
inline constexpr int64_t kGatherAllBytes = 128 << 10;
// The most bytes of received rows one round of the large paths holds (a 25 MB bucket on 4
// ranks: 4 rounds).
inline constexpr int64_t kSegmentBytes = 8 << 20;

// `data` (count elements of dtype, on this rank) becomes the rank-ordered reduction over the
// ranks of `comm` in place (kAvg: the sum; the caller divides). Blocking; returns the first MPI
// error code (MPI_SUCCESS when none).
int rank_ordered_all_reduce(void* data, int count, DType dtype, ReduceOp op, MPI_Comm comm);

// recv (count elements) = the rank-ordered reduction of block `rank` (count elements) of every
// rank's send (world * count elements). Blocking; returns the first MPI error code.
int rank_ordered_reduce_scatter(const void* send, void* recv, int count, DType dtype, ReduceOp op,
                                MPI_Comm comm);

}  // namespace dtensor::detail
