#include "dtensor/nn/basic_layers.h"

#include "dtensor/ops/view/copy_ops.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/rng/dtensor_random.h"
#include "dtensor/tensor/error.h"

namespace dtensor::nn {

DTensor Flatten::forward(const DTensor& x) {
  return dtensor::flatten(x, start_dim_, end_dim_);
}

DTensor Unflatten::forward(const DTensor& x) {
  return dtensor::unflatten(x, dim_, sizes_);
}

Dropout::Dropout(double p, Generator* gen) : p_(p), gen_(gen) {
  DT_CHECK(p >= 0.0 && p <= 1.0,
           "[Dropout] dropout probability has to be between 0 and 1, but got %g", p);
}

DTensor Dropout::forward(const DTensor& x) {
  return dtensor::dropout(x, p_, is_training(), gen_);
}

}  // namespace dtensor::nn
