// The recurrent layers (dtensor/nn/recurrent.h) against PyTorch 2.15: RNN, LSTM, GRU and their
// cells with PyTorch's own initial parameters, loaded by their state_dict names (so the names,
// shapes and order are checked too), give PyTorch's output, h_n, c_n and the gradients of a
// scalar loss w.r.t. the input, h0, c0 and every parameter, at 1e-12 (float64). The values are
// in recurrent_references.inc, written by tests/nn/torch_nn_references.py. Also: dropout between
// layers, reset_parameters, and the errors.
#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/rng/generator.h"
#include "dtensor/tensor/creation.h"
#include "tests/common/ops_dtensor_test_util.h"
#include "tests/nn/reference_case.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
namespace tt = dtensor::test;
using dt::DTensor;
using dt::Tensor;

namespace {

const std::vector<tt::RefCase>& references() {
  static const std::vector<tt::RefCase> cases = {
#include "tests/nn/recurrent_references.inc"
  };
  return cases;
}

const tt::RefCase& reference(const std::string& name) {
  return tt::find_case(references(), name);
}

// {output, h_n, c_n} as the reference script names them (a cell's h' is "out", LSTMCell's c'
// is "c_n").
std::vector<DTensor> run(nn::Module& m, const DTensor& x, const DTensor& h0, const DTensor& c0) {
  if (auto* r = dynamic_cast<nn::RecurrentBase*>(&m)) {
    nn::RecurrentOutput o = r->forward_with_state(x, h0, c0);
    return {o.output, o.h_n, o.c_n};
  }
  if (auto* l = dynamic_cast<nn::LSTMCell*>(&m)) {
    nn::LSTMCellState s = l->forward_with_state(x, h0, c0);
    return {s.h, DTensor(), s.c};
  }
  if (auto* r = dynamic_cast<nn::RNNCell*>(&m)) return {r->forward_with_state(x, h0), {}, {}};
  return {dynamic_cast<nn::GRUCell&>(m).forward_with_state(x, h0), DTensor(), DTensor()};
}

using Opts = nn::RecurrentOptions;

}  // namespace

TEST_CASE("recurrent layers give PyTorch's outputs, states and gradients", "[nn][recurrent]") {
  const nn::ModuleOptions o = tt::f64();
  struct Case {
    const char* name;
    std::function<std::shared_ptr<nn::Module>()> make;
  };
  const std::vector<Case> cases = {
      {"LSTM 2 layers bidirectional h0 c0",
       [&] {
         return std::make_shared<nn::LSTM>(3, 4, Opts{.num_layers = 2, .bidirectional = true}, o);
       }},
      {"LSTM proj_size batch_first",
       [&] {
         return std::make_shared<nn::LSTM>(3, 5, Opts{.batch_first = true, .proj_size = 2}, o);
       }},
      {"LSTM unbatched 2 layers proj_size h0 c0",
       [&] { return std::make_shared<nn::LSTM>(3, 4, Opts{.num_layers = 2, .proj_size = 3}, o); }},
      {"GRU 2 layers bidirectional batch_first h0",
       [&] {
         return std::make_shared<nn::GRU>(
             3, 4, Opts{.num_layers = 2, .batch_first = true, .bidirectional = true}, o);
       }},
      {"GRU bias=False", [&] { return std::make_shared<nn::GRU>(3, 4, Opts{.bias = false}, o); }},
      {"RNN relu 2 layers h0",
       [&] {
         return std::make_shared<nn::RNN>(3, 4, Opts{.num_layers = 2, .nonlinearity = "relu"}, o);
       }},
      {"RNN tanh unbatched bidirectional h0",
       [&] { return std::make_shared<nn::RNN>(3, 4, Opts{.bidirectional = true}, o); }},
      {"RNNCell relu h", [&] { return std::make_shared<nn::RNNCell>(3, 4, true, "relu", o); }},
      {"LSTMCell h c", [&] { return std::make_shared<nn::LSTMCell>(3, 4, true, o); }},
      {"GRUCell h", [&] { return std::make_shared<nn::GRUCell>(3, 4, true, o); }},
      {"GRUCell unbatched", [&] { return std::make_shared<nn::GRUCell>(3, 4, false, o); }},
      {"LSTM 2 layers bidirectional proj_size batch_first h0 c0",
       [&] {
         return std::make_shared<nn::LSTM>(
             3, 4,
             Opts{.num_layers = 2, .batch_first = true, .bidirectional = true, .proj_size = 2}, o);
       }},
  };
  REQUIRE(cases.size() == references().size());
  for (const Case& c : cases) {
    INFO(c.name);
    const tt::RefCase& ref = reference(c.name);
    std::shared_ptr<nn::Module> m = c.make();
    // PyTorch's parameters by name, in PyTorch's order.
    std::vector<std::string> want_names, names;
    for (const tt::RefTensor& t : ref.tensors) {
      const std::string n = t.name;
      if (n.rfind("param:", 0) == 0) {
        want_names.push_back(n.substr(6));
        m->set_parameter(n.substr(6), nn::local_dtensor(value(ref, n)));
      }
    }
    for (const auto& [n, p] : m->named_parameters()) names.push_back(n);
    CHECK(names == want_names);
    auto leaf = [&](const char* name) {
      const Tensor v = value(ref, name);
      if (!v.defined()) return DTensor();
      DTensor d = nn::local_dtensor(v);
      d.requires_grad_(true);
      return d;
    };
    const DTensor x = leaf("x"), h0 = leaf("h0"), c0 = leaf("c0");
    const std::vector<DTensor> got = run(*m, x, h0, c0);
    if (!h0.defined()) {  // Module's one-input call: the output from a zero state
      CHECK(tt::same_values((*m)(x).to_local(), got[0].to_local(), 0));
    }
    const char* out_names[] = {"out", "h_n", "c_n"};
    DTensor loss;
    for (int i = 0; i < 3; ++i) {
      INFO(out_names[i]);
      const Tensor want = value(ref, out_names[i]);
      REQUIRE(want.defined() == got[i].defined());
      if (!want.defined()) continue;
      CHECK(tt::same_values(got[i].to_local(), want, 1e-12));
      const DTensor w =
          nn::local_dtensor(tt::det_input(want.sizes(), 5 + i, -1.0, 0.25, dt::kFloat64));
      const DTensor term = dt::sum(dt::mul(got[i], w));
      loss = loss.defined() ? dt::add(loss, term) : term;
    }
    loss.backward();
    for (const auto& [n, t] :
         std::vector<std::pair<std::string, DTensor>>{{"x", x}, {"h0", h0}, {"c0", c0}}) {
      if (!t.defined()) continue;
      INFO("grad of " << n);
      CHECK(tt::same_values(t.grad().to_local(), value(ref, "grad:" + n), 1e-12));
    }
    for (const auto& [n, p] : m->named_parameters()) {
      INFO("grad of " << n);
      REQUIRE(p.grad().defined());
      CHECK(tt::same_values(p.grad().to_local(), value(ref, "grad:" + n), 1e-12));
    }
  }
}

TEST_CASE("recurrent dropout between layers, reset_parameters", "[nn][recurrent]") {
  const nn::ModuleOptions o = tt::f64();
  const DTensor x = nn::local_dtensor(tt::det_input({3, 2, 3}, 1, -1.0, 0.25, dt::kFloat64));
  dt::Generator gen(7);
  nn::GRU plain(3, 4, Opts{.num_layers = 2}, o);
  nn::GRU drop(3, 4, Opts{.num_layers = 2, .dropout = 0.5, .dropout_generator = &gen}, o);
  for (const auto& [n, p] : plain.named_parameters()) drop.set_parameter(n, p);
  const Tensor want = plain(x).to_local();
  // Training: layer 0's output is dropped (the last layer's is not), drawn from `gen`.
  const Tensor a = drop(x).to_local();
  CHECK_FALSE(tt::same_values(a, want, 1e-6));
  gen.manual_seed(7);
  CHECK(tt::same_values(drop(x).to_local(), a, 0));
  // One layer: nothing to drop between layers.
  nn::GRU one(3, 4, Opts{.dropout = 0.5}, o);
  nn::GRU one_plain(3, 4, Opts{}, o);
  for (const auto& [n, p] : one.named_parameters()) one_plain.set_parameter(n, p);
  CHECK(tt::same_values(one(x).to_local(), one_plain(x).to_local(), 0));
  drop.eval();
  CHECK(tt::same_values(drop(x).to_local(), want, 0));
  // reset_parameters draws every parameter from uniform(-1/sqrt(H), 1/sqrt(H)), reproducibly.
  nn::LSTM lstm(3, 16, Opts{.bidirectional = true, .proj_size = 2}, o);
  dt::Generator g1(3), g2(3);
  lstm.reset_parameters(&g1);
  const Tensor w0 = lstm.param("weight_hr_l0_reverse").to_local().clone();
  lstm.reset_parameters(&g2);
  CHECK(tt::same_values(lstm.param("weight_hr_l0_reverse").to_local(), w0, 0));
  for (const auto& [n, p] : lstm.named_parameters()) {
    INFO(n);
    const std::vector<double> v = p.to_local().to_vector<double>();
    for (double e : v) CHECK((e >= -0.25 && e <= 0.25));
  }
  CHECK(lstm.param("weight_hh_l0").shape() == dt::Shape{64, 2});
}

TEST_CASE("recurrent layers refuse wrong inputs, states and options", "[nn][recurrent]") {
  const nn::ModuleOptions o = tt::f64();
  nn::LSTM lstm(3, 4, Opts{.num_layers = 2}, o);
  auto in = [](dt::IntSpan shape) {
    return nn::local_dtensor(tt::det_input(shape, 1, -1.0, 0.25, dt::kFloat64));
  };
  CHECK_THROWS_WITH(lstm(in({2, 3, 2, 3})), Catch::Contains("[LSTM] input must be 2-D"));
  CHECK_THROWS_WITH(lstm(in({3, 2, 5})),
                    Catch::Contains("[LSTM] input.size(-1) must be equal to input_size. "
                                    "Expected 3, got 5"));
  CHECK_THROWS_WITH(lstm(in({0, 2, 3})),
                    Catch::Contains("[LSTM] Expected sequence length to be larger than 0"));
  CHECK_THROWS_WITH(lstm.forward_with_state(in({3, 2, 3}), in({1, 2, 4}), in({2, 2, 4})),
                    Catch::Contains("[LSTM] h0 must be [2, 2, 4]"));
  CHECK_THROWS_WITH(lstm.forward_with_state(in({3, 2, 3}), in({2, 2, 4}), in({2, 3, 4})),
                    Catch::Contains("[LSTM] c0 must be [2, 2, 4]"));
  CHECK_THROWS_WITH(lstm.forward_with_state(in({3, 3}), in({2, 2, 4}), DTensor()),
                    Catch::Contains("[LSTM] h0 must be [2, 4]"));
  nn::GRU gru(3, 4, Opts{}, o);
  CHECK_THROWS_WITH(gru.forward_with_state(in({3, 2, 3}), in({1, 2, 4}), in({1, 2, 4})),
                    Catch::Contains("[GRU] c0 is LSTM's only"));
  nn::GRUCell cell(3, 4, true, o);
  CHECK_THROWS_WITH(cell.forward_with_state(in({2, 3}), in({3, 4})),
                    Catch::Contains("[GRUCell] h must be [2, 4]"));
  CHECK_THROWS_WITH(cell(in({1, 2, 3})),
                    Catch::Contains("[GRUCell] Expected input to be 1D or 2D"));
  CHECK_THROWS_WITH(nn::GRU(3, 4, Opts{.proj_size = 2}, o),
                    Catch::Contains("[GRU] proj_size argument is only supported for LSTM"));
  CHECK_THROWS_WITH(nn::LSTM(3, 4, Opts{.proj_size = 4}, o),
                    Catch::Contains("[LSTM] proj_size 4 has to be smaller than hidden_size 4"));
  CHECK_THROWS_WITH(nn::RNN(3, 4, Opts{.nonlinearity = "gelu"}, o),
                    Catch::Contains("[RNN] Unknown nonlinearity 'gelu'"));
  CHECK_THROWS_WITH(nn::LSTM(3, 4, Opts{.dropout = 1.5}, o),
                    Catch::Contains("[LSTM] dropout should be a number in range [0, 1]"));
  CHECK_THROWS_WITH(nn::LSTM(3, 0, Opts{}, o),
                    Catch::Contains("[LSTM] hidden_size must be greater than zero"));
  CHECK_THROWS_WITH(nn::RNNCell(3, 4, true, "sigmoid", o),
                    Catch::Contains("[RNNCell] Unknown nonlinearity: sigmoid"));
}

TEST_CASE("recurrent layers and cells called with a state run their hooks", "[nn][recurrent]") {
  // lstm(x, (h0, c0)) runs the hooks in PyTorch: the args hooks see (x, h0[, c0]); the forward
  // hooks see and may replace the output (h_n, c_n beside it).
  const nn::ModuleOptions o = tt::f64();
  auto in = [](dt::IntSpan shape, int salt) {
    return nn::local_dtensor(tt::det_input(shape, salt, -1.0, 0.25, dt::kFloat64));
  };
  std::vector<std::string> events;
  auto hook = [&events](nn::Module& m) {
    m.register_forward_pre_hook(
        [&events](nn::Module& mod,
                  absl::Span<const DTensor> args) -> std::optional<std::vector<DTensor>> {
          events.push_back(mod.type_name() + " pre " + std::to_string(args.size()));
          return std::nullopt;
        });
    m.register_forward_hook([&events](nn::Module& mod, absl::Span<const DTensor> args,
                                      DTensor& out) -> std::optional<DTensor> {
      events.push_back(mod.type_name() + " hook " + std::to_string(args.size()));
      return dt::mul(out, dt::Scalar(2.0));
    });
  };
  const DTensor x = in({3, 2, 3}, 1), h0 = in({1, 2, 4}, 2), c0 = in({1, 2, 4}, 3);
  nn::LSTM lstm(3, 4, Opts{}, o);
  const nn::RecurrentOutput want = lstm.forward_with_state(x, h0, c0);
  hook(lstm);
  const nn::RecurrentOutput got = lstm(x, h0, c0);
  CHECK(events == std::vector<std::string>{"LSTM pre 3", "LSTM hook 3"});
  CHECK(
      tt::same_values(got.output.to_local(), dt::mul(want.output.to_local(), dt::Scalar(2.0)), 0));
  CHECK(tt::same_values(got.h_n.to_local(), want.h_n.to_local(), 0));
  CHECK(tt::same_values(got.c_n.to_local(), want.c_n.to_local(), 0));
  nn::GRU gru(3, 4, Opts{}, o);
  hook(gru);
  events.clear();
  (void)gru(x, h0);
  CHECK(events == std::vector<std::string>{"GRU pre 2", "GRU hook 2"});

  nn::LSTMCell lcell(3, 4, true, o);
  const DTensor cx = in({2, 3}, 4), ch = in({2, 4}, 5), cc = in({2, 4}, 6);
  const nn::LSTMCellState cwant = lcell.forward_with_state(cx, ch, cc);
  hook(lcell);
  events.clear();
  const nn::LSTMCellState cgot = lcell(cx, ch, cc);
  CHECK(events == std::vector<std::string>{"LSTMCell pre 3", "LSTMCell hook 3"});
  CHECK(tt::same_values(cgot.h.to_local(), dt::mul(cwant.h.to_local(), dt::Scalar(2.0)), 0));
  CHECK(tt::same_values(cgot.c.to_local(), cwant.c.to_local(), 0));
  nn::RNNCell rcell(3, 4, true, "tanh", o);
  hook(rcell);
  events.clear();
  (void)rcell(cx, DTensor());
  CHECK(events == std::vector<std::string>{"RNNCell pre 2", "RNNCell hook 2"});
}
