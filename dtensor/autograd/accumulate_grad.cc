#include "dtensor/autograd/accumulate_grad.h"

#include <limits>

#include "dtensor/autograd/engine.h"
#include "dtensor/core/detail/redistribute_no_grad.h"
#include "dtensor/tensor/error.h"

namespace dtensor::autograd {
namespace {

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
    for (const GradHook& hook : meta_->hooks) {
      DTensor replaced = hook(g);
      if (replaced.defined()) g = std::move(replaced);
    }
    if (g.placements() != spec_->placements()) {
      g = detail::redistribute_no_grad(g,
                                       g.spec().with_placements(spec_->placements(), "backward"));
    }
    if (!meta_->grad.defined()) {
      // The gradient may share memory with a tensor still in use elsewhere (a grad_output
      // passed through unchanged) or be a strided view: keep a private contiguous copy, since
      // optimizers update grads in place, shard by shard.
      const Tensor& local = g.to_local();
      if (local.storage().use_count() > 1 || !local.is_contiguous()) {
        g = DTensor(local.clone(), g.spec_ptr());
      }
      meta_->grad = std::move(g);
    } else {
      meta_->grad = add_gradients(meta_->grad, g);
    }
    return {};
  }

 private:
  std::shared_ptr<AutogradMeta> meta_;
  std::shared_ptr<const DTensorSpec> spec_;
};

}  // namespace

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
