// scaled_dot_product_attention on one process: the blocked kernels against the math path
// (scores materialised) on shapes that span several 128-row blocks, with and without causality
// and masks, in float32 and float64; gradients against autograd through the math path; rows
// that see no key; argument errors.
#include <catch2/catch.hpp>
#include <limits>
#include <tuple>

#include "dtensor/autograd/engine.h"
#include "dtensor/ops/attention/attention.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/view/copy_ops.h"
#include "tests/common/ops_dtensor_test_util.h"
#include "tests/ops/attention/attention_reference.h"
#include "tests/ops/common/ew_test_util.h"

namespace dt = dtensor;
using dt::DTensor;
using dt::Tensor;

namespace {

Tensor random(dt::IntSpan shape, dt::DType dtype, uint32_t seed) {
  return dt::ewtest::make(dt::ewtest::random_values(dt::shape_numel(shape), dtype, seed), shape,
                          dtype);
}

// A bool mask where every query row keeps at least its first key (no row sees nothing).
Tensor keep_mask(dt::IntSpan shape, uint32_t seed) {
  Tensor m = random(shape, dt::kBool, seed);
  m.narrow(static_cast<int64_t>(shape.size()) - 1, 0, 1).fill_(true);
  return m;
}

}  // namespace

TEST_CASE("attention: blocked forward equals the math path across several blocks", "[attention]") {
  struct Case {
    dt::Shape q, k;
    int64_t ev;
    bool causal;
    int mask;  // 0 none, 2 / 4: bool mask of that rank, -2: additive [L, S]
  };
  const Case cases[] = {
      {{2, 3, 200, 8}, {2, 3, 300, 8}, 5, false, 0}, {{1, 2, 260, 4}, {1, 2, 260, 4}, 4, true, 0},
      {{2, 1, 130, 6}, {2, 1, 129, 6}, 3, true, 2},  {{1, 2, 140, 5}, {1, 2, 257, 5}, 5, false, 4},
      {{2, 2, 50, 3}, {2, 2, 70, 3}, 2, true, -2},   {{1, 1, 1, 2}, {1, 1, 1, 2}, 2, false, 0}};
  for (dt::DType dtype : {dt::kFloat64, dt::kFloat32}) {
    for (const Case& c : cases) {
      INFO("q " << dt::shape_str(c.q) << " k " << dt::shape_str(c.k) << " causal " << c.causal
                << " mask " << c.mask << " " << dt::dtype_name(dtype));
      const Tensor q = random(c.q, dtype, 1), k = random(c.k, dtype, 2);
      const Tensor v = random({c.k[0], c.k[1], c.k[2], c.ev}, dtype, 3);
      Tensor mask;
      if (c.mask == 2) mask = keep_mask({c.q[2], c.k[2]}, 4);
      if (c.mask == 4) mask = keep_mask({c.q[0], c.q[1], c.q[2], c.k[2]}, 4);
      if (c.mask == -2) mask = random({c.q[2], c.k[2]}, dtype, 5);
      const double scale = dt::default_attention_scale(c.q[3]);
      const dt::AttentionResult r = dt::attention_forward(q, k, v, mask, {scale, c.causal, 0});
      const Tensor want = dt::test::attention_reference(
                              dt::local_dtensor(q), dt::local_dtensor(k), dt::local_dtensor(v),
                              mask.defined() ? dt::local_dtensor(mask) : DTensor(), c.causal, scale)
                              .to_local();
      const double tol = dtype == dt::kFloat64 ? 1e-12 : 1e-5;
      CHECK(dt::test::same_values(r.out, want, tol));
      CHECK(r.lse.sizes() == dt::Shape{c.q[0], c.q[1], c.q[2]});
    }
  }
}

TEST_CASE("attention: a causal block of queries starting mid-block (a query shard) is exact",
          "[attention]") {
  // Rows 150..299 of a 300 x 300 causal attention, as the second of two query shards computes
  // them: key blocks past some rows' diagonals leave those rows without keys in that block.
  const Tensor q = random({1, 2, 300, 4}, dt::kFloat64, 41),
               k = random({1, 2, 300, 4}, dt::kFloat64, 42);
  const Tensor v = random({1, 2, 300, 3}, dt::kFloat64, 43);
  const dt::AttentionResult full = dt::attention_forward(q, k, v, Tensor(), {0.5, true, 0});
  const dt::AttentionResult part =
      dt::attention_forward(q.narrow(2, 150, 150).contiguous(), k, v, Tensor(), {0.5, true, 150});
  CHECK(dt::test::same_values(part.out, full.out.narrow(2, 150, 150).contiguous(), 1e-12));
  CHECK(dt::test::same_values(part.lse, full.lse.narrow(2, 150, 150).contiguous(), 1e-12));
  // The log-sum-exp is logsumexp of the scaled, causally masked scores.
  const Tensor want_out = dt::test::attention_reference(dt::local_dtensor(q), dt::local_dtensor(k),
                                                        dt::local_dtensor(v), DTensor(), true, 0.5)
                              .to_local();
  CHECK(dt::test::same_values(full.out, want_out, 1e-12));
  Tensor s = dt::mul(dt::matmul(q, k.transpose(2, 3)), dt::Scalar(0.5));
  s = dt::add(s, dt::triu(dt::full({300, 300}, dt::Scalar(-std::numeric_limits<double>::infinity()),
                                   dt::kFloat64),
                          1));
  CHECK(dt::test::same_values(full.lse, dt::logsumexp(s, {3}), 1e-12));
}

TEST_CASE("attention: the backward of a causal query shard equals the full backward's share",
          "[attention]") {
  // Rows [a, a + n) of a causal attention computed as a query shard (q_offset a) against all
  // keys: with the upstream gradient zero outside those rows, the full backward's dk and dv
  // and its dq rows are exactly the shard's. Shards starting mid-block see a last key block
  // cut short of a whole block (the gradients' blocks are then filled through a narrowed view).
  const Tensor q = random({2, 2, 150, 4}, dt::kFloat64, 51),
               k = random({2, 2, 150, 4}, dt::kFloat64, 52);
  const Tensor v = random({2, 2, 150, 3}, dt::kFloat64, 53);
  const Tensor up = random({2, 2, 150, 3}, dt::kFloat64, 54);
  const dt::AttentionParams full_p{0.4, true, 0};
  const dt::AttentionResult full = dt::attention_forward(q, k, v, Tensor(), full_p);
  for (const auto& [a, n] :
       {std::pair{37, 93}, std::pair{0, 70}, std::pair{64, 86}, std::pair{149, 1}}) {
    INFO("rows " << a << " + " << n);
    Tensor g = dt::zeros({2, 2, 150, 3}, dt::kFloat64);
    g.narrow(2, a, n).copy_(up.narrow(2, a, n));
    const Tensor no_lse = dt::zeros({2, 2, 150}, dt::kFloat64);
    const dt::AttentionGrads want =
        dt::attention_backward(g, no_lse, q, k, v, Tensor(), full.out, full.lse, full_p);
    const dt::AttentionParams part_p{0.4, true, a};
    const Tensor qa = q.narrow(2, a, n).contiguous();
    const dt::AttentionResult part = dt::attention_forward(qa, k, v, Tensor(), part_p);
    const dt::AttentionGrads got =
        dt::attention_backward(up.narrow(2, a, n).contiguous(), dt::zeros({2, 2, n}, dt::kFloat64),
                               qa, k, v, Tensor(), part.out, part.lse, part_p);
    CHECK(dt::test::same_values(got.q, want.q.narrow(2, a, n).contiguous(), 1e-12));
    CHECK(dt::test::same_values(got.k, want.k, 1e-12));
    CHECK(dt::test::same_values(got.v, want.v, 1e-12));
  }
}

TEST_CASE(
    "attention: a causal backward at any query offset equals the backward under the "
    "same mask given explicitly",
    "[attention]") {
  // Causality with q_offset o keeps key j for query row i when j <= i + o: the same as the
  // boolean mask [L, S] built from that rule, which the backward takes through its mask path.
  // More queries than keys, offsets below zero (leading rows see no key) and above, a nonzero
  // gradient of the log-sum-exp, float32 (the in-place GEMM path) and float64.
  for (dt::DType d : {dt::kFloat32, dt::kFloat64}) {
    const int64_t L = 130, S = 100;
    const Tensor q = random({2, 2, L, 4}, d, 61), k = random({2, 2, S, 4}, d, 62);
    const Tensor v = random({2, 2, S, 3}, d, 63), g = random({2, 2, L, 3}, d, 64);
    const Tensor g_lse = random({2, 2, L}, d, 65);
    for (int64_t offset : {-5, 0, 7, -40}) {
      INFO(dt::dtype_name(d) << " q_offset " << offset);
      std::vector<double> keep(static_cast<size_t>(L * S));
      for (int64_t i = 0; i < L; ++i) {
        for (int64_t j = 0; j < S; ++j) keep[static_cast<size_t>(i * S + j)] = j <= i + offset;
      }
      const Tensor mask = dt::ewtest::make(keep, {L, S}, dt::kBool);
      const dt::AttentionParams causal{0.45, true, offset}, plain{0.45, false, 0};
      const dt::AttentionResult fc = dt::attention_forward(q, k, v, Tensor(), causal);
      const dt::AttentionResult fm = dt::attention_forward(q, k, v, mask, plain);
      const double tol = d == dt::kFloat32 ? 2e-5 : 1e-12;
      CHECK(dt::test::same_values(fc.out, fm.out, tol));
      const dt::AttentionGrads gc =
          dt::attention_backward(g, g_lse, q, k, v, Tensor(), fc.out, fc.lse, causal);
      const dt::AttentionGrads gm =
          dt::attention_backward(g, g_lse, q, k, v, mask, fm.out, fm.lse, plain);
      CHECK(dt::test::same_values(gc.q, gm.q, tol));
      CHECK(dt::test::same_values(gc.k, gm.k, tol));
      CHECK(dt::test::same_values(gc.v, gm.v, tol));
    }
  }
}

TEST_CASE("attention: gradients equal autograd through the math path", "[attention]") {
  for (bool causal : {false, true}) {
    for (int mask_rank : {0, 2, 4}) {
      INFO("causal " << causal << " mask " << mask_rank);
      const dt::Shape qs = {2, 2, 150, 4}, ks = {2, 2, causal ? 150 : 170, 4};
      const Tensor q = random(qs, dt::kFloat64, 11), k = random(ks, dt::kFloat64, 12);
      const Tensor v = random({2, 2, ks[2], 3}, dt::kFloat64, 13);
      const Tensor up = random({2, 2, 150, 3}, dt::kFloat64, 14);
      Tensor mask;
      if (mask_rank == 2) mask = keep_mask({150, ks[2]}, 15);
      if (mask_rank == 4) mask = keep_mask({2, 2, 150, ks[2]}, 15);
      const DTensor dmask = mask.defined() ? dt::local_dtensor(mask) : DTensor();
      std::vector<Tensor> grads[2];
      for (int path = 0; path < 2; ++path) {
        DTensor a = dt::local_dtensor(q.clone()), b = dt::local_dtensor(k.clone()),
                c = dt::local_dtensor(v.clone());
        for (DTensor* t : {&a, &b, &c}) t->requires_grad_();
        const DTensor out = path == 0
                                ? dt::scaled_dot_product_attention(a, b, c, dmask, 0.0, causal, 0.3)
                                : dt::test::attention_reference(a, b, c, dmask, causal, 0.3);
        dt::sum(dt::mul(out, dt::local_dtensor(up))).backward();
        for (DTensor* t : {&a, &b, &c}) grads[path].push_back(t->grad().to_local());
      }
      for (size_t i = 0; i < 3; ++i) CHECK(dt::test::same_values(grads[0][i], grads[1][i], 1e-11));
    }
  }
}

TEST_CASE("attention: a query row that sees no key gives 0 and no NaN gradient", "[attention]") {
  const Tensor q = random({1, 1, 3, 2}, dt::kFloat64, 21),
               k = random({1, 1, 4, 2}, dt::kFloat64, 22);
  const Tensor v = random({1, 1, 4, 2}, dt::kFloat64, 23);
  Tensor mask = dt::ones({3, 4}, dt::kBool);
  mask.narrow(0, 1, 1).fill_(false);  // row 1 sees nothing
  const dt::AttentionResult r = dt::attention_forward(q, k, v, mask, {0.5, false, 0});
  const std::vector<double> out = r.out.to_vector<double>();
  CHECK(out[2] == 0.0);
  CHECK(out[3] == 0.0);
  CHECK(std::isinf(r.lse.to_vector<double>()[1]));
  const dt::AttentionGrads g = dt::attention_backward(dt::ones({1, 1, 3, 2}, dt::kFloat64),
                                                      dt::zeros({1, 1, 3}, dt::kFloat64), q, k, v,
                                                      mask, r.out, r.lse, {0.5, false, 0});
  for (const Tensor& t : {g.q, g.k, g.v}) {
    for (double x : t.to_vector<double>()) CHECK(std::isfinite(x));
  }
  CHECK(g.q.to_vector<double>()[2] == 0.0);
}

TEST_CASE("attention: a NaN or inf score behind the causal diagonal does not reach the rows",
          "[attention]") {
  // PyTorch's causal attention ignores a hidden key whatever its score; the fused kernel added
  // -inf to it, so a NaN k row or a +inf / NaN float mask entry behind the diagonal made the
  // row NaN (the parity sweep's edge inputs). Rows 0 and 1 do not see key 2: they must equal
  // the result with key 2 and the mask's hidden entries made finite.
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor q = random({1, 1, 3, 2}, dt::kFloat64, 31),
               v = random({1, 1, 3, 2}, dt::kFloat64, 33);
  const Tensor clean_k = random({1, 1, 3, 2}, dt::kFloat64, 32);
  Tensor k = clean_k.clone();
  k.narrow(2, 2, 1).fill_(std::numeric_limits<double>::quiet_NaN());
  const Tensor clean_mask = random({3, 3}, dt::kFloat64, 34);
  Tensor mask = clean_mask.clone();
  mask.narrow(0, 0, 1).narrow(1, 1, 1).fill_(inf);
  mask.narrow(0, 1, 1).narrow(1, 2, 1).fill_(std::numeric_limits<double>::quiet_NaN());
  const dt::AttentionParams p{0.5, true, 0};
  for (const auto& [kk, m, cm] :
       {std::tuple{k, Tensor(), Tensor()}, std::tuple{clean_k, mask, clean_mask}}) {
    const dt::AttentionResult r = dt::attention_forward(q, kk, v, m, p);
    const dt::AttentionResult c = dt::attention_forward(q, clean_k, v, cm, p);
    const std::vector<double> out = r.out.to_vector<double>(), expect = c.out.to_vector<double>();
    const std::vector<double> lse = r.lse.to_vector<double>(),
                              lse_expect = c.lse.to_vector<double>();
    for (int i = 0; i < 4; ++i) CHECK(out[i] == expect[i]);
    for (int i = 0; i < 2; ++i) CHECK(lse[i] == lse_expect[i]);
    // The gradients: the mask's case only (a NaN k row makes q's gradient NaN on every row,
    // 0 * NaN in ds k, as PyTorch's).
    if (!m.defined()) continue;
    const Tensor up = dt::ones({1, 1, 3, 2}, dt::kFloat64),
                 up_lse = dt::zeros({1, 1, 3}, dt::kFloat64);
    const dt::AttentionGrads g = dt::attention_backward(up, up_lse, q, kk, v, m, r.out, r.lse, p);
    const dt::AttentionGrads e =
        dt::attention_backward(up, up_lse, q, clean_k, v, cm, c.out, c.lse, p);
    const std::vector<double> gq = g.q.to_vector<double>(), eq = e.q.to_vector<double>();
    for (int i = 0; i < 4; ++i) CHECK(gq[i] == eq[i]);
  }
}

TEST_CASE("attention: a causal float mask's hidden entries get no gradient, whatever v holds",
          "[attention]") {
  // A NaN v row makes every output row NaN (0 * NaN in p v, as PyTorch's) and dp NaN on every
  // query row, hidden keys included; ds there is 0 * NaN. The mask's gradient at hidden entries
  // was that NaN; PyTorch 2.15's (causality a masked fill of the scores) is 0 there and NaN at
  // the visible entries (measured: [[nan, 0, 0], [nan, nan, 0], [nan, nan, nan]]).
  const Tensor q = random({1, 1, 3, 2}, dt::kFloat64, 41),
               k = random({1, 1, 3, 2}, dt::kFloat64, 42);
  Tensor v = random({1, 1, 3, 2}, dt::kFloat64, 43);
  v.narrow(2, 2, 1).fill_(std::numeric_limits<double>::quiet_NaN());
  DTensor mask = dt::local_dtensor(random({3, 3}, dt::kFloat64, 44));
  mask.requires_grad_();
  const DTensor out =
      dt::scaled_dot_product_attention(dt::local_dtensor(q), dt::local_dtensor(k),
                                       dt::local_dtensor(v), mask, 0.0, /*is_causal=*/true, 0.5);
  dt::sum(out).backward();
  const std::vector<double> g = mask.grad().to_local().to_vector<double>();
  for (int i : {1, 2, 5}) CHECK(g[i] == 0.0);  // hidden: (0, 1), (0, 2), (1, 2)
  for (int i : {0, 3, 4, 6, 7, 8}) CHECK(std::isnan(g[i]));
}

TEST_CASE("attention: grouped-query attention repeats each k/v head for its q heads",
          "[attention]") {
  const Tensor q = random({2, 6, 5, 4}, dt::kFloat64, 31),
               k = random({2, 2, 7, 4}, dt::kFloat64, 32);
  const Tensor v = random({2, 2, 7, 3}, dt::kFloat64, 33);
  const DTensor got = dt::scaled_dot_product_attention(dt::local_dtensor(q), dt::local_dtensor(k),
                                                       dt::local_dtensor(v), DTensor(), 0.0, true,
                                                       std::nullopt, /*enable_gqa=*/true);
  const DTensor want = dt::scaled_dot_product_attention(
      dt::local_dtensor(q), dt::local_dtensor(dt::repeat_interleave(k, 3, 1)),
      dt::local_dtensor(dt::repeat_interleave(v, 3, 1)), DTensor(), 0.0, true);
  CHECK(dt::equal(got.to_local(), want.to_local()));
  CHECK_THROWS_WITH(dt::scaled_dot_product_attention(dt::local_dtensor(q), dt::local_dtensor(k),
                                                     dt::local_dtensor(v)),
                    Catch::Contains("shapes"));
  CHECK_THROWS_WITH(dt::scaled_dot_product_attention(
                        dt::local_dtensor(q), dt::local_dtensor(k.narrow(1, 0, 1)),
                        dt::local_dtensor(v), DTensor(), 0.0, false, std::nullopt, true),
                    Catch::Contains("enable_gqa: q has 6 heads, k 1 and v 2"));
}

TEST_CASE("attention: argument errors name the op and the argument", "[attention]") {
  const Tensor q = dt::zeros({1, 2, 3, 4}), k = dt::zeros({1, 2, 5, 4}),
               v = dt::zeros({1, 2, 5, 6});
  CHECK_THROWS_WITH(dt::attention_forward(q, k.narrow(3, 0, 3), v, Tensor(), {}),
                    Catch::Contains("[scaled_dot_product_attention] shapes"));
  CHECK_THROWS_WITH(dt::attention_forward(q, k, v.to(dt::kFloat64), Tensor(), {}),
                    Catch::Contains("share one floating dtype"));
  CHECK_THROWS_WITH(dt::attention_forward(q, k, v, dt::zeros({5, 3}, dt::kBool), {}),
                    Catch::Contains("the mask has shape [5, 3], expected [3, 5]"));
  CHECK_THROWS_WITH(dt::scaled_dot_product_attention(
                        dt::local_dtensor(q), dt::local_dtensor(k), dt::local_dtensor(v),
                        dt::local_dtensor(dt::zeros({3, 5}, dt::kInt64))),
                    Catch::Contains("the mask has dtype int64"));
  // PyTorch's argument order: a 5th argument is dropout_p, which this level refuses.
  CHECK_THROWS_WITH(dt::scaled_dot_product_attention(dt::local_dtensor(q), dt::local_dtensor(k),
                                                     dt::local_dtensor(v), DTensor(), 0.1),
                    Catch::Contains("[scaled_dot_product_attention] dropout_p 0.1: dropout in "
                                    "attention is done by nn::functional"));
}
