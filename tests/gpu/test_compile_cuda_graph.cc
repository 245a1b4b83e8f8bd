// CompileOptions::cuda_graph on a GPU (label gpu, one rank, launched by mpirun through
// gpu_mpi_main.cc: skipped without a CUDA device). The small model of
// tests/compile/cuda_graph_step.h (Linear, LayerNorm, GELU, cross-entropy from device-side ops;
// dtensor::cross_entropy reads its loss on the host, a case of its own below) trained three ways
// from the same weights on the same batches: eagerly, by plain replays of the compiled step, and
// by replays of it as one CUDA graph. Checked: the graph is captured (the status says so, else
// the reason is printed first); losses, parameters and gradients equal bit for bit over 10 steps
// with AdamW, SGD, Adam, RMSprop and Adagrad; the learning rate a StepLR schedule (and a direct
// change) sets between steps reaches the graph; the losses returned stay as they were after later
// steps; a batch of another shape re-captures; clip_grad_norm_ (a host read per step) and profiling
// fall back to plain replays with the reason, results still equal.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "dtensor_cuda_test_util.h"
#include "tests/compile/cuda_graph_step.h"

namespace dt = dtensor;
namespace ct = dtensor::cuda_test;
namespace cg = dtensor::cuda_graph_test;

namespace {

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// Bit equality of two modules' gradients (both undefined counts as equal).
void require_same_grads(const dt::nn::Module& a, const dt::nn::Module& b) {
  const auto pa = a.named_parameters();
  const auto pb = b.named_parameters();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    INFO("grad of " << pa[i].first);
    const dt::DTensor& ga = pa[i].second.grad();
    const dt::DTensor& gb = pb[i].second.grad();
    REQUIRE(ga.defined() == gb.defined());
    if (ga.defined()) REQUIRE(dt::equal(cg::on_cpu(ga), cg::on_cpu(gb)));
  }
}

void require_same_parameters(const dt::nn::Module& a, const dt::nn::Module& b) {
  std::string diff;
  const bool same = cg::same_parameters(a, b, &diff);
  INFO("first differing parameter: " << diff);
  REQUIRE(same);
}

// Step `i` of both trainers (eager, and through `step`) on batch i: losses and parameters
// bit-equal; then both schedules advance.
void step_both(int i, cg::Trainer& eager, cg::Trainer& graphed, dt::CompiledStep& step) {
  INFO("step " << i);
  const dt::DTensorList batch = cg::make_batch(graphed.device, i);
  const dt::Tensor want = cg::on_cpu(eager.step(batch)[0]);
  const dt::Tensor got = cg::on_cpu(step(batch)[0]);
  REQUIRE(dt::equal(got, want));
  require_same_parameters(graphed.net, eager.net);
  eager.schedule->step();
  graphed.schedule->step();
}

}  // namespace

TEST_CASE("a compiled step replays as one CUDA graph, bit for bit with eager and plain replay",
          "[compile][cuda_graph]") {
  // Each optimizer's CUDA update reads its runtime scalars (lr, bias corrections, lr_decay's
  // count) from the device-scalar slots under the graph (optim/detail/device_scalars.h).
  const char* kind = GENERATE("AdamW", "SGD", "Adam", "RMSprop", "Adagrad");
  INFO(kind);
  const dt::Device gpu = ct::gpu();
  cg::Trainer eager(gpu, kind, false, true), plain(gpu, kind, false, true),
      graphed(gpu, kind, false, true);
  dt::CompiledStep plain_step =
      dt::compile([&](const dt::DTensorList& b) { return plain.step(b); });
  dt::CompileOptions options;
  options.cuda_graph = true;
  dt::CompiledStep graph_step =
      dt::compile([&](const dt::DTensorList& b) { return graphed.step(b); }, options);
  std::vector<dt::DTensor> graph_losses;
  std::vector<dt::Tensor> eager_losses;
  for (int i = 0; i < 10; ++i) {
    INFO("step " << i);
    if (i == 7) {  // a direct change between steps, besides the schedule's
      for (cg::Trainer* t : {&eager, &plain, &graphed}) t->opt->set_lr(t->opt->lr() * 0.2);
    }
    const dt::DTensorList batch = cg::make_batch(gpu, i);
    const dt::Tensor want = cg::on_cpu(eager.step(batch)[0]);
    const dt::Tensor got_plain = cg::on_cpu(plain_step(batch)[0]);
    const dt::DTensor got = graph_step(batch)[0];
    const std::string status = graph_step.cuda_graph_status();
    INFO("cuda_graph_status: " << status);
    if (i == 0) {
      CHECK(status == "pending");
    } else {
      REQUIRE(starts_with(status, "captured: "));
    }
    CHECK(ct::on_my_gpu(got.to_local()));
    REQUIRE(dt::equal(got_plain, want));
    REQUIRE(dt::equal(cg::on_cpu(got), want));
    require_same_parameters(graphed.net, eager.net);
    require_same_parameters(plain.net, eager.net);
    require_same_grads(graphed.net, eager.net);
    graph_losses.push_back(got);
    eager_losses.push_back(want);
    for (cg::Trainer* t : {&eager, &plain, &graphed}) t->schedule->step();
  }
  CHECK(eager.schedule->get_last_lr() != eager.schedule->base_lr());  // the schedule moved
  CHECK(graph_step.captures() == 1);
  // Each returned loss is the caller's own: later launches did not overwrite it.
  for (size_t i = 0; i < graph_losses.size(); ++i) {
    INFO("loss of step " << i);
    CHECK(dt::equal(cg::on_cpu(graph_losses[i]), eager_losses[i]));
  }
}

TEST_CASE("a batch of another shape re-captures a CUDA graph of its own", "[compile][cuda_graph]") {
  const dt::Device gpu = ct::gpu();
  cg::Trainer eager(gpu, true, false, true), graphed(gpu, true, false, true);
  dt::CompileOptions options;
  options.cuda_graph = true;
  dt::CompiledStep step =
      dt::compile([&](const dt::DTensorList& b) { return graphed.step(b); }, options);
  for (int i = 0; i < 8; ++i) {
    const int64_t rows = i < 3 || i >= 6 ? cg::kBatch : 6;  // 8, 8, 8, 6, 6, 6, 8, 8
    INFO("step " << i << ", " << rows << " rows");
    const dt::DTensorList batch = cg::make_batch(gpu, i, rows);
    const dt::Tensor want = cg::on_cpu(eager.step(batch)[0]);
    const dt::Tensor got = cg::on_cpu(step(batch)[0]);
    INFO("cuda_graph_status: " << step.cuda_graph_status());
    REQUIRE(dt::equal(got, want));
    require_same_parameters(graphed.net, eager.net);
    if (i != 0 && i != 3) CHECK(starts_with(step.cuda_graph_status(), "captured: "));
  }
  CHECK(step.captures() == 2);
  CHECK(step.replays() == 6);
}

TEST_CASE("what a CUDA graph cannot replay falls back to plain replays, with the reason",
          "[compile][cuda_graph]") {
  const bool clip = GENERATE(true, false);
  INFO((clip ? "clip_grad_norm_" : "profile"));
  const dt::Device gpu = ct::gpu();
  cg::Trainer eager(gpu, true, clip, true), graphed(gpu, true, clip, true);
  dt::CompileOptions options;
  options.cuda_graph = true;
  options.profile = !clip;
  dt::CompiledStep step =
      dt::compile([&](const dt::DTensorList& b) { return graphed.step(b); }, options);
  for (int i = 0; i < 10; ++i) {
    step_both(i, eager, graphed, step);
    if (i == 0) continue;
    const std::string status = step.cuda_graph_status();
    INFO(status);
    CHECK(starts_with(status, "fallback: "));
    CHECK_THAT(status, Catch::Contains(clip ? "clip_grad_norm_.coef" : "CompileOptions::profile"));
  }
}

TEST_CASE("dtensor::cross_entropy in a CUDA-graph step: equal to eager, captured or not",
          "[compile][cuda_graph]") {
  // Its CUDA path reads the loss sum on the host (nll_loss_strategy.cc), so the capture is
  // expected to fall back naming that node; the results must be eager's either way.
  const dt::Device gpu = ct::gpu();
  cg::Trainer eager(gpu, true, false), graphed(gpu, true, false);
  dt::CompileOptions options;
  options.cuda_graph = true;
  dt::CompiledStep step =
      dt::compile([&](const dt::DTensorList& b) { return graphed.step(b); }, options);
  for (int i = 0; i < 4; ++i) step_both(i, eager, graphed, step);
  WARN("dtensor::cross_entropy step: " << step.cuda_graph_status());
}
