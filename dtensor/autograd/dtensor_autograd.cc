// The autograd side of the DTensor members that record nodes (defined in the core,
// dtensor/core/autograd_members.cc, which computes their values): the nodes of redistribute /
// from_local / to_local_dtensor, and backward and the gradient hooks, installed in the core as
// its AutogradHooks when this library is loaded (libtorch's VariableHooks registration).
#include "dtensor/autograd/create_graph.h"
#include "dtensor/autograd/engine.h"
#include "dtensor/autograd/function.h"
#include "dtensor/autograd/node.h"
#include "dtensor/core/detail/autograd_hooks.h"
#include "dtensor/core/detail/redistribute_no_grad.h"
#include "dtensor/core/distributed_tensor.h"
#include "dtensor/core/factories.h"
#include "dtensor/tensor/error.h"

namespace dtensor::autograd {
namespace {

class DTensorAutogradHooks final : public ::dtensor::detail::AutogradHooks {
 public:
  DTensor record_redistribute(const DTensor& x, DTensor out, bool cross_mesh) const override {
    const DTensor* in[] = {&x};
    if (cross_mesh) {
      // The gradient goes back point to point, to x's mesh and placements (a Partial source
      // receives Replicate there, as on one mesh).
      return record_linear_function(
          "RedistributeBackward", in, std::move(out),
          [src = x.spec_ptr()](absl::Span<const DTensor> g) -> DTensorList {
            if (!g[0].defined()) return {DTensor()};
            return {::dtensor::detail::redistribute_no_grad(
                g[0], src->with_placements(without_partial(*src), "backward"))};
          });
    }
    return record_linear_function("RedistributeBackward", in, std::move(out),
                                  [src = x.spec_ptr()](absl::Span<const DTensor> g) -> DTensorList {
                                    return {redistribute_backward(g[0], *src)};
                                  });
  }

  DTensor record_from_local(const DTensor& local, DTensor out,
                            std::shared_ptr<const DTensorSpec> grad_spec) const override {
    const DTensor* in[] = {&local};
    return record_linear_function("FromLocalBackward", in, out.detach(),
                                  [grad_spec = std::move(grad_spec), local_spec = local.spec_ptr()](
                                      absl::Span<const DTensor> g) -> DTensorList {
                                    // A rank outside the mesh contributed nothing.
                                    if (!grad_spec->mesh().contains_me()) return {DTensor()};
                                    if (in_create_graph()) {
                                      // Recorded: the layout change, then to_local's node.
                                      return {g[0].redistribute(grad_spec->placements())
                                                  .to_local_dtensor(grad_spec->placements())};
                                    }
                                    const DTensor laid_out =
                                        ::dtensor::detail::redistribute_no_grad(g[0], *grad_spec);
                                    return {DTensor(laid_out.to_local(), local_spec)};
                                  });
  }

  DTensor record_to_local(const DTensor& x, DTensor out,
                          Placements grad_placements) const override {
    const DTensor* in[] = {&x};
    return record_linear_function(
        "ToLocalBackward", in, std::move(out),
        [spec = x.spec_ptr(),
         gp = std::move(grad_placements)](absl::Span<const DTensor> g) -> DTensorList {
          // This rank's local gradient is its piece of a gradient laid out as grad_placements.
          auto grad_spec =
              std::make_shared<const DTensorSpec>(spec->with_placements(gp, "to_local"));
          const Shape expected = grad_spec->local_shard().shape;
          DT_CHECK(g[0].to_local().shape() == expected,
                   "[to_local backward] the local gradient has shape %s but grad_placements %s "
                   "on global shape %s imply %s on this rank",
                   shape_str(g[0].to_local().shape()), placements_str(gp), shape_str(spec->shape()),
                   shape_str(expected));
          if (in_create_graph()) {
            // Recorded: from_local's node (its gradient is laid out as grad_placements).
            return {DTensor::from_local(g[0], spec->mesh(), gp, false, spec->shape(), {}, gp)};
          }
          return {DTensor(g[0].to_local(), std::move(grad_spec))};
        });
  }

  void backward(const DTensor& root, const DTensor& gradient, bool retain_graph,
                bool create_graph) const override {
    const DTensor roots[] = {root};
    if (gradient.defined()) {
      const DTensor grads[] = {gradient};
      autograd::backward(roots, grads, retain_graph, create_graph);
    } else {
      autograd::backward(roots, {}, retain_graph, create_graph);
    }
  }

  void register_hook(const DTensor& x, GradHook hook) const override {
    DT_CHECK(x.requires_grad(),
             "[register_hook] cannot register a hook on a DTensor that does not require grad");
    const std::shared_ptr<AutogradMeta>& meta = x.autograd_meta();
    if (x.is_leaf()) {
      meta->hooks.push_back(std::move(hook));
    } else {
      meta->grad_fn->add_pre_hook(meta->output_nr, std::move(hook));
    }
  }

  void retain_grad(const DTensor& x) const override {
    DT_CHECK(x.requires_grad(),
             "[retain_grad] cannot retain the gradient of a DTensor that does not require grad");
    const std::shared_ptr<AutogradMeta>& meta = x.autograd_meta();
    if (x.is_leaf() || meta->retains_grad) return;
    meta->retains_grad = true;
    std::weak_ptr<AutogradMeta> weak = meta;
    meta->grad_fn->set_retain_grad_hook(meta->output_nr, [weak](const DTensor& g) -> DTensor {
      if (std::shared_ptr<AutogradMeta> m = weak.lock()) {
        // Under create_graph the retained gradient keeps its history (a recorded clone).
        if (m->grad.defined()) {
          m->grad = add_gradients(m->grad, g);
        } else {
          m->grad = in_create_graph() ? g.clone() : g.detach();
        }
      }
      return DTensor();
    });
  }
};

// Installs the hooks when this library is loaded (never destroyed: DTensors may be used by
// other libraries' static destructors).
const bool kInstalled = [] {
  static const DTensorAutogradHooks* const hooks = new DTensorAutogradHooks();
  ::dtensor::detail::set_autograd_hooks(hooks);
  return true;
}();

}  // namespace
}  // namespace dtensor::autograd
