// The graph of a captured step (dtensor/compile/compile.h): the step's values (the inputs the
// user passes, the tensors that outlive the step — parameters, optimizer states, constants —
// and those the step produces) and its nodes in the order they ran eagerly, each one primitive
// the runtime recorded (dtensor/tensor/detail/capture_hook.h): an op's local kernel with the
// sharding dispatch chose, a redistribute with its plan, an optimizer update, a gradient
// binding. Replaying runs the nodes' local computations in order on the replay's tensors: no
// propagation, no cache look-up, no autograd recording.
//
// Values are local tensors (this rank's shards). Replay is identical on every rank up to the
// shards, as the eager step was, so ranks issue the same collectives in the same order.
#pragma once

#include <absl/types/span.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/core/distributed_tensor.h"

namespace dtensor::detail {
class StoragePool;  // dtensor/tensor/detail/storage_pool.h
}  // namespace dtensor::detail

namespace dtensor::compiler {

using ValueId = int32_t;
inline constexpr ValueId kNoValue = -1;  // an absent optional tensor (e.g. no momentum buffer)

// A node's local computation: reads `inputs` (the replay's tensors where the captured ones
// stood), writes the inputs it mutates in place and sets each of `outputs`.
using ReplayFn = std::function<void(absl::Span<const Tensor> inputs, absl::Span<Tensor> outputs)>;

// What a value is in a training step (the founding design's NodeType), tagged after the capture
// (tag_roles): the step's inputs; parameters (written in place by an optimizer update as its
// parameter, or a parameter of CompileOptions::module); their gradients (bound as a leaf's .grad
// or read by an update as its gradient); optimizer state (other tensors an update writes);
// activations (every other value a node makes); constants (every other tensor from outside).
enum class Role : uint8_t { kInput, kParam, kGrad, kState, kActivation, kConstant };
std::string_view role_name(Role r);  // "input", "param", "grad", "state", "act", "const"

struct Value {
  enum class Kind : uint8_t {
    kInput,     // the step's argument `input_index` (its local tensor)
    kExternal,  // a tensor that existed before the node reading it: parameters, optimizer
                // states, constants; replay reads (and updates in place) this very tensor
    kProduced,  // made by node `producer`
  };
  Kind kind = Kind::kProduced;
  int32_t input_index = -1;
  int32_t producer = -1;
  Shape sizes;
  DType dtype = DType::kFloat32;
  int64_t nbytes = 0;
  Tensor external;  // kExternal only
  Role role = Role::kActivation;
};

struct Collective {
  std::string kind;  // "all_reduce", ...
  int64_t bytes = 0;
};

struct Node {
  std::string kind;    // "op", "redistribute", "optim", "grad"
  std::string name;    // "mm", "redistribute", "adamw_update", "accumulate"
  std::string detail;  // "S(0), R -> S(0)"
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  uint32_t mutated_inputs = 0;
  std::vector<Collective> collectives;  // what it issued when captured
  std::string move_src, move_dst;       // redistribute: the specs, as text
  bool move_src_partial = false;        // redistribute: the source has a Partial placement
  // Kind-specific: a redistribute's detail::CapturedMove; an op's first input DTensorSpec (its
  // mesh); null otherwise.
  std::shared_ptr<const void> payload;
  // The world ranks of the mesh it ran on, sorted: a rank outside an op's mesh skips the op, so
  // only these ranks record it (both meshes' for a cross-mesh move). Empty when not known (a
  // host step reading no value of a known mesh): taken to run on every rank. {-1}: this rank's
  // alone (a host step reading a placeholder of a mesh without this rank).
  std::vector<int> ranks;
  // Replay runs it on the communication thread and waits for it where a node first reads one of
  // its outputs (the scheduling pass sets it on moves).
  bool async = false;
  ReplayFn fn;
};

// What a graph costs and what its passes did.
struct GraphStats {
  int64_t nodes = 0;
  int64_t collectives = 0;  // issued by one replay
  int64_t collective_bytes = 0;
  int64_t deduplicated = 0;          // redistributes removed by the dedup pass
  int64_t buckets = 0;               // all-reduce buckets the bucketing pass made
  int64_t redundant_moves = 0;       // redistributes removed as undone by the next (or unread)
  int64_t peak_bytes_planned = 0;    // most bytes of produced values alive at once, with the plan
  int64_t peak_bytes_unplanned = 0;  // the same when every produced value lives to the end
};

// Where a profiled replay's time went (Graph::run; CompileOptions::profile).
struct ReplayProfile {
  double kernel_seconds = 0;  // inside the nodes' computations (Node::fn), nothing else
  // Giving up values at their last reader (their storages kept for reuse, or freed) and
  // releasing argument handles.
  double free_seconds = 0;
};

class ReplayPool;  // detail/replay_pool.h

// What a replay run by the CUDA-graph capture (detail/cuda_graph.h) changes (Graph::run): its
// allocations on this thread are `pool`'s (not the memory plan's; nothing is kept for later
// replays, dead values are dropped), and `observe` is called around each node's computation with
// its arguments (after: false before it runs, true once it ran).
struct RunHooks {
  dtensor::detail::StoragePool* pool = nullptr;
  std::function<void(size_t node, absl::Span<const Tensor> inputs, bool after)> observe;
};

class Graph {
 public:
  Graph();
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const std::vector<Value>& values() const { return values_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  // The values the step returned, with their specs (replay wraps them as DTensors).
  const std::vector<ValueId>& outputs() const { return outputs_; }
  const std::vector<std::shared_ptr<const DTensorSpec>>& output_specs() const {
    return output_specs_;
  }
  // The specs of the inputs at capture (the guard: a call must match them).
  const std::vector<std::shared_ptr<const DTensorSpec>>& input_specs() const {
    return input_specs_;
  }
  const std::vector<bool>& input_requires_grad() const { return input_requires_grad_; }
  const GraphStats& stats() const { return stats_; }
  // The bytes the memory plan keeps between replays for the next one to reuse (see plan_memory):
  // the arena of the static offset plan (CPU), and with exact-size reuse (other devices, or a
  // plan given up) of each size at most what the last replay needed at its start.
  // empty_cpu_cache() and the graph's destruction free them.
  int64_t kept_bytes() const;
  // The static offset plan (detail/replay_pool.h): its arena's bytes (0 before the first replay
  // has recorded it, or when given up), the most bytes of planned allocations alive at once in
  // the replay it was recorded from (what a perfect packing would need), and how many replays
  // deviated from their plan (each then recorded a new one).
  int64_t arena_bytes() const;
  int64_t planned_live_peak() const;
  int plan_deviations() const;

  // One line per node: "%7 = op mm(%3, %c1)  S(0), R -> S(0)", collectives after '|'.
  std::string str() const;

  // ---- editing (compiler::Override::transform); the memory plan is made after it ----------
  // The first node at or after `from` named `name`, or -1.
  int64_t find(std::string_view name, int64_t from = 0) const;
  Node& node(int64_t k);
  // New state a rewrite reads or updates: the tensor itself, kept by the graph.
  ValueId add_external(const Tensor& t);
  // A new value for a node's output (its local shape and dtype).
  ValueId add_value(IntSpan sizes, DType dtype);
  void insert(int64_t k, Node n);  // before node k (k = nodes().size(): at the end)
  void erase(int64_t k);
  // Throws "[compile] node 7 (op mm) reads %12 before any node makes it" (or a returned value
  // no node makes).
  void check() const;

  // Runs the nodes on `inputs` (checked by the caller against input_specs()). With `profile`,
  // adds the time spent inside the nodes' computations alone (Node::fn: kernels, collectives,
  // allocating their outputs) and, separately, in freeing the values they were the last to read
  // (the plan's drops and the release of handed-over argument handles): the rest of a replay is
  // the framework's own time (ReplayProfile).
  DTensorList run(const DTensorList& inputs, ReplayProfile* profile = nullptr,
                  const RunHooks* hooks = nullptr) const;

 private:
  friend class Builder;
  friend void dedup_collectives(Graph& g, absl::Span<const Tensor> captured);
  friend void remove_redundant_moves(Graph& g, absl::Span<const Tensor> captured);
  friend void plan_memory(Graph& g, bool enabled);
  friend void bucket_reductions(Graph& g, absl::Span<const Tensor> captured, int64_t bucket_bytes);
  friend void schedule_collectives(Graph& g, absl::Span<const Tensor> captured);
  friend void tag_roles(Graph& g, absl::Span<const Tensor> captured,
                        absl::Span<const Tensor> params);
  friend void release_kept_storages(const Graph& g);  // detail/replay_pool.h

  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> outputs_;
  std::vector<std::shared_ptr<const DTensorSpec>> output_specs_;
  std::vector<std::shared_ptr<const DTensorSpec>> input_specs_;
  std::vector<bool> input_requires_grad_;
  // free_after_[k]: produced values whose last reader is node k (the memory plan); last_read_[k]
  // bit i: node k's input i is such a value's last read, so replay hands the node the value
  // itself instead of a second handle (a node that checks whether it holds the only handle,
  // as gradient accumulation does, sees what the eager step saw).
  std::vector<std::vector<ValueId>> free_after_;
  std::vector<uint64_t> last_read_;
  // The memory plan is on: the storages of values that die go to pool_, which the replay's
  // allocations take them from, from replay to replay.
  bool reuse_storages_ = false;
  // Never null; a pointer so that the (internal, not installed) pool stays out of this header.
  std::unique_ptr<ReplayPool> pool_;
  bool has_async_ = false;             // a node is async (set by the scheduling pass)
  mutable std::vector<Tensor> slots_;  // run()'s value slots, kept from replay to replay

  // The walk run() follows, flattened from the nodes, the memory plan and the scheduling once
  // (rebuilt after an edit): per node, its computation and ranges into flat lists of slot
  // indices, so that a replay reads no Node (strings, vectors) and allocates nothing itself.
  struct Step {
    const ReplayFn* fn;
    // The inputs are the slots [in_first, +in_count) (read in place: no copy), or -1: the slots
    // walk_ids_[in_begin, +in_count), copied into args_ for the call.
    int32_t in_first;
    uint32_t in_begin, in_count;
    uint32_t free_begin, free_count;  // walk_ids_[...]: the values that die after it
    // The outputs are the slots [out_first, +out_count) (written in place), or -1: the slots
    // walk_ids_[out_begin, +out_count) (kNoValue: dropped), set from scratch_ after the call.
    int32_t out_first;
    uint32_t out_begin, out_count;
    uint64_t moves;  // gathered inputs: bit i, input i is its value's last read (handed over)
    bool async;
    bool fences;  // waits for every move in flight first (see run())
  };
  void prepare_walk() const;
  mutable bool walk_ready_ = false;
  mutable std::vector<Step> walk_;
  mutable std::vector<int32_t> walk_ids_;
  // The input values (value, input index), and every value that is not external (emptied at
  // the end of a replay): lists, so that a replay does not visit every Value.
  mutable std::vector<std::pair<int32_t, int32_t>> walk_inputs_;
  mutable std::vector<int32_t> walk_reset_;
  // The node arguments, reserved once to the widest node: copies of the input slots live here
  // for the node's call only (the kernels take a contiguous span of tensors).
  mutable std::vector<Tensor> args_, scratch_;
  // Per async node (indexed by node; empty for the others): the handles its task reads and the
  // outputs it writes, reused by every replay; pending_[v]: the flight making value v (-1: none).
  struct AsyncBuffers {
    std::vector<Tensor> held, outs;
  };
  mutable std::vector<AsyncBuffers> async_bufs_;
  mutable size_t async_count_ = 0;
  mutable std::vector<int32_t> pending_;
  GraphStats stats_;
};

// Passes (passes.cc). `captured[v]` is value v's tensor as captured (for storage aliasing).
// A redistribute of a value that an earlier node already moved the same way, with nothing
// written to that value (or memory it shares) in between and neither result written later,
// reuses the earlier result: a collective with the same inputs runs once.
void dedup_collectives(Graph& g, absl::Span<const Tensor> captured);
// Computes the values each node is the last reader of, so replay drops them there, and the
// peak bytes with and without that (GraphStats). A dropped value's storage, when nothing else
// references it, is kept by the graph and reused by the next allocation of its size during this
// or a later replay (ReplayPool; Graph::kept_bytes): CPU memory by a static offset plan in one
// arena recorded from the first replay, other devices by exact size, keeping of each size only
// what the last replay needed at its start. Disabled: nothing is dropped before the end, nothing
// is kept.
void plan_memory(Graph& g, bool enabled);
// A move of a value undone by the next move of its result (x -> y -> x, x not Partial: a gather
// then a chunk of the same layout) gives x back: the second is dropped and its readers read x;
// then a move whose result no node reads and the step does not return is dropped too.
void remove_redundant_moves(Graph& g, absl::Span<const Tensor> captured);
// Gradient bucketing: consecutive moves that are each one all-reduce over the same mesh dim
// (P -> R, same reduction, dtype and device) — the gradient reductions of data parallel — run as
// one all-reduce over a flat buffer of at most `bucket_bytes` (a single larger move alone). The
// gradient bookkeeping that reads a member's result (its .grad binding) moves after the bucket;
// any other reader, or a write to a member's input, closes the bucket first.
void bucket_reductions(Graph& g, absl::Span<const Tensor> captured, int64_t bucket_bytes);
// Sets each value's role (see Role); `params`: the parameters' local tensors when the module is
// known (CompileOptions::module), else empty (parameters are then the updates' first inputs).
void tag_roles(Graph& g, absl::Span<const Tensor> captured, absl::Span<const Tensor> params);
// Scheduling: each move (a redistribute or a bucket) is issued as early as its inputs are ready
// — hoisted to just after the last node that makes or writes them, never across another node
// that communicates or calls back into user code, so every rank keeps one collective order —
// and runs asynchronously (Node::async): replay waits for it just before the first node that
// reads its result, so the compute in between overlaps the communication.
void schedule_collectives(Graph& g, absl::Span<const Tensor> captured);
// Cross-rank agreement (agree.cc). Both compare words over the meshes of the step's DTensor
// inputs only — the same meshes on every rank, as the input guard holds each rank to its capture
// and SPMD steps pass the same layouts — in one canonical order (smaller meshes first, then by
// ranks), one small all-gather per mesh, so that no rank-local difference can send ranks to
// different communicators; no rank raises before it has joined every comparison.
//
// After a capture: each pair of ranks of each such mesh compares a hash of the nodes both
// recorded (those whose Node::ranks include both: sub-mesh ops included) and of the step's
// outputs (count and specs), each rank sending one (hash, count) per peer, and every rank
// raises "[compile] ..." naming the mesh and the first disagreeing pair.
void check_ranks_agree(const Graph& g, const DTensorList& inputs, const DTensorList& outputs);
// Before the guard decides, on every call that passes host scalars: the ranks compare the
// scalars' count and bits, so that every rank takes the same path (replay or re-capture), and
// raise "[compile] the step's host scalars differ between ranks ..." on every rank otherwise.
void check_scalars_agree(const DTensorList& inputs, const std::vector<double>& scalars);

}  // namespace dtensor::compiler
