// Main of the CUDA op suites: exits with 77 (ctest: skipped) when no CUDA device is usable, so
// a machine without a GPU reports the suite as skipped, never as passed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>

#include "dtensor/tensor/storage.h"

int main(int argc, char** argv) {
  if (!dtensor::cuda_available()) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
