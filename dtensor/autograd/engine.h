// The backward engine: runs the recorded graph from one or more roots in reverse, summing the
// gradients that meet at a node and accumulating leaf gradients into DTensor::grad().
//
// Rules (libtorch's, adapted to DTensors):
//   - A root without a gradient must have one element; its gradient is 1, Replicate on the
//     root's mesh (a Partial root receives a Replicate gradient).
//   - Every rank that built the same graph runs the nodes in the same order (latest recorded
//     first; ready accumulators immediately), so the collectives that backward issues pair up.
//     Every rank of the mesh must call backward.
//   - Gradients meeting at a node are summed with the registered "add" op (any placements:
//     the sharding engine lays them out). A gradient that reaches a leaf is laid out like the
//     leaf before it is added to grad().
//   - Saved tensors of a node are released as soon as it has run, unless retain_graph; a second
//     backward through released nodes throws "[backward] ... a second time".
//   - Errors (no gradient for a non-scalar root, a root that does not require grad, a saved
//     tensor modified in place, a missing backward formula) depend only on the graph, so every
//     rank raises the same one. An error raised on some ranks only (an allocation, a kernel on
//     an odd shard) is reported to the others of its mesh (report_failure_on_mesh, by dispatch
//     or here), and backward ends with one meet on each communicator of the meshes it ran on
//     (a fingerprint exchange, no data): the report pairs with that meet or with a collective
//     before it, so backward() raises on every rank (docs/SEMANTICS.md, "A failure on some
//     ranks"). Every rank of those meshes must call backward.
// Gradients are computed with grad mode off, except under create_graph (higher-order gradients:
// dtensor/autograd/create_graph.h declares backward(..., create_graph) and says what records).
#pragma once

#include <absl/types/span.h>

#include <functional>
#include <optional>
#include <vector>

#include "dtensor/core/distributed_tensor.h"

namespace dtensor::autograd {

// torch.autograd.backward: gradients of `roots` (seeded with `grad_roots`, or 1 for
// one-element roots when empty) accumulated into the leaves' grad().
void backward(absl::Span<const DTensor> roots, absl::Span<const DTensor> grad_roots = {},
              bool retain_graph = false);

// torch.autograd.grad: the gradients of `outputs` (seeded as backward seeds its roots) with
// respect to `inputs` (leaves or non-leaf DTensors that require grad), one per input, returned
// instead of accumulated: no grad() changes, of the inputs or of any other leaf, and no post
// accumulate grad hook runs. Only the nodes on a path from the outputs to an input run
// (PyTorch's exec_info pruning), and they run their hooks: register_hook hooks of the inputs and
// of the tensors on those paths, retain_grad of those tensors (which PyTorch populates too).
// As PyTorch, an input's gradient is taken after its register_hook hooks, except when its node
// must also run for another input (then before them). A leaf's gradient is laid out like the
// leaf (the placements backward gives its grad()); a non-leaf's is as it arrives (as retain_grad
// keeps it). An input no gradient reaches raises "[autograd.grad] ... not been used in the
// graph" unless allow_unused (then its entry is undefined) or materialize_grads (then zeros
// like it; it implies allow_unused, as PyTorch's default allow_unused=None).
// create_graph=true records the pass so that the returned gradients can be differentiated
// again (dtensor/autograd/create_graph.h). retain_graph unset (the default) means create_graph,
// as PyTorch's retain_graph=None; an explicit false frees the saved tensors of the nodes that
// ran, also under create_graph (as PyTorch): differentiating the returned gradients through a
// node whose formula read a saved tensor with history then raises "[backward] trying to run
// backward through <node> a second time" (pass std::nullopt or true to keep it). The parameters of
// a module under replicate / fully_shard are refused (data parallel reduces their gradients into
// grad(), which grad() must not do; PyTorch's DDP does not support autograd.grad either): a
// gradient with respect to anything else (e.g. the model's input) runs no data-parallel reduction.
// Inside a step that dtensor::compile captures it raises "[compile]". Every rank of the meshes must
// call it, as backward.
std::vector<DTensor> grad(absl::Span<const DTensor> outputs, absl::Span<const DTensor> inputs,
                          absl::Span<const DTensor> grad_outputs = {},
                          std::optional<bool> retain_graph = std::nullopt,
                          bool create_graph = false, bool allow_unused = false,
                          bool materialize_grads = false);
// Whether the pass running on this thread is an autograd::grad (which accumulates into no
// grad()); false outside a pass and in backward.
bool in_grad_call();

// Runs `callback` once the backward pass now running on this thread has run its whole graph
// (PyTorch's Variable._execution_engine.queue_callback): data parallel waits for its gradient
// reductions there, so the optimizer step after backward sees reduced gradients. Callbacks run
// in the order queued (one may queue more); outside a backward this throws "[queue_callback]".
// A backward that throws drops its callbacks.
void queue_callback(std::function<void()> callback);
// Whether a backward pass is running on this thread.
bool in_backward();

// a + b for two gradients of the same tensor (any placements), without recording (recorded
// under create_graph, create_graph.h).
DTensor add_gradients(const DTensor& a, const DTensor& b);

// Clears the gradients of `params` (set_to_none, PyTorch's default) or zeroes them in place
// (Module::zero_grad, Optimizer::zero_grad).
void zero_grad(absl::Span<const DTensor> params, bool set_to_none = true);

}  // namespace dtensor::autograd
