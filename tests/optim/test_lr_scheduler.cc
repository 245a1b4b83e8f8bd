// Learning-rate schedulers against PyTorch 2.15's sequences (tests/optim/
// torch_lr_scheduler_references.py prints them): the learning rate after construction and after
// each step, compared exactly (the recursive formulas are PyTorch's, operation for operation);
// checkpoint round trips; errors; a compiled step reading the scheduled rate at each replay.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/compile/compile.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/optim/lr_scheduler.h"
#include "dtensor/tensor/creation.h"

namespace dt = dtensor;
namespace optim = dtensor::optim;
using Catch::Contains;
using dt::DTensor;
using Make = std::function<std::unique_ptr<optim::LRScheduler>(optim::Optimizer&)>;

namespace {

DTensor param(std::vector<double> v) {
  DTensor p = dt::local_dtensor(dt::from_vector<double>(v, {static_cast<int64_t>(v.size())}));
  p.requires_grad_();
  return p;
}

template <typename S, typename... Args>
std::unique_ptr<optim::LRScheduler> make(optim::Optimizer& o, Args&&... args) {
  return std::make_unique<S>(o, std::forward<Args>(args)...);
}

template <typename... S>
std::vector<std::unique_ptr<optim::LRScheduler>> list(std::unique_ptr<S>... s) {
  std::vector<std::unique_ptr<optim::LRScheduler>> out;
  (out.push_back(std::move(s)), ...);
  return out;
}

double warmup_decay(int64_t e) {  // the reference script's torchtitan-style lambda
  return e < 4 ? static_cast<double>(e + 1) / 4 : std::max(0.0, static_cast<double>(20 - e) / 16);
}

// OneCycleLR's options: total_steps, and the other keywords `set` sets.
optim::OneCycleLROptions one_cycle(std::optional<int64_t> total_steps,
                                   std::function<void(optim::OneCycleLROptions&)> set = {}) {
  optim::OneCycleLROptions o;
  o.total_steps = total_steps;
  if (set) set(o);
  return o;
}

// The case's schedulers, as the reference script builds them.
const std::map<std::string, Make>& cases() {
  static const std::map<std::string, Make> m = {
      {"LambdaLR",
       [](optim::Optimizer& o) {
         return make<optim::LambdaLR>(o, [](int64_t e) { return std::pow(0.95, e); });
       }},
      {"LambdaLR warmup_decay",
       [](optim::Optimizer& o) { return make<optim::LambdaLR>(o, warmup_decay); }},
      {"MultiplicativeLR",
       [](optim::Optimizer& o) {
         return make<optim::MultiplicativeLR>(o, [](int64_t e) { return e % 2 ? 0.9 : 0.8; });
       }},
      {"StepLR", [](optim::Optimizer& o) { return make<optim::StepLR>(o, int64_t{3}, 0.5); }},
      {"MultiStepLR",
       [](optim::Optimizer& o) {
         return make<optim::MultiStepLR>(o, std::vector<int64_t>{5, 2, 9, 5}, 0.1);
       }},
      {"ConstantLR",
       [](optim::Optimizer& o) { return make<optim::ConstantLR>(o, 0.25, int64_t{4}); }},
      {"LinearLR",
       [](optim::Optimizer& o) { return make<optim::LinearLR>(o, 0.01, 1.0, int64_t{10}); }},
      {"LinearLR decay",
       [](optim::Optimizer& o) { return make<optim::LinearLR>(o, 1.0, 0.1, int64_t{6}); }},
      {"ExponentialLR", [](optim::Optimizer& o) { return make<optim::ExponentialLR>(o, 0.9); }},
      {"PolynomialLR",
       [](optim::Optimizer& o) { return make<optim::PolynomialLR>(o, int64_t{8}, 2.0); }},
      {"CosineAnnealingLR",
       [](optim::Optimizer& o) { return make<optim::CosineAnnealingLR>(o, int64_t{10}, 0.001); }},
      {"SequentialLR linear cosine",
       [](optim::Optimizer& o) {
         auto warm = std::make_unique<optim::LinearLR>(o, 0.1, 1.0, 5);
         auto cosine = std::make_unique<optim::CosineAnnealingLR>(o, 10);
         return make<optim::SequentialLR>(o, list(std::move(warm), std::move(cosine)),
                                          std::vector<int64_t>{5});
       }},
      {"SequentialLR three",
       [](optim::Optimizer& o) {
         auto a = std::make_unique<optim::ConstantLR>(o, 0.5, 3);
         auto b = std::make_unique<optim::ExponentialLR>(o, 0.9);
         auto c = std::make_unique<optim::StepLR>(o, 2, 0.5);
         return make<optim::SequentialLR>(o, list(std::move(a), std::move(b), std::move(c)),
                                          std::vector<int64_t>{4, 8});
       }},
      {"SequentialLR lambda",
       [](optim::Optimizer& o) {
         auto a = std::make_unique<optim::LinearLR>(o, 0.5, 1.0, 3);
         auto b = std::make_unique<optim::LambdaLR>(o, [](int64_t e) { return std::pow(0.9, e); });
         return make<optim::SequentialLR>(o, list(std::move(a), std::move(b)),
                                          std::vector<int64_t>{3});
       }},
      {"ChainedScheduler",
       [](optim::Optimizer& o) {
         auto a = std::make_unique<optim::ConstantLR>(o, 0.1, 2);
         auto b = std::make_unique<optim::ExponentialLR>(o, 0.9);
         return make<optim::ChainedScheduler>(o, list(std::move(a), std::move(b)));
       }},
      // Round 8b.
      {"OneCycleLR",
       [](optim::Optimizer& o) { return make<optim::OneCycleLR>(o, 0.5, one_cycle(10)); }},
      {"OneCycleLR linear three_phase",
       [](optim::Optimizer& o) {
         return make<optim::OneCycleLR>(o, 0.5, one_cycle(12, [](optim::OneCycleLROptions& o) {
                                          o.pct_start = 0.25;
                                          o.anneal_strategy = "linear";
                                          o.three_phase = true;
                                        }));
       }},
      {"OneCycleLR epochs",
       [](optim::Optimizer& o) {
         return make<optim::OneCycleLR>(o, 0.3,
                                        one_cycle(std::nullopt, [](optim::OneCycleLROptions& o) {
                                          o.epochs = 2;
                                          o.steps_per_epoch = 5;
                                          o.cycle_momentum = false;
                                        }));
       }},
      {"CosineAnnealingWarmRestarts",
       [](optim::Optimizer& o) {
         return make<optim::CosineAnnealingWarmRestarts>(o, int64_t{3}, int64_t{2}, 0.01);
       }},
      {"CosineAnnealingWarmRestarts T_mult 1",
       [](optim::Optimizer& o) { return make<optim::CosineAnnealingWarmRestarts>(o, int64_t{4}); }},
  };
  return m;
}

// The reference script's schedulers "built with other arguments" (round 8b).
const std::map<std::string, Make>& others() {
  static const std::map<std::string, Make> m = {
      {"LambdaLR",
       [](optim::Optimizer& o) {
         return make<optim::LambdaLR>(o, [](int64_t e) { return std::pow(0.5, e); });
       }},
      {"MultiplicativeLR",
       [](optim::Optimizer& o) {
         return make<optim::MultiplicativeLR>(o, [](int64_t) { return 0.5; });
       }},
      {"StepLR", [](optim::Optimizer& o) { return make<optim::StepLR>(o, int64_t{1}, 0.9); }},
      {"MultiStepLR",
       [](optim::Optimizer& o) {
         return make<optim::MultiStepLR>(o, std::vector<int64_t>{1, 3}, 0.5);
       }},
      {"ConstantLR",
       [](optim::Optimizer& o) { return make<optim::ConstantLR>(o, 0.5, int64_t{2}); }},
      {"LinearLR",
       [](optim::Optimizer& o) { return make<optim::LinearLR>(o, 0.5, 0.9, int64_t{3}); }},
      {"ExponentialLR", [](optim::Optimizer& o) { return make<optim::ExponentialLR>(o, 0.5); }},
      {"PolynomialLR",
       [](optim::Optimizer& o) { return make<optim::PolynomialLR>(o, int64_t{4}, 1.0); }},
      {"CosineAnnealingLR",
       [](optim::Optimizer& o) { return make<optim::CosineAnnealingLR>(o, int64_t{3}, 0.05); }},
      {"SequentialLR linear cosine",
       [](optim::Optimizer& o) {
         auto warm = std::make_unique<optim::LinearLR>(o, 0.5, 1.0, 2);
         auto cosine = std::make_unique<optim::CosineAnnealingLR>(o, 3);
         return make<optim::SequentialLR>(o, list(std::move(warm), std::move(cosine)),
                                          std::vector<int64_t>{2});
       }},
      {"ChainedScheduler",
       [](optim::Optimizer& o) {
         auto a = std::make_unique<optim::ConstantLR>(o, 0.5, 5);
         auto b = std::make_unique<optim::ExponentialLR>(o, 0.5);
         return make<optim::ChainedScheduler>(o, list(std::move(a), std::move(b)));
       }},
      {"OneCycleLR",
       [](optim::Optimizer& o) {
         return make<optim::OneCycleLR>(o, 1.0, one_cycle(30, [](optim::OneCycleLROptions& o) {
                                          o.anneal_strategy = "linear";
                                        }));
       }},
      {"CosineAnnealingWarmRestarts",
       [](optim::Optimizer& o) {
         return make<optim::CosineAnnealingWarmRestarts>(o, int64_t{5}, int64_t{1}, 0.0);
       }},
  };
  return m;
}

// The optimizer's momentum (SGD) or beta1 (AdamW).
double momentum_of(const optim::Optimizer& o) {
  for (const auto& [name, v] : o.hyper_parameters()) {
    if (name == "momentum" || name == "beta1") return v;
  }
  return -1;
}

// A state's entries as doubles (an int64 entry converted).
std::map<std::string, std::vector<double>> values_of(
    const std::vector<std::pair<std::string, DTensor>>& state) {
  std::map<std::string, std::vector<double>> out;
  for (const auto& [name, t] : state) {
    const dt::Tensor local = t.to_local();
    if (local.dtype() == dt::DType::kInt64) {
      for (int64_t v : local.to_vector<int64_t>()) out[name].push_back(static_cast<double>(v));
    } else {
      out[name] = local.to_vector<double>();
    }
  }
  return out;
}

}  // namespace

TEST_CASE("learning-rate schedulers follow PyTorch's sequences exactly") {
  // torch 2.15.0+cu132, SGD(lr=0.1): the lr after construction, then after each step.
  const std::vector<std::pair<std::string, std::vector<double>>> expected = {
      {"LambdaLR",
       {0.1, 0.095, 0.09025, 0.0857375, 0.081450625, 0.07737809374999999, 0.07350918906249998,
        0.06983372960937498, 0.06634204312890622, 0.0630249409724609, 0.05987369392383787,
        0.05688000922764597, 0.05403600876626367}},
      {"LambdaLR warmup_decay",
       {0.025,
        0.05,
        0.07500000000000001,
        0.1,
        0.1,
        0.09375,
        0.08750000000000001,
        0.08125,
        0.07500000000000001,
        0.06875,
        0.0625,
        0.05625,
        0.05,
        0.043750000000000004,
        0.037500000000000006,
        0.03125,
        0.025,
        0.018750000000000003,
        0.0125,
        0.00625,
        0.0,
        0.0,
        0.0}},
      {"MultiplicativeLR",
       {0.1, 0.09000000000000001, 0.07200000000000001, 0.06480000000000001, 0.05184000000000001,
        0.04665600000000001, 0.03732480000000001, 0.03359232000000001, 0.02687385600000001}},
      {"StepLR",
       {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.0125, 0.0125, 0.0125, 0.00625}},
      {"MultiStepLR",
       {0.1, 0.1, 0.010000000000000002, 0.010000000000000002, 0.010000000000000002,
        0.00010000000000000005, 0.00010000000000000005, 0.00010000000000000005,
        0.00010000000000000005, 1.0000000000000006e-05, 1.0000000000000006e-05,
        1.0000000000000006e-05}},
      {"ConstantLR", {0.025, 0.025, 0.025, 0.025, 0.1, 0.1, 0.1, 0.1}},
      {"LinearLR",
       {0.001, 0.010899999999999998, 0.020799999999999996, 0.03069999999999999, 0.04059999999999999,
        0.05049999999999999, 0.06039999999999998, 0.07029999999999997, 0.08019999999999997,
        0.09009999999999996, 0.09999999999999995, 0.09999999999999995, 0.09999999999999995,
        0.09999999999999995, 0.09999999999999995}},
      {"LinearLR decay",
       {0.1, 0.085, 0.07, 0.05500000000000001, 0.04000000000000001, 0.025000000000000005,
        0.010000000000000002, 0.010000000000000002, 0.010000000000000002, 0.010000000000000002}},
      {"ExponentialLR",
       {0.1, 0.09000000000000001, 0.08100000000000002, 0.07290000000000002, 0.06561000000000002,
        0.05904900000000002, 0.05314410000000002, 0.04782969000000002, 0.043046721000000024,
        0.03874204890000002, 0.03486784401000002}},
      {"PolynomialLR",
       {0.1, 0.0765625, 0.05625, 0.03906250000000001, 0.02500000000000001, 0.014062500000000006,
        0.006250000000000002, 0.0015625000000000005, 0.0, 0.0, 0.0, 0.0}},
      {"CosineAnnealingLR",
       {0.1,
        0.09757729755661011,
        0.0905463412215599,
        0.07959536998847742,
        0.0657963412215599,
        0.0505,
        0.03520365877844011,
        0.02140463001152259,
        0.010453658778440109,
        0.0034227024433899004,
        0.001,
        0.0034227024433899004,
        0.01045365877844014,
        0.02140463001152267,
        0.035203658778440255,
        0.05050000000000022,
        0.06579634122156018,
        0.07959536998847777,
        0.09054634122156031,
        0.09757729755661054,
        0.10000000000000045,
        0.09757729755661054,
        0.09054634122156033,
        0.07959536998847778,
        0.0657963412215602,
        0.050500000000000225,
        0.03520365877844027,
        0.021404630011522683,
        0.010453658778440154,
        0.003422702443389916,
        0.001,
        0.0034227024433899004,
        0.010453658778440112,
        0.021404630011522607}},
      {"SequentialLR linear cosine",
       {0.010000000000000002,
        0.028000000000000004,
        0.046000000000000006,
        0.064,
        0.082,
        0.1,
        0.09755282581475769,
        0.09045084971874738,
        0.07938926261462367,
        0.06545084971874739,
        0.05000000000000001,
        0.03454915028125264,
        0.020610737385376353,
        0.009549150281252635,
        0.002447174185242324,
        0.0,
        0.0024471741852423235,
        0.009549150281252666,
        0.020610737385376433,
        0.034549150281252786,
        0.050000000000000225}},
      {"SequentialLR three",
       {0.05, 0.05, 0.05, 0.1, 0.1, 0.09000000000000001, 0.08100000000000002, 0.07290000000000002,
        0.1, 0.1, 0.05, 0.05, 0.025, 0.025, 0.0125}},
      {"SequentialLR lambda",
       {0.05, 0.06666666666666667, 0.08333333333333333, 0.1, 0.09000000000000001,
        0.08100000000000002, 0.0729, 0.06561, 0.05904900000000001}},
      {"ChainedScheduler",
       {0.010000000000000002, 0.009000000000000003, 0.08100000000000003, 0.07290000000000003,
        0.06561000000000003, 0.059049000000000025, 0.05314410000000002}},
      {"OneCycleLR",
       {0.020000000000000018, 0.26, 0.5, 0.47524231600673683, 0.40587282697488153,
        0.30563101096814466, 0.19437098903185537, 0.09412917302511849, 0.024759683993263143, 2e-06,
        0.024759683993263115}},
      {"OneCycleLR linear three_phase",
       {0.02, 0.26, 0.5, 0.26, 0.020000000000000018, 0.017143142857142857, 0.014286285714285715,
        0.011429428571428571, 0.00857257142857143, 0.005715714285714284, 0.002858857142857142,
        1.9999999999985307e-06, -0.0028548571428571416}},
      {"OneCycleLR epochs",
       {0.01200000000000001, 0.156, 0.3, 0.2851453896040421, 0.24352369618492894,
        0.18337860658088678, 0.11662259341911323, 0.05647750381507109, 0.014855810395957887,
        1.2e-06}},
      {"CosineAnnealingWarmRestarts",
       {0.1,
        0.0775,
        0.032500000000000015,
        0.1,
        0.09397114317029975,
        0.0775,
        0.05500000000000001,
        0.032500000000000015,
        0.01602885682970026,
        0.1,
        0.09846666218300808,
        0.09397114317029975,
        0.08681980515339464,
        0.0775,
        0.06664685702961344,
        0.05500000000000001,
        0.04335314297038658,
        0.032500000000000015,
        0.023180194846605363,
        0.01602885682970026,
        0.011533337816991932}},
      {"CosineAnnealingWarmRestarts T_mult 1",
       {0.1, 0.08535533905932738, 0.05, 0.014644660940672627, 0.1, 0.08535533905932738, 0.05,
        0.014644660940672627, 0.1, 0.08535533905932738, 0.05}},
  };
  REQUIRE(expected.size() == cases().size());
  for (const auto& [name, lrs] : expected) {
    DYNAMIC_SECTION(name) {
      DTensor p = param({1.0});
      optim::SGD opt({p}, optim::SGDOptions(0.1));
      std::unique_ptr<optim::LRScheduler> s = cases().at(name)(opt);
      std::vector<double> got = {opt.lr()};
      CHECK(s->get_last_lr() == opt.lr());
      for (size_t i = 1; i < lrs.size(); ++i) {
        s->step();
        got.push_back(opt.lr());
        CHECK(s->get_last_lr() == opt.lr());
      }
      CHECK(got == lrs);
      CHECK(s->last_epoch() == static_cast<int64_t>(lrs.size()) - 1);
      // OneCycleLR sets initial_lr to max_lr / div_factor, as PyTorch.
      if (!name.starts_with("OneCycleLR")) CHECK(*opt.initial_lr() == 0.1);
    }
  }
}

TEST_CASE("a scheduler's state_dict resumes the schedule exactly") {
  for (const char* name : {"SequentialLR linear cosine", "CosineAnnealingLR", "ChainedScheduler",
                           "MultiplicativeLR"}) {
    DYNAMIC_SECTION(name) {
      // One uninterrupted run of 12 steps ...
      DTensor p = param({1.0});
      optim::SGD opt({p}, optim::SGDOptions(0.1));
      auto s = cases().at(name)(opt);
      std::vector<double> whole;
      for (int i = 0; i < 12; ++i) {
        s->step();
        whole.push_back(opt.lr());
      }
      // ... equals 7 steps, a state saved, a new optimizer and scheduler built and loaded, 5
      // more steps.
      DTensor q = param({1.0});
      optim::SGD opt1({q}, optim::SGDOptions(0.1));
      auto s1 = cases().at(name)(opt1);
      std::vector<double> resumed;
      for (int i = 0; i < 7; ++i) {
        s1->step();
        resumed.push_back(opt1.lr());
      }
      const auto state = s1->state_dict();
      DTensor r = param({1.0});
      optim::SGD opt2({r}, optim::SGDOptions(0.1));
      auto s2 = cases().at(name)(opt2);
      s2->load_state_dict(state);
      CHECK(opt2.lr() == opt1.lr());
      CHECK(s2->last_epoch() == 7);
      for (int i = 0; i < 5; ++i) {
        s2->step();
        resumed.push_back(opt2.lr());
      }
      CHECK(resumed == whole);
    }
  }
}

// PyTorch's scheduler.state_dict() holds base_lrs and load_state_dict restores them: a
// scheduler built on an optimizer with another learning rate, then loaded, follows the saved
// schedule (round 7c). Before, its base stayed the constructor's: LambdaLR and the closed forms
// (SequentialLR's restart at a milestone) used it.
TEST_CASE("a scheduler's state_dict holds its base learning rate") {
  for (const char* name : {"SequentialLR linear cosine", "LambdaLR"}) {
    DYNAMIC_SECTION(name) {
      auto make = [&](optim::Optimizer& opt) -> std::unique_ptr<optim::LRScheduler> {
        if (std::string(name) == "LambdaLR")
          return std::make_unique<optim::LambdaLR>(opt, [](int64_t e) { return 1.0 / (e + 1); });
        return cases().at(name)(opt);
      };
      // The learning rates of n steps of s.
      auto run = [](optim::LRScheduler& s, int n) {
        std::vector<double> lrs;
        for (int i = 0; i < n; ++i) {
          s.step();
          lrs.push_back(s.optimizer().lr());
        }
        return lrs;
      };
      DTensor p = param({1.0}), q = param({1.0}), r = param({1.0});
      optim::SGD opt({p}, optim::SGDOptions(0.1)), opt1({q}, optim::SGDOptions(0.1));
      optim::SGD opt2({r}, optim::SGDOptions(0.7));  // PyTorch: the loaded base wins
      auto s = make(opt);
      auto s1 = make(opt1);
      auto s2 = make(opt2);
      const std::vector<double> whole = run(*s, 12);
      std::vector<double> resumed = run(*s1, 3);
      s2->load_state_dict(s1->state_dict());
      CHECK(s2->base_lr() == 0.1);
      for (double lr : run(*s2, 9)) resumed.push_back(lr);
      CHECK(resumed == whole);
      // A state without it (saved before it was kept) keeps the constructor's base.
      auto old_format = s1->state_dict();
      std::erase_if(old_format, [](const auto& e) { return e.first.ends_with("base_lr"); });
      DTensor t = param({1.0});
      optim::SGD opt3({t}, optim::SGDOptions(0.7));
      auto s3 = make(opt3);
      s3->load_state_dict(old_format);
      CHECK(s3->base_lr() == 0.7);
      CHECK(opt3.lr() == opt1.lr());
    }
  }
}

TEST_CASE("schedulers refuse what PyTorch refuses, by name") {
  DTensor p = param({1.0});
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  CHECK_THROWS_WITH(optim::LinearLR(opt, 0.0), Contains("[LinearLR] start_factor 0"));
  CHECK_THROWS_WITH(optim::LinearLR(opt, 0.5, 1.5), Contains("[LinearLR] end_factor 1.5"));
  CHECK_THROWS_WITH(optim::ConstantLR(opt, 2.0), Contains("[ConstantLR] factor 2"));
  CHECK_THROWS_WITH(optim::StepLR(opt, 0), Contains("[StepLR] step_size 0"));
  CHECK_THROWS_WITH(optim::CosineAnnealingLR(opt, 0), Contains("[CosineAnnealingLR] T_max 0"));
  auto a = std::make_unique<optim::ExponentialLR>(opt, 0.9);
  auto b = std::make_unique<optim::ExponentialLR>(opt, 0.8);
  CHECK_THROWS_WITH(optim::SequentialLR(opt, list(std::move(a), std::move(b)), {}),
                    Contains("2 schedulers and 0 milestones"));
  DTensor q = param({1.0});
  optim::SGD other({q}, optim::SGDOptions(0.1));
  auto c = std::make_unique<optim::ExponentialLR>(other, 0.9);
  CHECK_THROWS_WITH(optim::ChainedScheduler(opt, list(std::move(c))),
                    Contains("scheduler 0 belongs to another optimizer"));
  // A refused state changes nothing.
  optim::ExponentialLR s(opt, 0.5);
  s.step();
  auto state = s.state_dict();
  state[0].second = dt::local_dtensor(dt::from_vector<double>({1.0}, {1}));
  CHECK_THROWS_WITH(
      s.load_state_dict(state),
      Contains("entry 'last_epoch' is float64 of shape [1], expected a 1-element int64"));
  CHECK(s.last_epoch() == 1);
  CHECK(opt.lr() == 0.05);
}

// PyTorch's load_state_dict overwrites the scheduler's hyper-parameters (round 8b): 3 steps,
// the optimizer's and scheduler's states loaded into a scheduler built with other arguments on
// an optimizer with another learning rate, 3 more steps, against PyTorch's run of the same
// (the lambdas are not saved: the new ones run). Before, the constructor's gamma, T_max, ...
// stayed.
TEST_CASE("a scheduler built with other arguments continues the loaded schedule") {
  const std::vector<std::pair<std::string, std::vector<double>>> expected = {
      {"LambdaLR", {0.095, 0.09025, 0.0857375, 0.00625, 0.003125, 0.0015625}},
      {"MultiplicativeLR",
       {0.09000000000000001, 0.07200000000000001, 0.06480000000000001, 0.032400000000000005,
        0.016200000000000003, 0.008100000000000001}},
      {"StepLR", {0.1, 0.1, 0.05, 0.05, 0.05, 0.025}},
      {"MultiStepLR",
       {0.1, 0.010000000000000002, 0.010000000000000002, 0.010000000000000002,
        0.00010000000000000005, 0.00010000000000000005}},
      {"ConstantLR", {0.025, 0.025, 0.025, 0.1, 0.1, 0.1}},
      {"LinearLR",
       {0.010899999999999998, 0.020799999999999996, 0.03069999999999999, 0.04059999999999999,
        0.05049999999999999, 0.06039999999999998}},
      {"ExponentialLR",
       {0.09000000000000001, 0.08100000000000002, 0.07290000000000002, 0.06561000000000002,
        0.05904900000000002, 0.05314410000000002}},
      {"PolynomialLR",
       {0.0765625, 0.05625, 0.03906250000000001, 0.02500000000000001, 0.014062500000000006,
        0.006250000000000002}},
      {"CosineAnnealingLR",
       {0.09757729755661011, 0.0905463412215599, 0.07959536998847742, 0.0657963412215599, 0.0505,
        0.03520365877844011}},
      {"SequentialLR linear cosine",
       {0.028000000000000004, 0.046000000000000006, 0.064, 0.082, 0.1, 0.09755282581475769}},
      {"ChainedScheduler",
       {0.009000000000000003, 0.08100000000000003, 0.07290000000000003, 0.06561000000000003,
        0.059049000000000025, 0.05314410000000002}},
      {"OneCycleLR",
       {0.26, 0.5, 0.47524231600673683, 0.40587282697488153, 0.30563101096814466,
        0.19437098903185537}},
      {"CosineAnnealingWarmRestarts",
       {0.0775, 0.032500000000000015, 0.1, 0.09397114317029975, 0.0775, 0.05500000000000001}},
  };
  REQUIRE(expected.size() == others().size());
  for (const auto& [name, lrs] : expected) {
    DYNAMIC_SECTION(name) {
      DTensor p = param({1.0}), q = param({1.0});
      optim::SGD opt({p}, optim::SGDOptions(0.1));
      auto s = cases().at(name)(opt);
      std::vector<double> got;
      for (int i = 0; i < 3; ++i) {
        s->step();
        got.push_back(opt.lr());
      }
      const auto state = s->state_dict();
      optim::SGD opt2({q}, optim::SGDOptions(0.7));
      auto s2 = others().at(name)(opt2);
      opt2.load_state_dict(opt.state_dict());
      s2->load_state_dict(state);
      CHECK(values_of(s2->state_dict()) == values_of(state));
      for (int i = 0; i < 3; ++i) {
        s2->step();
        got.push_back(opt2.lr());
      }
      CHECK(got == lrs);
      // A state saved before the hyper-parameters were kept loads, keeping the constructor's.
      auto old_format = state;
      std::erase_if(old_format, [](const auto& e) {
        const std::string key = e.first.substr(e.first.find('.') + 1);
        return key != "last_epoch" && key != "last_lr" && key != "base_lr";
      });
      DTensor r = param({1.0});
      optim::SGD opt3({r}, optim::SGDOptions(0.7));
      auto s3 = others().at(name)(opt3);
      auto built = values_of(s3->state_dict());
      s3->load_state_dict(old_format);
      CHECK(s3->last_epoch() == 3);
      auto loaded = values_of(s3->state_dict());
      for (const char* counter :
           {"last_epoch", "last_lr", "base_lr", "0.last_epoch", "0.last_lr", "0.base_lr",
            "1.last_epoch", "1.last_lr", "1.base_lr", "T_cur", "T_i"}) {
        built.erase(counter);
        loaded.erase(counter);
      }
      CHECK(loaded == built);
    }
  }
}

TEST_CASE("OneCycleLR cycles SGD's momentum and AdamW's beta1 as PyTorch") {
  // torch 2.15: max_lr 0.5, total_steps 8, base_momentum 0.8, max_momentum 0.9; the momentum
  // after construction, then after each step.
  const std::vector<std::pair<std::string, std::vector<double>>> expected = {
      {"SGD False",
       {0.9, 0.8188255099070634, 0.8028058334845817, 0.8188255099070634, 0.8444017761948347,
        0.871694186955878, 0.8923362099614143, 0.9, 0.8923362099614143}},
      {"SGD True", {0.9, 0.8188255099070634, 0.8388739533021843, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9}},
      {"AdamW False",
       {0.9, 0.8188255099070634, 0.8028058334845817, 0.8188255099070634, 0.8444017761948347,
        0.871694186955878, 0.8923362099614143, 0.9, 0.8923362099614143}},
      {"AdamW True", {0.9, 0.8188255099070634, 0.8388739533021843, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9}},
  };
  for (const auto& [name, momenta] : expected) {
    DYNAMIC_SECTION(name) {
      DTensor p = param({1.0});
      std::unique_ptr<optim::Optimizer> opt;
      if (name.starts_with("SGD")) {
        opt = std::make_unique<optim::SGD>(std::vector<DTensor>{p},
                                           optim::SGDOptions(0.1).momentum(0.9));
      } else {
        opt = std::make_unique<optim::AdamW>(std::vector<DTensor>{p}, optim::AdamWOptions(0.1));
      }
      optim::OneCycleLR s(*opt, 0.5, one_cycle(8, [&](optim::OneCycleLROptions& o) {
        o.base_momentum = 0.8;
        o.max_momentum = 0.9;
        o.three_phase = name.ends_with("True");
      }));
      std::vector<double> got = {momentum_of(*opt)};
      for (int i = 0; i < 8; ++i) {
        s.step();
        got.push_back(momentum_of(*opt));
      }
      CHECK(got == momenta);
      CHECK_THROWS_WITH(s.step(), Contains("[OneCycleLR] Tried to step 9 times. The specified "
                                           "number of total steps is 8"));
      CHECK(s.last_epoch() == 8);
    }
  }
}

// SequentialLR's constructor runs its first scheduler's initial step, which for OneCycleLR sets
// the momentum (PyTorch's get_lr does): a momentum set by hand after OneCycleLR was built is
// back at max_momentum. Before round 9 it stayed 0.5 until the first step. torch 2.15
// (torch_lr_scheduler_references.py): lr and momentum (beta1) after construction and each step.
TEST_CASE("OneCycleLR first in a SequentialLR sets the momentum at its initial step") {
  const std::vector<double> expected = {0.020000000000000018,
                                        0.9,
                                        0.4058728269748815,
                                        0.8188255099070634,
                                        0.14153049910434962,
                                        0.871694186955878,
                                        2e-06,
                                        0.9,
                                        0.01,
                                        0.9,
                                        0.01,
                                        0.9,
                                        0.02,
                                        0.9};
  for (const bool adamw : {false, true}) {
    INFO((adamw ? "AdamW" : "SGD"));
    DTensor p = param({1.0});
    std::unique_ptr<optim::Optimizer> opt;
    if (adamw) {
      opt = std::make_unique<optim::AdamW>(std::vector<DTensor>{p}, optim::AdamWOptions(0.1));
    } else {
      opt = std::make_unique<optim::SGD>(std::vector<DTensor>{p},
                                         optim::SGDOptions(0.1).momentum(0.9));
    }
    auto cycle = std::make_unique<optim::OneCycleLR>(*opt, 0.5, one_cycle(4, [](auto& o) {
      o.base_momentum = 0.8;
      o.max_momentum = 0.9;
    }));
    opt->set_hyper_parameters({{adamw ? "beta1" : "momentum", 0.5}});
    auto constant = std::make_unique<optim::ConstantLR>(*opt, 0.5, 2);
    optim::SequentialLR seq(*opt, list(std::move(cycle), std::move(constant)), {4});
    std::vector<double> got = {opt->lr(), momentum_of(*opt)};
    for (int i = 0; i < 6; ++i) {
      seq.step();
      got.push_back(opt->lr());
      got.push_back(momentum_of(*opt));
    }
    CHECK(got == expected);
  }
}

// A momentum the optimizer refuses (SGD's < 0: base_momentum -0.5 reaches it at step 1)
// leaves OneCycleLR and the optimizer as they were: before, the epoch had advanced and the
// learning rate had not. A refused constructor leaves the optimizer's initial_lr unset.
TEST_CASE("OneCycleLR: a refused momentum changes nothing") {
  DTensor p = param({1.0});
  optim::SGD opt({p}, optim::SGDOptions(0.1).momentum(0.9));
  CHECK_THROWS_WITH(
      optim::OneCycleLR(opt, 0.5,
                        one_cycle(8, [](optim::OneCycleLROptions& o) { o.max_momentum = -1; })),
      Contains("[SGD] momentum must be >= 0, got -1"));
  CHECK_THROWS(optim::OneCycleLR(opt, 0.5, one_cycle(0)));
  CHECK(!opt.initial_lr());
  CHECK(momentum_of(opt) == 0.9);
  CHECK(opt.lr() == 0.1);
  optim::OneCycleLR s(opt, 0.5,
                      one_cycle(8, [](optim::OneCycleLROptions& o) { o.base_momentum = -0.5; }));
  const double lr = opt.lr();
  CHECK(momentum_of(opt) == 0.95);  // max_momentum's default
  CHECK_THROWS_WITH(s.step(), Contains("[SGD] momentum must be >= 0"));
  CHECK(s.last_epoch() == 0);
  CHECK(s.get_last_lr() == lr);
  CHECK(opt.lr() == lr);
  CHECK(momentum_of(opt) == 0.95);
}

TEST_CASE("ReduceLROnPlateau follows PyTorch's reductions") {
  const std::vector<double> metrics = {1.0,  0.9, 0.95, 0.9, 0.92, 0.8999, 0.85, 0.86, 0.87,
                                       0.88, 0.5, 0.6,  0.7, 0.8,  0.9,    0.95, 0.97, 0.99};
  using Plateau = std::function<std::unique_ptr<optim::ReduceLROnPlateau>(optim::Optimizer&)>;
  const std::map<std::string, Plateau> plateaus = {
      {"min rel",
       [](optim::Optimizer& o) {
         return std::make_unique<optim::ReduceLROnPlateau>(o, "min", 0.5, 2, 1e-4, "rel", 1, 0.02);
       }},
      {"min abs",
       [](optim::Optimizer& o) {
         return std::make_unique<optim::ReduceLROnPlateau>(o, "min", 0.1, 1, 0.05, "abs");
       }},
      {"max rel",
       [](optim::Optimizer& o) {
         return std::make_unique<optim::ReduceLROnPlateau>(o, "max", 0.3, 0, 0.1, "rel", 0, 0.0,
                                                           0.01);
       }},
      {"max abs",
       [](optim::Optimizer& o) {
         return std::make_unique<optim::ReduceLROnPlateau>(o, "max", 0.9, 1, 0.02, "abs", 2);
       }},
  };
  // torch 2.15, SGD(lr=0.1): the lr after each step(metric).
  const std::vector<std::pair<std::string, std::vector<double>>> expected = {
      {"min rel",
       {0.1, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.025, 0.02, 0.02,
        0.02, 0.02, 0.02}},
      {"min abs",
       {0.1, 0.1, 0.1, 0.010000000000000002, 0.010000000000000002, 0.0010000000000000002,
        0.0010000000000000002, 0.00010000000000000003, 0.00010000000000000003,
        1.0000000000000004e-05, 1.0000000000000004e-05, 1.0000000000000004e-05,
        1.0000000000000004e-06, 1.0000000000000004e-06, 1.0000000000000005e-07,
        1.0000000000000005e-07, 1.0000000000000005e-08, 1.0000000000000005e-08}},
      {"max rel",
       {0.1, 0.03, 0.009, 0.009, 0.009, 0.009, 0.009, 0.009, 0.009, 0.009, 0.009, 0.009, 0.009,
        0.009, 0.009, 0.009, 0.009, 0.009}},
      {"max abs",
       {0.1, 0.1, 0.09000000000000001, 0.09000000000000001, 0.09000000000000001,
        0.09000000000000001, 0.08100000000000002, 0.08100000000000002, 0.08100000000000002,
        0.08100000000000002, 0.07290000000000002, 0.07290000000000002, 0.07290000000000002,
        0.07290000000000002, 0.06561000000000002, 0.06561000000000002, 0.06561000000000002,
        0.06561000000000002}},
      {"resumed",
       {0.1, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.025, 0.02, 0.02,
        0.02, 0.02, 0.02}},
  };
  for (const auto& [name, lrs] : expected) {
    DYNAMIC_SECTION(name) {
      DTensor p = param({1.0}), q = param({1.0});
      optim::SGD opt({p}, optim::SGDOptions(0.1));
      auto s = plateaus.at(name == "resumed" ? "min rel" : name)(opt);
      CHECK(!opt.initial_lr());  // PyTorch's ReduceLROnPlateau does not set it
      std::vector<double> got;
      optim::ReduceLROnPlateau* current = s.get();
      // "resumed": 9 steps, then the states loaded into ReduceLROnPlateau(mode "max", factor
      // 0.9, patience 5) on an SGD with lr 0.7, which continues with the loaded mode and
      // hyper-parameters.
      optim::SGD opt2({q}, optim::SGDOptions(0.7));
      optim::ReduceLROnPlateau s2(opt2, "max", 0.9, 5);
      for (size_t i = 0; i < metrics.size(); ++i) {
        if (name == "resumed" && i == 9) {
          opt2.load_state_dict(opt.state_dict());
          s2.load_state_dict(s->state_dict());
          current = &s2;
        }
        current->step(metrics[i]);
        got.push_back(current->optimizer().lr());
        CHECK(current->get_last_lr() == got.back());
      }
      CHECK(got == lrs);
    }
  }
}

TEST_CASE("round 8b schedulers refuse what PyTorch refuses, by name") {
  DTensor p = param({1.0});
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  CHECK_THROWS_WITH(
      optim::OneCycleLR(opt, 0.1, one_cycle(std::nullopt)),
      Contains("[OneCycleLR] You must define either total_steps OR (epochs AND steps_per_epoch)"));
  CHECK_THROWS_WITH(optim::OneCycleLR(opt, 0.1, one_cycle(0)),
                    Contains("Expected positive integer total_steps, but got 0"));
  CHECK_THROWS_WITH(optim::OneCycleLR(opt, 0.1,
                                      one_cycle(std::nullopt,
                                                [](optim::OneCycleLROptions& o) {
                                                  o.epochs = 0;
                                                  o.steps_per_epoch = 2;
                                                })),
                    Contains("Expected positive integer epochs, but got 0"));
  CHECK_THROWS_WITH(
      optim::OneCycleLR(opt, 0.1,
                        one_cycle(5, [](optim::OneCycleLROptions& o) { o.pct_start = 1.5; })),
      Contains("Expected float between 0 and 1 pct_start, but got 1.5"));
  CHECK_THROWS_WITH(
      optim::OneCycleLR(
          opt, 0.1, one_cycle(5, [](optim::OneCycleLROptions& o) { o.anneal_strategy = "exp"; })),
      Contains("anneal_strategy must be one of 'cos' or 'linear', instead got exp"));
  CHECK_THROWS_WITH(optim::CosineAnnealingWarmRestarts(opt, 0),
                    Contains("[CosineAnnealingWarmRestarts] Expected positive integer T_0, but "
                             "got 0"));
  CHECK_THROWS_WITH(optim::CosineAnnealingWarmRestarts(opt, 2, 0),
                    Contains("Expected integer T_mult >= 1, but got 0"));
  CHECK_THROWS_WITH(optim::ReduceLROnPlateau(opt, "min", 1.0),
                    Contains("[ReduceLROnPlateau] Factor should be < 1.0."));
  CHECK_THROWS_WITH(optim::ReduceLROnPlateau(opt, "up"), Contains("mode up is unknown!"));
  CHECK_THROWS_WITH(optim::ReduceLROnPlateau(opt, "min", 0.1, 10, 1e-4, "x"),
                    Contains("threshold mode x is unknown!"));
  optim::ReduceLROnPlateau plateau(opt);
  CHECK_THROWS_WITH(plateau.step(), Contains("[ReduceLROnPlateau] step() needs the metric"));
  CHECK_THROWS_WITH(
      optim::ChainedScheduler(opt, list(std::make_unique<optim::ReduceLROnPlateau>(opt))),
      Contains("scheduler 0 is a ReduceLROnPlateau"));
  // A loaded hyper-parameter the constructor would refuse, or another scheduler's state: refused
  // with nothing changed.
  optim::StepLR step(opt, 2, 0.5);
  step.step();
  auto state = step.state_dict();
  for (auto& [name, t] : state) {
    if (name == "step_size") t = dt::local_dtensor(dt::from_vector<int64_t>({0}, {1}));
  }
  CHECK_THROWS_WITH(step.load_state_dict(state), Contains("[StepLR] step_size 0, expected > 0"));
  CHECK_THROWS_WITH(step.check_state_dict(state), Contains("[StepLR] step_size 0"));
  optim::CosineAnnealingLR cosine(opt, 4);
  CHECK_THROWS_WITH(cosine.load_state_dict(step.state_dict()),
                    Contains("[CosineAnnealingLR] load_state_dict: entry 'step_size' names no "
                             "state of CosineAnnealingLR"));
  CHECK(values_of(step.state_dict()).at("step_size") == std::vector<double>{2});
  CHECK(step.last_epoch() == 1);
  CHECK(cosine.last_epoch() == 0);
}

// Another scheduler's state whose entries are a subset of this one's (ExponentialLR's {gamma}
// in a StepLR {step_size, gamma}, LambdaLR's none in a MultiplicativeLR) is refused: by the
// "kind" entry, and without it (an edited state) because some but not all entries are there.
TEST_CASE("a state of another scheduler with a subset of the entries is refused") {
  DTensor p = param({1.0});
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  optim::ExponentialLR exponential(opt, 0.5);
  exponential.step();
  optim::StepLR step(opt, 2, 0.5);
  step.step();
  const double lr = opt.lr();
  auto state = exponential.state_dict();
  CHECK_THROWS_WITH(step.load_state_dict(state),
                    Contains("[StepLR] load_state_dict: the state is ExponentialLR's (entry "
                             "'kind' 7), expected StepLR's"));
  std::erase_if(state, [](const auto& e) { return e.first == "kind"; });
  CHECK_THROWS_WITH(step.load_state_dict(state),
                    Contains("[StepLR] load_state_dict: the state has gamma but not step_size"));
  CHECK_THROWS_WITH(step.check_state_dict(state), Contains("has gamma but not step_size"));
  optim::MultiStepLR multi(opt, {2, 4});
  CHECK_THROWS_WITH(multi.load_state_dict(state),
                    Contains("[MultiStepLR] load_state_dict: the state has gamma but not "
                             "milestones"));
  CHECK(step.last_epoch() == 1);
  CHECK(values_of(step.state_dict()).at("gamma") == std::vector<double>{0.5});
  CHECK(opt.lr() == lr);
  optim::LambdaLR lambda(opt, [](int64_t) { return 1.0; });
  optim::MultiplicativeLR multiplicative(opt, [](int64_t) { return 0.5; });
  CHECK_THROWS_WITH(multiplicative.load_state_dict(lambda.state_dict()),
                    Contains("the state is LambdaLR's (entry 'kind' 1), expected "
                             "MultiplicativeLR's"));
  CHECK_THROWS_WITH(step.load_state_dict(lambda.state_dict()),
                    Contains("[StepLR] load_state_dict: the state is LambdaLR's"));
  // A composite's children are checked too.
  DTensor q = param({1.0}), r = param({1.0});
  optim::SGD opt1({q}, optim::SGDOptions(0.1)), opt2({r}, optim::SGDOptions(0.1));
  optim::SequentialLR saved(opt1,
                            list(std::make_unique<optim::ExponentialLR>(opt1, 0.9),
                                 std::make_unique<optim::StepLR>(opt1, 2, 0.9)),
                            {2});
  optim::SequentialLR seq(opt2,
                          list(std::make_unique<optim::StepLR>(opt2, 2, 0.5),
                               std::make_unique<optim::ExponentialLR>(opt2, 0.5)),
                          {2});
  CHECK_THROWS_WITH(seq.load_state_dict(saved.state_dict()),
                    Contains("[StepLR] load_state_dict: the state is ExponentialLR's"));
  // A state saved before "kind" and the hyper-parameters (round 8b) still loads.
  auto old_format = exponential.state_dict();
  std::erase_if(old_format, [](const auto& e) { return e.first == "kind" || e.first == "gamma"; });
  step.load_state_dict(old_format);
  CHECK(step.last_epoch() == 1);
}

TEST_CASE("a compiled step replays with the learning rate the scheduler set") {
  // SGD on sum(x * p^2): the replayed update reads the optimizer's lr at each replay, so a
  // schedule stepped between calls gives the eager run's parameters exactly.
  auto run = [](bool compiled) {
    DTensor p = param({1.0, -2.0});
    optim::SGD opt({p}, optim::SGDOptions(0.1));
    optim::LinearLR warmup(opt, 0.25, 1.0, 4);
    auto train = [&](const dt::DTensorList& in) {
      opt.zero_grad();
      DTensor loss = dt::sum(dt::mul(dt::mul(p, p), in[0]));
      loss.backward();
      opt.step();
      return dt::DTensorList{loss.detach()};
    };
    dt::CompiledStep step = dt::compile(train);
    const DTensor x = dt::local_dtensor(dt::from_vector<double>({0.5, 1.5}, {2}));
    for (int i = 0; i < 6; ++i) {
      if (compiled) {
        step({x});
      } else {
        train({x});
      }
      warmup.step();
    }
    if (compiled) CHECK(step.captures() == 1);
    return p.to_local().to_vector<double>();
  };
  CHECK(run(true) == run(false));
}
