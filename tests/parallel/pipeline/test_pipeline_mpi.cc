// Pipeline parallelism under mpirun (2 and 4 ranks): every schedule (GPipe, 1F1B, interleaved
// 1F1B with 2 virtual stages per rank) trains a small transformer-style chain for 5 steps with
// losses, clip_grad_norm_ norms and gradients equal to single-device training of the same
// global batch (float64 bit-close, float32 within tolerance), at pp = world and, at 4 ranks,
// pp 2 x tp 2 and pp 2 x dp 2 (FSDP); and the errors (a split point that does not exist,
// microbatch counts the schedule or the batch cannot use, ranks that disagree, stages that
// disagree on the shape between them) are raised on every rank, after which the pipeline runs;
// at pp 2 x dp 2 a batch that one dp rank alone cannot split is raised on all four ranks, not
// only on that rank's pp line (review R2-1: its dp peers waited in FSDP's collectives).
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/nn/nn.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/optim/optimizer.h"
#include "dtensor/parallel/data_parallel/data_parallel.h"
#include "dtensor/parallel/parallelize.h"
#include "dtensor/parallel/pipeline/clip_grad.h"
#include "dtensor/parallel/pipeline/pipeline_schedule.h"
#include "dtensor/parallel/pipeline/split.h"
#include "dtensor/parallel/transformer_plan.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/creation.h"
#include "tests/parallel/parallel_test_util.h"
#include "tests/parallel/pipeline/pipeline_test_util.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
namespace pp = dtensor::pipelining;
using dt::test::max_diff;
using namespace dt::test::pipeline;  // NOLINT: the suite's helpers

namespace {

// Trains 5 steps through the pipeline and on one device; everything must agree within tol.
void check_training(const dt::DeviceMesh& mesh, const std::string& schedule, int64_t v, int64_t m,
                    dt::DType dtype, double tol, bool tp = false) {
  const int64_t p = mesh.size(mesh.dim_index("pp"));
  INFO(schedule << " pp " << p << (tp ? " x tp 2" : "") << ", " << v << " stage(s) per rank, " << m
                << " microbatches, " << dt::dtype_name(dtype));
  const nn::ModulePtr model = make_model(p * v, dtype);
  const nn::ModulePtr ref = make_model(p * v, dtype);
  const auto stages = my_stages(model, mesh, v, tp);
  auto sched = pp::make_schedule(schedule, stages, m, loss_fn);
  std::vector<std::pair<std::string, dt::DTensor>> params;
  std::vector<dt::DTensor> values;
  for (const auto& st : stages) {
    for (const auto& [fqn, prm] : st->submod().named_parameters()) {
      params.emplace_back(fqn, prm);
      values.push_back(prm);
    }
  }
  dt::optim::AdamW opt(values, dt::optim::AdamWOptions(1e-2));
  dt::optim::AdamW ref_opt(ref->parameters(), dt::optim::AdamWOptions(1e-2));
  for (int step = 0; step < 5; ++step) {
    INFO("step " << step);
    const Batch b = batch(step);
    opt.zero_grad();
    const double loss = sched->step(nn::local_dtensor(b.tokens), nn::local_dtensor(b.targets));
    const double norm = pp::clip_grad_norm_(values, 0.5, stages[0]->pp_group());

    ref_opt.zero_grad();
    const dt::DTensor ref_loss =
        loss_fn((*ref)(nn::local_dtensor(b.tokens)), nn::local_dtensor(b.targets));
    ref_loss.backward();
    const double ref_norm = dt::optim::clip_grad_norm_(ref->parameters(), 0.5);
    const double want = ref_loss.to_local().to(dt::kFloat64).item<double>();
    CHECK(std::abs(loss - want) <= tol * (1 + std::abs(want)));
    CHECK(std::abs(norm - ref_norm) <= tol * (1 + ref_norm));
    for (const auto& [fqn, prm] : params) {
      INFO(fqn);
      REQUIRE(prm.grad().defined());
      CHECK(max_diff(prm.grad().full_tensor(), ref->get_parameter(fqn).grad().to_local()) <= tol);
    }
    opt.step();
    ref_opt.step();
  }
  for (const auto& [fqn, prm] : params) {
    INFO(fqn << " after 5 steps");
    CHECK(max_diff(prm.full_tensor(), ref->get_parameter(fqn).to_local()) <= 10 * tol);
  }
}

// Each dp rank pipelines its half of the batch through stages sharded with fully_shard over dp
// (after tensor parallelism on "tp", sequence-parallel, when the mesh has that dim); losses per
// dp rank, clip_grad_norm_ and the whole batch's gradients equal single device over 3 steps.
// GPipe runs every microbatch's forward before the backwards: fully_shard's root unit keeps its
// gathered parameters until the last of them (it once crashed there).
void check_fsdp(const dt::DeviceMesh& mesh, const char* schedule, int64_t v) {
  INFO(schedule << " on " << mesh.str());
  const bool tp = mesh.ndim() == 3;
  const int64_t p = mesh.size(mesh.dim_index("pp"));
  const int64_t d = mesh.get_local_rank("dp");
  const nn::ModulePtr model = make_model(p * v, dt::kFloat64);
  const nn::ModulePtr ref = make_model(p * v, dt::kFloat64);
  const auto stages = my_stages(model, mesh, v, tp, /*sp=*/true);
  std::vector<std::pair<std::string, dt::DTensor>> params;
  std::vector<dt::DTensor> values;
  for (const auto& st : stages) {
    dt::fully_shard(st->submod(), tp ? mesh[{"dp", "tp"}] : mesh["dp"],
                    {.grouping = {.module_types = {"TransformerBlock"}}});
    for (const auto& [fqn, prm] : st->submod().named_parameters()) {
      params.emplace_back(fqn, prm);
      values.push_back(prm);
    }
  }
  auto sched = pp::make_schedule(schedule, stages, 2, loss_fn);
  dt::optim::AdamW opt(values, dt::optim::AdamWOptions(1e-2));
  dt::optim::AdamW ref_opt(ref->parameters(), dt::optim::AdamWOptions(1e-2));
  const int64_t half = kBatch / 2;
  for (int step = 0; step < 3; ++step) {
    INFO("step " << step);
    const Batch b = batch(step);
    const dt::Tensor tokens = b.tokens.narrow(0, d * half, half);
    const dt::Tensor targets = b.targets.narrow(0, d * half, half);
    opt.zero_grad();
    const double loss = sched->step(nn::local_dtensor(tokens), nn::local_dtensor(targets));
    const double norm = pp::clip_grad_norm_(values, 0.5, stages[0]->pp_group());
    // The loss of this dp rank's rows; the gradients of the whole batch's mean loss.
    const dt::DTensor mine = loss_fn((*ref)(nn::local_dtensor(tokens)), nn::local_dtensor(targets));
    const double want = mine.to_local().to(dt::kFloat64).item<double>();
    CHECK(std::abs(loss - want) <= 1e-12 * (1 + want));
    ref_opt.zero_grad();
    loss_fn((*ref)(nn::local_dtensor(b.tokens)), nn::local_dtensor(b.targets)).backward();
    const double ref_norm = dt::optim::clip_grad_norm_(ref->parameters(), 0.5);
    CHECK(std::abs(norm - ref_norm) <= 1e-12 * (1 + ref_norm));
    for (const auto& [fqn, prm] : params) {
      INFO(fqn);
      CHECK(max_diff(prm.grad().full_tensor(), ref->get_parameter(fqn).grad().to_local()) <= 1e-12);
    }
    opt.step();
    ref_opt.step();
  }
  // eval on the sharded stages (forwards whose backward never comes), then a step: the output of
  // this dp rank's rows and the step's loss equal single device.
  const Batch b = batch(3);
  const dt::Tensor tokens = b.tokens.narrow(0, d * half, half);
  const dt::Tensor targets = b.targets.narrow(0, d * half, half);
  const dt::DTensor out = sched->eval(nn::local_dtensor(tokens));
  const dt::Tensor want = (*ref)(nn::local_dtensor(tokens)).to_local();
  CHECK(out.defined() == stages.back()->is_last());
  if (out.defined()) CHECK(max_diff(out.full_tensor(), want) <= 1e-12);
  const double loss = sched->step(nn::local_dtensor(tokens), nn::local_dtensor(targets));
  const double ref_loss = loss_fn((*ref)(nn::local_dtensor(tokens)), nn::local_dtensor(targets))
                              .to_local()
                              .item<double>();
  CHECK(std::abs(loss - ref_loss) <= 1e-12 * (1 + ref_loss));
}

dt::DeviceMesh pp_mesh() {
  return dt::init_device_mesh(dt::kCPU, {dt::world_size()}, {"pp"});
}

}  // namespace

TEST_CASE("every schedule trains like a single device, float64 and float32", "[pipeline]") {
  const int64_t W = dt::world_size();
  const dt::DeviceMesh mesh = pp_mesh();
  for (const char* schedule : {"GPipe", "1F1B"}) {
    check_training(mesh, schedule, 1, 4, dt::kFloat64, 1e-12);
    check_training(mesh, schedule, 1, W == 2 ? 2 : 8, dt::kFloat64, 1e-12);
    check_training(mesh, schedule, 1, 4, dt::kFloat32, 2e-5);
  }
  check_training(mesh, "Interleaved1F1B", 2, 4, dt::kFloat64, 1e-12);
  check_training(mesh, "Interleaved1F1B", 2, 2 * W, dt::kFloat64, 1e-12);
  // Fewer microbatches than ranks (1 on 2, 2 on 4): one round of m, as PyTorch runs it.
  check_training(mesh, "Interleaved1F1B", 2, W / 2, dt::kFloat64, 1e-12);
  check_training(mesh, "Interleaved1F1B", 2, 4, dt::kFloat32, 2e-5);
}

// PyTorch's step(..., losses=[]) list, its merged output and schedule.eval() (round 7b,
// tests/parallel/torch_pp_parity): each microbatch's loss, the last stage's output merged along
// dim 0 and a forward-only step equal the single-device model's; eval records no autograd and
// runs without a loss function.
TEST_CASE("per-microbatch losses, merged output and eval equal the single-device model",
          "[pipeline]") {
  const dt::DeviceMesh mesh = pp_mesh();
  const int64_t W = dt::world_size();
  for (auto [schedule, v] : {std::pair{"GPipe", 1}, {"1F1B", 1}, {"Interleaved1F1B", 2}}) {
    INFO(schedule);
    const int64_t m = 4, rows = kBatch / m;
    const nn::ModulePtr model = make_model(W * v, dt::kFloat64);
    const nn::ModulePtr ref = make_model(W * v, dt::kFloat64);
    const auto stages = my_stages(model, mesh, v, false);
    const bool last = stages.back()->is_last();
    auto sched = pp::make_schedule(schedule, stages, m, loss_fn);
    sched->set_return_outputs(true);
    // Whether any module of this rank's stages produced an output recorded by autograd.
    auto recorded = std::make_shared<bool>(false);
    for (const auto& st : stages) {
      for (const auto& [name, mod] : st->submod().named_modules()) {
        mod->register_forward_hook([recorded](nn::Module&, const dt::DTensor&,
                                              const dt::DTensor& y) -> std::optional<dt::DTensor> {
          *recorded = *recorded || y.requires_grad();
          return std::nullopt;
        });
      }
    }
    const Batch b = batch(0);
    const dt::DTensor tokens = nn::local_dtensor(b.tokens), targets = nn::local_dtensor(b.targets);
    const double mean = sched->step(tokens, targets);
    const dt::Tensor want_out = (*ref)(tokens).to_local();
    REQUIRE(sched->losses().size() == static_cast<size_t>(last ? m : 0));
    double sum = 0;
    for (int64_t i = 0; i < m && last; ++i) {
      const dt::DTensor li = loss_fn((*ref)(nn::local_dtensor(b.tokens.narrow(0, i * rows, rows))),
                                     nn::local_dtensor(b.targets.narrow(0, i * rows, rows)));
      const double want = li.to_local().item<double>();
      CHECK(std::abs(sched->losses()[static_cast<size_t>(i)] - want) <= 1e-12);
      sum += sched->losses()[static_cast<size_t>(i)];
    }
    if (last) CHECK(std::abs(mean - sum / m) <= 1e-12);
    CHECK(sched->output().defined() == last);
    if (last) CHECK(max_diff(sched->output().to_local(), want_out) <= 1e-12);
    CHECK(*recorded);  // step's forwards are recorded (the hooks see it)
    const std::vector<double> step_losses = sched->losses();

    // eval, with the loss (the same losses: no parameter changed) and without a loss function;
    // no forward of it is recorded by autograd.
    *recorded = false;
    const dt::DTensor out = sched->eval(tokens, last ? targets : dt::DTensor());
    CHECK(out.defined() == last);
    CHECK_FALSE(*recorded);
    if (last) {
      CHECK(max_diff(out.to_local(), want_out) <= 1e-12);
      CHECK_FALSE(out.requires_grad());
      CHECK(sched->losses() == step_losses);
    }
    auto infer = pp::make_schedule(schedule, stages, m, nullptr);
    const dt::DTensor out2 = infer->eval(tokens);
    CHECK(out2.defined() == last);
    if (last) {
      CHECK(max_diff(out2.to_local(), want_out) <= 1e-12);
      CHECK(infer->losses().empty());
    }
    // step() needs the loss function: raised on every rank.
    CHECK_THROWS_WITH(infer->step(tokens, targets),
                      Catch::Contains("[Schedule" + std::string(schedule) +
                                      "] no loss function was given to the last stage"));
  }
}

TEST_CASE("pipeline x tensor parallel (pp 2 x tp 2)", "[pipeline][tp]") {
  if (dt::world_size() != 4) return;
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {2, 2}, {"pp", "tp"});
  check_training(mesh, "1F1B", 1, 4, dt::kFloat64, 1e-12, true);
  check_training(mesh, "Interleaved1F1B", 2, 2, dt::kFloat32, 2e-5, true);
}

TEST_CASE("pipeline x FSDP (pp 2 x dp 2): each dp rank pipelines its half of the batch",
          "[pipeline][fsdp]") {
  if (dt::world_size() != 4) return;
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {2, 2}, {"pp", "dp"});
  check_fsdp(mesh, "GPipe", 1);
  check_fsdp(mesh, "1F1B", 1);
  check_fsdp(mesh, "Interleaved1F1B", 2);
  // eval computes the loss where the last stage's rank passes a target; its dp peers must agree
  // (the loss may communicate among them): one passing a target and one not raises on every rank
  // (R2's finding: before, the two ran different code silently).
  const nn::ModulePtr model = make_model(2, dt::kFloat64);
  auto sched = pp::make_schedule("GPipe", my_stages(model, mesh, 1, false), 2, loss_fn);
  const Batch b = batch(0);
  const bool give = mesh.get_local_rank("dp") == 0;
  CHECK_THROWS_WITH(
      sched->eval(nn::local_dtensor(b.tokens), give ? nn::local_dtensor(b.targets) : dt::DTensor()),
      Catch::Contains("[ScheduleGPipe] eval: the last stage's ranks disagree on "
                      "computing the loss"));
  // Agreeing, it runs on.
  CHECK_NOTHROW(sched->eval(nn::local_dtensor(b.tokens), nn::local_dtensor(b.targets)));
}

// 8 ranks (its own ctest entry): the sequence-parallel residual stream crosses stages on the tp
// line, a submesh of the stage's (dp, tp) mesh.
TEST_CASE("3-D: pp 2 x dp 2 (FSDP) x tp 2 (sequence parallel)", "[pipeline][3d]") {
  if (dt::world_size() != 8) return;
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {2, 2, 2}, {"pp", "dp", "tp"});
  check_fsdp(mesh, "1F1B", 1);
  check_fsdp(mesh, "Interleaved1F1B", 2);
}

TEST_CASE("pipeline errors are raised on every rank, and the pipeline runs after them",
          "[pipeline][errors]") {
  const dt::DeviceMesh mesh = pp_mesh();
  const int64_t W = dt::world_size();
  const nn::ModulePtr model = make_model(W, dt::kFloat64);
  const Batch b = batch(0);
  const dt::DTensor tokens = nn::local_dtensor(b.tokens);
  const dt::DTensor targets = nn::local_dtensor(b.targets);

  CHECK_THROWS_WITH(pp::pipeline_split(model, {"layers.99"}),
                    Catch::Contains("[pipeline_split] split point 'layers.99' is not a unit of the "
                                    "chain (units: tok_embeddings, layers.0,"));

  // A microbatch count interleaving cannot use (2 rounds of unequal length, as PyTorch).
  CHECK_THROWS_WITH(
      pp::make_schedule("Interleaved1F1B", my_stages(model, mesh, 1, false), 2 * W + 1, loss_fn),
      Catch::Contains("[ScheduleInterleaved1F1B] n_microbatches " + std::to_string(2 * W + 1) +
                      " is not a multiple of the 2 rounds"));
  // A microbatch count the batch cannot use: known to the first and last stages only, raised
  // on every rank.
  auto three = pp::make_schedule("1F1B", my_stages(model, mesh, 1, false), 3, loss_fn);
  CHECK_THROWS_WITH(three->step(tokens, targets),
                    Catch::Contains("[Schedule1F1B] the input's batch of 8 (this rank's shard: 8) "
                                    "does not split into 3 equal microbatches"));
  // Ranks that disagree on the microbatch count.
  auto differ = pp::make_schedule("GPipe", my_stages(model, mesh, 1, false),
                                  dt::world_rank() == 0 ? 4 : 2, loss_fn);
  CHECK_THROWS_WITH(differ->step(tokens, targets),
                    Catch::Contains("[ScheduleGPipe] the pipeline's ranks disagree: world rank 0 "
                                    "runs ScheduleGPipe with 4 microbatches over " +
                                    std::to_string(W) +
                                    " stages at step 0, world rank 1 runs "
                                    "ScheduleGPipe with 2 microbatches"));

  // Stage 1 expects an activation of width 12; stage 0 sends width 16: the receiver raises it,
  // the sender and every other rank learn it from the status channel.
  {
    const auto modules = pp::pipeline_split(model, W);
    const int64_t r = dt::world_rank();
    const dt::DTensor example = nn::local_dtensor(
        dt::zeros({2, kSeq, r == 1 ? 12 : kDim}, dt::TensorOptions(dt::kFloat64)));
    auto stage = std::make_shared<pp::PipelineStage>(modules[r], r, W, mesh, "pp",
                                                     r == 0 ? dt::DTensor() : example);
    auto sched = pp::make_schedule("GPipe", {stage}, 4, loss_fn);
    CHECK_THROWS_WITH(
        sched->step(tokens, targets),
        Catch::Contains("[ScheduleGPipe] stage 1 expected the activation of microbatch 0 from "
                        "stage 0 to stage 1 as local float64 [2, 6, 12], but pp rank 0 (world "
                        "rank 0) sent local float64 [2, 6, 16] (the stages disagree on the shape "
                        "between them)"));
  }

  // An error in the last stage's loss (after every forward was sent on): raised on every rank,
  // the other ranks' pending transfers still matched.
  {
    auto bad = pp::make_schedule("1F1B", my_stages(model, mesh, 1, false), 4,
                                 [](const dt::DTensor&, const dt::DTensor&) -> dt::DTensor {
                                   throw dt::Error("[test] the loss failed");
                                 });
    const std::string where =
        W - 1 == dt::world_rank()
            ? std::string("[test] the loss failed")
            : "[test] the loss failed (raised on world rank " + std::to_string(W - 1) + ")";
    CHECK_THROWS_WITH(bad->step(tokens, targets), Catch::StartsWith(where));
  }

  // Nothing left behind by the failed steps confuses the next one.
  auto good = pp::make_schedule("1F1B", my_stages(model, mesh, 1, false), 4, loss_fn);
  for (int i = 0; i < 2; ++i) {
    const double loss = good->step(tokens, targets);
    CHECK(std::isfinite(loss));
    CHECK(loss > 0);
  }
}

// R2-1 (its own ctest entry, with a short collective deadline: a hang fails it fast). At pp 2 x
// dp 2 with fully_shard stages, the dp rank 1 of pp rank 0 (world rank 1) alone is given a batch
// of 3 rows that does not split into 2 microbatches. Its pp line used to raise while the other
// line went on into FSDP's all-gathers with it: now all four ranks raise the same error before
// any stage runs, and the next step runs. A failure in the middle of a step on one rank is raised
// on all four too (stages without FSDP: limit in pipeline_schedule.h). A step's own collectives,
// counted without FSDP: one all-gather (the agreement) and one all-reduce (the failure status)
// over the 4 ranks, one broadcast (the loss) over pp, and the point-to-point transfers.
TEST_CASE("a failure on one dp rank is raised on every rank of the mesh (pp 2 x dp 2, FSDP)",
          "[pipeline][.mesh-failure]") {
  if (dt::world_size() != 4) return;
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {2, 2}, {"pp", "dp"});
  const int64_t d = mesh.get_local_rank("dp");
  const bool bad_rank = mesh.get_local_rank("pp") == 0 && d == 1;
  const nn::ModulePtr model = make_model(2, dt::kFloat64);
  const auto stages = my_stages(model, mesh, 1, false);
  for (const auto& st : stages) {
    dt::fully_shard(st->submod(), mesh["dp"], {.grouping = {.module_types = {"TransformerBlock"}}});
  }
  auto sched = pp::make_schedule("1F1B", stages, 2, loss_fn);
  const Batch b = batch(0);
  const int64_t half = kBatch / 2;
  const dt::Tensor tokens = b.tokens.narrow(0, d * half, bad_rank ? 3 : half);
  const dt::Tensor targets = b.targets.narrow(0, d * half, half);
  const std::string message =
      "[Schedule1F1B] the input's batch of 3 (this rank's shard: 3) does not split into 2 equal "
      "microbatches";
  CHECK_THROWS_WITH(
      sched->step(nn::local_dtensor(tokens), nn::local_dtensor(targets)),
      bad_rank ? Catch::Equals(message) : Catch::Equals(message + " (raised on world rank 1)"));
  // Nothing is left behind: the next step runs on every rank.
  const dt::Tensor good = b.tokens.narrow(0, d * half, half);
  const double loss = sched->step(nn::local_dtensor(good), nn::local_dtensor(targets));
  CHECK(std::isfinite(loss));

  // An error in the middle of a step on one rank (the last stage's loss on world rank 2, pp
  // rank 1 of dp line 0), with stages that do not communicate over dp: the status all-reduce at
  // the step's end raises it on all four ranks, dp line 1 included.
  const nn::ModulePtr plain = make_model(2, dt::kFloat64);
  const auto plain_stages = my_stages(plain, mesh, 1, false);
  auto failing = pp::make_schedule("1F1B", plain_stages, 2,
                                   [](const dt::DTensor& out, const dt::DTensor& target) {
                                     if (dt::world_rank() == 2)
                                       throw dt::Error("[test] the loss failed on one dp rank");
                                     return loss_fn(out, target);
                                   });
  const std::string failed = "[test] the loss failed on one dp rank";
  CHECK_THROWS_WITH(failing->step(nn::local_dtensor(good), nn::local_dtensor(targets)),
                    dt::world_rank() == 2 ? Catch::Equals(failed)
                                          : Catch::Equals(failed + " (raised on world rank 2)"));

  // The pipeline's own collectives per step (stages without FSDP).
  auto plain_sched = pp::make_schedule("1F1B", plain_stages, 2, loss_fn);
  dt::CommDebugMode counts;
  plain_sched->step(nn::local_dtensor(good), nn::local_dtensor(targets));
  INFO(counts.str());
  CHECK(counts.count(dt::CollectiveKind::kAllGather) == 1);
  CHECK(counts.count(dt::CollectiveKind::kAllReduce) == 1);
  CHECK(counts.count(dt::CollectiveKind::kBroadcast) == 1);
}

// A step that fails on every rank after some backwards ran (review finding: the backwards before
// a stage's last one sum their gradients under no_sync, and the last one, which reduces them,
// never runs): the failed step's unreduced sums are dropped, so the next step's gradients equal
// a twin's that never failed. pp 2 x dp 2, FSDP stages given to the pipeline
// (set_data_parallel: one sync per step); 1F1B with 2 microbatches; the loss of the second
// microbatch raises on both dp ranks of the last stage, after the first one's backward.
TEST_CASE("a failed step's unreduced gradients do not reach the next step (pp 2 x dp 2, FSDP)",
          "[pipeline][.mesh-failure]") {
  if (dt::world_size() != 4) return;
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {2, 2}, {"pp", "dp"});
  const int64_t d = mesh.get_local_rank("dp");
  struct Run {
    nn::ModulePtr model;
    std::vector<std::shared_ptr<pp::PipelineStage>> stages;
    std::unique_ptr<pp::PipelineSchedule> sched;
  };
  int loss_calls = 0;
  auto build = [&](bool fail_once) {
    Run r;
    r.model = make_model(2, dt::kFloat64);
    r.stages = my_stages(r.model, mesh, 1, false);
    for (const auto& st : r.stages) {
      st->set_data_parallel(dt::fully_shard(st->submod(), mesh["dp"],
                                            {.grouping = {.module_types = {"TransformerBlock"}}}));
    }
    pp::LossFn fn = loss_fn;
    if (fail_once) {
      fn = [&loss_calls](const dt::DTensor& out, const dt::DTensor& target) {
        if (++loss_calls == 2) throw dt::Error("[test] the second microbatch's loss failed");
        return loss_fn(out, target);
      };
    }
    r.sched = pp::make_schedule("1F1B", r.stages, 2, fn);
    return r;
  };
  Run failing = build(true);
  Run twin = build(false);
  const int64_t half = kBatch / 2;
  const Batch b = batch(0);
  const dt::Tensor tokens = b.tokens.narrow(0, d * half, half);
  const dt::Tensor targets = b.targets.narrow(0, d * half, half);
  CHECK_THROWS(failing.sched->step(nn::local_dtensor(tokens), nn::local_dtensor(targets)));
  const double loss = failing.sched->step(nn::local_dtensor(tokens), nn::local_dtensor(targets));
  const double want = twin.sched->step(nn::local_dtensor(tokens), nn::local_dtensor(targets));
  CHECK(loss == want);
  for (size_t j = 0; j < failing.stages.size(); ++j) {
    const auto got = failing.stages[j]->submod().named_parameters();
    const auto ref = twin.stages[j]->submod().named_parameters();
    REQUIRE(got.size() == ref.size());
    for (size_t k = 0; k < got.size(); ++k) {
      INFO(got[k].first);
      REQUIRE(got[k].second.grad().defined());
      CHECK(max_diff(got[k].second.grad().full_tensor(), ref[k].second.grad().full_tensor()) == 0);
    }
  }
}

// A non-finite gradient on one stage only: every pp rank returns the same NaN (or inf) norm and
// scales as torch.nn.utils.clip_grad_norm_ does (NaN everywhere for a NaN norm, a factor of 0
// for an infinite one, on the other stages too); with error_if_nonfinite every rank raises and
// no gradient is touched. The inf-norm total is combined with a max that must keep the NaN.
TEST_CASE("pipelining clip_grad_norm_ propagates a non-finite gradient to every stage") {
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {dt::world_size()}, {"pp"});
  const dt::CommunicatorPtr group = mesh.communicator(0);
  for (const double norm_type : {2.0, double{INFINITY}}) {
    for (const double bad : {std::nan(""), double{INFINITY}}) {
      INFO("norm_type " << norm_type << ", bad entry " << bad);
      dt::DTensor p = nn::local_dtensor(dt::zeros({2}, dt::TensorOptions(dt::kFloat64)));
      p.requires_grad_();
      const double first = dt::world_rank() == dt::world_size() - 1 ? bad : 3.0;
      p.set_grad(nn::local_dtensor(dt::from_vector<double>({first, 4.0}, {2})));
      const double norm = pp::clip_grad_norm_({p}, 1.0, group, norm_type);
      const std::vector<double> g = p.grad().to_local().to_vector<double>();
      if (std::isnan(bad)) {
        CHECK(std::isnan(norm));
        CHECK(std::isnan(g[1]));
      } else {
        CHECK(norm == INFINITY);
        CHECK(g[1] == 0.0);
      }
      p.set_grad(nn::local_dtensor(dt::from_vector<double>({first, 4.0}, {2})));
      CHECK_THROWS_WITH(pp::clip_grad_norm_({p}, 1.0, group, norm_type, true),
                        Catch::Contains("non-finite"));
      CHECK(p.grad().to_local().to_vector<double>()[1] == 4.0);
    }
  }
}
