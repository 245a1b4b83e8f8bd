// batch_norm, group_norm and instance_norm written once for local tensors and DTensors
// (norm_layers.cc, norm_layers_dtensor.cc): the same registered ops serve both, so the DTensor
// result is the local one of the full tensor. The few steps that differ (reducing a Partial
// statistic, updating a running buffer in place, detaching) are overloads below.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/norm/detail/group_norm.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/detail/capture_hook.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/shape_ops.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// ---- what differs between Tensor and DTensor ----------------------------------------------
inline Tensor no_grad_value(const Tensor& t) {
  return t;
}
inline DTensor no_grad_value(const DTensor& t) {
  return t.detach();
}

// A local statistic is complete; a DTensor one is made Replicate along its Partial mesh dims
// (one all-reduce), keeping its shards.
inline Tensor reduce_partials(const Tensor& t) {
  return t;
}
inline DTensor reduce_partials(const DTensor& t) {
  Placements p = t.placements();
  bool any = false;
  for (Placement& q : p) {
    if (q.is_partial()) q = Replicate(), any = true;
  }
  return any ? t.redistribute(p) : t;
}

// batch_norm's per-channel factors (x * scale + shift) as one [2, C] tensor for
// batch_norm_affine, whose gradient holds the sums of g * x and of g over every dim but the
// channels: Partial where x is batch-sharded. The DTensor one is made complete (Replicate where
// the factors are) at its from_local, so both take ONE all-reduce, as SyncBatchNorm's backward
// reduces sum(dy) and sum(dy * xmu) together; the gradients of the statistics, weight and bias
// computed from them are then complete on every rank (apart, each would take its own
// all-reduce: three per call).
inline Tensor join_factors(const Tensor& scale, const Tensor& shift) {
  return stack({scale, shift});
}
inline DTensor join_factors(const DTensor& scale, const DTensor& shift) {
  const DTensor both = stack({scale, shift});
  return DTensor::from_local(both.to_local_dtensor(), both.device_mesh(), both.placements(), false,
                             both.shape());
}

// running = (1 - momentum) * running + momentum * stat, written into `running`'s storage (a
// DTensor's local shard, after `stat` is laid out like it).
inline void update_running(const Tensor& running, const Tensor& stat, double momentum) {
  Tensor(running).copy_(
      cast(add(mul(running, 1.0 - momentum), mul(stat, momentum)), running.dtype()));
}
inline void update_running(const DTensor& running, const DTensor& stat, double momentum) {
  DTensor s = stat.detach();
  if (s.placements() != running.placements() || s.device_mesh() != running.device_mesh()) {
    s = s.redistribute(running.device_mesh(), running.placements());
  }
  // One primitive of a captured step (dtensor/compile/): replay updates the statistics too.
  const Tensor ins[] = {running.to_local(), s.to_local()};
  detail::run_recorded("op", "update_running_stats", ins, {}, 1,
                       [momentum](absl::Span<const Tensor> in, absl::Span<Tensor>) {
                         Tensor(in[0]).copy_(cast(
                             add(mul(in[0], 1.0 - momentum), mul(in[1], momentum)), in[0].dtype()));
                       });
}

// ---- the shared math ----------------------------------------------------------------------
// [1, C, 1, ...]: a per-channel [C] tensor broadcast against x.
inline Shape channel_shape(const Shape& x) {
  Shape s(x.size(), 1);
  s[1] = x[1];
  return s;
}

template <class T>
void check_channel_tensor(const T& t, int64_t c, const char* op, const char* what) {
  DT_CHECK(!t.defined() || (t.dim() == 1 && t.size(0) == c),
           "[%s] %s has shape %s, expected [%d] (the input's channels)", op, what,
           shape_str(t.shape()), c);
}

template <class T>
int64_t check_norm_input(const T& x, int64_t min_dims, const char* op) {
  DT_CHECK(x.defined() && x.dim() >= min_dims && is_floating(x.dtype()),
           "[%s] input must be a floating tensor of at least %d dims (N, C, ...), got %s", op,
           min_dims, x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  return x.size(1);
}

template <class T>
T batch_norm_impl(const T& x, const T& running_mean, const T& running_var, const T& weight,
                  const T& bias, bool training, double momentum, double eps) {
  constexpr const char* kOp = "batch_norm";
  const int64_t c = check_norm_input(x, 2, kOp);
  check_channel_tensor(running_mean, c, kOp, "running_mean");
  check_channel_tensor(running_var, c, kOp, "running_var");
  check_channel_tensor(weight, c, kOp, "weight");
  check_channel_tensor(bias, c, kOp, "bias");
  T mean, var;
  if (training) {
    const int64_t n = c == 0 ? 0 : x.numel() / c;
    DT_CHECK(n > 1,
             "[%s] expected more than 1 value per channel when training, got input of shape %s",
             kOp, shape_str(x.shape()));
    // The sums of x and x * x over every dim but the channels in ONE [2, C] statistic
    // (batch_norm_sums), so a batch-sharded DTensor reduces both with one all-reduce. In
    // float64: var = E[x^2] - E[x]^2 then keeps float32 (and 16-bit) data's precision unless
    // |mean| / std exceeds ~10^4.
    const T sums = reduce_partials(batch_norm_sums(x));
    const double inv_n = 1.0 / static_cast<double>(n);
    mean = mul(select(sums, 0, 0), inv_n);
    var = sub(mul(select(sums, 0, 1), inv_n), mul(mean, mean));
    // PyTorch updates running_var with the unbiased batch variance.
    if (running_mean.defined()) update_running(running_mean, no_grad_value(mean), momentum);
    if (running_var.defined()) {
      update_running(running_var,
                     mul(no_grad_value(var), static_cast<double>(n) / static_cast<double>(n - 1)),
                     momentum);
    }
  } else {
    DT_CHECK(running_mean.defined() && running_var.defined(),
             "[%s] running_mean and running_var must be defined when training is false", kOp);
    mean = no_grad_value(running_mean);
    var = no_grad_value(running_var);
  }
  // y = (x - mean) * rstd * weight + bias = x * scale + shift: one full-size op.
  T scale = rsqrt(add(var, eps));
  if (weight.defined()) scale = mul(scale, weight);
  const T shifted = mul(mean, scale);
  const T shift = bias.defined() ? sub(bias, shifted) : mul(shifted, -1.0);
  // The [C] factors in x's dtype, but float32 for 16-bit x (a 16-bit shift would carry an
  // error of |mean| * 2^-9 into outputs near 0): batch_norm_affine then computes x * scale +
  // shift in float32 and rounds once to x's dtype, as PyTorch's 16-bit batch norm.
  const DType fd = x.dtype() == kFloat64 ? kFloat64 : kFloat32;
  const auto as_f = [&](const T& t) { return t.dtype() == fd ? t : cast(t, fd); };
  return batch_norm_affine(x, join_factors(as_f(scale), as_f(shift)));
}

// group_norm as layer_norm of x viewed [N, num_groups, -1], then the per-channel weight and
// bias: the view decides channel sharding by whole groups. Arguments checked by the caller.
template <class T>
T group_norm_composed(const T& x, int64_t num_groups, const T& weight, const T& bias, double eps) {
  const Shape& s = x.shape();
  int64_t m = x.size(1) / num_groups;
  for (int64_t d = 2; d < x.dim(); ++d) m *= s[d];
  const int64_t rows[] = {s[0], num_groups, m};
  T y = reshape(layer_norm(reshape(x, rows), IntSpan(&m, 1), T(), T(), eps), s);
  const Shape cs = channel_shape(s);
  if (weight.defined()) y = mul(y, reshape(weight, cs));
  if (bias.defined()) y = add(y, reshape(bias, cs));
  return y;
}

// group_norm's gradients {grad_input, grad_weight, grad_bias} (the last two defined when `mask`
// asks for them) in library ops, per (sample, group) of m elements with gw = g * w:
// grad_x = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)), grad_w = sum(g * xhat) and
// grad_b = sum(g) over every dim but the channels. Local tensors (the CUDA path, the CPU
// kernel's test reference) and DTensors (the create_graph formula: every op differentiable).
template <class T>
std::array<T, 3> group_norm_backward_math(const T& grad_out, const T& x, int64_t num_groups,
                                          const T& weight, double eps, std::array<bool, 2> mask) {
  const Shape& s = x.shape();
  int64_t m = x.size(1) / num_groups;
  for (int64_t d = 2; d < x.dim(); ++d) m *= s[d];
  const int64_t rows[] = {s[0], num_groups, m};
  const int64_t last[] = {2};
  const T x3 = reshape(x, rows);
  const T rstd = rsqrt(add(var(x3, last, 0, true), eps));
  const T xhat = mul(sub(x3, mean(x3, last, true)), rstd);
  const T gw =
      reshape(weight.defined() ? mul(grad_out, reshape(weight, channel_shape(s))) : grad_out, rows);
  std::array<T, 3> out;
  out[0] = reshape(
      mul(rstd, sub(sub(gw, mean(gw, last, true)), mul(xhat, mean(mul(gw, xhat), last, true)))), s);
  std::vector<int64_t> not_channels = {0};
  for (int64_t d = 2; d < x.dim(); ++d) not_channels.push_back(d);
  if (mask[0]) out[1] = sum(mul(grad_out, reshape(xhat, s)), not_channels);
  if (mask[1]) out[2] = sum(grad_out, not_channels);
  return out;
}

template <class T>
T group_norm_impl(const T& x, int64_t num_groups, const T& weight, const T& bias, double eps,
                  const char* op = "group_norm") {
  const int64_t c = check_norm_input(x, 2, op);
  DT_CHECK(num_groups > 0 && c % num_groups == 0,
           "[%s] expected the number of channels %d to be divisible by num_groups %d", op, c,
           num_groups);
  check_channel_tensor(weight, c, op, "weight");
  check_channel_tensor(bias, c, op, "bias");
  // The fused op (detail/group_norm.h) where it serves: one pass for the statistics and one
  // for the output, as PyTorch's kernel; otherwise the composition above.
  if (group_norm_fused_serves(x)) return group_norm_fused(x, num_groups, weight, bias, eps);
  return group_norm_composed(x, num_groups, weight, bias, eps);
}

template <class T>
T instance_norm_impl(const T& x, const T& running_mean, const T& running_var, const T& weight,
                     const T& bias, bool use_input_stats, double momentum, double eps) {
  constexpr const char* kOp = "instance_norm";
  const int64_t c = check_norm_input(x, 3, kOp);
  if (!use_input_stats) {
    return batch_norm_impl(x, running_mean, running_var, weight, bias, false, momentum, eps);
  }
  check_channel_tensor(running_mean, c, kOp, "running_mean");
  check_channel_tensor(running_var, c, kOp, "running_var");
  T y = group_norm_impl(x, c, weight, bias, eps, kOp);
  if (running_mean.defined() || running_var.defined()) {
    // PyTorch's rule: each instance updates the running statistics as batch_norm would, and
    // the batch's updates are averaged: the per-instance mean and unbiased variance, averaged
    // over the batch.
    std::vector<int64_t> spatial;
    for (int64_t d = 2; d < x.dim(); ++d) spatial.push_back(d);
    const T xd = no_grad_value(x);
    const int64_t batch[] = {0};
    if (running_mean.defined()) {
      update_running(running_mean, mean(mean(xd, spatial), batch), momentum);
    }
    if (running_var.defined()) {
      update_running(running_var, mean(var(xd, spatial, 1), batch), momentum);
    }
  }
  return y;
}

}  // namespace dtensor::detail
