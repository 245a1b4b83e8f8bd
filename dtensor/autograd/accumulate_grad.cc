#include "dtensor/autograd/accumulate_grad.h"

#include <limits>

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

// The recorded form: when replayed, the input is the replay's only handle on the value if this
// is its last use (dtensor/compile/graph.h moves it), as the eager gradient is.
void private_copy(absl::Span<const Tensor> in, absl::Span<Tensor> out) {
  out[0] = needs_private_copy(in[0], 1) ? in[0].clone() : in[0];
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
      // optimizers update grads in place, shard by shard. A step being captured records the
      // decision itself (replay's tensor may be held differently than the captured one).
      const Tensor& local = g.to_local();
      if (dtensor::detail::capture_recorder() != nullptr) {
        Tensor copy[1];
        dtensor::detail::run_recorded("grad", "private_copy", {local}, copy, 0, private_copy);
        g = DTensor(std::move(copy[0]), g.spec_ptr());
      } else if (needs_private_copy(local, 1)) {
        g = DTensor(local.clone(), g.spec_ptr());
      }
      set_grad(std::move(g));
    } else {
      set_grad(add_gradients(meta_->grad, g));
    }
    return {};
  }

  // meta_->grad = g, recorded when a step is captured (replay binds the replay's gradient).
  void set_grad(DTensor g) {
    detail::run_recorded(
        "grad", "set_grad", {g.to_local()}, {}, 0,
        [meta = meta_, spec = g.spec_ptr()](absl::Span<const Tensor> in, absl::Span<Tensor>) {
          meta->grad = DTensor(in[0], spec);
        });
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
