// CPU vs CUDA: every distribution is bit-identical except float64 normals (libm vs CUDA
// log/cos), which agree to a few ulp. Reports skipped (exit code 77) when no CUDA device is
// present.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "rng/random.h"
#include "tensor/compare.h"

using namespace dtensor;

namespace {
void require_device() {
  if (detail::cuda_device_count() == 0) {
    WARN("no CUDA device: skipped");
    std::exit(77);
  }
}
}  // namespace

TEST_CASE("CPU and CUDA generate the same values", "[rng][gpu]") {
  require_device();
  const Device gpu(kCUDA, 0);
  const Shape global = {37, 129};
  const Shape off = {5, 7}, sz = {30, 100};
  for (const RandomSpec& spec :
       {RandomSpec::uniform(kFloat32), RandomSpec::uniform(kFloat64),
        RandomSpec::uniform(kFloat16), RandomSpec::uniform(kBFloat16, -1, 3),
        RandomSpec::bernoulli(kBool, 0.3), RandomSpec::randint(kInt64, -7, 1000),
        RandomSpec::dropout_mask(kFloat32, 0.2)}) {
    INFO(random_kind_name(spec.kind) << " " << dtype_name(spec.dtype));
    Tensor c = empty(sz, spec.dtype);
    Tensor g = empty(sz, {spec.dtype, gpu});
    fill_random(c, spec, 99, 20, global, off);
    fill_random(g, spec, 99, 20, global, off);
    CHECK(equal(c, g.to(Device())));
    // Strided CUDA output
    Tensor gt = empty({sz[1], sz[0]}, {spec.dtype, gpu}).transpose(0, 1);
    fill_random(gt, spec, 99, 20, global, off);
    CHECK(equal(c, gt.to(Device()).contiguous()));
  }
  for (DType d : {kFloat32, kFloat16, kBFloat16, kFloat64}) {
    INFO("normal " << dtype_name(d));
    Tensor c = empty(sz, d), g = empty(sz, {d, gpu});
    fill_random(c, RandomSpec::normal(d, 0.5, 2.0), 3, 0, global, off);
    fill_random(g, RandomSpec::normal(d, 0.5, 2.0), 3, 0, global, off);
    if (d == kFloat64) {
      CHECK(allclose(c, g.to(Device()), 1e-12, 1e-12));  // libm vs CUDA log/cos
    } else {
      CHECK(equal(c, g.to(Device())));  // the float formulas are bit-identical
    }
  }
}

TEST_CASE("random ops on CUDA use the CUDA default generator", "[rng][gpu]") {
  require_device();
  const Device gpu(kCUDA, 0);
  manual_seed(5);
  const Tensor a = rand({1000}, {kFloat32, gpu});
  CHECK(default_generator(gpu).offset() == 1000);
  CHECK(default_generator().offset() == 0);
  manual_seed(5);
  CHECK(equal(a.to(Device()), rand({1000})));
  manual_seed(6);
  const Tensor x = rand({4096}, {kFloat32, gpu});
  const DropoutResult r = dropout_with_mask(x, 0.4);
  manual_seed(6);
  rand({4096});
  const DropoutResult rc = dropout_with_mask(x.to(Device()), 0.4);
  CHECK(equal(r.mask.to(Device()), rc.mask));
  CHECK(equal(r.output.to(Device()), rc.output));
}
