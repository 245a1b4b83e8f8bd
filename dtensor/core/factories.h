// DTensor factories (torch.distributed.tensor.zeros, ones, empty, full, plus arange and eye):
// a new DTensor of global `shape` laid out as `placements` on `mesh`, its local tensor on the
// mesh's device. Each rank allocates and fills only its own shard from the shard's offset: no
// communication, and the values equal the single-device factory's on every layout (even,
// uneven and empty shards, several mesh dims on one tensor dim). Partial placements are
// refused (a fresh tensor has no pending reduction; use Replicate). A rank outside the mesh
// gets an empty local tensor. Random factories (rand, randn, rand_like, ...) are in
// rng/dtensor_random.h.
//
// Like the single-device factories, nothing is compared across ranks: every rank of the mesh
// must pass the same arguments.
#pragma once

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/tensor/creation.h"

namespace dtensor {

DTensor empty(IntSpan shape, const DeviceMesh& mesh, PlacementSpan placements,
              DType dtype = DType::kFloat32);
DTensor zeros(IntSpan shape, const DeviceMesh& mesh, PlacementSpan placements,
              DType dtype = DType::kFloat32);
DTensor ones(IntSpan shape, const DeviceMesh& mesh, PlacementSpan placements,
             DType dtype = DType::kFloat32);
DTensor full(IntSpan shape, const Scalar& value, const DeviceMesh& mesh, PlacementSpan placements,
             DType dtype = DType::kFloat32);
// The 1-D [start, end) with `step` (values start + i * step, as arange).
DTensor arange(double start, double end, double step, const DeviceMesh& mesh,
               PlacementSpan placements, DType dtype = DType::kInt64);
// The n x m identity (m = -1: m = n).
DTensor eye(int64_t n, int64_t m, const DeviceMesh& mesh, PlacementSpan placements,
            DType dtype = DType::kFloat32);

// Same global shape, dtype, mesh and placements as `like`, except that Partial placements
// become Replicate (the new values are not pending a reduction; as PyTorch's like-factories).
// zeros_like (distributed_tensor.h) keeps Partial: zero is a valid Partial value.
DTensor empty_like(const DTensor& like);
DTensor ones_like(const DTensor& like);
DTensor full_like(const DTensor& like, const Scalar& value);

// `like`'s placements with every Partial replaced by Replicate.
Placements without_partial(const DTensorSpec& like);

}  // namespace dtensor
