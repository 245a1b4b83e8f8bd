#include "dtensor/compile/compile.h"

#include <absl/container/flat_hash_map.h>
#include <absl/strings/str_cat.h>

#include <algorithm>
#include <bit>
#include <iterator>
#include <utility>

#include "dtensor/collectives/runtime.h"
#include "dtensor/compile/detail/cuda_graph.h"
#include "dtensor/compile/detail/replay_pool.h"
#include "dtensor/compile/detail/running.h"
#include "dtensor/core/detail/captured_move.h"
#include "dtensor/tensor/detail/capture_hook.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace compiler {

// Records a step into a Graph while it runs eagerly: the CaptureRecorder of this thread for
// the duration of the capture (dtensor/tensor/detail/capture_hook.h).
class Builder final : public detail::CaptureRecorder {
 public:
  explicit Builder(Graph& g) : g_(g) {}

  void add_input(const DTensor& t, int32_t index) {
    auto same = ids_.find(key(t.to_local()));
    DT_CHECK(same == ids_.end(),
             "[compile] inputs %d and %d of the step are the same tensor: pass distinct tensors "
             "(the graph would read both from one input)",
             g_.values_[static_cast<size_t>(same == ids_.end() ? 0 : same->second)].input_index,
             index);
    const ValueId v = new_value(t.to_local(), Value::Kind::kInput);
    g_.values_[static_cast<size_t>(v)].input_index = index;
    ranks_[static_cast<size_t>(v)] = sorted_ranks(t.device_mesh());
    g_.input_specs_.push_back(t.spec_ptr());
    g_.input_requires_grad_.push_back(t.requires_grad());
  }

  void record(const detail::CaptureEvent& e, detail::ReplayFn fn) override {
    // A primitive on meta tensors (a parameter or state on the meta device, the inputs checked
    // in capture()) cannot be captured: see refuse_meta.
    for (const Tensor& t : e.outputs) {
      if (t.defined() && t.device().is_meta()) refuse_meta(std::string(e.kind) + " " + e.name);
    }
    Node n;
    n.kind = std::string(e.kind);
    n.name = e.name;
    n.detail = e.detail;
    n.mutated_inputs = e.mutated_inputs;
    n.move_src = e.move_src;
    n.move_dst = e.move_dst;
    n.move_src_partial = e.move_src_partial;
    n.payload = e.payload;
    n.fn = std::move(fn);
    n.collectives = std::move(pending_);
    pending_.clear();
    for (const Tensor& t : e.inputs) n.inputs.push_back(value_of(t));
    n.ranks = ranks_of(n);
    const int32_t node_index = static_cast<int32_t>(g_.nodes_.size());
    for (const Tensor& t : e.outputs) {
      if (!t.defined()) {  // an optional output not produced (an eager node's absent gradient)
        n.outputs.push_back(kNoValue);
        continue;
      }
      made_.erase(t.storage().id());  // declared: its other views are the node's too
      const ValueId v = new_value(t, Value::Kind::kProduced);
      g_.values_[static_cast<size_t>(v)].producer = node_index;
      ranks_[static_cast<size_t>(v)] = n.ranks;
      n.outputs.push_back(v);
    }
    for (const Collective& c : n.collectives) {
      g_.stats_.collectives += 1;
      g_.stats_.collective_bytes += c.bytes;
    }
    g_.nodes_.push_back(std::move(n));
  }

  void note_collective(std::string_view kind, int64_t bytes) override {
    pending_.push_back({std::string(kind), bytes});
  }

  void note_allocation(const void* storage_id) override {
    made_[storage_id] = depth > 0 ? Made::kInsidePrimitive : Made::kOutside;
  }

  void keep(const void* storage_id) override {
    made_.erase(storage_id);
    // State made by a factory that a recorded primitive just made (DTensor zeros_like records
    // itself in a capture, so that backward formulas' zeros replay): replay must keep updating
    // this very tensor, not make a fresh one each step. The node goes; its value becomes the
    // graph's own tensor.
    if (g_.nodes_.empty()) return;
    Node& last = g_.nodes_.back();
    if (!last.inputs.empty() || last.outputs.size() != 1 || last.outputs[0] == kNoValue) return;
    const auto v = static_cast<size_t>(last.outputs[0]);
    if (captured_[v].storage().id() != storage_id) return;
    Value& value = g_.values_[v];
    value.kind = Value::Kind::kExternal;
    value.producer = -1;
    value.external = captured_[v];
    g_.nodes_.pop_back();
  }

  [[noreturn]] void refuse(const std::string& what) override {
    DT_FAIL(
        "[compile] the step cannot be captured: it runs %s. Run this step eagerly (without "
        "dtensor::compile); see docs/guides/compiling_a_step.md, 'What cannot be captured'",
        what);
  }

  // Meta tensors have no storage, so the capture cannot tell two of one geometry apart (it
  // keys values by their memory) and a replay would have no data to compute on: the step is
  // refused rather than recorded wrong. (PyTorch traces under FakeTensorMode instead; a dry
  // run reads its shapes, memory and CommDebugMode counts from the eager step.)
  [[noreturn]] static void refuse_meta(const std::string& where) {
    DT_FAIL(
        "[compile] cannot capture a step on the meta device: %s has meta tensors, which hold no "
        "data to record or replay. Run a meta (dry-run) step eagerly, without dtensor::compile",
        where);
  }

  void set_outputs(const DTensorList& outputs) {
    for (size_t o = 0; o < outputs.size(); ++o) {
      DT_CHECK(outputs[o].defined(), "[compile] the step returned an undefined DTensor (output %d)",
               o);
      // On a rank outside its mesh an output is an empty placeholder that no recorded primitive
      // made (dispatch skips the op here): replay returns it as it is.
      g_.outputs_.push_back(outputs[o].device_mesh().contains_me()
                                ? value_of(outputs[o].to_local())
                                : new_value(outputs[o].to_local(), Value::Kind::kExternal));
      g_.output_specs_.push_back(outputs[o].spec_ptr());
    }
  }

  // Every value's captured tensor, by id (for the passes).
  const std::vector<Tensor>& captured() const { return captured_; }

 private:
  // Identity of a local tensor: the memory it views and how. Every captured tensor is held until
  // the capture ends, so no address is reused for another tensor meanwhile. Tensors without
  // memory (no elements) of one geometry are interchangeable.
  static std::string key(const Tensor& t) {
    return absl::StrCat(reinterpret_cast<uintptr_t>(t.storage().data()), "/",
                        static_cast<int>(t.device().type), ":", t.device().index, "/",
                        t.storage_offset(), "/", shape_str(t.sizes()), "/", shape_str(t.strides()),
                        "/", static_cast<int>(t.dtype()));
  }

  ValueId new_value(const Tensor& t, Value::Kind kind) {
    const ValueId v = static_cast<ValueId>(g_.values_.size());
    Value value;
    value.kind = kind;
    value.sizes = t.sizes();
    value.dtype = t.dtype();
    value.nbytes = static_cast<int64_t>(t.nbytes());
    if (kind == Value::Kind::kExternal) value.external = t;
    g_.values_.push_back(std::move(value));
    captured_.push_back(t);
    ranks_.emplace_back();
    ids_[key(t)] = v;
    return v;
  }

  // The value a node reads: the latest value with t's identity, else a new external one (a
  // tensor made before the step or outside any recorded primitive).
  ValueId value_of(const Tensor& t) {
    if (!t.defined()) return kNoValue;
    auto it = ids_.find(key(t));
    if (it != ids_.end()) return it->second;
    // Made during the step by something replay does not run: it would read this step's value
    // forever after.
    auto made = made_.find(t.storage().id());
    if (made != made_.end() && t.numel() == 0) {
      // An empty placeholder: what a rank outside a DTensor's mesh holds (dispatch skips the op
      // there), read by a host step such as the gradient's accumulation. It has no values to go
      // stale, so replay may read this one; the nodes reading it are this rank's alone (ranks
      // {-1}: left out of every cross-rank comparison).
      const ValueId v = new_value(t, Value::Kind::kExternal);
      ranks_[static_cast<size_t>(v)] = {-1};
      return v;
    }
    if (made != made_.end()) {
      refuse(made->second == Made::kOutside
                 ? absl::StrCat("local Tensor computation outside DTensor ops (a ",
                                shape_str(t.sizes()),
                                " tensor made in the step is read by a DTensor op: create it "
                                "before the step and pass it in, or compute it with DTensor ops)")
                 : absl::StrCat("a ", shape_str(t.sizes()),
                                " tensor that a library step made without declaring it (internal "
                                "error of the capture, please report it)"));
    }
    return new_value(t, Value::Kind::kExternal);
  }

  static std::vector<int> sorted_ranks(const DeviceMesh& mesh) {
    std::vector<int> r = mesh.ranks();
    std::sort(r.begin(), r.end());
    return r;
  }

  // The ranks that record node n (Node::ranks): an op's mesh, a move's source and target meshes,
  // else {-1} when it reads a placeholder (see value_of), else those of the first input whose mesh
  // is known (a gradient's accumulation, an optimizer update); empty when none is.
  std::vector<int> ranks_of(const Node& n) const {
    if (n.payload != nullptr && n.kind == "redistribute") {
      const auto* m = static_cast<const detail::CapturedMove*>(n.payload.get());
      std::vector<int> r = sorted_ranks(m->src->mesh());
      const std::vector<int> d = sorted_ranks(m->dst->mesh());
      std::vector<int> both;
      std::set_union(r.begin(), r.end(), d.begin(), d.end(), std::back_inserter(both));
      return both;
    }
    if (n.payload != nullptr && n.kind == "op") {
      return sorted_ranks(static_cast<const DTensorSpec*>(n.payload.get())->mesh());
    }
    const std::vector<int>* known = nullptr;
    for (ValueId v : n.inputs) {
      if (v == kNoValue) continue;
      const std::vector<int>& r = ranks_[static_cast<size_t>(v)];
      if (r.size() == 1 && r[0] == -1) return r;
      if (known == nullptr && !r.empty()) known = &r;
    }
    return known == nullptr ? std::vector<int>() : *known;
  }

  enum class Made : uint8_t { kInsidePrimitive, kOutside };

  Graph& g_;
  absl::flat_hash_map<std::string, ValueId> ids_;
  // Storages allocated during the capture and not (yet) a node's declared output nor kept.
  absl::flat_hash_map<const void*, Made> made_;
  std::vector<Tensor> captured_;
  std::vector<std::vector<int>> ranks_;  // per value: its producer's Node::ranks (an input's mesh)
  std::vector<Collective> pending_;
};

namespace {

// Installs the builder as this thread's recorder for the scope.
class RecordingScope {
 public:
  explicit RecordingScope(detail::CaptureRecorder* r) {
    DT_CHECK(detail::capture_recorder() == nullptr,
             "[compile] a compiled step was called while another step is being captured "
             "(compiled steps do not nest)");
    detail::set_capture_recorder(r);
  }
  ~RecordingScope() { detail::set_capture_recorder(nullptr); }
  RecordingScope(const RecordingScope&) = delete;
  RecordingScope& operator=(const RecordingScope&) = delete;
};

// Makes the overrides' replacements stand in for their submodules for the scope (a stand-in
// is called wherever the submodule is, through its parent's member pointers too); takes them
// away at its end, also when the capture raises.
class Replacements {
 public:
  Replacements(nn::Module* root, const std::vector<std::shared_ptr<Override>>& overrides) {
    if (overrides.empty()) return;
    DT_CHECK(root != nullptr,
             "[compile] CompileOptions::overrides are given without CompileOptions::module (the "
             "module whose submodules they replace)");
    visit(*root, "", overrides);
  }
  ~Replacements() {
    for (nn::Module* m : replaced_) m->set_stand_in(nullptr);
  }
  Replacements(const Replacements&) = delete;
  Replacements& operator=(const Replacements&) = delete;

 private:
  void visit(nn::Module& parent, const std::string& prefix,
             const std::vector<std::shared_ptr<Override>>& overrides) {
    for (const auto& [name, child] : parent.named_children()) {
      const std::string fqn = prefix.empty() ? name : prefix + "." + name;
      std::shared_ptr<nn::Module> chosen;
      for (const auto& o : overrides) {
        chosen = o->replacement(fqn, child);
        if (chosen != nullptr) break;
      }
      if (chosen != nullptr) {
        child->set_stand_in(std::move(chosen));
        replaced_.push_back(child.get());
      } else {
        visit(*child, fqn, overrides);
      }
    }
  }

  std::vector<nn::Module*> replaced_;
};

std::string node_text(const Node& n) {
  return absl::StrCat(n.kind, " ", n.name, " ", n.detail);
}

}  // namespace
}  // namespace compiler

CompiledStep::CompiledStep(StepFn fn, CompileOptions options)
    : CompiledStep(fn == nullptr ? ScalarStepFn()
                                 : ScalarStepFn([fn = std::move(fn)](const DTensorList& inputs,
                                                                     const std::vector<double>&) {
                                     return fn(inputs);
                                   }),
                   std::move(options)) {
  takes_scalars_ = false;
}

CompiledStep::CompiledStep(ScalarStepFn fn, CompileOptions options)
    : fn_(std::move(fn)), options_(std::move(options)) {
  DT_CHECK(static_cast<bool>(fn_), "[compile] the step function is empty");
  DT_CHECK(options_.max_graphs >= 1, "[compile] max_graphs must be at least 1, got %d",
           options_.max_graphs);
}

CompiledStep::Captured* CompiledStep::match_layout(const DTensorList& inputs, size_t scalar_count) {
  for (Captured& c : graphs_) {
    const auto& specs = c.graph->input_specs();
    if (specs.size() != inputs.size() || c.scalars.size() != scalar_count) continue;
    bool same = true;
    for (size_t i = 0; same && i < inputs.size(); ++i) {
      same = inputs[i].defined() && inputs[i].spec() == *specs[i] &&
             inputs[i].requires_grad() == c.graph->input_requires_grad()[i];
    }
    if (same) return &c;
  }
  return nullptr;
}

DTensorList CompiledStep::capture(const DTensorList& inputs, const std::vector<double>& scalars,
                                  std::unique_ptr<compiler::Graph>& graph) {
  graph = std::make_unique<compiler::Graph>();
  compiler::Builder builder(*graph);
  for (size_t i = 0; i < inputs.size(); ++i) {
    DT_CHECK(inputs[i].defined(), "[compile] input %d of the step is an undefined DTensor", i);
    if (inputs[i].device().is_meta()) {
      compiler::Builder::refuse_meta(absl::StrCat("input ", i, " of the step"));
    }
    builder.add_input(inputs[i], static_cast<int32_t>(i));
  }
  DTensorList outputs;
  {
    const compiler::Replacements replaced(options_.module, options_.overrides);
    const compiler::RecordingScope recording(&builder);
    outputs = fn_(inputs, scalars);
    builder.set_outputs(outputs);
  }
  DT_CHECK(!graph->nodes().empty(),
           "[compile] the step ran no DTensor op, redistribute or optimizer update: there is "
           "nothing to capture (does the function compute on DTensors?)");
  if (options_.remove_redundant_moves) {
    compiler::remove_redundant_moves(*graph, builder.captured());
  }
  if (options_.dedup_collectives) compiler::dedup_collectives(*graph, builder.captured());
  if (options_.bucket_bytes > 0) {
    compiler::bucket_reductions(*graph, builder.captured(), options_.bucket_bytes);
  }
  std::vector<Tensor> params;
  if (options_.module != nullptr) {
    for (const DTensor& p : options_.module->parameters()) params.push_back(p.to_local());
  }
  compiler::tag_roles(*graph, builder.captured(), params);
  if (options_.schedule_collectives) compiler::schedule_collectives(*graph, builder.captured());
  for (const auto& o : options_.overrides) o->transform(*graph);
  if (!options_.overrides.empty()) graph->check();
  compiler::plan_memory(*graph, options_.memory_plan);
  compiler::check_ranks_agree(*graph, inputs, outputs);
  ++captures_;
  return outputs;
}

namespace {

// Bit equality: a scalar guard holds for exactly the value captured (NaN included; 0.0 and -0.0
// are different values, as division by them shows).
bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](double x, double y) {
           return std::bit_cast<uint64_t>(x) == std::bit_cast<uint64_t>(y);
         });
}

// The first scalar whose value differs: "scalar 1 was 2 at the capture, now 4".
std::string first_changed_scalar(const std::vector<double>& was, const std::vector<double>& now) {
  for (size_t i = 0; i < was.size(); ++i) {
    if (std::bit_cast<uint64_t>(was[i]) != std::bit_cast<uint64_t>(now[i])) {
      return absl::StrCat("scalar ", i, " was ", was[i], " at the capture, now ", now[i]);
    }
  }
  return "no scalar changed";
}

}  // namespace

DTensorList CompiledStep::call(const DTensorList& inputs, const std::vector<double>& scalars) {
  // Raised where the step's own code calls it (the same point on every rank), before any
  // collective of the inner call; a replay that raises waits for its moves in flight.
  DT_CHECK(!compiler::RunningScope::running(this),
           "[compile] the compiled step was called from inside its own capture or replay (by the "
           "step function, an EagerFunction or an override's module it runs, on this thread); a "
           "step cannot run inside itself. Call the uncompiled step function or module there "
           "instead");
  const compiler::RunningScope running(this);
  // The guard below is decided on each rank: with scalars that differ between ranks, some would
  // re-capture while the others replay. One small all-gather per call of a step compiled with
  // scalars (even one passing none: its peers may pass some) makes them agree first, or raises
  // on every rank; a step compiled without scalars takes none (its type has no call passing
  // them, so no rank can) and pays nothing.
  if (takes_scalars_) compiler::check_scalars_agree(inputs, scalars);
  Captured* layout = match_layout(inputs, scalars.size());
  if (layout != nullptr && !same_bits(layout->scalars, scalars)) {
    // Specialised on other scalar values: capture again in its place (torch.compile's guard on
    // a Python float's value), so that a changing value never replays a stale constant.
    DT_CHECK(options_.recapture_on_guard_failure,
             "[compile] the step's host scalars differ from those it was captured with (%s) and "
             "recapture_on_guard_failure is off; pass a value that changes every step as a 0-dim "
             "DTensor input instead",
             first_changed_scalar(layout->scalars, scalars));
    // The graph being replaced keeps storages for replays that will not come: freed before the
    // capture runs the step eagerly beside them.
    compiler::release_kept_storages(*layout->graph);
    std::unique_ptr<compiler::Graph> fresh;
    DTensorList out = capture(inputs, scalars, fresh);
    layout->graph = std::move(fresh);
    layout->scalars = scalars;
    layout->cuda = nullptr;
    layout->cuda_status.clear();
    last_ = layout->graph.get();
    ++scalar_recaptures_;
    return out;
  }
  if (layout == nullptr) {
    DT_CHECK(graphs_.empty() || options_.recapture_on_guard_failure,
             "[compile] the step's inputs do not match the captured graph (shape, dtype, "
             "placements, mesh, requires_grad or the number of scalars differ) and "
             "recapture_on_guard_failure is off");
    DT_CHECK(static_cast<int>(graphs_.size()) < options_.max_graphs,
             "[compile] the step was captured for %d input layouts already (max_graphs); "
             "inputs of yet another layout were given",
             graphs_.size());
    std::unique_ptr<compiler::Graph> fresh;
    DTensorList out = capture(inputs, scalars, fresh);
    graphs_.push_back({std::move(fresh), scalars, nullptr, {}});
    last_ = graphs_.back().graph.get();
    return out;
  }
  const compiler::Graph* g = layout->graph.get();
  ++replays_;
  if (options_.validate_every > 0 && replays_ % options_.validate_every == 0) {
    // Replaced by the capture's graph, so its kept storages are freed first (should the check
    // raise, it stays, and its next replay keeps storages again).
    compiler::release_kept_storages(*g);
    std::unique_ptr<compiler::Graph> fresh;
    DTensorList out = capture(inputs, scalars, fresh);
    const auto& a = g->nodes();
    const auto& b = fresh->nodes();
    for (size_t k = 0; k < std::max(a.size(), b.size()); ++k) {
      const std::string was = k < a.size() ? compiler::node_text(a[k]) : "(the end)";
      const std::string now = k < b.size() ? compiler::node_text(b[k]) : "(the end)";
      DT_CHECK(was == now,
               "[compile] the step's op sequence changed since it was captured (data-dependent "
               "control flow?): node %d was '%s', now '%s'. Such a step cannot be compiled: run "
               "it eagerly",
               k, was, now);
    }
    layout->graph = std::move(fresh);
    layout->cuda = nullptr;
    layout->cuda_status.clear();
    last_ = layout->graph.get();
    return out;
  }
  last_ = g;
  last_profile_ = {};
  if (options_.cuda_graph) return cuda_replay(*layout, inputs);
  return g->run(inputs, options_.profile ? &last_profile_ : nullptr);
}

DTensorList CompiledStep::cuda_replay(Captured& c, const DTensorList& inputs) {
  const compiler::Graph& g = *c.graph;
  if (c.cuda != nullptr) return c.cuda->replay(inputs);
  if (!c.cuda_status.empty()) {  // fell back: the reason is kept
    return g.run(inputs, options_.profile ? &last_profile_ : nullptr);
  }
  std::string why = compiler::cuda_graph_refusal(g, inputs, options_.profile);
  std::shared_ptr<compiler::CudaGraphReplay> cuda;
  compiler::CudaGraphOutcome mine{compiler::CudaGraphOutcome::kFellBack, world_rank()};
  if (why.empty()) {
    cuda = compiler::make_cuda_graph_replay();
    if (cuda == nullptr) {
      why = "dtensor was built without CUDA";
    } else {
      try {
        mine.state = cuda->capture(g, inputs, why);
      } catch (const std::exception& e) {  // before the capture ran: nothing changed
        why = e.what();
        cuda = nullptr;
      }
    }
  }
  // The ranks agree on the outcome when the step's tensors are on CUDA (each rank's capture may
  // fail on its own data; see agree_cuda_graph_outcome); a CPU step is refused alike everywhere
  // and communicates nothing here.
  bool on_cuda = false;
  for (const DTensor& t : inputs) on_cuda = on_cuda || t.to_local().device().is_cuda();
  const compiler::CudaGraphOutcome all =
      on_cuda && !options_.profile ? compiler::agree_cuda_graph_outcome(inputs, mine) : mine;
  if (all.state == compiler::CudaGraphOutcome::kFailedAfterHostState) {
    DT_FAIL(
        "[compile] CUDA-graph capture of the step failed on rank %d after a node that changes "
        "host-side state had run (the optimizer's, or a gradient's accumulation, which binds "
        ".grad to memory the failed capture never wrote)%s; the step's state is no longer "
        "consistent. Turn CompileOptions::cuda_graph off for this step",
        all.rank, all.rank == mine.rank ? absl::StrCat(": ", why) : " (its error names why)");
  }
  if (mine.state == compiler::CudaGraphOutcome::kCaptured) {
    // This rank's capture ran the step's host side: its graph does this step, even when another
    // rank fell back (whose plain replay issues the same collectives in the same order).
    DTensorList out = cuda->launch_captured();
    if (all.state == compiler::CudaGraphOutcome::kCaptured) {
      c.cuda_status = cuda->describe();
      c.cuda = std::move(cuda);
    } else {
      c.cuda_status = absl::StrCat("fallback: rank ", all.rank,
                                   " could not capture the step (its cuda_graph_status names "
                                   "why); this rank's graph did the first step only");
    }
    return out;
  }
  c.cuda_status = "fallback: " + why;
  return g.run(inputs, options_.profile ? &last_profile_ : nullptr);
}

std::string CompiledStep::cuda_graph_status() const {
  DT_CHECK(last_ != nullptr, "[compile] the step has not been called yet: no CUDA-graph status");
  if (!options_.cuda_graph) return "off";
  for (const Captured& c : graphs_) {
    if (c.graph.get() == last_) return c.cuda_status.empty() ? "pending" : c.cuda_status;
  }
  return "pending";
}

const compiler::Graph& CompiledStep::graph() const {
  DT_CHECK(last_ != nullptr, "[compile] the step has not been called yet: no graph");
  return *last_;
}

CompiledStep compile(CompiledStep::StepFn fn, CompileOptions options) {
  return CompiledStep(std::move(fn), std::move(options));
}

CompiledScalarStep::CompiledScalarStep(ScalarStepFn fn, CompileOptions options)
    : CompiledStep(std::move(fn), std::move(options)) {}

CompiledScalarStep compile(CompiledStep::ScalarStepFn fn, CompileOptions options) {
  return CompiledScalarStep(std::move(fn), std::move(options));
}

}  // namespace dtensor
