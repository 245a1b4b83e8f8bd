// The Megatron tensor-parallel plan for nn::Transformer (the module names of
// dtensor/nn/transformer.h), so that examples, tests and benchmarks share one plan instead of each
// spelling it out:
//   tok_embeddings            RowwiseParallel (vocab-parallel table; one all-reduce)
//   layers.*.attention.wq/wk/wv, layers.*.mlp.w1/w3   ColwiseParallel
//   layers.*.attention.wo, layers.*.mlp.w2            RowwiseParallel (one all-reduce each)
//   layers.*.attention, layers.*.mlp                  PrepareModuleInput: the block input
//       enters the mesh once, so in backward the Partial input gradients of q/k/v (w1/w3)
//       add up locally before the block's one all-reduce
//   output                    ColwiseParallel: logits all-gathered to Replicate, or with
//       loss_parallel kept sharded over the vocabulary as a DTensor [.., S(-1)] for
//       cross_entropy (which then never gathers them)
// sequence_parallel: the residual stream between blocks is sharded on the sequence dim (S(1)):
// the norms run SequenceParallel, the rowwise outputs are reduce-scattered to S(1) and the
// block inputs all-gathered back (PrepareModuleInput S(1) -> R).
#pragma once

#include "dtensor/parallel/parallelize.h"

namespace dtensor {

// Options of transformer_tp_plan.
struct TransformerPlanOptions {
  bool sequence_parallel = false;  // shard activations on the sequence dim between blocks
  bool loss_parallel = false;      // keep the lm head's logits vocab-sharded (loss parallel)
};

// The plan described at the top of this file, for nn::Transformer.
ParallelizePlan transformer_tp_plan(TransformerPlanOptions opts = {});

}  // namespace dtensor
