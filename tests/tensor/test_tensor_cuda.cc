// CUDA tests of the tensor layer. Own main: exits with 77 (ctest: skipped) when no CUDA device
// is usable, so a machine without a GPU reports the suite as skipped, never as passed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>

#include "dtensor/tensor/compare.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/shape_ops.h"
#include "dtensor/tensor/storage.h"

using namespace dtensor;

int main(int argc, char** argv) {
  if (!cuda_available()) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}

TEST_CASE("device: CPU <-> CUDA round trips (needs a GPU)", "[device][gpu]") {
  const Device cuda(kCUDA, 0);
  Tensor x = arange(0, 24, 1, kFloat32).view({4, 6});
  Tensor g = x.to(cuda);
  CHECK(g.device() == cuda);
  CHECK(g.to_vector<float>() == x.to_vector<float>());
  // Strided reads and writes on the device, with conversion.
  Tensor gt = g.transpose(0, 1);
  CHECK(gt.contiguous().to(Device()).to_vector<float>() ==
        x.transpose(0, 1).contiguous().to_vector<float>());
  CHECK(gt.to(kBFloat16).to(Device()).to_vector<float>() ==
        x.transpose(0, 1).contiguous().to_vector<float>());
  Tensor z = zeros({4, 6}, TensorOptions(kInt32, cuda));
  z.slice(1, 0, 6, 2).copy_(x.slice(1, 0, 6, 2));
  std::vector<int32_t> expect(24, 0);
  for (int i = 0; i < 24; ++i) expect[i] = i % 2 == 0 ? i : 0;
  CHECK(z.to_vector<int32_t>() == expect);
  CHECK(z.at<int32_t>({3, 4}) == 22);
  Tensor f = full({3}, 2.5, TensorOptions(kFloat16, cuda));
  CHECK(f.to_vector<float>() == std::vector<float>{2.5f, 2.5f, 2.5f});
  CHECK(empty({0, 3}, cuda).to(Device()).numel() == 0);
  CHECK(x.to(cuda).str().find("device='cuda:0'") != std::string::npos);
}

TEST_CASE("cuda: shape ops, comparisons and element access on the device", "[gpu]") {
  const Device cuda(kCUDA, 0);
  Tensor x = arange(0, 12, 1, kFloat32).view({3, 4});
  Tensor g = x.to(cuda);
  CHECK(equal(cat({g, g}, 1).to(Device()), cat({x, x}, 1)));
  CHECK(equal(pad(g, {1, -1}, Scalar(7)).to(Device()), pad(x, {1, -1}, Scalar(7))));
  auto parts = chunk(g, 2, 1);
  REQUIRE(parts.size() == 2);
  CHECK(parts[1].device() == cuda);
  CHECK(equal(parts[1].contiguous().to(Device()), x.narrow(1, 2, 2).contiguous()));
  CHECK(equal(g, g.clone()));
  CHECK(allclose(g, x));
  CHECK(g.at<float>({2, 3}) == 11.0f);
  CHECK(g.select(0, 1).select(0, 2).item<double>() == 6.0);
  CHECK(g.reshape({-1}).to(Device()).to_vector<float>() == x.reshape({-1}).to_vector<float>());
  CHECK(g.transpose(0, 1).reshape({-1}).to_vector<float>() ==
        x.transpose(0, 1).reshape({-1}).to_vector<float>());
  Tensor e = zeros({3, 4}, TensorOptions(kFloat64, cuda));
  e.copy_(g.narrow(0, 0, 1));  // broadcast + convert, CUDA -> CUDA
  CHECK(e.to_vector<double>() == std::vector<double>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3});
  e.transpose(0, 1).fill_(Scalar(-1));
  CHECK(e.to_vector<double>() == std::vector<double>(12, -1.0));
  Tensor small = from_vector<int32_t>({1, 2, 3}, {3}, cuda);
  CHECK(small.device() == cuda);
  CHECK(arange(0, 3, 1, TensorOptions(kInt32, cuda)).to_vector<int32_t>() ==
        std::vector<int32_t>{0, 1, 2});
  CHECK(equal(small.to(Device()), from_vector<int32_t>({1, 2, 3}, {3})));
}
