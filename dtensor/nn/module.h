// nn::Module: a tree of named child modules and named parameters (DTensors), PyTorch style.
//
// Parameters are DTensors. A module that has not been parallelized holds Replicate DTensors
// on this process's "self" mesh (a 1-rank mesh, self_mesh()), so the same forward code runs
// single-device and tensor-parallel: parallelize_module (dtensor/parallel/) swaps parameters for
// sharded ones and installs forward hooks that move activations between meshes/layouts.
//
// Activations are DTensors too. A DTensor on the self mesh (a local DTensor) stands for a plain
// local tensor (what PyTorch calls a torch.Tensor as opposed to a DTensor); `local_dtensor(x)`
// builds one.
// Modules record autograd in forward: parameters are leaves that require grad.
#pragma once

#include <absl/functional/function_ref.h>
#include <absl/types/span.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/rng/generator.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::nn {

// The self mesh and local DTensors (dtensor/core/distributed_tensor.h), under nn:: too:
// local_dtensor(t) wraps a local tensor as a Replicate DTensor on self_mesh(t.device().type)
// (no copy, no communication); is_local(x) says whether x is one.
using ::dtensor::is_local;
using ::dtensor::is_self_mesh;
using ::dtensor::local_dtensor;
using ::dtensor::self_mesh;

class Module;
using ModulePtr = std::shared_ptr<Module>;

// Module hooks, as torch.nn.Module's. Each hook gets the module. A module call runs, in order:
// the forward pre-hooks, forward, the forward hooks; then, in backward, the backward pre-hooks
// and the backward hooks. Every hook type has a one-input form, for a module called as
// module(x), and an args form, which sees all of a call's inputs (PyTorch's args tuple) and fits
// every module, whatever its number of inputs: module(a, b) of a TwoInputModule (losses,
// distances) runs only args forms, and refuses one-input forms at registration.
//
// A forward pre-hook sees the input(s) and may replace them: std::nullopt keeps them
// (PyTorch's None), a value replaces them (the args form returns one DTensor per input).
using ForwardPreHook = std::function<std::optional<DTensor>(Module&, const DTensor& input)>;
using ForwardArgsPreHook =
    std::function<std::optional<std::vector<DTensor>>(Module&, absl::Span<const DTensor> args)>;
// A forward hook sees the input(s) (as the pre-hooks left them) and the output, and may replace
// the output: std::nullopt keeps it, a value replaces it. `output` is the call's own handle: a
// hook that returns a replacement may move from it (e.g. into DTensor::redistribute &&, which
// reuses the memory only when nothing else holds it); one that returns std::nullopt must leave
// it as it was. A lambda taking `const DTensor& output` fits too. When forward raised, the hooks
// registered with always_call run with an undefined output (their returns are dropped, what they
// raise is swallowed) and the error propagates.
using ForwardHook =
    std::function<std::optional<DTensor>(Module&, const DTensor& input, DTensor& output)>;
using ForwardArgsHook =
    std::function<std::optional<DTensor>(Module&, absl::Span<const DTensor> args, DTensor& output)>;
// Module backward hooks (PyTorch's register_full_backward_pre_hook / register_full_backward_hook).
// A pre-hook sees grad_output, the gradient of the module's output, and may replace it (an
// undefined return keeps it); it fits every module (one output). A hook sees grad_input, the
// gradient of the module's input(s), and grad_output (as the pre-hooks left it), and may replace
// grad_input. One-input form: grad_input is undefined when the input does not require grad; an
// undefined return keeps grad_input (and must be returned when the input does not require
// grad). Args form, as PyTorch's tuple: one grad_input entry per input; when some input requires
// grad, an input that does not gets zeros (PyTorch's materialized gradient) and what a hook
// returns for it is dropped; when none does, every entry is undefined and a hook must return
// std::nullopt or all-undefined entries. std::nullopt keeps grad_input; a vector (one entry per
// input) replaces it, an undefined entry giving that input no gradient.
using BackwardPreHook = std::function<DTensor(Module&, const DTensor& grad_output)>;
using BackwardHook =
    std::function<DTensor(Module&, const DTensor& grad_input, const DTensor& grad_output)>;
using BackwardArgsHook = std::function<std::optional<std::vector<DTensor>>(
    Module&, absl::Span<const DTensor> grad_input, const DTensor& grad_output)>;

// register_*'s options (PyTorch's keyword arguments): prepend runs the hook before those already
// registered (default: after); always_call (forward hooks only) runs it even when forward raised.
struct HookOptions {
  bool prepend = false;
  bool always_call = false;
};

struct ModuleHooks;  // module.cc: a module's hook lists

// What register_* returns (PyTorch's RemovableHandle): remove() unregisters the hook. It holds a
// weak reference to the module's hooks: remove() is idempotent, a no-op once the module is
// gone, and may be called from inside a hook (the call in progress, and a backward whose forward
// already ran, still run the hooks they started with, as PyTorch). Dropping the handle keeps the
// hook.
class HookHandle {
 public:
  HookHandle() = default;
  void remove();
  // PyTorch's handle.id: unique over the process.
  uint64_t id() const { return id_; }

 private:
  friend struct ModuleHooks;
  HookHandle(std::weak_ptr<ModuleHooks> hooks, uint64_t id) : hooks_(std::move(hooks)), id_(id) {}
  std::weak_ptr<ModuleHooks> hooks_;
  uint64_t id_ = 0;
};

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The class name ("Linear", "LayerNorm", ...), used in plans' error messages.
  virtual std::string type_name() const = 0;
  // The computation. The base class throws "[Module] <type> has no single-input forward".
  virtual DTensor forward(const DTensor& x);
  // Runs the forward pre-hooks, forward(), then the forward hooks (see register_forward_hook) —
  // or, while a stand-in is set, calls the stand-in instead.
  DTensor operator()(const DTensor& x);
  // Internal (dtensor::compile's overrides, dtensor/compile/override.h): while set, calling this
  // module calls `stand_in` instead, wherever the call comes from (a parent's member pointer
  // too); nullptr restores the module.
  void set_stand_in(ModulePtr stand_in);
  // Internal (activation checkpointing, dtensor/nn/activation_checkpoint.h): while set,
  // operator() calls `wrapper(*this, input)` in place of forward(input), after the pre-hooks and
  // before the hooks (so data parallel's gather and reshard stay outside what is recomputed);
  // the wrapper calls forward() itself. nullptr restores the plain call.
  using ForwardWrapper = std::function<DTensor(Module&, const DTensor&)>;
  void set_forward_wrapper(ForwardWrapper wrapper) { forward_wrapper_ = std::move(wrapper); }
  bool has_forward_wrapper() const { return forward_wrapper_ != nullptr; }
  // What forward reads besides its input and parameters that a later forward may replace (a
  // model's per-call state, e.g. models::Llama's positions and padding mask): activation
  // checkpointing takes it when the module runs and makes it current again around the
  // recompute in backward, so the recompute sees its own forward's state even when other
  // forwards ran in between (gradient accumulation, an eval). Default: none.
  virtual std::shared_ptr<const void> forward_context() const { return nullptr; }
  // Makes `context` (from forward_context()) current; returns the context it replaces.
  virtual std::shared_ptr<const void> set_forward_context(std::shared_ptr<const void> context) {
    return context;
  }

  // ---- tree --------------------------------------------------------------------------------
  // Adds (or replaces) a child; `name` must be non-empty and contain no '.'. Returns it.
  ModulePtr register_module(std::string name, ModulePtr child);
  // Adds a parameter; the name must be new, non-empty and contain no '.'. The module holds a
  // leaf (value detached) that requires grad when floating, as torch.nn.Parameter.
  void register_parameter(std::string name, DTensor value);
  // Adds a buffer (PyTorch's register_buffer, persistent): state that is not a parameter (no
  // gradient, not in parameters()) but is part of the model's state, such as BatchNorm's running
  // statistics. The module keeps `value` as given (sharing its storage), so the layer's in-place
  // updates and a checkpoint load written into it are seen by both. The name must be new.
  void register_buffer(std::string name, DTensor value);
  // Every buffer of the tree in pre-order with fully-qualified names ("bn1.running_mean"), as
  // PyTorch's named_buffers(); checkpoint::training_state saves them beside the parameters. A
  // buffer reached twice (a shared submodule, one tensor registered twice) is listed once,
  // under its first name (PyTorch's remove_duplicate=True).
  std::vector<std::pair<std::string, DTensor>> named_buffers() const;
  // Ties: makes `shared` (a parameter of another module of the same tree, e.g. an embedding
  // table reused as the output projection's weight) also an own parameter `name` of this
  // module. Both names refer to the same leaf (one gradient, summed over both uses);
  // named_parameters() and parameters() list it once, under its first name in pre-order.
  void tie_parameter(std::string name, const DTensor& shared);
  // Internal (data parallel): puts `value` in the slot of own parameter `name` as it is (no
  // detach, so it may be a non-leaf recorded by autograd); the global shape must match.
  // fully_shard swaps gathered parameters in for a forward and the sharded leaves back after.
  void swap_parameter(std::string_view name, DTensor value);
  // Direct children, in registration order.
  const std::vector<std::pair<std::string, ModulePtr>>& named_children() const { return children_; }
  // Every module of the tree in pre-order with its fully-qualified name; the root is "".
  std::vector<std::pair<std::string, Module*>> named_modules();
  // Every parameter of the tree in pre-order (own parameters first, then children's), with
  // fully-qualified names such as "layers.0.mlp.fc1.weight"; a tied parameter appears once.
  std::vector<std::pair<std::string, DTensor>> named_parameters() const;
  // This module's own parameters, in registration order.
  const std::vector<std::pair<std::string, DTensor>>& own_parameters() const { return params_; }
  // The other names of tied parameters over the tree, as (alias, canonical) fully-qualified
  // names; canonical is the name named_parameters() lists. As PyTorch's
  // named_parameters(remove_duplicate=False) shows the duplicates and transformers'
  // _tied_weights_keys names them, in pre-order: the names tie_parameter gave and what each
  // module's own_parameter_aliases() declares. Checkpoint readers accept a tensor under either
  // name; writers write the canonical one only (checkpoint::load_hf / save_hf).
  std::vector<std::pair<std::string, std::string>> parameter_aliases() const;
  // Every parameter of the tree (named_parameters() without the names), for optimizers.
  std::vector<DTensor> parameters() const;
  // Clears every parameter's gradient (set_to_none, PyTorch's default) or zeroes it in place.
  void zero_grad(bool set_to_none = true);

  // The module at a fully-qualified name ("" is this module); throws "[get_submodule] ..."
  // naming the first missing component.
  Module& get_submodule(std::string_view fqn);
  // The parameter at a fully-qualified name ("mlp.fc1.weight"); throws "[get_parameter] ...".
  const DTensor& get_parameter(std::string_view fqn) const;
  // Own parameter by name (no dots); throws "[Module] <type> has no parameter 'x'".
  const DTensor& param(std::string_view name) const;
  // Whether this module has an own parameter called `name`.
  bool has_param(std::string_view name) const;
  // Replaces an own parameter; the new value must have the same global shape and dtype
  // ("[set_parameter] ..." otherwise). This is how parallel styles shard a module. The new
  // parameter is a leaf that requires grad when the old one did.
  void set_parameter(std::string_view name, DTensor value);

  // Re-draws every parameter of the tree in place, module by module in pre-order (each
  // module's own parameters in registration order), from `gen` (nullptr: the default generator
  // of each parameter's device). Works on sharded parameters without communication: the DTensor
  // random ops (dtensor/rng/dtensor_random.h) fill each rank's shard with exactly the values of the
  // full tensor and advance the generator by the global numel, so a parallelized model reset
  // from a generator state equals the single-device model reset from the same state, bit for
  // bit, whatever the plan. `gen` must belong to the parameters' device.
  void reset_parameters(Generator* gen = nullptr);

  // ---- mode --------------------------------------------------------------------------------
  // PyTorch's train(mode) / eval(): sets the training flag of every module of the tree; a new
  // module is in training mode. Layers whose forward differs (BatchNorm, InstanceNorm with
  // running statistics: dtensor/nn/norm_layers.h) read is_training().
  Module& train(bool mode = true);
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }

  // ---- hooks -------------------------------------------------------------------------------
  // PyTorch's register_forward_pre_hook / register_forward_hook / register_full_backward_pre_hook
  // / register_full_backward_hook (see the hook types above). Hooks of a kind run in the order
  // registered (a prepend one first); each sees what the previous one returned. The one-input
  // forms are refused on a MultiInputModule (the two- and three-input losses, the distances:
  // "[MSELoss] register_forward_hook: ..."), and raise at the call when another module's call
  // has several inputs (MultiheadAttention(q, k, v), a decoder layer); always_call is refused
  // on all but forward hooks. When a module with backward hooks is called with grad mode on, its
  // inputs that require grad pass through one identity node and its output (after the forward
  // hooks; if it requires grad) through another, as PyTorch's BackwardHook: the pre-hooks run
  // when the output's gradient arrives, the hooks when the inputs' gradients are computed (at
  // once after the pre-hooks when no input requires grad). A module without hooks pays nothing.
  HookHandle register_forward_pre_hook(ForwardPreHook hook, HookOptions options = {});
  HookHandle register_forward_pre_hook(ForwardArgsPreHook hook, HookOptions options = {});
  HookHandle register_forward_hook(ForwardHook hook, HookOptions options = {});
  HookHandle register_forward_hook(ForwardArgsHook hook, HookOptions options = {});
  HookHandle register_full_backward_pre_hook(BackwardPreHook hook, HookOptions options = {});
  HookHandle register_full_backward_hook(BackwardHook hook, HookOptions options = {});
  HookHandle register_full_backward_hook(BackwardArgsHook hook, HookOptions options = {});

  // Called by parallelize_module on every module after a plan was applied: checks that the
  // module can run with its (possibly sharded) parameters, throwing a clear error otherwise
  // (e.g. attention heads not divisible by the tensor-parallel size). Default: nothing.
  virtual void check_parallel() const {}

 protected:
  // A module call with any number of DTensor inputs through this module's hooks: what a module
  // whose forward takes several DTensors calls from its operator(), e.g. for forward(a, b, c):
  //   DTensor operator()(const DTensor& a, const DTensor& b, const DTensor& c) {
  //     const DTensor args[] = {a, b, c};
  //     return call_with_hooks(args, [this](absl::Span<const DTensor> in) {
  //       return forward(in[0], in[1], in[2]);
  //     });
  //   }
  // Runs the pre-hooks on `args`, `forward` on what they leave (as many DTensors as `args`), the
  // forward hooks and the backward hooks' set-up; without hooks, just `forward(args)`. (No
  // stand-in or CommDebugMode module label: those are operator()(x)'s; a module with a forward
  // wrapper, i.e. checkpoint_wrapper, called with several inputs raises "[checkpoint_wrapper]".)
  DTensor call_with_hooks(absl::Span<const DTensor> args,
                          absl::FunctionRef<DTensor(absl::Span<const DTensor>)> forward);
  // Whether any hook or a forward wrapper is registered (call_with_hooks' fast path, for a caller
  // that would copy its inputs into `args`; the wrapper counts so that the call reaches the
  // multi-input refusal above).
  bool has_hooks() const;

  // Re-draws this module's own parameters (see reset_parameters); default: nothing.
  virtual void reset_own_parameters(Generator* /*gen*/) {}
  // Aliases this module declares for a tie it makes without holding the alias as a parameter
  // (e.g. a tied Llama's "lm_head.weight", which is the embedding table): (alias, canonical)
  // names relative to this module. Default: none.
  virtual std::vector<std::pair<std::string, std::string>> own_parameter_aliases() const {
    return {};
  }

 private:
  ModulePtr stand_in_;              // set_stand_in
  ForwardWrapper forward_wrapper_;  // set_forward_wrapper
  static DTensor as_parameter(const DTensor& value, bool requires_grad);

  std::string name_;  // name under its (last) parent; CommDebugMode's module path
  std::vector<std::pair<std::string, ModulePtr>> children_;
  std::vector<std::pair<std::string, DTensor>> params_;
  std::vector<std::pair<std::string, DTensor>> buffers_;  // register_buffer
  std::shared_ptr<ModuleHooks> hooks_;                    // register_*; null until the first one
  void check_one_input(std::string_view op, std::string_view kind) const;
  bool training_ = true;  // see train()
};

// Options every module constructor takes: parameter dtype and device, and the generator the
// initial values are drawn from (nullptr: the CPU default generator). Values are always drawn
// on the CPU, for the parameter's full (global) shape, then moved to `device`, so a model built
// after the same manual_seed is bit-identical on every rank and every device.
struct ModuleOptions {
  DType dtype = kFloat32;
  Device device = Device();
  Generator* generator = nullptr;
};

}  // namespace dtensor::nn
