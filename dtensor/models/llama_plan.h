// Parallelizing a models::Llama as torchtitan does (issue 43 item 2): tensor parallelism on the
// "tp" dim of a mesh, then FSDP (fully_shard) on its "dp" dim; either dim may be absent.
//
// Tensor-parallel plan (Megatron), over the tp dim:
//   model.embed_tokens                  RowwiseParallel (vocab-sharded table, one all-reduce)
//   model.layers.*.self_attn / .mlp     PrepareModuleInput (the block input enters the mesh once)
//   self_attn.q_proj, mlp.gate/up_proj  ColwiseParallel (heads / features sharded)
//   self_attn.k_proj / v_proj           ColwiseParallel when tp divides num_key_value_heads, else
//                                       left whole (kv heads replicated, see below)
//   self_attn.o_proj, mlp.down_proj     RowwiseParallel (one all-reduce each)
//   lm_head                             ColwiseParallel, logits gathered to Replicate
//   sequence_parallel: the norms run SequenceParallel, the residual stream is Shard(1) between
//   blocks (rowwise outputs reduce-scattered, block inputs all-gathered).
// Every output stays a DTensor (use_local_output false), so the attention reshapes with global
// head counts.
//
// kv-head replication (tp larger than, or not dividing, num_key_value_heads): the k/v
// projections stay whole and every rank computes all kv heads (the smallest projections of a
// GQA model: Hkv / H of q's), then repeats them per q head and keeps those of its own q heads
// (Replicate -> Shard(1), a local slice). Megatron instead shards copies of the kv weights so
// each rank computes only the kv heads it needs; with DTensors that would need a parameter
// whose shards overlap, which no placement describes, while replicated weights are an ordinary
// Replicate parameter whose gradient needs no extra step (each rank's k/v gradient is whole
// after the all-gather that Shard(1) -> Replicate does in backward). The cost is computing
// Hkv heads instead of Hkv / tp on every rank; the KV cache then holds all kv heads per rank.
//
// FSDP: fully_shard over the dp dim with each LlamaDecoderLayer a unit (the root the rest).
//
// Context parallelism over a "cp" dim (issue 45 item 3; llama_context_parallel.h), torchtitan's
// way: each cp rank runs the model on its chunks of the sequence (head-tail order, positions
// from the chunks' global offsets) as a dp rank runs it on its rows, and attention is
// ring_attention over the cp dim. The parameters are Replicate on cp in compute, and fully_shard
// runs over dp and cp together (one flattened dim, "<dp>_<cp>", or cp alone), so each
// parameter's gradient is reduced over cp by FSDP's per-unit reduce-scatter with the dp one,
// and the optimizer state is sharded over dp x cp too (torchtitan's dp_shard_cp). The
// alternative, parameters Replicate on a cp mesh dim with gradients arriving Partial there,
// reduces each parameter's gradient by its own all-reduce when it is accumulated and keeps a
// whole copy of the state per cp rank.
#pragma once

#include <memory>
#include <string>

#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/models/llama.h"
#include "dtensor/parallel/data_parallel/data_parallel.h"
#include "dtensor/parallel/parallelize.h"

namespace dtensor::models {

struct LlamaParallelOptions {
  std::string tp_dim = "tp";       // tensor parallelism over this mesh dim, when the mesh has it
  std::string dp_dim = "dp";       // fully_shard over this mesh dim, when the mesh has it
  std::string cp_dim = "cp";       // context parallelism over this mesh dim, when the mesh has it
  bool sequence_parallel = false;  // shard the residual stream on the sequence dim
  DataParallelOptions fsdp;        // grouping defaults to one unit per LlamaDecoderLayer
};

// The tensor-parallel plan above for `cfg` at degree `tp` (throws as parallelize_llama).
ParallelizePlan llama_tp_plan(const LlamaConfig& cfg, int64_t tp, bool sequence_parallel = false);

// Applies the plan on mesh[tp_dim], context parallelism on mesh[cp_dim] and fully_shard on
// mesh[dp_dim] x mesh[cp_dim] (those the mesh names; a mesh must name at least one, and no other
// dim). Returns the DataParallel handle, or null without a dp or cp dim. Under cp, forward takes
// the whole rows and returns this rank's chunks' logits; use causal_lm_loss(model, logits,
// labels), and a sequence length that is a multiple of 2 * cp. Before changing anything, on every
// rank (the checks read only the config and the mesh's shape), throws "[parallelize_llama] ..."
// when the degree cannot work: num_attention_heads not divisible by tp (a rank's shard of q would
// split a head), or a mesh without a tp / dp dim. kv heads that tp does not divide are replicated
// (see above).
std::shared_ptr<DataParallel> parallelize_llama(Llama& model, const DeviceMesh& mesh,
                                                LlamaParallelOptions options = {});

}  // namespace dtensor::models
