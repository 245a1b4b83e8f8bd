#include "dtensor/models/llama_plan.h"

#include <algorithm>
#include <vector>

#include "dtensor/tensor/error.h"

namespace dtensor::models {

namespace {

int64_t dim_index(const DeviceMesh& mesh, const std::string& name) {
  const auto& names = mesh.dim_names();
  auto it = std::find(names.begin(), names.end(), name);
  return it == names.end() ? -1 : static_cast<int64_t>(it - names.begin());
}

void check_degree(const LlamaConfig& cfg, int64_t tp) {
  DT_CHECK(tp >= 1 && cfg.num_attention_heads % tp == 0,
           "[parallelize_llama] tensor-parallel degree %d does not divide num_attention_heads %d: "
           "each rank must hold whole query heads (choose a tp dividing %d)",
           tp, cfg.num_attention_heads, cfg.num_attention_heads);
}

}  // namespace

ParallelizePlan llama_tp_plan(const LlamaConfig& cfg, int64_t tp, bool sequence_parallel) {
  check_degree(cfg, tp);
  const bool sp = sequence_parallel;
  // Between blocks: Replicate, or sharded on the sequence dim.
  const Placement stream = sp ? Placement(Shard(1)) : Placement(Replicate());
  // Every field named: -Wextra's -Wmissing-field-initializers flags a skipped leading one.
  const ColwiseParallel colwise(
      {.input_layouts = std::nullopt, .output_layouts = std::nullopt, .use_local_output = false});
  const RowwiseParallel rowwise(
      {.input_layouts = std::nullopt, .output_layouts = stream, .use_local_output = false});
  ParallelizePlan plan = {
      {"model.embed_tokens",
       RowwiseParallel(
           {.input_layouts = Replicate(), .output_layouts = stream, .use_local_output = false})},
      {"model.layers.*.self_attn",
       PrepareModuleInput({.input_layouts = stream, .desired_input_layouts = Replicate()})},
      {"model.layers.*.mlp",
       PrepareModuleInput({.input_layouts = stream, .desired_input_layouts = Replicate()})},
      {"model.layers.*.self_attn.q_proj", colwise},
      {"model.layers.*.self_attn.o_proj", rowwise},
      {"model.layers.*.mlp.gate_proj", colwise},
      {"model.layers.*.mlp.up_proj", colwise},
      {"model.layers.*.mlp.down_proj", rowwise},
  };
  if (cfg.num_key_value_heads % tp == 0) {
    plan.push_back({"model.layers.*.self_attn.k_proj", colwise});
    plan.push_back({"model.layers.*.self_attn.v_proj", colwise});
  }
  if (!cfg.tie_word_embeddings) {
    plan.push_back({"lm_head", ColwiseParallel({.input_layouts = stream,
                                                .output_layouts = Replicate(),
                                                .use_local_output = false})});
  }
  if (sp) {
    plan.push_back({"model.norm", SequenceParallel()});
    for (const char* norm :
         {"model.layers.*.input_layernorm", "model.layers.*.post_attention_layernorm"}) {
      plan.push_back({norm, SequenceParallel()});
    }
  }
  return plan;
}

std::shared_ptr<DataParallel> parallelize_llama(Llama& model, const DeviceMesh& mesh,
                                                LlamaParallelOptions options) {
  DT_CHECK(!model.released_modules(),
           "[parallelize_llama] the model keeps only some pipeline stages' modules "
           "(pipeline_llama released the others): parallelize a whole Llama");
  const LlamaConfig& cfg = model.config();
  const int64_t tp_at = dim_index(mesh, options.tp_dim);
  const int64_t dp_at = dim_index(mesh, options.dp_dim);
  const int64_t cp_at = dim_index(mesh, options.cp_dim);
  const int64_t named = (tp_at >= 0 ? 1 : 0) + (dp_at >= 0 ? 1 : 0) + (cp_at >= 0 ? 1 : 0);
  DT_CHECK(named >= 1 && named == mesh.ndim(),
           "[parallelize_llama] mesh %s: expected dims named '%s' (tensor parallel) and/or '%s' "
           "(FSDP) and/or '%s' (context parallel), and no other",
           mesh.str(), options.tp_dim, options.dp_dim, options.cp_dim);
  const int64_t tp = tp_at >= 0 ? mesh.size(tp_at) : 1;
  check_degree(cfg, tp);  // on every rank, before anything changes
  if (tp_at >= 0) {
    const DeviceMesh tp_mesh = mesh.ndim() == 1 ? mesh : mesh[{options.tp_dim}];
    parallelize_module(model, tp_mesh, llama_tp_plan(cfg, tp, options.sequence_parallel));
    const bool kv_sharded = cfg.num_key_value_heads % tp == 0;
    for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) {
      model.model().layer(i).self_attn().set_kv_replicated(!kv_sharded);
    }
    // k / v [B, Hkv, S, hd]: heads sharded as the colwise projections' output, or whole.
    model.set_kv_layout(tp_mesh, {kv_sharded ? Placement(Shard(1)) : Placement(Replicate())});
  }
  if (cp_at >= 0 && mesh.size(cp_at) > 1) {
    model.set_context_parallel(detail::make_context_parallel(mesh, cp_at, tp_at, options.cp_dim));
  }
  if (dp_at < 0 && cp_at < 0) return nullptr;
  DataParallelOptions fsdp = options.fsdp;
  // Mixed precision: the layers compute in param_dtype, and so must a KV cache (make_cache).
  if (fsdp.param_dtype) model.set_compute_dtype(*fsdp.param_dtype);
  if (fsdp.grouping.module_types.empty() && fsdp.grouping.min_unit_numel == 0) {
    fsdp.grouping.module_types = {"LlamaDecoderLayer"};
  }
  if (dp_at >= 0 && cp_at >= 0) {
    // FSDP over dp x cp (see llama_plan.h): one flattened dim.
    fsdp.dp_dim_name = options.dp_dim + "_" + options.cp_dim;
    return fully_shard(model,
                       detail::flatten_dp_cp(
                           mesh, {.dp = dp_at, .cp = cp_at, .tp = tp_at, .pp = -1, .pp_index = 0},
                           fsdp.dp_dim_name, options.tp_dim),
                       fsdp);
  }
  fsdp.dp_dim_name = dp_at >= 0 ? options.dp_dim : options.cp_dim;
  return fully_shard(model, mesh, fsdp);
}

}  // namespace dtensor::models
