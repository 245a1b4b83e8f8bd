// scaled_dot_product_attention's double backward (create_graph) under mpirun at 1, 2 and 4 ranks:
// a gradient penalty through the op,
//   (gq, gk, gv) = grad(sum(out * up), (q, k, v), create_graph),
//   penalty = sum(gq^2) + sum(gk^2) + sum(gv^2), penalty.backward(),
// on batch-, head- and query-sharded q, k, v (1-D and 2-D meshes, uneven and empty shards)
// equals the single-device one and PyTorch 2.15's F.scaled_dot_product_attention
// (torch_attention_double_backward_references.py) at 1e-12, for a scale, is_causal, a float mask
// with enable_gqa, and a bool mask with the causal diagonal bottom-right. A floating mask that
// requires grad (a learnable bias: [L, S], [1, H, L, S], [B, 1, L, S], [B, H, L, S], causal, gqa)
// gets PyTorch's gradient, first order (the composite backward: the fused op has no ds) and
// second order, sharded too
// (torch_attention_mask_grad_references.py).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "dtensor/autograd/engine.h"
#include "dtensor/ops/attention/attention.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "tests/common/ops_dtensor_test_util.h"
#include "tests/ops/attention/attention_double_backward_references.inc"
#include "tests/ops/attention/attention_mask_grad_references.inc"

namespace dt = dtensor;
namespace tt = dtensor::test;
namespace refs = attention_double_backward_refs;
namespace mrefs = attention_mask_grad_refs;
using dt::DTensor;
using dt::Placements;
using dt::Replicate;
using dt::Shard;
using dt::Tensor;

namespace {

enum class MaskKind { kNone, kFloat, kBool };

struct Case {
  std::string name;
  int64_t B, H, Hk, L, S, E, Ev;
  std::optional<double> scale;
  bool causal, lower_right;
  MaskKind mask;
  const std::vector<double>*gq, *gk, *gv, *q_grad, *k_grad, *v_grad, *bool_mask;
  double penalty;
};

#define DBA_REFS(ns)                                                                    \
  &refs::ns::kGq, &refs::ns::kGk, &refs::ns::kGv, &refs::ns::kQGrad, &refs::ns::kKGrad, \
      &refs::ns::kVGrad
std::vector<Case> cases() {
  return {
      {"scale", 2, 3, 3, 5, 4, 3, 2, 0.6, false, false, MaskKind::kNone, DBA_REFS(kScale), nullptr,
       refs::kScale::kPenalty},
      {"causal", 2, 3, 3, 5, 5, 3, 2, std::nullopt, true, false, MaskKind::kNone, DBA_REFS(kCausal),
       nullptr, refs::kCausal::kPenalty},
      {"float mask, gqa", 2, 4, 2, 5, 4, 3, 2, 0.45, false, false, MaskKind::kFloat,
       DBA_REFS(kFloatMaskGqa), nullptr, refs::kFloatMaskGqa::kPenalty},
      {"bool mask, causal bottom-right", 2, 3, 3, 3, 5, 3, 2, 0.8, true, true, MaskKind::kBool,
       DBA_REFS(kBoolMaskLowerRight), &refs::kBoolMaskLowerRight::kMask,
       refs::kBoolMaskLowerRight::kPenalty},
  };
}
#undef DBA_REFS

// The reference script's inputs: amp * sin(0.7 i + salt) + 0.1 cos(1.3 i salt).
Tensor values(dt::IntSpan shape, double salt, double amp = 1.0) {
  std::vector<double> v(static_cast<size_t>(dt::shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) {
    const double x = static_cast<double>(i);
    v[i] = amp * std::sin(0.7 * x + salt) + 0.1 * std::cos(1.3 * x * salt);
  }
  return dt::from_vector<double>(v, shape);
}

struct Inputs {
  Tensor q, k, v, up, mask;
};

Inputs inputs_of(const Case& c) {
  Inputs in;
  in.q = values({c.B, c.H, c.L, c.E}, 1.0);
  in.k = values({c.B, c.Hk, c.S, c.E}, 2.0);
  in.v = values({c.B, c.Hk, c.S, c.Ev}, 3.0);
  in.up = values({c.B, c.H, c.L, c.Ev}, 4.0);
  if (c.mask == MaskKind::kFloat) in.mask = values({c.L, c.S}, 5.0, 0.8);
  if (c.mask == MaskKind::kBool) {
    in.mask = dt::gt(dt::from_vector<double>(*c.bool_mask, {c.B, c.H, c.L, c.S}), dt::Scalar(0.5));
  }
  return in;
}

struct Result {
  std::vector<DTensor> first;  // gq, gk, gv
  DTensor penalty;
};

// The penalty on q, k, v (leaves requiring grad); their grad() then holds its gradient.
Result penalty_of(const Case& c, const DTensor& q, const DTensor& k, const DTensor& v,
                  const DTensor& up, const DTensor& mask) {
  const DTensor out = dt::scaled_dot_product_attention(
      q, k, v, mask, 0.0, c.causal, c.scale, c.Hk != c.H,
      c.lower_right ? dt::CausalAlign::kLowerRight : dt::CausalAlign::kUpperLeft);
  const DTensor loss[] = {dt::sum(out * up)};
  const DTensor ins[] = {q, k, v};
  Result r;
  r.first = dt::autograd::grad(loss, ins, {}, std::nullopt, /*create_graph=*/true);
  r.penalty = dt::sum(r.first[0] * r.first[0]) + dt::sum(r.first[1] * r.first[1]) +
              dt::sum(r.first[2] * r.first[2]);
  r.penalty.backward();
  return r;
}

Tensor ref(const std::vector<double>& v, const Tensor& like) {
  return dt::from_vector<double>(v, like.sizes());
}

}  // namespace

TEST_CASE("attention gradient penalty on sharded q, k, v equals single device and PyTorch") {
  const int64_t w = dt::world_size();
  for (const Case& c : cases()) {
    const Inputs in = inputs_of(c);
    // Single device (this process's self mesh).
    DTensor lq = dt::local_dtensor(in.q.clone()), lk = dt::local_dtensor(in.k.clone()),
            lv = dt::local_dtensor(in.v.clone());
    for (DTensor* t : {&lq, &lk, &lv}) t->requires_grad_();
    const Result one = penalty_of(c, lq, lk, lv, dt::local_dtensor(in.up),
                                  in.mask.defined() ? dt::local_dtensor(in.mask) : DTensor());
    {
      INFO(c.name << ": single device against PyTorch 2.15");
      CHECK(tt::same_values(one.first[0].to_local(), ref(*c.gq, in.q), 1e-12));
      CHECK(tt::same_values(one.first[1].to_local(), ref(*c.gk, in.k), 1e-12));
      CHECK(tt::same_values(one.first[2].to_local(), ref(*c.gv, in.v), 1e-12));
      CHECK(one.penalty.to_local().item<double>() == Approx(c.penalty).epsilon(1e-12));
      CHECK(tt::same_values(lq.grad().to_local(), ref(*c.q_grad, in.q), 1e-12));
      CHECK(tt::same_values(lk.grad().to_local(), ref(*c.k_grad, in.k), 1e-12));
      CHECK(tt::same_values(lv.grad().to_local(), ref(*c.v_grad, in.v), 1e-12));
    }
    for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
      // [q's (and up's) placements, k's and v's] per mesh dim: batch, heads, queries.
      using Layout = std::pair<Placements, Placements>;
      const std::vector<Layout> layouts =
          mesh.ndim() == 1 ? std::vector<Layout>{{{Shard(0)}, {Shard(0)}},
                                                 {{Shard(1)}, {Shard(1)}},
                                                 {{Shard(2)}, {Replicate()}}}
                           : std::vector<Layout>{{{Shard(0), Shard(1)}, {Shard(0), Shard(1)}},
                                                 {{Shard(1), Shard(2)}, {Shard(1), Replicate()}}};
      for (const auto& [qp, kp] : layouts) {
        const int64_t shape[] = {c.B, c.H, c.L};
        INFO(c.name << " at " << w << " ranks: " << tt::describe(mesh, {qp, kp}, shape));
        DTensor q = dt::distribute_tensor(in.q, mesh, qp, std::nullopt);
        DTensor k = dt::distribute_tensor(in.k, mesh, kp, std::nullopt);
        DTensor v = dt::distribute_tensor(in.v, mesh, kp, std::nullopt);
        for (DTensor* t : {&q, &k, &v}) t->requires_grad_();
        const Placements whole(static_cast<size_t>(mesh.ndim()), Replicate());
        // A [L, S] mask whole; a [B, H, L, S] one placed as q.
        const DTensor mask =
            !in.mask.defined() ? DTensor()
                               : dt::distribute_tensor(
                                     in.mask, mesh, in.mask.dim() == 4 ? qp : whole, std::nullopt);
        const Result got = penalty_of(c, q, k, v, dt::distribute_tensor(in.up, mesh, qp), mask);
        const DTensor* leaves[] = {&q, &k, &v};
        const DTensor* single[] = {&lq, &lk, &lv};
        for (size_t i = 0; i < 3; ++i) {
          CHECK(tt::same_values(got.first[i].full_tensor(), one.first[i].to_local(), 1e-12));
          CHECK(tt::same_values(leaves[i]->grad().full_tensor(), single[i]->grad().to_local(),
                                1e-12));
          CHECK(leaves[i]->grad().placements() == leaves[i]->placements());
        }
        CHECK(got.penalty.full_tensor().item<double>() == Approx(c.penalty).epsilon(1e-12));
        CHECK(tt::same_values(q.grad().full_tensor(), ref(*c.q_grad, in.q), 1e-12));
        CHECK(tt::same_values(k.grad().full_tensor(), ref(*c.k_grad, in.k), 1e-12));
        CHECK(tt::same_values(v.grad().full_tensor(), ref(*c.v_grad, in.v), 1e-12));
      }
    }
  }
}

TEST_CASE("attention double backward: a query row that sees no key stays finite and zero") {
  // The fused op gives such a row 0 (PyTorch's safe softmax; its math path gives NaN): the
  // create_graph formula must not turn its -inf log-sum-exp into NaN.
  const int64_t B = 1, H = 2, L = 3, S = 4, E = 3, Ev = 2;
  Tensor keep = dt::gt(values({B, H, L, S}, 7.0), dt::Scalar(-0.3));
  keep.narrow(2, 1, 1).fill_(false);  // query 1 sees no key
  keep.narrow(2, 0, 1).narrow(3, 0, 1).fill_(true);
  keep.narrow(2, 2, 1).narrow(3, 0, 1).fill_(true);
  DTensor q = dt::local_dtensor(values({B, H, L, E}, 1.0));
  DTensor k = dt::local_dtensor(values({B, H, S, E}, 2.0));
  DTensor v = dt::local_dtensor(values({B, H, S, Ev}, 3.0));
  for (DTensor* t : {&q, &k, &v}) t->requires_grad_();
  Case c{"no key", B, H, H, L, S, E, Ev, 0.5, false, false, MaskKind::kBool};
  const Result r = penalty_of(c, q, k, v, dt::local_dtensor(values({B, H, L, Ev}, 4.0)),
                              dt::local_dtensor(keep));
  for (const DTensor* t : {&q, &k, &v}) {
    const std::vector<double> g = t->grad().to_local().to_vector<double>();
    for (double x : g) CHECK(std::isfinite(x));
  }
  // Query 1's gradients are zero, first and second order (its output is the constant 0).
  CHECK(dt::equal(r.first[0].to_local().narrow(2, 1, 1), dt::zeros({B, H, 1, E}, dt::kFloat64)));
  CHECK(dt::equal(q.grad().to_local().narrow(2, 1, 1), dt::zeros({B, H, 1, E}, dt::kFloat64)));
  CHECK(std::isfinite(r.penalty.to_local().item<double>()));
}

TEST_CASE("attention double backward in float32 and bfloat16 follows float64") {
  // The create_graph formula computes in lse's dtype (float32 for 16-bit inputs) and casts the
  // gradients back: the penalty's gradients follow float64's within the dtype's precision.
  const Case c = cases()[1];  // causal
  const Inputs in = inputs_of(c);
  const auto grads_in = [&](dt::DType dtype) {
    DTensor q = dt::local_dtensor(in.q.to(dtype)), k = dt::local_dtensor(in.k.to(dtype)),
            v = dt::local_dtensor(in.v.to(dtype));
    for (DTensor* t : {&q, &k, &v}) t->requires_grad_();
    const Result r = penalty_of(c, q, k, v, dt::local_dtensor(in.up.to(dtype)), DTensor());
    std::vector<Tensor> g;
    for (const DTensor* t : {&q, &k, &v}) {
      CHECK(t->grad().dtype() == dtype);
      g.push_back(t->grad().to_local().to(dt::kFloat64));
    }
    return g;
  };
  const std::vector<Tensor> want = grads_in(dt::kFloat64);
  for (const auto& [dtype, tol] : {std::pair{dt::kFloat32, 1e-5}, std::pair{dt::kBFloat16, 5e-2}}) {
    INFO(dt::dtype_name(dtype));
    const std::vector<Tensor> got = grads_in(dtype);
    for (size_t i = 0; i < 3; ++i) {
      // Relative to the largest gradient (bfloat16 keeps 8 bits of mantissa).
      const std::vector<double> a = got[i].to_vector<double>(), b = want[i].to_vector<double>();
      double largest = 0, worst = 0;
      for (size_t j = 0; j < a.size(); ++j) {
        largest = std::max(largest, std::abs(b[j]));
        worst = std::max(worst, std::abs(a[j] - b[j]));
      }
      INFO("input " << i << ": largest " << largest << ", error " << worst);
      CHECK(worst <= tol * largest);
    }
  }
}

TEST_CASE("attention third order (create_graph twice) equals PyTorch, sharded too") {
  // hq = d penalty / dq with create_graph (its pass runs the create_graph formula with an lse
  // gradient, from p = exp(s - lse)), then d sum(hq * dir) / (q, k, v), against PyTorch 2.15.
  const Case c = cases()[1];  // causal
  const Inputs in = inputs_of(c);
  const Tensor dir = values({c.B, c.H, c.L, c.E}, 8.0);
  const auto third = [&](const DTensor& q, const DTensor& k, const DTensor& v, const DTensor& up,
                         const DTensor& d) {
    const DTensor out = dt::scaled_dot_product_attention(q, k, v, DTensor(), 0.0, true, c.scale);
    const DTensor loss[] = {dt::sum(out * up)};
    const DTensor ins[] = {q, k, v};
    const std::vector<DTensor> g = dt::autograd::grad(loss, ins, {}, std::nullopt, true);
    const DTensor pen[] = {dt::sum(g[0] * g[0]) + dt::sum(g[1] * g[1]) + dt::sum(g[2] * g[2])};
    const DTensor qs[] = {q};
    const DTensor hq = dt::autograd::grad(pen, qs, {}, std::nullopt, true)[0];
    const DTensor h[] = {dt::sum(hq * d)};
    return dt::autograd::grad(h, ins);
  };
  const std::vector<double>* want[] = {&refs::kCausal::kThirdQ, &refs::kCausal::kThirdK,
                                       &refs::kCausal::kThirdV};
  const Tensor* shapes[] = {&in.q, &in.k, &in.v};
  const dt::DeviceMesh mesh = tt::family_meshes()[0];
  for (const auto& [qp, kp] : std::vector<std::pair<Placements, Placements>>{
           {{Shard(1)}, {Shard(1)}}, {{Shard(2)}, {Replicate()}}, {{}, {}}}) {
    const bool single = qp.empty();
    INFO((single ? "single device" : tt::describe(mesh, {qp, kp}, shapes[0]->sizes())));
    const auto put = [&](const Tensor& t, const Placements& p) {
      DTensor d = single ? dt::local_dtensor(t) : dt::distribute_tensor(t, mesh, p, std::nullopt);
      return d;
    };
    DTensor q = put(in.q, qp), k = put(in.k, kp), v = put(in.v, kp);
    for (DTensor* t : {&q, &k, &v}) t->requires_grad_();
    const std::vector<DTensor> got = third(q, k, v, put(in.up, qp), put(dir, qp));
    for (size_t i = 0; i < 3; ++i) {
      CHECK(tt::same_values(got[i].full_tensor(), ref(*want[i], *shapes[i]), 1e-12));
    }
  }
}

namespace {

// A floating attn_mask that requires grad (a learnable bias;
// torch_attention_mask_grad_references.py).
struct MaskCase {
  std::string name;
  int64_t B, H, Hk, L, S, E, Ev;
  std::optional<double> scale;
  bool causal;
  std::vector<int64_t> mask_shape;
  const std::vector<double>*gm, *q_grad, *k_grad, *v_grad, *mask_grad;
  double penalty;
};

#define AMG_REFS(ns)                                                           \
  &mrefs::ns::kGm, &mrefs::ns::kQGrad, &mrefs::ns::kKGrad, &mrefs::ns::kVGrad, \
      &mrefs::ns::kMaskGrad, mrefs::ns::kPenalty
std::vector<MaskCase> mask_cases() {
  return {
      {"[L, S] mask, causal", 2, 3, 3, 5, 5, 3, 2, 0.6, true, {5, 5}, AMG_REFS(kLsCausal)},
      {"[1, H, L, S] mask, gqa",
       2,
       4,
       2,
       5,
       4,
       3,
       2,
       0.45,
       false,
       {1, 4, 5, 4},
       AMG_REFS(kHeadsGqa)},
      {"[B, 1, L, S] mask",
       3,
       3,
       3,
       4,
       5,
       3,
       2,
       std::nullopt,
       false,
       {3, 1, 4, 5},
       AMG_REFS(kBatch)},
      {"[B, H, L, S] mask, causal, gqa",
       2,
       4,
       2,
       5,
       5,
       3,
       2,
       0.5,
       true,
       {2, 4, 5, 5},
       AMG_REFS(kFullCausalGqa)},
  };
}
#undef AMG_REFS

// The mask's placements when q's are `qp`: along a mesh dim sharding q's dim d, the mask's
// matching dim (its dims align with q's trailing ones) is sharded too unless it broadcasts
// there (size 1) or the mask has no such dim; otherwise whole.
Placements mask_placements(const Placements& qp, const std::vector<int64_t>& mask_shape) {
  const int64_t lead = 4 - static_cast<int64_t>(mask_shape.size());
  Placements out;
  for (const dt::Placement& p : qp) {
    const int64_t d = p.is_shard() ? p.dim() - lead : -1;
    out.push_back(d >= 0 && mask_shape[static_cast<size_t>(d)] != 1 ? Shard(d) : Replicate());
  }
  return out;
}

struct MaskResult {
  DTensor first_gm;  // d loss / d mask, without create_graph (the composite backward)
  DTensor gm;        // the same with create_graph
  DTensor penalty;
};

// loss = sum(out * up): its mask gradient without create_graph, then the penalty of the four
// create_graph gradients, whose gradient backward() accumulates into the leaves' grad().
MaskResult mask_penalty_of(const MaskCase& c, const DTensor& q, const DTensor& k, const DTensor& v,
                           const DTensor& up, const DTensor& m) {
  const auto loss = [&] {
    const DTensor out =
        dt::scaled_dot_product_attention(q, k, v, m, 0.0, c.causal, c.scale, c.Hk != c.H);
    return dt::sum(out * up);
  };
  MaskResult r;
  const DTensor masks[] = {m};
  const DTensor l1[] = {loss()};
  r.first_gm = dt::autograd::grad(l1, masks)[0];
  const DTensor l2[] = {loss()};
  const DTensor ins[] = {q, k, v, m};
  const std::vector<DTensor> g =
      dt::autograd::grad(l2, ins, {}, std::nullopt, /*create_graph=*/true);
  r.gm = g[3];
  r.penalty =
      dt::sum(g[0] * g[0]) + dt::sum(g[1] * g[1]) + dt::sum(g[2] * g[2]) + dt::sum(g[3] * g[3]);
  r.penalty.backward();
  return r;
}

}  // namespace

TEST_CASE("attention float mask requiring grad gets its gradient, first and second order") {
  // d mask = ds summed over the dims the mask broadcasts along (PyTorch's), with and without
  // create_graph; the penalty's gradient reaches the mask too. Sharded: q, k, v batch-, head- or
  // query-sharded with the mask sharded along the matching dim or whole, at 1, 2, 4 ranks.
  for (const MaskCase& c : mask_cases()) {
    const Tensor q0 = values({c.B, c.H, c.L, c.E}, 1.0), k0 = values({c.B, c.Hk, c.S, c.E}, 2.0),
                 v0 = values({c.B, c.Hk, c.S, c.Ev}, 3.0), up0 = values({c.B, c.H, c.L, c.Ev}, 4.0),
                 m0 = values(c.mask_shape, 5.0, 0.8);
    const Tensor* shapes[] = {&q0, &k0, &v0, &m0};
    const std::vector<double>* want[] = {c.q_grad, c.k_grad, c.v_grad, c.mask_grad};
    const dt::DeviceMesh mesh1 = tt::family_meshes()[0], mesh2 = tt::family_meshes()[1];
    struct Layout {
      const dt::DeviceMesh* mesh;
      Placements qp, kp;
    };
    const std::vector<Layout> all = {{nullptr, {}, {}},
                                     {&mesh1, {Shard(0)}, {Shard(0)}},
                                     {&mesh1, {Shard(1)}, {Shard(1)}},
                                     {&mesh1, {Shard(2)}, {Replicate()}},
                                     {&mesh2, {Shard(0), Shard(1)}, {Shard(0), Shard(1)}},
                                     {&mesh2, {Shard(1), Shard(2)}, {Shard(1), Replicate()}}};
    for (const Layout& l : all) {
      const Placements mp = l.mesh ? mask_placements(l.qp, c.mask_shape) : Placements();
      INFO(c.name << " at " << dt::world_size() << " ranks: "
                  << (l.mesh ? tt::describe(*l.mesh, {l.qp, l.kp, mp}, q0.sizes())
                             : std::string("single device")));
      const auto put = [&](const Tensor& t, const Placements& p) {
        return l.mesh ? dt::distribute_tensor(t, *l.mesh, p, std::nullopt)
                      : dt::local_dtensor(t.clone());
      };
      DTensor q = put(q0, l.qp), k = put(k0, l.kp), v = put(v0, l.kp), m = put(m0, mp);
      DTensor* leaves[] = {&q, &k, &v, &m};
      for (DTensor* t : leaves) t->requires_grad_();
      const MaskResult r = mask_penalty_of(c, q, k, v, put(up0, l.qp), m);
      CHECK(tt::same_values(r.first_gm.full_tensor(), ref(*c.gm, m0), 1e-12));
      CHECK(tt::same_values(r.gm.full_tensor(), ref(*c.gm, m0), 1e-12));
      CHECK(r.penalty.full_tensor().item<double>() == Approx(c.penalty).epsilon(1e-12));
      for (size_t i = 0; i < 4; ++i) {
        INFO("input " << i);
        CHECK(tt::same_values(leaves[i]->grad().full_tensor(), ref(*want[i], *shapes[i]), 1e-12));
        CHECK(leaves[i]->grad().placements() == leaves[i]->placements());
      }
    }
  }
}

TEST_CASE("attention bool mask and a float mask not requiring grad get no gradient") {
  // The fused backward op (no create_graph) gives q the gradient the composite one gives (with
  // create_graph), the mask a constant in both; the mask gets no gradient. That the fused
  // .mask op is the one dispatched is checked in test_compile_mpi.cc (a node of the graph).
  const MaskCase c = mask_cases()[0];
  const Tensor q0 = values({c.B, c.H, c.L, c.E}, 1.0);
  DTensor q = dt::local_dtensor(q0.clone());
  q.requires_grad_();
  const DTensor k = dt::local_dtensor(values({c.B, c.H, c.S, c.E}, 2.0));
  const DTensor v = dt::local_dtensor(values({c.B, c.H, c.S, c.Ev}, 3.0));
  const DTensor up = dt::local_dtensor(values({c.B, c.H, c.L, c.Ev}, 4.0));
  const Tensor m0 = values(c.mask_shape, 5.0, 0.8);
  for (const DTensor& m :
       {dt::local_dtensor(m0), dt::local_dtensor(dt::gt(m0, dt::Scalar(-0.5)))}) {
    INFO((m.dtype() == dt::kBool ? "bool mask" : "float mask"));
    const auto loss = [&] {
      return dt::sum(dt::scaled_dot_product_attention(q, k, v, m, 0.0, false, c.scale) * up);
    };
    const DTensor l_ref[] = {loss()};
    const DTensor qs[] = {q};
    const DTensor want = dt::autograd::grad(l_ref, qs, {}, std::nullopt, /*create_graph=*/true)[0];
    dt::autograd::zero_grad(qs);  // undefined: no accumulation across the masks
    loss().backward();
    REQUIRE(q.grad().defined());
    CHECK(tt::same_values(q.grad().to_local(), want.detach().to_local(), 1e-12));
    CHECK(!m.requires_grad());
    CHECK(!m.grad().defined());
  }
}
