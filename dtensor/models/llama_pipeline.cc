#include "dtensor/models/llama_pipeline.h"

#include <algorithm>
#include <utility>

#include "dtensor/parallel/pipeline/split.h"
#include "dtensor/tensor/error.h"

namespace dtensor::models {

namespace {

nn::ModulePtr child(const nn::Module& parent, const std::string& name) {
  nn::ModulePtr found;
  for (const auto& [n, c] : parent.named_children()) {
    if (n == name) found = c;
  }
  DT_CHECK(found != nullptr, "[pipeline_llama] the model has no module '%s'", name);
  return found;
}

// One stage: [embed_tokens], decoder layers [first, last), [norm, lm_head]. Its module tree
// mirrors the Llama's FQNs; its forward sets the Llama's step (causal, positions 0..S-1) for
// the shared layers, since Llama::forward does not run.
class LlamaStage : public nn::Module {
 public:
  LlamaStage(std::shared_ptr<Llama> model, int64_t first, int64_t last, bool with_embed,
             bool with_head)
      : model_(std::move(model)) {
    nn::Module& inner = model_->model();
    if (with_embed) embed_ = place("model.embed_tokens", child(inner, "embed_tokens"));
    const nn::ModulePtr layers = child(inner, "layers");
    for (int64_t i = first; i < last; ++i) {
      layers_.push_back(
          place("model.layers." + std::to_string(i), child(*layers, std::to_string(i))));
    }
    if (with_head) {
      norm_ = place("model.norm", child(inner, "norm"));
      head_ = place("lm_head", child(*model_, "lm_head"));
    }
  }
  std::string type_name() const override { return "LlamaStage"; }

  // x: ids [B, S] on the first stage, hidden states [B, S, hidden] after it.
  // Under context parallelism the first stage takes the whole rows and keeps this rank's chunks;
  // the later ones receive the chunks' hidden states.
  DTensor forward(const DTensor& x) override {
    const detail::LlamaContextParallel* before = model_->context_parallel();
    const int64_t seq = x.size(1) * (before != nullptr && !embed_ ? before->cp : 1);
    model_->prepare_training_step(x.size(0), seq);
    // Read again: prepare_training_step replaced the step `before` pointed into (and freed it,
    // ASan's heap-use-after-free); the new step carries the same context parallelism.
    const detail::LlamaContextParallel* cp = model_->context_parallel();
    DTensor h = embed_ ? (*embed_)(cp != nullptr ? detail::cp_input_ids(x, *cp) : x) : x;
    for (const nn::ModulePtr& layer : layers_) h = (*layer)(h);
    if (norm_) h = (*head_)((*norm_)(h));
    return h;
  }

 private:
  // Registers `m` at `fqn` below this module, creating the containers on the way.
  nn::ModulePtr place(const std::string& fqn, nn::ModulePtr m) {
    return pipelining::register_at_fqn(*this, fqn, std::move(m));
  }

  std::shared_ptr<Llama> model_;
  nn::ModulePtr embed_, norm_, head_;
  std::vector<nn::ModulePtr> layers_;
};

int64_t dim_at(const DeviceMesh& mesh, const std::string& name) {
  const auto& names = mesh.dim_names();
  auto it = std::find(names.begin(), names.end(), name);
  return it == names.end() ? -1 : static_cast<int64_t>(it - names.begin());
}

}  // namespace

std::vector<DTensor> LlamaPipeline::parameters() const {
  std::vector<DTensor> out;
  for (const auto& stage : stages) {
    for (const DTensor& p : stage->submod().parameters()) out.push_back(p);
  }
  return out;
}

LlamaPipeline pipeline_llama(const std::shared_ptr<Llama>& model, const DeviceMesh& mesh,
                             LlamaParallelOptions options, const std::string& pp_dim,
                             int64_t stages_per_rank, bool release_unused) {
  DT_CHECK(model != nullptr, "[pipeline_llama] the model is null");
  DT_CHECK(!model->released_modules(),
           "[pipeline_llama] the model keeps only some pipeline stages' modules (an earlier "
           "pipeline_llama released the others): split a whole Llama");
  const LlamaConfig& cfg = model->config();
  const int64_t pp_at = dim_at(mesh, pp_dim), dp_at = dim_at(mesh, options.dp_dim);
  const int64_t tp_at = dim_at(mesh, options.tp_dim), cp_at = dim_at(mesh, options.cp_dim);
  const int64_t named = (pp_at >= 0) + (dp_at >= 0) + (tp_at >= 0) + (cp_at >= 0);
  DT_CHECK(pp_at >= 0 && named == mesh.ndim(),
           "[pipeline_llama] mesh %s: expected a dim named '%s' (pipeline) and any of '%s' "
           "(FSDP), '%s' (context parallel) and '%s' (tensor parallel), and no other",
           mesh.str(), pp_dim, options.dp_dim, options.cp_dim, options.tp_dim);
  const int64_t pp = mesh.size(pp_at);
  const int64_t n = pp * stages_per_rank;
  DT_CHECK(stages_per_rank >= 1 && cfg.num_hidden_layers >= n,
           "[pipeline_llama] %d decoder layers cannot fill %d stages (pp %d x %d per rank): each "
           "stage needs at least one",
           cfg.num_hidden_layers, n, pp, stages_per_rank);
  DT_CHECK(!cfg.tie_word_embeddings || n == 1,
           "[pipeline_llama] tie_word_embeddings: the table would be needed on the first and the "
           "last stage; untie it (or run without pp)");
  if (tp_at >= 0) parallelize_llama(*model, mesh[options.tp_dim], options);
  std::vector<int64_t> rest;
  for (int64_t d = 0; d < mesh.ndim(); ++d) {
    if (d != pp_at) rest.push_back(d);
  }
  const int64_t me = mesh.get_local_rank(pp_at);
  if (cp_at >= 0 && mesh.size(cp_at) > 1) {
    // As parallelize_llama (llama_plan.h): the ring over cp (x tp), FSDP over dp x cp.
    model->set_context_parallel(detail::make_context_parallel(mesh, cp_at, tp_at, options.cp_dim));
  }
  // The mesh of fully_shard: the stage mesh (the dims but pp), with dp and cp flattened into
  // one dim when both are there (every pp slice's built on every rank: a collective).
  // (On a 1-d pp mesh there is no stage mesh and no fully_shard: the mesh is a placeholder.)
  DeviceMesh fsdp_mesh = rest.empty() ? mesh : mesh.submesh(rest);
  std::string fsdp_dim = dp_at >= 0 ? options.dp_dim : options.cp_dim;
  if (dp_at >= 0 && cp_at >= 0) {
    fsdp_dim = options.dp_dim + "_" + options.cp_dim;
    for (int64_t slice = 0; slice < pp; ++slice) {
      DeviceMesh m = detail::flatten_dp_cp(
          mesh, {.dp = dp_at, .cp = cp_at, .tp = tp_at, .pp = pp_at, .pp_index = slice}, fsdp_dim,
          options.tp_dim);
      if (slice == me) fsdp_mesh = m;
    }
  }
  LlamaPipeline out;
  std::vector<bool> keep_layer(static_cast<size_t>(cfg.num_hidden_layers), false);
  for (int64_t s = me; s < n; s += pp) {
    // Stage s: layers [s * L / n, (s + 1) * L / n) (the later stages take the larger).
    const int64_t first = s * cfg.num_hidden_layers / n;
    const int64_t last = (s + 1) * cfg.num_hidden_layers / n;
    for (int64_t i = first; i < last; ++i) keep_layer[static_cast<size_t>(i)] = true;
    auto module = std::make_shared<LlamaStage>(model, first, last, s == 0, s == n - 1);
    if (dp_at >= 0 || cp_at >= 0) {
      DataParallelOptions fsdp = options.fsdp;
      if (fsdp.grouping.module_types.empty() && fsdp.grouping.min_unit_numel == 0) {
        fsdp.grouping.module_types = {"LlamaDecoderLayer"};
      }
      fsdp.dp_dim_name = fsdp_dim;
      out.data_parallel.push_back(fully_shard(*module, fsdp_mesh, fsdp));
    }
    out.stages.push_back(std::make_shared<pipelining::PipelineStage>(module, s, n, mesh, pp_dim));
    // The schedule then syncs the stage's gradients once per step (pipeline_schedule.h).
    if (dp_at >= 0 || cp_at >= 0) out.stages.back()->set_data_parallel(out.data_parallel.back());
  }
  // The other ranks' modules go (after tensor parallelism, whose plan names the whole model).
  if (release_unused) model->keep_pipeline_modules(keep_layer, me == 0, (n - 1) % pp == me);
  return out;
}

}  // namespace dtensor::models
