// torch.autograd.functional over DTensors: vjp, jvp, vhp, hvp, jacobian and hessian of a function
// of several DTensors, built on autograd::grad (engine.h) and create_graph (create_graph.h).
//
// As PyTorch's (vectorize=false, reverse mode):
//   - `func` is called once on the inputs (detached copies that require grad; views with history
//     when create_graph and the input requires grad, so the results can be differentiated again
//     with respect to the caller's inputs). Without create_graph the results and the returned
//     outputs are detached.
//   - An input that an output does not depend on gets zeros (like the input), or with `strict`
//     raises "[autograd.functional] <fn>: The output of the user-provided function is
//     independent of input i. This is not allowed in strict mode." (PyTorch's messages); with
//     `strict` and create_graph a result that does not require grad raises "The jacobian (vjp,
//     jvp; The hessian for vhp, hvp) of the user-provided function is independent of input i.
//     This is not allowed in strict mode when create_graph=True."
//   - jvp, vhp, hvp and hessian run create_graph passes internally even with create_graph =
//     false, so the create_graph refusals apply to them (through fully_shard units and
//     record_function nodes: create_graph.h). None of the six can be captured by
//     dtensor::compile (they run autograd::grad).
//   - jvp uses the double-vjp trick (a vjp with a zero cotangent u that requires grad, then the
//     gradient of that vjp with respect to u); hvp uses it on the gradient (PyTorch's hvp).
//   - jacobian / hessian take one vjp per output element (rows), with a one-hot cotangent laid
//     out like the output (distribute_tensor of a one-hot local tensor, no communication), stacked
//     and reshaped: J[i][j] has shape outputs[i].shape() + inputs[j].shape().
// Sharding: vjp / vhp / hvp results are laid out like the inputs, jvp results like the outputs
// (autograd::grad returns a non-leaf's gradient, e.g. an input viewed under create_graph, as it
// arrives, maybe Partial: it is redistributed, recorded under create_graph). A jacobian block
// J[i][j] is the stack of rows laid out like inputs[j] (its Shard(d) becomes Shard(d +
// outputs[i].dim())), a hessian block H[i][j] likewise with Shard(d) of inputs[j] on dim d +
// inputs[i].dim(); every value equals the single-device one. Every rank of the meshes must call
// these (they run backward passes). Errors are dtensor::Error "[autograd.functional] <fn>: ...".
#pragma once

#include <functional>
#include <vector>

#include "dtensor/core/distributed_tensor.h"

namespace dtensor::autograd::functional {

using Function = std::function<std::vector<DTensor>(const std::vector<DTensor>&)>;

// A function's outputs and one product per input (vjp, vhp, hvp) or per output (jvp).
struct FunctionalResult {
  std::vector<DTensor> outputs;
  std::vector<DTensor> result;
};

// vᵀ J: the gradient of sum(outputs[i] * v[i]) with respect to each input. `v` may be empty
// when func returns one tensor of one element.
FunctionalResult vjp(const Function& func, const std::vector<DTensor>& inputs,
                     const std::vector<DTensor>& v = {}, bool create_graph = false,
                     bool strict = false);
// J v: the directional derivative of each output along v (one per input). `v` may be empty when
// there is one input of one element.
FunctionalResult jvp(const Function& func, const std::vector<DTensor>& inputs,
                     const std::vector<DTensor>& v = {}, bool create_graph = false,
                     bool strict = false);
// vᵀ H and H v for a func returning one tensor of one element (H: its Hessian with respect to
// all inputs). `v` may be empty when there is one input of one element.
FunctionalResult vhp(const Function& func, const std::vector<DTensor>& inputs,
                     const std::vector<DTensor>& v = {}, bool create_graph = false,
                     bool strict = false);
FunctionalResult hvp(const Function& func, const std::vector<DTensor>& inputs,
                     const std::vector<DTensor>& v = {}, bool create_graph = false,
                     bool strict = false);
// J[i][j] = d outputs[i] / d inputs[j], of shape outputs[i].shape() + inputs[j].shape() (for
// one input and one output PyTorch returns J[0][0] alone).
std::vector<std::vector<DTensor>> jacobian(const Function& func, const std::vector<DTensor>& inputs,
                                           bool create_graph = false, bool strict = false);
// H[i][j] = d² func / d inputs[i] d inputs[j], of shape inputs[i].shape() + inputs[j].shape(),
// for a func returning one tensor of one element.
std::vector<std::vector<DTensor>> hessian(const Function& func, const std::vector<DTensor>& inputs,
                                          bool create_graph = false, bool strict = false);

}  // namespace dtensor::autograd::functional
