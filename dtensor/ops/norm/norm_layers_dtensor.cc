// The normalisation layers' DTensor functions (norm.h), composed of the library's
// ops in detail/norm_layers_impl.h (which picks the device through them).
#include "dtensor/ops/norm/detail/norm_layers_impl.h"
#include "dtensor/ops/norm/norm.h"

namespace dtensor {

DTensor batch_norm(const DTensor& input, const DTensor& running_mean, const DTensor& running_var,
                   const DTensor& weight, const DTensor& bias, bool training, double momentum,
                   double eps) {
  return detail::batch_norm_impl(input, running_mean, running_var, weight, bias, training, momentum,
                                 eps);
}

DTensor group_norm(const DTensor& input, int64_t num_groups, const DTensor& weight,
                   const DTensor& bias, double eps) {
  return detail::group_norm_impl(input, num_groups, weight, bias, eps);
}

DTensor instance_norm(const DTensor& input, const DTensor& running_mean, const DTensor& running_var,
                      const DTensor& weight, const DTensor& bias, bool use_input_stats,
                      double momentum, double eps) {
  return detail::instance_norm_impl(input, running_mean, running_var, weight, bias, use_input_stats,
                                    momentum, eps);
}

}  // namespace dtensor
