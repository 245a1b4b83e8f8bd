// The autograd graph: a Node per recorded computation, with one Edge per forward input saying
// where that input's gradient goes. The engine (engine.h) runs the nodes in reverse; it knows
// no op family (ops register their backward formulas, see function.h).
#pragma once

#include <absl/container/flat_hash_map.h>
#include <absl/container/inlined_vector.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dtensor/core/distributed_tensor.h"

namespace dtensor::autograd {

class Node;

// Where the gradient of one forward input goes: slot `input_nr` of `node`'s incoming
// gradients (the forward output of `node` that the input was). No node: the input needs no
// gradient.
struct Edge {
  std::shared_ptr<Node> node;
  uint32_t input_nr = 0;
  bool valid() const { return node != nullptr; }
};

// Per-node lists are inline for the common arities (recording an op costs one allocation for
// the node, not one per list; see "autograd recording" in docs/PERFORMANCE.md).
using EdgeList = absl::InlinedVector<Edge, 2>;
using SpecList = absl::InlinedVector<std::shared_ptr<const DTensorSpec>, 2>;

class Node {
 public:
  // `num_outputs`: how many forward outputs (= incoming gradient slots) the node has.
  explicit Node(int64_t num_outputs);
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // "MmBackward", "RedistributeBackward", "AccumulateGrad".
  virtual std::string name() const = 0;
  // Gradients of the forward inputs (one per next edge; undefined where none flows) from the
  // gradients of the forward outputs (one per output; undefined where none arrived). Runs with
  // grad mode off.
  virtual DTensorList apply(DTensorList grad_outputs) = 0;
  // Drops what the node saved for backward (after a backward without retain_graph); a later
  // apply throws.
  virtual void release_saved() {}

  int64_t num_outputs() const { return num_outputs_; }
  const EdgeList& next_edges() const { return next_edges_; }
  // The spec each forward input had (what its gradient must match in shape, dtype and mesh);
  // parallel to next_edges().
  const SpecList& input_specs() const { return input_specs_; }
  void add_input(Edge edge, std::shared_ptr<const DTensorSpec> spec);

  // Order of creation on this thread. The engine runs ready nodes latest first, so every rank
  // that built the same graph runs it in the same order (backward issues collectives).
  uint64_t sequence_nr() const { return sequence_nr_; }

  // Hooks on the gradient of forward output `output_nr` (DTensor::register_hook on a non-leaf),
  // run by the engine before apply, in the order added. The retain_grad hook of an output
  // (DTensor::retain_grad: at most one) runs after all of them, wherever it was added, so the
  // retained grad() is the gradient the hooks made, as PyTorch's retains_grad hooks (2.0 on).
  void add_pre_hook(uint32_t output_nr, GradHook hook);
  void set_retain_grad_hook(uint32_t output_nr, GradHook hook);
  // Removes and returns output `output_nr`'s retain_grad hook (undefined when none): an
  // in-place op moves it to the node that now produces the tensor.
  GradHook take_retain_grad_hook(uint32_t output_nr);
  DTensor run_pre_hooks(uint32_t output_nr, DTensor grad) const;

 protected:
  // Nodes that must run as soon as they are ready (AccumulateGrad) take this sequence number.
  void set_sequence_nr(uint64_t nr) { sequence_nr_ = nr; }

 public:
  // The module path current when the node was recorded while a CommDebugMode was alive (""
  // otherwise): the engine attributes the node's backward collectives to it.
  const std::string& comm_module() const { return comm_module_; }

 private:
  std::string comm_module_;
  int64_t num_outputs_;
  uint64_t sequence_nr_;
  EdgeList next_edges_;
  SpecList input_specs_;
  absl::flat_hash_map<uint32_t, std::vector<GradHook>> pre_hooks_;
  absl::flat_hash_map<uint32_t, GradHook> retain_grad_hooks_;
};

// The edge a DTensor's gradient flows into: its grad_fn (and output slot), the grad
// accumulator of a leaf that requires grad, or none.
Edge gradient_edge(const DTensor& t);

// Makes `out` output `output_nr` of `node`: it requires grad and its grad_fn is `node`. Only
// floating outputs take part (an integer output never requires grad); returns whether it did.
bool set_history(DTensor& out, const std::shared_ptr<Node>& node, uint32_t output_nr);

// Whether any of `inputs` requires grad.
bool any_requires_grad(absl::Span<const DTensor* const> inputs);

// The gradient of a redistribute from `src` (the forward input's spec) back to `src`'s
// placements: grad is redistributed to `src`'s placements, except that on a mesh dim where
// `src` is Partial the gradient becomes (or stays) Replicate, and on a mesh dim where `src` is
// Replicate and the gradient arrives Partial it stays Partial (reduced later, where it is
// needed).
DTensor redistribute_backward(const DTensor& grad, const DTensorSpec& src);

}  // namespace dtensor::autograd
