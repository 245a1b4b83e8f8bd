// The DTensor members that autograd records (declared in distributed_tensor.h): redistribute,
// from_local of a local DTensor, to_local_dtensor, full_tensor_dtensor, and backward and the
// gradient hooks. Their values are computed here; recording goes through the AutogradHooks the
// autograd layer installs when it is loaded (detail/autograd_hooks.h), so the core needs no
// autograd: without it the values are the same, unrecorded, and backward / register_hook /
// retain_grad raise an error.
#include <atomic>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/comm_worker.h"
#include "dtensor/core/detail/autograd_hooks.h"
#include "dtensor/core/detail/redistribute_no_grad.h"
#include "dtensor/core/distributed_tensor.h"
#include "dtensor/core/factories.h"
#include "dtensor/core/redistribute.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {

namespace detail {
namespace {
// Constant-initialised, so a registrar running in another library's static initialisation
// finds it ready.
constinit std::atomic<const AutogradHooks*> g_hooks{nullptr};
}  // namespace

const AutogradHooks* autograd_hooks() {
  return g_hooks.load(std::memory_order_acquire);
}

void set_autograd_hooks(const AutogradHooks* hooks) {
  g_hooks.store(hooks, std::memory_order_release);
}

}  // namespace detail

namespace {

// The hooks for `member`, which needs the autograd layer.
const detail::AutogradHooks& required_hooks(const char* member) {
  const detail::AutogradHooks* hooks = detail::autograd_hooks();
  if (hooks == nullptr) [[unlikely]] {
    DT_FAIL(
        "[%s] DTensor::%s needs the autograd layer (dtensor::autograd), which is not linked: "
        "link dtensor::autograd (or a layer above it, e.g. dtensor::ops)",
        member, member);
  }
  return *hooks;
}

// The hooks that record `member`'s result as a function of `x`; nullptr when the autograd layer
// is not loaded, which is refused when `x` requires grad: its gradient would be lost silently
// (e.g. a program linked with --as-needed that references nothing of dtensor::autograd).
const detail::AutogradHooks* recording_hooks(const DTensor& x, const char* member) {
  const detail::AutogradHooks* hooks = detail::autograd_hooks();
  if (hooks == nullptr && x.requires_grad()) [[unlikely]] {
    DT_FAIL(
        "[%s] the DTensor requires grad, but the autograd layer (dtensor::autograd), which "
        "records DTensor::%s, is not linked: its gradient would be lost; link dtensor::autograd "
        "(or a layer above it, e.g. dtensor::ops)",
        member, member);
  }
  return hooks;
}

// Whether the plan from src to dst issues any collective on this rank.
bool issues_collectives(const DTensorSpec& src, const DTensorSpec& dst) {
  if (!src.mesh().contains_me() || src == dst) return false;
  for (const RedistributeStep& s : plan_redistribute(src, dst)->steps) {
    switch (s.kind) {
      case StepKind::kAllGather:
      case StepKind::kAllReduce:
      case StepKind::kReduceScatter:
      case StepKind::kAllToAll:
        return true;
      default:
        break;
    }
  }
  return false;
}

// The async form: the shard is computed on the communication thread into a result whose memory
// then becomes the placeholder's (no copy when the result owns its whole storage).
DTensor redistribute_async(const DTensor& x, std::shared_ptr<const DTensorSpec> dst) {
  const Tensor src_local = x.to_local();
  Tensor out = empty(dst->local_shard().shape, TensorOptions(x.dtype(), src_local.device()));
  WorkPtr work = submit_async([src_local, src = x.spec_ptr(), dst, out]() mutable {
    const Tensor r = redistribute_local(src_local, *src, *dst);
    const bool whole = r.is_contiguous() && r.storage_offset() == 0 &&
                       r.nbytes() == r.storage().nbytes() &&
                       r.storage().data() != src_local.storage().data();
    if (!(whole && out.storage().try_swap_data(r.storage()))) out.copy_(r);
  });
  return DTensor(std::move(out), std::move(dst), std::move(work));
}

// The target spec of x.redistribute(placements) on x's mesh, after the argument checks.
std::shared_ptr<const DTensorSpec> redistribute_target(const DTensor& x, PlacementSpan placements) {
  DT_CHECK(x.defined(), "[redistribute] the DTensor is undefined (expected a DTensor)");
  check_user_placements(placements, x.dtype(), "redistribute");
  return std::make_shared<const DTensorSpec>(
      x.spec().with_placements(Placements(placements.begin(), placements.end()), "redistribute"));
}

// DTensor::redistribute on the DTensor's own mesh, recorded when autograd is loaded;
// `reuse_local` as in redistribute_local (never with async_op: the caller's memory would be
// written on another thread while the caller may still read it).
DTensor redistribute_recorded(const DTensor& x, std::shared_ptr<const DTensorSpec> dst,
                              bool async_op, bool reuse_local) {
  DT_CHECK(!(async_op && reuse_local),
           "[redistribute] internal error: async_op with a reused local shard");
  const detail::AutogradHooks* hooks = recording_hooks(x, "redistribute");
  const CommDebugMode::OpScope label("redistribute");  // CommDebugMode attribution
  DTensor out = async_op && issues_collectives(x.spec(), *dst)
                    ? redistribute_async(x, std::move(dst))
                    : detail::redistribute_no_grad(x, *dst, reuse_local);
  if (hooks == nullptr) return out;
  return hooks->record_redistribute(x, std::move(out), /*cross_mesh=*/false);
}

}  // namespace

DTensor DTensor::redistribute(const DeviceMesh& mesh, PlacementSpan placements) const {
  return redistribute(mesh, placements, /*async_op=*/false);
}

DTensor DTensor::redistribute(PlacementSpan placements) const& {
  return redistribute(placements, /*async_op=*/false);
}

DTensor DTensor::redistribute(const DeviceMesh& mesh, PlacementSpan placements,
                              bool async_op) const {
  DT_CHECK(defined(), "[redistribute] the DTensor is undefined (expected a DTensor)");
  DT_CHECK(mesh.defined(), "[redistribute] the target mesh is an empty handle (expected a mesh)");
  if (mesh == spec_->mesh()) return redistribute(placements, async_op);
  // Another mesh: point-to-point transfers (redistribute_cross_mesh_local), synchronous. The
  // gradient goes back the same way, to this DTensor's mesh and placements (a Partial source
  // receives Replicate there, as on one mesh).
  check_user_placements(placements, dtype(), "redistribute");
  const detail::AutogradHooks* hooks = recording_hooks(*this, "redistribute");
  const CommDebugMode::OpScope label("redistribute");
  const DTensorSpec dst(mesh, placements, spec_->meta(), "redistribute");
  DTensor out = detail::redistribute_no_grad(*this, dst);
  if (hooks == nullptr) return out;
  return hooks->record_redistribute(*this, std::move(out), /*cross_mesh=*/true);
}

DTensor DTensor::redistribute(PlacementSpan placements, bool async_op) const {
  return redistribute_recorded(*this, redistribute_target(*this, placements), async_op,
                               /*reuse_local=*/false);
}

DTensor DTensor::redistribute(PlacementSpan placements) && {
  // Checked first, so that a rejected call leaves the caller's DTensor as it was. Then taken
  // out of *this, so that the moved-from handle cannot read memory the plan reuses; whether
  // anything else holds that memory is decided by redistribute_local (Storage::sole_owner).
  std::shared_ptr<const DTensorSpec> dst = redistribute_target(*this, placements);
  const DTensor self = std::move(*this);
  return redistribute_recorded(self, std::move(dst), /*async_op=*/false, /*reuse_local=*/true);
}

DTensor DTensor::from_local(const DTensor& local, const DeviceMesh& mesh, PlacementSpan placements,
                            bool run_check, IntSpan shape, IntSpan stride,
                            PlacementSpan grad_placements) {
  DT_CHECK(local.defined(), "[from_local] the local DTensor is undefined (expected a DTensor)");
  DT_CHECK(is_local(local),
           "[from_local] argument local lives on mesh %s; expected a local DTensor (on this "
           "process's self mesh, see local_dtensor())",
           local.device_mesh().str());
  const detail::AutogradHooks* hooks = recording_hooks(local, "from_local");
  DTensor out = from_local(local.to_local(), mesh, placements, run_check, shape, stride);
  // The gradient's layout before this rank's piece is taken (PyTorch 2.15's rule): the given
  // grad_placements, else the forward placements with Partial made Replicate. A local value
  // built into a Partial(sum) DTensor y contributes to y as a whole (y = sum of the pieces), so
  // its gradient is the whole gradient of y; only an explicit Partial grad_placements hands
  // each rank a piece (summing to the gradient).
  Placements gp = grad_placements.empty()
                      ? without_partial(out.spec())
                      : Placements(grad_placements.begin(), grad_placements.end());
  if (!grad_placements.empty()) check_user_placements(grad_placements, out.dtype(), "from_local");
  auto grad_spec =
      std::make_shared<const DTensorSpec>(out.spec().with_placements(gp, "from_local"));
  if (hooks == nullptr) return out;
  return hooks->record_from_local(local, std::move(out), std::move(grad_spec));
}

DTensor DTensor::to_local_dtensor() const {
  DT_CHECK(defined(), "[to_local] the DTensor is undefined (expected a DTensor)");
  // PyTorch 2.15's default (_normalize_placements_for_grad): a Partial mesh dim's local
  // gradients are read as Replicate. The rank's piece of a Partial value enters whatever is
  // computed from it as a whole (from_local(local, {Partial()}) is the sum of the pieces), so
  // each rank's local gradient is the whole gradient; read as Partial(sum) it would be counted
  // once per rank.
  return to_local_dtensor(without_partial(spec()));
}

DTensor DTensor::to_local_dtensor(PlacementSpan grad_placements) const {
  DT_CHECK(defined(), "[to_local] the DTensor is undefined (expected a DTensor)");
  DTensor out = local_dtensor(to_local());
  DT_CHECK(grad_placements.size() == placements().size(),
           "[to_local] got %d grad_placements %s for a %d-d mesh (expected one per mesh dim)",
           grad_placements.size(), placements_str(grad_placements), placements().size());
  const detail::AutogradHooks* hooks = recording_hooks(*this, "to_local_dtensor");
  if (hooks == nullptr) return out;
  return hooks->record_to_local(*this, std::move(out),
                                Placements(grad_placements.begin(), grad_placements.end()));
}

DTensor DTensor::full_tensor_dtensor() const {
  DT_CHECK(defined(), "[full_tensor] the DTensor is undefined (expected a DTensor)");
  // The full value is the same on every rank: so is its gradient (PyTorch's full_tensor()).
  return full_tensor_dtensor(Placements(placements().size(), Replicate()));
}

DTensor DTensor::full_tensor_dtensor(PlacementSpan grad_placements) const {
  DT_CHECK(defined(), "[full_tensor] the DTensor is undefined (expected a DTensor)");
  return redistribute(Placements(placements().size(), Replicate()))
      .to_local_dtensor(grad_placements);
}

void DTensor::backward(const DTensor& gradient, std::optional<bool> retain_graph,
                       bool create_graph) const {
  required_hooks("backward")
      .backward(*this, gradient, retain_graph.value_or(create_graph), create_graph);
}

void DTensor::register_hook(GradHook hook) const {
  required_hooks("register_hook").register_hook(*this, std::move(hook));
}

void DTensor::register_post_accumulate_grad_hook(
    std::function<void(const DTensor& param)> hook) const {
  DT_CHECK(requires_grad() && is_leaf(),
           "[register_post_accumulate_grad_hook] expected a leaf that requires grad, got %s (%s)",
           str(),
           requires_grad() ? "a non-leaf: post accumulate grad hooks run on leaves only"
                           : "it does not require grad");
  // Bound to this leaf's data and spec; the state is held weakly (it owns the hook).
  std::weak_ptr<AutogradMeta> weak = autograd_;
  autograd_->post_accumulate_grad_hooks.push_back(
      [hook = std::move(hook), local = local_, spec = spec_, weak] {
        std::shared_ptr<AutogradMeta> meta = weak.lock();
        if (meta == nullptr) return;
        DTensor param(local, spec);
        param.set_autograd_meta(std::move(meta));
        hook(param);
      });
}

void DTensor::retain_grad() const {
  required_hooks("retain_grad").retain_grad(*this);
}

}  // namespace dtensor
