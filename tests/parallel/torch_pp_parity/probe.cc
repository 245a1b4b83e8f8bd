// dtensor half of the pipeline-parallel side-by-side probe (round 7b); probe.py is the PyTorch
// half (torch.distributed.pipelining's PipelineStage with ScheduleGPipe / Schedule1F1B /
// ScheduleInterleaved1F1B on gloo) and compare.py prints the differences (docs/SEMANTICS.md,
// "Pipeline parallelism against PyTorch (round 7b)"). Not run by ctest; the target
// torch_pp_probe (tests/parallel/pipeline/CMakeLists.txt, not built by default) builds it:
//   BUILD_TARGETS=torch_pp_probe ./scripts/build.sh
// then in one directory: mpirun -np N build/tests/parallel/pipeline/torch_pp_probe (N = 2, 4),
// torchrun --nproc-per-node N probe.py, python3 compare.py N. Writes dt_pp_w<N>_r<rank>.json.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "dtensor/collectives/runtime.h"
#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/optim/optimizer.h"
#include "dtensor/parallel/data_parallel/data_parallel.h"
#include "dtensor/parallel/pipeline/clip_grad.h"
#include "dtensor/parallel/pipeline/pipeline_schedule.h"
#include "dtensor/parallel/pipeline/split.h"
#include "dtensor/tensor/creation.h"
#include "tests/parallel/torch_dp_parity/json_out.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
namespace pp = dtensor::pipelining;
using dt::DTensor;

namespace {
using namespace probe_json;
constexpr int64_t D = 4, O = 3;
int R = 0, W = 1;

// probe.py's Stage: fc = Linear(D, D) then tanh; the last stage's Linear(D, O) without tanh.
class Stage : public nn::Module {
 public:
  Stage(int64_t s, int64_t n) : last_(s == n - 1) {
    fc_ = register_module("fc",
                          std::make_shared<nn::Linear>(D, last_ ? O : D, true,
                                                       nn::ModuleOptions{.dtype = dt::kFloat64}));
    int k = 0;
    for (auto& [name, p] : fc_->named_parameters()) {
      std::vector<double> v(static_cast<size_t>(p.numel()));
      for (size_t i = 0; i < v.size(); ++i)
        v[i] = 0.5 * std::sin(0.37 * static_cast<double>(i) + 1.3 * static_cast<double>(s) +
                              0.7 * k + 0.2);
      fc_->set_parameter(name, nn::local_dtensor(dt::from_vector(v, p.shape())));
      ++k;
    }
  }
  std::string type_name() const override { return "Stage"; }
  DTensor forward(const DTensor& x) override {
    DTensor y = (*fc_)(x);
    return last_ ? y : dt::tanh(y);
  }

 private:
  bool last_;
  nn::ModulePtr fc_;
};

std::pair<dt::Tensor, dt::Tensor> batch(int step, int64_t rows) {
  std::vector<double> x, y;
  for (int64_t b = 0; b < rows; ++b) {
    for (int64_t j = 0; j < D; ++j) x.push_back(std::sin(0.3 * b + 0.7 * j + 0.1 * step));
    for (int64_t j = 0; j < O; ++j) y.push_back(std::cos(0.2 * b + 0.5 * j + 0.3 * step));
  }
  return {dt::from_vector(x, {rows, D}), dt::from_vector(y, {rows, O})};
}

// probe.py's Chain (tok, layers.0-3, norm, output) cut by pipeline_split at `points`: each
// stage's parameter names, against pipeline()'s traced stages.
void split_case(const std::vector<std::string>& points) {
  std::string tag = "split ";
  for (size_t i = 0; i < points.size(); ++i) tag += (i ? "," : "") + points[i];
  try {
    auto chain = std::make_shared<nn::ModuleList>();
    chain->register_module("tok", std::make_shared<nn::Linear>(D, D));
    auto layers = std::make_shared<nn::ModuleList>();
    for (int i = 0; i < 4; ++i) layers->append(std::make_shared<nn::Linear>(D, D));
    chain->register_module("layers", layers);
    chain->register_module("norm", std::make_shared<nn::LayerNorm>(D));
    chain->register_module("output", std::make_shared<nn::Linear>(D, O));
    const auto stages = pp::pipeline_split(chain, points);
    for (size_t i = 0; i < stages.size(); ++i) {
      std::string names;
      for (auto& [n, p] : stages[i]->named_parameters()) names += (names.empty() ? "" : " ") + n;
      rec_value(tag + " stage" + std::to_string(i), names);
    }
  } catch (const std::exception& e) {
    rec_error(tag, e);
  }
}

struct Case {
  std::string tag, name;
  int64_t v, m, rows;
  int steps = 3;
  bool clip = false;
  bool eval = false;       // one eval() (PyTorch's schedule.eval) instead of the steps
  bool eval_loss = false;  // eval with the loss function and the target
  int64_t dp = 1;    // > 1: a (pp, dp) mesh, each stage fully_shard-ed over dp (probe.py's run)
  bool ddp = false;  // replicate instead of fully_shard (PyTorch: DistributedDataParallel)
};

std::string list(const std::vector<double>& v) {
  std::string s = "[";
  for (double x : v) s += (s.size() > 1 ? "," : "") + num(x);
  return s + "]";
}

void run(const Case& c) {
  const int64_t P = W / c.dp, n = P * c.v;
  const auto mesh = c.dp > 1 ? dt::init_device_mesh(dt::kCPU, {P, c.dp}, {"pp", "dp"})
                             : dt::init_device_mesh(dt::kCPU, {W}, {"pp"});
  const int64_t pr = mesh.get_local_rank("pp"), dr = c.dp > 1 ? mesh.get_local_rank("dp") : 0;
  std::map<int64_t, std::shared_ptr<Stage>> mods;
  std::vector<std::shared_ptr<pp::PipelineStage>> stages;
  for (int64_t s = pr; s < n; s += P) {
    mods[s] = std::make_shared<Stage>(s, n);
    stages.push_back(std::make_shared<pp::PipelineStage>(mods[s], s, n, mesh));
    if (c.dp > 1) {
      stages.back()->set_data_parallel(c.ddp ? dt::replicate(*mods[s], mesh["dp"])
                                             : dt::fully_shard(*mods[s], mesh["dp"]));
    }
  }
  pp::LossFn loss = [](const DTensor& o, const DTensor& t) { return dt::mse_loss(o, t); };
  auto sched = pp::make_schedule(c.name, stages, c.m, c.eval && !c.eval_loss ? nullptr : loss);
  sched->set_return_outputs(true);
  std::string order;
  for (const pp::Action& a : sched->order()[static_cast<size_t>(pr)])
    order += (order.empty() ? "" : " ") + a.str(true);
  rec_value(c.tag + " order", order);
  std::vector<DTensor> params;
  for (auto& [s, m] : mods)
    for (const DTensor& p : m->parameters()) params.push_back(p);
  dt::optim::SGD opt(params, dt::optim::SGDOptions(0.1));
  const bool has_last = mods.count(n - 1) > 0;
  auto each_param = [&](const std::string& what, bool grad) {
    for (auto& [s, m] : mods)
      for (auto& [pn, p] : m->named_parameters())
        rec(c.tag + what + " s" + std::to_string(s) + "." + pn,
            nn::local_dtensor((grad ? p.grad() : p).full_tensor()), true);
  };
  for (int step = 0; step < c.steps; ++step) {
    const std::string st = " step" + std::to_string(step);
    auto [bx, by] = batch(step, c.rows);
    const dt::Tensor x = bx.narrow(0, dr * c.rows / c.dp, c.rows / c.dp);
    const dt::Tensor y = by.narrow(0, dr * c.rows / c.dp, c.rows / c.dp);
    if (c.eval) {
      const DTensor out =
          sched->eval(nn::local_dtensor(x), c.eval_loss ? nn::local_dtensor(y) : DTensor());
      if (!has_last) continue;
      rec(c.tag + st + " eval output", out);
      if (c.eval_loss)
        entry("\"case\":" + quoted(c.tag + st + " eval losses") +
              ",\"value\":" + list(sched->losses()));
      continue;
    }
    opt.zero_grad();
    const double mean = sched->step(nn::local_dtensor(x), nn::local_dtensor(y));
    if (has_last) {
      rec_num(c.tag + st + " mean loss", mean);
      entry("\"case\":" + quoted(c.tag + st + " losses") + ",\"value\":" + list(sched->losses()));
      rec(c.tag + st + " output", sched->output());
    }
    each_param(st + " grad", true);
    if (c.clip) {
      rec_num(c.tag + st + " clip total_norm",
              pp::clip_grad_norm_(params, 0.05, stages[0]->pp_group()));
      each_param(st + " clipped grad", true);
    }
    opt.step();
    each_param(st + " param", false);
  }
}
}  // namespace

int main(int argc, char** argv) {
  dt::Runtime rt(&argc, &argv);
  R = dt::world_rank();
  W = dt::world_size();
  if (R == 0) {
    for (const auto& points : std::vector<std::vector<std::string>>{
             {"layers.2"}, {"layers.1", "norm"}, {"layers.3"}, {"layers"}, {"output"}})
      split_case(points);
  }
  std::vector<Case> cases;
  for (auto [name, v] : {std::pair{"GPipe", 1}, {"1F1B", 1}, {"Interleaved1F1B", 2}}) {
    for (int64_t m : {1, 2, 3, 4, 8})
      cases.push_back({std::string(name) + "_m" + std::to_string(m), name, v, m, m == 3 ? 6 : 8});
  }
  cases.push_back({"Interleaved1F1B_v1_m4", "Interleaved1F1B", 1, 4, 8});
  cases.push_back({"Interleaved1F1B_m6", "Interleaved1F1B", 2, 6, 12});
  cases.push_back({"1F1B_m4_clip", "1F1B", 1, 4, 8, 3, true});
  cases.push_back({"Interleaved1F1B_m4_clip", "Interleaved1F1B", 2, 4, 8, 3, true});
  for (auto [name, v] : {std::pair{"GPipe", 1}, {"1F1B", 1}, {"Interleaved1F1B", 2}}) {
    if (W == 4) {
      cases.push_back(
          {std::string(name) + "_m2_pp2xdp2", name, v, 2, 8, 3, false, false, false, 2});
      cases.push_back(
          {std::string(name) + "_m2_pp2xdp2_ddp", name, v, 2, 8, 3, false, false, false, 2, true});
    }
  }
  cases.push_back({"GPipe_m4_eval", "GPipe", 1, 4, 8, 1, false, true});
  cases.push_back({"1F1B_m4_eval", "1F1B", 1, 4, 8, 1, false, true});
  cases.push_back({"Interleaved1F1B_m4_eval", "Interleaved1F1B", 2, 4, 8, 1, false, true});
  cases.push_back({"1F1B_m4_eval_loss", "1F1B", 1, 4, 8, 1, false, true, true});
  cases.push_back({"GPipe_m2_rows7", "GPipe", 1, 2, 7});
  for (const Case& c : cases) {
    try {
      run(c);
    } catch (const std::exception& e) {
      rec_error(c.tag, e);
    }
  }
  write("dt_pp_w" + std::to_string(W) + "_r" + std::to_string(R) + ".json");
  return 0;
}
