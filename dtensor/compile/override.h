// Keeping part of a step out of the trace (the founding design's Override): while a step is
// captured, a submodule can be replaced by a module of the user's choosing — typically one whose
// forward is an EagerFunction, a node of the graph that calls back into user code at every
// replay (forward, and backward with its own gradient formula) — and the captured graph can then
// be rewritten around that node (Override::transform), e.g. to put a fused computation in its
// place. docs/guides/compiling_a_step.md, "Overrides".
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "dtensor/compile/graph.h"
#include "dtensor/core/distributed_tensor.h"
#include "dtensor/nn/module.h"

namespace dtensor::compiler {

// User code run as one node of the graph, eagerly at capture and again at every replay, with
// autograd: `forward` maps the inputs to the outputs (any DTensor code; it runs without
// recording), `backward` maps (inputs, gradients of the outputs — undefined where none arrived)
// to one gradient per input (undefined where none flows), each with its input's global shape.
struct EagerFunction {
  std::string name;  // the node's name in the graph ("<name>.forward", "<name>.backward")
  std::function<DTensorList(const DTensorList& inputs)> forward;
  std::function<DTensorList(const DTensorList& inputs, const DTensorList& grad_outputs)> backward;
};

// Runs `f` on `inputs`: outside a capture, simply its forward recorded for autograd with its
// backward; while a step is captured, also as the graph's nodes "<name>.forward" (and
// "<name>.backward" when backward runs) of kind "eager".
DTensorList call_eager(const EagerFunction& f, const DTensorList& inputs);

class Override {
 public:
  virtual ~Override() = default;
  // The module to run in place of the submodule at `fqn` while the step is captured, or nullptr
  // to keep `original` (called for every submodule of CompileOptions::module, in pre-order).
  virtual std::shared_ptr<nn::Module> replacement(const std::string& fqn,
                                                  const std::shared_ptr<nn::Module>& original) = 0;
  // Rewrites the captured graph after the passes (Graph's editing members); the default keeps it.
  // The graph is checked afterwards: every node must read values made before it.
  virtual void transform(Graph& graph) { (void)graph; }
};

}  // namespace dtensor::compiler
