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
// any order): they keep MPI's own reduction.
//
// All-reduce: up to kGatherAllBytes per rank, every rank gathers every contribution
// (MPI_Allgather, one collective) and folds them; above, a reduce-scatter by rank-ordered folds
// (MPI_Alltoallv: rank r receives everyone's chunk r, chunks as torch.chunk) and an
// MPI_Allgatherv of the reduced chunks: the bytes a ring all-reduce moves, in two collectives
// (docs/PERFORMANCE.md, "Rank-ordered reductions", measures both against MPI_Allreduce).
#pragma once

#include <mpi.h>

#include <cstdint>

#include "dtensor/collectives/communicator.h"

namespace dtensor::detail {

// Whether `op` over `dtype` on `world` ranks is reduced here (float32 and float64 sums,
// averages and products on 3 or more ranks; float16 / bfloat16 arrive widened to float32).
bool rank_ordered(DType dtype, ReduceOp op, int world);

// The largest message (bytes per rank) an all-reduce gathers whole before folding.
inline constexpr int64_t kGatherAllBytes = 32 << 10;

// `data` (count elements of dtype, on this rank) becomes the rank-ordered reduction over the
// ranks of `comm` in place (kAvg: the sum; the caller divides). Blocking; returns the first MPI
// error code (MPI_SUCCESS when none).
int rank_ordered_all_reduce(void* data, int count, DType dtype, ReduceOp op, MPI_Comm comm);

// recv (count elements) = the rank-ordered reduction of block `rank` (count elements) of every
// rank's send (world * count elements). Blocking; returns the first MPI error code.
int rank_ordered_reduce_scatter(const void* send, void* recv, int count, DType dtype, ReduceOp op,
                                MPI_Comm comm);

}  // namespace dtensor::detail
