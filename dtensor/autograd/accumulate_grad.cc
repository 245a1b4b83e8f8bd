#include "dtensor/autograd/accumulate_grad.h"

#include <functional>
#include <limits>
#include <vector>

#include "dtensor/autograd/create_graph.h"
#include "dtensor/autograd/engine.h"
#include "dtensor/core/detail/redistribute_no_grad.h"
#include "dtensor/tensor/detail/capture_hook.h"
#include "dtensor/tensor/error.h"

namespace dtensor::autograd {
namespace {

// Whether a gradient's local tensor must be copied before it becomes a leaf's .grad: another
// handle than the `own` ones shares its memory, or it is strided.
bool needs_private_copy(const Tensor& local, long own) {
  return local.storage().use_count() > own || !local.is_contiguous();
}

// .grad = g when the leaf has none (a private contiguous copy when another handle than the `own`
// ones shares g's memory, or it is strided: optimizers update grads in place, shard by shard),
// else .grad + g.
void accumulate_into(AutogradMeta& meta, DTensor g, long own) {
  if (!meta.grad.defined()) {
    const Tensor& local = g.to_local();
    if (needs_private_copy(local, own)) g = DTensor(local.clone(), g.spec_ptr());
    meta.grad = std::move(g);
  } else {
    meta.grad = add_gradients(meta.grad, g);
  }
}

class AccumulateGrad : public Node {
 public:
  AccumulateGrad(std::shared_ptr<AutogradMeta> meta, std::shared_ptr<const DTensorSpec> spec)
      : Node(1), meta_(std::move(meta)), spec_(std::move(spec)) {
    // Ready accumulators run before anything else, so the leaf's gradient (and its hooks,
    // e.g. a data-parallel bucket launch) is final as early as possible. Ranks break ties the
    // same way (creation order).
    set_sequence_nr(std::numeric_limits<uint64_t>::max() / 2 + sequence_nr());
  }

  std::string name() const override { return "AccumulateGrad"; }

  DTensorList apply(DTensorList grads) override {
    DTensor g = std::move(grads[0]);
    if (!g.defined()) return {};
    g = run_hooks(std::move(g));
    if (in_create_graph()) {
      // The gradient keeps its history: grad() becomes a non-leaf of the pass's graph (a
      // recorded layout change; the first gradient stored as it is unless it shares memory or is
      // strided, then a recorded clone as accumulate_into copies; a later one added).
      if (g.placements() != spec_->placements()) g = g.redistribute(spec_->placements());
      if (meta_->grad.defined()) {
        meta_->grad = add_gradients(meta_->grad, g);
      } else {
        meta_->grad = needs_private_copy(g.to_local(), 1) ? g.clone() : std::move(g);
      }
    } else {
      if (g.placements() != spec_->placements()) {
        g = detail::redistribute_no_grad(g,
                                         g.spec().with_placements(spec_->placements(), "backward"));
      }
      accumulate(std::move(g));
    }
    // Copied: a hook may register another.
    const std::vector<std::function<void()>> post = meta_->post_accumulate_grad_hooks;
    for (const auto& hook : post) hook();
    return {};
  }

  // The leaf's register_hook hooks, in order (an undefined return keeps the gradient).
  DTensor run_hooks(DTensor g) const {
    for (const GradHook& hook : meta_->hooks) {
      DTensor replaced = hook(g);
      if (replaced.defined()) g = std::move(replaced);
    }
    return g;
  }

 private:
  void accumulate(DTensor g) {
    if (dtensor::detail::capture_recorder() == nullptr) {
      accumulate_into(*meta_, std::move(g), 1);
      return;
    }
    // A step being captured records the accumulation as one primitive that decides when it runs
    // whether to bind or to add: a replay may follow calls that left a gradient or none
    // (accumulation over several calls). Its output is the leaf's .grad afterwards. At replay
    // the input is the only handle on a value read last here (dtensor/compile/graph.h moves
    // it) beside the DTensor made of it, as the eager gradient is.
    Tensor result[1];
    dtensor::detail::run_recorded(
        "grad", "accumulate", {g.to_local()}, result, 0,
        [meta = meta_, spec = g.spec_ptr()](absl::Span<const Tensor> in, absl::Span<Tensor> out) {
          accumulate_into(*meta, DTensor(in[0], spec), 2);
          out[0] = meta->grad.to_local();
        });
  }

  std::shared_ptr<AutogradMeta> meta_;
  std::shared_ptr<const DTensorSpec> spec_;
};

}  // namespace

DTensor run_leaf_hooks(const Node& node, DTensor grad) {
  const auto* acc = dynamic_cast<const AccumulateGrad*>(&node);
  return acc == nullptr ? grad : acc->run_hooks(std::move(grad));
}

std::shared_ptr<Node> grad_accumulator(const DTensor& t) {
  const std::shared_ptr<AutogradMeta>& meta = t.autograd_meta();
  DT_CHECK(meta != nullptr && meta->requires_grad && meta->grad_fn == nullptr,
           "[autograd] internal error: grad_accumulator of a DTensor that is not a leaf "
           "requiring grad");
  std::shared_ptr<Node> acc = meta->grad_accumulator.lock();
  if (acc == nullptr) {
    acc = std::make_shared<AccumulateGrad>(meta, t.spec_ptr());
    meta->grad_accumulator = acc;
  }
  return acc;
}

}  // namespace dtensor::autograd
