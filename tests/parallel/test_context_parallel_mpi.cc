// Context parallelism under mpirun (1, 2 and 4 ranks; at 4 also a 2x2 cp x tp mesh): ring
// attention forward and backward against the single-device attention kernels on the whole
// sequence, causal and not, load-balanced and natural order, uneven lengths; the traffic
// (point to point only, the expected bytes); second and third orders under create_graph against
// single-device attention's; the head-tail layouts and rotary positions; errors.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <optional>
#include <tuple>
#include <vector>

#include "dtensor/autograd/engine.h"
#include "dtensor/autograd/grad_mode.h"
#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/compile/compile.h"
#include "dtensor/nn/functional.h"
#include "dtensor/ops/attention/attention.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/view/copy_ops.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/parallel/context/context_parallel.h"
#include "dtensor/parallel/context/ring_plan.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/creation.h"
#include "tests/parallel/parallel_test_util.h"

namespace dt = dtensor;
using Catch::Contains;
using dt::CollectiveKind;
using dt::test::max_diff;

namespace {

dt::Tensor same_randn(dt::IntSpan shape, uint64_t seed, dt::DType dtype) {
  dt::Generator g(seed);
  return dt::randn(shape, {}, &g).to(dtype);
}

double tolerance(dt::DType dtype) {
  return dtype == dt::kFloat64 ? 1e-12 : 2e-5;
}

// Single-device attention on the whole sequence (the kernels ring attention runs on blocks),
// with the gradients of sum(out * grad).
struct Reference {
  dt::Tensor out, dq, dk, dv;
};
Reference reference(const dt::Tensor& q, const dt::Tensor& k, const dt::Tensor& v,
                    const dt::Tensor& grad, bool causal) {
  const dt::AttentionParams p{dt::default_attention_scale(q.size(3)), causal, 0};
  const dt::AttentionResult f = dt::attention_forward(q, k, v, dt::Tensor(), p);
  const dt::Tensor no_lse_grad = dt::zeros(f.lse.sizes(), dt::TensorOptions(f.lse.dtype()));
  const dt::AttentionGrads g =
      dt::attention_backward(grad, no_lse_grad, q, k, v, dt::Tensor(), f.out, f.lse, p);
  return {f.out, g.q, g.k, g.v};
}

// A mesh for the case: 1-D "cp" over the world, or (at 4 ranks) 2x2 with a "tp" dim before or
// after it that shards the heads, or a "dp" dim before it that shards the batch.
struct Layout {
  dt::DeviceMesh mesh;
  int64_t cp_dim = 0;
  int64_t tp_dim = -1;
  int64_t dp_dim = -1;
};
Layout make_layout(int kind) {
  if (kind == 0) return {dt::init_device_mesh(dt::kCPU, {dt::world_size()}, {"cp"}), 0};
  if (kind == 1) return {dt::init_device_mesh(dt::kCPU, {2, 2}, {"cp", "tp"}), 0, 1};
  if (kind == 2) return {dt::init_device_mesh(dt::kCPU, {2, 2}, {"tp", "cp"}), 1, 0};
  return {dt::init_device_mesh(dt::kCPU, {2, 2}, {"dp", "cp"}), 1, -1, 0};
}

// A whole tensor (the same on every rank) laid out for the ring: heads Shard(1) on tp, batch
// Shard(0) on dp, the sequence (dim `seq`) in the case's order Shard(seq) on cp.
dt::DTensor lay_out(const dt::Tensor& whole, const Layout& l, int64_t seq, bool load_balance,
                    bool heads = true) {
  dt::Placements rep(static_cast<size_t>(l.mesh.ndim()), dt::Replicate());
  dt::DTensor x = dt::DTensor::from_local(whole, l.mesh, rep);
  if (l.tp_dim >= 0 && heads) {
    dt::Placements p = rep;
    p[static_cast<size_t>(l.tp_dim)] = dt::Shard(1);
    x = x.redistribute(p);
  }
  if (l.dp_dim >= 0) {
    dt::Placements p = x.placements();
    p[static_cast<size_t>(l.dp_dim)] = dt::Shard(0);
    x = x.redistribute(p);
  }
  return dt::context_parallel_shard(x, l.cp_dim, seq, load_balance);
}

// Back to a whole tensor in the natural order.
dt::Tensor whole(const dt::DTensor& x, const Layout& l, int64_t seq, bool load_balance) {
  return dt::context_parallel_unshard(x, l.cp_dim, seq, load_balance).full_tensor();
}

}  // namespace

TEST_CASE("ring plan: head-tail segments and calls balance the causal work", "[cp][plan]") {
  using dt::detail::cp_segments;
  using dt::detail::ring_calls;
  using dt::detail::RingCall;
  // S = 8 over cp = 2: chunks of 2; rank 0 holds 0 and 3, rank 1 holds 1 and 2.
  const auto r0 = cp_segments(8, 2, 0, true), r1 = cp_segments(8, 2, 1, true);
  REQUIRE(r0.size() == 2);
  CHECK((r0[0].global_start == 0 && r0[1].global_start == 6 && r0[1].local_start == 2));
  CHECK((r1[0].global_start == 2 && r1[1].global_start == 4));
  // Own block: the two diagonal chunks masked, the tail against the head whole.
  CHECK(ring_calls(r0, r0, true) == std::vector<RingCall>{{0, 2, 0, 2, true, 0},
                                                          {2, 2, 0, 2, false, 0},
                                                          {2, 2, 2, 2, true, 0}});
  // Rank 1 against rank 0's block: all q against the head chunk (one merged call).
  CHECK(ring_calls(r1, r0, true) == std::vector<RingCall>{{0, 4, 0, 2, false, 0}});
  // Rank 0 against rank 1's block: the tail chunk against all keys (one merged call).
  CHECK(ring_calls(r0, r1, true) == std::vector<RingCall>{{2, 2, 0, 4, false, 0}});
  // Without causality one call covers both blocks.
  CHECK(ring_calls(r0, r1, false) == std::vector<RingCall>{{0, 4, 0, 4, false, 0}});

  // cp = 4, S = 32: every rank's causal work (score entries computed, a masked diagonal chunk
  // counting whole) is the same; in the natural order the last rank does the most.
  const auto work = [](int64_t cp, int64_t r, bool lb) {
    int64_t w = 0;
    for (int64_t s = 0; s < cp; ++s) {
      for (const RingCall& c :
           ring_calls(cp_segments(32, cp, r, lb), cp_segments(32, cp, s, lb), true)) {
        w += c.q_len * c.k_len;
      }
    }
    return w;
  };
  for (int64_t r = 1; r < 4; ++r) CHECK(work(4, r, true) == work(4, 0, true));
  CHECK(work(4, 3, false) > 3 * work(4, 0, false));
  // Uneven natural order (torch.chunk: 3, 3, 3, 0 for 9 over 4): segments cover the sequence.
  int64_t covered = 0;
  for (int64_t r = 0; r < 4; ++r) covered += dt::detail::cp_local_length(9, 4, r, false);
  CHECK(covered == 9);
  CHECK(cp_segments(9, 4, 3, false).empty());
}

TEST_CASE("ring attention equals single-device attention, forward and backward", "[cp]") {
  const int world = dt::world_size();
  const int kind = world == 4 ? GENERATE(0, 1, 2, 3) : 0;
  const Layout l = make_layout(kind);
  const int64_t cp = l.mesh.size(l.cp_dim);
  const dt::DType dtype = GENERATE(dt::kFloat64, dt::kFloat32);
  const bool causal = GENERATE(false, true);
  const bool load_balance = GENERATE(true, false);
  // Even lengths (a multiple of 2 * cp), and uneven ones in the natural order (torch.chunk
  // blocks; cp * 3 + 1 and one shorter than cp leave ranks with fewer or no rows).
  const int64_t seq = load_balance ? GENERATE_COPY(2 * cp * 3, 2 * cp * 20)
                                   : GENERATE_COPY(cp * 3 + 1, std::max<int64_t>(cp - 1, 1));
  CAPTURE(kind, dt::dtype_name(dtype), causal, load_balance, seq);
  const int64_t B = 2, H = 4, D = 8;
  const dt::Tensor q = same_randn({B, H, seq, D}, 1, dtype);
  const dt::Tensor k = same_randn({B, H, seq, D}, 2, dtype);
  const dt::Tensor v = same_randn({B, H, seq, D}, 3, dtype);
  const dt::Tensor g = same_randn({B, H, seq, D}, 4, dtype);
  const Reference ref = reference(q, k, v, g, causal);

  dt::DTensor qd = lay_out(q, l, 2, load_balance).detach().requires_grad_();
  dt::DTensor kd = lay_out(k, l, 2, load_balance).detach().requires_grad_();
  dt::DTensor vd = lay_out(v, l, 2, load_balance).detach().requires_grad_();
  const dt::DTensor out =
      dt::ring_attention(qd, kd, vd, l.cp_dim, {.is_causal = causal, .load_balance = load_balance});
  CHECK(out.placements() == qd.placements());
  CHECK(max_diff(whole(out, l, 2, load_balance), ref.out) <= tolerance(dtype));
  out.backward(lay_out(g, l, 2, load_balance));
  CHECK(max_diff(whole(qd.grad(), l, 2, load_balance), ref.dq) <= tolerance(dtype));
  CHECK(max_diff(whole(kd.grad(), l, 2, load_balance), ref.dk) <= tolerance(dtype));
  CHECK(max_diff(whole(vd.grad(), l, 2, load_balance), ref.dv) <= tolerance(dtype));
}

TEST_CASE("non-causal ring attention on plain Shard(2) blocks of any length, default options",
          "[cp]") {
  // load_balance (on by default) only concerns causal attention: without a mask the blocks are
  // Shard's, uneven or empty ones too (it once sized the ring's buffers from head-tail segments:
  // truncated receives, a hang, or wrong rows).
  const Layout l = make_layout(0);
  const int64_t cp = l.mesh.size(0);
  const int64_t seq =
      GENERATE_COPY(2 * cp * 3, cp * 3 + 1, 2 * cp + 2, std::max<int64_t>(cp - 1, 1));
  CAPTURE(seq);
  const int64_t B = 1, H = 2, D = 4;
  const dt::Tensor q = same_randn({B, H, seq, D}, 11, dt::kFloat64);
  const dt::Tensor k = same_randn({B, H, seq, D}, 12, dt::kFloat64);
  const dt::Tensor v = same_randn({B, H, seq, D}, 13, dt::kFloat64);
  const dt::Tensor g = same_randn({B, H, seq, D}, 14, dt::kFloat64);
  const Reference ref = reference(q, k, v, g, false);
  auto shard = [&](const dt::Tensor& t) {
    return dt::distribute_tensor(t, l.mesh, {dt::Shard(2)}).detach().requires_grad_();
  };
  dt::DTensor qd = shard(q), kd = shard(k), vd = shard(v);
  const dt::DTensor out = dt::ring_attention(qd, kd, vd, 0);
  CHECK(max_diff(out.full_tensor(), ref.out) <= 1e-12);
  out.backward(dt::distribute_tensor(g, l.mesh, {dt::Shard(2)}));
  CHECK(max_diff(qd.grad().full_tensor(), ref.dq) <= 1e-12);
  CHECK(max_diff(kd.grad().full_tensor(), ref.dk) <= 1e-12);
  CHECK(max_diff(vd.grad().full_tensor(), ref.dv) <= 1e-12);
}

TEST_CASE("ring attention's backward raises when q, k, v or the output was written in place",
          "[cp]") {
  // As PyTorch's sdpa (version counters of its saved tensors); before round 5 the backward read
  // the written values: a silently wrong gradient.
  const Layout l = make_layout(0);
  const int64_t seq = 4 * l.mesh.size(0);
  const int which = GENERATE(0, 1, 2, 3);  // q, k, v, the output
  CAPTURE(which);
  auto shard = [&](uint64_t seed) {
    return dt::distribute_tensor(same_randn({1, 2, seq, 4}, seed, dt::kFloat64), l.mesh,
                                 {dt::Shard(2)})
        .detach()
        .requires_grad_();
  };
  dt::DTensor qd = shard(21), kd = shard(22), vd = shard(23);
  const dt::DTensor out = dt::ring_attention(qd, kd, vd, 0);
  {
    dt::autograd::NoGradGuard no_grad;  // a write PyTorch allows on a leaf, caught at backward
    const dt::DTensor* target[] = {&qd, &kd, &vd, &out};
    dt::mul_(*target[which], dt::Scalar(2.0));
  }
  CHECK_THROWS_WITH(out.backward(dt::distribute_tensor(same_randn({1, 2, seq, 4}, 24, dt::kFloat64),
                                                       l.mesh, {dt::Shard(2)})),
                    Catch::Contains("modified by an in-place op"));
}

TEST_CASE("ring attention in bfloat16 (float32 merge and gradient accumulators)", "[cp]") {
  const Layout l = make_layout(0);
  const int64_t cp = l.mesh.size(0);
  const bool causal = GENERATE(false, true);
  const int64_t B = 1, H = 2, S = 2 * cp * 8, D = 16;
  const dt::Tensor q = same_randn({B, H, S, D}, 1, dt::kBFloat16);
  const dt::Tensor k = same_randn({B, H, S, D}, 2, dt::kBFloat16);
  const dt::Tensor v = same_randn({B, H, S, D}, 3, dt::kBFloat16);
  const dt::Tensor g = same_randn({B, H, S, D}, 4, dt::kBFloat16);
  // The float64 truth of the same bfloat16 values; the ring rounds each block's output to
  // bfloat16 once before merging (as single-device attention rounds its output once).
  const auto f64 = [](const dt::Tensor& t) { return t.to(dt::kFloat64); };
  const Reference ref = reference(f64(q), f64(k), f64(v), f64(g), causal);
  dt::DTensor qd = lay_out(q, l, 2, true).detach().requires_grad_();
  dt::DTensor kd = lay_out(k, l, 2, true).detach().requires_grad_();
  dt::DTensor vd = lay_out(v, l, 2, true).detach().requires_grad_();
  const dt::DTensor out = dt::ring_attention(qd, kd, vd, 0, {.is_causal = causal});
  CHECK(out.dtype() == dt::kBFloat16);
  CHECK(max_diff(whole(out, l, 2, true), ref.out) <= 1.5e-2);
  out.backward(lay_out(g, l, 2, true));
  CHECK(qd.grad().dtype() == dt::kBFloat16);
  CHECK(max_diff(whole(qd.grad(), l, 2, true), ref.dq) <= 2.5e-2);
  CHECK(max_diff(whole(kd.grad(), l, 2, true), ref.dk) <= 2.5e-2);
  CHECK(max_diff(whole(vd.grad(), l, 2, true), ref.dv) <= 2.5e-2);
}

TEST_CASE("ring attention with grouped-query heads (enable_gqa)", "[cp]") {
  const int kind = dt::world_size() == 4 ? GENERATE(0, 1, 2, 3) : 0;
  const Layout l = make_layout(kind);
  const int64_t cp = l.mesh.size(l.cp_dim);
  const bool causal = GENERATE(false, true);
  CAPTURE(kind, causal);
  // 4 q heads, 2 k/v heads (each serves 2 consecutive q heads); heads sharded on tp at 4 ranks.
  const int64_t B = 2, H = 4, Hk = 2, S = 2 * cp * 3, D = 8;
  const dt::Tensor q = same_randn({B, H, S, D}, 1, dt::kFloat64);
  const dt::Tensor k = same_randn({B, Hk, S, D}, 2, dt::kFloat64);
  const dt::Tensor v = same_randn({B, Hk, S, D}, 3, dt::kFloat64);
  const dt::Tensor g = same_randn({B, H, S, D}, 4, dt::kFloat64);
  // The reference on k/v repeated to q's heads; their gradients summed back over the repeats.
  const Reference ref =
      reference(q, dt::repeat_interleave(k, 2, 1), dt::repeat_interleave(v, 2, 1), g, causal);
  const auto grouped = [&](const dt::Tensor& x) {
    return dt::sum(x.reshape({B, Hk, 2, S, D}), {2});
  };
  dt::DTensor qd = lay_out(q, l, 2, true).detach().requires_grad_();
  dt::DTensor kd = lay_out(k, l, 2, true).detach().requires_grad_();
  dt::DTensor vd = lay_out(v, l, 2, true).detach().requires_grad_();
  const dt::DTensor out =
      dt::ring_attention(qd, kd, vd, l.cp_dim, {.is_causal = causal, .enable_gqa = true});
  CHECK(max_diff(whole(out, l, 2, true), ref.out) <= 1e-12);
  out.backward(lay_out(g, l, 2, true));
  CHECK(max_diff(whole(qd.grad(), l, 2, true), ref.dq) <= 1e-12);
  CHECK(max_diff(whole(kd.grad(), l, 2, true), grouped(ref.dk)) <= 1e-12);
  CHECK(max_diff(whole(vd.grad(), l, 2, true), grouped(ref.dv)) <= 1e-12);
  // Without the flag the head counts must match.
  CHECK_THROWS_WITH(dt::ring_attention(qd, kd, vd, l.cp_dim), Contains("do not fit"));
}

namespace {

// Second and third orders through attention `attend` on leaves q, k, v: the first gradients of
// L = sum((out + out^2 / 2) * w) (create_graph), the gradients of the penalty ||dL/dq||^2, a
// Hessian-vector product along (tq, tk, tv) (create_graph), and a third order, the gradient of
// ||hvp_q||^2 with respect to k; each as a whole tensor in the natural order (`whole_of`).
struct HigherOrders {
  std::vector<dt::Tensor> first, penalty, hvp, third;
};
HigherOrders higher_orders(const std::function<dt::DTensor(const dt::DTensor&, const dt::DTensor&,
                                                           const dt::DTensor&)>& attend,
                           const std::vector<dt::DTensor>& qkv, const dt::DTensor& w,
                           const std::vector<dt::DTensor>& t,
                           const std::function<dt::Tensor(const dt::DTensor&)>& whole_of) {
  const auto grads = [&](const dt::DTensor& y, std::optional<bool> retain, bool create) {
    const dt::DTensor roots[] = {y};
    return dt::autograd::grad(roots, qkv, {}, retain, create, /*allow_unused=*/true);
  };
  const auto wholes = [&](const std::vector<dt::DTensor>& xs) {
    std::vector<dt::Tensor> out;
    for (const dt::DTensor& x : xs) out.push_back(whole_of(x));
    return out;
  };
  HigherOrders r;
  // Not linear in out, so the gradient reaching attention has history (through out itself).
  const dt::DTensor out = attend(qkv[0], qkv[1], qkv[2]);
  const dt::DTensor loss =
      dt::sum(dt::mul(dt::add(out, dt::mul(dt::mul(out, out), dt::Scalar(0.5))), w));
  const std::vector<dt::DTensor> g = grads(loss, std::nullopt, /*create=*/true);
  r.first = wholes(g);
  r.penalty = wholes(grads(dt::sum(dt::mul(g[0], g[0])), /*retain=*/true, /*create=*/false));
  dt::DTensor dot = dt::sum(dt::mul(g[0], t[0]));
  for (size_t i = 1; i < 3; ++i) dot = dt::add(dot, dt::sum(dt::mul(g[i], t[i])));
  const std::vector<dt::DTensor> h = grads(dot, std::nullopt, /*create=*/true);
  r.hvp = wholes(h);
  const dt::DTensor roots[] = {dt::sum(dt::mul(h[0], h[0]))}, wrt[] = {qkv[1]};
  r.third.push_back(whole_of(dt::autograd::grad(roots, wrt)[0]));
  return r;
}

}  // namespace

TEST_CASE("ring attention under create_graph: penalty, HVP and third order equal one device",
          "[cp][create_graph]") {
  // Single-device scaled_dot_product_attention's double backward is checked against PyTorch
  // 2.15 (test_attention_double_backward_mpi); ring attention's equals it, so it equals PyTorch.
  const int world = dt::world_size();
  const int kind = world == 4 ? GENERATE(0, 1, 2, 3) : 0;
  const Layout l = make_layout(kind);
  const int64_t cp = l.mesh.size(l.cp_dim);
  const bool causal = GENERATE(false, true);
  const bool load_balance = GENERATE(true, false);
  const bool gqa = GENERATE(false, true);
  // Head-tail lengths, and uneven natural-order ones (cp * 3 + 1; one shorter than cp leaves a
  // rank with no rows).
  const int64_t seq =
      load_balance ? 2 * cp * 2 : GENERATE_COPY(cp * 3 + 1, std::max<int64_t>(cp - 1, 1));
  CAPTURE(kind, causal, load_balance, gqa, seq);
  const int64_t B = 2, H = 4, Hk = gqa ? 2 : 4, D = 4;
  const dt::Tensor q = same_randn({B, H, seq, D}, 31, dt::kFloat64);
  const dt::Tensor k = same_randn({B, Hk, seq, D}, 32, dt::kFloat64);
  const dt::Tensor v = same_randn({B, Hk, seq, D}, 33, dt::kFloat64);
  const dt::Tensor w = same_randn({B, H, seq, D}, 34, dt::kFloat64);
  const std::vector<dt::Tensor> t = {same_randn({B, H, seq, D}, 35, dt::kFloat64),
                                     same_randn({B, Hk, seq, D}, 36, dt::kFloat64),
                                     same_randn({B, Hk, seq, D}, 37, dt::kFloat64)};

  // One device: scaled_dot_product_attention on the natural order.
  std::vector<dt::DTensor> ref_in;
  for (const dt::Tensor& x : {q, k, v}) ref_in.push_back(dt::local_dtensor(x).requires_grad_());
  std::vector<dt::DTensor> ref_t;
  for (const dt::Tensor& x : t) ref_t.push_back(dt::local_dtensor(x));
  const HigherOrders ref = higher_orders(
      [&](const auto& a, const auto& b, const auto& c) {
        return dt::scaled_dot_product_attention(a, b, c, dt::DTensor(), 0.0, causal, std::nullopt,
                                                gqa);
      },
      ref_in, dt::local_dtensor(w), ref_t, [](const dt::DTensor& x) { return x.to_local(); });

  // Context parallel: the same on the laid-out sequence.
  std::vector<dt::DTensor> cp_in;
  for (const dt::Tensor& x : {q, k, v}) {
    cp_in.push_back(lay_out(x, l, 2, load_balance).detach().requires_grad_());
  }
  std::vector<dt::DTensor> cp_t;
  for (const dt::Tensor& x : t) cp_t.push_back(lay_out(x, l, 2, load_balance));
  const HigherOrders got = higher_orders(
      [&](const auto& a, const auto& b, const auto& c) {
        return dt::ring_attention(
            a, b, c, l.cp_dim,
            {.is_causal = causal, .load_balance = load_balance, .enable_gqa = gqa});
      },
      cp_in, lay_out(w, l, 2, load_balance), cp_t,
      [&](const dt::DTensor& x) { return whole(x, l, 2, load_balance); });

  const auto check = [](const char* what, const std::vector<dt::Tensor>& a,
                        const std::vector<dt::Tensor>& b) {
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      CAPTURE(what, i);
      CHECK(max_diff(a[i], b[i]) <= 1e-12);
    }
  };
  check("first", got.first, ref.first);
  check("penalty", got.penalty, ref.penalty);
  check("hvp", got.hvp, ref.hvp);
  check("third", got.third, ref.third);
}

TEST_CASE("ring attention under create_graph: the first-order backward is the ring's",
          "[cp][create_graph]") {
  // Without create_graph the backward is the ring (point to point only, as above); under it the
  // recomputation gathers k and v (all_gather) and runs no point-to-point message.
  const Layout l = make_layout(0);
  const int64_t cp = l.mesh.size(0);
  const int64_t S = 4 * cp;
  std::vector<dt::DTensor> in;
  for (uint64_t seed = 41; seed < 44; ++seed) {
    in.push_back(lay_out(same_randn({1, 2, S, 4}, seed, dt::kFloat64), l, 2, true)
                     .detach()
                     .requires_grad_());
  }
  const dt::DTensor roots[] = {
      dt::sum(dt::ring_attention(in[0], in[1], in[2], 0, {.is_causal = true}))};
  std::vector<dt::DTensor> plain, recorded;
  {
    dt::CommDebugMode comm;
    plain = dt::autograd::grad(roots, in, {}, /*retain_graph=*/true);
    CHECK(comm.count(CollectiveKind::kAllGather) == 0);
    CHECK_FALSE(plain[0].requires_grad());
  }
  {
    dt::CommDebugMode comm;
    recorded = dt::autograd::grad(roots, in, {}, std::nullopt, /*create_graph=*/true);
    CHECK(comm.count(CollectiveKind::kSend) == 0);
    CHECK(comm.count(CollectiveKind::kAllGather) == (cp > 1 ? 2 : 0));
    CHECK(recorded[0].requires_grad());
  }
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(max_diff(plain[i].full_tensor(), recorded[i].full_tensor()) <= 1e-12);
  }
}

TEST_CASE("a dtensor::compile capture of a ring attention step is refused on every rank",
          "[cp][compile]") {
  // The ring's messages are direct point-to-point calls that replay would not issue (one rank:
  // its blocks are local computation outside DTensor ops), so the capture raises in the forward,
  // on every rank, at every call; the step runs eagerly instead.
  const Layout l = make_layout(0);
  std::vector<dt::DTensor> in;
  for (uint64_t seed = 51; seed < 54; ++seed) {
    in.push_back(lay_out(same_randn({1, 2, 4 * l.mesh.size(0), 4}, seed, dt::kFloat64), l, 2, true)
                     .detach()
                     .requires_grad_());
  }
  dt::CompiledStep step = dt::compile([](const dt::DTensorList& b) {
    const dt::DTensor loss = dt::sum(dt::ring_attention(b[0], b[1], b[2], 0, {.is_causal = true}));
    loss.backward();
    return dt::DTensorList{loss.detach()};
  });
  for (int call = 0; call < 2; ++call) {
    CAPTURE(call);
    CHECK_THROWS_WITH(step(dt::DTensorList{in[0], in[1], in[2]}),
                      Contains("[compile] the step cannot be captured"));
  }
  CHECK(step.replays() == 0);
}

TEST_CASE("ring attention communicates point to point only, the expected bytes", "[cp]") {
  const Layout l = make_layout(dt::world_size() == 4 ? 1 : 0);
  const int64_t cp = l.mesh.size(l.cp_dim);
  const dt::DType dtype = GENERATE(dt::kFloat64, dt::kFloat32);
  const int64_t B = 2, H = 4, S = 8 * cp, D = 8;
  dt::DTensor q = lay_out(same_randn({B, H, S, D}, 1, dtype), l, 2, true).detach();
  dt::DTensor k = lay_out(same_randn({B, H, S, D}, 2, dtype), l, 2, true).detach();
  dt::DTensor v = lay_out(same_randn({B, H, S, D}, 3, dtype), l, 2, true).detach();
  q.requires_grad_(), k.requires_grad_(), v.requires_grad_();
  const dt::DTensor g = lay_out(same_randn({B, H, S, D}, 4, dtype), l, 2, true);
  // Every rank holds a block of the same size: k's and v's local bytes.
  const int64_t block = k.to_local().nbytes();
  dt::DTensor out;
  {
    dt::CommDebugMode comm;
    out = dt::ring_attention(q, k, v, "cp", {.is_causal = true});
    CHECK(comm.count(CollectiveKind::kSend) == 2 * (cp - 1));
    CHECK(comm.count(CollectiveKind::kRecv) == 2 * (cp - 1));
    CHECK(comm.bytes(CollectiveKind::kSend) == 2 * (cp - 1) * block);
    CHECK(comm.total_count() == 4 * (cp - 1));
  }
  {
    dt::CommDebugMode comm;
    out.backward(g);
    // k and v again (cp - 1 hops), then dk and dv (cp hops, in the merge dtype: float32 and
    // float64 inputs keep theirs).
    CHECK(comm.count(CollectiveKind::kSend) == 2 * (cp - 1) + (cp > 1 ? 2 * cp : 0));
    CHECK(comm.count(CollectiveKind::kRecv) == comm.count(CollectiveKind::kSend));
    CHECK(comm.bytes(CollectiveKind::kSend) ==
          2 * (cp - 1) * block + (cp > 1 ? 2 * cp * block : 0));
    CHECK(comm.total_count() == 2 * comm.count(CollectiveKind::kSend));
  }
}

TEST_CASE("head-tail layouts: shard, unshard and rotary positions", "[cp]") {
  const Layout l = make_layout(0);
  const int64_t cp = l.mesh.size(0);
  // The order itself on a local tensor: chunks 0, 2cp-1, 1, 2cp-2, ...
  const dt::Tensor pos =
      dt::arange(0.0, static_cast<double>(4 * cp), 1.0, dt::TensorOptions(dt::kInt64));
  const dt::Tensor ht = dt::head_tail_order(pos, 0, cp);
  const auto ids = ht.to_vector<int64_t>();
  for (int64_t r = 0; r < cp; ++r) {
    CHECK(ids[static_cast<size_t>(4 * r)] == 2 * r);
    CHECK(ids[static_cast<size_t>(4 * r + 2)] == 2 * (2 * cp - 1 - r));
  }
  CHECK(max_diff(dt::natural_order(ht, 0, cp), pos) == 0);
  // PyTorch 2.15's _HeadTailLoadBalancer(4 * cp, cp)._generate_indices() (the same order).
  const dt::Tensor pos16 = dt::arange(0.0, 16.0, 1.0, dt::TensorOptions(dt::kInt64));
  CHECK(dt::head_tail_order(pos16.narrow(0, 0, 8), 0, 2).to_vector<int64_t>() ==
        std::vector<int64_t>{0, 1, 6, 7, 2, 3, 4, 5});
  CHECK(dt::head_tail_order(pos16, 0, 4).to_vector<int64_t>() ==
        std::vector<int64_t>{0, 1, 14, 15, 2, 3, 12, 13, 4, 5, 10, 11, 6, 7, 8, 9});
  // Integer inputs (token ids, labels) through the DTensor round trip.
  const dt::Tensor tokens = pos.reshape({1, 4 * cp});
  const dt::DTensor sharded = lay_out(tokens, l, 1, true, /*heads=*/false);
  CHECK(max_diff(sharded.to_local(),
                 ht.reshape({1, 4 * cp}).narrow(1, 4 * l.mesh.get_local_rank(0), 4)) == 0);
  CHECK(max_diff(whole(sharded, l, 1, true), tokens) == 0);

  // Rotary embeddings on a head-tail-sharded x [B, S, H, D] with the reordered tables equal the
  // whole sequence's, each position rotated by its global angle.
  const int64_t S = 6 * cp, D = 8;
  const dt::Tensor x = same_randn({2, S, 3, D}, 7, dt::kFloat64);
  const auto tables = dt::nn::functional::rotary_tables(S + 5, D, 10000.0, dt::kFloat64);
  const dt::Tensor ref = dt::nn::functional::apply_rotary_emb(
                             dt::DTensor::from_local(x, l.mesh, {dt::Replicate()}), tables)
                             .full_tensor();
  const dt::DTensor xs = lay_out(x, l, 1, true, /*heads=*/false);
  const dt::DTensor rotated =
      dt::nn::functional::apply_rotary_emb(xs, dt::context_parallel_rotary_tables(tables, S, cp));
  // (On one rank the op may pick another placement of the same single shard.)
  if (cp > 1) CHECK(rotated.placements() == xs.placements());
  CHECK(max_diff(whole(rotated.redistribute(xs.placements()), l, 1, true), ref) <= 1e-15);
}

namespace {

// An attention block as a Llama layer computes it (projections, rotary q/k, causal attention,
// output projection) on x [B, S, dim], by DTensor ops, so the same code runs single-device and
// sharded: `attend` is scaled_dot_product_attention or ring_attention.
dt::DTensor attention_block(const dt::DTensor& x, const std::vector<dt::DTensor>& w, int64_t heads,
                            const dt::nn::functional::RotaryTables& tables,
                            const std::function<dt::DTensor(const dt::DTensor&, const dt::DTensor&,
                                                            const dt::DTensor&)>& attend) {
  const int64_t B = x.size(0), S = x.size(1), hd = w[0].size(0) / heads;
  const auto project = [&](const dt::DTensor& wx, bool rotary) {
    const int64_t shape[] = {B, S, heads, hd};
    dt::DTensor y = dt::reshape(dt::linear(x, wx), shape);
    if (rotary) y = dt::nn::functional::apply_rotary_emb(y, tables);
    return dt::transpose(y, 1, 2);
  };
  const dt::DTensor o = attend(project(w[0], true), project(w[1], true), project(w[2], false));
  const int64_t flat[] = {B, S, heads * hd};
  return dt::linear(dt::reshape(dt::transpose(o, 1, 2), flat), w[3]);
}

}  // namespace

TEST_CASE("a cp x tp attention block equals single device (rotary from global offsets)", "[cp]") {
  const Layout l = make_layout(dt::world_size() == 4 ? GENERATE(1, 2) : 0);
  const int64_t cp = l.mesh.size(l.cp_dim);
  const int64_t B = 2, S = 2 * cp * 3, dim = 16, H = 4, hd = 4;
  const dt::Tensor x = same_randn({B, S, dim}, 1, dt::kFloat64);
  std::vector<dt::Tensor> w;
  for (uint64_t i = 0; i < 4; ++i) {
    w.push_back(dt::mul(same_randn({dim, dim}, 10 + i, dt::kFloat64), dt::Scalar(0.3)));
  }
  const auto tables = dt::nn::functional::rotary_tables(S, hd, 10000.0, dt::kFloat64);

  // Single device: local DTensors, scaled_dot_product_attention on the natural order.
  dt::DTensor xr = dt::local_dtensor(x).requires_grad_();
  std::vector<dt::DTensor> wr;
  for (const dt::Tensor& t : w) wr.push_back(dt::local_dtensor(t).requires_grad_());
  const dt::DTensor yr =
      attention_block(xr, wr, H, tables, [](const auto& q, const auto& k, const auto& v) {
        return dt::scaled_dot_product_attention(q, k, v, dt::DTensor(), 0.0, true);
      });
  const dt::DTensor loss_r = dt::mean(dt::mul(yr, yr));
  loss_r.backward();

  // cp x tp: x sequence-sharded (head-tail) on cp; q/k/v projections column-parallel and the
  // output projection row-parallel on tp (heads sharded), every weight Replicate on cp.
  dt::DTensor xc = lay_out(x, l, 1, true, /*heads=*/false).detach().requires_grad_();
  std::vector<dt::DTensor> wc;
  for (size_t i = 0; i < w.size(); ++i) {
    dt::Placements p(static_cast<size_t>(l.mesh.ndim()), dt::Replicate());
    if (l.tp_dim >= 0) p[static_cast<size_t>(l.tp_dim)] = dt::Shard(i < 3 ? 0 : 1);
    dt::Placements rep(static_cast<size_t>(l.mesh.ndim()), dt::Replicate());
    wc.push_back(dt::DTensor::from_local(w[i], l.mesh, rep).redistribute(p).detach());
    wc.back().requires_grad_();
  }
  const dt::DTensor yc =
      attention_block(xc, wc, H, dt::context_parallel_rotary_tables(tables, S, cp),
                      [&](const auto& q, const auto& k, const auto& v) {
                        return dt::ring_attention(q, k, v, l.cp_dim, {.is_causal = true});
                      });
  const dt::DTensor loss_c = dt::mean(dt::mul(yc, yc));
  loss_c.backward();

  CHECK(max_diff(loss_c.full_tensor(), loss_r.to_local()) <= 1e-14);
  CHECK(max_diff(whole(yc.redistribute(xc.placements()), l, 1, true), yr.to_local()) <= 1e-12);
  CHECK(max_diff(whole(xc.grad(), l, 1, true), xr.grad().to_local()) <= 1e-12);
  for (size_t i = 0; i < w.size(); ++i) {
    CAPTURE(i);
    CHECK(max_diff(wc[i].grad().full_tensor(), wr[i].grad().to_local()) <= 1e-12);
  }
}

TEST_CASE("context parallel errors, on every rank", "[cp][errors]") {
  const Layout l = make_layout(0);
  const int64_t cp = l.mesh.size(0);
  const int64_t B = 1, H = 2, D = 4;
  // A length load balancing cannot cut into 2 * cp equal chunks.
  const int64_t odd = 2 * cp + 1;
  const dt::Tensor w = same_randn({B, H, odd, D}, 1, dt::kFloat32);
  CHECK_THROWS_WITH(lay_out(w, l, 2, true), Contains("multiple of 2 * cp"));
  const dt::DTensor s = lay_out(w, l, 2, false);
  CHECK_THROWS_WITH(dt::ring_attention(s, s, s, 0, {.is_causal = true}),
                    Contains("[ring_attention] sequence length") && Contains("multiple of 2 * cp"));
  // Not sequence-sharded on the cp dim (one rank holds the whole sequence whatever the
  // placement: accepted there).
  const dt::DTensor rep = dt::DTensor::from_local(w, l.mesh, {dt::Replicate()});
  if (cp > 1) {
    CHECK_THROWS_WITH(dt::ring_attention(rep, rep, rep, "cp"),
                      Contains("must be Shard(2) (the sequence) on the cp mesh dim 0"));
    CHECK_THROWS_WITH(dt::ring_attention(s, rep, rep, 0), Contains("share one placement list"));
    CHECK_THROWS_WITH(dt::context_parallel_unshard(rep, 0, 2), Contains("expected S(2)"));
  } else {
    CHECK(max_diff(dt::ring_attention(rep, rep, rep, "cp").full_tensor(),
                   dt::ring_attention(s, s, s, "cp").full_tensor()) == 0);
  }
  const dt::DTensor partial = dt::DTensor::from_local(w, l.mesh, {dt::Partial()});
  CHECK_THROWS_WITH(dt::ring_attention(partial, partial, partial, "cp"),
                    Contains("may not be Partial"));
  // Mismatched placements, and a cross-attention shape.
  const dt::Tensor w2 = same_randn({B, H, 2 * odd, D}, 2, dt::kFloat32);
  const dt::DTensor longer = lay_out(w2, l, 2, false);
  CHECK_THROWS_WITH(dt::ring_attention(s, longer, longer, 0, {.load_balance = false}),
                    Contains("self-attention"));
}
