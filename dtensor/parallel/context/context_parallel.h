// Context parallelism (DESIGN.md item 20): attention over a sequence sharded along a `cp` mesh
// dim, by ring attention, and the sequence layouts it runs on (PyTorch's
// torch.distributed.tensor.experimental.context_parallel).
//
// Usage (q, k, v [B, H, S, D] DTensors, Shard(2) on the cp dim; tokens [B, S] Replicate there):
//   DTensor ids = dt::context_parallel_shard(tokens, "cp", /*seq_dim=*/1);  // head-tail order
//   ... embeddings, projections (sequence-sharded activations need no communication) ...
//   DTensor out = dt::ring_attention(q, k, v, "cp", {.is_causal = true});
//   ... loss on the sharded order (a mean over tokens does not depend on it), or
//   dt::context_parallel_unshard(logits, "cp", 1) for the natural order.
// Rotary embeddings: context_parallel_rotary_tables reorders the tables like the sequence, so
// apply_rotary_emb gives each position its global angle.
//
// Why an explicit function and not a scope that reroutes scaled_dot_product_attention (as
// PyTorch's `with context_parallel(mesh, buffers=...)` does): the model's attention calls
// ring_attention where it would call scaled_dot_product_attention, and nothing else changes
// under it (the op library's attention stays free of communication).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/nn/functional.h"

namespace dtensor {

// How ring_attention computes (PyTorch's sdpa arguments that apply, and the sequence layout).
struct RingAttentionOptions {
  // Query i attends to keys j <= i (global positions; PyTorch's is_causal).
  bool is_causal = false;
  // 1 / sqrt(head_dim) when not given.
  std::optional<double> scale;
  // The sequence is in the head-tail order of context_parallel_shard(load_balance = true): it
  // was cut into 2 * cp equal chunks and cp rank r holds chunks r and 2 * cp - 1 - r, so the
  // causal work is the same on every rank. false: the natural order, cut as Shard cuts it
  // (uneven allowed; under causality the last rank then does most of the work). Without
  // causality it is not used: each rank's rows attend to every key, whatever their order, and
  // the blocks are Shard's (any length, uneven too).
  bool load_balance = true;
  // Grouped-query attention (PyTorch's enable_gqa): k and v may have fewer heads than q, a
  // divisor of them; each k/v head serves H / Hk consecutive q heads. The blocks travel with
  // their own heads (repeated locally for the compute), so the traffic is Hk / H of the
  // repeated form's. With heads sharded, the shards must divide both head counts.
  bool enable_gqa = false;
};

// Scaled dot-product attention (scaled_dot_product_attention's math: softmax(q k^T * scale) v,
// no mask, no dropout) on q, k, v sharded along the sequence (dim 2) over mesh dim `cp_dim`.
// q, k and v share one mesh and one placement list: Shard(2) on cp_dim; on every other mesh dim
// Shard(0) (batch, dp), Shard(1) (heads, tp: the ring runs inside each tp group) or Replicate
// (a mesh dim of one rank may hold any placement but Partial).
// Self-attention: q and k have the same sequence length, heads (see enable_gqa) and head dim. Each
// rank keeps its q block while the k/v blocks travel round the ring by point-to-point messages on
// the cp dim's communicator (cp - 1 steps; the next block's send/recv runs on the communication
// thread while the current block is computed), and the partial outputs are merged with their
// log-sum-exp. Backward (a custom autograd function): the k/v blocks travel the ring again, dq
// stays local and each block's dk/dv accumulator travels with it and one step more, back to its
// owner. Traffic per rank: forward (cp - 1) sends of the local k and v; backward the same plus cp
// sends of dk and dv (in float32 for 16-bit inputs). No collective. Under create_graph (higher-
// order gradients) the backward instead recomputes the output by recorded DTensor ops (k and v
// gathered along cp, scaled_dot_product_attention on each rank's rows) and differentiates it:
// exact to any order, at the memory and collectives of that composite. Output: [B, H, S, Ev] with
// q's placements. Errors ("[ring_attention] ...", raised on every rank alike from the specs, before
// any message): placements other than the above, mismatched shapes or dtypes, and, with is_causal
// and load_balance, a sequence length that is not a multiple of 2 * cp.
DTensor ring_attention(const DTensor& q, const DTensor& k, const DTensor& v, int64_t cp_dim,
                       const RingAttentionOptions& options = {});
DTensor ring_attention(const DTensor& q, const DTensor& k, const DTensor& v,
                       std::string_view cp_dim, const RingAttentionOptions& options = {});

// ---- Sequence layouts ------------------------------------------------------------------------
// The head-tail order of dim `dim` of a local tensor for `cp` ranks: the dim (a multiple of
// 2 * cp) cut into 2 * cp chunks reordered as 0, 2cp-1, 1, 2cp-2, ..., cp-1, cp (rank r's two
// chunks side by side, ranks in order), and its inverse. Throws "[context_parallel_shard] ..."
// when the length is not a multiple of 2 * cp.
Tensor head_tail_order(const Tensor& x, int64_t dim, int64_t cp);
Tensor natural_order(const Tensor& x, int64_t dim, int64_t cp);

// x (its dim `seq_dim` not sharded on any mesh dim; Replicate on `cp_dim`) laid out for context
// parallelism: in the head-tail order when load_balance, then Shard(seq_dim) on cp_dim. No
// communication (each rank keeps its chunks). Differentiable. For inputs, labels, position ids,
// masks: whatever runs beside the sequence-sharded activations.
DTensor context_parallel_shard(const DTensor& x, int64_t cp_dim, int64_t seq_dim,
                               bool load_balance = true);
DTensor context_parallel_shard(const DTensor& x, std::string_view cp_dim, int64_t seq_dim,
                               bool load_balance = true);
// The inverse: x Shard(seq_dim) on cp_dim (in the head-tail order when load_balance) made
// Replicate on cp_dim in the natural order (one all_gather). Differentiable.
DTensor context_parallel_unshard(const DTensor& x, int64_t cp_dim, int64_t seq_dim,
                                 bool load_balance = true);
DTensor context_parallel_unshard(const DTensor& x, std::string_view cp_dim, int64_t seq_dim,
                                 bool load_balance = true);

// Rotary tables (nn::functional::rotary_tables, positions along dim 0) for a sequence of
// `seq_len` positions in the head-tail order of `cp` ranks: rows [0, seq_len) reordered like the
// sequence, so apply_rotary_emb(x, tables) on the context_parallel_shard'ed x (start_pos 0)
// rotates each position by its global angle. load_balance false: rows [0, seq_len) as they are
// (Shard cuts x and the tables alike).
nn::functional::RotaryTables context_parallel_rotary_tables(
    const nn::functional::RotaryTables& tables, int64_t seq_len, int64_t cp,
    bool load_balance = true);

}  // namespace dtensor
