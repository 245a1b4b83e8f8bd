// Scaled dot-product attention as one op (PyTorch's F.scaled_dot_product_attention without
// dropout): out = softmax(q k^T * scale + mask) v on [batch, heads, seq, head_dim] layouts,
// computed block by block with an online softmax, so at most one [batch * heads, 128, 128] block
// of scores exists at a time, forward and backward (flash-attention's recurrence: the backward
// recomputes each block from the saved log-sum-exp of every query row).
//
// The local kernels are written with the op library's own tensor ops (bmm, exp, amax, where,
// ...), so the same code runs on the CPU and on CUDA (each of those ops has its CUDA kernel); it
// accumulates in float32 for 16-bit inputs and in the input's dtype otherwise.
#pragma once

#include <cstdint>
#include <string_view>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// Where a causal mask's diagonal sits when queries and keys differ in length (PyTorch's
// torch.nn.attention.bias.CausalVariant): kUpperLeft is is_causal's (query i sees keys j <= i);
// kLowerRight is causal_lower_right's (query i of L sees keys j <= i + S - L: the queries are the
// last L positions of the S keys, as in a decode step or a prefill after a cached prefix).
enum class CausalAlign { kUpperLeft, kLowerRight };

// What every attention call shares. q is [B, H, L, E], k [B, H, S, E], v [B, H, S, Ev] (one dtype,
// floating); the optional mask is [L, S] or [B, H, L, S] (or broadcast over the batch or the
// heads: [B or 1, H or 1, L, S], as PyTorch; a [B, 1, L, S] padding mask is never expanded),
// bool (true: the key takes part) or of q's dtype (added to the scores). causal: query i sees
// keys j <= i (top-left aligned, as PyTorch's is_causal), where i counts from `q_offset` (the
// first query row's global index, for a block of queries; plus S - L for
// CausalAlign::kLowerRight, as the registered op adds it). A query row that sees no key gives 0
// (PyTorch's safe softmax) and its log-sum-exp is -inf.
struct AttentionParams {
  double scale = 1.0;
  bool causal = false;
  int64_t q_offset = 0;
};

struct AttentionResult {
  Tensor out;  // [B, H, L, Ev], q's dtype
  Tensor lse;  // [B, H, L], the accumulation dtype: log(sum_j exp(score_ij))
};

// The forward pass (mask may be undefined). Raises "[scaled_dot_product_attention] ..." for
// shapes or dtypes that do not fit.
AttentionResult attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& mask, const AttentionParams& p);

struct AttentionGrads {
  Tensor q, k, v;  // the inputs' shapes and dtype
};
// The backward pass from the gradients of out and lse ([B, H, L]; d lse_i / d s_ij is the
// probability p_ij) and the forward's out and lse. No mask gradient (the registered formula
// takes its composite when a floating mask requires grad).
AttentionGrads attention_backward(const Tensor& grad_out, const Tensor& grad_lse, const Tensor& q,
                                  const Tensor& k, const Tensor& v, const Tensor& mask,
                                  const Tensor& out, const Tensor& lse, const AttentionParams& p);

// The default scale, 1 / sqrt(E).
double default_attention_scale(int64_t head_dim);

// ---- DTensor form (attention_strategy.cc) ----------------------------------------------------
// Registered as "scaled_dot_product_attention" and, with a mask, ".mask" (scale a runtime arg,
// causal and its alignment static), each with its backward op. Rows for one mesh dim
// ([out, lse | q, k, v(, mask)]): batch-sharded (S(0) on all, a 2-d mask whole), head-sharded
// (S(1) on all, a 2-d mask whole; a 4-d mask whole along a dim it broadcasts over, so a
// [B, 1, L, S] mask needs no communication when the heads are sharded), query-sharded (q, out,
// lse S(2) with k and v whole: causal counts from each block's global offset, plus S - L under
// kLowerRight; a 4-d mask S(2), a 2-d one S(0)), and v Partial with q and k whole (attention is
// linear in v: out Partial, lse whole). None communicates. Differentiable in q, k and v, and in
// a floating mask that requires grad (ds summed over the dims it broadcasts along, as PyTorch),
// also twice: under create_graph, and for such a mask, the gradient is composed of
// differentiable ops (the [B, H, L, S] probabilities materialised, from the saved
// log-sum-exp; attention_backward.cc); otherwise the fused backward op runs.
// scale: 1 / sqrt(E) when not given. enable_gqa (grouped-query attention, PyTorch's flag): k
// and v may have fewer heads than q, a divisor of them; each k/v head then serves H / Hk
// consecutive q heads (k and v go through repeat_interleave along the head dim first, which
// keeps a head shard when every rank's q heads map onto its own k/v heads: Hk divisible by the
// ranks sharding the heads, or uneven but aligned; otherwise k/v heads are gathered). The
// arguments are PyTorch's, in its order; dropout is done by
// nn::functional::scaled_dot_product_attention (the math path), so a dropout_p other than 0
// raises here. causal_align places is_causal's diagonal (ignored when is_causal is false):
// kLowerRight for queries that continue a cached prefix of keys.
DTensor scaled_dot_product_attention(const DTensor& q, const DTensor& k, const DTensor& v,
                                     const DTensor& attn_mask = DTensor(), double dropout_p = 0.0,
                                     bool is_causal = false,
                                     std::optional<double> scale = std::nullopt,
                                     bool enable_gqa = false,
                                     CausalAlign causal_align = CausalAlign::kUpperLeft);

}  // namespace dtensor
