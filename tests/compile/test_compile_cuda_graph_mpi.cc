// CompileOptions::cuda_graph where no CUDA graph can be made (one rank, CPU tensors): the option
// is accepted and ignored with a clear status, and the step's replays run plainly, equal to the
// eager step bit for bit. The capture itself is tested on a GPU (tests/gpu/
// test_compile_cuda_graph.cc).
#include <catch2/catch.hpp>
#include <string>

#include "tests/compile/cuda_graph_step.h"

namespace dt = dtensor;
namespace cg = dtensor::cuda_graph_test;

namespace {

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

TEST_CASE("cuda_graph on CPU tensors: plain replays, equal to eager, the reason reported",
          "[compile][cuda_graph]") {
  const bool adamw = GENERATE(true, false);
  const bool profile = GENERATE(false, true);
  INFO((adamw ? "AdamW" : "SGD") << (profile ? ", profiled" : ""));
  const dt::Device cpu(dt::kCPU);
  cg::Trainer eager(cpu, adamw, true), compiled(cpu, adamw, true);
  dt::CompileOptions options;
  options.cuda_graph = true;
  options.profile = profile;
  dt::CompiledStep step =
      dt::compile([&](const dt::DTensorList& batch) { return compiled.step(batch); }, options);
  CHECK_THROWS_WITH(step.cuda_graph_status(), Catch::Contains("has not been called yet"));
  for (int i = 0; i < 6; ++i) {
    INFO("step " << i);
    const dt::DTensorList batch = cg::make_batch(cpu, i);
    const dt::DTensor want = eager.step(batch)[0];
    const dt::DTensor got = step(batch)[0];
    eager.schedule->step();
    compiled.schedule->step();
    REQUIRE(dt::equal(got.to_local(), want.to_local()));
    std::string diff;
    REQUIRE(cg::same_parameters(compiled.net, eager.net, &diff));
    const std::string status = step.cuda_graph_status();
    INFO(status);
    if (i == 0) {
      CHECK(status == "pending");  // captured eagerly, not replayed yet
    } else if (profile) {
      CHECK(starts_with(status, "fallback: CompileOptions::profile times each node"));
    } else {
      CHECK(starts_with(status, "fallback: input 0 is on cpu: a CUDA graph captures CUDA work"));
    }
  }
  CHECK(step.captures() == 1);
  CHECK(step.replays() == 5);
}

TEST_CASE("cuda_graph off: the status says so", "[compile][cuda_graph]") {
  const dt::Device cpu(dt::kCPU);
  cg::Trainer t(cpu, true, false);
  dt::CompiledStep step = dt::compile([&](const dt::DTensorList& batch) { return t.step(batch); });
  for (int i = 0; i < 2; ++i) step(cg::make_batch(cpu, i));
  CHECK(step.cuda_graph_status() == "off");
}
