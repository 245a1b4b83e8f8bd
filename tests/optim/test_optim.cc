// Optimizers on one process: SGD (momentum, dampening, Nesterov, weight decay) and AdamW
// (amsgrad too) steps against closed forms computed here in double; Adam, RMSprop, Adagrad and
// AdamW against PyTorch 2.15's values (torch_optim_references.h); state_dict round trips, and
// clip_grad_norm_ (2-norm and inf-norm).
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/autograd/engine.h"
#include "dtensor/compile/compile.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/optim/lr_scheduler.h"
#include "dtensor/optim/optimizer.h"
#include "dtensor/tensor/compare.h"
#include "dtensor/tensor/creation.h"
#include "tests/optim/torch_optim_references.h"

namespace dt = dtensor;
namespace optim = dtensor::optim;
using Catch::Contains;
using dt::DTensor;

namespace {

DTensor param(std::vector<double> v) {
  DTensor p = dt::local_dtensor(dt::from_vector<double>(v, {static_cast<int64_t>(v.size())}));
  p.requires_grad_();
  return p;
}

void set_grad(const DTensor& p, std::vector<double> g) {
  p.set_grad(dt::local_dtensor(dt::from_vector<double>(g, {static_cast<int64_t>(g.size())})));
}

std::vector<double> values(const DTensor& x) {
  return x.to_local().to_vector<double>();
}

// An optimizer by its PyTorch class name, with its default options.
std::unique_ptr<optim::Optimizer> make_optimizer(const std::string& name,
                                                 std::vector<DTensor> params) {
  if (name == "Adam") return std::make_unique<optim::Adam>(std::move(params));
  if (name == "AdamW") return std::make_unique<optim::AdamW>(std::move(params));
  if (name == "RMSprop") return std::make_unique<optim::RMSprop>(std::move(params));
  if (name == "Adagrad") return std::make_unique<optim::Adagrad>(std::move(params));
  if (name == "SGD") return std::make_unique<optim::SGD>(std::move(params), optim::SGDOptions(0.1));
  FAIL("no optimizer " << name);
  return nullptr;
}

// The value of state_dict entry `k` (a 1-element float64, a hyper-parameter).
double entry(const std::vector<std::pair<std::string, DTensor>>& sd, const std::string& k) {
  for (const auto& [name, t] : sd) {
    if (name == k) return t.to_local().to_vector<double>()[0];
  }
  FAIL("no entry " << k);
  return 0.0;
}

// `sd` with a hyper-parameter entry `k` = v appended (it wins over an entry of that name).
std::vector<std::pair<std::string, DTensor>> with_entry(
    std::vector<std::pair<std::string, DTensor>> sd, const std::string& k, double v) {
  sd.emplace_back(k, dt::local_dtensor(dt::from_vector<double>({v}, {1})));
  return sd;
}

// |got - want| <= tol max(1, |want|), elementwise.
void check_close(const std::vector<double>& got, const std::vector<double>& want,
                 double tol = 1e-12) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": " << got[i] << " vs " << want[i]);
    CHECK(std::abs(got[i] - want[i]) <= tol * std::max(1.0, std::abs(want[i])));
  }
}

}  // namespace

TEST_CASE("SGD matches PyTorch's formula step by step") {
  for (const bool nesterov : {false, true}) {
    const double lr = 0.1, mom = 0.9, damp = nesterov ? 0.0 : 0.25, wd = 0.01;
    DTensor p = param({1.0, -2.0, 0.5});
    optim::SGD opt(
        {p},
        optim::SGDOptions(lr).momentum(mom).dampening(damp).weight_decay(wd).nesterov(nesterov));
    std::vector<double> w = {1.0, -2.0, 0.5}, buf(3, 0.0);
    const std::vector<std::vector<double>> grads = {
        {0.5, 1.0, -1.0}, {0.2, -0.3, 0.4}, {-1.0, 0.0, 2.0}};
    for (size_t step = 0; step < grads.size(); ++step) {
      set_grad(p, grads[step]);
      opt.step();
      for (size_t i = 0; i < 3; ++i) {
        double d = grads[step][i] + wd * w[i];
        buf[i] = step == 0 ? d : mom * buf[i] + (1 - damp) * d;
        d = nesterov ? d + mom * buf[i] : buf[i];
        w[i] -= lr * d;
      }
      const std::vector<double> got = values(p);
      for (size_t i = 0; i < 3; ++i) CHECK(got[i] == Approx(w[i]).epsilon(1e-14));
    }
  }
}

TEST_CASE("AdamW matches PyTorch's formula step by step (and amsgrad)") {
  for (const bool amsgrad : {false, true}) {
    const double lr = 0.01, b1 = 0.8, b2 = 0.95, eps = 1e-6, wd = 0.1;
    DTensor p = param({1.0, -2.0});
    optim::AdamW opt(
        {p},
        optim::AdamWOptions(lr).beta1(b1).beta2(b2).eps(eps).weight_decay(wd).amsgrad(amsgrad));
    std::vector<double> w = {1.0, -2.0}, m(2, 0), v(2, 0), vmax(2, 0);
    const std::vector<std::vector<double>> grads = {{0.5, -1.0}, {0.1, 2.0}, {-0.4, 0.01}};
    for (size_t step = 0; step < grads.size(); ++step) {
      set_grad(p, grads[step]);
      opt.step();
      const double t = static_cast<double>(step + 1);
      for (size_t i = 0; i < 2; ++i) {
        const double g = grads[step][i];
        w[i] *= 1 - lr * wd;
        m[i] = b1 * m[i] + (1 - b1) * g;
        v[i] = b2 * v[i] + (1 - b2) * g * g;
        vmax[i] = std::max(vmax[i], v[i]);
        const double denom =
            std::sqrt(amsgrad ? vmax[i] : v[i]) / std::sqrt(1 - std::pow(b2, t)) + eps;
        w[i] -= lr / (1 - std::pow(b1, t)) * m[i] / denom;
      }
      const std::vector<double> got = values(p);
      for (size_t i = 0; i < 2; ++i) CHECK(got[i] == Approx(w[i]).epsilon(1e-12));
    }
    CHECK(opt.step_count() == 3);
  }
}

// PyTorch 2.15's Adam, RMSprop, Adagrad and AdamW on the same losses, option by option
// (tests/optim/torch_optim_references.py): the parameters after each step, b without a gradient
// at step 1 (skipped: its own step count, not the number of step() calls, drives Adam's bias
// corrections and Adagrad's lr_decay), the final states under PyTorch's names, StepLR on some;
// a fresh optimizer (default options) loaded with the state after step 2 carries on alike.
TEST_CASE("Adam, RMSprop and Adagrad match PyTorch 2.15 option by option") {
  const std::vector<double> w = {1.5, -0.5}, c = {1.0, 2.0, 0.5, 0.25};
  auto set_grads = [&](const DTensor& a, const DTensor& b, size_t step) {
    std::vector<double> ga, gb;
    for (double v : values(a)) ga.push_back(c[step] * 3 * v * v);
    set_grad(a, ga);
    if (step == 1) return;
    const std::vector<double> vb = values(b);
    for (size_t i = 0; i < 2; ++i) gb.push_back(c[step] * 2 * w[i] * vb[i]);
    set_grad(b, gb);
  };
  for (const dt::test::TorchOptimReference& ref : dt::test::torch_optim_references()) {
    INFO(ref.optimizer << " " << ref.label);
    DTensor a = param({1.0, -2.0, 0.5}), b = param({3.0, -1.0});
    std::unique_ptr<optim::Optimizer> opt = make_optimizer(ref.optimizer, {a, b});
    opt->set_hyper_parameters(ref.hyper_parameters);
    std::unique_ptr<optim::StepLR> sched;
    if (ref.step_lr) sched = std::make_unique<optim::StepLR>(*opt, 2, 0.5);
    DTensor ra, rb;  // resumed from the state after step 2 (no scheduler)
    std::unique_ptr<optim::Optimizer> resumed;
    for (size_t step = 0; step < ref.a.size(); ++step) {
      INFO("step " << step);
      opt->zero_grad();
      set_grads(a, b, step);
      opt->step();
      if (sched) sched->step();
      check_close(values(a), ref.a[step]);
      check_close(values(b), ref.b[step]);
      if (resumed) {
        resumed->zero_grad();
        set_grads(ra, rb, step);
        resumed->step();
        CHECK(values(ra) == values(a));
        CHECK(values(rb) == values(b));
      }
      if (step == 1 && !sched) {
        ra = param(values(a));
        rb = param(values(b));
        resumed = make_optimizer(ref.optimizer, {ra, rb});
        resumed->load_state_dict(opt->state_dict());
        if (ref.optimizer == std::string("AdamW")) {
          // As PyTorch's AdamW (__setstate__), the load sets decoupled_weight_decay back to 1;
          // the case's own value is set again.
          CHECK(entry(resumed->state_dict(), "param_groups.decoupled_weight_decay") == 1.0);
          resumed->set_hyper_parameters(
              {{"decoupled_weight_decay",
                entry(opt->state_dict(), "param_groups.decoupled_weight_decay")}});
        }
        CHECK(resumed->hyper_parameters() == opt->hyper_parameters());
      }
    }
    // The per-parameter states: PyTorch's, no more, no fewer.
    std::map<std::string, std::vector<double>> got, want(ref.states.begin(), ref.states.end());
    for (const auto& [name, t] : opt->state_dict()) {
      if (name == "step" || name.starts_with("param_groups.")) continue;
      got[name] =
          t.dtype() == dt::kInt64
              ? std::vector<double>{static_cast<double>(t.to_local().to_vector<int64_t>()[0])}
              : values(t);
    }
    REQUIRE(got.size() == want.size());
    for (const auto& [name, v] : want) {
      INFO(name);
      REQUIRE(got.count(name) == 1);
      check_close(got[name], v);
    }
  }
}

// PyTorch's defaults, hyper-parameter names (its param_group keys, betas as beta1 / beta2) and
// refusals ("Invalid learning rate: -1", ... in PyTorch 2.15, tests/optim/
// torch_optim_references.py).
TEST_CASE("Adam, RMSprop and Adagrad take PyTorch's defaults and refuse its invalid values") {
  DTensor p = param({1.0});
  const optim::Adam adam({p});
  CHECK(adam.hyper_parameters() ==
        std::vector<std::pair<std::string, double>>{{"lr", 1e-3},
                                                    {"beta1", 0.9},
                                                    {"beta2", 0.999},
                                                    {"eps", 1e-8},
                                                    {"weight_decay", 0.0},
                                                    {"amsgrad", 0.0},
                                                    {"maximize", 0.0},
                                                    {"decoupled_weight_decay", 0.0}});
  const optim::RMSprop rmsprop({p});
  CHECK(rmsprop.hyper_parameters() ==
        std::vector<std::pair<std::string, double>>{{"lr", 1e-2},
                                                    {"alpha", 0.99},
                                                    {"eps", 1e-8},
                                                    {"weight_decay", 0.0},
                                                    {"momentum", 0.0},
                                                    {"centered", 0.0},
                                                    {"maximize", 0.0}});
  const optim::Adagrad adagrad({p});
  CHECK(adagrad.hyper_parameters() ==
        std::vector<std::pair<std::string, double>>{{"lr", 1e-2},
                                                    {"lr_decay", 0.0},
                                                    {"weight_decay", 0.0},
                                                    {"initial_accumulator_value", 0.0},
                                                    {"eps", 1e-10},
                                                    {"maximize", 0.0}});
  REQUIRE_THROWS_WITH(optim::Adam({p}, optim::AdamOptions(-1)),
                      Contains("[Adam] invalid lr: -1 (expected >= 0)"));
  REQUIRE_THROWS_WITH(optim::Adam({p}, optim::AdamOptions().eps(-1e-8)),
                      Contains("[Adam] invalid eps"));
  REQUIRE_THROWS_WITH(optim::Adam({p}, optim::AdamOptions().beta1(1.0)),
                      Contains("[Adam] invalid beta1: 1 (expected 0 <= beta1 < 1)"));
  REQUIRE_THROWS_WITH(optim::Adam({p}, optim::AdamOptions().beta2(-0.1)),
                      Contains("[Adam] invalid beta2"));
  REQUIRE_THROWS_WITH(optim::Adam({p}, optim::AdamOptions().weight_decay(-0.1)),
                      Contains("[Adam] invalid weight_decay"));
  REQUIRE_THROWS_WITH(optim::Adam({p}, optim::AdamOptions(std::nan(""))),
                      Contains("[Adam] invalid lr: nan"));
  REQUIRE_THROWS_WITH(optim::RMSprop({p}, optim::RMSpropOptions(-0.1)),
                      Contains("[RMSprop] invalid lr"));
  REQUIRE_THROWS_WITH(optim::RMSprop({p}, optim::RMSpropOptions().alpha(-0.5)),
                      Contains("[RMSprop] invalid alpha: -0.5"));
  REQUIRE_THROWS_WITH(optim::RMSprop({p}, optim::RMSpropOptions().momentum(-0.5)),
                      Contains("[RMSprop] invalid momentum"));
  REQUIRE_THROWS_WITH(optim::RMSprop({p}, optim::RMSpropOptions().eps(-1)),
                      Contains("[RMSprop] invalid eps"));
  REQUIRE_THROWS_WITH(optim::RMSprop({p}, optim::RMSpropOptions().weight_decay(-1)),
                      Contains("[RMSprop] invalid weight_decay"));
  REQUIRE_THROWS_WITH(optim::Adagrad({p}, optim::AdagradOptions().lr_decay(-0.1)),
                      Contains("[Adagrad] invalid lr_decay: -0.1"));
  REQUIRE_THROWS_WITH(optim::Adagrad({p}, optim::AdagradOptions().initial_accumulator_value(-1)),
                      Contains("[Adagrad] invalid initial_accumulator_value"));
  REQUIRE_THROWS_WITH(optim::Adagrad({p}, optim::AdagradOptions().eps(-1)),
                      Contains("[Adagrad] invalid eps"));
  REQUIRE_THROWS_WITH(optim::Adagrad({p}, optim::AdagradOptions(-1)),
                      Contains("[Adagrad] invalid lr"));
  REQUIRE_THROWS_WITH(optim::Adagrad({p}, optim::AdagradOptions().weight_decay(-1)),
                      Contains("[Adagrad] invalid weight_decay"));
  // set_hyper_parameters checks alike, and changes nothing when it refuses.
  optim::RMSprop r({p}, optim::RMSpropOptions(0.5).momentum(0.9));
  REQUIRE_THROWS_WITH(r.set_hyper_parameters({{"momentum", 0.1}, {"alpha", -1.0}}),
                      Contains("[RMSprop] invalid alpha"));
  REQUIRE_THROWS_WITH(r.set_hyper_parameters({{"betas", 0.1}}),
                      Contains("[RMSprop] has no hyper-parameter 'betas'"));
  REQUIRE_THROWS_WITH(r.set_hyper_parameters({{"centered", 0.5}}),
                      Contains("'centered' is a bool: expected 0 or 1"));
  CHECK(r.options().momentum() == 0.9);
  // Another optimizer's state is refused by name.
  optim::Adagrad g({p});
  set_grad(p, {0.5});
  g.step();
  REQUIRE_THROWS_WITH(
      r.load_state_dict(g.state_dict()),
      Contains("[RMSprop] load_state_dict: entry '0.sum' names no state of RMSprop"));
  // Adam and AdamW share their states. As PyTorch 2.15's, AdamW's group holds
  // decoupled_weight_decay 1: its state loaded into an L2 Adam makes that Adam decoupled (a
  // resumed AdamW run continues as AdamW), and an L2 Adam's state loaded into AdamW is accepted
  // with AdamW decoupled again (PyTorch's AdamW sets it back to True at every load). Set to 0,
  // AdamW's flag is 0 in its state until a load (round 9).
  optim::AdamW adamw({p});
  adamw.step();
  CHECK(entry(adamw.state_dict(), "param_groups.decoupled_weight_decay") == 1.0);
  optim::Adam l2({p}, optim::AdamOptions(0.5).decoupled_weight_decay(false));
  l2.load_state_dict(adamw.state_dict());
  CHECK(l2.options().lr() == 1e-3);
  CHECK(l2.options().weight_decay() == 1e-2);
  CHECK(l2.options().decoupled_weight_decay());
  optim::Adam l2_again({p}, optim::AdamOptions(0.5).weight_decay(0.3));
  optim::AdamW from_l2({p}, optim::AdamWOptions(0.1));
  from_l2.load_state_dict(l2_again.state_dict());
  CHECK(from_l2.options().lr() == 0.5);
  CHECK(from_l2.options().weight_decay() == 0.3);
  CHECK(entry(from_l2.state_dict(), "param_groups.decoupled_weight_decay") == 1.0);
  REQUIRE_THROWS_WITH(from_l2.set_hyper_parameters({{"decoupled_weight_decay", 0.5}}),
                      Contains("'decoupled_weight_decay' is a bool: expected 0 or 1"));
  from_l2.set_hyper_parameters({{"decoupled_weight_decay", 0.0}});
  CHECK_FALSE(from_l2.options().decoupled_weight_decay());
  const auto l2_state = from_l2.state_dict();
  CHECK(entry(l2_state, "param_groups.decoupled_weight_decay") == 0.0);
  from_l2.load_state_dict(l2_state);
  CHECK(from_l2.options().decoupled_weight_decay());
  optim::Adam adam_from_l2({p});
  adam_from_l2.load_state_dict(l2_state);
  CHECK_FALSE(adam_from_l2.options().decoupled_weight_decay());
}

TEST_CASE("optimizers skip parameters without gradients and bump the version") {
  DTensor a = param({1.0}), b = param({2.0});
  optim::SGD opt({a, b}, optim::SGDOptions(1.0));
  set_grad(a, {0.5});
  const uint32_t before = a.to_local().storage().version();
  opt.step();
  CHECK(values(a) == std::vector<double>{0.5});
  CHECK(values(b) == std::vector<double>{2.0});
  CHECK(a.to_local().storage().version() == before + 1);
  opt.zero_grad();
  CHECK_FALSE(a.grad().defined());
}

// PyTorch 2.15 (tests/optim/torch_optim_references.py): AdamW(lr=0.1) over a and b, where b
// has no gradient at the first step. b's first update uses its own step count (1), not the
// number of step() calls (2): its bias corrections start over.
TEST_CASE("AdamW counts each parameter's own steps, as PyTorch's state['step']") {
  DTensor a = param({1.0, 2.0}), b = param({3.0, -1.0});
  optim::AdamW opt({a, b}, optim::AdamWOptions(0.1));
  const std::vector<std::vector<double>> want_a = {{0.8990000005, 1.89800000025},
                                                   {0.7985190271685215, 1.7962725886447977},
                                                   {0.6989111831582322, 1.6949445143849768}};
  const std::vector<std::vector<double>> want_b = {{3.0, -1.0},
                                                   {2.897000000037037, -1.0989999996666666},
                                                   {2.794345872217406, -1.1979495062772352}};
  for (size_t step = 0; step < 3; ++step) {
    opt.zero_grad();
    const std::vector<double> wa = values(a), wb = values(b);
    set_grad(a, {2 * wa[0], 2 * wa[1]});                                 // d/da sum(a^2)
    if (step >= 1) set_grad(b, {3 * wb[0] * wb[0], 3 * wb[1] * wb[1]});  // d/db sum(b^3)
    opt.step();
    for (size_t i = 0; i < 2; ++i) {
      CHECK(values(a)[i] == Approx(want_a[step][i]).epsilon(1e-14));
      CHECK(values(b)[i] == Approx(want_b[step][i]).epsilon(1e-14));
    }
  }
  // PyTorch's state: {0: step 3, 1: step 2}; ours names them "<i>.step".
  std::map<std::string, int64_t> counts;
  for (const auto& [name, t] : opt.state_dict()) {
    if (name.ends_with("step")) counts[name] = t.to_local().to_vector<int64_t>()[0];
  }
  CHECK(counts == std::map<std::string, int64_t>{{"step", 3}, {"0.step", 3}, {"1.step", 2}});
  // Loaded into a fresh optimizer, the counts carry on; a state without them (saved before
  // they existed) gives each parameter that has state the global count.
  DTensor c = param(values(a)), d = param(values(b));
  optim::AdamW loaded({c, d}, optim::AdamWOptions(0.1));
  loaded.load_state_dict(opt.state_dict());
  for (const auto& [x, y] : {std::pair{a, c}, std::pair{b, d}}) {
    set_grad(x, {0.25, -0.5});
    set_grad(y, {0.25, -0.5});
  }
  opt.step();
  loaded.step();
  CHECK(values(c) == values(a));
  CHECK(values(d) == values(b));
  std::vector<std::pair<std::string, DTensor>> old_format;
  for (const auto& [name, t] : opt.state_dict()) {
    if (name == "step" || !name.ends_with("step")) old_format.emplace_back(name, t);
  }
  loaded.load_state_dict(old_format);
  for (const auto& [name, t] : loaded.state_dict()) {
    if (name.ends_with(".step")) CHECK(t.to_local().to_vector<int64_t>()[0] == 4);
  }
}

// A graph recorded before a step reads the parameters the step then overwrites: its backward
// is refused after an eager step and, as well, after a compiled step's replay (the recorded
// update bumps the version when it writes; before, only the eager loop did).
TEST_CASE("an optimizer step replayed by a compiled step bumps the parameters' version") {
  for (const char* kind : {"SGD", "AdamW", "Adam", "RMSprop", "Adagrad"}) {
    INFO(kind);
    DTensor p = param({1.0, -2.0});
    std::unique_ptr<optim::Optimizer> opt = make_optimizer(kind, {p});
    auto train = [&](const dt::DTensorList& in) {
      opt->zero_grad();
      DTensor loss = dt::sum(dt::mul(dt::mul(p, p), in[0]));
      loss.backward();
      opt->step();
      return dt::DTensorList{loss.detach()};
    };
    dt::CompiledStep step = dt::compile(train);
    const DTensor x = dt::local_dtensor(dt::from_vector<double>({0.5, 1.5}, {2}));
    step({x});  // the capture (runs eagerly)
    for (int replay = 0; replay < 2; ++replay) {
      DTensor held = dt::sum(dt::mul(p, p));  // saves p
      const uint32_t before = p.to_local().storage().version();
      step({x});
      CHECK(p.to_local().storage().version() > before);
      REQUIRE_THROWS_WITH(held.backward(), Contains("modified by an in-place op"));
    }
    CHECK(step.captures() == 1);
  }
}

// Adam, AdamW, RMSprop and Adagrad (every state on) replay in a compiled step what the eager step
// computes, bit for bit: hyper-parameters changed between steps (lr, Adam's and AdamW's
// decoupled_weight_decay, Adagrad's lr_decay) are read when the update runs, and the
// per-parameter counts (bias corrections, lr_decay) advance at each replay.
TEST_CASE("Adam, RMSprop and Adagrad in a compiled step replay the eager step") {
  const std::vector<std::pair<std::string, std::vector<std::pair<std::string, double>>>> cases = {
      {"Adam", {{"lr", 0.05}, {"weight_decay", 0.1}, {"amsgrad", 1.0}, {"beta2", 0.9}}},
      {"AdamW", {{"lr", 0.05}, {"weight_decay", 0.1}}},
      {"RMSprop", {{"momentum", 0.9}, {"centered", 1.0}, {"weight_decay", 0.1}}},
      {"Adagrad", {{"lr_decay", 0.3}, {"initial_accumulator_value", 0.2}, {"weight_decay", 0.1}}}};
  for (const auto& [kind, hypers] : cases) {
    INFO(kind);
    auto run = [&](bool compiled) {
      DTensor p = param({1.0, -2.0, 0.25});
      std::unique_ptr<optim::Optimizer> opt = make_optimizer(kind, {p});
      opt->set_hyper_parameters(hypers);
      auto train = [&](const dt::DTensorList& in) {
        opt->zero_grad();
        DTensor loss = dt::sum(dt::mul(dt::mul(dt::mul(p, p), p), in[0]));
        loss.backward();
        opt->step();
        return dt::DTensorList{loss.detach()};
      };
      dt::CompiledStep step = dt::compile(train);
      for (int i = 0; i < 5; ++i) {
        if (i == 3) {
          opt->set_lr(opt->lr() * 0.5);
          if (kind == "Adam") opt->set_hyper_parameters({{"decoupled_weight_decay", 1.0}});
          if (kind == "AdamW") opt->set_hyper_parameters({{"decoupled_weight_decay", 0.0}});
          if (kind == "Adagrad") opt->set_hyper_parameters({{"lr_decay", 1.0}});
        }
        const double scale = 1.0 / (1 + i);
        const DTensor x =
            dt::local_dtensor(dt::from_vector<double>({scale, 2 * scale, -scale}, {3}));
        compiled ? step({x}) : train({x});
      }
      if (compiled) CHECK(step.captures() == 1);
      return std::pair{values(p), opt->state_dict()};
    };
    const auto [eager, eager_state] = run(false);
    const auto [replayed, replayed_state] = run(true);
    CHECK(replayed == eager);
    REQUIRE(replayed_state.size() == eager_state.size());
    for (size_t k = 0; k < eager_state.size(); ++k) {
      INFO(eager_state[k].first);
      CHECK(replayed_state[k].first == eager_state[k].first);
      CHECK(dt::equal(replayed_state[k].second.to_local(), eager_state[k].second.to_local()));
    }
  }
}

// clip_grad_value_ is recorded (run_recorded): a compiled step's replay clamps the new
// gradients, as the eager step does.
TEST_CASE("clip_grad_value_ in a compiled step clamps at every replay") {
  auto run = [](bool compiled) {
    DTensor p = param({1.0, -2.0, 0.25});
    optim::SGD opt({p}, optim::SGDOptions(0.1));
    auto train = [&](const dt::DTensorList& in) {
      opt.zero_grad();
      DTensor loss = dt::sum(dt::mul(dt::mul(p, p), in[0]));
      loss.backward();
      optim::clip_grad_value_({p}, 0.5);
      opt.step();
      return dt::DTensorList{loss.detach()};
    };
    dt::CompiledStep step = dt::compile(train);
    const DTensor x = dt::local_dtensor(dt::from_vector<double>({3.0, 0.5, 1.0}, {3}));
    for (int i = 0; i < 4; ++i) compiled ? step({x}) : train({x});
    if (compiled) CHECK(step.captures() == 1);
    return values(p);
  };
  const std::vector<double> eager = run(false);
  CHECK(run(true) == eager);
  // Without the clamp the first parameter would move by 0.1 * 6 at the first step alone.
  CHECK(eager[0] == Approx(1.0 - 4 * 0.05));
}

TEST_CASE("state_dict round trip continues exactly where it stopped") {
  DTensor p = param({1.0, 2.0}), q = param({1.0, 2.0});
  optim::AdamW a({p}), b({q});
  for (int step = 0; step < 2; ++step) {
    set_grad(p, {0.3, -0.7});
    a.step();
  }
  set_grad(q, {0.3, -0.7});
  b.step();
  b.step();
  // A fresh optimizer loaded with a's state steps like a.
  DTensor r = param(values(p));
  optim::AdamW c({r});
  c.load_state_dict(a.state_dict());
  set_grad(p, {0.1, 0.2});
  set_grad(r, {0.1, 0.2});
  a.step();
  c.step();
  CHECK(values(p) == values(r));
  CHECK(c.step_count() == 3);
  REQUIRE_THROWS_WITH(optim::SGD({p}, optim::SGDOptions(0.1)).load_state_dict({}),
                      Contains("no 'step' entry"));
  // A refused state leaves the optimizer as it was (every entry is checked first), and a
  // malformed name is a dtensor::Error naming it.
  auto bad = a.state_dict();
  for (auto& [name, t] : bad) {
    if (name == "step")
      t = dt::local_dtensor(dt::full({1}, int64_t{7}, dt::TensorOptions(dt::kInt64)));
    if (name == "0.step")
      t = dt::local_dtensor(dt::full({1}, int64_t{7}, dt::TensorOptions(dt::kInt64)));
  }
  bad.emplace_back("0.exp_avg_sq", param({1.0, 2.0, 3.0}));  // the wrong shape
  std::vector<std::pair<std::string, dt::Tensor>> before;    // copies: the entries share storage
  for (const auto& [name, t] : c.state_dict()) before.emplace_back(name, t.to_local().clone());
  REQUIRE_THROWS_WITH(c.load_state_dict(bad), Contains("expected the spec of parameter 0"));
  const auto after = c.state_dict();
  REQUIRE(after.size() == before.size());
  for (size_t k = 0; k < after.size(); ++k) {
    CHECK(after[k].first == before[k].first);
    CHECK(dt::equal(after[k].second.to_local(), before[k].second));
  }
  CHECK(c.step_count() == 3);
  auto misnamed = a.state_dict();
  misnamed.emplace_back(
      "x.step", dt::local_dtensor(dt::full({1}, int64_t{1}, dt::TensorOptions(dt::kInt64))));
  REQUIRE_THROWS_WITH(c.load_state_dict(misnamed), Contains("entry 'x.step' names no parameter"));
}

// PyTorch's optimizer.state_dict()["param_groups"] holds lr and the other hyper-parameters,
// and load_state_dict restores them: the loaded lr wins over the constructor's (round 7c).
// Before, the state held none, so a resumed run silently kept the constructor's options.
TEST_CASE("state_dict holds the hyper-parameters and load_state_dict restores them") {
  DTensor p = param({1.0, -2.0});
  optim::SGD a({p}, optim::SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.01));
  a.set_initial_lr(0.2);
  set_grad(p, {0.5, 0.25});
  a.step();
  const auto sd = a.state_dict();
  CHECK(entry(sd, "param_groups.lr") == 0.1);
  CHECK(entry(sd, "param_groups.momentum") == 0.9);
  CHECK(entry(sd, "param_groups.nesterov") == 1.0);
  CHECK(entry(sd, "param_groups.weight_decay") == 0.01);
  CHECK(entry(sd, "param_groups.initial_lr") == 0.2);
  // A fresh optimizer built with other options takes the loaded ones and steps like a.
  DTensor r = param(values(p));
  optim::SGD c({r}, optim::SGDOptions(0.5));
  c.load_state_dict(sd);
  CHECK(c.options().lr() == 0.1);
  CHECK(c.options().momentum() == 0.9);
  CHECK(c.options().nesterov());
  CHECK(c.options().weight_decay() == 0.01);
  CHECK(c.initial_lr() == 0.2);
  set_grad(p, {-0.5, 1.0});
  set_grad(r, {-0.5, 1.0});
  a.step();
  c.step();
  CHECK(values(r) == values(p));
  // A state without them (saved before they existed) keeps the constructor's options.
  std::vector<std::pair<std::string, DTensor>> old_format;
  for (const auto& [name, t] : sd) {
    if (!name.starts_with("param_groups.")) old_format.emplace_back(name, t);
  }
  DTensor q = param({1.0, -2.0});
  optim::SGD d({q}, optim::SGDOptions(0.5).momentum(0.8));
  d.load_state_dict(old_format);
  CHECK(d.options().lr() == 0.5);
  CHECK(d.options().momentum() == 0.8);
  CHECK(!d.initial_lr());
  // AdamW's: betas as beta1 / beta2, amsgrad as 0 / 1.
  DTensor w = param({1.0}), x = param({1.0});
  optim::AdamW e({w}, optim::AdamWOptions(0.03).beta1(0.8).amsgrad(true).weight_decay(0.1));
  set_grad(w, {0.5});
  e.step();
  optim::AdamW f({x});
  f.load_state_dict(e.state_dict());
  CHECK(f.options().lr() == 0.03);
  CHECK(f.options().beta1() == 0.8);
  CHECK(f.options().beta2() == 0.999);
  CHECK(f.options().amsgrad());
  CHECK(f.options().weight_decay() == 0.1);
  // Refused, with nothing changed: an invalid or unknown hyper-parameter, a bool that is not
  // 0 / 1, another optimizer's state.
  auto with = [&](const std::string& k, double v) { return with_entry(sd, k, v); };
  REQUIRE_THROWS_WITH(d.load_state_dict(with("param_groups.momentum", 0.0)),
                      Contains("[SGD] nesterov needs momentum > 0"));
  REQUIRE_THROWS_WITH(d.load_state_dict(with("param_groups.betas", 0.5)),
                      Contains("[SGD] has no hyper-parameter 'betas'"));
  REQUIRE_THROWS_WITH(d.load_state_dict(with("param_groups.maximize", 0.5)),
                      Contains("'maximize' is a bool: expected 0 or 1"));
  REQUIRE_THROWS_WITH(d.load_state_dict(e.state_dict()),
                      Contains("entry '0.exp_avg' names no state of SGD"));
  CHECK(d.options().lr() == 0.5);
  CHECK(d.options().momentum() == 0.8);
  CHECK(d.step_count() == 1);
}

// check_state_dict checks the hyper-parameters' values as set_hyper_parameters does (before,
// only their names: review R, finding 7), and changes nothing, refused or not.
TEST_CASE("check_state_dict refuses an invalid hyper-parameter value and changes nothing") {
  for (const std::string kind : {"SGD", "Adam", "AdamW", "RMSprop", "Adagrad"}) {
    INFO(kind);
    DTensor p = param({1.0, -2.0});
    auto opt = make_optimizer(kind, {p});
    set_grad(p, {0.5, 0.25});
    opt->step();
    const auto own = opt->hyper_parameters();
    const auto sd = opt->state_dict();
    REQUIRE_THROWS_WITH(opt->check_state_dict(with_entry(sd, "param_groups.lr", -1.0)),
                        Contains("[" + kind + "]") && Contains("lr") && Contains("-1"));
    REQUIRE_THROWS_WITH(opt->check_state_dict(with_entry(sd, "param_groups.maximize", 0.5)),
                        Contains("'maximize' is a bool: expected 0 or 1"));
    REQUIRE_THROWS_WITH(opt->check_state_dict(with_entry(sd, "param_groups.betas", 0.5)),
                        Contains("[" + kind + "] has no hyper-parameter 'betas'"));
    // A valid value passes and is not loaded.
    opt->check_state_dict(with_entry(sd, "param_groups.lr", 0.25));
    CHECK(opt->hyper_parameters() == own);
    CHECK(opt->lr() != 0.25);
    CHECK(opt->step_count() == 1);
  }
}

TEST_CASE("clip_grad_norm_ returns the total norm and scales the gradients") {
  DTensor a = param({3.0, 0.0}), b = param({0.0, 4.0});
  set_grad(a, {3.0, 0.0});
  set_grad(b, {0.0, 4.0});
  CHECK(optim::clip_grad_norm_({a, b}, 1.0) == Approx(5.0));
  CHECK(values(a.grad())[0] == Approx(0.6).epsilon(1e-6));
  CHECK(values(b.grad())[1] == Approx(0.8).epsilon(1e-6));
  set_grad(a, {-7.0, 1.0});
  set_grad(b, {2.0, 0.0});
  CHECK(optim::clip_grad_norm_({a, b}, 100.0, INFINITY) == 7.0);
  CHECK(values(a.grad())[0] == -7.0);  // under max_norm: unchanged
}

// A non-finite gradient: PyTorch's norm is NaN (a NaN anywhere) or inf, and it still scales by
// clamp(max_norm / (norm + 1e-6), max=1): every gradient becomes NaN for a NaN norm; for an
// inf norm the coefficient is 0 (finite entries 0, the infinite one NaN). Expected values from
// torch 2.15's clip_grad_norm_ on the same gradients; error_if_nonfinite raises instead.
TEST_CASE("clip_grad_norm_ with a non-finite gradient scales as PyTorch (NaN propagates)") {
  const double nan = std::nan(""), inf = INFINITY;
  for (const double norm_type : {2.0, 1.0, inf}) {
    for (const double bad : {nan, inf, -inf}) {
      INFO("norm_type " << norm_type << ", bad gradient entry " << bad);
      DTensor a = param({0.0, 0.0}), b = param({0.0, 0.0});
      set_grad(a, {bad, 1.0});
      set_grad(b, {0.0, 4.0});
      const double norm = optim::clip_grad_norm_({a, b}, 1.0, norm_type);
      const std::vector<double> ga = values(a.grad()), gb = values(b.grad());
      CHECK(std::isnan(ga[0]));
      if (std::isnan(bad)) {
        CHECK(std::isnan(norm));
        CHECK(std::isnan(ga[1]));
        CHECK(std::isnan(gb[0]));
        CHECK(std::isnan(gb[1]));
      } else {
        CHECK(norm == inf);
        CHECK(ga[1] == 0.0);
        CHECK(gb[0] == 0.0);
        CHECK(gb[1] == 0.0);
      }
      set_grad(a, {bad, 1.0});
      CHECK_THROWS_WITH(optim::clip_grad_norm_({a, b}, 1.0, norm_type, true),
                        Contains("[clip_grad_norm_]") && Contains("non-finite"));
      CHECK(std::isnan(values(a.grad())[0]) == std::isnan(bad));  // not scaled on error
      CHECK(values(a.grad())[1] == 1.0);
    }
  }
}

TEST_CASE("optimizers refuse what they cannot update") {
  DTensor i = dt::local_dtensor(dt::zeros({2}, dt::kInt64));
  REQUIRE_THROWS_WITH(optim::SGD({i}, optim::SGDOptions(0.1)), Contains("floating"));
  DTensor p = param({1.0});
  REQUIRE_THROWS_WITH(optim::SGD({p}, optim::SGDOptions(0.1).nesterov(true)), Contains("nesterov"));
  // PyTorch 2.15 raises "Invalid momentum value" / "Invalid weight_decay value" for these
  // (tests/optim/torch_optim_references.py); they used to be taken silently.
  REQUIRE_THROWS_WITH(optim::SGD({p}, optim::SGDOptions(0.1).momentum(-0.5)),
                      Contains("momentum must be >= 0"));
  REQUIRE_THROWS_WITH(optim::SGD({p}, optim::SGDOptions(0.1).weight_decay(-0.1)),
                      Contains("weight_decay must be >= 0"));
  REQUIRE_THROWS_WITH(optim::AdamW({p}, optim::AdamWOptions(0.1).weight_decay(-0.1)),
                      Contains("[AdamW] invalid weight_decay: -0.1 (expected >= 0)"));
}

// torch 2.15's clip_grad_value_ on the same gradients (tests/optim/torch_optim_references.py):
// clamped to [-1, 1], NaN kept; a parameter without a gradient skipped (issue 44).
TEST_CASE("clip_grad_value_ clamps every gradient") {
  DTensor a = param({0, 0, 0, 0}), b = param({0, 0, 0, 0}), none = param({1.0});
  set_grad(a, {-3.0, 0.5, 2.0, -0.25});
  set_grad(b, {1.5, -1.5, 0.75, std::nan("")});
  optim::clip_grad_value_({a, b, none}, 1.0);
  CHECK(values(a.grad()) == std::vector<double>{-1.0, 0.5, 1.0, -0.25});
  const std::vector<double> gb = values(b.grad());
  CHECK(gb[0] == 1.0);
  CHECK(gb[1] == -1.0);
  CHECK(gb[2] == 0.75);
  CHECK(std::isnan(gb[3]));
  CHECK_FALSE(none.grad().defined());
  CHECK_THROWS_WITH(optim::clip_grad_value_({a}, std::nan("")),
                    Contains("[clip_grad_value_] clip_value is NaN"));
}

// maximize: the gradient is negated before use. Parameters after 3 steps on sum(p^3) (gradient
// 3 p^2) from torch 2.15 (tests/optim/torch_optim_references.py, issue 44).
TEST_CASE("maximize negates the gradient as PyTorch's") {
  struct Case {
    const char* name;
    std::function<std::unique_ptr<optim::Optimizer>(DTensor)> make;
    std::vector<double> want;
  };
  const std::vector<Case> cases = {
      {"SGD",
       [](DTensor p) {
         return std::make_unique<optim::SGD>(
             std::vector<DTensor>{p},
             optim::SGDOptions(0.1).momentum(0.9).dampening(0.1).weight_decay(0.01).maximize(true));
       },
       {3.7763536924922403, 1.6413091063607674, 1.013512014378942}},
      {"SGD nesterov",
       [](DTensor p) {
         return std::make_unique<optim::SGD>(
             std::vector<DTensor>{p},
             optim::SGDOptions(0.1).momentum(0.9).nesterov(true).maximize(true));
       },
       {9.938286700387932, 3.1489370685260814, 1.5956353915732966}},
      {"AdamW",
       [](DTensor p) {
         return std::make_unique<optim::AdamW>(
             std::vector<DTensor>{p}, optim::AdamWOptions(0.1).weight_decay(0.05).maximize(true));
       },
       {1.2838500513908695, -1.6733399633604529, 0.7893422589890298}},
      {"AdamW amsgrad",
       [](DTensor p) {
         return std::make_unique<optim::AdamW>(
             std::vector<DTensor>{p}, optim::AdamWOptions(0.1).amsgrad(true).maximize(true));
       },
       {1.2969299294078973, -1.6958337994132422, 0.7963856664687409}},
  };
  CHECK_FALSE(optim::SGDOptions(0.1).maximize());
  CHECK_FALSE(optim::AdamWOptions().maximize());
  for (const Case& c : cases) {
    INFO(c.name);
    DTensor p = param({1.0, -2.0, 0.5});
    auto opt = c.make(p);
    for (int step = 0; step < 3; ++step) {
      std::vector<double> g;
      for (double v : values(p)) g.push_back(3 * v * v);
      set_grad(p, g);
      opt->step();
    }
    const std::vector<double> got = values(p);
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(c.want[i]).epsilon(1e-12));
  }
}
