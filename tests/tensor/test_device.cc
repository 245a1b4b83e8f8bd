#include <catch2/catch.hpp>

#include "dtensor/config.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/device.h"
#include "dtensor/tensor/storage.h"

using namespace dtensor;
using Catch::Contains;

TEST_CASE("device: construction, parsing and printing", "[device]") {
  CHECK(Device().is_cpu());
  CHECK(Device(kCPU, 3).index == 0);  // the CPU has one index
  CHECK(Device(kCUDA, 2).index == 2);
  CHECK(Device("cpu") == Device(kCPU));
  CHECK(Device("cuda") == Device(kCUDA, 0));
  CHECK(Device("cuda:7") == Device(kCUDA, 7));
  CHECK(Device(kCUDA, 1).str() == "cuda:1");
  CHECK(Device().str() == "cpu");
  CHECK(device_type_name(kCUDA) == "cuda");
  CHECK(device_type_name(kCPU) == "cpu");
  CHECK(Device(kCUDA, 0) != Device(kCUDA, 1));
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:x", "cuda:1x", "", "CPU"}) {
    INFO(bad);
    REQUIRE_THROWS_AS(Device(std::string_view(bad)), Error);
    REQUIRE_THROWS_WITH(Device(std::string_view(bad)), Contains("[Device]"));
  }
}

TEST_CASE("device: CUDA availability matches the build", "[device]") {
  if (!DTENSOR_HAVE_CUDA) {
    CHECK_FALSE(cuda_available());
    CHECK(cuda_device_count() == 0);
    REQUIRE_THROWS_WITH(Storage::allocate(16, Device(kCUDA)),
                        Contains("CUDA support is not compiled in"));
    REQUIRE_THROWS_WITH(zeros({2}).to(Device(kCUDA)), Contains("[Tensor] CUDA support"));
    REQUIRE_THROWS_AS(empty({2, 2}, Device(kCUDA)), Error);
  } else {
    CHECK(cuda_available() == (cuda_device_count() > 0));
    if (!cuda_available()) {
      REQUIRE_THROWS_WITH(Storage::allocate(16, Device(kCUDA, 0)), Contains("does not exist"));
    }
  }
}
