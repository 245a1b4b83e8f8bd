// The causal alignment of scaled_dot_product_attention on one process: CausalAlign::kLowerRight
// (PyTorch's causal_lower_right: query i of L sees keys j <= i + S - L) against the float64 math
// path with that diagonal, forward and gradients, for fewer queries than keys (prefill after a
// cached prefix), as many (the two alignments agree) and one query (a decode step), also across
// several 128-row blocks; and nn::functional's math path (dropout) with the same diagonal.
#include <catch2/catch.hpp>

#include "dtensor/nn/functional.h"
#include "dtensor/ops/attention/attention.h"
#include "dtensor/ops/reduction/reduction.h"
#include "tests/common/ops_dtensor_test_util.h"
#include "tests/ops/attention/attention_reference.h"

namespace dt = dtensor;
namespace tt = dtensor::test;
using dt::CausalAlign;
using dt::DTensor;
using dt::Tensor;

namespace {

struct Grads {
  Tensor out, q, k, v;
};

// out and the gradients of sum(out * up) by `attend` on fresh leaves of q, k, v.
template <typename F>
Grads run(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& up, F attend) {
  DTensor a = dt::local_dtensor(q.clone()), b = dt::local_dtensor(k.clone()),
          c = dt::local_dtensor(v.clone());
  for (DTensor* t : {&a, &b, &c}) t->requires_grad_();
  const DTensor out = attend(a, b, c);
  dt::sum(dt::mul(out, dt::local_dtensor(up))).backward();
  return {out.to_local(), a.grad().to_local(), b.grad().to_local(), c.grad().to_local()};
}

void check_same(const Grads& got, const Grads& want, double tol) {
  CHECK(tt::same_values(got.out, want.out, tol));
  CHECK(tt::same_values(got.q, want.q, tol));
  CHECK(tt::same_values(got.k, want.k, tol));
  CHECK(tt::same_values(got.v, want.v, tol));
}

}  // namespace

TEST_CASE("causal_align kLowerRight: query i of L sees keys j <= i + S - L", "[attention]") {
  struct Case {
    int64_t L, S;
  };
  // L < S (prefill after a prefix), L == S, L == 1 (decode), and L < S across several blocks.
  const Case cases[] = {{3, 7}, {5, 5}, {1, 6}, {1, 1}, {130, 300}};
  for (const Case& c : cases) {
    INFO("L " << c.L << " S " << c.S);
    const int64_t B = 2, H = 3, E = 4, Ev = 3;
    const Tensor q = tt::det_input({B, H, c.L, E}, 1, -1.0, 0.25, dt::kFloat64);
    const Tensor k = tt::det_input({B, H, c.S, E}, 2, -1.0, 0.25, dt::kFloat64);
    const Tensor v = tt::det_input({B, H, c.S, Ev}, 3, -1.0, 0.25, dt::kFloat64);
    const Tensor up = tt::det_input({B, H, c.L, Ev}, 4, -1.0, 0.25, dt::kFloat64);
    const Grads want = run(q, k, v, up, [&](const DTensor& a, const DTensor& b, const DTensor& d) {
      return tt::attention_reference(a, b, d, DTensor(), true, 0.6, c.S - c.L);
    });
    const Grads got = run(q, k, v, up, [&](const DTensor& a, const DTensor& b, const DTensor& d) {
      return dt::scaled_dot_product_attention(a, b, d, DTensor(), 0.0, true, 0.6, false,
                                              CausalAlign::kLowerRight);
    });
    check_same(got, want, 1e-11);
    // Top-left alignment differs unless L == S (a decode step under it would see key 0 only).
    const Grads upper = run(q, k, v, up, [&](const DTensor& a, const DTensor& b, const DTensor& d) {
      return dt::scaled_dot_product_attention(a, b, d, DTensor(), 0.0, true, 0.6);
    });
    CHECK(tt::same_values(upper.out, want.out, 1e-11) == (c.L == c.S));
    // Without is_causal the alignment changes nothing.
    const Grads plain = run(q, k, v, up, [&](const DTensor& a, const DTensor& b, const DTensor& d) {
      return dt::scaled_dot_product_attention(a, b, d, DTensor(), 0.0, false, 0.6, false,
                                              CausalAlign::kLowerRight);
    });
    const Grads plain_want =
        run(q, k, v, up, [&](const DTensor& a, const DTensor& b, const DTensor& d) {
          return tt::attention_reference(a, b, d, DTensor(), false, 0.6);
        });
    check_same(plain, plain_want, 1e-11);
  }
}

TEST_CASE("causal_align through nn::functional: the fused op and the dropout path", "[attention]") {
  namespace F = dt::nn::functional;
  const int64_t L = 3, S = 8;
  const Tensor q = tt::det_input({1, 2, L, 4}, 5, -1.0, 0.25, dt::kFloat64);
  const Tensor k = tt::det_input({1, 2, S, 4}, 6, -1.0, 0.25, dt::kFloat64);
  const Tensor v = tt::det_input({1, 2, S, 2}, 7, -1.0, 0.25, dt::kFloat64);
  const Tensor up = tt::det_input({1, 2, L, 2}, 8, -1.0, 0.25, dt::kFloat64);
  const Grads want = run(q, k, v, up, [&](const DTensor& a, const DTensor& b, const DTensor& d) {
    return tt::attention_reference(a, b, d, DTensor(), true, 0.5, S - L);
  });
  // dropout_p 1e-13 takes the math path (scores, mask, softmax, dropout) and, with these few
  // elements, drops nothing: it equals the reference up to the 1 / (1 - p) scaling.
  for (double p : {0.0, 1e-13}) {
    INFO("dropout_p " << p);
    const Grads got = run(q, k, v, up, [&](const DTensor& a, const DTensor& b, const DTensor& d) {
      return F::scaled_dot_product_attention(a, b, d, DTensor(), p, true, 0.5, false, nullptr,
                                             CausalAlign::kLowerRight);
    });
    check_same(got, want, 1e-11);
  }
}
