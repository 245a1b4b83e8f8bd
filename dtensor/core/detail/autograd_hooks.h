// The core's door to the autograd layer (libtorch's VariableHooksInterface): the DTensor members
// that autograd records are defined in the core (distributed_tensor.cc) and compute their value
// there; recording the node, and backward / register_hook / retain_grad, go through the
// AutogradHooks the autograd library installs when it is loaded (a static registrar in
// dtensor/autograd/dtensor_autograd.cc). So the core builds, links and tests without autograd:
// then redistribute / from_local / to_local_dtensor / full_tensor_dtensor return the same values
// unrecorded for a DTensor that does not require grad and refuse one that does (its gradient
// would be lost), and backward / register_hook / retain_grad raise "[backward] ... the autograd
// layer (dtensor::autograd) is not linked". The ops layer and everything above link autograd, so
// wherever an op runs the hooks are installed; the umbrella header anchors both libraries in a
// program that includes it (linkers that drop unreferenced libraries, --as-needed, would
// otherwise leave them unloaded). Cost: one pointer load and one indirect call.
// Internal (not installed).
#pragma once

#include <memory>

#include "dtensor/core/distributed_tensor.h"

namespace dtensor::detail {

class AutogradHooks {
 public:
  virtual ~AutogradHooks() = default;
  // Records `out`, the value of x.redistribute(...), as a function of `x`: its gradient goes
  // back to x's spec (on x's mesh when `cross_mesh`). Returns `out` with its node.
  virtual DTensor record_redistribute(const DTensor& x, DTensor out, bool cross_mesh) const = 0;
  // Records `out`, the value of DTensor::from_local(local, ...), as a function of the local
  // DTensor `local`: its gradient is the incoming one laid out as `grad_spec`, then this rank's
  // piece on local's spec.
  virtual DTensor record_from_local(const DTensor& local, DTensor out,
                                    std::shared_ptr<const DTensorSpec> grad_spec) const = 0;
  // Records `out` (x's shard as a local DTensor, DTensor::to_local_dtensor) as a function of
  // `x`: each rank's local gradient is its piece of a gradient laid out as `grad_placements`.
  virtual DTensor record_to_local(const DTensor& x, DTensor out,
                                  Placements grad_placements) const = 0;
  // DTensor::backward, DTensor::register_hook, DTensor::retain_grad.
  virtual void backward(const DTensor& root, const DTensor& gradient, bool retain_graph,
                        bool create_graph) const = 0;
  virtual void register_hook(const DTensor& x, GradHook hook) const = 0;
  virtual void retain_grad(const DTensor& x) const = 0;
};

// The installed hooks; nullptr while the autograd layer is not loaded.
const AutogradHooks* autograd_hooks();
// Installs `hooks` (the autograd library, at load time); it must outlive every later call.
void set_autograd_hooks(const AutogradHooks* hooks);

}  // namespace dtensor::detail
