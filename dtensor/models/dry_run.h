// A dry run of one training step of a models::Llama layout (issue 46): what each mesh dim
// moves per step, the memory per rank by category and what planning costs, the figures a user
// needs before booking a cluster. Run it on the fake backend (DTENSOR_BACKEND=fake or
// init_fake_backend, dtensor/collectives/fake_communicator.h) to play one rank of a large world
// on this machine; run on MPI it reports the real rank's figures, and the two agree (collectives
// and bytes per mesh dim, allocator bytes per category: tests/models/test_dry_run*).
//
// The step: Llama(config) parallelized on the mesh as torchtitan does (dims pp, dp, cp, tp, any
// of them, in that order: TP plan on tp, ring attention on cp, fully_shard over dp x cp), AdamW
// over this rank's parameters, then forward on `batch` rows of `seq` deterministic token ids,
// causal_lm_loss, backward and optimizer step, twice (the second step is the one counted: its
// caches are warm, and AdamW's states exist, as in a long run). With a pp dim the model is cut
// by pipeline_llama into pp stages (2 per rank for Interleaved1F1B) and the forward and
// backward run in the schedule `schedule` over `microbatches` microbatches: the pp dim's
// traffic is the stages' sends and receives (a header and the shard per transfer). On the fake
// backend no peer sends, so each stage is given the input it expects (the residual stream
// [batch / microbatches, seq / cp, hidden] as the tensor-parallel plan lays it out) and takes
// its received activations to look like that (dtensor/parallel/pipeline/transfer.h).
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
  Shape mesh_shape;  // e.g. {4, 8, 4, 8}
  // One per mesh dim, any of "pp", "dp", "cp", "tp" (torchtitan's order pp x dp x cp x tp).
  std::vector<std::string> mesh_dim_names;
  int64_t batch = 1;  // rows per dp rank (with pp: a multiple of microbatches)
  int64_t seq = 128;  // with cp: a multiple of 2 * cp (the head-tail chunks)
  bool sequence_parallel = false;
  // With a pp dim: the schedule (pipelining::make_schedule's names: "GPipe", "1F1B",
  // "Interleaved1F1B") and its microbatches (0: 2 * pp).
  std::string schedule = "1F1B";
  int64_t microbatches = 0;
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
  bool meta = false;     // the step ran on meta tensors (memory from meta_memory_stats)
  std::string schedule;  // with a pp dim: the schedule run and its microbatches
  int64_t microbatches = 0;
  // communicator description ("mesh dim 1 (tp)") -> collective ("all_gather", "send") -> tally.
  // Point-to-point calls are counted as collectives are: the pp dim's stage transfers and the cp
  // ring's k/v (and, in backward, dk/dv) blocks appear as "send" and "recv" on their dims.
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
  // The checkpoint a save of the parameters and AdamW states would write
  // (checkpoint::plan_save, planned without data or files): this rank's bytes, the total, and
  // the rank files (-1 under the fake backend, which cannot know the other ranks'). Not planned
  // with a pp dim (-1 / 0): the ranks then hold different stages, which checkpoint::save refuses.
  int64_t checkpoint_bytes = 0;
  int64_t checkpoint_total_bytes = 0;
  int checkpoint_files = -1;
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
