#include "dtensor/autograd/node.h"

#include "dtensor/autograd/accumulate_grad.h"
#include "dtensor/autograd/create_graph.h"
#include "dtensor/autograd/grad_mode.h"
#include "dtensor/collectives/comm_debug.h"
#include "dtensor/core/detail/redistribute_no_grad.h"
#include "dtensor/tensor/error.h"

namespace dtensor::autograd {
namespace {
// Per thread, like PyTorch's: a graph is built by one thread, and the same program builds the
// same numbers on every rank.
thread_local uint64_t t_next_sequence_nr = 0;
}  // namespace

Node::Node(int64_t num_outputs) : num_outputs_(num_outputs), sequence_nr_(t_next_sequence_nr++) {
  if (CommDebugMode::active()) comm_module_ = CommDebugMode::current_module();
}

void Node::add_input(Edge edge, std::shared_ptr<const DTensorSpec> spec) {
  next_edges_.push_back(std::move(edge));
  input_specs_.push_back(std::move(spec));
}

void Node::add_pre_hook(uint32_t output_nr, GradHook hook) {
  pre_hooks_[output_nr].push_back(std::move(hook));
}

void Node::set_retain_grad_hook(uint32_t output_nr, GradHook hook) {
  retain_grad_hooks_[output_nr] = std::move(hook);
}

GradHook Node::take_retain_grad_hook(uint32_t output_nr) {
  auto it = retain_grad_hooks_.find(output_nr);
  if (it == retain_grad_hooks_.end()) return nullptr;
  GradHook hook = std::move(it->second);
  retain_grad_hooks_.erase(it);
  return hook;
}

DTensor Node::run_pre_hooks(uint32_t output_nr, DTensor grad) const {
  if (auto it = pre_hooks_.find(output_nr); it != pre_hooks_.end()) {
    for (const GradHook& hook : it->second) {
      DTensor replaced = hook(grad);
      if (replaced.defined()) grad = std::move(replaced);
    }
  }
  // Last: it keeps the gradient the hooks made and passes it on unchanged.
  if (auto it = retain_grad_hooks_.find(output_nr); it != retain_grad_hooks_.end()) {
    it->second(grad);
  }
  return grad;
}

Edge gradient_edge(const DTensor& t) {
  const std::shared_ptr<AutogradMeta>& meta = t.autograd_meta();
  if (meta == nullptr) return {};
  if (meta->grad_fn != nullptr) return {meta->grad_fn, meta->output_nr};
  if (!meta->requires_grad) return {};
  return {grad_accumulator(t), 0};
}

bool set_history(DTensor& out, const std::shared_ptr<Node>& node, uint32_t output_nr) {
  if (!is_floating(out.dtype())) return false;
  auto meta = std::make_shared<AutogradMeta>();
  meta->requires_grad = true;
  meta->grad_fn = node;
  meta->output_nr = output_nr;
  out.set_autograd_meta(std::move(meta));
  return true;
}

bool any_requires_grad(absl::Span<const DTensor* const> inputs) {
  for (const DTensor* t : inputs) {
    if (t != nullptr && t->requires_grad()) return true;
  }
  return false;
}

DTensor redistribute_backward(const DTensor& grad, const DTensorSpec& src) {
  const Placements& have = grad.placements();
  Placements want = src.placements();
  for (size_t m = 0; m < want.size(); ++m) {
    if (want[m].is_partial()) {
      // A Partial source receives a Replicate gradient (a Partial gradient of the same op may
      // stay: it is what the source would hold).
      if (!(have[m] == want[m])) want[m] = Replicate();
    } else if (want[m].is_replicate() && have[m].is_partial()) {
      want[m] = have[m];
    }
  }
  if (want == have) return grad;
  // create_graph: recorded (its own backward is this rule again).
  if (in_create_graph() && grad_enabled()) return grad.redistribute(want);
  return detail::redistribute_no_grad(grad,
                                      grad.spec().with_placements(std::move(want), "backward"));
}

}  // namespace dtensor::autograd
