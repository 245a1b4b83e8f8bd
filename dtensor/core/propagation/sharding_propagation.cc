#include "dtensor/core/propagation/sharding_propagation.h"

#include <absl/container/flat_hash_map.h>
#include <absl/hash/hash.h>
#include <absl/strings/str_cat.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <mutex>
#include <shared_mutex>

#include "dtensor/core/detail/log.h"
#include "dtensor/core/redistribute.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

constexpr ReduceOp kLinearPartialOps[] = {ReduceOp::kSum, ReduceOp::kAvg};

// The reduction a candidate leaves for later: an output that is Partial on a mesh dim where no
// input arrived Partial was made Partial by this call (a sharded contraction, or an input
// converted to Partial for it), and someone will pay to reduce it. Charging the all-reduce
// (P -> R on that mesh dim, the cost model's price) to candidates that move inputs keeps the
// engine from preferring "chunk two replicated inputs and leave an all-reduce for later" over
// a strategy that needs no reduction at all. A Partial the caller's inputs already carried
// was pending anyway: on such a mesh dim only the growth is charged, the outputs' reduction
// less the Partial inputs' (issue 46). Without that, a tp backward's weight-gradient
// mm(grad P [H, T], x S(1) [T, F]) kept its P [H, F] output for free and reduce-scattered a
// whole weight gradient instead of all-reducing the [T, H] activation gradient.
double deferred_reduction_cost(const OpSchema& schema, const PlacementStrategy& c,
                               absl::Span<const TensorMeta> metas, int64_t nout, bool moved) {
  const DeviceMesh& mesh = schema.mesh();
  const auto reduce_cost = [&](const Placements& p, const TensorMeta& meta, int64_t m) {
    Placements reduced = p;
    reduced[m] = Replicate();
    return redistribute_cost(DTensorSpec(mesh, p, meta, schema.name()),
                             DTensorSpec(mesh, std::move(reduced), meta, schema.name()));
  };
  double cost = 0;
  for (int64_t m = 0; m < mesh.ndim(); ++m) {
    double pending = 0;
    for (int64_t i = 0; i < schema.num_inputs(); ++i) {
      const DTensorSpec& in = schema.input(i);
      if (in.placement(m).is_partial()) pending += reduce_cost(in.placements(), in.meta(), m);
    }
    if (pending == 0 && !moved) continue;
    double deferred = 0;
    for (int64_t o = 0; o < nout; ++o) {
      if (c.placements[o][m].is_partial()) deferred += reduce_cost(c.placements[o], metas[o], m);
    }
    cost += std::max(0.0, deferred - pending);
  }
  return cost;
}

bool row_in_range(const Placements& row, absl::Span<const int64_t> ndims) {
  for (size_t t = 0; t < row.size(); ++t) {
    if (row[t].is_shard() && (row[t].dim() < 0 || row[t].dim() >= ndims[t])) return false;
  }
  return true;
}

// An op whose output shape depends on the data takes that shape from its local result, which
// is the whole output only when the output is Replicate on every mesh dim (OpInfo::
// data_dependent_shape): a row with a sharded or Partial output is a registration bug.
void check_replicate_outputs(const OpSchema& schema, const StrategyRows& rows, size_t nout) {
  for (const Placements& row : rows) {
    for (size_t o = 0; o < nout && o < row.size(); ++o) {
      DT_CHECK(row[o].is_replicate(),
               "[%s] the op's output shape depends on the data, so its outputs must be "
               "Replicate; strategy row %s gives output %d %s",
               schema.name(), placements_str(row), o, row[o].str());
    }
  }
}

}  // namespace

std::string OutputSharding::str() const {
  std::string s;
  for (size_t o = 0; o < outputs.size(); ++o) {
    absl::StrAppend(&s, o ? ", " : "", placements_str(outputs[o]->placements()));
  }
  absl::StrAppend(&s, " <- (");
  for (size_t i = 0; i < required_inputs.size(); ++i) {
    absl::StrAppend(&s, i ? ", " : "",
                    required_inputs[i] ? placements_str(required_inputs[i]->placements())
                                       : std::string("as is"));
  }
  absl::StrAppend(&s, required_inputs.empty() ? "no redistribution)" : ")");
  return s;
}

StrategyRows complete_rows(std::string_view op, const StrategyRows& rows, int64_t num_outputs,
                           int64_t num_inputs, Linearity linearity) {
  const size_t width = static_cast<size_t>(num_outputs + num_inputs);
  StrategyRows out;
  out.reserve(rows.size() + 2 * (num_inputs + 1) + 1);
  auto add_unique = [&](Placements row) {
    if (std::find(out.begin(), out.end(), row) == out.end()) out.push_back(std::move(row));
  };
  for (const Placements& row : rows) {
    DT_CHECK(row.size() == width,
             "[%s] strategy row %s has %d placements, expected %d (%d outputs + %d inputs)", op,
             placements_str(row), row.size(), width, num_outputs, num_inputs);
    add_unique(row);
  }
  for (ReduceOp rop : kLinearPartialOps) {
    const Placement p = Partial(rop);
    switch (linearity) {
      case Linearity::kNone:
        break;
      case Linearity::kLinear:
        add_unique(Placements(width, p));
        break;
      case Linearity::kMultilinear:
        for (int64_t i = 0; i < num_inputs; ++i) {
          Placements row(width, Replicate());
          std::fill(row.begin(), row.begin() + num_outputs, p);
          row[num_outputs + i] = p;
          add_unique(std::move(row));
        }
        break;
      case Linearity::kLinearInFirst:
        if (num_inputs > 0) {
          Placements row(width, Replicate());
          std::fill(row.begin(), row.begin() + num_outputs, p);
          row[num_outputs] = p;
          add_unique(std::move(row));
        }
        break;
    }
  }
  add_unique(Placements(width, Replicate()));
  return out;
}

std::vector<PlacementStrategy> expand_rows(const StrategyRows& rows, int64_t mesh_ndim,
                                           absl::Span<const int64_t> ndims) {
  StrategyRows valid;
  for (const Placements& row : rows) {
    if (row.size() == ndims.size() && row_in_range(row, ndims)) valid.push_back(row);
  }
  std::vector<PlacementStrategy> out;
  if (valid.empty() || mesh_ndim <= 0) return out;
  const size_t width = ndims.size();
  absl::InlinedVector<size_t, 4> idx(mesh_ndim, 0);  // odometer, last mesh dim fastest
  while (true) {
    PlacementStrategy c;
    c.placements.resize(width);
    for (size_t t = 0; t < width; ++t) {
      c.placements[t].resize(mesh_ndim);
      for (int64_t m = 0; m < mesh_ndim; ++m) c.placements[t][m] = valid[idx[m]][t];
    }
    out.push_back(std::move(c));
    int64_t m = mesh_ndim - 1;
    while (m >= 0 && ++idx[m] == valid.size()) idx[m--] = 0;
    if (m < 0) break;
  }
  return out;
}

OutputSharding expand_to_full_mesh(const OpSchema& schema, const StrategyRows& rows,
                                   absl::Span<const TensorMeta> metas, Linearity linearity,
                                   bool inplace) {
  const std::string_view op = schema.name();
  const int64_t nout = static_cast<int64_t>(metas.size());
  const int64_t nin = schema.num_inputs();
  DT_CHECK(nout >= 1, "[%s] the meta function returned no outputs", op);
  DT_CHECK(nin >= 1, "[%s] needs at least one DTensor input", op);
  const DeviceMesh& mesh = schema.mesh();

  const StrategyRows full = complete_rows(op, rows, nout, nin, linearity);
  absl::InlinedVector<int64_t, 4> ndims;
  for (const TensorMeta& m : metas) ndims.push_back(static_cast<int64_t>(m.shape.size()));
  for (int64_t i = 0; i < nin; ++i) ndims.push_back(schema.input(i).ndim());
  const std::vector<PlacementStrategy> candidates = expand_rows(full, mesh.ndim(), ndims);

  struct Choice {
    int64_t index = -1;
    double cost = std::numeric_limits<double>::infinity();
    int64_t moved = 0;
    bool better(double c, int64_t mv) const {
      return index < 0 || c < cost || (c == cost && mv < moved);
    }
  };
  Choice best, best_inplace;
  for (size_t k = 0; k < candidates.size(); ++k) {
    const PlacementStrategy& c = candidates[k];
    double cost = 0;
    int64_t moved = 0;
    for (int64_t i = 0; i < nin && std::isfinite(cost); ++i) {
      const Placements& want = c.placements[nout + i];
      const DTensorSpec& have = schema.input(i);
      if (want == have.placements()) continue;
      cost += redistribute_cost(have, DTensorSpec(mesh, want, have.meta(), op));  // inf: no plan
      ++moved;
    }
    if (!std::isfinite(cost)) continue;
    // A candidate that moves inputs pays for the reduction its layout leaves behind; one that
    // takes the inputs as they are does not (their Partial output is the caller's layout's
    // direct consequence, e.g. Megatron's row-parallel product), except for the growth of a
    // Partial its inputs carried (embedding_backward of a Partial gradient: a P [V, H]).
    cost += deferred_reduction_cost(schema, c, metas, nout, moved > 0);
    if (best.better(cost, moved)) best = {static_cast<int64_t>(k), cost, moved};
    if (inplace && c.placements[0] == schema.input(0).placements() &&
        c.placements[nout] == schema.input(0).placements() && best_inplace.better(cost, moved)) {
      best_inplace = {static_cast<int64_t>(k), cost, moved};
    }
  }
  DT_CHECK(best.index >= 0, "[%s] no valid sharding strategy among %d candidates", op,
           candidates.size());
  if (inplace && best_inplace.index < 0) {
    DT_FAIL("[%s] in-place op would change placements of argument %s from %s to %s", op,
            schema.op().input_name(0), placements_str(schema.input(0).placements()),
            placements_str(candidates[best.index].placements[0]));
  }
  const Choice& chosen = inplace ? best_inplace : best;
  const PlacementStrategy& c = candidates[chosen.index];

  OutputSharding out;
  out.cost = chosen.cost;
  for (int64_t o = 0; o < nout; ++o) {
    out.outputs.push_back(std::make_shared<const DTensorSpec>(mesh, c.placements[o], metas[o], op));
  }
  if (chosen.moved > 0) {
    for (int64_t i = 0; i < nin; ++i) {
      const DTensorSpec& have = schema.input(i);
      const Placements& want = c.placements[nout + i];
      out.required_inputs.push_back(want == have.placements() ? nullptr
                                                              : std::make_shared<const DTensorSpec>(
                                                                    mesh, want, have.meta(), op));
    }
  }
  return out;
}

OutputSharding propagate_uncached(const OpSchema& schema) {
  const OpInfo& info = schema.op();
  try {
    const OutputMetas metas = info.meta(schema);
    const StrategyRows rows = info.strategy(schema);
    if (info.data_dependent_shape) check_replicate_outputs(schema, rows, metas.size());
    return expand_to_full_mesh(schema, rows, metas, info.linearity, info.inplace);
  } catch (const Error& e) {
    throw Error(absl::StrCat(e.what(), " (schema: ", schema.str(), ")"));
  }
}

// ---- the cache -------------------------------------------------------------------------------
namespace {

// Stored key: owns copies of the input specs and static args.
struct CacheKey {
  OpId op;
  absl::InlinedVector<DTensorSpec, 3> inputs;
  ArgList static_args;
  size_t hash;
};
// Lookup key: views into the caller's schema (no copies on the hit path).
struct CacheKeyView {
  OpId op;
  absl::Span<const DTensorSpec* const> inputs;
  absl::Span<const ArgValue> static_args;
  size_t hash;
};

size_t key_hash(OpId op, absl::Span<const DTensorSpec* const> inputs,
                absl::Span<const ArgValue> static_args) {
  size_t h = absl::HashOf(op, inputs.size());
  for (const DTensorSpec* s : inputs) h = absl::HashOf(h, s->hash());
  return absl::HashOf(h, args_hash(static_args));
}

struct KeyHash {
  using is_transparent = void;
  size_t operator()(const CacheKey& k) const { return k.hash; }
  size_t operator()(const CacheKeyView& k) const { return k.hash; }
};

struct KeyEq {
  using is_transparent = void;
  bool operator()(const CacheKey& a, const CacheKey& b) const {
    return a.hash == b.hash && a.op == b.op && a.inputs == b.inputs &&
           a.static_args == b.static_args;
  }
  bool operator()(const CacheKey& a, const CacheKeyView& b) const {
    if (a.hash != b.hash || a.op != b.op || a.inputs.size() != b.inputs.size() ||
        a.static_args.size() != b.static_args.size()) {
      return false;
    }
    for (size_t i = 0; i < a.inputs.size(); ++i) {
      if (!(a.inputs[i] == *b.inputs[i])) return false;
    }
    return std::equal(a.static_args.begin(), a.static_args.end(), b.static_args.begin());
  }
  bool operator()(const CacheKeyView& a, const CacheKey& b) const { return (*this)(b, a); }
};

struct PropagationCache {
  std::shared_mutex mu;
  absl::flat_hash_map<CacheKey, std::shared_ptr<const OutputSharding>, KeyHash, KeyEq> map;
  std::atomic<int64_t> hits{0};
  std::atomic<int64_t> misses{0};
  int64_t evictions = 0;  // guarded by mu
};

PropagationCache& cache() {
  static PropagationCache* c = new PropagationCache();  // never destroyed
  return *c;
}

}  // namespace

std::shared_ptr<const OutputSharding> propagate(const OpSchema& schema) {
  PropagationCache& c = cache();
  const CacheKeyView view{schema.op_id(), schema.inputs(), schema.static_args(),
                          key_hash(schema.op_id(), schema.inputs(), schema.static_args())};
  {
    std::shared_lock lock(c.mu);
    auto it = c.map.find(view);
    if (it != c.map.end()) {
      c.hits.fetch_add(1, std::memory_order_relaxed);
      if (log_enabled(LogTopic::kPropagation)) detail::log_propagation(schema, *it->second, true);
      return it->second;
    }
  }
  // Miss: propagate outside the lock (other threads keep hitting meanwhile).
  OutputSharding sharding = propagate_uncached(schema);
  const DeviceMesh& mesh = schema.mesh();
  if (mesh.contains_me() && !schema.op().data_dependent_shape) {  // no fixed shape to cache
    for (const auto& out : sharding.outputs) {
      sharding.local_output_shapes.push_back(out->local_shard(mesh.get_coordinate()).shape);
    }
  }
  auto result = std::make_shared<const OutputSharding>(std::move(sharding));
  if (log_enabled(LogTopic::kPropagation)) detail::log_propagation(schema, *result, false);
  CacheKey key{view.op, {}, ArgList(view.static_args.begin(), view.static_args.end()), view.hash};
  for (const DTensorSpec* s : view.inputs) key.inputs.push_back(*s);
  std::unique_lock lock(c.mu);
  c.misses.fetch_add(1, std::memory_order_relaxed);
  auto it = c.map.find(key);  // another thread may have inserted it meanwhile
  if (it != c.map.end()) return it->second;
  if (static_cast<int64_t>(c.map.size()) >= kPropagationCacheCapacity) {
    c.evictions += static_cast<int64_t>(c.map.size());
    c.map.clear();
  }
  return c.map.emplace(std::move(key), std::move(result)).first->second;
}

PropagationCacheStats propagation_cache_stats() {
  PropagationCache& c = cache();
  std::shared_lock lock(c.mu);
  return {c.hits.load(), c.misses.load(), static_cast<int64_t>(c.map.size()), c.evictions,
          kPropagationCacheCapacity};
}

void clear_propagation_cache() {
  PropagationCache& c = cache();
  std::unique_lock lock(c.mu);
  c.map.clear();
  c.hits = 0;
  c.misses = 0;
  c.evictions = 0;
}

}  // namespace dtensor
