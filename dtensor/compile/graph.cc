#include "dtensor/compile/graph.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <algorithm>
#include <chrono>

#include "dtensor/collectives/comm_worker.h"
#include "dtensor/tensor/error.h"

namespace dtensor::compiler {
namespace {

// "%7" for a produced value, "%in0" for an input, "%c3" for an external one, "-" for none.
std::string value_name(const Graph& g, ValueId v) {
  if (v == kNoValue) return "-";
  const Value& value = g.values()[static_cast<size_t>(v)];
  switch (value.kind) {
    case Value::Kind::kInput:
      return absl::StrCat("%in", value.input_index);
    case Value::Kind::kExternal:
      return absl::StrCat("%c", v);
    case Value::Kind::kProduced:
      break;
  }
  return absl::StrCat("%", v);
}

}  // namespace

std::string Graph::str() const {
  int64_t externals = 0;
  for (const Value& v : values_) externals += v.kind == Value::Kind::kExternal ? 1 : 0;
  std::string out = absl::StrFormat(
      "graph: %d inputs, %d external tensors, %d nodes, %d collectives (%d B), %d deduplicated, %d "
      "redundant moves removed, %d buckets; peak %d B planned, %d B unplanned\n",
      input_specs_.size(), externals, nodes_.size(), stats_.collectives, stats_.collective_bytes,
      stats_.deduplicated, stats_.redundant_moves, stats_.buckets, stats_.peak_bytes_planned,
      stats_.peak_bytes_unplanned);
  for (const Node& n : nodes_) {
    std::vector<std::string> outs, ins, written;
    for (ValueId v : n.outputs) outs.push_back(value_name(*this, v));
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      ins.push_back(value_name(*this, n.inputs[i]));
      if (i < 32 && ((n.mutated_inputs >> i) & 1u) != 0 && n.inputs[i] != kNoValue) {
        written.push_back(ins.back());
      }
    }
    absl::StrAppend(&out, "  ", outs.empty() ? "" : absl::StrCat(absl::StrJoin(outs, ", "), " = "),
                    n.kind, " ", n.name, "(", absl::StrJoin(ins, ", "), ")",
                    n.async ? " async" : "");
    if (!n.detail.empty()) absl::StrAppend(&out, "  ", n.detail);
    if (!written.empty()) absl::StrAppend(&out, "  writes ", absl::StrJoin(written, ", "));
    for (const Collective& c : n.collectives) {
      absl::StrAppend(&out, "  | ", c.kind, " ", c.bytes, " B");
    }
    out += "\n";
  }
  int64_t count[6] = {}, bytes[6] = {};
  for (const Value& v : values_) {
    count[static_cast<int>(v.role)] += 1;
    bytes[static_cast<int>(v.role)] += v.nbytes;
  }
  absl::StrAppend(&out, "  values:");
  for (int r = 0; r < 6; ++r) {
    if (count[r] == 0) continue;
    absl::StrAppend(&out, " ", count[r], " ", std::string(role_name(static_cast<Role>(r))), " (",
                    bytes[r], " B)");
  }
  out += "\n";
  std::vector<std::string> rets;
  for (ValueId v : outputs_) rets.push_back(value_name(*this, v));
  absl::StrAppend(&out, "  return (", absl::StrJoin(rets, ", "), ")\n");
  return out;
}

DTensorList Graph::run(const DTensorList& inputs, double* node_seconds) const {
  // The slots live from replay to replay: the externals stay in place, the inputs are set per
  // call, the produced values are dropped by the plan or at the end.
  std::vector<Tensor>& slots = slots_;
  if (slots.size() != values_.size()) {
    slots.assign(values_.size(), Tensor());
    for (size_t v = 0; v < values_.size(); ++v) {
      if (values_[v].kind == Value::Kind::kExternal) slots[v] = values_[v].external;
    }
  }
  for (size_t v = 0; v < values_.size(); ++v) {
    const Value& value = values_[v];
    if (value.kind == Value::Kind::kInput) {
      slots[v] = inputs[static_cast<size_t>(value.input_index)].to_local();
    }
  }
  // Async nodes in flight: the node, its work, its outputs (written by the communication
  // thread, moved into the slots by the waiting thread); pending[v]: the flight making value v.
  struct Flight {
    size_t node;
    WorkPtr work;
    std::shared_ptr<std::vector<Tensor>> outs;
  };
  std::vector<Flight> flights;
  std::vector<int32_t> pending(has_async_ ? values_.size() : 0, -1);
  auto land = [&](int32_t f) {
    Flight& flight = flights[static_cast<size_t>(f)];
    if (flight.work == nullptr) return;
    flight.work->wait();
    flight.work = nullptr;
    const Node& n = nodes_[flight.node];
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      if (n.outputs[o] == kNoValue) continue;
      slots[static_cast<size_t>(n.outputs[o])] = std::move((*flight.outs)[o]);
      pending[static_cast<size_t>(n.outputs[o])] = -1;
    }
  };
  auto ready = [&](ValueId v) {
    if (has_async_ && v != kNoValue && pending[static_cast<size_t>(v)] >= 0) {
      land(pending[static_cast<size_t>(v)]);
    }
  };
  // Node arguments, reused from node to node (std::vector: no per-node allocation once grown).
  std::vector<Tensor> in, out;
  const Tensor none;
  auto land_all = [&] {
    for (size_t f = 0; f < flights.size(); ++f) land(static_cast<int32_t>(f));
  };
  // A node that writes in place or runs code the graph cannot see into waits for every move in
  // flight first: a move may still be reading what it writes.
  auto fences = [](const Node& n) {
    return n.mutated_inputs != 0 || (n.kind != "op" && n.kind != "redistribute");
  };
  try {
    for (size_t k = 0; k < nodes_.size(); ++k) {
      const Node& n = nodes_[k];
      if (has_async_ && !n.async && fences(n)) land_all();
      in.clear();
      const uint64_t moves = k < last_read_.size() ? last_read_[k] : 0;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const ValueId v = n.inputs[i];
        ready(v);
        if (v == kNoValue) {
          in.push_back(none);
        } else if (i < 64 && ((moves >> i) & 1u) != 0) {
          in.push_back(std::move(slots[static_cast<size_t>(v)]));
        } else {
          in.push_back(slots[static_cast<size_t>(v)]);
        }
      }
      if (n.async) {
        auto outs = std::make_shared<std::vector<Tensor>>(n.outputs.size());
        WorkPtr work = submit_async(
            [&n, args = in, outs] { n.fn(absl::MakeConstSpan(args), absl::MakeSpan(*outs)); });
        flights.push_back({k, std::move(work), std::move(outs)});
        for (ValueId v : n.outputs) {
          if (v != kNoValue)
            pending[static_cast<size_t>(v)] = static_cast<int32_t>(flights.size() - 1);
        }
      } else {
        out.clear();
        out.resize(n.outputs.size());
        if (node_seconds == nullptr) {
          n.fn(absl::MakeConstSpan(in), absl::MakeSpan(out));
        } else {
          const auto t0 = std::chrono::steady_clock::now();
          n.fn(absl::MakeConstSpan(in), absl::MakeSpan(out));
          *node_seconds +=
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
        for (size_t o = 0; o < n.outputs.size(); ++o) {
          if (n.outputs[o] != kNoValue)
            slots[static_cast<size_t>(n.outputs[o])] = std::move(out[o]);
        }
      }
      if (k < free_after_.size() && !free_after_[k].empty()) {
        // Freeing the node's dead values counts as node time, as allocating its outputs does.
        const auto t0 = node_seconds != nullptr ? std::chrono::steady_clock::now()
                                                : std::chrono::steady_clock::time_point();
        for (ValueId v : free_after_[k]) {
          ready(v);
          slots[static_cast<size_t>(v)] = none;
        }
        if (node_seconds != nullptr) {
          *node_seconds +=
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
      }
    }
  } catch (...) {
    // No task may outlive the call reading this graph's nodes or slots.
    for (Flight& f : flights) {
      if (f.work == nullptr) continue;
      try {
        f.work->wait();
      } catch (...) {
      }
    }
    throw;
  }
  land_all();
  DTensorList result;
  for (size_t o = 0; o < outputs_.size(); ++o) {
    result.emplace_back(slots[static_cast<size_t>(outputs_[o])], output_specs_[o]);
  }
  for (size_t v = 0; v < values_.size(); ++v) {
    if (values_[v].kind != Value::Kind::kExternal) slots[v] = none;
  }
  return result;
}

int64_t Graph::find(std::string_view name, int64_t from) const {
  for (int64_t k = std::max<int64_t>(from, 0); k < static_cast<int64_t>(nodes_.size()); ++k) {
    if (nodes_[static_cast<size_t>(k)].name == name) return k;
  }
  return -1;
}

Node& Graph::node(int64_t k) {
  DT_CHECK(k >= 0 && k < static_cast<int64_t>(nodes_.size()),
           "[compile] node %d is out of range (the graph has %d)", k, nodes_.size());
  return nodes_[static_cast<size_t>(k)];
}

ValueId Graph::add_external(const Tensor& t) {
  DT_CHECK(t.defined(), "[compile] add_external: the tensor is undefined");
  Value& v = values_.emplace_back();
  v.kind = Value::Kind::kExternal;
  v.sizes = t.sizes();
  v.dtype = t.dtype();
  v.nbytes = static_cast<int64_t>(t.nbytes());
  v.external = t;
  return static_cast<ValueId>(values_.size() - 1);
}

ValueId Graph::add_value(IntSpan sizes, DType dtype) {
  Value& v = values_.emplace_back();
  v.kind = Value::Kind::kProduced;
  v.sizes.assign(sizes.begin(), sizes.end());
  v.dtype = dtype;
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  v.nbytes = n * static_cast<int64_t>(dtype_size(dtype));
  return static_cast<ValueId>(values_.size() - 1);
}

void Graph::insert(int64_t k, Node n) {
  DT_CHECK(k >= 0 && k <= static_cast<int64_t>(nodes_.size()),
           "[compile] insert at %d: out of range (the graph has %d nodes)", k, nodes_.size());
  DT_CHECK(static_cast<bool>(n.fn), "[compile] insert: node '%s' has no computation", n.name);
  nodes_.insert(nodes_.begin() + k, std::move(n));
}

void Graph::erase(int64_t k) {
  node(k);  // range check
  nodes_.erase(nodes_.begin() + k);
}

void Graph::check() const {
  std::vector<bool> made(values_.size(), false);
  for (size_t v = 0; v < values_.size(); ++v) {
    made[v] = values_[v].kind != Value::Kind::kProduced;
  }
  for (size_t k = 0; k < nodes_.size(); ++k) {
    const Node& n = nodes_[k];
    for (ValueId v : n.inputs) {
      DT_CHECK(v == kNoValue || (v >= 0 && static_cast<size_t>(v) < values_.size() &&
                                 made[static_cast<size_t>(v)]),
               "[compile] node %d (%s %s) reads %s before any node makes it", k, n.kind, n.name,
               value_name(*this, v));
    }
    for (ValueId v : n.outputs) {
      DT_CHECK(v == kNoValue || (v >= 0 && static_cast<size_t>(v) < values_.size()),
               "[compile] node %d (%s %s) writes value %d, which the graph does not have", k,
               n.kind, n.name, v);
      if (v != kNoValue) made[static_cast<size_t>(v)] = true;
    }
  }
  for (ValueId v : outputs_) {
    DT_CHECK(v >= 0 && static_cast<size_t>(v) < values_.size() && made[static_cast<size_t>(v)],
             "[compile] the step returns %s, which no node makes", value_name(*this, v));
  }
}

}  // namespace dtensor::compiler
