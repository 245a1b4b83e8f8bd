// models::generate over a step function (one process): a toy bigram model whose logits for the
// next token depend on the current token only, so every expected sequence is worked out here by
// hand. Greedy chains, eos stopping a row (pad after) and the whole batch, the attention mask
// the step receives for a left-padded batch, sampling: transformers' warpers (temperature,
// top-k, top-p, values from transformers 5.24's TemperatureLogitsWarper / TopKLogitsWarper /
// TopPLogitsWarper on the same logits), reproducible seeded draws whose frequencies follow the
// warped distribution; argument errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "dtensor/models/generate.h"
#include "dtensor/rng/generator.h"
#include "dtensor/tensor/creation.h"

namespace dt = dtensor;
namespace models = dtensor::models;
using Catch::Contains;
using dt::Tensor;

namespace {

constexpr int64_t kVocab = 6;

// Bigram logits: from token a the largest logit is at (a + 1) % kVocab, then (a + 2) % kVocab.
std::vector<double> bigram_row(int64_t a) {
  std::vector<double> row(kVocab, 0.0);
  row[(a + 1) % kVocab] = 3.0;
  row[(a + 2) % kVocab] = 2.0;
  return row;
}

// The step: logits [B, S, V] of each input token; records the masks it received.
struct Bigram {
  std::vector<Tensor> masks;
  std::vector<int64_t> lengths;  // S of each call
  Tensor operator()(const Tensor& ids, const Tensor& mask) {
    masks.push_back(mask);
    lengths.push_back(ids.size(1));
    const std::vector<int64_t> v = ids.to_vector<int64_t>();
    std::vector<double> out;
    for (int64_t a : v) {
      const std::vector<double> r = bigram_row(a);
      out.insert(out.end(), r.begin(), r.end());
    }
    const int64_t shape[] = {ids.size(0), ids.size(1), kVocab};
    return dt::from_vector<double>(out, shape).to(dt::kFloat32);
  }
};

Tensor ids(std::vector<int64_t> v, int64_t rows) {
  const int64_t shape[] = {rows, static_cast<int64_t>(v.size()) / rows};
  return dt::from_vector<int64_t>(v, shape);
}

std::vector<int64_t> values(const Tensor& t) {
  return t.to_vector<int64_t>();
}

}  // namespace

TEST_CASE("generate: greedy follows the argmax, prefill then one token per step", "[generate]") {
  Bigram model;
  models::GenerateOptions o;
  o.max_new_tokens = 4;
  const Tensor out = models::generate(std::ref(model), ids({0, 3, 2, 5}, 2), o);
  CHECK(out.shape() == dt::Shape{2, 6});
  CHECK(values(out) == std::vector<int64_t>{0, 3, 4, 5, 0, 1, 2, 5, 0, 1, 2, 3});
  CHECK(model.lengths == std::vector<int64_t>{2, 1, 1, 1});  // no step after the last token
  for (const Tensor& m : model.masks) CHECK(!m.defined());
  o.max_new_tokens = 0;
  CHECK(values(models::generate(std::ref(model), ids({1, 2}, 1), o)) == std::vector<int64_t>{1, 2});
}

TEST_CASE("generate: eos finishes a row, pad after it, and stops once every row is done",
          "[generate]") {
  Bigram model;
  models::GenerateOptions o;
  o.max_new_tokens = 6;
  o.eos_token_id = {3};
  o.pad_token_id = 5;
  // Row 0 reaches 3 after 2 tokens, row 1 after 4: stop there (6 columns, not 8).
  Tensor out = models::generate(std::ref(model), ids({0, 1, 4, 5}, 2), o);
  CHECK(values(out) == std::vector<int64_t>{0, 1, 2, 3, 5, 5, 4, 5, 0, 1, 2, 3});
  // pad defaults to the first eos id, as transformers.
  o.pad_token_id.reset();
  o.eos_token_id = {3, 0};  // row 1 finishes first, at 0, then gets 3s
  out = models::generate(std::ref(model), ids({0, 1, 4, 5}, 2), o);
  CHECK(values(out) == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 0, 3});
}

TEST_CASE("generate: a left-padded batch passes the mask, one more column per step", "[generate]") {
  Bigram model;
  models::GenerateOptions o;
  o.max_new_tokens = 3;
  o.attention_mask = ids({0, 0, 1, 1, 1, 1}, 2).to(dt::kBool);
  const Tensor out = models::generate(std::ref(model), ids({0, 0, 2, 1, 2, 3}, 2), o);
  CHECK(values(out) == std::vector<int64_t>{0, 0, 2, 3, 4, 5, 1, 2, 3, 4, 5, 0});
  REQUIRE(model.masks.size() == 3);
  CHECK(values(model.masks[0]) == std::vector<int64_t>{0, 0, 1, 1, 1, 1});
  CHECK(values(model.masks[2]) == std::vector<int64_t>{0, 0, 1, 1, 1, 1, 1, 1, 1, 1});
}

TEST_CASE("sampling_probs: transformers' temperature, top-k and top-p warpers in order",
          "[generate]") {
  const std::vector<double> logits = {1.0,  2.5, -0.5, 2.5,   0.25, 3.0,  -2.0, 1.5,
                                      0.0,  0.0, 0.0,  0.0,   0.0,  0.0,  0.0,  4.0,
                                      -1.0, 0.5, 0.75, -0.25, 2.0,  1.25, 0.0,  -3.0};
  const int64_t shape[] = {3, 8};
  const Tensor x = dt::from_vector<double>(logits, shape);
  // transformers' warpers for (temperature, top_k, top_p), then softmax (float64): `want` holds
  // the probabilities of x's rows.
  const auto check = [&](double temperature, int64_t top_k, double top_p,
                         const std::vector<std::vector<double>>& want) {
    INFO("temperature " << temperature << " top_k " << top_k << " top_p " << top_p);
    models::GenerateOptions o;
    o.temperature = temperature;
    o.top_k = top_k;
    o.top_p = top_p;
    const std::vector<double> got = models::sampling_probs(x, o).to_vector<double>();
    const size_t v = static_cast<size_t>(x.size(1));
    REQUIRE(got.size() == want.size() * v);
    for (size_t i = 0; i < got.size(); ++i) {
      CHECK(got[i] == Approx(want[i / v].at(i % v)).margin(1e-12));
    }
  };
  check(0.7, 4, 0.8,
        {{0.0, 0.24735778167042277, 0.0, 0.24735778167042277, 0.0, 0.5052844366591546, 0.0, 0.0},
         {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0},
         {0.0, 0.0, 0.0, 0.0, 0.7448684956686834, 0.25513150433131665, 0.0, 0.0}});
  // Two tokens tie at 2.5: the ascending order keeps the later one (index 3), as torch.sort.
  check(1.0, 0, 0.6,
        {{0.0, 0.0, 0.0, 0.37754066879814546, 0.0, 0.6224593312018546, 0.0, 0.0},
         {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0},
         {0.0, 0.0, 0.0, 0.0, 0.679178699175393, 0.320821300824607, 0.0, 0.0}});
  // Ties with the k-th largest are kept (row 1: all seven zeros).
  check(1.3, 3, 1.0,
        {{0.0, 0.2882634243910705, 0.0, 0.2882634243910705, 0.0, 0.42347315121785906, 0.0, 0.0},
         {0.03485345958593231, 0.03485345958593231, 0.03485345958593231, 0.03485345958593231,
          0.03485345958593231, 0.03485345958593231, 0.03485345958593231, 0.756025782898474},
         {0.0, 0.0, 0.1966658547660093, 0.0, 0.5144223298323569, 0.2889118154016338, 0.0, 0.0}});
  check(
      0.5, 0, 1.0,
      {{0.010125259413218547, 0.20337127180105466, 0.0005041069826482699, 0.20337127180105466,
        0.002259250754415851, 0.5528204325674123, 2.5098008809827013e-05, 0.027523308671385877},
       {0.0003346767271617714, 0.0003346767271617714, 0.0003346767271617714, 0.0003346767271617714,
        0.0003346767271617714, 0.0003346767271617714, 0.0003346767271617714, 0.9976572629098677},
       {0.001787195186017224, 0.035896774897692205, 0.059183776323359555, 0.008009653131734197,
        0.721005997630953, 0.16087818371937296, 0.013205685489220065, 3.273362165077559e-05}});
}

TEST_CASE("generate: seeded sampling is reproducible and follows the warped distribution",
          "[generate]") {
  // A step whose next-token logits are fixed: every draw is from one distribution.
  const std::vector<double> row = {0.5, 2.0, 1.0, -1.0, 1.5, 0.0};
  const auto step = [&](const Tensor& in, const Tensor&) {
    std::vector<double> out;
    for (int64_t b = 0; b < in.size(0); ++b) out.insert(out.end(), row.begin(), row.end());
    const int64_t shape[] = {in.size(0), kVocab};
    return dt::from_vector<double>(out, shape);
  };
  models::GenerateOptions o;
  o.do_sample = true;
  o.max_new_tokens = 3000;
  o.top_k = 4;
  o.temperature = 0.9;
  o.seed = 1234;
  const Tensor a = models::generate(step, ids({0, 0}, 2), o);
  CHECK(values(a) == values(models::generate(step, ids({0, 0}, 2), o)));  // the same seed
  o.seed = 99;
  CHECK(values(a) != values(models::generate(step, ids({0, 0}, 2), o)));
  const int64_t shape[] = {1, kVocab};
  const std::vector<double> p =
      models::sampling_probs(dt::from_vector<double>(row, shape), o).to_vector<double>();
  std::vector<double> freq(kVocab, 0.0);
  const std::vector<int64_t> drawn = values(a);
  for (size_t i = 0; i < drawn.size(); ++i) {
    if (i % 3001 != 0) freq[static_cast<size_t>(drawn[i])] += 1.0 / 6000.0;  // skip the prompt
  }
  for (int64_t t = 0; t < kVocab; ++t) {
    INFO("token " << t);
    CHECK(std::abs(freq[t] - p[t]) < 0.025);  // ~4 standard deviations
    if (p[t] == 0) CHECK(freq[t] == 0);       // top_k removed it
  }
  CHECK(p[3] == 0);
  CHECK(p[5] == 0);
  // The generator form: draws advance the caller's generator.
  dt::Generator gen(1234);
  o.seed.reset();
  o.generator = &gen;
  CHECK(values(a) == values(models::generate(step, ids({0, 0}, 2), o)));
  CHECK(gen.offset() > 0);
}

TEST_CASE("generate: argument errors name the argument", "[generate]") {
  Bigram model;
  models::GenerateOptions o;
  CHECK_THROWS_WITH(models::generate(std::ref(model), ids({0, 1}, 1).to(dt::kInt32), o),
                    Contains("[generate] prompt_ids must be int64 [batch, prompt_len]"));
  o.attention_mask = ids({1, 0}, 1);
  CHECK_THROWS_WITH(models::generate(std::ref(model), ids({0, 1}, 1), o),
                    Contains("attention_mask row 0 has padding after a prompt token"));
  o.attention_mask = ids({0, 0}, 1);
  CHECK_THROWS_WITH(models::generate(std::ref(model), ids({0, 1}, 1), o),
                    Contains("attention_mask row 0 has no prompt token"));
  o.attention_mask = ids({1, 1, 1}, 1);
  CHECK_THROWS_WITH(models::generate(std::ref(model), ids({0, 1}, 1), o),
                    Contains("attention_mask is int64 [1, 3], expected int64 or bool [1, 2]"));
  o.attention_mask = Tensor();
  o.do_sample = true;
  o.temperature = 0;
  CHECK_THROWS_WITH(models::generate(std::ref(model), ids({0, 1}, 1), o),
                    Contains("[generate] temperature 0"));
  o.temperature = 1;
  o.top_p = 0;
  CHECK_THROWS_WITH(models::generate(std::ref(model), ids({0, 1}, 1), o),
                    Contains("top_p 0, expected in (0, 1]"));
  o.top_p = 1;
  const auto nan_step = [](const Tensor& in, const Tensor&) {
    return dt::full({in.size(0), 1, 4}, std::nan(""), dt::TensorOptions(dt::kFloat32));
  };
  CHECK_THROWS_WITH(models::generate(nan_step, ids({0, 1}, 1), o),
                    Contains("the logits of row 0 hold NaN"));
}
