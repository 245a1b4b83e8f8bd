#include <absl/container/flat_hash_map.h>

#include <algorithm>
#include <string>
#include <utility>

#include "dtensor/compile/graph.h"

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

}  // namespace

void dedup_collectives(Graph& g, absl::Span<const Tensor> captured) {
  std::vector<Node>& nodes = g.nodes_;
  std::vector<ValueId> alias(g.values_.size());
  for (size_t v = 0; v < alias.size(); ++v) alias[v] = static_cast<ValueId>(v);
  auto resolve = [&](ValueId v) { return v == kNoValue ? v : alias[static_cast<size_t>(v)]; };
  // Redistributes seen so far and still valid, by (move, input value): the node index.
  absl::flat_hash_map<std::pair<std::string, ValueId>, size_t> seen;
  std::vector<bool> removed(nodes.size(), false);
  for (size_t k = 0; k < nodes.size(); ++k) {
    const Node& n = nodes[k];
    // A write to memory an earlier move read or produced makes that move stale.
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
    if (n.kind != "redistribute" || n.inputs.size() != 1 || n.outputs.size() != 1) continue;
    auto key = std::make_pair(n.move_key, resolve(n.inputs[0]));
    auto found = seen.find(key);
    if (found == seen.end()) {
      seen.emplace(std::move(key), k);
      continue;
    }
    alias[static_cast<size_t>(n.outputs[0])] = nodes[found->second].outputs[0];
    removed[k] = true;
  }
  // A later write to a shared result would reach every reader of it: leave the graph as it is
  // when any node writes one (the optimizer writes parameters and states, which redistributes
  // do not produce, so this is rare).
  std::vector<bool> shared(alias.size(), false);
  for (size_t u = 0; u < alias.size(); ++u) {
    if (alias[u] != static_cast<ValueId>(u)) {
      shared[u] = true;
      shared[static_cast<size_t>(alias[u])] = true;
    }
  }
  for (const Node& n : nodes) {
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (writes(n, i) && n.inputs[i] != kNoValue && shared[static_cast<size_t>(n.inputs[i])]) {
        return;
      }
    }
  }
  std::vector<Node> kept;
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (removed[k]) continue;
    kept.push_back(std::move(nodes[k]));
    for (ValueId& v : kept.back().inputs) v = resolve(v);
  }
  g.stats_.deduplicated = static_cast<int64_t>(nodes.size() - kept.size());
  nodes = std::move(kept);
  g.stats_.collectives = g.stats_.collective_bytes = 0;
  for (const Node& n : nodes) {
    for (const Collective& c : n.collectives) {
      g.stats_.collectives += 1;
      g.stats_.collective_bytes += c.bytes;
    }
  }
  for (ValueId& v : g.outputs_) v = resolve(v);
}

void plan_memory(Graph& g, bool enabled) {
  const size_t nv = g.values_.size();
  std::vector<int64_t> last_use(nv, -1);
  for (size_t k = 0; k < g.nodes_.size(); ++k) {
    for (ValueId v : g.nodes_[k].inputs) {
      if (v != kNoValue) last_use[static_cast<size_t>(v)] = static_cast<int64_t>(k);
    }
    for (ValueId v : g.nodes_[k].outputs) {
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
  g.stats_.peak_bytes_planned = peak;
  g.stats_.peak_bytes_unplanned = total;
  if (!enabled) g.free_after_.clear();
}

}  // namespace dtensor::compiler
