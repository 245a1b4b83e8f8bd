// Context parallelism inside models::Llama (issue 45 item 3): what a Llama forward does
// differently when parallelize_llama found a `cp` mesh dim. torchtitan's way: the model runs on
// this rank's chunks of the sequence (head-tail order, so the causal work is the same on every cp
// rank) exactly as it runs on a data-parallel rank's rows, on the tensor-parallel mesh; only
// attention sees the cp dim, where q, k and v are lifted onto the cp (x tp) mesh as Shard(2) and
// ring_attention (dtensor/parallel/context/context_parallel.h) computes it. The parameters are
// those of data parallelism over dp x cp (fully_shard over the flattened dims), so their gradients
// are reduced over cp by FSDP's reduce-scatter, in buckets, not one all-reduce per parameter.
// Declared here for llama.cc and llama_plan.cc; users call parallelize_llama and
// causal_lm_loss(model, logits, labels).
#pragma once

#include <cstdint>
#include <string>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/device_mesh/device_mesh.h"

namespace dtensor::models::detail {

// Set on the model by parallelize_llama when the mesh has a cp dim of size > 1.
struct LlamaContextParallel {
  DeviceMesh ring_mesh;  // the cp dim and the tp dim (when present), through this rank
  std::string cp_dim;
  int64_t cp = 1;    // ranks on the cp dim
  int64_t rank = 0;  // this rank's index on it
};

// The context parallelism of `mesh`'s dim cp_at (> 1 ranks), with the tp dim tp_at (-1: none)
// in the ring mesh.
LlamaContextParallel make_context_parallel(const DeviceMesh& mesh, int64_t cp_at, int64_t tp_at,
                                           const std::string& cp_dim);

// Throws "[Llama] ..." on every rank (from the shape alone) when `seq_len` is not a multiple of
// 2 * cp: the head-tail order cuts the sequence into 2 * cp equal chunks.
void check_cp_length(const LlamaContextParallel& cp, int64_t seq_len);

// This rank's chunks of dim 1 of x [B, S, ...] (a local tensor) in the head-tail order: chunks
// rank and 2 * cp - 1 - rank of 2 * cp, side by side.
Tensor cp_chunk(const Tensor& x, const LlamaContextParallel& cp);

// The global positions of this rank's chunks, [B, S / cp] int64 (for the rotary tables).
Tensor cp_position_ids(int64_t batch, int64_t seq_len, const LlamaContextParallel& cp);

// input_ids [B, S] (a local DTensor, or Replicate on a mesh) cut to this rank's chunks, on the
// same mesh and placements.
DTensor cp_input_ids(const DTensor& input_ids, const LlamaContextParallel& cp);

// Causal attention of this rank's q [B, H, S/cp, hd], k, v [B, Hkv, S/cp, hd] (local DTensors or
// on the tp mesh, heads Shard(1) or Replicate there) over the whole sequence: lifted onto the
// ring mesh (Shard(2) on cp), ring_attention, and back to q's mesh and placements.
// Differentiable.
DTensor cp_attention(const DTensor& q, const DTensor& k, const DTensor& v, bool enable_gqa,
                     const LlamaContextParallel& cp);

// causal_lm_loss under context parallelism: logits are this rank's chunks [B, S/cp, V], labels
// the whole rows [B, S]. Labels are shifted on the whole rows first (the target of position t
// is token t + 1; the last position has none), then cut like the sequence. The value is the
// mean over the rows' non-ignored tokens on every cp rank (one all-reduce of a scalar); the
// gradient is cp times this rank's share of it, so data parallelism's average over dp x cp
// gives the gradient of the batch's loss, as data parallelism's average over dp does for a
// mean over each rank's rows.
DTensor cp_causal_lm_loss(const DTensor& logits, const DTensor& labels, int64_t ignore_index,
                          const LlamaContextParallel& cp);

// Where the dims of a mesh are (-1: absent); pp_index: the slice of the pp dim meant.
struct LlamaMeshDims {
  int64_t dp = -1, cp = -1, tp = -1, pp = -1;
  int64_t pp_index = 0;
};

// One mesh of the ranks of `mesh` (of its pp slice pp_index, when it has a pp dim) with dims dp
// and cp flattened into one named `flat` (dp major, as PyTorch's DeviceMesh._flatten), and the
// tp dim named `tp_name` after it when there is one, so that fully_shard shards over both and
// computes on the same tp submesh as the plan. Collective over the world (a DeviceMesh
// construction): every rank builds the same meshes in the same order (with a pp dim, every
// slice's, keeping its own).
DeviceMesh flatten_dp_cp(const DeviceMesh& mesh, const LlamaMeshDims& dims, const std::string& flat,
                         const std::string& tp_name);

}  // namespace dtensor::models::detail
