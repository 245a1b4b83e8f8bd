// A dry run of one training step of a models::Llama layout (issue 46): what each mesh dim
// moves per step, the memory per rank by category and what planning costs, the figures a user
// needs before booking a cluster. Run it on the fake backend (DTENSOR_BACKEND=fake or
// init_fake_backend, dtensor/collectives/fake_communicator.h) to play one rank of a large world
// on this machine; run on MPI it reports the real rank's figures, and the two agree (collectives
// and bytes per mesh dim, allocator bytes per category: tests/models/test_dry_run*).
//
// The step: Llama(config), parallelize_llama on the mesh (tp and/or dp dims: TP plan, then
// fully_shard), AdamW over the parameters, then forward on `batch` rows of `seq` deterministic
// token ids, causal_lm_loss, backward and optimizer step, twice (the second step is the one
// counted: its caches are warm, and AdamW's states exist, as in a long run).
//
// By default tensors have storage and kernels run on this rank's shards: the memory is real and
// the time is one rank's compute. With `meta` (fake backend only) the model is built on the meta
// device (dtensor/tensor/device.h): parameters, activations, gradients and optimizer states
// have shapes but no data, every op runs its meta function and sharding propagation but no
// kernel, collectives are planned, counted and logged but move nothing, so a 70B-class model
// at 1,024 ranks runs here in seconds. Its memory figures are meta_memory_stats()'s (what the
// CPU allocator would hold, rounded alike); the real run's also hold kernels' internal
// temporaries, which meta tensors do not see.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dtensor/models/llama_config.h"
#include "dtensor/tensor/shape.h"

namespace dtensor::models {

struct DryRunOptions {
  LlamaConfig config;
  Shape mesh_shape;                         // e.g. {8, 4}
  std::vector<std::string> mesh_dim_names;  // "dp" and/or "tp", one per mesh dim
  int64_t batch = 1;                        // rows per dp rank
  int64_t seq = 128;
  bool sequence_parallel = false;
  // The model and its step on the meta device (no data, no kernels); refused unless the fake
  // backend runs (a real collective cannot move meta tensors).
  bool meta = false;
};

// Collectives of one kind on one mesh dim in the counted step.
struct CollectiveTally {
  int64_t count = 0;
  int64_t bytes = 0;  // bytes per rank, as DTENSOR_LOG=collectives reports each call
  bool operator==(const CollectiveTally&) const = default;
};

struct DryRunReport {
  int world_size = 1;
  int rank = 0;
  bool fake = false;
  bool meta = false;  // the step ran on meta tensors (memory from meta_memory_stats)
  // communicator description ("mesh dim 1 (tp)") -> collective ("all_gather") -> tally.
  std::map<std::string, std::map<std::string, CollectiveTally>> per_dim;
  // This rank's bytes: the tensors' own (numel x element size) for the first three; the CPU
  // allocator's (64-byte rounded, dtensor/tensor/memory_stats.h) for the last two (for a meta
  // run, meta_memory_stats(): what the allocator would hold, rounded alike).
  int64_t parameter_bytes = 0;   // local shards of the parameters
  int64_t gradient_bytes = 0;    // local shards of their gradients after backward
  int64_t optimizer_bytes = 0;   // AdamW's states (exp_avg, exp_avg_sq, step)
  int64_t activation_bytes = 0;  // the step's peak above its start: activations, gradients,
                                 // gathered FSDP parameters and temporaries
  int64_t peak_bytes = 0;        // the allocator's peak during the step
  // Planning: cache misses and time of the first step (cold caches) and the counted one.
  int64_t propagation_misses = 0;
  int64_t plan_misses = 0;
  double first_step_ms = 0;
  double step_ms = 0;
  // A printable report (tables per mesh dim, memory by category, planning).
  std::string table() const;
};

// Runs the dry run on this process's rank (collective over the world when it is real).
DryRunReport dry_run_llama_step(const DryRunOptions& options);

}  // namespace dtensor::models
