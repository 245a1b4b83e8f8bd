#include "dtensor/autograd/dispatch.h"

#include <absl/strings/str_cat.h>

#include <optional>

#include "dtensor/autograd/create_graph.h"
#include "dtensor/autograd/function.h"
#include "dtensor/autograd/grad_mode.h"
#include "dtensor/autograd/op_node.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/detail/capture_hook.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace autograd {

namespace {

// create_graph: the gradient of a saved input, from the spec the kernel saw back to the input's
// own placements, into the input's edge.
class SavedInputNode : public Node {
 public:
  SavedInputNode(Edge edge, std::shared_ptr<const DTensorSpec> spec) : Node(1) {
    add_input(std::move(edge), std::move(spec));
  }
  std::string name() const override { return "SavedInputBackward"; }
  DTensorList apply(DTensorList grads) override {
    DTensor g = std::move(grads[0]);
    if (g.defined() && g.placements() != input_specs()[0]->placements()) {
      g = redistribute_backward(g, *input_specs()[0]);
    }
    DTensorList out;
    out.push_back(std::move(g));
    return out;
  }
};

// create_graph: gives the saved values history for one run of a formula (the saved inputs lead
// to their inputs' edges, the saved outputs to `self`'s outputs), and takes it away after.
class SavedHistory {
 public:
  SavedHistory(OpNode& node, const std::shared_ptr<Node>& self) : node_(node) {
    for (size_t i = 0; i < node.saved_inputs.size(); ++i) {
      DTensor& v = node.saved_inputs[i].value;
      if (!v.defined() || !node.next_edges()[i].valid()) continue;
      auto link = std::make_shared<SavedInputNode>(node.next_edges()[i], node.input_specs()[i]);
      v = DTensor(v.to_local(), v.spec_ptr());
      set_history(v, link, 0);
    }
    for (size_t o = 0; o < node.saved_outputs.size() && self != nullptr; ++o) {
      DTensor& v = node.saved_outputs[o].value;
      if (!v.defined()) continue;
      v = DTensor(v.to_local(), v.spec_ptr());
      set_history(v, self, static_cast<uint32_t>(o));
    }
  }
  ~SavedHistory() {
    for (auto* list : {&node_.saved_inputs, &node_.saved_outputs}) {
      for (OpNode::Saved& s : *list) {
        if (s.value.defined()) s.value = s.value.detach();
      }
    }
  }
  SavedHistory(const SavedHistory&) = delete;
  SavedHistory& operator=(const SavedHistory&) = delete;

 private:
  OpNode& node_;
};

}  // namespace

OpNode::OpNode(const OpInfo& op, absl::Span<const ArgValue> args, int64_t num_outputs)
    : Node(num_outputs), op_(&op), args_(args.begin(), args.end()) {}

std::string OpNode::name() const {
  return absl::StrCat(op_->name, "Backward");
}

void OpNode::release_saved() {
  saved_inputs.clear();
  saved_outputs.clear();
  released_ = true;
}

void OpNode::check_versions() const {
  auto check = [&](absl::Span<const Saved> saved, const char* what) {
    for (size_t i = 0; i < saved.size(); ++i) {
      const Saved& s = saved[i];
      if (!s.value.defined()) continue;
      DT_CHECK(s.value.to_local().storage().version() == s.version,
               "[backward] %s %d of %s, saved for backward, was modified by an in-place op "
               "after it was saved (version %d, saved at version %d); use the out-of-place op "
               "or clone() it first",
               what, i, op_->name, s.value.to_local().storage().version(), s.version);
    }
  };
  check(saved_inputs, "input");
  check(saved_outputs, "output");
}

DTensorList OpNode::apply(DTensorList grad_outputs) {
  DT_CHECK(!released_,
           "[backward] trying to run backward through %s a second time: its saved tensors were "
           "freed by the first backward (pass retain_graph = true to the first one)",
           name());
  DT_CHECK(static_cast<bool>(op_->backward), "[backward] op '%s' has no backward formula",
           op_->name);
  check_versions();
  const BackwardContext ctx(*this);
  std::optional<SavedHistory> history;
  if (in_create_graph()) history.emplace(*this, create_graph_node());
  DTensorList grads = op_->backward(ctx, grad_outputs);
  history.reset();
  const size_t nin = seen_specs.size();
  DT_CHECK(grads.size() == nin, "[backward] the formula of %s returned %d gradients for %d inputs",
           op_->name, grads.size(), nin);
  for (size_t i = 0; i < nin; ++i) {
    if (!needs_grad[i]) {
      grads[i] = DTensor();
      continue;
    }
    if (!grads[i].defined()) continue;
    const DTensorSpec& seen = *seen_specs[i];
    DT_CHECK(grads[i].shape() == seen.shape() && grads[i].dtype() == seen.dtype(),
             "[backward] the formula of %s returned %s for input %s, expected global shape %s, "
             "%s",
             op_->name, grads[i].str(), op_->input_name(i), shape_str(seen.shape()),
             dtype_name(seen.dtype()));
    // Dispatch redistributed this input before the kernel: carry its gradient back.
    const DTensorSpec& original = *input_specs()[i];
    if (seen.placements() != original.placements()) {
      grads[i] = redistribute_backward(grads[i], original);
    }
  }
  return grads;
}

}  // namespace autograd

namespace {

using autograd::OpNode;

bool saves(uint32_t mask, size_t i) {
  return i < 32 && ((mask >> i) & 1u) != 0;
}

// In-place ops under grad mode: refuse what autograd cannot follow, and keep self's old value
// when the formula needs it (the kernel is about to overwrite it).
Tensor prepare_inplace(const OpInfo& op, const DTensor& self, bool record) {
  if (!record) return Tensor();
  const std::shared_ptr<AutogradMeta>& meta = self.autograd_meta();
  if (meta != nullptr) {
    DT_CHECK(!(meta->requires_grad && meta->grad_fn == nullptr),
             "[%s] a leaf DTensor that requires grad is used in an in-place operation (use the "
             "out-of-place op, or run it under NoGradGuard)",
             op.name);
    DT_CHECK(!meta->is_view,
             "[%s] in-place operation on a view of a DTensor that requires grad is not supported "
             "by autograd (the viewed DTensor's graph would not see the write); clone() the view "
             "first",
             op.name);
  }
  if (!saves(op.saved_inputs, 0)) return Tensor();
  if (dtensor::detail::capture_recorder() == nullptr) return self.to_local().clone();
  // A step being captured records the copy (replay makes it of the replay's tensor).
  Tensor copy[1];
  dtensor::detail::run_recorded(
      "op", "save_before_inplace", {self.to_local()}, copy, 0,
      [](absl::Span<const Tensor> in, absl::Span<Tensor> out) { out[0] = in[0].clone(); });
  return copy[0];
}

// Records the node of one dispatched call.
void record(const OpInfo& op, absl::Span<const DTensor* const> inputs,
            absl::Span<const ArgValue> args, const DispatchTrace& trace, DTensorList& outputs,
            const Tensor& inplace_old_self, uint32_t inplace_self_version) {
  const size_t nin = inputs.size(), nout = outputs.size();
  auto node = std::make_shared<OpNode>(op, args, static_cast<int64_t>(nout));
  const OutputSharding& sharding = *trace.sharding;
  // The lists are inline for the common arities: no reserve. The saved lists are filled only
  // when something is saved (BackwardContext reads a missing entry as "not saved"), in place:
  // one allocation each, no default DTensor assigned over.
  if (op.saved_inputs != 0) node->saved_inputs.reserve(nin);
  for (size_t i = 0; i < nin; ++i) {
    const DTensor& in = *inputs[i];
    autograd::Edge edge = autograd::gradient_edge(in);
    node->needs_grad.push_back(edge.valid());
    node->add_input(std::move(edge), in.spec_ptr());
    std::shared_ptr<const DTensorSpec> seen =
        sharding.needs_redistribute() && sharding.required_inputs[i] != nullptr
            ? sharding.required_inputs[i]
            : in.spec_ptr();
    if (saves(op.saved_inputs, i)) {
      // Outside the mesh the kernel saw nothing: an empty stand-in of the right rank.
      Tensor local = i == 0 && inplace_old_self.defined() ? inplace_old_self
                     : i < trace.inputs.size()
                         ? trace.inputs[i]
                         : empty(Shape(seen->ndim(), 0),
                                 TensorOptions(seen->dtype(), local_device(in.device_mesh())));
      // Another input of an in-place op that is self's memory (a.mul_(a)) was read by the
      // kernel before its write: saved at self's version before the write, so that backward
      // raises as PyTorch does instead of reading the written values (a.mul_(a) of
      // a = [1, 2, 3] gave the gradient a^2 + a = [2, 6, 12], not 2 a).
      const uint32_t version =
          op.inplace && i != 0 && local.storage().is_same(inputs[0]->to_local().storage())
              ? inplace_self_version
              : local.storage().version();
      node->saved_inputs.push_back({DTensor(std::move(local), seen), version});
    } else if (op.saved_inputs != 0) {
      node->saved_inputs.emplace_back();
    }
    node->seen_specs.push_back(std::move(seen));
  }
  if (op.saved_outputs != 0) node->saved_outputs.reserve(nout);
  for (size_t o = 0; o < nout; ++o) {
    node->output_specs.push_back(outputs[o].spec_ptr());
    if (saves(op.saved_outputs, o)) {
      const uint32_t version = outputs[o].to_local().storage().version();
      node->saved_outputs.push_back({outputs[o].detach(), version});
    } else if (op.saved_outputs != 0) {
      node->saved_outputs.emplace_back();
    }
  }
  std::shared_ptr<autograd::Node> as_node = node;
  for (size_t o = 0; o < nout; ++o) {
    if (!autograd::set_history(outputs[o], as_node, static_cast<uint32_t>(o))) continue;
    if (op.view && inputs[0]->requires_grad()) outputs[o].autograd_meta()->is_view = true;
  }
}

}  // namespace

DTensorList dispatch_multi(const OpInfo& op, absl::Span<const DTensor* const> inputs,
                           absl::Span<const ArgValue> args) {
  const bool record_call = autograd::grad_enabled() && (op.differentiable || op.inplace) &&
                           autograd::any_requires_grad(inputs);
  if (!record_call && !op.inplace) {
    if (op.differentiable || !autograd::in_create_graph())
      return dispatch_sharded(op, inputs, args);
    // create_graph: an op without a derivative must not drop the history of what it reads.
    DTensorList outputs = dispatch_sharded(op, inputs, args);
    if (autograd::grad_enabled() && autograd::any_requires_grad(inputs)) {
      for (const DTensor& out : outputs) {
        if (out.defined() && is_floating(out.dtype())) autograd::fail_no_double_backward(op.name);
      }
    }
    return outputs;
  }

  Tensor old_self;
  uint32_t self_version = 0;
  if (op.inplace) {
    DT_CHECK(!inputs.empty() && inputs[0] != nullptr && inputs[0]->defined(),
             "[%s] argument self is an undefined DTensor", op.name);
    old_self = prepare_inplace(op, *inputs[0], record_call);
    self_version = inputs[0]->to_local().storage().version();
  }
  DispatchTrace trace;
  DTensorList outputs = dispatch_sharded(op, inputs, args, record_call ? &trace : nullptr);
  if (op.inplace) inputs[0]->to_local().storage().bump_version();
  if (!record_call) return outputs;
  DT_CHECK(op.differentiable || op.backward,
           "[%s] the in-place op is not differentiable but an input requires grad", op.name);
  record(op, inputs, args, trace, outputs, old_self, self_version);
  if (op.inplace) {
    // self now holds the result: it takes the output's history (its copies share it when they
    // share its autograd state; a DTensor without one gets it here).
    DTensor& self = const_cast<DTensor&>(*inputs[0]);
    const std::shared_ptr<AutogradMeta>& fresh = outputs[0].autograd_meta();
    if (self.autograd_meta() == nullptr) {
      self.set_autograd_meta(fresh);
    } else if (fresh != nullptr) {
      AutogradMeta& meta = *self.autograd_meta();
      // Hooks registered before stay with the old node (they see the gradient of the value
      // before the write, as PyTorch's); retain_grad follows the tensor, so grad() is the
      // gradient of the value it now holds.
      GradHook retain = meta.retains_grad && meta.grad_fn != nullptr
                            ? meta.grad_fn->take_retain_grad_hook(meta.output_nr)
                            : nullptr;
      meta.requires_grad = true;
      meta.grad_fn = fresh->grad_fn;
      meta.output_nr = fresh->output_nr;
      if (retain) meta.grad_fn->set_retain_grad_hook(meta.output_nr, std::move(retain));
    }
    outputs[0] = self;
  }
  return outputs;
}

DTensor dispatch(const OpInfo& op, absl::Span<const DTensor* const> inputs,
                 absl::Span<const ArgValue> args) {
  DTensorList out = dispatch_multi(op, inputs, args);
  DT_CHECK(out.size() == 1, "[%s] the op has %d outputs; use dispatch_multi", op.name, out.size());
  return std::move(out[0]);
}

}  // namespace dtensor
