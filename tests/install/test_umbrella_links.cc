// A program that includes only <dtensor/dtensor.h> and calls only DTensor members, which the
// core defines and which reach the autograd and ops layers through hooks those libraries install
// when they are loaded (dtensor/core/detail/autograd_hooks.h, view_hooks.h). Linked with
// --as-needed (Debian's gcc default; forced here), this program references nothing of
// dtensor::ops or dtensor::autograd but the umbrella's anchor: without it x.t() would raise
// "[DTensor::t] ... the ops layer (dtensor::ops), which is not linked" and backward() its
// autograd counterpart.
#include <catch2/catch.hpp>

#include "dtensor/dtensor.h"

namespace dt = dtensor;

TEST_CASE("the umbrella keeps the layers loaded that DTensor's members reach through hooks") {
  const dt::TensorOptions f64(dt::DType::kFloat64);
  dt::DTensor x = dt::local_dtensor(dt::full({2, 3}, 2.0, f64));
  x.requires_grad_();
  const dt::DTensor y = x.t();  // the ops layer's transpose, recorded by autograd
  CHECK(y.requires_grad());
  CHECK(y.shape() == dt::Shape{3, 2});
  y.backward(dt::local_dtensor(dt::full({3, 2}, 5.0, f64)));
  REQUIRE(x.grad().defined());
  CHECK(dt::equal(x.grad().to_local(), dt::full({2, 3}, 5.0, f64)));
}
