// The DTensor math the nn modules are written with (recorded by autograd): thin compositions of the
// op library's DTensor forms (dtensor/ops/<family>/*.h), which pick the sharding through the
// propagation engine (cached strategies) and issue only the collectives their layouts need.
// Pointwise math (gelu, silu, add, mul) has no wrapper here: modules call the ops directly.
//
// What these functions add on top of the ops: parameters on a self mesh (nn::local) combined
// with inputs on another mesh are taken as Replicate on the input's mesh (every rank holds the
// same full value), like PyTorch's implicit replication; the normalised shape of the norms is
// the last dim; attention is composed from view, matmul, softmax and elementwise ops.
// Activations must share one mesh ("[op] ... different meshes").
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/rng/generator.h"

namespace dtensor::nn::functional {

// `p` when it is on `mesh` (or undefined); a local `p` (a parameter on the self mesh) taken as
// Replicate on `mesh` (every rank holds the same full value, like PyTorch's implicit
// replication; its gradient is the whole gradient, reduced when it arrives Partial); otherwise
// throws "[op] <what> is on mesh ... but the input is on mesh ...".
DTensor on_mesh(const DTensor& p, const DeviceMesh& mesh, std::string_view op,
                std::string_view what);

// y = x @ weight^T + bias with x[..., in], weight[out, in], bias[out] (optional): the DTensor
// linear of ops/matmul. Tensor-parallel layouts, no communication:
//   weight S(0), bias S(0), x R          -> S(last)   (ColwiseParallel)
//   weight S(1), bias R, x S(last)       -> P(sum)    (RowwiseParallel; the bias is added on
//                                                      coordinate 0 only, so it counts once)
//   weight R, x S(d) with d not last     -> S(d)
// Other layouts are redistributed to the cheapest of these under the cost model.
DTensor linear(const DTensor& x, const DTensor& weight, const DTensor& bias = DTensor());

// Rows of weight[num, dim] picked by integer `indices` -> [indices.shape..., dim] (the DTensor
// embedding of dtensor/ops/embedding). Per mesh dim: weight S(0) with indices R -> P(sum) (masked
// lookup); weight S(1) with indices R -> S(last); weight R with indices S(d) -> S(d).
DTensor embedding(const DTensor& indices, const DTensor& weight);

// Layer norm / RMS norm over the last dim with optional weight and bias of shape [dim] (the
// DTensor norms of dtensor/ops/norm): x may stay sharded on any dim but the last (sequence
// parallelism); otherwise it is redistributed. eps as in dtensor/ops/norm/norm.h.
DTensor layer_norm(const DTensor& x, const DTensor& weight = DTensor(),
                   const DTensor& bias = DTensor(), double eps = 1e-5);
DTensor rms_norm(const DTensor& x, const DTensor& weight = DTensor(),
                 std::optional<double> eps = std::nullopt);

// Multi-head scaled dot-product attention on fused layouts: q, k, v are [B, S, H * head_dim]
// with the heads laid out contiguously along the last dim. Composed of engine ops (reshape to
// [B, S, H, head_dim], transpose to [B, H, S, head_dim], matmul, scale, causal mask, softmax,
// matmul, back), so q/k/v sharded S(last) on a mesh dim (heads split evenly across ranks) or
// S(0) (batch) keep that placement and need no communication. Throws
// "[scaled_dot_product_attention] local width 12 is not a multiple of head_dim 8 ..." when a
// shard would split a head. `causal` masks keys after the query. Output: q's shape.
DTensor scaled_dot_product_attention(const DTensor& q, const DTensor& k, const DTensor& v,
                                     int64_t head_dim, bool causal);

// PyTorch's F.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal,
// scale, enable_gqa) on [B, H, L, E] layouts. dropout_p == 0 (inference, or training without attention
// dropout): the registered op of dtensor/ops/attention/attention.h — blocked, no [L, S] score matrix,
// batch-, head- or query-sharded with no communication. dropout_p > 0: the math path, as
// PyTorch's math backend — scores materialised, softmax, dropout through the DTensor RNG (`gen`
// or the default generator: the same mask whatever the layout, dtensor/rng/dtensor_random.h), matmul.
// On that path a query row whose keys are all masked gives NaN (the fused op gives 0).
DTensor scaled_dot_product_attention(const DTensor& q, const DTensor& k, const DTensor& v,
                                     const DTensor& attn_mask, double dropout_p = 0.0,
                                     bool is_causal = false,
                                     std::optional<double> scale = std::nullopt,
                                     bool enable_gqa = false, Generator* gen = nullptr);


// SwiGLU's gating (the Llama / torchtitan feed-forward): silu(gate) * up, elementwise, with
// the placements the two operands agree on.
DTensor swiglu(const DTensor& gate, const DTensor& up);

// Rotary position embeddings (RoPE) as Meta's Llama and torchtitan apply them: the pairs
// (x[..., 2i], x[..., 2i + 1]) of each head are rotated by the angle pos * theta^(-2i / D).
// rotary_tables: cos and sin of those angles for positions [0, seq_len) and i in [0, D / 2),
// each [seq_len, D / 2], float64 values rounded to `dtype`, on `device` (identical on every
// rank: no communication to build them).
struct RotaryTables {
  Tensor cos, sin;
};
RotaryTables rotary_tables(int64_t seq_len, int64_t head_dim, double theta = 10000.0,
                           DType dtype = kFloat32, Device device = Device(kCPU));
// x [B, S, H, D] (D even) holds positions [start_pos, start_pos + S), which must lie within
// the tables (start_pos > 0 when decoding after a prefix, Llama's freqs_cis[start_pos:]):
// out[2i] = x[2i] cos - x[2i+1] sin, out[2i+1] = x[2i] sin + x[2i+1] cos. Composed of slice,
// mul, stack and reshape, so x sharded on batch, sequence or heads keeps its placements with no
// communication (the tables enter as Replicate on x's mesh and are cut like x); the head dim
// itself must not be sharded (it is gathered first). Differentiable in x.
DTensor apply_rotary_emb(const DTensor& x, const RotaryTables& tables, int64_t start_pos = 0);

}  // namespace dtensor::nn::functional
