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
  };
  return m;
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
      CHECK(*opt.initial_lr() == 0.1);
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
