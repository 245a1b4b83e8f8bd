// dtensor half of the data-parallel side-by-side probe (round 6); probe.py is the PyTorch half
// (FSDP2 fully_shard and DistributedDataParallel on gloo) and compare.py prints the differences
// (docs/SEMANTICS.md, "Data parallel and nn modules against PyTorch (round 6)"). Not built with
// the tree: compile it against the libraries of a build, e.g. from the repository root
//   c++ -std=c++20 -I. -Ibuild/generated -isystem /usr/lib/x86_64-linux-gnu/openmpi/include \
//       tests/parallel/torch_dp_parity/probe.cc build/dtensor/*/lib*.so -lmpi -o /tmp/dp_probe
// then in one directory: mpirun -np N /tmp/dp_probe (N = 2, 4), torchrun --nproc-per-node N
// probe.py, python3 compare.py N (LD_LIBRARY_PATH naming the build/dtensor/* folders). Writes
// dt_w<N>_r<rank>.json.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "dtensor/collectives/runtime.h"
#include "dtensor/nn/functional.h"
#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/optim/optimizer.h"
#include "dtensor/parallel/data_parallel/data_parallel.h"
#include "dtensor/tensor/creation.h"
#include "tests/parallel/torch_dp_parity/dp_probe_model.h"
#include "tests/parallel/torch_dp_parity/json_out.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
using dt::DTensor;

namespace {
using namespace dp_probe;
int R = 0, W = 1;
using namespace probe_json;

struct Case {
  std::string tag;
  bool fsdp = true;
  bool adamw = true;
  bool reshard = true;
  int accum = 1;
  bool mp = false;
};

void run(const Case& c, const dt::DeviceMesh& mesh) {
  Net m(c.mp ? dt::kFloat32 : dt::kFloat64);
  dt::DataParallelOptions o;
  o.grouping.module_types = {"Linear"};
  o.reshard_after_forward = c.reshard;
  if (c.mp) {
    o.param_dtype = dt::kBFloat16;
    o.reduce_dtype = dt::kFloat32;
  }
  auto dp = c.fsdp ? dt::fully_shard(m, mesh, o) : dt::replicate(m, mesh, o);
  std::vector<DTensor> params;
  for (const DTensor& p : m.parameters())
    if (p.requires_grad()) params.push_back(p);
  std::unique_ptr<dt::optim::Optimizer> opt;
  if (c.adamw)
    opt = std::make_unique<dt::optim::AdamW>(params, dt::optim::AdamWOptions(1e-2));
  else
    opt = std::make_unique<dt::optim::SGD>(params, dt::optim::SGDOptions(0.1).momentum(0.9));
  const std::string& tag = c.tag;
  for (int step = 0; step < 5; ++step) {
    m.step = step;
    opt->zero_grad();
    for (int micro = 0; micro < c.accum; ++micro) {
      const bool last = micro == c.accum - 1;
      if (c.accum > 1) dp->set_requires_gradient_sync(last);
      auto [tok, tgt] = batch(step, micro, R, W);
      const int64_t rows[] = {-1, V};
      const DTensor loss =
          dt::cross_entropy(dt::reshape(m(nn::local_dtensor(tok)), rows), nn::local_dtensor(tgt));
      loss.backward();
      rec_num(tag + " step" + std::to_string(step) + " micro" + std::to_string(micro) + " loss",
              dt::cast(loss.full_tensor(), dt::kFloat64).item<double>());
    }
    if (step == 0 || step == 1 || step == 4)
      for (auto& [n, p] : m.named_parameters())
        rec(tag + " step" + std::to_string(step) + " grad " + n, p.grad());
    if (step == 4) {
      rec_num(tag + " step4 clip total_norm", dt::optim::clip_grad_norm_(params, 0.05));
      for (auto& [n, p] : m.named_parameters()) rec(tag + " step4 clipped grad " + n, p.grad());
    }
    opt->step();
  }
  std::string keys;
  for (auto& [n, p] : m.named_parameters()) {
    rec(tag + " final param " + n, p);
    keys += (keys.empty() ? "" : " ") + n;
  }
  for (auto& [n, b] : m.named_buffers()) keys += " " + n;
  rec_value(tag + " state_dict keys", keys);
  for (auto& [n, s] : opt->state_dict()) {
    const auto dot = n.find('.');
    if (dot == std::string::npos || n.substr(dot + 1) == "step" || n.starts_with("param_groups."))
      continue;
    rec(tag + " optim state " + n.substr(0, dot) + " " + n.substr(dot + 1), s);
  }
}
}  // namespace

int main(int argc, char** argv) {
  dt::Runtime rt(&argc, &argv);
  R = dt::world_rank();
  W = dt::world_size();
  const auto mesh = dt::init_device_mesh(dt::kCPU, {W}, {"dp"});
  const std::vector<Case> cases = {
      {.tag = "fsdp_adamw"},
      {.tag = "fsdp_sgd_noreshard", .adamw = false, .reshard = false},
      {.tag = "fsdp_accum3", .adamw = false, .accum = 3},
      {.tag = "fsdp_mp_bf16", .mp = true},
      {.tag = "ddp_adamw", .fsdp = false},
      {.tag = "ddp_accum3", .fsdp = false, .adamw = false, .accum = 3},
  };
  for (const Case& c : cases) {
    try {
      run(c, mesh);
    } catch (const std::exception& e) {
      rec_error(c.tag, e);
    }
  }
  write("dt_w" + std::to_string(W) + "_r" + std::to_string(R) + ".json");
  return 0;
}
