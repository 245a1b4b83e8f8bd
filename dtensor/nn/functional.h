// The DTensor math of the nn layer that the op library does not already offer (recorded by
// autograd), composed of the ops' DTensor forms (dtensor/ops/<family>/*.h), which pick the
// sharding through the propagation engine (cached strategies) and issue only the collectives
// their layouts need. linear, embedding, layer_norm and rms_norm have one form each, the ops'
// (dt::linear, dt::embedding, dt::layer_norm(x, normalized_shape, weight, bias, eps),
// dt::rms_norm); pointwise math (gelu, silu, add, mul) is the ops' too.
//
// What this file adds: on_mesh, the rule by which modules combine parameters on a self mesh (a
// local DTensor, nn::local_dtensor) with inputs on another mesh: taken as Replicate on the
// input's mesh (every rank holds the same full value), like PyTorch's implicit replication;
// PyTorch's scaled_dot_product_attention with dropout; attention on packed heads; SwiGLU;
// rotary embeddings. Activations must share one mesh ("[op] ... different meshes").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/ops/attention/attention.h"
#include "dtensor/rng/generator.h"

namespace dtensor::nn::functional {

// `p` when it is on `mesh` (or undefined); a local `p` (a parameter on the self mesh) taken as
// Replicate on `mesh` (every rank holds the same full value, like PyTorch's implicit
// replication; its gradient is the whole gradient, reduced when it arrives Partial); otherwise
// throws "[op] <what> is on mesh ... but the input is on mesh ...". The modules pass their
// parameters through it before the op, e.g. Linear:
//   dt::linear(x, on_mesh(weight, x.device_mesh(), "linear", "weight"), ...)
DTensor on_mesh(const DTensor& p, const DeviceMesh& mesh, std::string_view op = "on_mesh",
                std::string_view what = "the parameter");

// Multi-head scaled dot-product attention on packed heads: q, k, v are [B, S, H * head_dim]
// with the heads laid out contiguously along the last dim (not PyTorch's layout: see
// scaled_dot_product_attention below for [B, H, S, head_dim]). Composed of engine ops (reshape
// to [B, S, H, head_dim], transpose to [B, H, S, head_dim], matmul, scale, causal mask, softmax,
// matmul, back), so q/k/v sharded S(last) on a mesh dim (heads split evenly across ranks) or
// S(0) (batch) keep that placement and need no communication. Throws
// "[packed_heads_attention] local width 12 is not a multiple of head_dim 8 ..." when a shard
// would split a head. `causal` masks keys after the query. Output: q's shape.
DTensor packed_heads_attention(const DTensor& q, const DTensor& k, const DTensor& v,
                               int64_t head_dim, bool causal);

// PyTorch's F.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal,
// scale, enable_gqa) on its [B, H, L, E] layouts (the only layout of this name). dropout_p == 0
// (inference, or training without attention dropout): the registered op of
// dtensor/ops/attention/attention.h — blocked, no [L, S] score matrix, batch-, head- or
// query-sharded with no communication. dropout_p > 0: the math path, as PyTorch's math backend
// — scores materialised, softmax, dropout through the DTensor RNG (`gen` or the default
// generator: the same mask whatever the layout, dtensor/rng/dtensor_random.h), matmul. On that
// path a query row whose keys are all masked gives NaN (the fused op gives 0). causal_align:
// is_causal's diagonal, top-left (PyTorch's is_causal) or bottom-right (its causal_lower_right:
// query i of L sees keys j <= i + S - L, for decode steps and prefill after a cached prefix).
DTensor scaled_dot_product_attention(const DTensor& q, const DTensor& k, const DTensor& v,
                                     const DTensor& attn_mask, double dropout_p = 0.0,
                                     bool is_causal = false,
                                     std::optional<double> scale = std::nullopt,
                                     bool enable_gqa = false, Generator* gen = nullptr,
                                     CausalAlign causal_align = CausalAlign::kUpperLeft);

// SwiGLU's gating (the Llama / torchtitan feed-forward): silu(gate) * up, elementwise, with
// the placements the two operands agree on.
DTensor swiglu(const DTensor& gate, const DTensor& up);

// Rotary position embeddings (RoPE): the pairs of each head's D features are rotated by the
// angle pos * inv_freq[i], inv_freq[i] = theta^(-2i / D) for i in [0, D / 2). Which features
// pair up is the convention, and a checkpoint's q/k projections are trained for one of them:
//   kInterleaved (Meta's Llama, torchtitan; the default): (x[2i], x[2i + 1]);
//   kRotateHalf (Hugging Face transformers' rotate_half, GPT-NeoX): (x[i], x[i + D / 2]).
// The two are the same rotation after a fixed permutation of the q/k projections' output rows,
// so HF checkpoints need kRotateHalf to give HF's logits (issue 43).
enum class RotaryStyle { kInterleaved, kRotateHalf };

// rotary_tables: cos and sin of those angles for positions [0, seq_len) and i in [0, D / 2),
// each [seq_len, D / 2], float64 values rounded to `dtype`, on `device` (identical on every
// rank: no communication to build them).
struct RotaryTables {
  Tensor cos, sin;
};
RotaryTables rotary_tables(int64_t seq_len, int64_t head_dim, double theta = 10000.0,
                           DType dtype = kFloat32, Device device = Device(kCPU));
// The same from given inverse frequencies (D / 2 of them): for scaled variants that rewrite
// theta^(-2i / D), e.g. Llama 3's rope_scaling (dtensor/models/llama_config.h).
RotaryTables rotary_tables(int64_t seq_len, std::span<const double> inv_freq,
                           DType dtype = kFloat32, Device device = Device(kCPU));
// x [B, S, H, D] (D even) holds positions [start_pos, start_pos + S), which must lie within
// the tables (start_pos > 0 when decoding after a prefix, Llama's freqs_cis[start_pos:]):
// for each pair (a, b) of `style`, out[a] = x[a] cos - x[b] sin, out[b] = x[b] cos + x[a] sin.
// Composed of slice, mul, stack / cat and reshape, so x sharded on batch, sequence or heads
// keeps its placements with no communication (the tables enter as Replicate on x's mesh and
// are cut like x); the head dim itself must not be sharded (it is gathered first).
// Differentiable in x.
DTensor apply_rotary_emb(const DTensor& x, const RotaryTables& tables, int64_t start_pos = 0,
                         RotaryStyle style = RotaryStyle::kInterleaved);
// The same with a position per token: position_ids (int64, local, the same on every rank) is
// [B, S] or [S], each within the tables (HF's position_ids, e.g. a left-padded row's positions
// counting from its first real token).
DTensor apply_rotary_emb(const DTensor& x, const RotaryTables& tables, const Tensor& position_ids,
                         RotaryStyle style = RotaryStyle::kInterleaved);

}  // namespace dtensor::nn::functional
