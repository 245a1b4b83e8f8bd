#include "dtensor/autograd/function.h"

#include "dtensor/autograd/create_graph.h"
#include "dtensor/autograd/grad_mode.h"
#include "dtensor/autograd/op_node.h"
#include "dtensor/tensor/error.h"

namespace dtensor::autograd {

const OpInfo& BackwardContext::op() const {
  return node_.op();
}

int64_t BackwardContext::num_inputs() const {
  return static_cast<int64_t>(node_.seen_specs.size());
}

int64_t BackwardContext::num_outputs() const {
  return static_cast<int64_t>(node_.output_specs.size());
}

const DTensor& BackwardContext::input(int64_t i) const {
  DT_CHECK(i >= 0 && i < static_cast<int64_t>(node_.saved_inputs.size()) &&
               node_.saved_inputs[i].value.defined(),
           "[%s backward] input %d was not saved (OpInfo::saved_inputs)", op().name, i);
  return node_.saved_inputs[i].value;
}

const DTensor& BackwardContext::output(int64_t o) const {
  DT_CHECK(o >= 0 && o < static_cast<int64_t>(node_.saved_outputs.size()) &&
               node_.saved_outputs[o].value.defined(),
           "[%s backward] output %d was not saved (OpInfo::saved_outputs)", op().name, o);
  return node_.saved_outputs[o].value;
}

const DTensorSpec& BackwardContext::input_spec(int64_t i) const {
  return *node_.seen_specs.at(i);
}

const DTensorSpec& BackwardContext::output_spec(int64_t o) const {
  return *node_.output_specs.at(o);
}

bool BackwardContext::needs_input_grad(int64_t i) const {
  return i >= 0 && i < num_inputs() && node_.needs_grad[i];
}

absl::Span<const ArgValue> BackwardContext::args() const {
  return node_.args();
}

bool BackwardContext::has_arg(int64_t i) const {
  return i >= 0 && i < static_cast<int64_t>(args().size()) &&
         !std::holds_alternative<std::monostate>(args()[i]);
}

Scalar BackwardContext::scalar(int64_t i) const {
  if (has_arg(i)) {
    const ArgValue& v = args()[i];
    if (const double* d = std::get_if<double>(&v)) return Scalar(*d);
    if (const int64_t* n = std::get_if<int64_t>(&v)) return Scalar(*n);
    if (const bool* b = std::get_if<bool>(&v)) return Scalar(*b);
  }
  bad_arg(i);
}

void BackwardContext::bad_arg(int64_t i) const {
  DT_FAIL("[%s backward] argument %d is missing or of another type (args: %d)", op().name, i,
          args().size());
}

namespace {

class FunctionNode : public Node {
 public:
  FunctionNode(std::string name, int64_t num_outputs, BackwardFunction backward,
               bool create_graph_ok)
      : Node(num_outputs),
        name_(std::move(name)),
        backward_(std::move(backward)),
        create_graph_ok_(create_graph_ok) {}
  std::string name() const override { return name_; }
  DTensorList apply(DTensorList grads) override {
    DT_CHECK(backward_ != nullptr,
             "[backward] trying to run backward through %s a second time: it was freed by the "
             "first backward (pass retain_graph = true to the first one)",
             name_);
    // Decided by the graph alone (the same on every rank), before any collective of backward_.
    if (in_create_graph() && !create_graph_ok_) {
      for (const Edge& e : next_edges()) {
        if (e.valid()) fail_no_double_backward("its record_function backward");
      }
    }
    DTensorList out = backward_(grads);
    for (size_t i = 0; i < out.size() && i < next_edges().size(); ++i) {
      if (!next_edges()[i].valid()) out[i] = DTensor();
    }
    if (in_create_graph()) check_history(grads, out);
    return out;
  }
  void release_saved() override { backward_ = nullptr; }

 private:
  // create_graph: a backward that drops the history of the gradients it was given (one written
  // with the no-grad kernels) would make the gradients of gradients silently wrong: raised.
  void check_history(const DTensorList& grads, const DTensorList& out) const {
    bool in_history = false;
    for (const DTensor& g : grads) in_history = in_history || (g.defined() && g.requires_grad());
    if (!in_history) return;
    for (const DTensor& o : out) {
      if (o.defined() && is_floating(o.dtype()) && !o.requires_grad()) {
        fail_no_double_backward("its record_function backward");
      }
    }
  }

  std::string name_;
  BackwardFunction backward_;
  bool create_graph_ok_;  // record_linear_function, record_differentiable_function
};

// saved_input_with_history's link: the gradient of the saved input into the node's edge (the
// saved value has the input's spec: nothing to lay out).
class SavedFunctionInputNode : public Node {
 public:
  SavedFunctionInputNode(Edge edge, std::shared_ptr<const DTensorSpec> spec) : Node(1) {
    add_input(std::move(edge), std::move(spec));
  }
  std::string name() const override { return "SavedInputBackward"; }
  DTensorList apply(DTensorList grads) override { return grads; }
};

DTensorList record(std::string name, absl::Span<const DTensor* const> inputs, DTensorList outputs,
                   BackwardFunction backward, bool linear) {
  if (!grad_enabled() || !any_requires_grad(inputs)) {
    // Not recorded: the outputs carry no autograd state (not even one they share with an
    // input, as a no-op redistribute's output does).
    for (DTensor& out : outputs) out = out.detach();
    return outputs;
  }
  auto node = std::make_shared<FunctionNode>(std::move(name), static_cast<int64_t>(outputs.size()),
                                             std::move(backward), linear);
  for (const DTensor* in : inputs) node->add_input(gradient_edge(*in), in->spec_ptr());
  std::shared_ptr<Node> as_node = node;
  for (size_t o = 0; o < outputs.size(); ++o) {
    set_history(outputs[o], as_node, static_cast<uint32_t>(o));
  }
  return outputs;
}

DTensor record_one(std::string name, absl::Span<const DTensor* const> inputs, DTensor output,
                   BackwardFunction backward, bool linear) {
  DTensorList outs;
  outs.push_back(std::move(output));
  return std::move(
      record(std::move(name), inputs, std::move(outs), std::move(backward), linear)[0]);
}

}  // namespace

DTensorList record_function(std::string name, absl::Span<const DTensor* const> inputs,
                            DTensorList outputs, BackwardFunction backward) {
  return record(std::move(name), inputs, std::move(outputs), std::move(backward), false);
}

DTensor record_function(std::string name, absl::Span<const DTensor* const> inputs, DTensor output,
                        BackwardFunction backward) {
  return record_one(std::move(name), inputs, std::move(output), std::move(backward), false);
}

DTensorList record_linear_function(std::string name, absl::Span<const DTensor* const> inputs,
                                   DTensorList outputs, BackwardFunction backward) {
  return record(std::move(name), inputs, std::move(outputs), std::move(backward), true);
}

DTensor record_linear_function(std::string name, absl::Span<const DTensor* const> inputs,
                               DTensor output, BackwardFunction backward) {
  return record_one(std::move(name), inputs, std::move(output), std::move(backward), true);
}

DTensorList record_differentiable_function(std::string name,
                                           absl::Span<const DTensor* const> inputs,
                                           DTensorList outputs, BackwardFunction backward) {
  return record(std::move(name), inputs, std::move(outputs), std::move(backward), true);
}

DTensor saved_input_with_history(const DTensor& value, size_t i) {
  const std::shared_ptr<Node>& node = create_graph_node();
  if (!in_create_graph() || node == nullptr || !value.defined() || i >= node->next_edges().size() ||
      !node->next_edges()[i].valid()) {
    return value;
  }
  DT_CHECK(value.shape() == node->input_specs()[i]->shape() &&
               value.placements() == node->input_specs()[i]->placements(),
           "[%s backward] the saved input %d is %s, the forward's was %s", node->name(), i,
           value.spec().str(), node->input_specs()[i]->str());
  auto link =
      std::make_shared<SavedFunctionInputNode>(node->next_edges()[i], node->input_specs()[i]);
  DTensor v(value.to_local(), value.spec_ptr());
  set_history(v, link, 0);
  return v;
}

}  // namespace dtensor::autograd
