#include "dtensor/nn/activation_checkpoint.h"

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>

#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "dtensor/autograd/create_graph.h"
#include "dtensor/autograd/engine.h"
#include "dtensor/autograd/function.h"
#include "dtensor/autograd/grad_mode.h"
#include "dtensor/autograd/node.h"
#include "dtensor/nn/detail/forward_context_scope.h"
#include "dtensor/rng/generator.h"
#include "dtensor/tensor/error.h"

namespace dtensor::nn {
namespace {

// A tensor the checkpoint's node takes as an input: fn's input i or a parameter of the module.
struct SavedInput {
  DTensor value;  // detached: the node's edge, not this, keeps the producer's graph
  bool requires_grad = false;
  uint32_t version = 0;  // storage version after the forward (inputs only)
  // Parameters: the module slots (module, own name) holding it.
  std::vector<std::pair<Module*, std::string>> slots;
};

// Everything the recompute needs; owned by the node's backward function (freed after backward
// unless retain_graph).
struct Saved {
  CheckpointFunction fn;
  std::vector<SavedInput> inputs;  // fn's inputs, then the module's parameters
  size_t num_fn_inputs = 0;
  std::vector<std::pair<Generator*, GeneratorState>> rng;  // empty: not preserved
  std::vector<std::shared_ptr<const DTensorSpec>> output_specs;
};

uint32_t version_of(const DTensor& t) {
  return t.defined() ? t.to_local().storage().version() : 0;
}

// The module tree's parameters that require grad, each once (a tied parameter has several
// slots), in pre-order.
std::vector<SavedInput> collect_parameters(Module& module) {
  std::vector<SavedInput> params;
  absl::flat_hash_map<const AutogradMeta*, size_t> index;
  for (auto& [fqn, m] : module.named_modules()) {
    for (const auto& [name, value] : m->own_parameters()) {
      if (!value.defined() || !value.requires_grad()) continue;
      auto [it, fresh] = index.emplace(value.autograd_meta().get(), params.size());
      if (fresh) {
        SavedInput p;
        p.value = value;  // kept attached until the node is recorded (its edge), then detached
        p.requires_grad = true;
        params.push_back(std::move(p));
      }
      params[it->second].slots.emplace_back(m, name);
    }
  }
  return params;
}

// The default generators random ops inside fn may draw from: the CPU one, and the CUDA one of
// each device an input or parameter lives on (PyTorch's preserve_rng_state saves the same).
std::vector<std::pair<Generator*, GeneratorState>> rng_states(const std::vector<SavedInput>& ins) {
  std::vector<std::pair<Generator*, GeneratorState>> out;
  Generator& cpu = default_generator(Device());
  out.emplace_back(&cpu, cpu.state());
  for (const SavedInput& in : ins) {
    if (!in.value.defined() || in.value.device().is_cpu()) continue;
    Generator* g = &default_generator(in.value.device());
    bool seen = false;
    for (const auto& [have, state] : out) seen = seen || have == g;
    if (!seen) out.emplace_back(g, g->state());
  }
  return out;
}

// Puts stand-ins into the module slots of the parameters for the recompute, and what the slots
// held back on destruction (an exception too).
class SwapParameters {
 public:
  SwapParameters(const std::vector<SavedInput>& params, const DTensorList& stand_ins) {
    for (size_t i = 0; i < params.size(); ++i) {
      for (const auto& [m, name] : params[i].slots) {
        held_.emplace_back(m, name, m->param(name));
        m->swap_parameter(name, stand_ins[i]);
      }
    }
  }
  ~SwapParameters() {
    for (auto& [m, name, value] : held_) m->swap_parameter(name, value);
  }
  SwapParameters(const SwapParameters&) = delete;
  SwapParameters& operator=(const SwapParameters&) = delete;

 private:
  std::vector<std::tuple<Module*, std::string, DTensor>> held_;
};

// Sets the saved generator states for the recompute and restores the current ones after it.
class ReplayRng {
 public:
  explicit ReplayRng(const std::vector<std::pair<Generator*, GeneratorState>>& saved) {
    for (const auto& [g, state] : saved) {
      now_.emplace_back(g, g->state());
      g->set_state(state);
    }
  }
  ~ReplayRng() {
    for (const auto& [g, state] : now_) g->set_state(state);
  }
  ReplayRng(const ReplayRng&) = delete;
  ReplayRng& operator=(const ReplayRng&) = delete;

 private:
  std::vector<std::pair<Generator*, GeneratorState>> now_;
};

// Refuses a recomputed graph that reaches a tensor requiring grad other than the stand-ins
// (a leaf, or a node recorded before the recompute began): its gradient would have no way out
// of the checkpoint's node.
void check_no_outside_tensors(absl::Span<const DTensor> roots,
                              const absl::flat_hash_set<const autograd::Node*>& stand_ins,
                              uint64_t first_sequence_nr) {
  // (node, the node whose edge led to it)
  std::vector<std::pair<const autograd::Node*, const autograd::Node*>> stack;
  absl::flat_hash_set<const autograd::Node*> seen;
  for (const DTensor& r : roots) {
    const autograd::Edge e = autograd::gradient_edge(r);
    if (e.valid() && seen.insert(e.node.get()).second) stack.emplace_back(e.node.get(), nullptr);
  }
  while (!stack.empty()) {
    const auto [n, from] = stack.back();
    stack.pop_back();
    if (stand_ins.contains(n)) continue;
    DT_CHECK(n->name() != "AccumulateGrad" && n->sequence_nr() >= first_sequence_nr,
             "[checkpoint] the checkpointed function reads a tensor that requires grad but is "
             "neither one of its inputs nor a parameter of CheckpointOptions::module (its "
             "gradient would flow into %s%s, outside the checkpoint): pass it as an input, or "
             "name the module that holds it (a fully_shard unit nested inside a checkpointed "
             "module is such a case: checkpoint the units instead)",
             n->name(), from != nullptr ? " through " + from->name() : std::string());
    for (const autograd::Edge& e : n->next_edges()) {
      if (e.valid() && seen.insert(e.node.get()).second) stack.emplace_back(e.node.get(), n);
    }
  }
}

bool same_meta(const DTensorSpec& a, const DTensorSpec& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && a.placements() == b.placements() &&
         a.mesh() == b.mesh();
}

// The node's backward: fn again on stand-ins for the saved inputs and parameters, with grad
// enabled and the forward's generator states; then a backward of the recomputed outputs, whose
// gradients the stand-ins catch on their way out and hand to the node's edges. Under
// create_graph (PyTorch's non-reentrant checkpoint under double backward) the stand-ins are the
// saved values with the inputs' and parameters' own history (autograd::saved_input_with_history),
// so the recompute records a graph over them, and the gradients with respect to the stand-ins
// come from autograd::grad(create_graph): they carry the history of the incoming gradients and
// of the recomputed graph, so that second-order terms reach the inputs and parameters.
DTensorList recompute_backward(const Saved& s, absl::Span<const DTensor> grads) {
  for (size_t i = 0; i < s.num_fn_inputs; ++i) {
    const SavedInput& in = s.inputs[i];
    DT_CHECK(version_of(in.value) == in.version,
             "[checkpoint] input %d of the checkpointed function was modified in place after "
             "the forward (storage version %d, now %d): the recompute in backward would start "
             "from other values",
             i, in.version, version_of(in.value));
  }
  const bool create_graph = autograd::in_create_graph();
  autograd::AutoGradMode grad_on(true);
  auto caught = std::make_shared<DTensorList>(s.inputs.size());
  DTensorList stand_ins(s.inputs.size());
  absl::flat_hash_set<const autograd::Node*> stand_in_nodes;
  uint64_t first_sequence_nr = 0;
  for (size_t k = 0; k < s.inputs.size(); ++k) {
    const SavedInput& in = s.inputs[k];
    if (!in.requires_grad) {
      stand_ins[k] = in.value;
      continue;
    }
    if (create_graph) {
      stand_ins[k] = autograd::saved_input_with_history(in.value, k);
      if (!stand_ins[k].requires_grad()) continue;  // no gradient flows into this edge
      const autograd::Node* node = stand_ins[k].grad_fn().get();
      if (stand_in_nodes.empty()) first_sequence_nr = node->sequence_nr();
      stand_in_nodes.insert(node);
      continue;
    }
    // A leaf, and a node over it that catches the gradient reaching it (summed by the engine
    // exactly as the node of a plain run would receive it) and passes nothing to the leaf.
    DTensor leaf = in.value.detach();
    leaf.requires_grad_();
    const DTensor* leaf_in[] = {&leaf};
    stand_ins[k] = autograd::record_linear_function("CheckpointInput", leaf_in, leaf.detach(),
                                                    [caught, k](absl::Span<const DTensor> g) {
                                                      (*caught)[k] = g[0];
                                                      return DTensorList(1);
                                                    });
    const autograd::Node* node = stand_ins[k].grad_fn().get();
    if (stand_in_nodes.empty()) first_sequence_nr = node->sequence_nr();
    stand_in_nodes.insert(node);
  }

  DTensorList outs;
  {
    const std::vector<SavedInput> params(s.inputs.begin() + s.num_fn_inputs, s.inputs.end());
    SwapParameters swap(params, DTensorList(stand_ins.begin() + s.num_fn_inputs, stand_ins.end()));
    std::optional<ReplayRng> rng;
    if (!s.rng.empty()) rng.emplace(s.rng);
    outs = s.fn(absl::MakeConstSpan(stand_ins.data(), s.num_fn_inputs));
  }
  DT_CHECK(outs.size() == s.output_specs.size(),
           "[checkpoint] the recompute returned %d outputs, the forward %d: the checkpointed "
           "function must compute the same thing when called again",
           outs.size(), s.output_specs.size());
  std::vector<DTensor> roots, root_grads;
  for (size_t o = 0; o < outs.size(); ++o) {
    const auto& want = s.output_specs[o];
    DT_CHECK(outs[o].defined() == (want != nullptr) &&
                 (want == nullptr || same_meta(outs[o].spec(), *want)),
             "[checkpoint] the recompute's output %d is %s, the forward's was %s: the "
             "checkpointed function must compute the same thing when called again",
             o, outs[o].defined() ? outs[o].spec().str() : "undefined",
             want ? want->str() : "undefined");
    if (o < grads.size() && grads[o].defined() && outs[o].requires_grad()) {
      roots.push_back(outs[o]);
      root_grads.push_back(grads[o]);
    }
  }
  if (roots.empty()) return DTensorList(s.inputs.size());
  check_no_outside_tensors(roots, stand_in_nodes, first_sequence_nr);
  if (create_graph) {
    std::vector<DTensor> wrt;
    std::vector<size_t> slot;
    for (size_t k = 0; k < stand_ins.size(); ++k) {
      if (s.inputs[k].requires_grad && stand_ins[k].requires_grad()) {
        wrt.push_back(stand_ins[k]);
        slot.push_back(k);
      }
    }
    DTensorList out(s.inputs.size());
    if (wrt.empty()) return out;
    std::vector<DTensor> g = autograd::grad(roots, wrt, root_grads, /*retain_graph=*/true,
                                            /*create_graph=*/true, /*allow_unused=*/true);
    for (size_t j = 0; j < slot.size(); ++j) out[slot[j]] = std::move(g[j]);
    return out;
  }
  autograd::backward(roots, root_grads);
  return std::move(*caught);
}

}  // namespace

DTensorList checkpoint(const CheckpointFunction& fn, absl::Span<const DTensor> inputs,
                       const CheckpointOptions& options) {
  if (!autograd::grad_enabled()) return fn(inputs);
  // Inside a dtensor::compile capture nothing changes: the forward's ops and, in backward, the
  // recompute's ops and their backward are recorded where they run, like any others. What the
  // checkpoint does besides ops needs no replay (see the header, "Under dtensor::compile").
  auto saved = std::make_shared<Saved>();
  saved->fn = fn;
  saved->num_fn_inputs = inputs.size();
  bool any_grad = false;
  for (const DTensor& x : inputs) {
    SavedInput in;
    in.value = x;
    in.requires_grad = x.defined() && x.requires_grad();
    in.version = version_of(x);
    any_grad = any_grad || in.requires_grad;
    saved->inputs.push_back(std::move(in));
  }
  if (options.module != nullptr) {
    for (SavedInput& p : collect_parameters(*options.module)) saved->inputs.push_back(std::move(p));
  }
  any_grad = any_grad || saved->inputs.size() > inputs.size();
  if (!any_grad) return fn(inputs);  // nothing to differentiate: no node, nothing saved
  if (options.preserve_rng_state) saved->rng = rng_states(saved->inputs);

  DTensorList outs;
  {
    autograd::NoGradGuard no_grad;
    outs = fn(inputs);
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    DT_CHECK(version_of(inputs[i]) == saved->inputs[i].version,
             "[checkpoint] the checkpointed function modified its input %d in place: the "
             "recompute in backward would start from the modified value (PyTorch recomputes "
             "from it silently); modify a copy (clone) instead",
             i);
  }
  std::vector<const DTensor*> edges;
  for (const SavedInput& in : saved->inputs) edges.push_back(&in.value);
  for (DTensor& out : outs) {
    // A fresh handle: an output that is an input (or shares its autograd state) must not
    // become the node's output in the input's place.
    if (out.defined()) out = out.detach();
    saved->output_specs.push_back(out.defined() ? out.spec_ptr() : nullptr);
  }
  DTensorList recorded = autograd::record_differentiable_function(
      "CheckpointBackward", edges, std::move(outs),
      [saved](absl::Span<const DTensor> grads) { return recompute_backward(*saved, grads); });
  // The edges are recorded: from now on the node holds the producers, the saved values need no
  // autograd state of their own.
  for (SavedInput& in : saved->inputs) in.value = in.value.detach();
  return recorded;
}

DTensor checkpoint(const std::function<DTensor(const DTensor&)>& fn, const DTensor& input,
                   const CheckpointOptions& options) {
  CheckpointFunction many = [fn](absl::Span<const DTensor> in) {
    DTensorList out;
    out.push_back(fn(in[0]));
    return out;
  };
  const DTensor in[] = {input};
  return std::move(checkpoint(many, in, options)[0]);
}

Module& checkpoint_wrapper(Module& module) {
  module.set_forward_wrapper([](Module& m, const DTensor& x) {
    CheckpointOptions options;
    options.module = &m;
    // The state this forward reads besides x (Module::forward_context): other forwards may
    // replace it before backward, so the recompute runs under the one taken now.
    std::shared_ptr<const void> context = m.forward_context();
    return checkpoint(
        [&m, context](const DTensor& in) {
          detail::ForwardContextScope scope(m, context);
          return m.forward(in);
        },
        x, options);
  });
  return module;
}

void remove_checkpoint_wrapper(Module& module) {
  module.set_forward_wrapper(nullptr);
}

bool is_checkpoint_wrapped(const Module& module) {
  return module.has_forward_wrapper();
}

std::vector<std::string> apply_activation_checkpointing(
    Module& root, const std::function<bool(const std::string& fqn, Module& module)>& check_fn) {
  std::vector<std::string> wrapped;
  for (auto& [fqn, m] : root.named_modules()) {
    if (check_fn(fqn, *m)) {
      checkpoint_wrapper(*m);
      wrapped.push_back(fqn);
    }
  }
  return wrapped;
}

std::vector<std::string> apply_activation_checkpointing(Module& root, const std::string& layers_fqn,
                                                        int64_t every) {
  DT_CHECK(every >= 1,
           "[apply_activation_checkpointing] every must be >= 1 (1: every layer, k: every k-th), "
           "got %d",
           every);
  Module& layers = root.get_submodule(layers_fqn);
  DT_CHECK(!layers.named_children().empty(),
           "[apply_activation_checkpointing] '%s' (%s) has no child modules to checkpoint",
           layers_fqn, layers.type_name());
  std::vector<std::string> wrapped;
  int64_t count = 0;
  for (const auto& [name, child] : layers.named_children()) {
    // torchtitan's ac_freq: the counter starts at 1, a layer is wrapped when it divides by k.
    if (++count % every != 0) continue;
    checkpoint_wrapper(*child);
    wrapped.push_back(layers_fqn.empty() ? name : layers_fqn + "." + name);
  }
  return wrapped;
}

}  // namespace dtensor::nn
