// The pure redistribute planner: a shortest-path search over placement lists.
//
// A state is one placement per mesh dim. Each mesh dim may only take its source placement,
// its target placement or Replicate, so there are at most 3^ndim states; an edge changes one
// mesh dim's placement with one collective (or local step) and costs what the alpha-beta model
// says for the local shard size at that state. Dijkstra with ties broken by step count and
// then by the state's index gives the same plan on every rank.
#include <absl/container/flat_hash_map.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <string>
#include <tuple>
#include <utility>

#include "dtensor/core/detail/util.h"
#include "dtensor/core/propagation/sharding_propagation.h"
#include "dtensor/core/redistribute.h"
#include "dtensor/tensor/error.h"

namespace dtensor {

std::string_view step_kind_name(StepKind k) {
  switch (k) {
    case StepKind::kAllGather:
      return "all_gather";
    case StepKind::kAllReduce:
      return "all_reduce";
    case StepKind::kReduceScatter:
      return "reduce_scatter";
    case StepKind::kAllToAll:
      return "all_to_all";
    case StepKind::kLocalChunk:
      return "local_chunk";
    case StepKind::kPartition:
      return "partition";
    case StepKind::kRescalePartial:
      return "rescale_partial";
    case StepKind::kShardToPartial:
      return "shard_to_partial";
  }
  return "?";
}

std::string RedistributePlan::str() const {
  std::string out = "[";
  for (size_t i = 0; i < steps.size(); ++i) {
    const RedistributeStep& s = steps[i];
    if (i > 0) out += ", ";
    if (s.is_flattened()) {
      // To R: "->R"; an exchange names every dim's target.
      const std::string to =
          s.kind == StepKind::kAllToAll ? placements_str(s.flat_dst) : s.dst.str();
      absl::StrAppendFormat(&out, "dims %s: %s->%s %s (%.3g us)", absl::StrJoin(s.flat_dims, "+"),
                            placements_str(s.flat_src), to, step_kind_name(s.kind), s.cost);
      continue;
    }
    absl::StrAppendFormat(&out, "dim %d: %s->%s %s (%.3g us)", s.mesh_dim, s.src.str(), s.dst.str(),
                          step_kind_name(s.kind), s.cost);
  }
  out += "]";
  return out;
}

namespace {

std::mutex& cost_model_mutex() {
  static std::mutex m;
  return m;
}
CostModel& mutable_cost_model() {
  static CostModel m;
  return m;
}

// Bounded: a miss that finds kPlanCacheCapacity entries clears them all first. Clearing
// (rather than LRU) keeps a hit to one hash lookup with no bookkeeping; a program cycles
// through far fewer (src, dst) pairs than the bound, so a clear only happens when the specs
// never repeat (then nothing is lost). Plans are shared_ptrs, so a caller still holding one
// across a clear keeps it alive.
struct PlanCache {
  std::mutex mutex;
  absl::flat_hash_map<std::pair<DTensorSpec, DTensorSpec>, std::shared_ptr<const RedistributePlan>>
      plans;
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t evictions = 0;
};
PlanCache& plan_cache() {
  static PlanCache* cache = new PlanCache();  // never destroyed: usable during static teardown
  return *cache;
}

bool is_sum_avg_pair(const Placement& a, const Placement& b) {
  auto sum_or_avg = [](const Placement& p) {
    return p.reduce_op() == ReduceOp::kSum || p.reduce_op() == ReduceOp::kAvg;
  };
  return a.is_partial() && b.is_partial() && sum_or_avg(a) && sum_or_avg(b);
}

// Why no exact plan exists for mesh dim `i` (empty when one does): a Partial op can only
// change between sum and avg, and avg -> sum divides, which truncates integer dtypes.
std::string no_exact_conversion(PlacementSpan src, PlacementSpan dst, size_t i, DType dtype) {
  const Placement& a = src[i];
  const Placement& b = dst[i];
  if (!a.is_partial() || !b.is_partial() || a == b) return "";
  if (!is_sum_avg_pair(a, b)) {
    return absl::StrFormat(
        "[redistribute] no exact conversion from %s to %s on mesh dim %d (placements %s -> %s): "
        "only P(sum) <-> P(avg) convert between Partial ops",
        a.str(), b.str(), i, placements_str(src), placements_str(dst));
  }
  if (a.reduce_op() == ReduceOp::kAvg && !is_floating(dtype)) {
    return absl::StrFormat(
        "[redistribute] no exact conversion from P(avg) to P(sum) on mesh dim %d for a %s tensor "
        "(placements %s -> %s): integer division by the mesh-dim size truncates",
        i, dtype_name(dtype), placements_str(src), placements_str(dst));
  }
  return "";
}

// Whether a mesh dim after `mesh_dim` (of size > 1: a size-1 dim splits nothing) shards
// tensor dim `dim` in `state`.
bool sharded_later(PlacementSpan state, IntSpan mesh_shape, size_t mesh_dim, int64_t dim) {
  for (size_t j = mesh_dim + 1; j < state.size(); ++j) {
    if (state[j].is_shard(dim) && mesh_shape[j] > 1) return true;
  }
  return false;
}

// The step that moves mesh dim `i` from state[i] to `to`, if one exists in one collective.
// Nested sharding is the reason for the `sharded_later` checks: a mesh dim can only gather or
// split a tensor dim when no later mesh dim splits that dim further (innermost first).
std::optional<StepKind> edge_kind(PlacementSpan state, IntSpan mesh_shape, size_t i,
                                  const Placement& to) {
  const Placement& from = state[i];
  if (from == to) return std::nullopt;
  auto sharded_later = [&](int64_t dim) {
    return ::dtensor::sharded_later(state, mesh_shape, i, dim);
  };
  if (from.is_shard()) {
    if (sharded_later(from.dim())) return std::nullopt;
    if (to.is_replicate()) return StepKind::kAllGather;
    if (to.is_shard() && !sharded_later(to.dim())) return StepKind::kAllToAll;
    // S -> P(sum|avg) in place (max/min go through R).
    if (is_sum_avg_pair(to, to)) return StepKind::kShardToPartial;
    return std::nullopt;
  }
  if (from.is_replicate()) {
    if (to.is_partial()) return StepKind::kPartition;
    if (!sharded_later(to.dim())) return StepKind::kLocalChunk;
    return std::nullopt;
  }
  // Partial source.
  if (to.is_replicate()) return StepKind::kAllReduce;
  if (to.is_shard()) {
    if (sharded_later(to.dim())) return std::nullopt;
    return StepKind::kReduceScatter;
  }
  if (is_sum_avg_pair(from, to)) return StepKind::kRescalePartial;
  return std::nullopt;
}

double step_cost(StepKind kind, int64_t n, double bytes_before, double bytes_after,
                 const CostModel& m) {
  const double latency =
      m.collective_us + m.alpha_us * std::ceil(std::log2(static_cast<double>(n)));
  const double nd = static_cast<double>(n);
  switch (kind) {
    case StepKind::kAllGather:  // full buffer n * B, ring moves (n-1)/n of it
      return latency + m.beta_us_per_byte * (nd - 1.0) * bytes_before;
    case StepKind::kAllReduce:
      return latency + m.beta_us_per_byte * 2.0 * (nd - 1.0) / nd * bytes_before;
    case StepKind::kReduceScatter:  // full buffer n * (output chunk)
      return latency + m.beta_us_per_byte * (nd - 1.0) * bytes_after;
    case StepKind::kAllToAll:
      return latency + m.beta_us_per_byte * (nd - 1.0) / nd * bytes_before;
    case StepKind::kLocalChunk:
    case StepKind::kShardToPartial:
      return m.local_us_per_byte * bytes_after;
    case StepKind::kPartition:
    case StepKind::kRescalePartial:
      return m.local_us_per_byte * bytes_before;
  }
  return 0;
}

// The flattened step that moves every mesh dim in `mask` (at least two, each of size > 1) from
// `state` to Replicate with one collective, if there is one: all of them shard (each gathered
// dim innermost among the dims that keep sharding its tensor dim), or all hold the same
// Partial (not integer avg: one truncating division by the group size differs from one per
// dim).
std::optional<StepKind> flat_edge_kind(PlacementSpan state, IntSpan mesh_shape, uint32_t mask,
                                       DType dtype) {
  std::optional<StepKind> kind;
  std::optional<ReduceOp> op;
  for (size_t i = 0; i < state.size(); ++i) {
    if ((mask >> i & 1u) == 0) continue;
    const Placement& p = state[i];
    if (mesh_shape[i] == 1 || p.is_replicate()) return std::nullopt;
    const StepKind k = p.is_shard() ? StepKind::kAllGather : StepKind::kAllReduce;
    if (kind && *kind != k) return std::nullopt;
    kind = k;
    if (p.is_partial()) {
      if (op && *op != p.reduce_op()) return std::nullopt;
      op = p.reduce_op();
      if (*op == ReduceOp::kAvg && !is_floating(dtype)) return std::nullopt;
      continue;
    }
    for (size_t j = i + 1; j < state.size(); ++j) {
      if ((mask >> j & 1u) == 0 && mesh_shape[j] > 1 && state[j].is_shard(p.dim())) {
        return std::nullopt;
      }
    }
  }
  return kind;
}

// Whether every mesh dim in `mask` (at least two, each of size > 1) can go from `state` to
// `dst` with one all-to-all over their flattened communicator: all shard before and after and
// at least one changes. Each rank's new shard must lie inside what its group holds together:
// no mesh dim outside the group (of size > 1) may shard a tensor dim that a group dim before it
// shards, before or after (it would cut the group's blocks further in, differently before and
// after). Mesh dims outside the group keep their placements.
bool flat_exchange_ok(PlacementSpan state, PlacementSpan dst, IntSpan mesh_shape, uint32_t mask) {
  bool changes = false;
  for (size_t i = 0; i < state.size(); ++i) {
    if ((mask >> i & 1u) == 0) continue;
    if (mesh_shape[i] == 1 || !state[i].is_shard() || !dst[i].is_shard()) return false;
    changes = changes || state[i] != dst[i];
  }
  if (!changes) return false;
  for (size_t j = 0; j < state.size(); ++j) {
    if ((mask >> j & 1u) != 0 || mesh_shape[j] == 1 || !state[j].is_shard()) continue;
    for (size_t i = 0; i < j; ++i) {
      if ((mask >> i & 1u) == 0) continue;
      if (state[i].is_shard(state[j].dim()) || dst[i].is_shard(state[j].dim())) return false;
    }
  }
  return true;
}

Placements normalized(PlacementSpan p, int64_t ndim) {
  Placements out(p.begin(), p.end());
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].is_shard()) {
      out[i] = Shard(detail::normalize_shard_dim(out[i].dim(), ndim, static_cast<int64_t>(i), p,
                                                 "redistribute"));
    }
  }
  return out;
}

}  // namespace

CostModel default_cost_model() {
  std::lock_guard<std::mutex> lock(cost_model_mutex());
  return mutable_cost_model();
}

void set_default_cost_model(const CostModel& m) {
  {
    std::lock_guard<std::mutex> lock(cost_model_mutex());
    mutable_cost_model() = m;
  }
  // Cached plans and sharding choices were costed under the old model.
  clear_redistribute_plan_cache();
  clear_propagation_cache();
}

std::optional<RedistributePlan> find_redistribute_plan(IntSpan global_shape, DType dtype,
                                                       IntSpan mesh_shape, PlacementSpan src_in,
                                                       PlacementSpan dst_in, const CostModel& model,
                                                       std::string* why) {
  const int64_t ndim = static_cast<int64_t>(global_shape.size());
  const size_t mesh_ndim = mesh_shape.size();
  DT_CHECK(src_in.size() == mesh_ndim,
           "[redistribute] source placements %s have %d entries for a %d-d mesh (expected one "
           "per mesh dim)",
           placements_str(src_in), src_in.size(), mesh_ndim);
  DT_CHECK(dst_in.size() == mesh_ndim,
           "[redistribute] target placements %s have %d entries for a %d-d mesh (expected one "
           "per mesh dim)",
           placements_str(dst_in), dst_in.size(), mesh_ndim);
  DT_CHECK(mesh_shape.size() == mesh_ndim, "[redistribute] mesh shape %s for %d placements",
           shape_str(mesh_shape), mesh_ndim);
  Placements src = normalized(src_in, ndim);
  const Placements dst = normalized(dst_in, ndim);
  for (size_t i = 0; i < mesh_ndim; ++i) {
    // A size-1 mesh dim holds the whole piece under any placement: relabel, no step. (Even
    // P(max) -> P(sum) is exact there: a reduction over one rank is the identity.)
    if (mesh_shape[i] == 1) {
      src[i] = dst[i];
      continue;
    }
    std::string reason = no_exact_conversion(src, dst, i, dtype);
    if (!reason.empty()) {
      if (why != nullptr) *why = std::move(reason);
      return std::nullopt;
    }
  }
  RedistributePlan plan;
  if (src == dst) return plan;

  // Candidate placements per mesh dim: source, target, Replicate (deduplicated).
  std::vector<absl::InlinedVector<Placement, 3>> cand(mesh_ndim);
  std::vector<int64_t> radix(mesh_ndim);
  int64_t num_states = 1;
  for (size_t i = 0; i < mesh_ndim; ++i) {
    for (const Placement& p : {src[i], dst[i], Replicate()}) {
      bool seen = false;
      for (const Placement& q : cand[i]) seen = seen || q == p;
      if (!seen) cand[i].push_back(p);
    }
    radix[i] = num_states;
    num_states *= static_cast<int64_t>(cand[i].size());
  }
  auto decode = [&](int64_t code) {
    Placements s(mesh_ndim);
    for (size_t i = 0; i < mesh_ndim; ++i) {
      s[i] = cand[i][(code / radix[i]) % static_cast<int64_t>(cand[i].size())];
    }
    return s;
  };
  // Source and target are index 0 and index of dst in every dim.
  int64_t target = 0;
  for (size_t i = 0; i < mesh_ndim; ++i) {
    for (size_t k = 0; k < cand[i].size(); ++k) {
      if (cand[i][k] == dst[i]) target += static_cast<int64_t>(k) * radix[i];
    }
  }
  // Index of R and of the target among each dim's candidates (where a flattened step goes),
  // and the subsets of mesh dims to try flattening (dims of size 1 are never part of one).
  std::vector<int64_t> replicate_index(mesh_ndim, 0), dst_index(mesh_ndim, 0);
  for (size_t i = 0; i < mesh_ndim; ++i) {
    for (size_t k = 0; k < cand[i].size(); ++k) {
      if (cand[i][k].is_replicate()) replicate_index[i] = static_cast<int64_t>(k);
      if (cand[i][k] == dst[i]) dst_index[i] = static_cast<int64_t>(k);
    }
  }
  const uint32_t flat_masks = mesh_ndim <= 16 ? (1u << mesh_ndim) : 0u;
  const double itemsize = static_cast<double>(dtype_size(dtype));
  const Shape zero_coord(mesh_ndim, 0);  // coordinate 0 holds the largest shard
  auto local_bytes = [&](const Placements& s) {
    return itemsize *
           static_cast<double>(shape_numel(
               compute_local_shape_and_offset(global_shape, mesh_shape, zero_coord, s).shape));
  };

  constexpr double kInf = std::numeric_limits<double>::infinity();
  struct Best {
    double cost = kInf;
    int64_t steps = 0;
    int64_t prev = -1;
    RedistributeStep step{};
  };
  // Replacing a path needs a cost lower by more than rounding, or the same cost (within
  // rounding) in fewer steps: a flattened gather and the per-dim gathers it replaces cost the
  // same in the model, summed in different orders.
  auto better = [](double total, int64_t steps, const Best& b) {
    if (b.cost == kInf) return total < kInf;
    const double eps = 1e-9 * std::max(1.0, std::abs(b.cost));
    return total < b.cost - eps || (total <= b.cost + eps && steps < b.steps);
  };
  std::vector<Best> best(num_states);
  std::vector<bool> done(num_states, false);
  using Entry = std::tuple<double, int64_t, int64_t>;  // cost, steps, state
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
  best[0].cost = 0;
  queue.emplace(0.0, 0, 0);
  while (!queue.empty()) {
    auto [cost, nsteps, code] = queue.top();
    queue.pop();
    if (done[code]) continue;
    done[code] = true;
    if (code == target) break;
    const Placements state = decode(code);
    const double bytes_before = local_bytes(state);
    for (size_t i = 0; i < mesh_ndim; ++i) {
      const int64_t cur = (code / radix[i]) % static_cast<int64_t>(cand[i].size());
      for (size_t k = 0; k < cand[i].size(); ++k) {
        const std::optional<StepKind> kind = edge_kind(state, mesh_shape, i, cand[i][k]);
        if (!kind) continue;
        const int64_t next = code + (static_cast<int64_t>(k) - cur) * radix[i];
        if (done[next]) continue;
        Placements next_state = state;
        next_state[i] = cand[i][k];
        const double c =
            step_cost(*kind, mesh_shape[i], bytes_before, local_bytes(next_state), model);
        const double total = cost + c;
        if (better(total, nsteps + 1, best[next])) {
          // Field by field: assigning a temporary Best makes GCC 12 warn (falsely) about the
          // step's inline vectors.
          Best& b = best[next];
          b.cost = total;
          b.steps = nsteps + 1;
          b.prev = code;
          b.step.mesh_dim = static_cast<int64_t>(i);
          b.step.src = state[i];
          b.step.dst = cand[i][k];
          b.step.kind = *kind;
          b.step.cost = c;
          b.step.flat_dims.clear();
          b.step.flat_src.clear();
          b.step.flat_dst.clear();
          queue.emplace(total, nsteps + 1, next);
        }
      }
    }
    // Flattened steps: every subset of at least two mesh dims that can go to R together, or
    // from Shard to their target Shard together.
    auto relax_flat = [&](uint32_t mask, StepKind kind, const std::vector<int64_t>& to_index) {
      int64_t next = code;
      int64_t n = 1;
      RedistributeStep step{-1, Replicate(), Replicate(), kind, 0, {}, {}, {}};
      for (size_t i = 0; i < mesh_ndim; ++i) {
        if ((mask >> i & 1u) == 0) continue;
        const int64_t cur = (code / radix[i]) % static_cast<int64_t>(cand[i].size());
        next += (to_index[i] - cur) * radix[i];
        n *= mesh_shape[i];
        const Placement& to = cand[i][static_cast<size_t>(to_index[i])];
        if (step.mesh_dim < 0) {
          step.mesh_dim = static_cast<int64_t>(i);
          step.src = state[i];
          step.dst = to;
        }
        step.flat_dims.push_back(static_cast<int64_t>(i));
        step.flat_src.push_back(state[i]);
        step.flat_dst.push_back(to);
      }
      if (done[next]) return;
      step.cost = step_cost(kind, n, bytes_before, 0.0, model);
      const double total = cost + step.cost;
      if (better(total, nsteps + 1, best[next])) {
        Best& b = best[next];
        b.cost = total;
        b.steps = nsteps + 1;
        b.prev = code;
        b.step = std::move(step);
        queue.emplace(total, nsteps + 1, next);
      }
    };
    for (uint32_t mask = 3; mask < flat_masks; ++mask) {
      if ((mask & (mask - 1)) == 0) continue;  // one dim
      if (const std::optional<StepKind> kind = flat_edge_kind(state, mesh_shape, mask, dtype)) {
        relax_flat(mask, *kind, replicate_index);
      }
      if (flat_exchange_ok(state, dst, mesh_shape, mask)) {
        relax_flat(mask, StepKind::kAllToAll, dst_index);
      }
    }
  }
  DT_CHECK(done[target],
           "[redistribute] internal error: no plan from %s to %s on a mesh of shape %s",
           placements_str(src), placements_str(dst), shape_str(mesh_shape));
  for (int64_t code = target; code != 0; code = best[code].prev) {
    plan.steps.push_back(best[code].step);
  }
  std::reverse(plan.steps.begin(), plan.steps.end());
  plan.cost = best[target].cost;
  return plan;
}

RedistributePlan plan_redistribute(IntSpan global_shape, DType dtype, IntSpan mesh_shape,
                                   PlacementSpan src, PlacementSpan dst, const CostModel& model) {
  std::string why;
  std::optional<RedistributePlan> plan =
      find_redistribute_plan(global_shape, dtype, mesh_shape, src, dst, model, &why);
  DT_CHECK(plan.has_value(), "%s", why);
  return *std::move(plan);
}

namespace {

void check_same_tensor(const DTensorSpec& src, const DTensorSpec& dst) {
  DT_CHECK(src.mesh() == dst.mesh(),
           "[redistribute] source and target specs live on different meshes (%s vs %s); "
           "expected the same mesh",
           src.mesh().str(), dst.mesh().str());
  DT_CHECK(src.meta() == dst.meta(),
           "[redistribute] source (%s, %s) and target (%s, %s) describe different tensors "
           "(expected the same global shape, stride and dtype)",
           shape_str(src.shape()), dtype_name(src.dtype()), shape_str(dst.shape()),
           dtype_name(dst.dtype()));
}

// The cached plan under the default model; nullptr when no exact plan exists (that outcome is
// cached too, so propagation costing impossible candidates stays cheap).
std::shared_ptr<const RedistributePlan> cached_plan(const DTensorSpec& src,
                                                    const DTensorSpec& dst) {
  check_same_tensor(src, dst);
  PlanCache& cache = plan_cache();
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.plans.find(std::make_pair(src, dst));
    if (it != cache.plans.end()) {
      ++cache.hits;
      return it->second;
    }
  }
  std::optional<RedistributePlan> found =
      find_redistribute_plan(src.shape(), src.dtype(), src.mesh().shape(), src.placements(),
                             dst.placements(), default_cost_model());
  auto plan = found ? std::make_shared<const RedistributePlan>(*std::move(found)) : nullptr;
  std::lock_guard<std::mutex> lock(cache.mutex);
  ++cache.misses;
  auto key = std::make_pair(src, dst);
  if (static_cast<int64_t>(cache.plans.size()) >= kPlanCacheCapacity &&
      !cache.plans.contains(key)) {
    cache.plans.clear();
    ++cache.evictions;
  }
  auto [it, inserted] = cache.plans.try_emplace(std::move(key), std::move(plan));
  return it->second;
}

}  // namespace

std::shared_ptr<const RedistributePlan> plan_redistribute(const DTensorSpec& src,
                                                          const DTensorSpec& dst) {
  std::shared_ptr<const RedistributePlan> plan = cached_plan(src, dst);
  if (plan == nullptr) {  // throw the reason (a rare path: recompute it)
    plan_redistribute(src.shape(), src.dtype(), src.mesh().shape(), src.placements(),
                      dst.placements(), default_cost_model());
    DT_FAIL("[redistribute] no plan from %s to %s", src.str(), dst.str());
  }
  return plan;
}

double redistribute_cost(const DTensorSpec& src, const DTensorSpec& dst) {
  if (src == dst) return 0;
  const std::shared_ptr<const RedistributePlan> plan = cached_plan(src, dst);
  return plan != nullptr ? plan->cost : std::numeric_limits<double>::infinity();
}

PlanCacheStats redistribute_plan_cache_stats() {
  PlanCache& cache = plan_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  return PlanCacheStats{cache.hits, cache.misses, static_cast<int64_t>(cache.plans.size()),
                        cache.evictions};
}

void clear_redistribute_plan_cache() {
  PlanCache& cache = plan_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.plans.clear();
  cache.hits = 0;
  cache.misses = 0;
  cache.evictions = 0;
}

}  // namespace dtensor
