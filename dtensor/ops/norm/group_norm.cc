// group_norm's fused op on local tensors: the CPU kernels (group_norm_cpu.cc) and, on other
// devices, the composition (forward) and PyTorch's backward formula in library ops.
#include "dtensor/ops/norm/detail/group_norm.h"

#include <vector>

#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/norm/detail/group_norm_kernels.h"
#include "dtensor/ops/norm/detail/norm_layers_impl.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/view/view.h"

namespace dtensor::detail {

bool group_norm_fused_serves(const Tensor& x) {
  return !x.device().is_cuda();
}

Tensor group_norm_fused(const Tensor& x, int64_t num_groups, const Tensor& weight,
                        const Tensor& bias, double eps) {
  if (x.device().is_cuda()) return group_norm_composed(x, num_groups, weight, bias, eps);
  return group_norm_cpu(x, num_groups, weight, bias, eps);
}

std::array<Tensor, 3> group_norm_backward_local(const Tensor& grad_out, const Tensor& x,
                                                int64_t num_groups, const Tensor& weight,
                                                double eps, std::array<bool, 2> mask) {
  if (x.device().is_cuda()) {
    return group_norm_backward_composed(grad_out, x, num_groups, weight, eps, mask);
  }
  std::array<Tensor, 3> out;
  group_norm_backward_cpu(grad_out, x, num_groups, weight, eps, out[0], mask[0] ? &out[1] : nullptr,
                          mask[1] ? &out[2] : nullptr);
  return out;
}

std::array<Tensor, 3> group_norm_backward_composed(const Tensor& grad_out, const Tensor& x,
                                                   int64_t num_groups, const Tensor& weight,
                                                   double eps, std::array<bool, 2> mask) {
  std::array<Tensor, 3> out;
  // grad_x = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) per (sample, group), gw = g * w.
  const Shape& s = x.shape();
  const int64_t rows[] = {s[0], num_groups, s[0] == 0 ? 0 : x.numel() / (s[0] * num_groups)};
  const int64_t last[] = {2};
  const Tensor x3 = reshape(x, rows);
  const Tensor mu = mean(x3, last, true);
  const Tensor rstd = rsqrt(add(var(x3, last, 0, true), eps));
  const Tensor xhat = mul(sub(x3, mu), rstd);
  const Tensor gw =
      reshape(weight.defined() ? mul(grad_out, reshape(weight, channel_shape(s))) : grad_out, rows);
  out[0] = reshape(
      mul(rstd, sub(sub(gw, mean(gw, last, true)), mul(xhat, mean(mul(gw, xhat), last, true)))), s);
  std::vector<int64_t> not_channels = {0};
  for (int64_t d = 2; d < x.dim(); ++d) not_channels.push_back(d);
  if (mask[0]) out[1] = sum(mul(grad_out, reshape(xhat, s)), not_channels);
  if (mask[1]) out[2] = sum(grad_out, not_channels);
  return out;
}

}  // namespace dtensor::detail
