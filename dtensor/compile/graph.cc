#include "dtensor/compile/graph.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "dtensor/collectives/comm_worker.h"
#include "dtensor/compile/detail/replay_pool.h"
#include "dtensor/compile/detail/running.h"
#include "dtensor/tensor/detail/storage_pool.h"
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

// Drops a slot's handle: destroyed and made again empty in place (assigning an empty Tensor
// would copy its unused inline shape storage too).
void drop(Tensor& t) {
  std::destroy_at(&t);
  std::construct_at(&t);
}

}  // namespace

Graph::Graph() : pool_(std::make_unique<ReplayPool>()) {}

Graph::~Graph() = default;

int64_t Graph::kept_bytes() const {
  return pool_->bytes();
}

int64_t Graph::arena_bytes() const {
  return pool_->arena_bytes();
}

int64_t Graph::planned_live_peak() const {
  return pool_->planned_live_peak();
}

int Graph::plan_deviations() const {
  return pool_->deviations();
}

void release_kept_storages(const Graph& g) {
  g.pool_->release();
}

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

void Graph::prepare_walk() const {
  walk_.clear();
  walk_ids_.clear();
  size_t widest_in = 0, widest_out = 0;
  // [first, +n) when `ids` are n consecutive values (none absent), else -1.
  auto run_of = [](const std::vector<ValueId>& ids) -> int32_t {
    if (ids.empty()) return 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] == kNoValue || ids[i] != ids[0] + static_cast<ValueId>(i)) return -1;
    }
    return ids[0];
  };
  auto append = [&](const std::vector<ValueId>& ids) {
    const auto begin = static_cast<uint32_t>(walk_ids_.size());
    walk_ids_.insert(walk_ids_.end(), ids.begin(), ids.end());
    return begin;
  };
  static const std::vector<ValueId> kNone;
  for (size_t k = 0; k < nodes_.size(); ++k) {
    const Node& n = nodes_[k];
    Step st{};
    st.fn = &n.fn;
    st.in_count = static_cast<uint32_t>(n.inputs.size());
    st.in_begin = append(n.inputs);
    // Read in place unless async (the communication thread needs its own handles).
    st.in_first = n.async ? -1 : run_of(n.inputs);
    st.moves = k < last_read_.size() ? last_read_[k] : 0;
    st.out_count = static_cast<uint32_t>(n.outputs.size());
    st.out_begin = append(n.outputs);
    st.out_first = n.async ? -1 : run_of(n.outputs);
    const std::vector<ValueId>& dead = k < free_after_.size() ? free_after_[k] : kNone;
    st.free_count = static_cast<uint32_t>(dead.size());
    st.free_begin = append(dead);
    st.async = n.async;
    st.fences = has_async_ && !n.async &&
                (n.mutated_inputs != 0 || (n.kind != "op" && n.kind != "redistribute"));
    if (st.in_first < 0) widest_in = std::max(widest_in, n.inputs.size());
    if (st.out_first < 0) widest_out = std::max(widest_out, n.outputs.size());
    walk_.push_back(st);
  }
  walk_inputs_.clear();
  walk_reset_.clear();
  for (size_t v = 0; v < values_.size(); ++v) {
    if (values_[v].kind == Value::Kind::kExternal) continue;
    walk_reset_.push_back(static_cast<int32_t>(v));
    if (values_[v].kind == Value::Kind::kInput) {
      walk_inputs_.emplace_back(static_cast<int32_t>(v), values_[v].input_index);
    }
  }
  args_.clear();
  args_.reserve(widest_in);
  scratch_.clear();
  scratch_.resize(widest_out);
  async_bufs_.clear();
  async_bufs_.resize(has_async_ ? nodes_.size() : 0);
  async_count_ = 0;
  for (size_t k = 0; has_async_ && k < nodes_.size(); ++k) {
    if (!nodes_[k].async) continue;
    async_bufs_[k].held.reserve(nodes_[k].inputs.size());
    async_bufs_[k].outs.resize(nodes_[k].outputs.size());
    ++async_count_;
  }
  pending_.assign(has_async_ ? values_.size() : 0, -1);
  // A replay never needs more kept storages than the values it makes.
  size_t produced = 0;
  for (const Value& v : values_) produced += v.kind == Value::Kind::kProduced ? 1 : 0;
  pool_->set_limit(reuse_storages_ ? produced : 0);
  pool_->set_flights(static_cast<uint32_t>(async_count_));
  walk_ready_ = true;
}

DTensorList Graph::run(const DTensorList& inputs, ReplayProfile* profile,
                       const RunHooks* hooks) const {
  // Every rank runs the same nodes, so every rank raises here at the same node, before the inner
  // replay's first collective (the outer replay's moves in flight are waited for as it unwinds).
  DT_CHECK(!RunningScope::running(this),
           "[compile] Graph::run: the graph was replayed from inside its own replay (by code one "
           "of its nodes runs: an EagerFunction or an override's module, on this thread); the "
           "inner replay would reuse the slots and kept storages the outer one is using. Call "
           "the uncompiled code there instead");
  const RunningScope running(this);
  if (!walk_ready_ || walk_.size() != nodes_.size()) prepare_walk();
  // The slots live from replay to replay: the externals stay in place, the inputs are set per
  // call, the produced values are dropped by the plan or at the end.
  std::vector<Tensor>& slots = slots_;
  if (slots.size() != values_.size()) {
    slots.assign(values_.size(), Tensor());
    for (size_t v = 0; v < values_.size(); ++v) {
      if (values_[v].kind == Value::Kind::kExternal) slots[v] = values_[v].external;
    }
  }
  for (const auto& [v, index] : walk_inputs_) {
    slots[static_cast<size_t>(v)] = inputs[static_cast<size_t>(index)].to_local();
  }
  // Async nodes in flight: the node and its work; its input handles and outputs live in
  // async_bufs_[node] (kept from replay to replay: no allocation per node), written by the
  // communication thread and moved into the slots by the waiting thread; pending_[v]: the
  // flight making value v.
  struct Flight {
    size_t node;
    WorkPtr work;
  };
  std::vector<Flight> flights;
  if (has_async_) flights.reserve(async_count_);
  std::vector<int32_t>& pending = pending_;
  // This thread's allocations take the storages kept from earlier replays (and from values
  // dead earlier in this one) first; those of the communication thread take their planned CPU
  // memory (FlightScope), never kept storages.
  const ReplayPoolScope pooled(reuse_storages_ && hooks == nullptr ? pool_.get() : nullptr);
  // A hooked run (the CUDA-graph capture) allocates from its own pool and keeps nothing.
  struct HookedPool {
    dtensor::detail::StoragePool* previous = nullptr;
    bool set = false;
    ~HookedPool() {
      if (set) dtensor::detail::set_storage_pool(previous);
    }
  } hooked;
  if (hooks != nullptr && hooks->pool != nullptr) {
    hooked.previous = dtensor::detail::set_storage_pool(hooks->pool);
    hooked.set = true;
  }
  const bool keep = hooks == nullptr;
  auto give_up = [&](Tensor& t) {
    if (keep) {
      pool_->recycle(t);
    } else {
      drop(t);
    }
  };
  auto observe = [&](size_t k, absl::Span<const Tensor> in, bool after) {
    if (hooks != nullptr && hooks->observe) hooks->observe(k, in, after);
  };
  auto land = [&](int32_t f) {
    Flight& flight = flights[static_cast<size_t>(f)];
    if (flight.work == nullptr) return;
    flight.work->wait();
    flight.work = nullptr;
    if (reuse_storages_) pool_->landed(static_cast<uint32_t>(f));
    const Node& n = nodes_[flight.node];
    AsyncBuffers& buf = async_bufs_[flight.node];
    for (Tensor& t : buf.held) pool_->recycle(t);
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      if (n.outputs[o] != kNoValue) {
        slots[static_cast<size_t>(n.outputs[o])] = std::move(buf.outs[o]);
        pending[static_cast<size_t>(n.outputs[o])] = -1;
      }
      drop(buf.outs[o]);
    }
  };
  auto ready = [&](ValueId v) {
    if (v != kNoValue && pending[static_cast<size_t>(v)] >= 0) {
      land(pending[static_cast<size_t>(v)]);
    }
  };
  auto land_all = [&] {
    for (size_t f = 0; f < flights.size(); ++f) land(static_cast<int32_t>(f));
  };
  const int32_t* ids = walk_ids_.data();
  Tensor* const slot = slots.data();
  std::vector<Tensor>& args = args_;
  // Profiling times each node's computation alone, then the freeing after it. The end of one
  // node's freeing is the start of the next one's computation when nothing of the framework's ran
  // in between (inputs read in place, no argument handles to gather, nothing in flight); `marked`
  // says so, and the clock is then read twice per node, not three times (the walk's few
  // instructions from one node to the next count as kernel time).
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  Clock::time_point mark;
  bool marked = false;
  try {
    for (size_t k = 0; k < walk_.size(); ++k) {
      const Step& st = walk_[k];
      if (has_async_) {
        marked = false;
        // A node that writes in place or runs code the graph cannot see into waits for every
        // move in flight first: a move may still be reading what it writes.
        if (st.fences) land_all();
        for (uint32_t i = 0; i < st.in_count; ++i) ready(ids[st.in_begin + i]);
      }
      // The inputs: the slots themselves when they are consecutive, else handles gathered into
      // args_ (a value's last read hands the slot's handle over, so a node that checks whether
      // it holds the only handle, as gradient accumulation does, sees what the eager step saw;
      // a slot read in place is dropped by the plan after the node, which sees the same).
      absl::Span<const Tensor> in;
      if (st.in_first >= 0) {
        in = absl::MakeConstSpan(slot + st.in_first, st.in_count);
      } else {
        marked = false;
        for (uint32_t i = 0; i < st.in_count; ++i) {
          const ValueId v = ids[st.in_begin + i];
          if (v == kNoValue) {
            args.emplace_back();
          } else if (i < 64 && ((st.moves >> i) & 1u) != 0) {
            args.push_back(std::move(slot[v]));
          } else {
            args.push_back(slot[v]);
          }
        }
        in = absl::MakeConstSpan(args);
      }
      if (st.async) {
        // The communication thread gets its own input handles (the walk may drop or hand over
        // the slots meanwhile).
        AsyncBuffers* buf = &async_bufs_[k];
        buf->held.assign(in.begin(), in.end());
        const Node* n = &nodes_[k];
        // Its allocations (on the communication thread) follow the memory plan too.
        ReplayPool* pool = reuse_storages_ ? pool_.get() : nullptr;
        const auto flight = static_cast<uint32_t>(flights.size());
        if (pool != nullptr) pool->issued(flight);
        WorkPtr work = submit_async([n, buf, pool, flight] {
          const FlightScope planned(pool, flight);
          n->fn(absl::MakeConstSpan(buf->held), absl::MakeSpan(buf->outs));
        });
        args.clear();
        flights.push_back({k, std::move(work)});
        for (uint32_t o = 0; o < st.out_count; ++o) {
          const ValueId v = ids[st.out_begin + o];
          if (v != kNoValue)
            pending[static_cast<size_t>(v)] = static_cast<int32_t>(flights.size() - 1);
        }
        continue;
      }
      // The node's computation (writing its outputs into their slots; the few nodes whose
      // outputs are not consecutive slots write a scratch buffer, moved in), then the freeing of
      // the values it was the last to read: those the plan drops, and those handed over in its
      // gathered arguments, released here (a value's memory is freed when the node that read it
      // last ends, whichever way it was read). Profiled apart: kernel time, then free time.
      if (profile != nullptr && !marked) mark = Clock::now();
      if (hooks != nullptr) observe(k, in, false);
      if (st.out_first >= 0) {
        (*st.fn)(in, absl::MakeSpan(slot + st.out_first, st.out_count));
      } else {
        (*st.fn)(in, absl::MakeSpan(scratch_.data(), st.out_count));
        for (uint32_t o = 0; o < st.out_count; ++o) {
          const ValueId v = ids[st.out_begin + o];
          if (v != kNoValue) slot[v] = std::move(scratch_[o]);
          drop(scratch_[o]);
        }
      }
      if (hooks != nullptr) observe(k, in, true);
      if (profile != nullptr) {
        const Clock::time_point now = Clock::now();
        profile->kernel_seconds += seconds(mark, now);
        mark = now;
      }
      for (uint32_t d = 0; d < st.free_count; ++d) {
        const ValueId v = ids[st.free_begin + d];
        if (has_async_) ready(v);
        give_up(slot[v]);
      }
      if (!args.empty()) {
        for (Tensor& t : args) give_up(t);  // the handed-over values end here
        args.clear();
      }
      if (profile != nullptr) {
        const Clock::time_point now = Clock::now();
        profile->free_seconds += seconds(mark, now);
        mark = now;
        marked = true;
      }
    }
  } catch (...) {
    args.clear();
    for (Tensor& t : scratch_) drop(t);
    // No task may outlive the call reading this graph's nodes, slots or buffers.
    for (Flight& f : flights) {
      if (f.work == nullptr) continue;
      try {
        f.work->wait();
      } catch (...) {
      }
      for (Tensor& t : async_bufs_[f.node].held) drop(t);
      for (Tensor& t : async_bufs_[f.node].outs) drop(t);
    }
    if (has_async_) std::fill(pending.begin(), pending.end(), -1);
    throw;
  }
  land_all();
  DTensorList result;
  for (size_t o = 0; o < outputs_.size(); ++o) {
    result.emplace_back(slots[static_cast<size_t>(outputs_[o])], output_specs_[o]);
  }
  for (const int32_t v : walk_reset_) give_up(slots[static_cast<size_t>(v)]);
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
  walk_ready_ = false;
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
  walk_ready_ = false;
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
  walk_ready_ = false;
  return static_cast<ValueId>(values_.size() - 1);
}

void Graph::insert(int64_t k, Node n) {
  DT_CHECK(k >= 0 && k <= static_cast<int64_t>(nodes_.size()),
           "[compile] insert at %d: out of range (the graph has %d nodes)", k, nodes_.size());
  DT_CHECK(static_cast<bool>(n.fn), "[compile] insert: node '%s' has no computation", n.name);
  nodes_.insert(nodes_.begin() + k, std::move(n));
  walk_ready_ = false;
}

void Graph::erase(int64_t k) {
  node(k);  // range check
  nodes_.erase(nodes_.begin() + k);
  walk_ready_ = false;
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
