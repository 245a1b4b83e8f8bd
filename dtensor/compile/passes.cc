#include <absl/container/flat_hash_map.h>
#include <absl/strings/str_cat.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "dtensor/compile/graph.h"
#include "dtensor/core/detail/captured_move.h"
#include "dtensor/tensor/creation.h"

namespace dtensor::compiler {
namespace {

bool writes(const Node& n, size_t i) {
  return i < 32 && ((n.mutated_inputs >> i) & 1u) != 0;
}

// Whether node n writes a value whose captured tensor shares memory with `t`.
bool writes_memory_of(const Node& n, absl::Span<const Tensor> captured, const Tensor& t) {
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (!writes(n, i) || n.inputs[i] == kNoValue) continue;
    const Tensor& w = captured[static_cast<size_t>(n.inputs[i])];
    if (w.defined() && t.defined() && w.storage().is_same(t.storage())) return true;
  }
  return false;
}

// A rewrite the redistribute passes compute: nodes to drop and, for each value, the value
// that stands for it from then on.
struct Rewrite {
  std::vector<ValueId> alias;
  std::vector<bool> removed;

  Rewrite(size_t values, size_t nodes) : alias(values), removed(nodes, false) {
    for (size_t v = 0; v < values; ++v) alias[v] = static_cast<ValueId>(v);
  }
  ValueId resolve(ValueId v) const { return v == kNoValue ? v : alias[static_cast<size_t>(v)]; }
};

// Applies `r` unless a node writes a value that the rewrite makes shared (a write would then
// reach every reader of it; the optimizer writes parameters and states, which redistributes do
// not produce, so this is rare). Returns the number of nodes removed.
int64_t apply(std::vector<Node>& nodes, std::vector<ValueId>& outputs, const Rewrite& r,
              absl::Span<const Tensor> captured) {
  std::vector<bool> shared(r.alias.size(), false);
  bool any = false;
  for (size_t u = 0; u < r.alias.size(); ++u) {
    if (r.alias[u] != static_cast<ValueId>(u)) {
      shared[u] = true;
      shared[static_cast<size_t>(r.alias[u])] = true;
      any = true;
    }
  }
  if (!any) return 0;
  // Through any view: compare the memory written with the shared values' memory.
  for (const Node& n : nodes) {
    if (n.mutated_inputs == 0) continue;
    for (size_t v = 0; v < shared.size(); ++v) {
      if (shared[v] && writes_memory_of(n, captured, captured[v])) return 0;
    }
  }
  std::vector<Node> kept;
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (r.removed[k]) continue;
    kept.push_back(std::move(nodes[k]));
    for (ValueId& v : kept.back().inputs) v = r.resolve(v);
  }
  const int64_t removed = static_cast<int64_t>(nodes.size() - kept.size());
  nodes = std::move(kept);
  for (ValueId& v : outputs) v = r.resolve(v);
  return removed;
}

bool is_move(const Node& n) {
  return n.kind == "redistribute" && n.inputs.size() == 1 && n.outputs.size() == 1;
}

// Moves seen so far whose input and output are still as they were when moved: a node that
// writes memory one of them shares drops the entry.
template <typename Key>
void drop_stale(absl::flat_hash_map<Key, size_t>& seen, const std::vector<Node>& nodes,
                const Node& n, absl::Span<const Tensor> captured) {
  for (auto it = seen.begin(); it != seen.end();) {
    const Node& earlier = nodes[it->second];
    const bool stale =
        writes_memory_of(n, captured, captured[static_cast<size_t>(earlier.inputs[0])]) ||
        writes_memory_of(n, captured, captured[static_cast<size_t>(earlier.outputs[0])]);
    if (stale) {
      seen.erase(it++);
    } else {
      ++it;
    }
  }
}

void recount_collectives(const std::vector<Node>& nodes, GraphStats& stats) {
  stats.collectives = stats.collective_bytes = 0;
  for (const Node& n : nodes) {
    for (const Collective& c : n.collectives) {
      stats.collectives += 1;
      stats.collective_bytes += c.bytes;
    }
  }
}

}  // namespace

void dedup_collectives(Graph& g, absl::Span<const Tensor> captured) {
  std::vector<Node>& nodes = g.nodes_;
  Rewrite r(g.values_.size(), nodes.size());
  // Valid moves so far, by (move, input value): the node index.
  absl::flat_hash_map<std::pair<std::string, ValueId>, size_t> seen;
  for (size_t k = 0; k < nodes.size(); ++k) {
    const Node& n = nodes[k];
    drop_stale(seen, nodes, n, captured);
    if (!is_move(n)) continue;
    auto key = std::make_pair(n.move_src + " -> " + n.move_dst, r.resolve(n.inputs[0]));
    auto found = seen.find(key);
    if (found == seen.end()) {
      seen.emplace(std::move(key), k);
      continue;
    }
    r.alias[static_cast<size_t>(n.outputs[0])] = nodes[found->second].outputs[0];
    r.removed[k] = true;
  }
  g.stats_.deduplicated += apply(nodes, g.outputs_, r, captured);
  recount_collectives(nodes, g.stats_);
}

void remove_redundant_moves(Graph& g, absl::Span<const Tensor> captured) {
  std::vector<Node>& nodes = g.nodes_;
  Rewrite r(g.values_.size(), nodes.size());
  // Valid moves so far, by their output value: the node index.
  absl::flat_hash_map<ValueId, size_t> moved;
  for (size_t k = 0; k < nodes.size(); ++k) {
    const Node& n = nodes[k];
    drop_stale(moved, nodes, n, captured);
    if (!is_move(n)) continue;
    auto found = moved.find(r.resolve(n.inputs[0]));
    // x -> y then y -> x gives x back: an exact copy unless x or y is Partial (R -> P does not
    // restore the ranks' original partial values; P(avg) -> R may round).
    if (found != moved.end()) {
      const Node& first = nodes[found->second];
      if (first.move_src == n.move_dst && !first.move_src_partial && !n.move_src_partial) {
        r.alias[static_cast<size_t>(n.outputs[0])] = r.resolve(first.inputs[0]);
        r.removed[k] = true;
        continue;
      }
    }
    moved.emplace(n.outputs[0], k);
  }
  g.stats_.redundant_moves += apply(nodes, g.outputs_, r, captured);
  // A move whose result nobody reads any more goes too (the first of an undone pair).
  std::vector<int64_t> readers(g.values_.size(), 0);
  for (const Node& n : nodes) {
    for (ValueId v : n.inputs) {
      if (v != kNoValue) readers[static_cast<size_t>(v)] += 1;
    }
  }
  for (ValueId v : g.outputs_) readers[static_cast<size_t>(v)] += 1;
  std::vector<Node> kept;
  for (size_t k = nodes.size(); k-- > 0;) {
    Node& n = nodes[k];
    if (is_move(n) && readers[static_cast<size_t>(n.outputs[0])] == 0) {
      readers[static_cast<size_t>(n.inputs[0])] -= 1;
      g.stats_.redundant_moves += 1;
      continue;
    }
    kept.push_back(std::move(n));
  }
  std::reverse(kept.begin(), kept.end());
  nodes = std::move(kept);
  recount_collectives(nodes, g.stats_);
}

namespace {

// A move that is one all-reduce over one mesh dim (P -> R there, nothing else changes), with
// what a bucket of such moves shares: the communicator, the reduction, dtype and device.
struct Reduction {
  const detail::CapturedMove* move = nullptr;
  int64_t mesh_dim = -1;
  ReduceOp op = ReduceOp::kSum;
  std::string key;  // mesh, mesh dim, op, dtype, device: moves with the same key share a bucket
};

std::optional<Reduction> as_reduction(const Node& n, absl::Span<const Tensor> captured) {
  if (!is_move(n) || n.payload == nullptr) return std::nullopt;
  const auto* m = static_cast<const detail::CapturedMove*>(n.payload.get());
  if (m->plan == nullptr || m->plan->steps.size() != 1) return std::nullopt;
  const RedistributeStep& step = m->plan->steps[0];
  if (step.kind != StepKind::kAllReduce || step.is_flattened()) return std::nullopt;
  if (m->src->mesh().size(step.mesh_dim) < 2) return std::nullopt;
  const Tensor& in = captured[static_cast<size_t>(n.inputs[0])];
  Reduction r;
  r.move = m;
  r.mesh_dim = step.mesh_dim;
  r.op = step.src.reduce_op();
  r.key = absl::StrCat(m->src->mesh().str(), "/", step.mesh_dim, "/", static_cast<int>(r.op), "/",
                       std::string(dtype_name(in.dtype())), "/", in.device().str());
  return r;
}

// One node that runs the members' all-reduces as one over a flat buffer: copies each input
// in, reduces, and hands out views of the buffer as the members' outputs.
Node bucket_node(const std::vector<Node>& members, const Reduction& r,
                 absl::Span<const Tensor> captured) {
  Node b;
  b.kind = "redistribute";
  b.name = "bucket";
  int64_t bytes = 0;
  std::vector<Shape> shapes;
  for (const Node& m : members) {
    b.inputs.push_back(m.inputs[0]);
    b.outputs.push_back(m.outputs[0]);
    const Tensor& t = captured[static_cast<size_t>(m.inputs[0])];
    shapes.push_back(t.sizes());
    bytes += static_cast<int64_t>(t.nbytes());
  }
  b.detail = absl::StrCat(members.size(), " gradients, ", placements_str(r.move->src->placements()),
                          " -> ", placements_str(r.move->dst->placements()));
  b.collectives.push_back({"all_reduce", bytes});
  const CommunicatorPtr comm = r.move->src->mesh().communicator(r.mesh_dim);
  const DType dtype = captured[static_cast<size_t>(members[0].inputs[0])].dtype();
  b.fn = [comm, op = r.op, shapes, dtype](absl::Span<const Tensor> in, absl::Span<Tensor> out) {
    int64_t total = 0;
    for (const Tensor& t : in) total += t.numel();
    Tensor flat = empty({total}, TensorOptions(dtype, in[0].device()));
    int64_t offset = 0;
    for (const Tensor& t : in) {
      flat.narrow(0, offset, t.numel()).copy_(t.contiguous().reshape({t.numel()}));
      offset += t.numel();
    }
    comm->all_reduce(flat, op)->wait();
    offset = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      const int64_t n = in[i].numel();
      out[i] = flat.narrow(0, offset, n).view(shapes[i]);
      offset += n;
    }
  };
  return b;
}

// Whether node n reads any value in `tainted`.
bool reads_any(const Node& n, const std::vector<bool>& tainted) {
  for (ValueId v : n.inputs) {
    if (v != kNoValue && tainted[static_cast<size_t>(v)]) return true;
  }
  return false;
}

}  // namespace

void bucket_reductions(Graph& g, absl::Span<const Tensor> captured, int64_t bucket_bytes) {
  std::vector<Node>& nodes = g.nodes_;
  std::vector<Node> out;
  // The open bucket: its moves (not emitted yet), their reduction, its bytes, the nodes that
  // read its results and are deferred after it (gradient bookkeeping only), and the values those
  // produce or read.
  std::vector<Node> members, deferred;
  std::optional<Reduction> open;
  int64_t open_bytes = 0;
  std::vector<bool> tainted(g.values_.size(), false);
  int64_t buckets = 0;
  auto flush = [&] {
    if (members.size() == 1) {
      out.push_back(std::move(members[0]));
    } else if (members.size() > 1) {
      out.push_back(bucket_node(members, *open, captured));
      buckets += 1;
    }
    for (Node& d : deferred) out.push_back(std::move(d));
    members.clear();
    deferred.clear();
    open.reset();
    open_bytes = 0;
    std::fill(tainted.begin(), tainted.end(), false);
  };
  for (Node& n : nodes) {
    const std::optional<Reduction> r = as_reduction(n, captured);
    if (r.has_value()) {
      const auto bytes = static_cast<int64_t>(captured[static_cast<size_t>(n.inputs[0])].nbytes());
      const bool fits = open.has_value() && open->key == r->key &&
                        open_bytes + bytes <= bucket_bytes && !reads_any(n, tainted);
      if (!fits) flush();
      if (!open.has_value()) open = r;
      open_bytes += bytes;
      tainted[static_cast<size_t>(n.outputs[0])] = true;
      members.push_back(std::move(n));
      continue;
    }
    if (!members.empty()) {
      // A node that writes what a member still has to read, or reads what the bucket makes
      // without being gradient bookkeeping, comes after the bucket.
      bool writes_member_input = false;
      for (const Node& m : members) {
        writes_member_input =
            writes_member_input ||
            writes_memory_of(n, captured, captured[static_cast<size_t>(m.inputs[0])]);
      }
      if (reads_any(n, tainted)) {
        if (n.kind == "grad" && !writes_member_input) {
          for (ValueId v : n.outputs) {
            if (v != kNoValue) tainted[static_cast<size_t>(v)] = true;
          }
          deferred.push_back(std::move(n));
          continue;
        }
        flush();
      } else if (writes_member_input) {
        flush();
      }
    }
    out.push_back(std::move(n));
  }
  flush();
  nodes = std::move(out);
  g.stats_.buckets = buckets;
  recount_collectives(nodes, g.stats_);
}

void schedule_collectives(Graph& g, absl::Span<const Tensor> captured) {
  std::vector<Node>& nodes = g.nodes_;
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (nodes[k].kind != "redistribute") continue;
    // The earliest position: after every node that makes one of its inputs, writes memory they
    // share, communicates, or runs user code.
    size_t p = k;
    while (p > 0) {
      const Node& prev = nodes[p - 1];
      bool blocks = !prev.collectives.empty() || prev.kind == "eager" || prev.kind == "fused" ||
                    prev.kind == "redistribute";
      for (ValueId v : prev.outputs) {
        for (ValueId in : nodes[k].inputs) blocks = blocks || (v != kNoValue && v == in);
      }
      for (ValueId in : nodes[k].inputs) {
        if (in != kNoValue) {
          blocks = blocks || writes_memory_of(prev, captured, captured[static_cast<size_t>(in)]);
        }
      }
      if (blocks) break;
      --p;
    }
    Node n = std::move(nodes[k]);
    n.async = true;
    g.has_async_ = true;
    nodes.erase(nodes.begin() + static_cast<std::ptrdiff_t>(k));
    nodes.insert(nodes.begin() + static_cast<std::ptrdiff_t>(p), std::move(n));
  }
}

std::string_view role_name(Role r) {
  switch (r) {
    case Role::kInput:
      return "input";
    case Role::kParam:
      return "param";
    case Role::kGrad:
      return "grad";
    case Role::kState:
      return "state";
    case Role::kActivation:
      return "act";
    case Role::kConstant:
      return "const";
  }
  return "?";
}

void tag_roles(Graph& g, absl::Span<const Tensor> captured, absl::Span<const Tensor> params) {
  auto is_param = [&](ValueId v) {
    const Tensor& t = captured[static_cast<size_t>(v)];
    for (const Tensor& p : params) {
      if (t.defined() && p.defined() && t.storage().is_same(p.storage())) return true;
    }
    return false;
  };
  for (size_t v = 0; v < g.values_.size(); ++v) {
    Value& value = g.values_[v];
    value.role = value.kind == Value::Kind::kInput ? Role::kInput
                 : value.kind == Value::Kind::kExternal
                     ? (is_param(static_cast<ValueId>(v)) ? Role::kParam : Role::kConstant)
                     : Role::kActivation;
  }
  auto set = [&](ValueId v, Role r) {
    if (v != kNoValue) g.values_[static_cast<size_t>(v)].role = r;
  };
  for (const Node& n : g.nodes_) {
    if (n.kind == "grad" && n.name == "accumulate") set(n.outputs[0], Role::kGrad);
    if (n.kind != "optim" || n.name.find("_update") == std::string::npos) continue;
    // An update's inputs: the parameter, its gradient, then its state.
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const ValueId v = n.inputs[i];
      if (v == kNoValue) continue;
      if (i == 1) {
        set(v, Role::kGrad);
      } else if (writes(n, i) && g.values_[static_cast<size_t>(v)].kind == Value::Kind::kExternal) {
        set(v, i == 0 ? Role::kParam : Role::kState);
      }
    }
  }
}

void plan_memory(Graph& g, bool enabled) {
  const size_t nv = g.values_.size();
  std::vector<int64_t> last_use(nv, -1);
  for (size_t k = 0; k < g.nodes_.size(); ++k) {
    for (ValueId v : g.nodes_[k].inputs) {
      if (v != kNoValue) last_use[static_cast<size_t>(v)] = static_cast<int64_t>(k);
    }
    for (ValueId v : g.nodes_[k].outputs) {
      if (v == kNoValue) continue;
      last_use[static_cast<size_t>(v)] =
          std::max(last_use[static_cast<size_t>(v)], static_cast<int64_t>(k));
    }
  }
  for (ValueId v : g.outputs_) last_use[static_cast<size_t>(v)] = -2;  // returned: kept
  // dies[k]: the produced values whose last use is node k.
  std::vector<std::vector<ValueId>> dies(g.nodes_.size());
  for (size_t v = 0; v < nv; ++v) {
    if (g.values_[v].kind == Value::Kind::kProduced && last_use[v] >= 0) {
      dies[static_cast<size_t>(last_use[v])].push_back(static_cast<ValueId>(v));
    }
  }
  int64_t live = 0, peak = 0, total = 0;
  for (size_t k = 0; k < g.nodes_.size(); ++k) {
    for (ValueId v : g.nodes_[k].outputs) {
      if (v == kNoValue) continue;
      live += g.values_[static_cast<size_t>(v)].nbytes;
      total += g.values_[static_cast<size_t>(v)].nbytes;
    }
    peak = std::max(peak, live);
    for (ValueId v : dies[k]) live -= g.values_[static_cast<size_t>(v)].nbytes;
  }
  g.last_read_.assign(g.nodes_.size(), 0);
  if (enabled) {
    for (size_t k = 0; k < g.nodes_.size(); ++k) {
      const std::vector<ValueId>& in = g.nodes_[k].inputs;
      for (size_t i = 0; i < in.size() && i < 64; ++i) {
        const ValueId v = in[i];
        if (v == kNoValue || last_use[static_cast<size_t>(v)] != static_cast<int64_t>(k)) continue;
        if (g.values_[static_cast<size_t>(v)].kind != Value::Kind::kProduced) continue;
        // Only the last occurrence in the list: the earlier ones still read the slot.
        if (std::find(in.begin() + static_cast<std::ptrdiff_t>(i) + 1, in.end(), v) != in.end()) {
          continue;
        }
        g.last_read_[k] |= uint64_t{1} << i;
      }
    }
    g.free_after_ = std::move(dies);
  } else {
    g.free_after_.clear();
  }
  g.reuse_storages_ = enabled;
  g.walk_ready_ = false;  // run() flattens the plan again
  g.stats_.peak_bytes_planned = peak;
  g.stats_.peak_bytes_unplanned = total;
  if (!enabled) g.free_after_.clear();
}

}  // namespace dtensor::compiler
