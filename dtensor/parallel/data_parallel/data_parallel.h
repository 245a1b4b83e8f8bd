// Data parallelism over the "dp" dim of a mesh (DESIGN.md item 15): replicate (DDP),
// fully_shard (FSDP2) and data_parallel(style), composable with tensor parallelism on the
// other mesh dims.
//
// Model. Each rank runs the module on its own slice of the global batch. A parameter is stored
// as a DTensor on the whole mesh: on the dp dim Replicate (replicated parameters) or Shard(k)
// (sharded parameters: k is the first tensor dim no other mesh dim shards; uneven sizes exact,
// no padding visible), on the other dims the placements it had (tensor-parallel ones, or
// none on a 1-D dp mesh). These storage parameters are what module.parameters() returns, so
// optimizer states follow their placement and the step runs on shards.
// Forward: before a unit's forward (grouping.h) its parameters become compute parameters on
// the other mesh dims (a 1-D dp mesh: this process's self mesh, i.e. local tensors): a
// sharded parameter is all-gathered (one all_gather per unit), a replicated one is the same
// local tensor. After the unit's forward the module holds its storage parameters again, and
// with reshard_after_forward (default; never for the root unit, nor, once the forward order is
// known, for the unit that runs last, whose backward comes first) the gathered memory is freed
// and gathered again when the gradient of the unit's output arrives in backward.
// Backward: the gradient of a compute parameter is this rank's contribution, i.e. the
// parameter's gradient is Partial(avg) on dp (each rank's loss is the mean over its slice,
// so with equal slices the average is the gradient of the global-batch loss). Sharded
// parameters: one reduce_scatter(avg) per unit when the unit's gradients are complete
// (Partial(avg) -> Shard(k)). Replicated parameters: all_reduce(avg) in buckets of at most
// bucket_cap_bytes, formed over the parameters in reverse registration order and launched as
// soon as every parameter of the bucket has its gradient (Partial(avg) -> Replicate).
// Every reduction is waited on, and added into the storage parameters' grad(), at the end of
// the backward pass (autograd::queue_callback), so the optimizer step sees reduced gradients
// with the parameters' placements. A gradient set there is a view into its reduction's output
// (a unit's reduce-scatter output, a bucket's all-reduce buffer; FSDP2's views, DDP's
// gradient_as_bucket_view), not a copy. A bucket holding a parameter that received no gradient is
// reduced at the end with the gradients it has (every rank builds the same graph).
// Gradient accumulation: while requires_gradient_sync is false (NoSync), gradients are summed
// locally (unreduced) and folded into the next synchronised backward.
// Mixed precision: DataParallelOptions::param_dtype / reduce_dtype (FSDP2's
// MixedPrecisionPolicy, below; pinned by test_data_parallel_mpi).
// Limitations: a unit's sharded parameters share one dtype; backward with retain_graph
// through a resharded unit twice is not supported.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/nn/module.h"
#include "dtensor/parallel/data_parallel/grouping.h"

namespace dtensor {

// REPLICATE: every parameter replicated (gradients all-reduced in buckets). FULLY_SHARD: every
// parameter sharded (a parameter whose every dim another mesh dim already shards stays
// replicated). DEFAULT: a parameter is sharded on dim 0 when no other mesh dim shards dim 0 and
// its (tensor-parallel local) size along dim 0 divides evenly by the dp size, else replicated.
enum class DataParallelStyle { kReplicate, kFullyShard, kDefault };

struct DataParallelOptions {
  GroupingPolicy grouping;                      // units (used unless kReplicate)
  int64_t bucket_cap_bytes = 25 * 1024 * 1024;  // replicated gradients' buckets (DDP's 25 MB)
  bool reshard_after_forward = true;            // free gathered parameters after forward
                                                // (but the root's and the last unit's)
  // From the second step on, a unit's gather launches the next unit's all-gather (forward
  // order recorded in the first step; reversed in backward), overlapping it with this unit's
  // compute, at the cost of one more unit's parameters gathered at a time.
  bool prefetch = true;
  // Mixed precision (FSDP2's MixedPrecisionPolicy): the parameters are gathered, and forward
  // and backward compute, in param_dtype (e.g. bfloat16), while the stored shards, their .grad
  // and the optimizer keep the parameters' own dtype (the master copy); gradients are reduced
  // in reduce_dtype (default: param_dtype) and cast into .grad. Floating parameters only (the
  // others keep their dtype); unset: no casts.
  std::optional<DType> param_dtype;
  std::optional<DType> reduce_dtype;
  std::string dp_dim_name = "dp";  // the dp dim of a mesh with several dims
};

class DataParallel {
 public:
  struct State;
  explicit DataParallel(std::shared_ptr<State> state) : state_(std::move(state)) {}

  // no_sync: false accumulates gradients locally (no communication) until set back to true.
  void set_requires_gradient_sync(bool sync);
  bool requires_gradient_sync() const;
  // Drops the gradients summed under no_sync and not yet reduced, as if those backwards had not
  // run (.grad is left as it is). For a step that failed before the backward that would have
  // reduced them: a pipeline step raising on every rank after some microbatches' backwards.
  // Left, they would be added into the next step's reduced gradients.
  void discard_unsynced();
  const std::vector<Unit>& units() const;
  // The units, and which parameters are sharded (S(k)) or replicated (R) on dp.
  std::string grouping_str() const;
  int64_t num_buckets() const;
  int64_t num_sharded_params() const;
  // All-gathers launched ahead of their unit by prefetching, since construction.
  int64_t num_prefetched() const;

 private:
  std::shared_ptr<State> state_;
};

// Scoped requires_gradient_sync(false) (DDP's no_sync()).
class NoSync {
 public:
  explicit NoSync(DataParallel& dp) : dp_(dp), saved_(dp.requires_gradient_sync()) {
    dp_.set_requires_gradient_sync(false);
  }
  ~NoSync() { dp_.set_requires_gradient_sync(saved_); }
  NoSync(const NoSync&) = delete;
  NoSync& operator=(const NoSync&) = delete;

 private:
  DataParallel& dp_;
  bool saved_;
};

// Applies data parallelism to `module` in place over the dp dim of `mesh` (a 1-D mesh, or the
// dim named options.dp_dim_name). Each parameter must be on the mesh of the other dims
// (parallelize_module on mesh[{"tp"}] first) or local (unparallelized: then Replicate on the
// other dims, and its forward still runs on local tensors). Every rank of the mesh must call it
// with the same module structure.
std::shared_ptr<DataParallel> data_parallel(nn::Module& module, const DeviceMesh& mesh,
                                            DataParallelStyle style,
                                            DataParallelOptions options = {});
// data_parallel(.., kReplicate, ..) and data_parallel(.., kFullyShard, ..).
std::shared_ptr<DataParallel> replicate(nn::Module& module, const DeviceMesh& mesh,
                                        DataParallelOptions options = {});
std::shared_ptr<DataParallel> fully_shard(nn::Module& module, const DeviceMesh& mesh,
                                          DataParallelOptions options = {});

}  // namespace dtensor
