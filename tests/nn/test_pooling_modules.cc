// The pooling modules (dtensor/nn/pooling.h) on one process (self mesh): forward is the DTensor
// op with the module's arguments and torch.nn's defaults (stride = kernel_size, padding 0,
// dilation 1, nearest upsampling), no parameters, gradients flow.
#include <catch2/catch.hpp>

#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/pool/pool.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/tensor/creation.h"
#include "tests/common/ops_dtensor_test_util.h"
#include "tests/nn/inventory_reference.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
namespace tt = dtensor::test;
using dt::DTensor;
using dt::Tensor;

TEST_CASE("pooling modules call their op with torch.nn's defaults", "[nn]") {
  const Tensor x = tt::det_input({2, 3, 7, 6}, 3, -2.0, 0.37, dt::kFloat64);
  const Tensor x1 = x.reshape({2, 3, 42});
  const DTensor in = nn::local_dtensor(x), in1 = nn::local_dtensor(x1);
  struct Case {
    std::shared_ptr<nn::Module> m;
    const char* type;
    DTensor input;
    Tensor want;
  };
  const std::vector<Case> cases = {
      {std::make_shared<nn::MaxPool2d>(dt::Shape{3}), "MaxPool2d", in, dt::max_pool2d(x, {3}, {3})},
      {std::make_shared<nn::MaxPool2d>(dt::Shape{3, 2}, dt::Shape{2, 1}, dt::Shape{1}, dt::Shape{1},
                                       true),
       "MaxPool2d", in, dt::max_pool2d(x, {3, 2}, {2, 1}, {1}, {1}, true)},
      {std::make_shared<nn::MaxPool1d>(dt::Shape{4}), "MaxPool1d", in1,
       dt::max_pool1d(x1, {4}, {4})},
      {std::make_shared<nn::AvgPool1d>(dt::Shape{3}, dt::Shape{2}, dt::Shape{1}), "AvgPool1d", in1,
       dt::avg_pool1d(x1, {3}, {2}, {1}, false, true)},
      {std::make_shared<nn::AvgPool2d>(dt::Shape{2}), "AvgPool2d", in, dt::avg_pool2d(x, {2}, {2})},
      {std::make_shared<nn::AvgPool2d>(dt::Shape{3}, dt::Shape{}, dt::Shape{1}, true, false, 4),
       "AvgPool2d", in, dt::avg_pool2d(x, {3}, {3}, {1}, true, false, 4)},
      {std::make_shared<nn::AdaptiveAvgPool2d>(dt::Shape{1}), "AdaptiveAvgPool2d", in,
       dt::adaptive_avg_pool2d(x, {1, 1})},
      {std::make_shared<nn::Upsample>(dt::Shape{}, std::vector<double>{2.0}), "Upsample", in,
       dt::interpolate(x, {}, {2.0}, "nearest")},
      {std::make_shared<nn::Upsample>(dt::Shape{9, 4}, std::vector<double>{}, "bilinear", true),
       "Upsample", in, dt::interpolate(x, {9, 4}, {}, "bilinear", true)},
      {std::make_shared<nn::Upsample>(dt::Shape{7, 5}, std::vector<double>{}, "nearest-exact"),
       "Upsample", in, dt::interpolate(x, {7, 5}, {}, "nearest-exact")},
      {std::make_shared<nn::Upsample>(dt::Shape{}, std::vector<double>{1.5}, "bicubic", false),
       "Upsample", in, dt::interpolate(x, {}, {1.5}, "bicubic", false)},
      {std::make_shared<nn::ZeroPad2d>(dt::Shape{1, 2, 0, 3}), "ZeroPad2d", in,
       dt::pad(x, {1, 2, 0, 3}, "constant", 0.0)},
      {std::make_shared<nn::ReflectionPad2d>(dt::Shape{2}), "ReflectionPad2d", in,
       dt::pad(x, {2, 2, 2, 2}, "reflect")},
  };
  for (const Case& c : cases) {
    INFO(c.type);
    CHECK(c.m->type_name() == c.type);
    CHECK(c.m->parameters().empty());
    CHECK(tt::same_values((*c.m)(c.input).to_local(), c.want, 0));
  }
  nn::MaxPool2d pool({2});
  CHECK(pool.stride().empty());  // stride {}: the kernel size, as PyTorch's None
  CHECK(pool.padding() == dt::Shape{0});
  CHECK(pool.dilation() == dt::Shape{1});
  CHECK(!pool.ceil_mode());
  const dt::DTensorValuesIndices vi = pool.forward_with_indices(in);
  CHECK(tt::same_values(vi.indices.to_local(), dt::max_pool2d_with_indices(x, {2}).indices, 0));
  CHECK_THROWS_WITH(nn::ZeroPad2d(dt::Shape{1, 2}),
                    Catch::Contains("[ZeroPad2d] padding must be a single int or 4 ints, got 2"));
}

TEST_CASE("pooling modules in a chain pass gradients", "[nn]") {
  const Tensor x = tt::det_input({2, 3, 8, 8}, 1, -2.0, 0.13, dt::kFloat64);
  DTensor in = nn::local_dtensor(x);
  in.requires_grad_();
  nn::ReflectionPad2d pad({1});
  nn::MaxPool2d max({2});
  nn::Upsample up({}, {2.0}, "bilinear");
  nn::AvgPool2d avg({3}, {2});
  nn::AdaptiveAvgPool2d gap({1});
  dt::sum(gap(avg(up(max(pad(in)))))).backward();
  REQUIRE(in.grad().defined());
  CHECK(in.grad().shape() == dt::Shape{2, 3, 8, 8});
}

TEST_CASE("round-9 pooling modules give PyTorch's values and gradients", "[nn]") {
  using S = dt::Shape;
  const std::vector<tt::inventory::ModuleCase> cases = {
      {"MaxPool3d(2)", std::make_shared<nn::MaxPool3d>(S{2}), "MaxPool3d"},
      {"MaxPool3d(2,(1,2,1),(1,0,1),(1,1,2),ceil)",
       std::make_shared<nn::MaxPool3d>(S{2}, S{1, 2, 1}, S{1, 0, 1}, S{1, 1, 2}, true),
       "MaxPool3d"},
      {"AvgPool3d(2)", std::make_shared<nn::AvgPool3d>(S{2}), "AvgPool3d"},
      {"AvgPool3d(3,2,1,ceil,no pad count)",
       std::make_shared<nn::AvgPool3d>(S{3}, S{2}, S{1}, true, false), "AvgPool3d"},
      {"AvgPool3d(2,divisor_override=3)",
       std::make_shared<nn::AvgPool3d>(S{2}, S{}, S{0}, false, true, 3), "AvgPool3d"},
      {"AdaptiveAvgPool1d(3)", std::make_shared<nn::AdaptiveAvgPool1d>(S{3}), "AdaptiveAvgPool1d"},
      {"AdaptiveAvgPool3d((2,3,2))", std::make_shared<nn::AdaptiveAvgPool3d>(S{2, 3, 2}),
       "AdaptiveAvgPool3d"},
      {"AdaptiveAvgPool3d(1) unbatched", std::make_shared<nn::AdaptiveAvgPool3d>(S{1}),
       "AdaptiveAvgPool3d"},
      {"AdaptiveMaxPool1d(3)", std::make_shared<nn::AdaptiveMaxPool1d>(S{3}), "AdaptiveMaxPool1d"},
      {"AdaptiveMaxPool2d((2,3))", std::make_shared<nn::AdaptiveMaxPool2d>(S{2, 3}),
       "AdaptiveMaxPool2d"},
      {"AdaptiveMaxPool3d((2,2,2))", std::make_shared<nn::AdaptiveMaxPool3d>(S{2, 2, 2}),
       "AdaptiveMaxPool3d"},
      {"LPPool1d(2,3)", std::make_shared<nn::LPPool1d>(2.0, S{3}), "LPPool1d"},
      {"LPPool2d(2,(2,3),(1,2),ceil)", std::make_shared<nn::LPPool2d>(2.0, S{2, 3}, S{1, 2}, true),
       "LPPool2d"},
      {"LPPool2d(3,2) positive", std::make_shared<nn::LPPool2d>(3.0, S{2}), "LPPool2d"},
      {"LPPool3d(2,2)", std::make_shared<nn::LPPool3d>(2.0, S{2}), "LPPool3d"},
      {"UpsamplingNearest2d(scale 2)",
       std::make_shared<nn::UpsamplingNearest2d>(S{}, std::vector<double>{2.0}),
       "UpsamplingNearest2d"},
      {"UpsamplingBilinear2d(size (5,7))", std::make_shared<nn::UpsamplingBilinear2d>(S{5, 7}),
       "UpsamplingBilinear2d"},
  };
  tt::inventory::check_modules(cases);
  // return_indices: AdaptiveMaxPool1d's are positions along L, as PyTorch's.
  const Tensor x = tt::det_input({2, 3, 7}, 1, -2.5, 0.5, dt::kFloat64);
  const dt::DTensorValuesIndices vi =
      nn::AdaptiveMaxPool1d(S{3}).forward_with_indices(nn::local_dtensor(x));
  const std::vector<double> xv = x.to_vector<double>();
  const std::vector<int64_t> got = vi.indices.to_local().to_vector<int64_t>();
  REQUIRE(got.size() == 18);
  for (int64_t r = 0; r < 6; ++r) {
    for (int64_t o = 0; o < 3; ++o) {
      int64_t best = o * 7 / 3;  // PyTorch's window [floor(o L / 3), ceil((o + 1) L / 3))
      for (int64_t l = best; l < ((o + 1) * 7 + 2) / 3; ++l) {
        if (xv[r * 7 + l] > xv[r * 7 + best]) best = l;
      }
      CHECK(got[r * 3 + o] == best);
    }
  }
  CHECK(nn::LPPool2d(2.0, S{2}).norm_type() == 2.0);
  CHECK(nn::AdaptiveAvgPool3d(S{2}).output_size() == S{2, 2, 2});
  CHECK_THROWS_WITH(nn::AdaptiveMaxPool3d(S{2, 2}),
                    Catch::Contains("[AdaptiveMaxPool3d] output_size must be a single int or 3 "
                                    "ints, got 2"));
  CHECK_THROWS_WITH(nn::AdaptiveAvgPool3d(S{1})(nn::local_dtensor(x)),
                    Catch::Contains("[AdaptiveAvgPool3d] expected a 4-D or 5-D input, got 3D"));
}

TEST_CASE("MaxUnpool1d/2d/3d give PyTorch's values and gradients", "[nn]") {
  namespace inv = tt::inventory;
  using S = dt::Shape;
  struct Case {
    const char* name;
    std::shared_ptr<nn::MaxUnpoolNd> m;
    S output_size;
    const char* type;
  };
  const std::vector<Case> cases = {
      {"MaxUnpool1d(2)", std::make_shared<nn::MaxUnpool1d>(S{2}), S{}, "MaxUnpool1d"},
      {"MaxUnpool2d(2)", std::make_shared<nn::MaxUnpool2d>(S{2}), S{}, "MaxUnpool2d"},
      {"MaxUnpool2d(3,2,1) output_size (5,5)", std::make_shared<nn::MaxUnpool2d>(S{3}, S{2}, S{1}),
       S{5, 5}, "MaxUnpool2d"},
      {"MaxUnpool2d(2) unbatched", std::make_shared<nn::MaxUnpool2d>(S{2}), S{}, "MaxUnpool2d"},
      {"MaxUnpool3d(2)", std::make_shared<nn::MaxUnpool3d>(S{2}), S{}, "MaxUnpool3d"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    CHECK(c.m->type_name() == c.type);
    CHECK(c.m->parameters().empty());
    const inv::RefCase& ref = inv::reference(c.name);
    DTensor x = nn::local_dtensor(inv::value(ref, "x"));
    x.requires_grad_(true);
    const DTensor idx = nn::local_dtensor(inv::value(ref, "indices").to(dt::kInt64));
    const DTensor out =
        c.output_size.empty() ? (*c.m)(x, idx) : c.m->forward_with_size(x, idx, c.output_size);
    inv::check_close(out, inv::value(ref, "out"), "out");
    dt::sum(dt::mul(out, nn::local_dtensor(inv::value(ref, "c")))).backward();
    inv::check_close(x.grad(), inv::value(ref, "grad:x"), "grad:x");
  }
  const DTensor x = nn::local_dtensor(tt::det_input({1, 1, 2, 2}, 1, -1.0, 0.5, dt::kFloat64));
  CHECK_THROWS_WITH(nn::MaxUnpool2d(S{2})(x, nn::local_dtensor(dt::zeros({1, 1, 2}))),
                    Catch::Contains("[MaxUnpool2d] input and indices must have the same shape"));
  CHECK_THROWS_WITH(nn::MaxUnpool3d(S{2, 2}),
                    Catch::Contains("[MaxUnpool3d] kernel_size must be one or 3 ints >= 1"));
  // output_size as PyTorch's _unpool_output_size (torch 2.15): each size strictly within the
  // default (4 here) ± stride, nd or nd + 2 values.
  const DTensor idx = nn::local_dtensor(dt::zeros({1, 1, 2, 2}).to(dt::kInt64));
  nn::MaxUnpool2d unpool(S{2});
  CHECK_THROWS_WITH(unpool.forward_with_size(x, idx, S{6, 6}),
                    Catch::Contains("[MaxUnpool2d] invalid output_size \"(6, 6)\" (dim 0 must be "
                                    "between 2 and 6)"));
  CHECK_THROWS_WITH(unpool.forward_with_size(x, idx, S{4, 2}),
                    Catch::Contains("[MaxUnpool2d] invalid output_size \"(4, 2)\" (dim 1 must be "
                                    "between 2 and 6)"));
  CHECK_THROWS_WITH(unpool.forward_with_size(x, idx, S{4}),
                    Catch::Contains("[MaxUnpool2d] output_size should be a sequence containing 2 "
                                    "or 4 elements, but it has a length of '1'"));
  CHECK(unpool.forward_with_size(x, idx, S{1, 1, 5, 5}).shape() == S{1, 1, 5, 5});
  // With nd + 2 values the message names the spatial ones, as PyTorch's (review R3, finding 6).
  CHECK_THROWS_WITH(unpool.forward_with_size(x, idx, S{1, 1, 6, 6}),
                    Catch::Contains("[MaxUnpool2d] invalid output_size \"(6, 6)\" (dim 0 must be "
                                    "between 2 and 6)"));
  CHECK(unpool.forward_with_size(x, idx, S{3, 3}).shape() == S{1, 1, 3, 3});
}
