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
  return group_norm_backward_math(grad_out, x, num_groups, weight, eps, mask);
}

}  // namespace dtensor::detail
