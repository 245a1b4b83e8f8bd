// Optimizers on CUDA DTensors (label gpu, mpirun at 1, 2 and 4 ranks): SGD, Adam (L2 and
// decoupled), AdamW, RMSprop and Adagrad run their CUDA kernels (dtensor/optim/optim_cuda.cu)
// on each rank's shard, with no communication, and the full parameters and states equal the
// same optimizer's on the CPU (float64 within 1e-12, float32 within 1e-5): 1-D and 2-D meshes,
// uneven and empty shards, a parameter without a gradient at one step.
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/optim/optimizer.h"
#include "dtensor_cuda_test_util.h"

namespace dt = dtensor;
namespace ct = dtensor::cuda_test;
namespace o = dtensor::optim;

namespace {

std::unique_ptr<o::Optimizer> make_optimizer(const std::string& kind,
                                             std::vector<dt::DTensor> params) {
  if (kind == "SGD")
    return std::make_unique<o::SGD>(
        params, o::SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.01));
  if (kind == "Adam")
    return std::make_unique<o::Adam>(
        params, o::AdamOptions(0.1).weight_decay(0.1).amsgrad(true).maximize(true));
  if (kind == "Adam decoupled")
    return std::make_unique<o::Adam>(
        params, o::AdamOptions(0.1).weight_decay(0.1).decoupled_weight_decay(true));
  if (kind == "AdamW")
    return std::make_unique<o::AdamW>(params, o::AdamWOptions(0.1).amsgrad(true));
  if (kind == "RMSprop")
    return std::make_unique<o::RMSprop>(
        params, o::RMSpropOptions(0.01).centered(true).momentum(0.9).weight_decay(0.1));
  return std::make_unique<o::Adagrad>(
      params, o::AdagradOptions(0.1).lr_decay(0.5).initial_accumulator_value(0.2).maximize(true));
}

}  // namespace

TEST_CASE("optimizers on CUDA DTensors equal the CPU update", "[cuda][optim]") {
  const std::string kind = GENERATE("SGD", "Adam", "Adam decoupled", "AdamW", "RMSprop", "Adagrad");
  const dt::DType dtype = GENERATE(dt::kFloat64, dt::kFloat32);
  const double tol = dtype == dt::kFloat64 ? 1e-12 : 1e-5;
  INFO(kind << ", " << dt::dtype_name(dtype));
  const int64_t w = dt::world_size();
  for (const dt::DeviceMesh& mesh : ct::cuda_family_meshes()) {
    const bool two_d = mesh.ndim() == 2;
    const dt::Placements big =
        two_d ? dt::Placements{dt::Shard(0), dt::Shard(1)} : dt::Placements{dt::Shard(0)};
    const dt::Placements small =
        two_d ? dt::Placements{dt::Replicate(), dt::Shard(0)} : dt::Placements{dt::Shard(0)};
    const std::vector<std::pair<dt::test::Ints, dt::Placements>> layouts = {
        {{2 * w + 1, 3}, big}, {{std::max<int64_t>(1, w - 1)}, small}};  // empty shards
    std::vector<dt::DTensor> gpu_params, cpu_params;
    for (size_t k = 0; k < layouts.size(); ++k) {
      const dt::test::Ints& shape = layouts[k].first;
      const dt::Tensor init = dt::test::det_input(dt::IntSpan(shape.data(), shape.size()),
                                                  static_cast<int>(k), -1.25, 0.25, dtype);
      gpu_params.push_back(
          dt::distribute_tensor(init.to(ct::gpu()), mesh, layouts[k].second, std::nullopt));
      cpu_params.push_back(dt::local_dtensor(init.clone()));
      gpu_params.back().requires_grad_();
      cpu_params.back().requires_grad_();
    }
    auto gpu_opt = make_optimizer(kind, gpu_params);
    auto cpu_opt = make_optimizer(kind, cpu_params);
    for (int step = 0; step < 3; ++step) {
      gpu_opt->zero_grad();
      cpu_opt->zero_grad();
      for (size_t k = 0; k < layouts.size(); ++k) {
        if (step == 1 && k == 1) continue;  // no gradient: skipped
        const dt::test::Ints& shape = layouts[k].first;
        const dt::Tensor g =
            dt::test::det_input(dt::IntSpan(shape.data(), shape.size()),
                                step * 5 + static_cast<int>(k), -2.0, 0.375, dtype);
        gpu_params[k].set_grad(
            dt::distribute_tensor(g.to(ct::gpu()), mesh, layouts[k].second, std::nullopt));
        cpu_params[k].set_grad(dt::local_dtensor(g.clone()));
      }
      dt::CommDebugMode comm;
      gpu_opt->step();
      CHECK(comm.total_count() == 0);
      cpu_opt->step();
    }
    for (size_t k = 0; k < layouts.size(); ++k) {
      INFO("parameter " << k << ", mesh " << mesh.ndim() << "-D");
      ct::check_gpu_result(gpu_params[k].full_tensor(), cpu_params[k].to_local(), tol);
    }
    const auto gpu_state = gpu_opt->state_dict();
    const auto cpu_state = cpu_opt->state_dict();
    REQUIRE(gpu_state.size() == cpu_state.size());
    for (size_t e = 0; e < cpu_state.size(); ++e) {
      INFO(cpu_state[e].first);
      REQUIRE(gpu_state[e].first == cpu_state[e].first);
      if (gpu_state[e].second.dtype() != dtype) continue;  // step counts, hyper-parameters
      ct::check_gpu_result(gpu_state[e].second.full_tensor(), cpu_state[e].second.to_local(), tol);
    }
  }
}
