// Compiling a training step (DESIGN.md item 17; docs/guides/compiling_a_step.md):
//
//   auto step = dtensor::compile([&](const dtensor::DTensorList& batch) {
//     opt.zero_grad();
//     dtensor::DTensor loss = cross_entropy(model.forward(batch[0]), batch[1]);
//     loss.backward();
//     dtensor::optim::clip_grad_norm_(opt.parameters(), 1.0);
//     opt.step();
//     return dtensor::DTensorList{loss.detach()};
//   });
//   for (...) loss = step({x, y})[0];
//
// The first call runs the step eagerly while the runtime records every primitive it runs
// (dtensor/compile/graph.h): op kernels with the sharding chosen, redistributes with their
// plans and collectives, backward formulas as the engine runs them, gradient bindings,
// optimizer updates, clip_grad_norm_. Later calls with inputs of the same specs replay that
// graph: local kernels and planned collectives only, results bit-identical to the eager step.
// The learning rate, the optimizer's step count and other values read when an update runs are
// runtime scalars, not baked in; host scalars passed to ops are the step's `scalars` argument
// (ScalarStepFn), guarded on their values; they must be the same on every rank (each call that
// passes them compares them across ranks: compiler::check_scalars_agree). Guards: a call whose
// inputs differ in shape, dtype, placements, mesh or requires_grad from every captured graph
// re-captures (or raises, by option). After each capture the ranks of each input mesh compare a
// hash of their recorded sequences and outputs and raise when they differ
// (compiler::check_ranks_agree).
//
// Data parallel's own hooks (replicate / fully_shard) are captured too: their collectives are
// recorded primitives. Expansion (the design's data-parallel mode): compile(fn, mesh, style,
// options) turns a step written for one device into the data-parallel step (below).
//
// What cannot be captured raises "[compile] ..." on every rank during the capture: random ops,
// async collectives, data parallel's NoSync accumulation, ops whose output shape depends on the
// values (masked_select, nonzero), DTensors on the meta device (no data to record or replay:
// run a dry-run step eagerly), local Tensor computation whose
// result a DTensor op reads (every allocation during the capture is noted). What is not seen:
// host-side control flow that depends on tensor values (replay runs the ops of the capture);
// options.validate_every re-runs the step eagerly every N calls and raises when its op sequence
// changed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dtensor/compile/graph.h"
#include "dtensor/compile/override.h"
#include "dtensor/core/distributed_tensor.h"
#include "dtensor/optim/optimizer.h"
#include "dtensor/parallel/data_parallel/data_parallel.h"

namespace dtensor {
namespace compiler {
class CudaGraphReplay;  // detail/cuda_graph.h
}  // namespace compiler

struct CompileOptions {
  // A call whose inputs match no captured graph: capture again (true) or raise.
  bool recapture_on_guard_failure = true;
  // Graphs kept (one per input layout seen); one more raises.
  int max_graphs = 8;
  // Every N-th replay runs the step eagerly and re-records it instead, and raises
  // "[compile] the step's op sequence changed ..." when the ops differ (0: never).
  int validate_every = 0;
  // Passes (dtensor/compile/graph.h).
  bool dedup_collectives = true;
  bool remove_redundant_moves = true;
  // Gradient reductions fused into all-reduces of at most this many bytes (0: off); PyTorch
  // DDP's default bucket size.
  int64_t bucket_bytes = int64_t{25} << 20;
  // Issue each collective as early as its inputs are ready and run it on the communication
  // thread, waited on before its first reader (off by default: on a machine without a spare core
  // the communication thread competes with the compute).
  bool schedule_collectives = false;
  bool memory_plan = true;
  // Replays as one CUDA graph (off by default: opt in, as torch.compile's
  // mode="reduce-overhead"; docs/guides/compiling_a_step.md, "CUDA graphs"). The first replay of
  // a graph records its CUDA work by stream capture and runs it; later replays copy the inputs
  // into the graph's own, rerun only the host-side bookkeeping (gradient bindings, the
  // optimizer's step counts, its runtime scalars, which the captured kernels read from device
  // memory) and launch the graph once. A graph that cannot be captured (CPU tensors, the
  // scheduling pass, profiling, an Override kept eager, clip_grad_norm_'s host read, a
  // collective not on NCCL, a kernel that reads the host) replays plainly, with the reason in
  // CompiledStep::cuda_graph_status().
  bool cuda_graph = false;
  // Time the nodes of each replay (CompiledStep::last_profile; for benchmarks).
  bool profile = false;
  // Overrides (dtensor/compile/override.h): while a step is captured, each submodule of
  // `module` an override gives a replacement for runs as that replacement; after the passes,
  // each override's transform rewrites the graph.
  nn::Module* module = nullptr;
  std::vector<std::shared_ptr<compiler::Override>> overrides;
  // The step's optimizer, for expansion: it is made to follow the data-parallel parameters.
  optim::Optimizer* optimizer = nullptr;
  // Expansion's data_parallel options (buckets, units, mixed precision, the dp dim's name).
  DataParallelOptions data_parallel;
};

// A step function compiled by dtensor::compile: call it as the step itself. Compiled from a
// StepFn, it takes no host scalars: there is no call passing them (a rank passing scalars to a
// step its peers call without could only raise alone, its peers replaying on; whether a step takes
// scalars is fixed by its type, so every rank decides the same). Compiled from a ScalarStepFn it is
// a CompiledScalarStep, called as step(inputs, scalars).
class CompiledStep {
 public:
  using StepFn = std::function<DTensorList(const DTensorList& inputs)>;
  // A step that also takes host scalars (a loss scale, a divisor): torch.compile's treatment of
  // Python floats. Each graph is specialised on the scalars' values and guarded on them: a call
  // with other values (bit for bit) re-captures, replacing the graph of that input layout (so a
  // value that changes every step never exhausts max_graphs; scalar_recaptures() counts them),
  // or raises when recapture_on_guard_failure is off. The scalars must be the same on every rank
  // (SPMD, as PyTorch's compiled steps require): each call of such a step all-gathers their bits
  // over the inputs' meshes before the guard decides — so every rank replays or every rank
  // re-captures — and raises "[compile] the step's host scalars differ between ranks ..." on
  // every rank otherwise (even on a call passing none: its peers may pass some). A step compiled
  // from a StepFn takes no scalars and pays nothing. A value that changes every step without
  // re-capturing is a 0-dim DTensor input instead: div(t, s) with s a DTensor.
  using ScalarStepFn =
      std::function<DTensorList(const DTensorList& inputs, const std::vector<double>& scalars)>;
  CompiledStep(StepFn fn, CompileOptions options);

  DTensorList operator()(const DTensorList& inputs) { return call(inputs, {}); }
  // Where the last replay's time went (its nodes' computations — kernels, collectives — and,
  // apart, the freeing of values at their last reader), when CompileOptions::profile is on;
  // zeros otherwise.
  const compiler::ReplayProfile& last_profile() const { return last_profile_; }

  // The graph the last call ran or captured; throws before the first call.
  const compiler::Graph& graph() const;
  int64_t captures() const { return captures_; }
  int64_t replays() const { return replays_; }
  // Captures made because a host scalar changed (counted in captures() too).
  int64_t scalar_recaptures() const { return scalar_recaptures_; }
  // CompileOptions::cuda_graph for the graph of the last call: "off" (the option is off),
  // "pending" (not replayed yet), "captured: ..." (replays launch one CUDA graph) or
  // "fallback: <why>" (replays run plainly). Throws before the first call.
  std::string cuda_graph_status() const;

 protected:
  // A step taking host scalars (CompiledScalarStep).
  CompiledStep(ScalarStepFn fn, CompileOptions options);
  DTensorList call(const DTensorList& inputs, const std::vector<double>& scalars);

 private:
  // A captured graph and the scalar values it was specialised on.
  struct Captured {
    std::unique_ptr<compiler::Graph> graph;
    std::vector<double> scalars;
    // CompileOptions::cuda_graph: the captured CUDA graph, or why there is none (empty: not
    // tried yet). Reset whenever `graph` is replaced.
    std::shared_ptr<compiler::CudaGraphReplay> cuda;
    std::string cuda_status;
  };
  // A replay of `c` with CompileOptions::cuda_graph (see there).
  DTensorList cuda_replay(Captured& c, const DTensorList& inputs);
  // The graph whose input layout (specs, requires_grad, scalar count) `inputs` match; nullptr
  // when none.
  Captured* match_layout(const DTensorList& inputs, size_t scalar_count);
  DTensorList capture(const DTensorList& inputs, const std::vector<double>& scalars,
                      std::unique_ptr<compiler::Graph>& graph);

  ScalarStepFn fn_;
  // Compiled from a ScalarStepFn: every call compares its scalars across ranks, none included
  // (deciding by the scalars a rank passes would let a rank passing none skip the comparison
  // its peers wait in). A StepFn step is never given scalars (no call passes them).
  bool takes_scalars_ = true;
  CompileOptions options_;
  std::vector<Captured> graphs_;
  const compiler::Graph* last_ = nullptr;
  int64_t captures_ = 0;
  int64_t replays_ = 0;
  int64_t scalar_recaptures_ = 0;
  compiler::ReplayProfile last_profile_;
};

// A step compiled from a ScalarStepFn (see CompiledStep::ScalarStepFn): step(inputs, scalars);
// step(inputs) passes none (still compared with the peers' scalars).
class CompiledScalarStep : public CompiledStep {
 public:
  CompiledScalarStep(ScalarStepFn fn, CompileOptions options);
  using CompiledStep::operator();
  DTensorList operator()(const DTensorList& inputs, const std::vector<double>& scalars) {
    return call(inputs, scalars);
  }
};

// Compiles `fn`, a function running one step on DTensors (see above).
CompiledStep compile(CompiledStep::StepFn fn, CompileOptions options = {});
// The same for a step that takes host scalars: call it as step(inputs, scalars).
CompiledScalarStep compile(CompiledStep::ScalarStepFn fn, CompileOptions options = {});

// Expansion (DESIGN.md item 17's DataParallel mode; PyTorch's _spmd expansion): `fn` is a step
// written for one device — options.module's parameters local (or tensor-parallel on the mesh of
// the non-dp dims), options.optimizer over them, the batch as local DTensors. Expansion applies
// data_parallel(*options.module, mesh, style, options.data_parallel) at once (parameters
// replicated or sharded on the dp dim per style; the optimizer follows them: call it before the
// first step), and the returned step takes the GLOBAL batch (the same local DTensors on every
// rank), gives `fn` this dp rank's equal share of dim 0 of each input (0-dim inputs whole; a dim 0
// the dp size does not divide raises "[compile] ..."), and runs it compiled: activations
// batch-sharded, gradients reduced (Partial(avg) -> bucketed all-reduce or reduce-scatter),
// optimizer states following their parameters. Each step equals the eager data_parallel(...) step
// on the same shares, bit for bit.
CompiledStep compile(CompiledStep::StepFn fn, const DeviceMesh& mesh, DataParallelStyle style,
                     CompileOptions options);

}  // namespace dtensor
