#include "dtensor/nn/functional.h"

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "dtensor/core/dtensor_spec.h"
#include "dtensor/nn/detail/rotary.h"
#include "dtensor/nn/module.h"
#include "dtensor/ops/attention/attention.h"
#include "dtensor/ops/common/detail/attention_checks.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/index/index.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/softmax/softmax.h"
#include "dtensor/ops/view/copy_ops.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/rng/dtensor_random.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/detail/capture_hook.h"
#include "dtensor/tensor/error.h"

namespace dtensor::nn::functional {

DTensor on_mesh(const DTensor& p, const DeviceMesh& mesh, std::string_view op,
                std::string_view what) {
  if (!p.defined() || p.device_mesh() == mesh) return p;
  if (is_local(p)) {
    return DTensor::from_local(p, mesh, Placements(static_cast<size_t>(mesh.ndim()), Replicate()),
                               /*run_check=*/false, p.shape());
  }
  DT_FAIL(
      "[%s] %s is on mesh %s but the input is on mesh %s (expected the same mesh, or a "
      "local parameter)",
      op, what, p.device_mesh().str(), mesh.str());
}

namespace {

void check_defined(const DTensor& x, std::string_view op, std::string_view what) {
  DT_CHECK(x.defined(), "[%s] %s is undefined (expected a DTensor)", op, what);
}

void check_same_mesh(const DTensor& a, const DTensor& b, std::string_view op) {
  DT_CHECK(a.device_mesh() == b.device_mesh(),
           "[%s] operands are on different meshes %s and %s (expected one mesh)", op,
           a.device_mesh().str(), b.device_mesh().str());
}

// A tensor whose values follow from shapes only (a mask, a table of positions): a captured step
// (dtensor/compile/) keeps reading it, since its guards keep the shapes.
Tensor shape_constant(Tensor t) {
  dtensor::detail::keep_in_capture(t);
  return t;
}

// The additive causal mask [L, S] (0 where key j <= query i + diagonal, -inf after) in `dtype`
// on `device`. The float32 CPU mask is built once per shape and thread, not on every forward
// (the ops never write into their inputs, so sharing it is safe); other dtypes/devices convert
// it per call, so no device memory outlives the runtime in a thread_local.
Tensor causal_mask(int64_t L, int64_t S, DType dtype, Device device, int64_t diagonal = 0) {
  thread_local Tensor cached;
  thread_local int64_t cached_diagonal = 0;
  if (!cached.defined() || cached.size(0) != L || cached.size(1) != S ||
      cached_diagonal != diagonal) {
    std::vector<float> mask(static_cast<size_t>(L * S), 0.0f);
    for (int64_t i = 0; i < L; ++i) {
      for (int64_t j = std::max<int64_t>(i + diagonal + 1, 0); j < S; ++j) {
        mask[static_cast<size_t>(i * S + j)] = -std::numeric_limits<float>::infinity();
      }
    }
    cached = from_vector(mask, {L, S});
    cached_diagonal = diagonal;
  }
  if (dtype == kFloat32 && device == Device(kCPU)) return shape_constant(cached);
  return shape_constant(cached.to(device, dtype));
}

}  // namespace

DTensor packed_heads_attention(const DTensor& q, const DTensor& k, const DTensor& v,
                               int64_t head_dim, bool causal) {
  constexpr std::string_view kOp = "packed_heads_attention";
  check_defined(q, kOp, "q");
  check_defined(k, kOp, "k");
  check_defined(v, kOp, "v");
  check_same_mesh(q, k, kOp);
  check_same_mesh(q, v, kOp);
  DT_CHECK(q.dim() == 3, "[%s] q must be 3-d [batch, seq, heads * head_dim], got shape %s", kOp,
           shape_str(q.shape()));
  DT_CHECK(k.shape() == q.shape() && v.shape() == q.shape(),
           "[%s] q, k and v must have one shape, got %s, %s and %s", kOp, shape_str(q.shape()),
           shape_str(k.shape()), shape_str(v.shape()));
  DT_CHECK(head_dim > 0 && q.size(2) % head_dim == 0,
           "[%s] head_dim %d must be positive and divide the width %d", kOp, head_dim, q.size(2));
  const int64_t local_width = q.to_local().dim() == 3 ? q.to_local().size(2) : 0;
  DT_CHECK(local_width % head_dim == 0,
           "[%s] local width %d is not a multiple of head_dim %d: a shard would split a head "
           "(placements %s; the number of heads must be divisible by the number of shards)",
           kOp, local_width, head_dim, placements_str(q.placements()));
  const int64_t B = q.size(0), S = q.size(1), W = q.size(2);
  const int64_t split[] = {B, S, W / head_dim, head_dim};
  auto heads = [&](const DTensor& t) { return transpose(reshape(t, split), 1, 2); };  // [B,H,S,hd]
  DTensor scores = matmul(heads(q), transpose(heads(k), 2, 3));                       // [B,H,S,S]
  scores = mul(scores, Scalar(1.0 / std::sqrt(static_cast<double>(head_dim))));
  if (causal && S > 0) {
    const Tensor m = causal_mask(S, S, scores.dtype(), scores.to_local().device());
    const DeviceMesh& mesh = q.device_mesh();
    scores = add(scores, DTensor::from_local(
                             m, mesh, Placements(static_cast<size_t>(mesh.ndim()), Replicate())));
  }
  const DTensor o = matmul(softmax(scores, -1), heads(v));  // [B,H,S,hd]
  const int64_t merged[] = {B, S, W};
  return reshape(transpose(o, 1, 2), merged);
}

DTensor scaled_dot_product_attention(const DTensor& q, const DTensor& k, const DTensor& v,
                                     const DTensor& attn_mask, double dropout_p, bool is_causal,
                                     std::optional<double> scale, bool enable_gqa, Generator* gen,
                                     CausalAlign causal_align) {
  constexpr std::string_view kOp = "scaled_dot_product_attention";
  DT_CHECK(dropout_p >= 0.0 && dropout_p < 1.0, "[%s] dropout_p %g is outside [0, 1)", kOp,
           dropout_p);
  if (dropout_p == 0.0) {
    return ::dtensor::scaled_dot_product_attention(q, k, v, attn_mask, 0.0, is_causal, scale,
                                                   enable_gqa, causal_align);
  }
  check_defined(q, kOp, "q");
  check_defined(k, kOp, "k");
  check_defined(v, kOp, "v");
  if (enable_gqa && q.dim() == 4 && k.dim() == 4 && k.size(1) != q.size(1) && k.size(1) > 0 &&
      q.size(1) % k.size(1) == 0) {
    const int64_t g = q.size(1) / k.size(1);
    return scaled_dot_product_attention(q, repeat_interleave(k, g, 1), repeat_interleave(v, g, 1),
                                        attn_mask, dropout_p, is_causal, scale, false, gen,
                                        causal_align);
  }
  ::dtensor::detail::check_attention_operands(kOp, q.shape(), k.shape(), v.shape(), q.dtype(),
                                              k.dtype(), v.dtype());
  const double s = scale ? *scale : default_attention_scale(q.size(3));
  DTensor scores = mul(matmul(q, transpose(k, 2, 3)), Scalar(s));
  const double inf = std::numeric_limits<double>::infinity();
  if (attn_mask.defined()) {
    scores = attn_mask.dtype() == kBool ? masked_fill(scores, logical_not(attn_mask), Scalar(-inf))
                                        : add(scores, attn_mask);
  }
  if (is_causal && q.size(2) > 0 && k.size(2) > 0) {
    const int64_t diagonal = causal_align == CausalAlign::kLowerRight ? k.size(2) - q.size(2) : 0;
    const Tensor m =
        causal_mask(q.size(2), k.size(2), scores.dtype(), scores.to_local().device(), diagonal);
    const DeviceMesh& mesh = q.device_mesh();
    scores = add(scores, DTensor::from_local(
                             m, mesh, Placements(static_cast<size_t>(mesh.ndim()), Replicate())));
  }
  return matmul(dropout(softmax(scores, -1), dropout_p, /*train=*/true, gen), v);
}

DTensor swiglu(const DTensor& gate, const DTensor& up) {
  return mul(silu(gate), up);
}

RotaryTables rotary_tables(int64_t seq_len, int64_t head_dim, double theta, DType dtype,
                           Device device) {
  DT_CHECK(seq_len >= 0 && head_dim > 0 && head_dim % 2 == 0 && theta > 0,
           "[rotary_tables] seq_len %d, head_dim %d, theta %g: expected seq_len >= 0, an even "
           "head_dim > 0 and theta > 0",
           seq_len, head_dim, theta);
  std::vector<double> inv_freq(static_cast<size_t>(head_dim / 2));
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    inv_freq[i] = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  }
  return rotary_tables(seq_len, inv_freq, dtype, device);
}

RotaryTables rotary_tables(int64_t seq_len, std::span<const double> inv_freq, DType dtype,
                           Device device) {
  DT_CHECK(seq_len >= 0 && !inv_freq.empty(),
           "[rotary_tables] seq_len %d with %d inverse frequencies: expected seq_len >= 0 and at "
           "least one frequency",
           seq_len, static_cast<int64_t>(inv_freq.size()));
  const RotaryTables t = nn::detail::rotary_cos_sin<double>(inv_freq, seq_len);
  return {t.cos.to(device, dtype), t.sin.to(device, dtype)};
}

namespace {

void check_rotary_operands(const DTensor& x, const RotaryTables& tables) {
  constexpr std::string_view kOp = "apply_rotary_emb";
  check_defined(x, kOp, "x");
  DT_CHECK(tables.cos.defined() && tables.sin.defined() && tables.cos.dim() == 2 &&
               tables.sin.sizes() == tables.cos.sizes(),
           "[%s] the rotary tables must be two [seq_len, head_dim / 2] tensors", kOp);
  DT_CHECK(x.dim() == 4 && x.size(3) % 2 == 0 && x.size(3) / 2 == tables.cos.size(1),
           "[%s] x has shape %s, expected [B, S, H, D] with D = 2 * %d (the tables)", kOp,
           shape_str(x.shape()), tables.cos.size(1));
}

// Rotates x [B, S, H, D] by cos / sin given as local [B or 1, S, 1, D / 2] tables (the same on
// every rank), entered as Replicate on x's mesh.
DTensor rotate(const DTensor& x, const Tensor& cos, const Tensor& sin, RotaryStyle style) {
  const int64_t D = x.size(3), half = D / 2;
  const DeviceMesh& mesh = x.device_mesh();
  const Placements whole(static_cast<size_t>(mesh.ndim()), Replicate());
  auto table = [&](const Tensor& t) {
    return DTensor::from_local(shape_constant(t.to(x.device(), x.dtype())), mesh, whole,
                               /*run_check=*/false);
  };
  const DTensor c = table(cos), s = table(sin);
  if (style == RotaryStyle::kRotateHalf) {
    const DTensor lo = slice(x, 3, 0, half), hi = slice(x, 3, half, D);
    return cat({sub(mul(lo, c), mul(hi, s)), add(mul(hi, c), mul(lo, s))}, 3);
  }
  const DTensor even = slice(x, 3, 0, D, 2), odd = slice(x, 3, 1, D, 2);
  const DTensor out_even = sub(mul(even, c), mul(odd, s));
  const DTensor out_odd = add(mul(even, s), mul(odd, c));
  return reshape(stack({out_even, out_odd}, 4), x.shape());
}

}  // namespace

DTensor apply_rotary_emb(const DTensor& x, const RotaryTables& tables, int64_t start_pos,
                         RotaryStyle style) {
  constexpr std::string_view kOp = "apply_rotary_emb";
  check_rotary_operands(x, tables);
  DT_CHECK(start_pos >= 0 && start_pos + x.size(1) <= tables.cos.size(0),
           "[%s] positions [%d, %d) of x (shape %s, start_pos %d) are outside the tables' %d "
           "positions",
           kOp, start_pos, start_pos + x.size(1), shape_str(x.shape()), start_pos,
           tables.cos.size(0));
  const int64_t S = x.size(1), half = x.size(3) / 2;
  auto rows = [&](const Tensor& t) { return t.narrow(0, start_pos, S).reshape({1, S, 1, half}); };
  return rotate(x, rows(tables.cos), rows(tables.sin), style);
}

DTensor apply_rotary_emb(const DTensor& x, const RotaryTables& tables, const Tensor& position_ids,
                         RotaryStyle style) {
  constexpr std::string_view kOp = "apply_rotary_emb";
  check_rotary_operands(x, tables);
  const int64_t B = x.size(0), S = x.size(1), half = x.size(3) / 2;
  DT_CHECK(
      position_ids.defined() && position_ids.dtype() == kInt64 &&
          ((position_ids.dim() == 2 && position_ids.size(0) == B && position_ids.size(1) == S) ||
           (position_ids.dim() == 1 && position_ids.size(0) == S)),
      "[%s] position_ids must be int64 [B, S] = [%d, %d] or [S], got %s", kOp, B, S,
      position_ids.defined() ? shape_str(position_ids.shape()) : std::string("undefined"));
  const Tensor flat = position_ids.contiguous().reshape({position_ids.numel()}).to(Device(kCPU));
  for (const int64_t p : flat.to_vector<int64_t>()) {
    DT_CHECK(p >= 0 && p < tables.cos.size(0),
             "[%s] position %d is outside the tables' %d positions", kOp, p, tables.cos.size(0));
  }
  const int64_t rows_b = position_ids.dim() == 2 ? B : 1;
  auto rows = [&](const Tensor& t) {
    return index_select(t, 0, flat.to(t.device())).reshape({rows_b, S, 1, half});
  };
  return rotate(x, rows(tables.cos), rows(tables.sin), style);
}

}  // namespace dtensor::nn::functional
