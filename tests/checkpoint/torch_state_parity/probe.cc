// dtensor half of the state-dict / checkpoint side-by-side probe (round 7c); probe.py is the
// PyTorch half and compare.py prints the differences (docs/SEMANTICS.md, round 7c). Built by
// the target torch_state_probe (tests/checkpoint/CMakeLists.txt, not run by ctest); in one
// directory: mpirun -np 1 build/tests/checkpoint/torch_state_probe, /root/venv/bin/python
// probe.py, python3 compare.py. Writes dt_state.json. Each case runs 6 steps uninterrupted
// ('whole'), and 3 steps, save_training_state with the scheduler, a fresh model, optimizer
// (7 times the learning rate) and scheduler loaded with load_training_state, 3 more steps
// ('resumed'); 'resumed_mem' resumes through Optimizer / LRScheduler::state_dict in memory.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dtensor/checkpoint/checkpoint.h"
#include "dtensor/checkpoint/train_state.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/nn/module.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/optim/lr_scheduler.h"
#include "dtensor/optim/optimizer.h"
#include "dtensor/tensor/creation.h"
#include "tests/parallel/torch_dp_parity/json_out.h"

namespace dt = dtensor;
namespace ck = dtensor::checkpoint;
namespace optim = dtensor::optim;
using dt::DTensor;
using probe_json::rec_error;

namespace {

void rec(const std::string& name, const std::vector<double>& v) {
  std::string vals = "[";
  for (double x : v) vals += (vals.size() > 1 ? "," : "") + probe_json::num(x);
  probe_json::entry("\"case\":" + probe_json::quoted(name) + ",\"value\":" + vals + "]");
}
void rec(const std::string& name, double v) {
  rec(name, std::vector<double>{v});
}
void rec(const std::string& name, const DTensor& t) {
  rec(name, t.defined() ? dt::cast(t.full_tensor().contiguous(), dt::kFloat64).to_vector<double>()
                        : std::vector<double>{});
}
void rec_names(const std::string& name, std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  std::string vals = "[";
  for (const auto& n : names) vals += (vals.size() > 1 ? "," : "") + probe_json::quoted(n);
  probe_json::entry("\"case\":" + probe_json::quoted(name) + ",\"value\":" + vals + "]");
}

DTensor local(std::vector<double> v, dt::Shape shape) {
  return dt::local_dtensor(dt::from_vector<double>(v, shape));
}

// probe.py's Net: loss_t = sum((tanh(w * x_t) + b - y_t)^2), plus sum(u^2 x_t[0]) from step 3.
// The layout of a resharding run (main's "save" / "load" modes): the mesh and the placements of
// w, b and u; none: local tensors.
struct Layout {
  std::optional<dt::DeviceMesh> mesh;
  std::vector<dt::Placement> w, b, u;
};
Layout g_layout;

DTensor laid_out(std::vector<double> v, dt::Shape shape, const std::vector<dt::Placement>& pl) {
  if (!g_layout.mesh) return local(std::move(v), shape);
  return dt::distribute_tensor(dt::from_vector<double>(v, shape), *g_layout.mesh, pl);
}

struct Net : dt::nn::Module {
  std::string type_name() const override { return "Net"; }
  Net() {
    std::vector<double> w, b, u;
    for (int k = 0; k < 12; ++k) w.push_back(0.3 * std::sin(0.37 * k + 0.2));
    for (int k = 0; k < 3; ++k) b.push_back(0.1 * (k + 1));
    for (int k = 0; k < 3; ++k) u.push_back(0.5 - 0.2 * k);
    register_parameter("w", laid_out(w, {4, 3}, g_layout.w));
    register_parameter("b", laid_out(b, {3}, g_layout.b));
    register_parameter("u", laid_out(u, {3}, g_layout.u));
  }
  DTensor param(const std::string& n) const {
    for (const auto& [name, p] : named_parameters()) {
      if (name == n) return p;
    }
    return DTensor();
  }
  DTensor loss(int t) const {
    std::vector<double> x, y, x0;
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 3; ++j) {
        x.push_back(std::sin(0.3 * i + 0.7 * j + 0.5 * t));
        y.push_back(std::cos(0.2 * i - 0.4 * j + 0.3 * t));
        if (i == 0) x0.push_back(x.back());
      }
    }
    const std::vector<dt::Placement> rep(g_layout.mesh ? 1 : 0, dt::Replicate());
    const DTensor h =
        dt::sub(dt::add(dt::tanh(dt::mul(param("w"), laid_out(x, {4, 3}, rep))), param("b")),
                laid_out(y, {4, 3}, rep));
    DTensor l = dt::sum(dt::square(h));
    if (t >= 3)
      l = dt::add(l, dt::sum(dt::mul(dt::mul(param("u"), param("u")), laid_out(x0, {3}, rep))));
    return l;
  }
};

const double kLr[] = {0.01, 0.05};  // adamw, sgd

std::unique_ptr<optim::Optimizer> make_opt(bool adamw, std::vector<DTensor> ps, double lr) {
  if (adamw)
    return std::make_unique<optim::AdamW>(std::move(ps), optim::AdamWOptions(lr).weight_decay(0.1));
  return std::make_unique<optim::SGD>(
      std::move(ps), optim::SGDOptions(lr).momentum(0.9).nesterov(true).weight_decay(0.01));
}

std::unique_ptr<optim::LRScheduler> make_sched(const std::string& s, optim::Optimizer& o) {
  if (s == "step") return std::make_unique<optim::StepLR>(o, 2, 0.5);
  if (s == "cosine") return std::make_unique<optim::CosineAnnealingLR>(o, 4, 1e-3);
  if (s == "linear") return std::make_unique<optim::LinearLR>(o, 0.25, 1.0, 3);
  if (s == "lambda")
    return std::make_unique<optim::LambdaLR>(o, [](int64_t e) { return std::pow(0.9, e); });
  if (s == "sequential") {
    std::vector<std::unique_ptr<optim::LRScheduler>> parts;
    parts.push_back(std::make_unique<optim::LinearLR>(o, 0.5, 1.0, 2));
    parts.push_back(std::make_unique<optim::CosineAnnealingLR>(o, 4));
    return std::make_unique<optim::SequentialLR>(o, std::move(parts), std::vector<int64_t>{2});
  }
  return nullptr;
}

struct Setup {
  std::unique_ptr<Net> m = std::make_unique<Net>();
  std::unique_ptr<optim::Optimizer> o;
  std::unique_ptr<optim::LRScheduler> s;
  Setup(bool adamw, const std::string& sched, double lr) {
    o = make_opt(adamw, m->parameters(), lr);
    s = make_sched(sched, *o);
  }
};

void train(const std::string& c, Setup& x, int from, int to, double set_lr) {
  for (int t = from; t < to; ++t) {
    if (set_lr > 0 && t == 3) x.o->set_lr(set_lr);
    x.o->zero_grad();
    const DTensor loss = x.m->loss(t);
    loss.backward();
    rec(c + "/step" + std::to_string(t) + "/lr", x.o->lr());
    x.o->step();
    if (x.s) x.s->step();
    rec(c + "/step" + std::to_string(t) + "/loss", loss);
    for (const auto& [n, p] : x.m->named_parameters())
      rec(c + "/step" + std::to_string(t) + "/" + n, p);
  }
}

void final_state(const std::string& c, bool adamw, const Setup& x) {
  std::map<std::string, DTensor> sd;
  for (const auto& [n, t] : x.o->state_dict()) sd[n] = t;
  const auto names = x.m->named_parameters();
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string p = c + "/final/state/" + names[i].first + "/", k = std::to_string(i) + ".";
    // PyTorch's SGD keeps no per-parameter step; its "step" entry is absent (-1 here).
    rec(p + "step", adamw && sd.contains(k + "step") ? sd[k + "step"] : local({-1.0}, {1}));
    for (const char* slot : adamw ? std::vector<const char*>{"exp_avg", "exp_avg_sq"}
                                  : std::vector<const char*>{"momentum_buffer"})
      rec(p + slot, sd.contains(k + slot) ? sd[k + slot] : DTensor());
  }
  rec(c + "/final/lr", x.o->lr());
  rec(c + "/final/initial_lr", x.o->initial_lr().value_or(-1.0));
  if (x.s) {
    rec(c + "/final/sched/last_epoch", static_cast<double>(x.s->last_epoch()));
    rec(c + "/final/sched/last_lr", x.s->get_last_lr());
    rec(c + "/final/sched/base_lr", x.s->base_lr());
  }
}

template <typename F>
void try_rec(const std::string& c, F&& f) {
  try {
    f();
    probe_json::rec_value(c, "ok");
  } catch (const std::exception& e) {
    rec_error(c, e);
  }
}

}  // namespace

// Resume on another world size and layout: "save DIR" (2 ranks: w Shard(0), b Shard(0), u
// Replicate) runs 3 steps of AdamW and SGD with the SequentialLR and saves; "load DIR" (4
// ranks: w Shard(1), b Replicate, u Shard(0)) loads into a fresh model, optimizer (7x lr) and
// scheduler and runs steps 3 to 5, recorded as the 'resumed' cases in dt_state_reshard.json
// (compare.py reshard).
int reshard(const std::string& mode, const std::string& dir) {
  const int64_t w = dt::world_size();
  g_layout.mesh = dt::init_device_mesh(dt::kCPU, {w});
  const bool save = mode == "save";
  g_layout.w = {save ? dt::Placement(dt::Shard(0)) : dt::Placement(dt::Shard(1))};
  g_layout.b = {save ? dt::Placement(dt::Shard(0)) : dt::Placement(dt::Replicate())};
  g_layout.u = {save ? dt::Placement(dt::Replicate()) : dt::Placement(dt::Shard(0))};
  for (const bool adamw : {true, false}) {
    const std::string c = std::string(adamw ? "adamw" : "sgd") + "/sequential/resumed";
    const double lr = kLr[adamw ? 0 : 1];
    const std::string d = dir + (adamw ? "_adamw" : "_sgd");
    try {
      if (save) {
        Setup a(adamw, "sequential", lr);
        train(c, a, 0, 3, 0.0);
        ck::save_training_state(a.m.get(), a.o.get(), a.s.get(), nullptr, d);
      } else {
        Setup b(adamw, "sequential", 7 * lr);
        ck::load_training_state(b.m.get(), b.o.get(), b.s.get(), nullptr, d);
        train(c, b, 3, 6, 0.0);
        final_state(c, adamw, b);
      }
    } catch (const std::exception& e) {
      rec_error(c, e);
    }
  }
  if (dt::world_rank() == 0) probe_json::write("dt_state_reshard.json");
  return 0;
}

int main(int argc, char** argv) {
  dt::Runtime rt(&argc, &argv);
  if (argc == 3) return reshard(argv[1], argv[2]);
  for (const bool adamw : {true, false}) {
    const std::string on = adamw ? "adamw" : "sgd";
    const double lr = kLr[adamw ? 0 : 1];
    for (const std::string sn : {"none", "step", "cosine", "linear", "lambda", "sequential"}) {
      std::vector<std::pair<std::string, double>> variants = {{"", 0.0}};
      if (sn == "none") variants.emplace_back("setlr", 0.003);
      for (const auto& [suffix, set_lr] : variants) {
        const std::string c = on + "/" + sn + (suffix.empty() ? "" : "/" + suffix);
        try {
          Setup whole(adamw, sn, lr);
          train(c + "/whole", whole, 0, 6, set_lr);
          final_state(c + "/whole", adamw, whole);
          Setup a(adamw, sn, lr);
          train(c + "/resumed", a, 0, 3, set_lr);
          std::vector<std::string> keys;
          for (const auto& [n, t] : a.o->state_dict()) {
            if (n.find('.') != std::string::npos && !n.starts_with("param_groups."))
              keys.push_back(n.substr(0, n.find('.')));
          }
          std::sort(keys.begin(), keys.end());
          keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
          rec_names(c + "/saved/state_keys", keys);
          const std::string dir = "ckpt_state_probe";
          ck::save_training_state(a.m.get(), a.o.get(), a.s.get(), nullptr, dir);
          const auto opt_sd = a.o->state_dict();
          const auto sched_sd = a.s ? a.s->state_dict() : decltype(a.s->state_dict()){};
          Setup b(adamw, sn, 7 * lr);
          ck::load_training_state(b.m.get(), b.o.get(), b.s.get(), nullptr, dir);
          rec(c + "/loaded/lr", b.o->lr());
          train(c + "/resumed", b, 3, 6, set_lr);
          final_state(c + "/resumed", adamw, b);
          // The same resume in memory (model parameters copied, states through state_dict).
          Setup m(adamw, sn, 7 * lr);
          const auto pa = a.m->named_parameters(), pm = m.m->named_parameters();
          for (size_t i = 0; i < pa.size(); ++i)
            dt::Tensor(pm[i].second.to_local()).copy_(pa[i].second.to_local());
          m.o->load_state_dict(opt_sd);
          if (m.s) m.s->load_state_dict(sched_sd);
          train(c + "/resumed_mem", m, 3, 6, set_lr);
          final_state(c + "/resumed_mem", adamw, m);
        } catch (const std::exception& e) {
          rec_error(c, e);
        }
      }
    }
  }
  // Key names: training_state's, against DCP's get_model_state_dict / flattened
  // get_optimizer_state_dict and the scheduler's state_dict.
  {
    Setup x(true, "step", 0.01);
    x.m->loss(3).backward();
    x.o->step();
    x.s->step();
    std::vector<std::string> model, opt, sched;
    for (const auto& [n, t] : ck::training_state(x.m.get(), x.o.get(), x.s.get(), nullptr)) {
      if (n.starts_with("model.")) model.push_back(n.substr(6));
      if (n.starts_with("optim.")) opt.push_back(n.substr(6));
      if (n.starts_with("lr_scheduler.")) sched.push_back(n.substr(13));
    }
    rec_names("keys/model", model);
    rec_names("keys/optimizer", opt);
    rec_names("keys/scheduler", sched);
  }
  // Loads with a missing, an extra or a mis-shaped model entry (no strict option: every load
  // is strict about missing and mis-shaped entries and ignores extra ones).
  {
    Net m;
    ck::StateDict sd = ck::training_state(&m, nullptr, nullptr, nullptr);
    ck::StateDict missing, extra = sd, misshaped;
    for (const auto& [n, t] : sd) {
      if (n != "model.u") missing.emplace_back(n, t);
      misshaped.emplace_back(n, n == "model.b" ? local({0, 0, 0, 0}, {4}) : t);
    }
    extra.emplace_back("model.z", local({0, 0}, {2}));
    for (const auto& [name, state] : {std::pair{"missing", missing}, std::pair{"extra", extra},
                                      std::pair{"misshaped", misshaped}}) {
      const std::string dir = std::string("ckpt_state_probe_") + name;
      ck::save(state, dir);
      for (const char* strict : {"strict", "nonstrict"}) {
        try_rec(std::string("errors/model/") + name + "/" + strict, [&] {
          Net n;
          ck::load_training_state(&n, nullptr, nullptr, dir);
        });
      }
    }
  }
  {
    Setup x(true, "none", 0.01);
    x.m->loss(0).backward();
    x.o->step();
    auto sd = x.o->state_dict();
    for (auto& [n, t] : sd) {
      if (n == "1.exp_avg") t = local({0, 0, 0, 0}, {4});
    }
    Setup y(true, "none", 0.01);
    try_rec("errors/optim/misshaped/load", [&] { y.o->load_state_dict(sd); });
    Setup z(false, "none", 0.05);
    try_rec("errors/optim/other_optimizer/load", [&] { z.o->load_state_dict(x.o->state_dict()); });
  }
  probe_json::write("dt_state.json");
  std::printf("wrote dt_state.json\n");
  return 0;
}
