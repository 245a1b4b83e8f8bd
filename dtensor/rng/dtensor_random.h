// Random ops on DTensors (PyTorch names, overloads of the local ops in dtensor/rng/random.h).
//
// Each op generates, on every rank, only its local shard, through an OffsetBasedRNGTracker
// (dtensor/rng/rng_tracker.h): `gen` when given, else default_rng_tracker() (the default generator
// of the local tensor's device). For one generator state the result equals the local op on the full
// tensor bit for bit, on any mesh and placement list, and every rank (in the mesh or not) advances
// the generator by the local op's amount for the GLOBAL numel, without communication. Ranks outside
// the mesh hold empty local tensors. DTensors with a Partial placement are refused: "[op] random
// ops on a Partial DTensor are not supported (placements [P(sum)]): redistribute to Replicate or
// Shard first". Dtypes as in rng/random.h.
#pragma once

#include <cstdint>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/core/factories.h"
#include "dtensor/rng/random.h"
#include "dtensor/rng/rng_tracker.h"

namespace dtensor {

// New DTensors of global `shape` laid out as `placements` on `mesh`; local tensors live on the
// mesh's device. Same values as rand/randn/randint/bernoulli(shape) on one device.
// Uniform on [0, 1).
DTensor rand(IntSpan shape, const DeviceMesh& mesh, PlacementSpan placements,
             DType dtype = DType::kFloat32, Generator* gen = nullptr);
// Standard normal.
DTensor randn(IntSpan shape, const DeviceMesh& mesh, PlacementSpan placements,
              DType dtype = DType::kFloat32, Generator* gen = nullptr);
// Integers uniform on [low, high).
DTensor randint(int64_t low, int64_t high, IntSpan shape, const DeviceMesh& mesh,
                PlacementSpan placements, DType dtype = DType::kInt64, Generator* gen = nullptr);
// 1 with probability p, else 0.
DTensor bernoulli(IntSpan shape, double p, const DeviceMesh& mesh, PlacementSpan placements,
                  DType dtype = DType::kFloat32, Generator* gen = nullptr);

// Same global shape, dtype, mesh and placements as `like` (Partial becomes Replicate, as the
// like-factories of dtensor/core/factories.h), values as rand/randn of that shape.
DTensor rand_like(const DTensor& like, Generator* gen = nullptr);
DTensor randn_like(const DTensor& like, Generator* gen = nullptr);

// In place on every rank's local shard; return `t` (which shares its storage).
DTensor uniform_(const DTensor& t, double low = 0.0, double high = 1.0, Generator* gen = nullptr);
DTensor normal_(const DTensor& t, double mean = 0.0, double stddev = 1.0, Generator* gen = nullptr);
DTensor bernoulli_(const DTensor& t, double p, Generator* gen = nullptr);
DTensor random_(const DTensor& t, int64_t low, int64_t high, Generator* gen = nullptr);

// Dropout: the keep mask of global element i depends only on i (and the generator state), so
// dropout of a sharded DTensor equals dropout of the full tensor. The result has the input's
// spec. train == false or p == 0 returns `input` and leaves the generator untouched (the
// Partial check still applies).
DTensor dropout(const DTensor& input, double p, bool train = true, Generator* gen = nullptr);

// Dropout that also returns the bool keep mask as a DTensor with the input's placements.
struct DTensorDropoutResult {
  DTensor output;  // the input with dropped elements zeroed and the rest scaled by 1 / (1 - p)
  DTensor mask;    // true where kept (bool)
};
// dropout that also returns the keep mask (same draws as dropout).
DTensorDropoutResult dropout_with_mask(const DTensor& input, double p, bool train = true,
                                       Generator* gen = nullptr);

}  // namespace dtensor
