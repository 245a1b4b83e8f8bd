#include "dtensor/models/dry_run.h"

#include <absl/strings/str_format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "dtensor/checkpoint/plan.h"
#include "dtensor/checkpoint/train_state.h"
#include "dtensor/collectives/debug_log.h"
#include "dtensor/collectives/fake_communicator.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/core/dtensor_spec.h"
#include "dtensor/core/propagation/sharding_propagation.h"
#include "dtensor/core/redistribute.h"
#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/models/llama.h"
#include "dtensor/models/llama_pipeline.h"
#include "dtensor/models/llama_plan.h"
#include "dtensor/optim/optimizer.h"
#include "dtensor/parallel/pipeline/pipeline_schedule.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/memory_stats.h"

namespace dtensor::models {

namespace {

// Tallies the collectives DTENSOR_LOG=collectives reports while it lives (lines such as
// "[dtensor rank 1 collectives] all_gather 1024 B per rank on mesh dim 0 (dp) (mpi, rank 1 of 2,
// world ranks [1, 3]) in 12 us"), per communicator description and collective. The log is the
// one place that names the communicator (CommDebugMode counts kinds and bytes only), and it
// reads the same on every backend. The previous log setting and sink come back at the end.
class CollectiveTap {
 public:
  explicit CollectiveTap(std::map<std::string, std::map<std::string, CollectiveTally>>* out)
      : out_(out), setting_(log_setting()) {
    prev_sink_ = set_log_sink([this](std::string_view line) { add(line); });
    set_log("collectives");
  }
  ~CollectiveTap() {
    set_log(setting_);
    set_log_sink(prev_sink_);
  }
  CollectiveTap(const CollectiveTap&) = delete;
  CollectiveTap& operator=(const CollectiveTap&) = delete;

 private:
  void add(std::string_view line) {
    const size_t tag = line.find(" collectives] ");
    if (tag == std::string_view::npos) return;
    std::string_view rest = line.substr(tag + 14);
    const size_t sp = rest.find(' ');
    const size_t per = rest.find(" B per rank on ");
    const size_t rank_at = rest.find(", rank ");
    if (sp == std::string_view::npos || per == std::string_view::npos ||
        rank_at == std::string_view::npos) {
      return;
    }
    // The description ends where "(<backend>, rank ..." begins.
    const size_t open = rest.rfind(" (", rank_at);
    const size_t desc_at = per + 15;
    if (open == std::string_view::npos || open < desc_at) return;
    int64_t bytes = 0;
    const std::string_view num = rest.substr(sp + 1, per - sp - 1);
    if (std::from_chars(num.data(), num.data() + num.size(), bytes).ec != std::errc()) return;
    std::lock_guard<std::mutex> lock(mu_);  // the communication thread may log too
    CollectiveTally& t =
        (*out_)[std::string(rest.substr(desc_at, open - desc_at))][std::string(rest.substr(0, sp))];
    ++t.count;
    t.bytes += bytes;
  }

  std::map<std::string, std::map<std::string, CollectiveTally>>* out_;
  std::string setting_;
  LogSink prev_sink_;
  std::mutex mu_;
};

int64_t local_bytes(const DTensor& t) {
  return t.defined() ? static_cast<int64_t>(t.to_local().nbytes()) : 0;
}

bool has_dim(const DryRunOptions& o, const std::string& name) {
  return std::find(o.mesh_dim_names.begin(), o.mesh_dim_names.end(), name) !=
         o.mesh_dim_names.end();
}

int64_t dim_size(const DryRunOptions& o, const std::string& name) {
  for (size_t i = 0; i < o.mesh_dim_names.size(); ++i) {
    if (o.mesh_dim_names[i] == name) return o.mesh_shape[i];
  }
  return 1;
}

// What every pipeline stage but the first receives for one microbatch: the residual stream
// [rows, seq / cp, hidden] in the parameters' dtype, as the tensor-parallel plan leaves it
// between decoder layers (on the tp mesh: Shard(1) with sequence parallelism, else Replicate;
// local without tp). Meta: only its shape, dtype and placements are read. The real run checks
// every received activation against it, so a wrong guess fails there, not silently.
DTensor stage_input(const DryRunOptions& o, const DeviceMesh& mesh, int64_t rows, DType dtype) {
  const Shape global{rows, o.seq / dim_size(o, "cp"), o.config.hidden_size};
  const TensorOptions meta(dtype, Device(kMeta));
  if (!has_dim(o, "tp")) return nn::local_dtensor(empty(global, meta));
  const DeviceMesh tp = mesh["tp"];
  const Placements p{o.sequence_parallel ? Placement(Shard(1)) : Placement(Replicate())};
  const Shape local =
      compute_local_shape_and_offset(global, tp.shape(), tp.get_coordinate(), p).shape;
  return DTensor::from_local(empty(local, meta), tp, p, false, global);
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

DryRunReport dry_run_llama_step(const DryRunOptions& o) {
  DT_CHECK(o.mesh_shape.size() == o.mesh_dim_names.size() && !o.mesh_shape.empty(),
           "[dry_run] mesh shape %s and dim names (%d) differ in length (expected one name, pp, "
           "dp, cp or tp, per mesh dim)",
           shape_str(o.mesh_shape), static_cast<int>(o.mesh_dim_names.size()));
  DT_CHECK(!o.meta || fake_backend(),
           "[dry_run] meta = true needs the fake backend (DTENSOR_BACKEND=fake or "
           "init_fake_backend): a real collective cannot move meta tensors, which have no data");
  const bool pp = has_dim(o, "pp");
  const int64_t microbatches = o.microbatches > 0 ? o.microbatches : 2 * dim_size(o, "pp");
  DT_CHECK(!pp || o.batch % microbatches == 0,
           "[dry_run] batch %d (rows per dp rank) does not split into %d microbatches (expected "
           "a multiple)",
           o.batch, microbatches);
  DryRunReport r;
  r.world_size = world_size();
  r.rank = world_rank();
  r.fake = fake_backend();
  r.meta = o.meta;
  if (pp) {
    r.schedule = o.schedule;
    r.microbatches = microbatches;
  }
  // A meta run's memory is what its meta storages would hold (memory_stats.h).
  const auto stats = [&] { return o.meta ? meta_memory_stats() : memory_stats(); };
  const DeviceMesh mesh = init_device_mesh(kCPU, o.mesh_shape, o.mesh_dim_names);
  nn::ModuleOptions mopts;
  if (o.meta) mopts.device = Device(kMeta);
  const auto model = std::make_shared<Llama>(o.config, mopts);
  LlamaParallelOptions popts;
  popts.sequence_parallel = o.sequence_parallel;
  std::vector<DTensor> params;
  // Kept for the run: the stages and fully_shard's handles.
  LlamaPipeline pipe;
  std::shared_ptr<DataParallel> data_parallel;
  std::unique_ptr<pipelining::PipelineSchedule> schedule;
  if (pp) {
    const int64_t per_rank = o.schedule == "Interleaved1F1B" ? 2 : 1;
    pipe = pipeline_llama(model, mesh, popts, "pp", per_rank);
    params = pipe.parameters();
    // The stages again, each told the input it expects (which the fake backend cannot send).
    const DTensor example = stage_input(o, mesh, o.batch / microbatches, mopts.dtype);
    for (auto& st : pipe.stages) {
      auto told = std::make_shared<pipelining::PipelineStage>(
          st->module(), st->stage_index(), st->num_stages(), mesh, "pp", example);
      told->set_data_parallel(st->data_parallel());  // one gradient sync per step
      st = std::move(told);
    }
    schedule = pipelining::make_schedule(o.schedule, pipe.stages, microbatches,
                                         [model](const DTensor& logits, const DTensor& labels) {
                                           return causal_lm_loss(*model, logits, labels);
                                         });
  } else {
    data_parallel = parallelize_llama(*model, mesh, popts);
    params = model->parameters();
  }
  optim::AdamW adam(params);

  // Token ids: the same deterministic rows on every rank (a dry run reads no data set). Real
  // even in a meta run: an op with a meta input makes meta outputs (dispatch.cc).
  std::vector<int64_t> tokens(static_cast<size_t>(o.batch * o.seq));
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int64_t>(i * 7 + 3) % o.config.vocab_size;
  }
  const Tensor ids_local = from_vector(tokens, {o.batch, o.seq});
  const DTensor ids = nn::local_dtensor(ids_local);
  const auto step = [&] {
    if (schedule) {
      schedule->step(ids, ids);  // ids on the first stage, labels on the last
    } else {
      causal_lm_loss(*model, (*model)(ids), ids).backward();
    }
    for (const DTensor& p : params) r.gradient_bytes += local_bytes(p.grad());
    adam.step();
    adam.zero_grad();
  };

  const PropagationCacheStats p0 = propagation_cache_stats();
  const PlanCacheStats q0 = redistribute_plan_cache_stats();
  auto t0 = std::chrono::steady_clock::now();
  step();
  r.first_step_ms = ms_since(t0);
  r.propagation_misses = propagation_cache_stats().misses - p0.misses;
  r.plan_misses = redistribute_plan_cache_stats().misses - q0.misses;

  // The counted step.
  r.gradient_bytes = 0;
  if (o.meta) {
    reset_peak_meta_memory_stats();
  } else {
    reset_peak_memory_stats();
  }
  const int64_t start = stats().current_bytes;
  {
    CollectiveTap tap(&r.per_dim);
    t0 = std::chrono::steady_clock::now();
    step();
    r.step_ms = ms_since(t0);
  }
  r.peak_bytes = stats().peak_bytes;
  r.activation_bytes = r.peak_bytes - start;
  for (const DTensor& p : params) r.parameter_bytes += local_bytes(p);
  for (const auto& [name, state] : adam.state_dict()) {
    // The hyper-parameters (param_groups.*) are options, not state memory.
    if (!name.starts_with("param_groups.")) r.optimizer_bytes += local_bytes(state);
  }
  if (!schedule) {
    const checkpoint::SavePlan plan =
        checkpoint::plan_save(checkpoint::training_state(model.get(), &adam, nullptr));
    r.checkpoint_bytes = plan.bytes;
    r.checkpoint_total_bytes = plan.total_bytes;
    r.checkpoint_files = plan.files;
  }
  return r;
}

std::string DryRunReport::table() const {
  std::string s =
      absl::StrFormat("dry run: rank %d of %d (%s backend%s), one training step\n", rank,
                      world_size, fake ? "fake" : "real", meta ? ", meta tensors" : "");
  if (!schedule.empty()) {
    s += absl::StrFormat("pipeline: Schedule%s, %d microbatches\n", schedule, microbatches);
  }
  s += absl::StrFormat("%-28s %-22s %8s %16s\n", "communicator", "collective", "count",
                       "bytes per rank");
  for (const auto& [dim, kinds] : per_dim) {
    for (const auto& [kind, t] : kinds) {
      s += absl::StrFormat("%-28s %-22s %8d %16d\n", dim, kind, t.count, t.bytes);
    }
  }
  const auto mib = [](int64_t b) { return static_cast<double>(b) / (1 << 20); };
  s += absl::StrFormat("memory per rank (MiB):\n");
  s += absl::StrFormat(
      "  parameters %14.2f (%d bytes)\n  gradients  %14.2f (%d bytes)\n  optimizer  %14.2f (%d "
      "bytes)\n",
      mib(parameter_bytes), parameter_bytes, mib(gradient_bytes), gradient_bytes,
      mib(optimizer_bytes), optimizer_bytes);
  s += absl::StrFormat(
      "  step peak above its start (activations, gradients, temporaries; allocator) %.2f; "
      "allocator peak %.2f\n",
      mib(activation_bytes), mib(peak_bytes));
  if (checkpoint_total_bytes > 0) {
    s += absl::StrFormat("checkpoint (plan_save): this rank writes %.2f MiB of %.2f MiB%s\n",
                         mib(checkpoint_bytes), mib(checkpoint_total_bytes),
                         checkpoint_files >= 0
                             ? absl::StrFormat(" in %d rank files", checkpoint_files)
                             : std::string(" (rank files: unknown on the fake backend)"));
  }
  s += absl::StrFormat(
      "planning: %d propagation and %d redistribute-plan cache misses in the first step (%.1f "
      "ms, cold caches); the counted step %.1f ms\n",
      propagation_misses, plan_misses, first_step_ms, step_ms);
  return s;
}

}  // namespace dtensor::models
