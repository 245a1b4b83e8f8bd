// The normalisation layers' local Tensor functions (norm.h), composed of the library's
// ops in detail/norm_layers_impl.h (which picks the device through them).
#include "dtensor/ops/norm/detail/norm_layers_impl.h"
#include "dtensor/ops/norm/norm.h"

namespace dtensor {

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  return detail::batch_norm_impl(input, running_mean, running_var, weight, bias, training, momentum,
                                 eps);
}

Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps) {
  return detail::group_norm_impl(input, num_groups, weight, bias, eps);
}

Tensor instance_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                     const Tensor& weight, const Tensor& bias, bool use_input_stats,
                     double momentum, double eps) {
  return detail::instance_norm_impl(input, running_mean, running_var, weight, bias, use_input_stats,
                                    momentum, eps);
}

}  // namespace dtensor
