// scaled_dot_product_attention on DTensors: the registered forward ops (without and with a
// mask), their backward ops, sharding rows and samples (the forward ops' backward formulas are
// in attention_backward.cc). See attention.h for the rows.
//
// Args of every attention op: (scale [runtime], causal, lower_right: causal's diagonal aligned
// bottom-right, CausalAlign::kLowerRight). The forward has two outputs, out and
// the log-sum-exp of each query row, which the backward reuses; the DTensor function returns
// out only.
#include <absl/strings/str_format.h>

#include <optional>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/attention/attention.h"
#include "dtensor/ops/attention/detail/attention_backward.h"
#include "dtensor/ops/common/detail/attention_checks.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/register_all.h"
#include "dtensor/ops/view/copy_ops.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

using Locals = absl::Span<const Tensor>;

constexpr const char* kForward = "scaled_dot_product_attention";
constexpr const char* kForwardMask = "scaled_dot_product_attention.mask";
constexpr const char* kBackward = "scaled_dot_product_attention_backward";
constexpr const char* kBackwardMask = "scaled_dot_product_attention_backward.mask";

// The kernels' parameters: scale and causal from the args, and the first query row's global
// index from q's shard (a block of queries under the query-sharded row). Bottom-right
// alignment shifts every query by S - L (global lengths): query i sees keys j <= i + S - L.
AttentionParams params(const KernelContext& c, int64_t q_input) {
  AttentionParams p;
  p.scale = c.scalar(0).to<double>();
  p.causal = c.arg<bool>(1);
  p.q_offset = c.input_shard(q_input).offset[2];
  if (p.causal && c.arg<bool>(2)) {
    p.q_offset += c.input_spec(q_input + 1).shape()[2] - c.input_spec(q_input).shape()[2];
  }
  return p;
}

// Checks q, k, v (inputs first..first+2) and the mask (input `mask`, or -1) from their specs,
// as the local kernel would, so a bad call raises on every rank before any placement is chosen.
void check_operands(const OpSchema& s, int64_t first, int64_t mask) {
  const DTensorSpec& q = s.input(first);
  const DTensorSpec& k = s.input(first + 1);
  const DTensorSpec& v = s.input(first + 2);
  detail::check_attention_operands(s.name(), q.shape(), k.shape(), v.shape(), q.dtype(), k.dtype(),
                                   v.dtype());
  if (mask >= 0) {
    detail::check_attention_mask(s.name(), s.input(mask).shape(), s.input(mask).dtype(), q.shape(),
                                 k.shape(), q.dtype());
  }
}

// The mask's placement in a row where q's dims are placed by `on_q` (a [B, H, L, S] mask
// follows q's dim, except a dim it broadcasts over (size 1 where q's is not: a [B, 1, L, S]
// padding mask with the heads sharded), which it holds whole; a [L, S] one is whole, or S(0)
// when q is sharded along L).
Placement mask_placement(const OpSchema& s, int64_t mask, std::optional<int64_t> q_dim) {
  if (!q_dim) return Replicate();
  const Shape& m = s.input(mask).shape();
  if (m.size() == 4) {
    const bool broadcast = m[*q_dim] == 1 && s.input(0).shape()[*q_dim] != 1;
    return broadcast ? Placement(Replicate()) : Placement(Shard(*q_dim));
  }
  return *q_dim == 2 ? Placement(Shard(0)) : Placement(Replicate());
}

// Forward rows [out, lse | q, k, v (, mask)].
StrategyRows forward_rows(const OpSchema& s, bool has_mask) {
  StrategyRows rows;
  auto add = [&](Placements row, std::optional<int64_t> q_dim) {
    if (has_mask) row.push_back(mask_placement(s, 3, q_dim));
    rows.push_back(std::move(row));
  };
  add({Shard(0), Shard(0), Shard(0), Shard(0), Shard(0)}, 0);        // batch
  add({Shard(1), Shard(1), Shard(1), Shard(1), Shard(1)}, 1);        // heads
  add({Shard(2), Shard(2), Shard(2), Replicate(), Replicate()}, 2);  // queries
  for (ReduceOp r : {ReduceOp::kSum, ReduceOp::kAvg}) {              // linear in v
    add({Partial(r), Replicate(), Replicate(), Replicate(), Partial(r)}, std::nullopt);
  }
  return rows;
}

// Backward rows [dq, dk, dv | grad, grad_lse, q, k, v, out, lse (, mask)].
StrategyRows backward_rows(const OpSchema& s, bool has_mask) {
  StrategyRows rows;
  auto add = [&](Placements row, std::optional<int64_t> q_dim) {
    if (has_mask) row.push_back(mask_placement(s, 7, q_dim));
    rows.push_back(std::move(row));
  };
  for (int64_t d : {0, 1}) add(detail::uniform_row(10, Shard(d)), d);  // batch, heads
  const Placement R = Replicate(), S2 = Shard(2), P = Partial();
  add({S2, P, P, S2, S2, S2, R, R, S2, S2}, 2);  // queries: k and v gradients summed over blocks
  for (ReduceOp r : {ReduceOp::kSum, ReduceOp::kAvg}) {  // linear in the two gradients
    const Placement Pr = Partial(r);
    add({Pr, Pr, Pr, Pr, Pr, R, R, R, R, R}, std::nullopt);
  }
  return rows;
}

OutputMetas forward_meta(const OpSchema& s, bool has_mask) {
  check_operands(s, 0, has_mask ? 3 : -1);
  const Shape& q = s.input(0).shape();
  const DType dtype = s.input(0).dtype();
  return OutputMetas{TensorMeta({q[0], q[1], q[2], s.input(2).shape()[3]}, dtype),
                     TensorMeta({q[0], q[1], q[2]}, dtype == kFloat64 ? kFloat64 : kFloat32)};
}

// Sample calls: uneven and empty shards of batch, heads and queries, causal or not, a bool
// mask of either rank when `mask_rank` is 2 or 4, or one broadcast over the heads [B, 1, L, S]
// when it is 3 (of `mask_dtype`: bool, or floating, added to the scores). kind: the usual calls,
// one with the batch short of the ranks, or one causal aligned bottom-right with fewer queries than
// keys. (The harnesses draw each sample's values from its index: a new call goes last, so that the
// others keep values whose random masks leave every causal query row a key.)
enum class SampleKind { kUsual, kShortBatch, kLowerRight };
std::vector<OpSample> attention_samples(int64_t w, int64_t mask_rank, bool backward,
                                        SampleKind kind = SampleKind::kUsual,
                                        DType mask_dtype = kBool) {
  using detail::sample;
  auto call = [&](int64_t B, int64_t H, int64_t L, int64_t S, bool causal, double scale,
                  bool lower_right = false) {
    const int64_t E = 3, Ev = 2;
    OpSample c;
    if (backward) {
      c.inputs.push_back(sample({B, H, L, Ev}, kFloat64, -2, 2));  // grad
      c.inputs.push_back(sample({B, H, L}, kFloat64, -2, 2));      // grad_lse
    }
    c.inputs.push_back(sample({B, H, L, E}, kFloat64, -2, 2));
    c.inputs.push_back(sample({B, H, S, E}, kFloat64, -2, 2));
    c.inputs.push_back(sample({B, H, S, Ev}, kFloat64, -2, 2));
    if (backward) {
      c.inputs.push_back(sample({B, H, L, Ev}, kFloat64, -2, 2));  // out
      c.inputs.push_back(sample({B, H, L}, kFloat64, 1, 3));       // lse
    }
    const auto mask = [mask_dtype](Shape shape) {
      return mask_dtype == kBool ? sample(std::move(shape), kBool)
                                 : sample(std::move(shape), mask_dtype, -1, 1);
    };
    if (mask_rank == 2) c.inputs.push_back(mask({L, S}));
    if (mask_rank == 4) c.inputs.push_back(mask({B, H, L, S}));
    if (mask_rank == 3) c.inputs.push_back(mask({B, 1, L, S}));  // over the heads
    c.args = {scale, causal, lower_right};
    return c;
  };
  // w - 1 batches: the last rank's batch shard is empty.
  if (kind == SampleKind::kShortBatch) return {call(detail::short_size(w), 2, 3, 4, false, 0.5)};
  if (kind == SampleKind::kLowerRight) {
    return {call(2, w + 1, 2 * w + 1, 3 * w + 2, true, 0.45, /*lower_right=*/true)};
  }
  return {call(w + 1, 2 * w + 1, 2 * w + 1, w + 2, false, 0.5),
          call(2, w + 1, 3 * w + 1, 3 * w + 1, true, 0.4)};
}

void register_attention(Registry& reg, bool has_mask) {
  OpInfo op = detail::make_op(has_mask ? kForwardMask : kForward, {"query", "key", "value"});
  if (has_mask) op.input_names.push_back("attn_mask");
  op.schema_info.static_argnum = 1;
  op.meta = [has_mask](const OpSchema& s) { return forward_meta(s, has_mask); };
  op.strategy = [has_mask](const OpSchema& s) { return forward_rows(s, has_mask); };
  op.kernel = [has_mask](const KernelContext& c, Locals l, absl::Span<Tensor> out) {
    AttentionResult r =
        attention_forward(l[0], l[1], l[2], has_mask ? l[3] : Tensor(), params(c, 0));
    out[0] = std::move(r.out);
    out[1] = std::move(r.lse);
  };
  op.backward = has_mask ? detail::attention_mask_grad : detail::attention_grad;
  op.saved_outputs = 3u;  // out and lse
  const int64_t mask_rank = has_mask ? 2 : 0;
  op.samples = [mask_rank](int64_t w) {
    std::vector<OpSample> calls = attention_samples(w, mask_rank, false);
    if (mask_rank > 0) {
      for (OpSample& c : attention_samples(w, 4, false)) calls.push_back(std::move(c));
    }
    calls.push_back(attention_samples(w, mask_rank, false, SampleKind::kShortBatch)[0]);
    calls.push_back(attention_samples(w, mask_rank, false, SampleKind::kLowerRight)[0]);
    if (mask_rank > 0) calls.push_back(attention_samples(w, 3, false)[0]);
    if (mask_rank > 0) {  // floating masks (a learnable bias): [L, S] (causal too), [B, 1, L, S]
      for (OpSample& c : attention_samples(w, 2, false, SampleKind::kUsual, kFloat64)) {
        calls.push_back(std::move(c));
      }
      calls.push_back(attention_samples(w, 3, false, SampleKind::kUsual, kFloat64)[0]);
    }
    return calls;
  };
  reg.add(std::move(op));

  OpInfo bw = detail::gradient_op(has_mask ? kBackwardMask : kBackward,
                                  {"grad", "grad_lse", "query", "key", "value", "out", "lse"},
                                  Linearity::kNone);
  if (has_mask) bw.input_names.push_back("attn_mask");
  bw.schema_info.static_argnum = 1;
  bw.meta = [has_mask](const OpSchema& s) {
    check_operands(s, 2, has_mask ? 7 : -1);
    const Shape& q = s.input(2).shape();
    const Shape rows = {q[0], q[1], q[2]};
    DT_CHECK(s.input(0).shape() == s.input(5).shape() && s.input(1).shape() == rows &&
                 s.input(6).shape() == rows,
             "[%s] grad %s, grad_lse %s, out %s and lse %s do not fit q %s", s.name(),
             shape_str(s.input(0).shape()), shape_str(s.input(1).shape()),
             shape_str(s.input(5).shape()), shape_str(s.input(6).shape()), shape_str(q));
    return OutputMetas{s.input(2).meta(), s.input(3).meta(), s.input(4).meta()};
  };
  bw.strategy = [has_mask](const OpSchema& s) { return backward_rows(s, has_mask); };
  bw.kernel = [has_mask](const KernelContext& c, Locals l, absl::Span<Tensor> out) {
    AttentionGrads g = attention_backward(l[0], l[1], l[2], l[3], l[4], has_mask ? l[7] : Tensor(),
                                          l[5], l[6], params(c, 2));
    out[0] = std::move(g.q);
    out[1] = std::move(g.k);
    out[2] = std::move(g.v);
  };
  bw.samples = [mask_rank](int64_t w) {
    std::vector<OpSample> calls = attention_samples(w, mask_rank, true);
    calls.push_back(attention_samples(w, mask_rank, true, SampleKind::kShortBatch)[0]);
    calls.push_back(attention_samples(w, mask_rank, true, SampleKind::kLowerRight)[0]);
    if (mask_rank > 0) calls.push_back(attention_samples(w, 3, true)[0]);
    return calls;
  };
  reg.add(std::move(bw));
}

}  // namespace

void register_attention_ops(Registry& reg) {
  register_attention(reg, /*has_mask=*/false);
  register_attention(reg, /*has_mask=*/true);
}
}  // namespace dtensor
