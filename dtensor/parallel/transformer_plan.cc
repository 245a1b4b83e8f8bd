#include "dtensor/parallel/transformer_plan.h"

namespace dtensor {

ParallelizePlan transformer_tp_plan(TransformerPlanOptions opts) {
  const bool sp = opts.sequence_parallel;
  // Between blocks: Replicate (local tensors), or sharded on the sequence dim — then as
  // DTensors (use_local_output = false), which carry the global sequence length: a local tensor
  // taken as a shard implies an even split (from_local's rule), so with local tensors in the
  // residual stream a sequence length tp does not divide would break.
  const Placement stream = sp ? Placement(Shard(1)) : Placement(Replicate());
  // Every field named: -Wextra's -Wmissing-field-initializers flags a skipped leading one.
  const RowwiseParallel rowwise_to_sequence(
      {.input_layouts = std::nullopt, .output_layouts = Shard(1), .use_local_output = false});
  ParallelizePlan plan = {
      {"tok_embeddings", sp ? RowwiseParallel({.input_layouts = Replicate(),
                                               .output_layouts = Shard(1),
                                               .use_local_output = false})
                            : RowwiseParallel()},
      {"output",
       opts.loss_parallel
           ? ColwiseParallel(
                 {.input_layouts = stream, .output_layouts = Shard(-1), .use_local_output = false})
           : ColwiseParallel({.input_layouts = stream, .output_layouts = Replicate()})},
      {"layers.*.attention",
       PrepareModuleInput({.input_layouts = stream, .desired_input_layouts = Replicate()})},
      {"layers.*.mlp",
       PrepareModuleInput({.input_layouts = stream, .desired_input_layouts = Replicate()})},
      {"layers.*.attention.wo", sp ? rowwise_to_sequence : RowwiseParallel()},
      {"layers.*.mlp.w2", sp ? rowwise_to_sequence : RowwiseParallel()},
  };
  if (sp) {
    for (const char* norm : {"norm", "layers.*.attention_norm", "layers.*.mlp_norm"}) {
      plan.push_back({norm, SequenceParallel()});
    }
  }
  for (const char* name : {"layers.*.attention.wq", "layers.*.attention.wk",
                           "layers.*.attention.wv", "layers.*.mlp.w1", "layers.*.mlp.w3"}) {
    plan.push_back({name, ColwiseParallel()});
  }
  return plan;
}

}  // namespace dtensor
