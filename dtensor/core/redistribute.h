// Redistribute = plan (pure, cached) + execute (one collective per step).
//
// The planner turns (source spec, target spec) into ordered steps, one mesh dim each:
//   S -> R       all-gather                P -> R        all-reduce
//   P -> S       reduce-scatter            R -> S        local chunk (no communication)
//   S(i) -> S(j) all-to-all                R -> P        local: keep on coordinate 0 and zero
//                                                       elsewhere (sum), or keep (avg/max/min)
//   P(sum) <-> P(avg)  local rescale by the mesh-dim size
//   S -> P(sum|avg)    local: the shard is put at its place in a zero tensor of the unsharded
//                      size (scaled by the mesh-dim size for avg), no communication
// Several mesh dims that go to R the same way ([S(0), S(1)] -> [R, R], [P, P] -> [R, R]), or
// that all stay sharded while their blocks move ([S(0), S(0)] -> [S(1), S(1)],
// [S(0), S(1)] -> [S(1), S(0)]), may instead move in ONE collective over the communicator
// spanning them (a flattened step: an all-gather, an all-reduce or an all-to-all).
// A mesh dim of size 1 never moves data: every change of its placement is a relabel, no step
// and no collective (its one rank holds the whole piece whatever the placement says). It
// handles one tensor dim sharded over several mesh dims ([S(0), S(0)]) and uneven/empty shards
// (pad, collective, unpad), and orders steps by an alpha-beta cost model, preferring plans
// that never materialise more than the target needs.
// Copies: S(0) -> R returns the gather buffer itself (even or uneven); S(d > 0) -> R gathers
// into a staging buffer and makes one copy into the result; P -> R reduces out of place into a
// fresh result (in place when the input is an intermediate of the same plan); packing for
// reduce-scatter is one copy; an all-to-all on a backend that places regions itself
// (Communicator::supports_regions: MPI on CPU memory) sends each piece straight from the input
// to its place in the result, elsewhere packing and unpacking are one copy each (none for
// pieces that are already equal slabs of dim 0). The input is never modified. Host staging buffers
// are reused per thread (at most two, each at most 64 MiB, kept until the thread exits), since
// fresh host memory pays a page fault per page on first touch.
#pragma once

#include <absl/container/inlined_vector.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/core/dtensor_spec.h"

namespace dtensor {

// What one redistribute step does (the collective or local operation).
enum class StepKind : uint8_t {
  kAllGather,       // S -> R
  kAllReduce,       // P -> R
  kReduceScatter,   // P -> S
  kAllToAll,        // S(i) -> S(j)
  kLocalChunk,      // R -> S
  kPartition,       // R -> P
  kRescalePartial,  // P(sum) <-> P(avg)
  kShardToPartial,  // S -> P(sum|avg), local
};
std::string_view step_kind_name(StepKind k);  // "all_gather", ...

// One step of a plan: one mesh dim changes placement, by one collective or local operation;
// or, flattened, several mesh dims change by one collective.
struct RedistributeStep {
  int64_t mesh_dim;  // the mesh dim that changes (a flattened step: the first of flat_dims)
  Placement src;     // placement on mesh_dim before the step
  Placement dst;     // placement on mesh_dim after the step (a flattened step: flat_dst[0])
  StepKind kind;     // the collective (or local step) that makes the change
  double cost;       // modelled cost of this step (microseconds)
  // A flattened step runs ONE collective on DeviceMesh::flattened_communicator(flat_dims)
  // instead of one per dim: `flat_dims` ascending, at least two, each of size > 1, with their
  // placements before and after the step in `flat_src` and `flat_dst` (src == flat_src[0],
  // dst == flat_dst[0]). kAllGather: every one of these dims shards and goes to R;
  // kAllReduce: all hold the same Partial and go to R; kAllToAll: all shard before and after
  // (an exchange of blocks: each rank sends every other rank of the group the part of its
  // shard that rank holds afterwards). Empty for a one-dim step.
  absl::InlinedVector<int64_t, 4> flat_dims;
  Placements flat_src;
  Placements flat_dst;
  bool is_flattened() const { return !flat_dims.empty(); }
  // Same fields.
  bool operator==(const RedistributeStep&) const = default;
};

// The steps that turn one placement list into another, in execution order.
struct RedistributePlan {
  std::vector<RedistributeStep> steps;  // in order
  double cost = 0;                      // sum of the steps' costs
  // "[dim 1: S(0)->R all_gather (12.3 us), dims 0+1: [S(0), S(1)]->R all_gather (20 us),
  // dims 0+1: [S(0), S(0)]->[S(1), S(1)] all_to_all (15 us)]" (3 significant digits)
  std::string str() const;
};

// The alpha-beta model: a collective over n ranks moving B bytes per rank costs
// collective + alpha * ceil(log2 n) + beta * (bytes on the wire per rank), with the usual ring
// factors (all-gather and reduce-scatter (n-1)/n of the full buffer, all-reduce 2(n-1)/n,
// all-to-all (n-1)/n); local steps cost a small memory-traffic term only. The fixed
// `collective` term is what issuing one collective costs whatever its size and group (argument
// checks, the consistency check's exchange, the wait; ~10-25 us measured on small messages in
// docs/PERFORMANCE.md): it is why one collective over two flattened mesh dims beats one per dim
// even where the padding of uneven blocks makes it move a few more bytes.
struct CostModel {
  double collective_us = 5.0;         // fixed cost of one collective call
  double alpha_us = 5.0;              // per-message latency
  double beta_us_per_byte = 1.0e-4;   // inverse bandwidth (10 GB/s)
  double local_us_per_byte = 1.0e-5;  // local copies (chunk, pad, scale)
  // Same parameters.
  bool operator==(const CostModel&) const = default;
};
// The process-wide default model, by value (read under a lock, so a concurrent
// set_default_cost_model never tears it).
CostModel default_cost_model();
// Replaces the default model and clears the plan cache and the sharding-propagation cache
// (their choices were costed under the old model).
void set_default_cost_model(const CostModel& m);

// Pure planning on shapes alone under `model` (unit-testable without processes).
// Search: every mesh dim may hold its source placement, its target placement or R; each step
// changes one mesh dim, or moves several with one collective over their flattened
// communicator: to R (all sharded: one all-gather; all the same Partial: one all-reduce;
// integer P(avg) is not flattened, as one truncating division differs from two), or from
// Shard to their target Shard (one all-to-all, when no mesh dim outside the group shards any
// of the tensor dims the group shards, before or after, further in); a tensor dim sharded
// over several mesh dims is gathered innermost mesh dim first and split outermost first;
// Dijkstra under the cost model, costs taken at the largest shard (coordinate 0), ties (within
// rounding) broken by fewer steps then a fixed state order, so every rank computes the same
// plan: a flattened gather costs what the per-dim gathers cost in the model (the same bytes,
// one latency per log2 of the ranks) and wins the tie, a flattened all-reduce moves fewer
// bytes, a flattened all-to-all replaces a gather and a re-split (or one exchange per dim).
// Size-1 mesh dims take their target placement up front.
// Returns nullopt, with the reason in *why when given, for requests with no exact plan (a
// Partial op change other than sum <-> avg, e.g. P(max) -> P(sum); P(avg) -> P(sum) on an
// integer dtype); throws "[redistribute] ..." for malformed placements.
std::optional<RedistributePlan> find_redistribute_plan(IntSpan global_shape, DType dtype,
                                                       IntSpan mesh_shape, PlacementSpan src,
                                                       PlacementSpan dst, const CostModel& model,
                                                       std::string* why = nullptr);
// find_redistribute_plan that throws "[redistribute] no exact conversion ..." when no plan
// exists.
RedistributePlan plan_redistribute(IntSpan global_shape, DType dtype, IntSpan mesh_shape,
                                   PlacementSpan src, PlacementSpan dst, const CostModel& model);
// Cached per (src spec, dst spec) under the default model; also checks that both specs share
// the mesh and meta ("[redistribute] ... different meshes ..." otherwise) and throws when no
// exact plan exists. The cache holds at most kPlanCacheCapacity pairs: a miss that finds it
// full clears it first (counted in PlanCacheStats::evictions). The returned plan stays valid
// as long as the caller holds it, across clears.
inline constexpr int64_t kPlanCacheCapacity = 4096;
std::shared_ptr<const RedistributePlan> plan_redistribute(const DTensorSpec& src,
                                                          const DTensorSpec& dst);
// Modelled cost of moving from src to dst under the default model (0 when equal); used by
// sharding propagation. +infinity when no exact plan exists (never throws for that); throws
// for different meshes.
double redistribute_cost(const DTensorSpec& src, const DTensorSpec& dst);

// Plan cache counters (process-wide): lookups that found a plan, lookups that planned, the
// number of cached (src, dst) pairs, and how many times the full cache was cleared to make room.
struct PlanCacheStats {
  int64_t hits = 0;       // lookups that found a plan
  int64_t misses = 0;     // lookups that planned
  int64_t size = 0;       // cached (src, dst) pairs
  int64_t evictions = 0;  // pairs dropped by clearing a full cache
};
// The counters now.
PlanCacheStats redistribute_plan_cache_stats();
// Drops every cached plan and resets the counters.
void clear_redistribute_plan_cache();

// Executes the plan on this process's local shard: returns the local shard of `dst`.
// Ranks outside the mesh return an empty tensor and issue nothing. When the specs' meshes
// differ, this is redistribute_cross_mesh_local. `reuse_local`: the caller gives up `local`
// (it will not read it again); if nothing else holds its memory either (its Storage's
// sole_owner(), so `local` must be the only handle: e.g. a DTensor's own shard), the first step
// may write into it as it does into the plan's own intermediates (P -> R reduces it in place
// instead of into a fresh buffer), and the result may share that memory. Otherwise ignored.
Tensor redistribute_local(const Tensor& local, const DTensorSpec& src, const DTensorSpec& dst,
                          bool reuse_local = false);

// Cross-mesh redistribute (redistribute_cross_mesh.cc): `dst` on another mesh (any shape, any
// ranks — overlapping, a subset, disjoint — and either device type) with the same global meta.
// Every rank of EITHER mesh must call it at the same point with the same two specs (checked
// before any data moves: a rank asking for something else raises "[redistribute] the ranks of
// a cross-mesh redistribute disagree: rank 3 moves ... where rank 0 moves ..." on every rank);
// ranks in neither return an empty tensor and issue nothing. Partial on the source is reduced
// on the source mesh first; Partial on the target is made locally at the end. In between,
// every piece a target rank needs and does not already hold is sent to it once, point to point
// over the world MPI communicator (CUDA pieces staged through host memory), by one of the
// source ranks holding it (the target itself when it does: a local copy, so a CPU mesh and a
// CUDA mesh over the same ranks exchange nothing). Bit-exact: values are copied, never
// combined, except by the Partial reduction. Synchronous (async_op does not apply). For
// CommDebugMode the data messages are sends/receives under op "redistribute" and the
// agreement's small messages under "redistribute (agreement)".
Tensor redistribute_cross_mesh_local(const Tensor& local, const DTensorSpec& src,
                                     const DTensorSpec& dst);

}  // namespace dtensor
