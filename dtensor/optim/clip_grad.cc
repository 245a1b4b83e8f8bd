#include <cmath>
#include <limits>
#include <vector>

#include "dtensor/autograd/grad_mode.h"
#include "dtensor/nn/detail/grad_norm.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/optim/optimizer.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/detail/capture_hook.h"
#include "dtensor/tensor/error.h"

namespace dtensor::optim {

// Per mesh, the gradients' contributions are added up as a Partial DTensor scalar, then made
// Replicate (nn/detail/grad_norm.h: at most one all-reduce per mesh dim, whatever the number of
// parameters). The meshes' totals are combined on the host.
double clip_grad_norm_(const std::vector<DTensor>& params, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  DT_CHECK(norm_type > 0, "[clip_grad_norm_] norm_type must be positive or inf, got %g", norm_type);
  autograd::NoGradGuard no_grad;
  const bool inf = std::isinf(norm_type);
  const nn::detail::GradNormParts parts = nn::detail::grad_norm_parts(params, norm_type);
  std::vector<Tensor> totals;  // per mesh this rank is on: the reduced contribution
  for (const auto& [mesh, acc] : parts.per_mesh) {
    if (!acc.device_mesh().contains_me()) continue;  // this rank holds none of it
    totals.push_back(acc.full_tensor());
  }
  // The host-side tail runs through detail::run_recorded, so that a captured step replays it on
  // that step's gradients: first the norm and the clip coefficient, then each gradient's scaling
  // (skipped when the coefficient is at least 1, as eagerly; a NaN coefficient scales).
  Tensor norm_and_coef[1];
  detail::run_recorded(
      "optim", "clip_grad_norm_.coef", totals, norm_and_coef, 0,
      [inf, norm_type, max_norm, error_if_nonfinite](absl::Span<const Tensor> in,
                                                     absl::Span<Tensor> out) {
        double total = 0;
        for (const Tensor& t : in) {
          total = nn::detail::combine_norm_parts(total, t.to(Device(kCPU)).data<double>()[0], inf);
        }
        const double norm = nn::detail::finish_norm(total, norm_type, error_if_nonfinite);
        out[0] = full({2}, 0.0, TensorOptions(kFloat64));
        out[0].data<double>()[0] = norm;
        out[0].data<double>()[1] = max_norm / (norm + 1e-6);
      });
  for (const DTensor& g : parts.grads) {
    const Tensor ins[] = {g.to_local(), norm_and_coef[0]};
    detail::run_recorded("optim", "clip_grad_norm_.scale", ins, {}, 1,
                         [](absl::Span<const Tensor> in, absl::Span<Tensor>) {
                           const double coef = in[1].data<double>()[1];
                           if (nn::detail::clip_scales(coef)) mul_(in[0], Scalar(coef));
                         });
  }
  return norm_and_coef[0].data<double>()[0];
}

// Each gradient's local shard clamped in place: elementwise, so a sharded gradient is clipped
// shard by shard with no communication. Through detail::run_recorded, as clip_grad_norm_'s
// scaling, so that a captured step replays it on that step's gradients.
void clip_grad_value_(const std::vector<DTensor>& params, double clip_value) {
  DT_CHECK(!std::isnan(clip_value), "[clip_grad_value_] clip_value is NaN");
  // Every gradient is checked before any is clamped: a refused call changes nothing.
  std::vector<DTensor> grads;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].defined() || !params[i].grad().defined()) continue;
    const DTensor& g = params[i].grad();
    DT_CHECK(!g.spec().has_partial(),
             "[clip_grad_value_] the gradient of parameter %d has Partial placements %s: clamping "
             "a partial value is not the partial of the clamped value (reduce it first)",
             i, placements_str(g.placements()));
    grads.push_back(g);
  }
  autograd::NoGradGuard no_grad;
  for (const DTensor& g : grads) {
    const Tensor ins[] = {g.to_local()};
    detail::run_recorded(
        "optim", "clip_grad_value_", ins, {}, 1,
        [clip_value](absl::Span<const Tensor> in, absl::Span<Tensor>) {
          Tensor(in[0]).copy_(clamp(in[0], Scalar(-clip_value), Scalar(clip_value)));
        });
  }
}

}  // namespace dtensor::optim
