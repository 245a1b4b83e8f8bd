// Backward formulas: what an op family registers (OpInfo::backward) and what it reads.
//
// A formula gets a BackwardContext (the inputs and outputs the forward saved, as the local
// kernel saw them, with their specs; the op's args; which inputs need a gradient) and the
// gradients of the op's outputs, and returns one gradient per input, written with DTensor ops
// so that backward runs through the sharding engine and its cache like forward. A gradient is
// with respect to the input as the kernel saw it (after dispatch's redistribution); the engine
// carries it back to the input's own placements with redistribute's backward rule
// (node.h: redistribute_backward). It must have the input's global shape and dtype.
//
// record_function records a computation the engine did not dispatch (redistribute, from_local,
// dropout's mask) with a backward lambda, like a torch.autograd.Function.
#pragma once

#include <absl/types/span.h>

#include <functional>
#include <string>
#include <variant>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/core/propagation/op_schema.h"
#include "dtensor/tensor/scalar.h"

namespace dtensor::autograd {

class OpNode;

// What a backward formula sees of its forward call: the op, its saved inputs/outputs and specs,
// and its static args.
class BackwardContext {
 public:
  // The context of one recorded op call (built by the engine).
  explicit BackwardContext(const OpNode& node) : node_(node) {}

  // The op and its numbers of forward inputs and outputs.
  const OpInfo& op() const;
  int64_t num_inputs() const;
  int64_t num_outputs() const;
  // Input i / output o as the forward kernel saw it (after redistribution), detached. Throws
  // "[op backward] input 1 was not saved" when the op's OpInfo::saved_inputs/saved_outputs
  // does not list it.
  const DTensor& input(int64_t i) const;
  const DTensor& output(int64_t o) const;
  // Specs (always available): input i as the kernel saw it, output o.
  const DTensorSpec& input_spec(int64_t i) const;
  const DTensorSpec& output_spec(int64_t o) const;
  bool needs_input_grad(int64_t i) const;

  // The forward call's static args; whether arg i exists; arg i as a T (throws when it is
  // missing or holds another type).
  absl::Span<const ArgValue> args() const;
  bool has_arg(int64_t i) const;
  template <typename T>
  const T& arg(int64_t i) const {
    const T* v =
        i >= 0 && i < static_cast<int64_t>(args().size()) ? std::get_if<T>(&args()[i]) : nullptr;
    if (v == nullptr) [[unlikely]] {
      bad_arg(i);
    }
    return *v;
  }
  // A runtime scalar arg (int, float or bool) as a Scalar.
  Scalar scalar(int64_t i) const;

 private:
  [[noreturn]] void bad_arg(int64_t i) const;
  const OpNode& node_;
};

// The backward of a recorded custom computation: gradients of its inputs (one per input,
// undefined where none) from the gradients of its outputs (undefined where none arrived).
using BackwardFunction = std::function<DTensorList(absl::Span<const DTensor> grad_outputs)>;

// When grad mode is on and an input requires grad, makes `outputs` the outputs of a node
// `name` whose backward is `backward`, and returns them requiring grad; otherwise returns them
// unchanged. `backward` must return gradients matching the inputs' global shape, dtype and
// mesh.
// Unlike a dispatched op's saved tensors (and ctx.save_for_backward in PyTorch), the tensors
// `backward` captures get no version check: an in-place write to one after the forward is read
// silently by the backward. To get the check, record their versions after the forward with
// autograd::SavedVersions (dtensor/autograd/saved_versions.h) and check them first thing:
//   const autograd::SavedVersions saved{x_local, out_local};
//   return record_function("MyBackward", inputs, out, [x_local, saved](auto g) -> DTensorList {
//     saved.check("MyBackward");  // throws "[backward] tensor 0 saved for backward by ..."
//     ...
//   });
DTensorList record_function(std::string name, absl::Span<const DTensor* const> inputs,
                            DTensorList outputs, BackwardFunction backward);
DTensor record_function(std::string name, absl::Span<const DTensor* const> inputs, DTensor output,
                        BackwardFunction backward);

// create_graph (create_graph.h): a record_function node whose inputs need a gradient raises
// "[autograd] create_graph: <name>'s backward uses its record_function backward, which has no
// derivative ..." on every rank (its backward, e.g. a recompute with no-grad kernels, would drop
// the second-order terms silently). record_linear_function declares a backward that is linear in
// the gradients and reads no saved input (a layout change, a mask, a hook, an identity wrapper):
// it runs under create_graph, its DTensor ops recorded (dropping the history of gradients that
// carry it raises).
DTensorList record_linear_function(std::string name, absl::Span<const DTensor* const> inputs,
                                   DTensorList outputs, BackwardFunction backward);
DTensor record_linear_function(std::string name, absl::Span<const DTensor* const> inputs,
                               DTensor output, BackwardFunction backward);

// A backward that supports create_graph itself: under create_graph (in_create_graph()) it
// computes with recorded DTensor ops and reads each forward input it saved through
// saved_input_with_history, so the second-order terms through those inputs are kept (activation
// checkpointing's recompute). It runs under create_graph, and raises if it drops the history of
// gradients that carry it.
DTensorList record_differentiable_function(std::string name,
                                           absl::Span<const DTensor* const> inputs,
                                           DTensorList outputs, BackwardFunction backward);
// Inside such a backward run under create_graph: `value`, the node's forward input `i` as the
// backward saved it (same spec), with that input's history (its gradient flows into the node's
// edge i). Elsewhere, or when input i needs no gradient: `value` as it is.
DTensor saved_input_with_history(const DTensor& value, size_t i);

}  // namespace dtensor::autograd
