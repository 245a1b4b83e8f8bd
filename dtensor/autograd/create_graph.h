// Higher-order gradients (PyTorch's create_graph=True): a backward pass that records the graph of
// its own computation, so that the gradients it returns (autograd::grad) or accumulates into
// grad() (backward) can be differentiated again.
//
// Under create_graph the pass runs with grad mode on: the formulas, written with DTensor ops,
// record nodes as forward does; gradients meeting at a node are summed with a recorded add; a
// formula reading a saved input sees it with history (a node that carries its gradient from the
// spec the kernel saw back to the input's own, then into the input's edge), and a saved output
// with the history of the very node being run (made when it runs: no stored reference cycle).
// Every registered op has a double backward (autograd_tests' finite-difference sweeps, second
// and third order, list none that raises). The refusal below is a guard, not a missing piece: a
// formula that dispatches a gradient op registered without a derivative on a value that requires
// grad raises "[autograd] create_graph: <op>'s backward uses <grad op>, which has no derivative
// (double backward is not implemented for it)" on every rank (the graph decides) instead of
// dropping the second-order term; record_function nodes are refused the same way (function.h).
// Without create_graph nothing of this runs (one thread-local flag read per non-differentiable
// dispatch).
#pragma once

#include <absl/types/span.h>

#include <memory>
#include <optional>
#include <string_view>

#include "dtensor/core/distributed_tensor.h"

namespace dtensor::autograd {

class Node;

// torch.autograd.backward with create_graph: as autograd::backward (engine.h), and when
// create_graph the pass records its graph; the leaves' grad() then carry history (a non-leaf:
// PyTorch warns of the reference cycle a parameter's .grad pointing back at the parameter makes;
// set grad() to an undefined DTensor, e.g. zero_grad, to break it). retain_graph unset means
// create_graph (PyTorch's retain_graph=None); an explicit false frees the graph's saved tensors
// as the pass goes, as PyTorch does, so that differentiating the gradients again through a node
// whose formula read a saved tensor with history (most do) raises "[backward] trying to run
// backward through <node> a second time" (autograd::grad's retain_graph, engine.h, likewise).
// DTensor::backward(gradient, retain_graph, create_graph) calls this. Refused
// inside a dtensor::compile capture.
void backward(absl::Span<const DTensor> roots, absl::Span<const DTensor> grad_roots,
              std::optional<bool> retain_graph, bool create_graph);

// Whether the backward pass running on this thread records its graph (create_graph).
bool in_create_graph();

// For the engine's nodes under create_graph: the node now running (its shared owner, from which
// a saved output takes its history) and its name for errors. Empty outside create_graph.
const std::shared_ptr<Node>& create_graph_node();

// Raises the "[autograd] create_graph: ..." error for `grad_op` dispatched by the formula of
// the node now running.
[[noreturn]] void fail_no_double_backward(std::string_view grad_op);

}  // namespace dtensor::autograd
