// The everyday modules of issue 44 on one process (self mesh): Sequential, Identity, Flatten,
// Unflatten, Dropout, the activations ReLU .. LogSoftmax, the 1d / 2d / 3d padding modules, and
// Embedding's padding_idx, against PyTorch 2.15's values (tests/nn/torch_nn_references.py
// prints them; float64 inputs det_input(shape, salt)); Module::named_buffers' deduplication.
#include <catch2/catch.hpp>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/embedding/embedding.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/rng/dtensor_random.h"
#include "dtensor/tensor/creation.h"
#include "tests/common/ops_dtensor_test_util.h"
#include "tests/nn/inventory_reference.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
namespace tt = dtensor::test;
using dt::DTensor;
using dt::Tensor;

namespace {

Tensor ref(std::vector<double> v, dt::IntSpan shape) {
  return dt::from_vector<double>(v, shape);
}

Tensor input(dt::IntSpan shape, int salt) {
  return tt::det_input(shape, salt, -2.5, 0.5, dt::kFloat64);
}

std::vector<std::string> names(const std::vector<std::pair<std::string, DTensor>>& named) {
  std::vector<std::string> out;
  for (const auto& [n, t] : named) out.push_back(n);
  return out;
}

}  // namespace

TEST_CASE("activation modules give PyTorch's values", "[nn]") {
  const DTensor x = nn::local_dtensor(input({3, 4}, 2));
  struct Case {
    std::shared_ptr<nn::Module> m;
    const char* type;
    std::vector<double> want;
  };
  const std::vector<Case> cases = {
      {std::make_shared<nn::ReLU>(), "ReLU", {0, 2, 0, 0, 1.5, 0, 0, 1, 0, 2.5, 0.5, 0}},
      {std::make_shared<nn::GELU>(),
       "GELU",
       {-0.10021080190328704, 1.9544997361036416, 0.0, -0.04550026389635842, 1.399789198096713,
        -0.15426876936299344, -0.015524163314440398, 0.841344746068543, -0.15865525393145702,
        2.4844758366855597, 0.34573123063700656, -0.10021080190328704}},
      {std::make_shared<nn::GELU>("tanh"),
       "GELU",
       {-0.10042842301976707, 1.954597694087775, 0.0, -0.04540230591222494, 1.3995715769802328,
        -0.15428599017485606, -0.015084266089998577, 0.8411919906082768, -0.15880800939172324,
        2.484915733910001, 0.34571400982514394, -0.10042842301976707}},
      {std::make_shared<nn::SiLU>(),
       "SiLU",
       {-0.2736382857095345, 1.7615941559557646, 0.0, -0.2384058440442351, 1.2263617142904655,
        -0.1887703343990727, -0.18964545005310887, 0.7310585786300049, -0.2689414213699951,
        2.3103545499468914, 0.3112296656009273, -0.2736382857095345}},
      {std::make_shared<nn::Tanh>(),
       "Tanh",
       {-0.9051482536448664, 0.9640275800758169, 0.0, -0.9640275800758169, 0.9051482536448664,
        -0.46211715726000974, -0.9866142981514303, 0.7615941559557649, -0.7615941559557649,
        0.9866142981514303, 0.46211715726000974, -0.9051482536448664}},
      {std::make_shared<nn::Sigmoid>(),
       "Sigmoid",
       {0.18242552380635635, 0.8807970779778823, 0.5, 0.11920292202211755, 0.8175744761936437,
        0.3775406687981454, 0.07585818002124355, 0.7310585786300049, 0.2689414213699951,
        0.9241418199787566, 0.6224593312018546, 0.18242552380635635}},
      {std::make_shared<nn::Softmax>(1),
       "Softmax",
       {0.025507814878654365, 0.8447028181852956, 0.11431809514987194, 0.015471271786177956,
        0.5681232040593225, 0.07688711473466033, 0.01040553944986119, 0.3445841417561559,
        0.025507814878654365, 0.8447028181852956, 0.11431809514987194, 0.015471271786177956}},
      {std::make_shared<nn::Softmax>(0),
       "Softmax",
       {0.043986480292057845, 0.3661922162818002, 0.3661922162818002, 0.043986480292057845,
        0.8834920740271945, 0.030058887569574023, 0.030058887569574023, 0.8834920740271945,
        0.07252144568074777, 0.6037488961486258, 0.6037488961486258, 0.07252144568074777}},
      {std::make_shared<nn::LogSoftmax>(1),
       "LogSoftmax",
       {-3.668770407939234, -0.16877040793923376, -2.168770407939234, -4.168770407939234,
        -0.5654169752270999, -2.5654169752271, -4.5654169752271, -1.0654169752270999,
        -3.668770407939234, -0.16877040793923376, -2.168770407939234, -4.168770407939234}},
  };
  for (const Case& c : cases) {
    INFO(c.type);
    CHECK(c.m->type_name() == c.type);
    CHECK(c.m->parameters().empty());
    CHECK(tt::same_values((*c.m)(x).to_local(), ref(c.want, {3, 4}), 1e-14));
  }
  CHECK(nn::GELU().approximate() == "none");
  CHECK(nn::Softmax(1).dim() == 1);
  CHECK(nn::LogSoftmax(-1).dim() == -1);
  CHECK_THROWS_WITH(nn::GELU("erf"),
                    Catch::Contains("[GELU] approximate must be 'none' or 'tanh', got 'erf'"));
}

TEST_CASE("padding modules give PyTorch's values", "[nn]") {
  const DTensor x1 = nn::local_dtensor(input({1, 2, 3}, 1));
  const DTensor x2 = nn::local_dtensor(input({1, 1, 3, 3}, 3));
  const DTensor x3 = nn::local_dtensor(input({1, 2, 2, 2}, 6));
  struct Case {
    std::shared_ptr<nn::Module> m;
    const char* type;
    const DTensor& in;
    dt::Shape shape;
    std::vector<double> want;
  };
  const std::vector<Case> cases = {
      {std::make_shared<nn::ZeroPad1d>(dt::Shape{2}),
       "ZeroPad1d",
       x1,
       {1, 2, 7},
       {0, 0, -2, 1.5, -0.5, 0, 0, 0, 0, -2.5, 1, -1, 0, 0}},
      {std::make_shared<nn::ConstantPad1d>(dt::Shape{1, 2}, 3.5),
       "ConstantPad1d",
       x1,
       {1, 2, 6},
       {3.5, -2, 1.5, -0.5, 3.5, 3.5, 3.5, -2.5, 1, -1, 3.5, 3.5}},
      {std::make_shared<nn::ConstantPad2d>(dt::Shape{1, 0, 2, 1}, -1.0),
       "ConstantPad2d",
       x2,
       {1, 1, 6, 4},
       {-1, -1,   -1, -1, -1, -1, -1,  -1,   -1, -1, 2.5, 0.5,
        -1, -1.5, 2,  0,  -1, -2, 1.5, -0.5, -1, -1, -1,  -1}},
      {std::make_shared<nn::ReflectionPad1d>(dt::Shape{2, 1}),
       "ReflectionPad1d",
       x1,
       {1, 2, 6},
       {-0.5, 1.5, -2, 1.5, -0.5, 1.5, -1, 1, -2.5, 1, -1, 1}},
      {std::make_shared<nn::ReplicationPad1d>(dt::Shape{1, 2}),
       "ReplicationPad1d",
       x1,
       {1, 2, 6},
       {-2, -2, 1.5, -0.5, -0.5, -0.5, -2.5, -2.5, 1, -1, -1, -1}},
      {std::make_shared<nn::ReplicationPad2d>(dt::Shape{2, 0, 1, 2}),
       "ReplicationPad2d",
       x2,
       {1, 1, 6, 5},
       {-1, -1, -1, 2.5, 0.5,  -1, -1, -1, 2.5, 0.5,  -1.5, -1.5, -1.5, 2,   0,
        -2, -2, -2, 1.5, -0.5, -2, -2, -2, 1.5, -0.5, -2,   -2,   -2,   1.5, -0.5}},
      {std::make_shared<nn::CircularPad1d>(dt::Shape{3, 1}),
       "CircularPad1d",
       x1,
       {1, 2, 7},
       {-2, 1.5, -0.5, -2, 1.5, -0.5, -2, -2.5, 1, -1, -2.5, 1, -1, -2.5}},
      {std::make_shared<nn::CircularPad2d>(dt::Shape{1}),
       "CircularPad2d",
       x2,
       {1, 1, 5, 5},
       {-0.5, -2,   1.5,  -0.5, -2,  0.5,  -1, 2.5, 0.5, -1,  0,   -1.5, 2,
        0,    -1.5, -0.5, -2,   1.5, -0.5, -2, 0.5, -1,  2.5, 0.5, -1}},
      {std::make_shared<nn::ConstantPad3d>(dt::Shape{1, 0, 0, 1, 1, 0}, 0.5),
       "ConstantPad3d",
       x3,
       {1, 3, 3, 3},
       {0.5, 0.5, 0.5, 0.5, 0.5, 0.5,  0.5, 0.5, 0.5,  0.5,  0.5, -1.5, 0.5, 2.0,
        0.0, 0.5, 0.5, 0.5, 0.5, -2.0, 1.5, 0.5, -0.5, -2.5, 0.5, 0.5,  0.5}},
      {std::make_shared<nn::ReplicationPad3d>(dt::Shape{0, 1, 1, 0, 0, 1}),
       "ReplicationPad3d",
       x3,
       {1, 3, 3, 3},
       {0.5, -1.5, -1.5, 0.5,  -1.5, -1.5, 2.0, 0.0,  0.0, -2.0, 1.5,  1.5,  -2.0, 1.5,
        1.5, -0.5, -2.5, -2.5, -2.0, 1.5,  1.5, -2.0, 1.5, 1.5,  -0.5, -2.5, -2.5}},
      {std::make_shared<nn::CircularPad3d>(dt::Shape{1}),
       "CircularPad3d",
       x3,
       {1, 4, 4, 4},
       {-2.5, -0.5, -2.5, -0.5, 1.5,  -2.0, 1.5,  -2.0, -2.5, -0.5, -2.5, -0.5, 1.5,
        -2.0, 1.5,  -2.0, 0.0,  2.0,  0.0,  2.0,  -1.5, 0.5,  -1.5, 0.5,  0.0,  2.0,
        0.0,  2.0,  -1.5, 0.5,  -1.5, 0.5,  -2.5, -0.5, -2.5, -0.5, 1.5,  -2.0, 1.5,
        -2.0, -2.5, -0.5, -2.5, -0.5, 1.5,  -2.0, 1.5,  -2.0, 0.0,  2.0,  0.0,  2.0,
        -1.5, 0.5,  -1.5, 0.5,  0.0,  2.0,  0.0,  2.0,  -1.5, 0.5,  -1.5, 0.5}},
      {std::make_shared<nn::ReflectionPad3d>(dt::Shape{1, 0, 0, 1, 1, 0}),
       "ReflectionPad3d",
       x3,
       {1, 3, 3, 3},
       {1.5, -2.0, 1.5, -2.5, -0.5, -2.5, 1.5, -2.0, 1.5,  -1.5, 0.5, -1.5, 0.0, 2.0,
        0.0, -1.5, 0.5, -1.5, 1.5,  -2.0, 1.5, -2.5, -0.5, -2.5, 1.5, -2.0, 1.5}},
      {std::make_shared<nn::ZeroPad3d>(dt::Shape{0, 1, 0, 0, 1, 0}),
       "ZeroPad3d",
       x3,
       {1, 3, 2, 3},
       {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, -1.5, 0.0, 2.0, 0.0, 0.0, -2.0, 1.5, 0.0, -0.5, -2.5,
        0.0}},
  };
  for (const Case& c : cases) {
    INFO(c.type);
    CHECK(c.m->type_name() == c.type);
    CHECK(tt::same_values((*c.m)(c.in).to_local(), ref(c.want, c.shape), 0));
  }
  CHECK(nn::ConstantPad2d(dt::Shape{2}, 1.5).padding() == dt::Shape{2, 2, 2, 2});
  CHECK(nn::ConstantPad2d(dt::Shape{2}, 1.5).value() == 1.5);
  CHECK_THROWS_WITH(
      nn::CircularPad1d(dt::Shape{1, 2, 3}),
      Catch::Contains("[CircularPad1d] padding must be a single int or 2 ints, got 3"));
}

TEST_CASE("Identity, Flatten and Unflatten have PyTorch's defaults and shapes", "[nn]") {
  const DTensor x = nn::local_dtensor(dt::zeros({2, 3, 4, 5}));
  nn::Identity id;
  CHECK(id(x).to_local().data_ptr() == x.to_local().data_ptr());
  CHECK(nn::Flatten().start_dim() == 1);
  CHECK(nn::Flatten().end_dim() == -1);
  CHECK(nn::Flatten()(x).shape() == dt::Shape{2, 60});
  CHECK(nn::Flatten(0, 2)(x).shape() == dt::Shape{24, 5});
  nn::Unflatten unflatten(1, dt::Shape{2, -1});
  CHECK(unflatten.type_name() == "Unflatten");
  CHECK(unflatten(nn::local_dtensor(dt::zeros({3, 8}))).shape() == dt::Shape{3, 2, 4});
  // Values move with the shape.
  const Tensor v = input({2, 3, 2}, 4);
  CHECK(tt::same_values(nn::Flatten()(nn::local_dtensor(v)).to_local(), v.reshape({2, 6}), 0));
}

TEST_CASE("Sequential names its children 0, 1, ... and has PyTorch's state_dict keys", "[nn]") {
  nn::ModuleOptions o;
  o.dtype = dt::kFloat64;
  auto fc1 = std::make_shared<nn::Linear>(4, 3, true, o);
  auto fc2 = std::make_shared<nn::Linear>(3, 2, true, o);
  nn::Sequential seq{fc1, std::make_shared<nn::ReLU>(), std::make_shared<nn::Dropout>(), fc2};
  CHECK(seq.type_name() == "Sequential");
  // PyTorch: ['0.weight', '0.bias', '3.weight', '3.bias'].
  CHECK(names(seq.named_parameters()) ==
        std::vector<std::string>{"0.weight", "0.bias", "3.weight", "3.bias"});
  CHECK(seq.size() == 4);
  CHECK(&seq[0] == fc1.get());
  CHECK(&seq[-1] == fc2.get());
  CHECK(seq[1].type_name() == "ReLU");
  CHECK_THROWS_WITH(seq[4], Catch::Contains("[Sequential] index 4 is out of range for a "
                                            "Sequential of 4 modules"));
  CHECK_THROWS_WITH(seq[-5], Catch::Contains("index -5 is out of range"));

  // forward chains the children (dropout off in eval).
  seq.eval();
  const DTensor x = nn::local_dtensor(input({5, 4}, 6));
  const DTensor want = (*fc2)(dt::relu((*fc1)(x)));
  CHECK(tt::same_values(seq(x).to_local(), want.to_local(), 0));

  // append names by position; a child's hooks run when the chain calls it.
  int calls = 0;
  seq.append(std::make_shared<nn::Tanh>());
  seq[4].register_forward_hook(
      [&calls](nn::Module&, const DTensor&, const DTensor&) -> std::optional<DTensor> {
        ++calls;
        return std::nullopt;
      });
  std::vector<std::string> children;
  for (const auto& [n, m] : seq.named_children()) children.push_back(n);
  CHECK(children == std::vector<std::string>{"0", "1", "2", "3", "4"});
  CHECK(tt::same_values(seq(x).to_local(), dt::tanh(want).to_local(), 0));
  CHECK(calls == 1);

  // An empty Sequential is the identity; named children keep their names.
  nn::Sequential empty;
  CHECK(empty.empty());
  CHECK(tt::same_values(empty(x).to_local(), x.to_local(), 0));
  nn::Sequential named(std::vector<std::pair<std::string, nn::ModulePtr>>{
      {"fc", std::make_shared<nn::Linear>(4, 3, true, o)}, {"act", std::make_shared<nn::SiLU>()}});
  CHECK(names(named.named_parameters()) == std::vector<std::string>{"fc.weight", "fc.bias"});
  CHECK(named[1].type_name() == "SiLU");
  CHECK_THROWS_WITH(nn::Sequential(std::vector<std::pair<std::string, nn::ModulePtr>>{
                        {"a", std::make_shared<nn::ReLU>()}, {"a", std::make_shared<nn::ReLU>()}}),
                    Catch::Contains("[Sequential] two modules are named 'a'"));
}

TEST_CASE("Dropout follows the training flag and the DTensor RNG", "[nn]") {
  CHECK(nn::Dropout().p() == 0.5);
  CHECK_THROWS_WITH(nn::Dropout(1.5), Catch::Contains("[Dropout] dropout probability has to be "
                                                      "between 0 and 1, but got 1.5"));
  CHECK_THROWS_WITH(nn::Dropout(-0.1), Catch::Contains("but got -0.1"));
  const DTensor x = nn::local_dtensor(dt::ones({6, 50}, dt::kFloat64));
  dt::Generator gen(7);
  nn::Dropout drop(0.25, &gen);
  // Training (the default): exactly dtensor::dropout with the same generator state.
  dt::Generator same(7);
  const Tensor got = drop(x).to_local();
  CHECK(tt::same_values(got, dt::dropout(x, 0.25, true, &same).to_local(), 0));
  const std::vector<double> v = got.to_vector<double>();
  int zeros = 0;
  for (double e : v) {
    CHECK((e == 0.0 || e == 1.0 / 0.75));
    zeros += e == 0.0;
  }
  CHECK(zeros > 30);  // about 75 of 300
  CHECK(zeros < 120);
  // A second call draws new numbers.
  CHECK_FALSE(tt::same_values(drop(x).to_local(), got, 0));
  // eval(): the input itself, and no draws.
  const uint64_t offset = gen.offset();
  drop.eval();
  CHECK(drop(x).to_local().data_ptr() == x.to_local().data_ptr());
  CHECK(gen.offset() == offset);
  // p = 1 zeroes everything (PyTorch), p = 0 keeps everything.
  CHECK(tt::same_values(nn::Dropout(1.0, &gen)(x).to_local(), dt::zeros({6, 50}, dt::kFloat64), 0));
  CHECK(tt::same_values(nn::Dropout(0.0, &gen)(x).to_local(), x.to_local(), 0));
}

TEST_CASE("Embedding padding_idx: zero row, zero gradient, PyTorch's values", "[nn]") {
  nn::ModuleOptions o;
  o.dtype = dt::kFloat64;
  // PyTorch: Embedding(5, 3, padding_idx=-2).padding_idx == 3 and that row is zero.
  nn::Embedding e(5, 3, -2, o);
  CHECK(e.padding_idx() == 3);
  const Tensor w = e.param("weight").to_local();
  CHECK(tt::same_values(w.narrow(0, 3, 1), dt::zeros({1, 3}, dt::kFloat64), 0));
  CHECK_FALSE(tt::same_values(w.narrow(0, 2, 1), dt::zeros({1, 3}, dt::kFloat64), 0));
  e.reset_parameters();
  CHECK(tt::same_values(e.param("weight").to_local().narrow(0, 3, 1),
                        dt::zeros({1, 3}, dt::kFloat64), 0));
  CHECK_FALSE(nn::Embedding(5, 3, o).padding_idx().has_value());
  // A braced {} is the ModuleOptions (default options), as for the other modules since 69b85cf;
  // it was ambiguous with padding_idx (std::optional<int64_t>) and did not compile. padding_idx
  // takes an integer, an optional or nullopt.
  nn::Embedding braced(5, 3, {});
  CHECK_FALSE(braced.padding_idx().has_value());
  CHECK(braced.param("weight").dtype() == dt::kFloat32);
  CHECK(nn::Embedding(5, 3, 1, {}).padding_idx() == 1);
  CHECK(nn::Embedding(5, 3, int64_t{-1}, o).padding_idx() == 4);
  CHECK(nn::Embedding(5, 3, std::optional<int64_t>(2), o).padding_idx() == 2);
  CHECK(nn::Embedding(5, 3, std::optional<int>(-2), o).padding_idx() ==
        3);  // any integer's optional
  CHECK_FALSE(nn::Embedding(5, 3, std::nullopt, o).padding_idx().has_value());
  CHECK_THROWS_WITH(nn::Embedding(5, 3, 5, o),
                    Catch::Contains("[Embedding] padding_idx 5 must be within num_embeddings"));
  CHECK_THROWS_WITH(nn::Embedding(5, 3, -6, o), Catch::Contains("padding_idx -6 must be within"));

  // The table's gradient of sum(embedding(idx) * c): PyTorch's, the padding row zero.
  const Tensor idx = dt::from_vector<int64_t>({0, 2, 4, 2, 1, 4}, {2, 3});
  const DTensor c = nn::local_dtensor(input({2, 3, 3}, 5));
  struct Case {
    int64_t padding_idx;
    std::vector<double> want;
  };
  for (const Case& k : {Case{2, {0, -2, 1.5, -2, 1.5, -0.5, 0, 0, 0, 0, 0, 0, -3.5, 3.5, -0.5}},
                        Case{-1, {0, -2, 1.5, -2, 1.5, -0.5, -2, -0.5, 1, 0, 0, 0, 0, 0, 0}}}) {
    INFO("padding_idx " << k.padding_idx);
    nn::Embedding m(5, 3, k.padding_idx, o);
    const DTensor out = m(nn::local_dtensor(idx));
    // The lookup is unchanged: the padding row reads as the (zero) table row.
    CHECK(tt::same_values(out.to_local(), dt::embedding(idx, m.param("weight").to_local()), 0));
    dt::sum(dt::mul(out, c)).backward();
    CHECK(tt::same_values(m.param("weight").grad().to_local(), ref(k.want, {5, 3}), 0));
  }
  // Without padding_idx the row gets its gradient (the test above can fail).
  nn::Embedding plain(5, 3, o);
  dt::sum(dt::mul(plain(nn::local_dtensor(idx)), c)).backward();
  CHECK_FALSE(tt::same_values(plain.param("weight").grad().to_local().narrow(0, 2, 1),
                              dt::zeros({1, 3}, dt::kFloat64), 0));
}

TEST_CASE("Embedding max_norm, norm_type, scale_grad_by_freq: PyTorch's values", "[nn]") {
  // tests/nn/torch_nn_references.py ("Embedding max_norm / norm_type / scale_grad_by_freq"):
  // the table det_input([5, 3], 4) after the forward (looked-up rows over max_norm rescaled in
  // place; row 3 is not looked up), and its gradient of sum(out * c).
  nn::ModuleOptions o;
  o.dtype = dt::kFloat64;
  const Tensor idx = dt::from_vector<int64_t>({0, 2, 4, 2, 1, 4}, {2, 3});
  const DTensor c = nn::local_dtensor(input({2, 3, 3}, 5));
  struct Case {
    std::optional<double> max_norm;
    double norm_type;
    bool scale;
    std::optional<int64_t> pad;
    std::vector<double> weight, grad;
  };
  const Case cases[] = {
      {2.6,
       2.0,
       false,
       std::nullopt,
       {-0.4746928658378113, -2.3734643291890563, 0.9493857316756226, -0.9493857316756226,
        2.3734643291890563, 0.4746928658378113, -1.5, 2.0, 0.0, -2.0, 1.5, -0.5, -2.263009448636196,
        0.9052037794544784, -0.9052037794544784},
       {0, -2, 1.5, -2, 1.5, -0.5, -2, -0.5, 1, 0, 0, 0, -3.5, 3.5, -0.5}},
      {1.5,
       1.0,
       true,
       std::nullopt,
       {-0.1874999953125001, -0.9374999765625005, 0.3749999906250002, -0.3749999906250002,
        0.9374999765625005, 0.1874999953125001, -0.6428571244897965, 0.857142832653062, 0.0, -2.0,
        1.5, -0.5, -0.8333333148148152, 0.33333332592592607, -0.33333332592592607},
       {0, -2, 1.5, -2, 1.5, -0.5, -1, -0.25, 0.5, 0, 0, 0, -1.75, 1.75, -0.25}},
      {std::nullopt,
       2.0,
       true,
       2,
       {-0.5, -2.5, 1, -1, 2.5, 0.5, -1.5, 2, 0, -2, 1.5, -0.5, -2.5, 1, -1},
       {0, -2, 1.5, -2, 1.5, -0.5, 0, 0, 0, 0, 0, 0, -1.75, 1.75, -0.25}},
      {1.0,
       3.0,
       true,
       -1,
       {-0.19541821870244436, -0.9770910935122218, 0.3908364374048887, -0.3908364374048887,
        0.9770910935122218, 0.19541821870244436, -0.6669717476551003, 0.8892956635401337, 0.0, -2.0,
        1.5, -0.5, -0.960646526475146, 0.3842586105900584, -0.3842586105900584},
       {0, -2, 1.5, -2, 1.5, -0.5, -1, -0.25, 0.5, 0, 0, 0, 0, 0, 0}},
  };
  for (const Case& k : cases) {
    INFO("max_norm " << k.max_norm.value_or(-1) << " norm_type " << k.norm_type << " scale "
                     << k.scale << " padding_idx " << k.pad.value_or(-99));
    nn::Embedding m(5, 3, k.pad, k.max_norm, k.norm_type, k.scale, o);
    CHECK(m.max_norm() == k.max_norm);
    CHECK(m.norm_type() == k.norm_type);
    CHECK(m.scale_grad_by_freq() == k.scale);
    Tensor(m.param("weight").to_local()).copy_(input({5, 3}, 4));  // PyTorch's table
    const DTensor out = m(nn::local_dtensor(idx));
    const Tensor after = m.param("weight").to_local();
    CHECK(tt::same_values(after, ref(k.weight, {5, 3}), 1e-15));
    CHECK(tt::same_values(out.to_local(), dt::embedding(idx, after), 0));
    dt::sum(dt::mul(out, c)).backward();
    CHECK(tt::same_values(m.param("weight").grad().to_local(), ref(k.grad, {5, 3}), 1e-15));
  }
  // The shorter forms, and {} as the ModuleOptions after each.
  CHECK(nn::Embedding(5, 3, std::nullopt, 1.0, {}).max_norm() == 1.0);
  CHECK(nn::Embedding(5, 3, 0, std::nullopt, 1.0, {}).norm_type() == 1.0);
  CHECK(nn::Embedding(5, 3, std::nullopt, std::nullopt, 2.0, true, {}).scale_grad_by_freq());
  CHECK_FALSE(nn::Embedding(5, 3, o).max_norm().has_value());
}

namespace {
// A module with one buffer, to share.
struct WithBuffer : nn::Module {
  explicit WithBuffer(DTensor b) { register_buffer("stat", std::move(b)); }
  std::string type_name() const override { return "WithBuffer"; }
};
struct Parent : nn::Module {
  std::string type_name() const override { return "Parent"; }
};
}  // namespace

TEST_CASE("named_buffers lists a buffer reached twice once (remove_duplicate)", "[nn]") {
  const DTensor stat = nn::local_dtensor(dt::zeros({3}));
  auto shared = std::make_shared<WithBuffer>(stat);
  Parent root;
  root.register_module("a", shared);
  root.register_module("b", shared);                              // the same module again
  root.register_module("c", std::make_shared<WithBuffer>(stat));  // the same tensor again
  root.register_module("d", std::make_shared<WithBuffer>(nn::local_dtensor(dt::zeros({3}))));
  CHECK(names(root.named_buffers()) == std::vector<std::string>{"a.stat", "d.stat"});
}

TEST_CASE("round-9 layers give PyTorch's values and gradients", "[nn]") {
  const nn::ModuleOptions f64 = tt::inventory::f64();
  const std::vector<tt::inventory::ModuleCase> cases = {
      {"PixelShuffle(2)", std::make_shared<nn::PixelShuffle>(2), "PixelShuffle"},
      {"PixelUnshuffle(2)", std::make_shared<nn::PixelUnshuffle>(2), "PixelUnshuffle"},
      {"ChannelShuffle(3)", std::make_shared<nn::ChannelShuffle>(3), "ChannelShuffle"},
      {"LocalResponseNorm(3)", std::make_shared<nn::LocalResponseNorm>(3), "LocalResponseNorm"},
      {"LocalResponseNorm(2,0.01,0.5,2) 3d",
       std::make_shared<nn::LocalResponseNorm>(2, 0.01, 0.5, 2.0), "LocalResponseNorm"},
      {"InstanceNorm3d(2,affine)",
       std::make_shared<nn::InstanceNorm3d>(2, 1e-5, 0.1, true, false, f64), "InstanceNorm3d"},
      {"Unfold(2)", std::make_shared<nn::Unfold>(dt::Shape{2}), "Unfold"},
      {"Unfold((2,3),(1,2),1,(2,1))",
       std::make_shared<nn::Unfold>(dt::Shape{2, 3}, dt::Shape{1, 2}, dt::Shape{1},
                                    dt::Shape{2, 1}),
       "Unfold"},
      {"Unfold(2,stride=2) unbatched",
       std::make_shared<nn::Unfold>(dt::Shape{2}, dt::Shape{1}, dt::Shape{0}, dt::Shape{2}),
       "Unfold"},
      {"Fold((4,5),2)", std::make_shared<nn::Fold>(dt::Shape{4, 5}, dt::Shape{2}), "Fold"},
      {"Fold((5,6),(2,3),(1,2),1,(2,1))",
       std::make_shared<nn::Fold>(dt::Shape{5, 6}, dt::Shape{2, 3}, dt::Shape{1, 2}, dt::Shape{1},
                                  dt::Shape{2, 1}),
       "Fold"},
      {"Fold((4,4),2,stride=2) unbatched",
       std::make_shared<nn::Fold>(dt::Shape{4, 4}, dt::Shape{2}, dt::Shape{1}, dt::Shape{0},
                                  dt::Shape{2}),
       "Fold"},
  };
  tt::inventory::check_modules(cases);
  for (const auto& [name, m] : std::vector<std::pair<const char*, std::shared_ptr<nn::Bilinear>>>{
           {"Bilinear(3,4,2)", std::make_shared<nn::Bilinear>(3, 4, 2, true, f64)},
           {"Bilinear(3,2,4,bias=False) 3d",
            std::make_shared<nn::Bilinear>(3, 2, 4, false, f64)}}) {
    CHECK(m->type_name() == "Bilinear");
    tt::inventory::check_module(*m, name,
                                [&](const std::vector<DTensor>& in) { return (*m)(in[0], in[1]); });
  }
  nn::Bilinear bl(3, 4, 2, true, f64);
  CHECK(bl.named_parameters()[0].second.shape() == dt::Shape{2, 3, 4});
  const DTensor x3 = nn::local_dtensor(tt::det_input({2, 5, 3}, 1, -1.0, 0.5, dt::kFloat64));
  CHECK_THROWS_WITH(bl(x3, x3), Catch::Contains("[bilinear] expected input1 (*, 3) and input2 "
                                                "(*, 4) with the same leading dims"));
  CHECK_THROWS_WITH(nn::ChannelShuffle(2)(x3),
                    Catch::Contains("[channel_shuffle] Number of channels must be divisible by "
                                    "groups. Got 5 channels and 2 groups."));
  CHECK_THROWS_WITH(nn::PixelShuffle(2)(x3),
                    Catch::Contains("[pixel_shuffle] pixel_shuffle expects its input's 'channel' "
                                    "dimension to be divisible by 4, but input.size(-3)=2"));
  CHECK_THROWS_WITH(nn::Fold(dt::Shape{4, 5}, dt::Shape{2})(x3),
                    Catch::Contains("[Fold] Expected size of input's dimension 1 to be divisible "
                                    "by the product of kernel_size, but got input.size(1)=5"));
  CHECK_THROWS_WITH(
      nn::Fold(dt::Shape{4, 5}, dt::Shape{1})(x3),
      Catch::Contains("expected size of input's dimension 2 to match the calculated "
                      "number of sliding blocks 4 * 5 = 20, but got input.size(2)=3"));
  CHECK_THROWS_WITH(nn::Unfold(dt::Shape{2, 2, 2}),
                    Catch::Contains("[Unfold] kernel_size must be one or two ints >= 1, got "));
  CHECK_THROWS_WITH(nn::LocalResponseNorm(2)(nn::local_dtensor(x3.to_local().select(0, 0))),
                    Catch::Contains("[LocalResponseNorm] Expected 3D or higher dimensionality "
                                    "input (got 2 dimensions)"));
}

TEST_CASE("Dropout1d/2d/3d, AlphaDropout, FeatureAlphaDropout: masks and PyTorch's formulas",
          "[nn]") {
  // Nonzero inputs, so out / x recovers each element's factor.
  const Tensor x = tt::det_input({40, 16, 3}, 1, 0.25, 0.5, dt::kFloat64);
  const double p = 0.4;
  dt::Generator gen(11);
  auto factors = [&](nn::Module& m, const Tensor& in, std::vector<double>* grad) {
    DTensor d = nn::local_dtensor(in);
    d.requires_grad_(true);
    const DTensor y = m(d);
    dt::sum(y).backward();
    *grad = d.grad().to_local().to_vector<double>();
    return y.to_local().to_vector<double>();
  };
  const std::vector<double> xv = x.to_vector<double>();
  {  // Dropout1d on (N, C, L) and (C, L): one factor per (n, c), 0 or 1 / (1 - p).
    nn::Dropout1d m(p, &gen);
    CHECK(m.type_name() == "Dropout1d");
    std::vector<double> g;
    const std::vector<double> y = factors(m, x, &g);
    int64_t dropped = 0;
    for (int64_t nc = 0; nc < 40 * 16; ++nc) {
      const double f = y[nc * 3] / xv[nc * 3];
      CHECK((f == 0.0 || std::abs(f - 1.0 / (1.0 - p)) < 1e-15));
      dropped += f == 0.0;
      for (int64_t l = 0; l < 3; ++l) {
        CHECK(std::abs(y[nc * 3 + l] - f * xv[nc * 3 + l]) < 1e-14);
        CHECK(g[nc * 3 + l] == Approx(f).epsilon(1e-15));
      }
    }
    CHECK(std::abs(static_cast<double>(dropped) / 640.0 - p) < 0.06);
    const std::vector<double> yu = factors(m, x.select(0, 0), &g);
    CHECK(yu.size() == 48);
    m.eval();
    const DTensor d = nn::local_dtensor(x);
    CHECK(m(d).to_local().data_ptr() == d.to_local().data_ptr());
  }
  {  // Dropout2d / 3d: the mask has the (N, C) shape of the input.
    nn::Dropout2d d2(p, &gen);
    nn::Dropout3d d3(p, &gen);
    std::vector<double> g;
    const std::vector<double> y2 = factors(d2, x.reshape({40, 16, 3, 1}), &g);
    const std::vector<double> y3 = factors(d3, x.reshape({16, 40, 3, 1}), &g);  // unbatched
    for (int64_t nc = 0; nc < 640; ++nc) {
      CHECK(y2[nc * 3 + 2] * xv[nc * 3] == Approx(y2[nc * 3] * xv[nc * 3 + 2]));
      CHECK(y3[nc * 3 + 2] * xv[nc * 3] == Approx(y3[nc * 3] * xv[nc * 3 + 2]));
    }
    CHECK(nn::Dropout2d().p() == 0.5);
    CHECK(tt::same_values(
        nn::Dropout3d(1.0)(nn::local_dtensor(x.reshape({40, 16, 3, 1, 1}))).to_local(),
        dt::zeros({40, 16, 3, 1, 1}, dt::TensorOptions(dt::kFloat64)), 0));
  }
  // AlphaDropout: kept a x + alpha a p, dropped alpha a (p - 1); gradient a where kept.
  constexpr double kAlpha = 1.7580993408473766;
  const double a = 1.0 / std::sqrt((kAlpha * kAlpha * p + 1.0) * (1.0 - p));
  for (bool feature : {false, true}) {
    INFO("feature " << feature);
    std::shared_ptr<nn::Module> m;
    if (feature) {
      m = std::make_shared<nn::FeatureAlphaDropout>(p, &gen);
    } else {
      m = std::make_shared<nn::AlphaDropout>(p, &gen);
    }
    std::vector<double> g;
    const std::vector<double> y = factors(*m, x, &g);
    int64_t kept = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      const bool keep = g[i] != 0.0;
      kept += keep;
      if (keep) CHECK(g[i] == Approx(a).epsilon(1e-15));
      const double want = keep ? a * xv[i] + kAlpha * a * p : kAlpha * a * (p - 1.0);
      CHECK(std::abs(y[i] - want) < 1e-14);
      if (feature) CHECK((g[i] != 0.0) == (g[i - i % 3] != 0.0));  // one value per (n, c)
    }
    CHECK(std::abs(static_cast<double>(kept) / static_cast<double>(y.size()) - (1.0 - p)) < 0.06);
  }
  CHECK_THROWS_WITH(
      nn::Dropout1d(p)(nn::local_dtensor(x.reshape({40, 16, 3, 1}))),
      Catch::Contains("[Dropout1d] Expected 2D or 3D input, but received a 4D input"));
  CHECK_THROWS_WITH(nn::FeatureAlphaDropout(p)(nn::local_dtensor(x.reshape({-1}))),
                    Catch::Contains("[FeatureAlphaDropout] Feature dropout requires at least 2 "
                                    "dimensions in the input"));
  CHECK_THROWS_WITH(nn::AlphaDropout(1.5),
                    Catch::Contains("[AlphaDropout] dropout probability has to be between 0 and 1, "
                                    "but got 1.5"));
}

TEST_CASE("EmbeddingBag gives PyTorch's bags and gradients", "[nn]") {
  namespace inv = tt::inventory;
  struct Case {
    const char* name;
    nn::EmbeddingBagOptions options;
  };
  const std::vector<Case> cases = {
      {"EmbeddingBag sum 2d per_sample_weights", {.mode = "sum"}},
      {"EmbeddingBag mean offsets empty bag padding_idx=2", {.mode = "mean", .padding_idx = 2}},
      {"EmbeddingBag max offsets include_last_offset padding_idx=-1",
       {.mode = "max", .include_last_offset = true, .padding_idx = -1}},
      {"EmbeddingBag sum offsets padding_idx=0 per_sample_weights",
       {.mode = "sum", .padding_idx = 0}},
      {"EmbeddingBag mean 2d max_norm", {.max_norm = 1.5}},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const inv::RefCase& ref = inv::reference(c.name);
    nn::EmbeddingBag m(6, 3, c.options, inv::f64());
    CHECK(m.type_name() == "EmbeddingBag");
    CHECK(m.named_parameters().size() == 1);
    m.set_parameter("weight", nn::local_dtensor(inv::value(ref, "param:weight")));
    auto int_input = [&](const char* n) {
      const Tensor v = inv::value(ref, n);
      return v.defined() ? nn::local_dtensor(v.to(dt::kInt64)) : DTensor();
    };
    DTensor psw;
    if (inv::value(ref, "psw").defined()) {
      psw = nn::local_dtensor(inv::value(ref, "psw"));
      psw.requires_grad_(true);
    }
    const DTensor out = m.forward_bags(int_input("idx"), int_input("offsets"), psw);
    inv::check_close(out, inv::value(ref, "out"), "out");
    dt::sum(dt::mul(out, nn::local_dtensor(inv::value(ref, "c")))).backward();
    inv::check_close(m.param("weight").grad(), inv::value(ref, "grad:weight"), "grad:weight");
    if (psw.defined()) inv::check_close(psw.grad(), inv::value(ref, "grad:psw"), "grad:psw");
  }
  nn::EmbeddingBag padded(5, 2, {.padding_idx = -2}, inv::f64());
  CHECK(padded.options().padding_idx == 3);
  CHECK(tt::same_values(padded.param("weight").to_local().select(0, 3),
                        dt::zeros({2}, dt::TensorOptions(dt::kFloat64)), 0));
  CHECK(nn::EmbeddingBag(5, 2).options().mode == "mean");
  const DTensor idx = nn::local_dtensor(dt::from_vector<int64_t>({1, 2, 3}, {3}));
  const DTensor offs = nn::local_dtensor(dt::from_vector<int64_t>({1, 2}, {2}));
  CHECK_THROWS_WITH(nn::EmbeddingBag(5, 2, {.mode = "prod"}),
                    Catch::Contains("[EmbeddingBag] mode has to be one of sum, mean or max"));
  CHECK_THROWS_WITH(padded.forward_bags(idx, offs),
                    Catch::Contains("[embedding_bag] offsets[0] has to be 0"));
  CHECK_THROWS_WITH(padded.forward_bags(idx, {}, nn::local_dtensor(dt::ones({3}))),
                    Catch::Contains("per_sample_weights is only supported for mode='sum'"));
  CHECK_THROWS_WITH(padded.forward_bags(idx), Catch::Contains("with 1D offsets for a 1D input"));
}

TEST_CASE("ModuleDict, ParameterList and ParameterDict name their entries as PyTorch's", "[nn]") {
  // PyTorch: ModuleDict({'proj': Linear(3, 2), 'act': ReLU()}) has state_dict keys
  // ['proj.weight', 'proj.bias']; ParameterList([a, b]) ['0', '1']; ParameterDict({'w': a}) ['w'].
  nn::ModuleDict d(
      {{"proj", std::make_shared<nn::Linear>(3, 2)}, {"act", std::make_shared<nn::ReLU>()}});
  CHECK(d.type_name() == "ModuleDict");
  CHECK(d.keys() == std::vector<std::string>{"proj", "act"});
  CHECK(d.contains("act"));
  CHECK(!d.contains("x"));
  CHECK(d["act"].type_name() == "ReLU");
  d.insert("act", std::make_shared<nn::Tanh>());  // replaced in place
  CHECK(d.keys() == std::vector<std::string>{"proj", "act"});
  CHECK(d["act"].type_name() == "Tanh");
  std::vector<std::string> names;
  for (const auto& [n, p] : d.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"proj.weight", "proj.bias"});
  CHECK_THROWS_WITH(d["x"], Catch::Contains("[ModuleDict] no module named 'x'"));
  const DTensor a = nn::local_dtensor(tt::det_input({2, 3}, 1, -1.0, 0.5, dt::kFloat64));
  const DTensor b = nn::local_dtensor(tt::det_input({4}, 2, -1.0, 0.5, dt::kFloat64));
  nn::ParameterList pl({a, b});
  CHECK(pl.size() == 2);
  CHECK(pl[-1].shape() == dt::Shape{4});
  CHECK(pl[0].requires_grad());
  names.clear();
  for (const auto& [n, p] : pl.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"0", "1"});
  CHECK_THROWS_WITH(pl[2], Catch::Contains("[ParameterList] index 2 is out of range"));
  nn::ParameterDict pd({{"w", a}});
  pd.insert("v", b).insert("w", a);
  CHECK(pd.keys() == std::vector<std::string>{"w", "v"});
  CHECK(pd.contains("v"));
  CHECK(pd["v"].shape() == dt::Shape{4});
}
