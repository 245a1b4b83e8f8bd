// OffsetBasedRNGTracker: sharding-invariant random numbers for DTensors (PyTorch's name and idea).
//
// A random op on a DTensor of global shape G reserves words_to_reserve(spec, numel(G)) words on
// a generator (the same amount on every rank, computed from the GLOBAL numel) and each rank
// generates only its local shard: fill_random(local, spec, seed, offset, G, shard_offset), so
// element i of the global tensor uses the Philox words [offset + i W, offset + (i + 1) W) on
// whichever rank holds it. The sharded result therefore equals the same op on the full tensor
// bit for bit, on any mesh and placement list (Shard on any dim, nested [S(0), S(0)], uneven
// and empty shards; Replicate replicas hold identical values), and the generators of all ranks
// stay in step without any communication. Ranks outside the mesh advance the offset too (and
// hold empty local tensors), so a later op on another mesh still agrees across the world.
// docs/RNG.md, section "DTensor random ops".
#pragma once

#include <cstdint>
#include <string_view>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/core/dtensor_spec.h"
#include "dtensor/rng/distributions.h"
#include "dtensor/rng/generator.h"

namespace dtensor {

// What a random op on a DTensor generates on this rank.
struct RNGRegion {
  uint64_t seed = 0;    // the generator's seed
  uint64_t offset = 0;  // base offset of the op: global element i uses words offset + i * W
  LocalShard shard;     // this rank's block (all-zero shape outside the mesh)
};

class OffsetBasedRNGTracker {
 public:
  // gen == nullptr: draw from default_generator(device) of each op's local device (what the
  // DTensor random functions do by default, so manual_seed and RNGStateGuard apply). Otherwise
  // every op draws from `gen`, which must outlive the tracker and be in the same state on
  // every rank.
  explicit OffsetBasedRNGTracker(Generator* gen = nullptr) : gen_(gen) {}

  // The generator ops on `device` draw from.
  Generator& generator(Device device = Device()) const;
  uint64_t get_seed(Device device = Device()) const { return generator(device).seed(); }
  uint64_t get_offset(Device device = Device()) const { return generator(device).offset(); }
  void set_offset(uint64_t offset, Device device = Device()) {
    generator(device).set_offset(offset);
  }

  // The pre-op step: checks that `spec` has no Partial placement and that `rspec` is valid,
  // then reserves words_to_reserve(rspec, spec.numel()) words on generator(device) and returns
  // the op's (seed, offset) and this rank's shard. Local, no communication; on every rank that
  // calls it with the same spec (in the mesh or not) the generator advances identically.
  RNGRegion reserve(const DTensorSpec& spec, const RandomSpec& rspec, Device device,
                    std::string_view op);

  // reserve() on local.device(), then fills `local` (this rank's shard of `spec`, any strides;
  // dtype rspec.dtype) with its block of the random global tensor.
  void fill(const Tensor& local, const DTensorSpec& spec, const RandomSpec& rspec,
            std::string_view op);

  // Dropout of this rank's shard: reserves like RandomSpec::dropout_mask(spec.dtype(), p) and
  // runs dropout_block on the shard, so the keep mask of global element i depends only on i.
  // `mask` may be undefined (otherwise a bool tensor of the shard's shape).
  void dropout(const Tensor& input, const Tensor& out, const Tensor& mask, const DTensorSpec& spec,
               double p, std::string_view op);

 private:
  Generator* gen_;
};

// The tracker the DTensor random functions use when no generator is passed (default
// generators).
OffsetBasedRNGTracker& default_rng_tracker();

// Throws "[op] random ops on a Partial DTensor are not supported (placements [P(sum)]):
// redistribute to Replicate or Shard first" when `spec` has a Partial placement.
void check_random_placements(const DTensorSpec& spec, std::string_view op);

// Seeds every default generator (manual_seed(seed): CPU and CUDA, offsets reset to 0) after
// checking that every rank of `mesh` passed the same seed: one all_gather of the seed per mesh
// dim on mesh.communicator(d) (last dim first), after which every rank of the mesh holds all
// the mesh's seeds. On a mismatch every rank of the mesh throws the same error, e.g.
// "[manual_seed] ranks passed different seeds: rank 0: 1234, rank 1: 99" (world ranks in mesh
// order), and no generator is changed. Ranks outside the mesh communicate nothing (their seed
// is not checked) and seed their generators. Collective over the mesh.
void manual_seed(uint64_t seed, const DeviceMesh& mesh);

}  // namespace dtensor
