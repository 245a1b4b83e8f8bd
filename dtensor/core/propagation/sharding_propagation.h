// Sharding propagation: from an OpSchema (op + input specs + static args) to the output specs
// and the input specs the op needs, chosen by cost among the strategy's candidates, cached.
//
// A strategy gives rows for ONE mesh dim ([outputs | inputs]); expand_to_full_mesh takes the
// cartesian product over mesh dims (the all-Replicate row always included, plus the Partial
// rows the op's Linearity allows), drops combinations that are invalid (a Shard dim out of
// range, a transition with no exact plan) and keeps the cheapest under the redistribute cost
// model (redistribute.h). The rule, chosen from measurements (docs/PERFORMANCE.md "Strategy
// choice"):
//   cost = sum over inputs of redistribute_cost(input spec, required spec)
//        + when an input is redistributed (or, for the growth alone, when an input arrived
//          Partial there): per mesh dim, the cost of the all-reduces that will
//          resolve the outputs left Partial there (P -> R on that mesh dim; the call made them
//          Partial, e.g. a sharded contraction of inputs it chunked), less those of the inputs
//          that arrived Partial there (pending anyway), never below 0;
//   ties: fewest inputs redistributed, then row order.
// A candidate that takes every input as it is costs 0 and is not charged for a Partial it
// created: Megatron's row-parallel linear and the vocab-parallel embedding keep their one
// all-reduce, whatever the sizes.
// So matmul(a, a^T) with a [S(0), R] on a 2x2 mesh gathers the small operand and returns
// [S(0), R] instead of chunking both replicated inputs on the second mesh dim and leaving an
// all-reduce of the output for later; rowwise-parallel linear still returns P(sum) (every
// alternative moves the input or the weight). Size-1 mesh dims cost nothing to relabel.
#pragma once

#include <absl/container/inlined_vector.h>
#include <absl/types/span.h>

#include <cstdint>
#include <memory>
#include <string>

#include "dtensor/core/dtensor_spec.h"
#include "dtensor/core/propagation/op_schema.h"

namespace dtensor {

// The result of propagation for one schema. Specs are shared so a cache hit wraps outputs
// without allocating specs.
struct OutputSharding {
  // One per output, with the TensorMeta from the op's meta function.
  absl::InlinedVector<std::shared_ptr<const DTensorSpec>, 1> outputs;
  // Empty when every input is used as is; otherwise one per input: the spec input i must be
  // redistributed to, or nullptr when input i already matches.
  absl::InlinedVector<std::shared_ptr<const DTensorSpec>, 3> required_inputs;
  double cost = 0;  // modelled redistribution cost of the inputs (microseconds)
  // This rank's local shape of each output (empty when the rank is outside the mesh): computed
  // once when propagate() caches the sharding, so dispatch checks every kernel's outputs
  // without redoing the shard math per call.
  absl::InlinedVector<Shape, 1> local_output_shapes;

  bool needs_redistribute() const { return !required_inputs.empty(); }
  // "[S(0)] <- ([S(0)], [R] -> [S(1)])": output placements, then each input's move.
  std::string str() const;
};

// One full-mesh candidate: placements per output, then per input.
struct PlacementStrategy {
  absl::InlinedVector<Placements, 3> placements;
};

// The per-mesh-dim row list after adding the rows `linearity` allows (Partial(sum) and
// Partial(avg)) and the all-Replicate row when absent. Throws "[op] ..." when a row does not
// have num_outputs + num_inputs placements.
StrategyRows complete_rows(std::string_view op, const StrategyRows& rows, int64_t num_outputs,
                           int64_t num_inputs, Linearity linearity);

// Cartesian product of `rows` over `mesh_ndim` mesh dims (mesh dim 0 outermost, rows in
// order), dropping combinations where a Shard dim is out of range for the tensor's rank
// (`ndims`: rank of each output, then of each input).
std::vector<PlacementStrategy> expand_rows(const StrategyRows& rows, int64_t mesh_ndim,
                                           absl::Span<const int64_t> ndims);

// Expands `rows` (after complete_rows with `linearity`) to the schema's mesh, costs every
// candidate against the schema's input specs and returns the cheapest as an OutputSharding
// with output specs built from `metas`. For `inplace`, only candidates that keep input 0 and
// give output 0 its placements are allowed; when none exists throws "[op] in-place op would
// change placements of argument self from [S(0)] to [R]".
OutputSharding expand_to_full_mesh(const OpSchema& schema, const StrategyRows& rows,
                                   absl::Span<const TensorMeta> metas, Linearity linearity,
                                   bool inplace = false);

// Runs the op's meta and strategy functions and expand_to_full_mesh, without the cache.
// Errors are rethrown with the schema appended: "[add] ... (schema: add(DTensorSpec(...)))".
OutputSharding propagate_uncached(const OpSchema& schema);

// Most entries the propagation cache holds. Inserting into a full cache first drops every
// entry (counted in PropagationCacheStats::evictions): a loop whose distinct schemas fit keeps
// hitting, and hits stay lock-shared and allocation-free (no recency bookkeeping as an LRU
// would need on every hit).
inline constexpr int64_t kPropagationCacheCapacity = 8192;

// Cached propagation, keyed on (op id, input spec hashes, static args). Thread-safe: hits take
// a shared lock only; a miss propagates outside the lock. The returned sharding stays valid
// while the caller holds it (even across clear_propagation_cache() or an eviction).
std::shared_ptr<const OutputSharding> propagate(const OpSchema& schema);

struct PropagationCacheStats {
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t entries = 0;
  int64_t evictions = 0;  // entries dropped because the cache was full
  int64_t capacity = kPropagationCacheCapacity;
};
// Process-wide counters since the last clear.
PropagationCacheStats propagation_cache_stats();
// Drops every cached entry and resets the counters.
void clear_propagation_cache();

}  // namespace dtensor
