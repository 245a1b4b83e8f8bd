// Activation checkpointing (PyTorch's torch.utils.checkpoint.checkpoint, checkpoint_wrapper and
// apply_activation_checkpointing; torchtitan's per-layer "selective" AC): a function's forward
// runs without recording (its intermediate activations are freed as soon as they are used), and
// its backward runs it again with grad enabled on the saved inputs, then backpropagates through
// the recomputed graph. Memory for compute: a transformer keeps, per checkpointed layer, its
// input instead of every activation its ops save for backward, and pays one more forward of the
// layer in backward.
//
// Exactness: the recompute restores the default generators' states (CPU, and the CUDA devices
// of the inputs and parameters) to what they were before the forward, so dropout draws the same
// mask; the gradients of the recomputed graph reach the inputs and parameters through the
// checkpoint's node, summed in the same order as without checkpointing, so they equal the
// non-checkpointed run bit for bit (tests/nn/test_activation_checkpoint*.cc: float32, float64,
// dropout, nested, a module used twice, tensor parallel and fully_shard).
//
// How it differs from PyTorch. PyTorch's non-reentrant checkpoint keeps the forward's graph and
// drops only its saved tensors (saved-tensor hooks), so it sees every tensor fn reads. Here no
// graph is kept (the reentrant form), so the checkpoint's node must know every tensor that needs
// a gradient: fn's inputs, and the parameters of `CheckpointOptions::module` (checkpoint_wrapper
// passes the wrapped module). Its gradient is computed as a separate backward, like PyTorch's
// use_reentrant=True, but with PyTorch's non-reentrant rules otherwise: parameters get their
// gradients through the outer backward (hooks, data parallel's reductions and the summation order
// are those of a plain run), and inputs that do not require grad are fine.
//
// Double backward (create_graph, dtensor/autograd/create_graph.h), as PyTorch's non-reentrant
// checkpoint: under a create_graph pass the recompute runs on the saved inputs and parameters
// with their own history and records its graph, and the gradients of the recomputed outputs are
// taken with autograd::grad(create_graph), so the gradients the node returns carry history
// (through the incoming gradients and the recomputed graph) and second-order terms reach the
// inputs and parameters: a gradient penalty or Hessian-vector product through a checkpointed
// region equals the plain run's (tests/autograd/test_autograd_api.cc, "create_graph: a gradient
// penalty through checkpoint_wrapper", Linear-GELU-Linear: 1e-15, and PyTorch 2.15's values).
// The recorded graph keeps the recompute's activations until it is freed, as PyTorch's does.
//
// Refused, with a dtensor::Error naming "[checkpoint]" (raised on every rank: each depends only on
// what every rank built the same way):
//   - fn modifies one of its inputs in place (the recompute would start from the modified value;
//     PyTorch recomputes from it silently), or an input is modified in place between forward and
//     backward (without checkpointing the ops that saved it would refuse too);
//   - fn reads a tensor that requires grad and is neither an input nor a parameter of `module`
//     (found in backward, when the recomputed graph reaches it): pass it as an input;
//   - the recompute produces outputs of other shapes, dtypes or placements than the forward
//     (PyTorch's determinism check on the same metadata).
//
// Under dtensor::compile (dtensor/compile/compile.h) a checkpoint is captured like any other
// code: the forward's ops are recorded where they run, and in backward the recompute's ops and
// their backward where they run there, so a replay does the eager step's work (the recompute
// included) and equals it bit for bit (tests/compile/test_compile_data_parallel_mpi.cc).
// What the checkpoint does besides ops needs no replay, because the graph follows tensors, not
// the host state that led to them:
//   - the parameter swap: the stand-ins are detached handles on the very tensors the forward read
//     (parameters, data parallel's gathered ones, saved inputs), so the recompute's ops are
//     recorded reading the same graph values and replay hands them that replay's values;
//   - Module::forward_context: it decides which ops the recompute runs and their static
//     arguments (positions, mask, causality); made current while capturing, it shaped the
//     recorded ops, which replay runs as recorded. Its tensors are graph values (made by ops) or
//     tensors from before the step; one made in the step by local Tensor code is refused by the
//     capture as everywhere;
//   - the generator restore: the capture refuses random ops, so a captured checkpoint draws
//     nothing and the generators end where they started, as in the eager step;
//   - the checks (input versions, the recompute's outputs, outside tensors) pass at capture, and
//     a replay runs the same ops on tensors of the same layouts (compile's guards).
// Not detected, as in PyTorch: state a forward updates besides its outputs (batch norm's running
// statistics) is updated again by the recompute; generators passed explicitly to random ops
// (`gen` arguments) are not restored, only the default ones.
#pragma once

#include <absl/types/span.h>

#include <cstdint>
#include <functional>
#include <string>

#include "dtensor/nn/module.h"

namespace dtensor::nn {

struct CheckpointOptions {
  // The module whose forward fn runs (or any module fn reads parameters of): every parameter of
  // its tree that requires grad, as the module holds it when checkpoint is called (data
  // parallel's gathered parameters inside its forward), takes part like an input; the recompute
  // swaps stand-ins for them into the module and back. nullptr: fn reads no parameters.
  Module* module = nullptr;
  // PyTorch's preserve_rng_state: restore the default generators before the recompute (and put
  // them back after it), so that random ops inside fn draw the same numbers again.
  bool preserve_rng_state = true;
};

// fn's form for several inputs and outputs.
using CheckpointFunction = std::function<DTensorList(absl::Span<const DTensor> inputs)>;

// torch.utils.checkpoint.checkpoint(fn, *inputs): runs fn(inputs) without recording and returns
// its outputs, recorded as the outputs of one node "CheckpointBackward" whose backward recomputes
// fn (see the top of this file). With grad mode off, or when nothing fn depends on requires grad,
// it is fn(inputs) as is. fn (and `module`) must stay alive until backward has run, and must
// compute the same thing when called again.
DTensorList checkpoint(const CheckpointFunction& fn, absl::Span<const DTensor> inputs,
                       const CheckpointOptions& options = {});
// The one-input, one-output form.
DTensor checkpoint(const std::function<DTensor(const DTensor&)>& fn, const DTensor& input,
                   const CheckpointOptions& options = {});

// PyTorch's checkpoint_wrapper(module), in place: from now on every call of `module` runs its
// forward() under checkpoint (with options.module = &module), between its forward pre-hooks and
// hooks, so hooks that parallel styles installed on the module itself run once, outside the
// recompute (apply it before or after parallelize_module / fully_shard: the order does not
// matter). Unlike PyTorch's, no wrapper module is inserted: parameter names (and so Hugging Face
// and dtensor checkpoints) are unchanged. State the forward reads besides its input
// (Module::forward_context, e.g. models::Llama's per-call positions and mask) is taken when the
// module runs and made current again around the recompute, so forwards run between this one
// and its backward do not change what is recomputed. Calling it again changes nothing. Returns
// `module`. A wrapped module called with several inputs (MultiheadAttention(q, k, v), a decoder
// layer's (tgt, memory)) raises "[checkpoint_wrapper] ..." rather than running unwrapped; under
// create_graph the region is differentiated again (see "Double backward" above).
Module& checkpoint_wrapper(Module& module);
// Undoes checkpoint_wrapper.
void remove_checkpoint_wrapper(Module& module);
// Whether `module` is wrapped by checkpoint_wrapper.
bool is_checkpoint_wrapped(const Module& module);

// PyTorch's apply_activation_checkpointing(model, check_fn=...): wraps every module of `root`'s
// tree (pre-order, the root included) for which check_fn(fully-qualified name, module) is true.
// Returns the fully-qualified names wrapped, in order.
std::vector<std::string> apply_activation_checkpointing(
    Module& root, const std::function<bool(const std::string& fqn, Module& module)>& check_fn);

// torchtitan's layer-wise activation checkpointing: wraps the children of the module at
// `layers_fqn` ("layers" in nn::Transformer, "model.layers" in models::Llama), every `every`-th
// one as torchtitan's ac_freq counts (every = 1: all; 2: the 2nd, 4th, ... i.e. "1", "3", ...).
// Throws "[apply_activation_checkpointing] ..." when the module is missing, has no children, or
// every < 1.
std::vector<std::string> apply_activation_checkpointing(Module& root, const std::string& layers_fqn,
                                                        int64_t every = 1);

}  // namespace dtensor::nn
