#include "dtensor/autograd/functional.h"

#include <absl/strings/str_format.h>

#include <string>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/engine.h"
#include "dtensor/autograd/grad_mode.h"
#include "dtensor/core/factories.h"
#include "dtensor/core/propagation/op_schema.h"
#include "dtensor/core/propagation/registry.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/shape.h"

namespace dtensor::autograd::functional {
namespace {

// PyTorch's _grad_preprocess: inputs that require grad, with history only under create_graph.
std::vector<DTensor> preprocess(const std::vector<DTensor>& inputs, bool create_graph) {
  std::vector<DTensor> out;
  for (const DTensor& x : inputs) {
    DT_CHECK(x.defined(), "[autograd.functional] an input is an undefined DTensor");
    if (create_graph && x.requires_grad()) {
      out.push_back(x.view(x.shape()));
    } else {
      out.push_back(x.detach());
      out.back().requires_grad_();
    }
  }
  return out;
}

std::vector<DTensor> postprocess(std::vector<DTensor> xs, bool create_graph) {
  if (!create_graph) {
    for (DTensor& x : xs) x = x.defined() ? x.detach() : x;
  }
  return xs;
}

std::vector<DTensor> call(const Function& func, const std::vector<DTensor>& inputs,
                          const char* fn) {
  std::vector<DTensor> outputs = func(inputs);
  for (size_t i = 0; i < outputs.size(); ++i) {
    DT_CHECK(outputs[i].defined(),
             "[autograd.functional] %s: output %d of the user-provided function is undefined", fn,
             i);
  }
  return outputs;
}

constexpr char kIndependent[] =
    "The output of the user-provided function is independent of input %d. This is not allowed "
    "in strict mode.";
constexpr char kOutputNoGrad[] =
    "Output %d of the user-provided function does not require gradients. The outputs must be "
    "computed in a differentiable manner from the input when running in strict mode.";
constexpr char kJacobianNoGrad[] =
    "While computing the hessian, found that the jacobian of the user-provided function with "
    "respect to input %d is independent of the input. This is not allowed in strict mode. You "
    "should ensure that your function is twice differentiable and that the jacobian depends on "
    "the inputs (this would be violated by a linear function for example).";

// PyTorch's _check_requires_grad (strict only): `message` names the index of an entry that
// does not require grad.
void check_requires_grad(const std::vector<DTensor>& xs, const char* message, bool strict,
                         const char* fn) {
  if (!strict) return;
  for (size_t i = 0; i < xs.size(); ++i) {
    DT_CHECK(xs[i].defined(), "[autograd.functional] %s: %s", fn, absl::StrFormat(kIndependent, i));
    DT_CHECK(xs[i].requires_grad(), "[autograd.functional] %s: %s", fn,
             absl::StrFormat(message, i));
  }
}

// PyTorch's _validate_v: one v per `other`, of its shape.
void validate_v(const std::vector<DTensor>& v, const std::vector<DTensor>& other, const char* fn) {
  DT_CHECK(v.size() == other.size(),
           "[autograd.functional] %s: v is a tuple of invalid length: should be %d but got %d", fn,
           other.size(), v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    DT_CHECK(v[i].defined() && v[i].shape() == other[i].shape(),
             "[autograd.functional] %s: Entry %d in v has invalid size: should be %s but got %s",
             fn, i, shape_str(other[i].shape()), v[i].defined() ? shape_str(v[i].shape()) : "none");
  }
}

// v may be left out when `other` is one tensor of one element (then it is 1).
constexpr char kOneInput[] = "the input to the user-provided function is a single Tensor";
std::vector<DTensor> default_v(const std::vector<DTensor>& v, const std::vector<DTensor>& other,
                               const char* what, const char* fn) {
  if (v.empty()) {
    DT_CHECK(other.size() == 1 && other[0].numel() == 1,
             "[autograd.functional] %s: The vector v can only be None if %s with a single "
             "element.",
             fn, what);
    return {ones_like(other[0])};
  }
  validate_v(v, other, fn);
  return v;
}

// PyTorch's _autograd_grad: the outputs that require grad only (undefined results when none
// does), unused inputs undefined.
std::vector<DTensor> grad_of(const std::vector<DTensor>& outputs,
                             const std::vector<DTensor>& inputs,
                             const std::vector<DTensor>& grad_outputs, bool create_graph) {
  std::vector<DTensor> outs, seeds;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined() || !outputs[i].requires_grad()) continue;
    outs.push_back(outputs[i]);
    seeds.push_back(grad_outputs[i]);
  }
  if (outs.empty()) return std::vector<DTensor>(inputs.size());
  AutoGradMode enable(true);
  std::vector<DTensor> grads =
      grad(outs, inputs, seeds, /*retain_graph=*/true, create_graph, /*allow_unused=*/true);
  // autograd::grad lays out a leaf's gradient like the leaf but returns a non-leaf's (an input
  // viewed under create_graph) as it arrives (Partial, another Shard): lay each out like its
  // input, recorded under create_graph.
  for (size_t i = 0; i < grads.size(); ++i) {
    if (grads[i].defined() && grads[i].placements() != inputs[i].placements()) {
      grads[i] = grads[i].redistribute(inputs[i].placements());
    }
  }
  return grads;
}

// PyTorch's _fill_in_zeros: undefined gradients become zeros like `refs`, or raise in strict;
// in strict with create_graph a gradient must require grad (`what`: "jacobian" for vjp / jvp,
// "hessian" for vhp / hvp).
std::vector<DTensor> fill_in_zeros(std::vector<DTensor> grads, const std::vector<DTensor>& refs,
                                   bool strict, bool create_graph, const char* message,
                                   const char* what, const char* fn) {
  for (size_t i = 0; i < grads.size(); ++i) {
    if (grads[i].defined()) {
      DT_CHECK(!strict || !create_graph || grads[i].requires_grad(),
               "[autograd.functional] %s: The %s of the user-provided function is independent "
               "of input %d. This is not allowed in strict mode when create_graph=True.",
               fn, what, i);
      continue;
    }
    DT_CHECK(!strict, "[autograd.functional] %s: %s", fn, absl::StrFormat(message, i));
    grads[i] = zeros_like(refs[i]);
  }
  return grads;
}

std::vector<DTensor> zeros_requiring_grad(const std::vector<DTensor>& like) {
  std::vector<DTensor> out;
  for (const DTensor& x : like) {
    out.push_back(zeros_like(x));
    out.back().requires_grad_();
  }
  return out;
}

// The single tensor of one element that vhp / hvp / hessian differentiate twice.
void check_scalar(const std::vector<DTensor>& outputs, const char* fn) {
  DT_CHECK(outputs.size() == 1,
           "[autograd.functional] %s: The function given to %s should "
           "return a single Tensor",
           fn, fn);
  DT_CHECK(outputs[0].numel() == 1,
           "[autograd.functional] %s: The Tensor returned by the "
           "function given to %s should contain a single element",
           fn, fn);
}

// d² out / d inputs², applied to v: vhp (grad of the gradient) or hvp (double-vjp trick).
FunctionalResult second_order(const Function& func, const std::vector<DTensor>& inputs,
                              const std::vector<DTensor>& v, bool create_graph, bool strict,
                              bool hvp, const char* fn) {
  AutoGradMode enable(true);
  const std::vector<DTensor> xs = preprocess(inputs, create_graph);
  std::vector<DTensor> outputs = call(func, xs, fn);
  check_scalar(outputs, fn);
  const std::vector<DTensor> vs = default_v(v, xs, kOneInput, fn);
  check_requires_grad(outputs, kOutputNoGrad, strict, fn);
  const std::vector<DTensor> jac = grad_of(outputs, xs, {ones_like(outputs[0])}, true);
  check_requires_grad(jac, kJacobianNoGrad, strict, fn);
  std::vector<DTensor> res;
  if (!hvp) {
    res = fill_in_zeros(grad_of(jac, xs, vs, create_graph), xs, strict, create_graph,
                        "The jacobian of the user-provided function is independent of input %d. "
                        "This is not allowed in strict mode.",
                        "hessian", fn);
  } else {
    const std::vector<DTensor> grad_jac = zeros_requiring_grad(xs);
    const std::vector<DTensor> double_back = grad_of(jac, xs, grad_jac, true);
    res = fill_in_zeros(grad_of(double_back, grad_jac, vs, create_graph), xs, strict, create_graph,
                        "The hessian of the user-provided function is independent of entry %d in "
                        "the grad_jacobian. This is not allowed in strict mode as it prevents "
                        "from using the double backward trick to replace forward mode AD.",
                        "hessian", fn);
  }
  return {postprocess(std::move(outputs), create_graph), postprocess(std::move(res), create_graph)};
}

// A one-hot cotangent for element `index` of `out`, laid out like it (each rank builds the same
// local tensor: no communication).
DTensor one_hot_like(const DTensor& out, int64_t index) {
  Tensor local = zeros({out.numel()}, TensorOptions(out.dtype()));
  local.narrow(0, index, 1).fill_(1);
  local = local.view(out.shape()).to(local_device(out.device_mesh()));
  return distribute_tensor(local, out.device_mesh(), out.placements(), std::nullopt);
}

// Rows stacked on a new dim 0 (the registered "stack"), as the view of shape out_shape +
// row_shape.
DTensor stack_rows(const std::vector<DTensor>& rows, const Shape& out_shape) {
  const OpInfo* stack_op = op_registry().find("stack");
  DT_CHECK(stack_op != nullptr, "[autograd.functional] jacobian: no 'stack' op is registered");
  std::vector<const DTensor*> in;
  for (const DTensor& r : rows) in.push_back(&r);
  const ArgValue args[] = {int64_t{0}};
  Shape shape = out_shape;
  shape.insert(shape.end(), rows[0].shape().begin(), rows[0].shape().end());
  return dispatch(*stack_op, in, args).reshape(shape);
}

}  // namespace

FunctionalResult vjp(const Function& func, const std::vector<DTensor>& inputs,
                     const std::vector<DTensor>& v, bool create_graph, bool strict) {
  AutoGradMode enable(true);
  const std::vector<DTensor> xs = preprocess(inputs, create_graph);
  std::vector<DTensor> outputs = call(func, xs, "vjp");
  check_requires_grad(outputs, kOutputNoGrad, strict, "vjp");
  const std::vector<DTensor> vs =
      default_v(v, outputs, "the user-provided function returns a single Tensor", "vjp");
  std::vector<DTensor> res = fill_in_zeros(grad_of(outputs, xs, vs, create_graph), xs, strict,
                                           create_graph, kIndependent, "jacobian", "vjp");
  return {postprocess(std::move(outputs), create_graph), postprocess(std::move(res), create_graph)};
}

FunctionalResult jvp(const Function& func, const std::vector<DTensor>& inputs,
                     const std::vector<DTensor>& v, bool create_graph, bool strict) {
  AutoGradMode enable(true);
  const std::vector<DTensor> xs = preprocess(inputs, create_graph);
  const std::vector<DTensor> vs = default_v(v, xs, kOneInput, "jvp");
  std::vector<DTensor> outputs = call(func, xs, "jvp");
  check_requires_grad(outputs, kOutputNoGrad, strict, "jvp");
  // The double-vjp trick: g(u) = uᵀ J is linear in u, and d(g(u) · v)/du = J v.
  const std::vector<DTensor> us = zeros_requiring_grad(outputs);
  const std::vector<DTensor> grad_inputs = grad_of(outputs, xs, us, true);
  check_requires_grad(grad_inputs,
                      "The gradient with respect to input %d is independent of the inputs of the "
                      "user-provided function. This is not allowed in strict mode.",
                      strict, "jvp");
  std::vector<DTensor> res = fill_in_zeros(
      grad_of(grad_inputs, us, vs, create_graph), outputs, strict, create_graph,
      "The gradient with respect to the input is independent of entry %d in the grad_outputs "
      "when using the double backward trick to compute forward mode gradients. This is not "
      "allowed in strict mode.",
      "jacobian", "jvp");
  return {postprocess(std::move(outputs), create_graph), postprocess(std::move(res), create_graph)};
}

FunctionalResult vhp(const Function& func, const std::vector<DTensor>& inputs,
                     const std::vector<DTensor>& v, bool create_graph, bool strict) {
  return second_order(func, inputs, v, create_graph, strict, /*hvp=*/false, "vhp");
}

FunctionalResult hvp(const Function& func, const std::vector<DTensor>& inputs,
                     const std::vector<DTensor>& v, bool create_graph, bool strict) {
  return second_order(func, inputs, v, create_graph, strict, /*hvp=*/true, "hvp");
}

std::vector<std::vector<DTensor>> jacobian(const Function& func, const std::vector<DTensor>& inputs,
                                           bool create_graph, bool strict) {
  AutoGradMode enable(true);
  const std::vector<DTensor> xs = preprocess(inputs, create_graph);
  const std::vector<DTensor> outputs = call(func, xs, "jacobian");
  check_requires_grad(outputs, kOutputNoGrad, strict, "jacobian");
  std::vector<std::vector<DTensor>> jac;
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::vector<std::vector<DTensor>> rows(xs.size());
    for (int64_t e = 0; e < outputs[i].numel(); ++e) {
      const std::vector<DTensor> vj =
          grad_of({outputs[i]}, xs, {one_hot_like(outputs[i], e)}, create_graph);
      for (size_t j = 0; j < xs.size(); ++j) {
        DT_CHECK(vj[j].defined() || !strict,
                 "[autograd.functional] jacobian: Output %d of the user-provided function is "
                 "independent of input %d. This is not allowed in strict mode.",
                 i, j);
        DT_CHECK(!vj[j].defined() || !strict || !create_graph || vj[j].requires_grad(),
                 "[autograd.functional] jacobian: The jacobian of the user-provided function is "
                 "independent of input %d. This is not allowed in strict mode when "
                 "create_graph=True.",
                 i);
        rows[j].push_back(vj[j].defined() ? vj[j] : zeros_like(xs[j]));
      }
    }
    std::vector<DTensor> block;
    for (size_t j = 0; j < xs.size(); ++j) {
      if (rows[j].empty()) {  // an output of no element: an empty block
        Shape shape = outputs[i].shape();
        shape.insert(shape.end(), xs[j].shape().begin(), xs[j].shape().end());
        block.push_back(zeros(shape, xs[j].device_mesh(),
                              Placements(xs[j].placements().size(), Replicate()), xs[j].dtype()));
      } else {
        block.push_back(stack_rows(rows[j], outputs[i].shape()));
      }
    }
    jac.push_back(postprocess(std::move(block), create_graph));
  }
  return jac;
}

std::vector<std::vector<DTensor>> hessian(const Function& func, const std::vector<DTensor>& inputs,
                                          bool create_graph, bool strict) {
  const Function scalar = [&](const std::vector<DTensor>& xs) {
    std::vector<DTensor> out = call(func, xs, "hessian");
    check_requires_grad(out, kOutputNoGrad, strict, "hessian");  // as ensure_single_output_function
    check_scalar(out, "hessian");
    return std::vector<DTensor>{out[0].reshape({})};
  };
  const Function gradient = [&](const std::vector<DTensor>& xs) {
    // As PyTorch, the inner jacobian is not strict; its result is checked below.
    std::vector<DTensor> jac = jacobian(scalar, xs, /*create_graph=*/true, /*strict=*/false)[0];
    check_requires_grad(jac, kJacobianNoGrad, strict, "hessian");
    return jac;
  };
  return jacobian(gradient, inputs, create_graph, strict);
}

}  // namespace dtensor::autograd::functional
