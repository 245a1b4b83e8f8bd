// CPU vs CUDA: every distribution is bit-identical except float64 normals (libm vs CUDA
// log/cos), which agree to a few ulp. Reports skipped (exit code 77) when no CUDA device is
// present.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "dtensor/rng/random.h"
#include "dtensor/tensor/compare.h"

using namespace dtensor;

namespace {
void require_device() {
  if (cuda_device_count() == 0) {
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
       {RandomSpec::uniform(kFloat32), RandomSpec::uniform(kFloat64), RandomSpec::uniform(kFloat16),
        RandomSpec::uniform(kBFloat16, -1, 3), RandomSpec::bernoulli(kBool, 0.3),
        RandomSpec::randint(kInt64, -7, 1000), RandomSpec::dropout_mask(kFloat32, 0.2)}) {
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

// Local tensors that are one contiguous run of the global tensor take the CUDA kernel that
// computes one Philox block per thread (dtensor/rng/random_cuda.cu): whole tensors, dim-0 slabs and
// size-1 dims, at offsets whose first block is partial and at offsets whose words wrap past
// 2^64 (Generator::set_offset takes any value).
TEST_CASE("CPU and CUDA agree on contiguous runs at every offset, wrapping too", "[rng][gpu]") {
  require_device();
  const Device gpu(kCUDA, 0);
  struct Region {
    Shape global, off, sz;
  };
  const std::vector<Region> regions = {{{17}, {0}, {17}},
                                       {{9, 13}, {0, 0}, {9, 13}},
                                       {{9, 13}, {3, 0}, {5, 13}},
                                       {{7, 1, 5}, {2, 0, 0}, {3, 1, 5}},
                                       {{6, 5}, {1, 2}, {1, 3}}};
  const uint64_t offsets[] = {
      0, 1, 2, 3, 6, 20, ~uint64_t{0} - 15, ~uint64_t{0} - 7, ~uint64_t{0} - 3, ~uint64_t{0}};
  for (const RandomSpec& spec :
       {RandomSpec::uniform(kFloat32), RandomSpec::uniform(kFloat64), RandomSpec::uniform(kFloat16),
        RandomSpec::bernoulli(kBool, 0.3), RandomSpec::randint(kInt64, -7, 1000),
        RandomSpec::normal(kFloat32, 0.5, 2.0), RandomSpec::normal(kBFloat16),
        RandomSpec::dropout_mask(kFloat32, 0.2)}) {
    for (const Region& r : regions) {
      for (uint64_t offset : offsets) {
        INFO(random_kind_name(spec.kind) << " " << dtype_name(spec.dtype) << " global "
                                         << shape_str(r.global) << " offset " << offset);
        Tensor c = empty(r.sz, spec.dtype);
        Tensor g = empty(r.sz, {spec.dtype, gpu});
        fill_random(c, spec, 7, offset, r.global, r.off);
        fill_random(g, spec, 7, offset, r.global, r.off);
        CHECK(equal(c, g.to(Device())));
      }
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

TEST_CASE("CUDA dropout and fills match the CPU for every floating dtype, strided and empty",
          "[rng][gpu]") {
  require_device();
  const Device gpu(kCUDA, 0);
  for (DType d : {kFloat64, kFloat16, kBFloat16}) {
    INFO(dtype_name(d));
    manual_seed(11);
    const Tensor x = rand({64, 40}, {d, gpu}).transpose(0, 1);  // strided input
    const DropoutResult r = dropout_with_mask(x, 0.25);
    manual_seed(11);
    const Tensor xc = rand({64, 40}, d).transpose(0, 1);
    const DropoutResult rc = dropout_with_mask(xc, 0.25);
    CHECK(equal(x.to(Device()), xc));
    CHECK(equal(r.mask.to(Device()), rc.mask));
    CHECK(equal(r.output.to(Device()), rc.output));
    // p = 1 drops everything (scale 0), p = 0 keeps the input.
    CHECK(equal(dropout(x, 1.0).to(Device()), zeros({40, 64}, d)));
    CHECK(equal(dropout(x, 0.0).to(Device()), xc));
  }
  manual_seed(12);
  const Tensor ri = randint(-5, 5, {3, 1000}, {kInt32, gpu});
  const Tensor bf = bernoulli({3, 1000}, 0.5, {kFloat32, gpu});
  manual_seed(12);
  CHECK(equal(ri.to(Device()), randint(-5, 5, {3, 1000}, kInt32)));
  CHECK(equal(bf.to(Device()), bernoulli({3, 1000}, 0.5, kFloat32)));
  // Zero-size outputs launch nothing and advance nothing.
  const uint64_t before = default_generator(gpu).offset();
  CHECK(rand({0, 5}, {kFloat32, gpu}).numel() == 0);
  CHECK(default_generator(gpu).offset() == before);
}
