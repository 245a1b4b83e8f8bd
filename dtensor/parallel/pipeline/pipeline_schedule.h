// Running a training step through the pipeline (torch.distributed.pipelining's ScheduleGPipe,
// Schedule1F1B, ScheduleInterleaved1F1B): one executor runs the schedule's action lists
// (schedule.h) on this rank's stages.
//
// step(input, target) splits the batch into n_microbatches equal microbatches along dim 0 of
// each rank's local input and target (with a batch sharded over dp, each dp rank splits its own
// shard), runs the forwards and backwards in the schedule's order, computes the loss on the last
// stage, and backpropagates each microbatch's loss scaled by 1 / n_microbatches: the parameters'
// accumulated gradients equal those of the whole batch's mean loss. It returns that mean loss
// (the mean of the microbatch losses) on every rank. The optimizer step, zero_grad and
// clip_grad_norm_ (clip_grad.h) stay with the caller, as in PyTorch.
//
// Data parallelism. A stage with a data-parallel handle (PipelineStage::set_data_parallel, set by
// models::pipeline_llama) reduces its gradients once per step, as PyTorch's pipelining does with
// an FSDP stage: the backwards of its earlier microbatches run under no_sync (each parameter's
// unreduced gradient, the unsharded compute size, summed locally), the last one reduces the sum
// (one reduce-scatter per unit instead of one per unit and microbatch). A stage whose handle was
// set to no sync before the step (NoSync around step(), gradient accumulation over steps) keeps it.
//
// Checks. Every step first compares, over every rank of the stages' mesh (pp and the other
// dims: one small all-gather), the schedule, the number of microbatches and stages of every
// rank, and whether each can split its batch (the message of one that cannot is raised on every
// rank of the mesh, so no dp or tp peer is left waiting in its stages' collectives). Every
// transfer is checked against what the receiver expects (transfer.h). A failure on one rank (a
// refused transfer, an error in a stage's forward, backward or loss) is raised at the end of the
// step on every rank of the mesh with the same message (one all-reduce of a status word): the
// failed rank runs the rest of its schedule without computing, so no rank waits for a message
// that never comes. Limit: a failure in the middle of a step on a stage whose forward or
// backward itself communicates on the other dims (FSDP, tensor parallelism) leaves its peers
// there waiting in that collective: the collective deadline ends the job. Per step the pipeline
// issues three collectives of its own: the all-gather and all-reduce above over the whole mesh,
// and the loss's broadcast over pp (plus a broadcast of the message when a rank failed).
#pragma once

#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "dtensor/parallel/pipeline/schedule.h"
#include "dtensor/parallel/pipeline/stage.h"
#include "dtensor/parallel/pipeline/transfer.h"

namespace dtensor::pipelining {

// loss_fn(output of the last stage for one microbatch, that microbatch's target) -> a scalar
// DTensor: the mean loss of the microbatch (cross_entropy, mse_loss, ...). May be empty (nullptr)
// for a schedule that only runs eval().
using LossFn = std::function<DTensor(const DTensor& output, const DTensor& target)>;

// Where the time of the last step went on this rank (for the bubble benchmark).
struct StepStats {
  double wall_seconds = 0;     // the whole step
  double compute_seconds = 0;  // forwards, losses and backwards of this rank's stages
};

class PipelineSchedule {
 public:
  // `stages`: this rank's stages, in increasing stage index (one for GPipe / 1F1B). Throws
  // dtensor::Error "[Schedule<name>] ..." when the schedule cannot run n_microbatches over the
  // stages (schedule.h check_schedule), the stages are not this rank's, or a step's transfers
  // need more message tags than the pp communicator has (transfer.h check_tag_space).
  // Collective over the stages' mesh the first time a schedule runs on it (it builds the
  // communicator of all its ranks).
  PipelineSchedule(ScheduleKind kind, std::vector<std::shared_ptr<PipelineStage>> stages,
                   int64_t n_microbatches, LossFn loss_fn);

  // One training step; see the top of this file. `input` matters on the first stage's ranks,
  // `target` on the last stage's (the others may pass DTensor()). Needs the loss function on the
  // last stage's ranks (raised on every rank otherwise).
  double step(const DTensor& input, const DTensor& target);

  // One forward-only step (PyTorch's schedule.eval()): the microbatches run through the stages
  // in the schedule's order without backwards and without recording autograd; the loss function
  // runs when it was given and `target` is given on the last stage's ranks (losses() then holds
  // each microbatch's loss). Returns the last stage's outputs merged along dim 0 (PyTorch's
  // merged output: the inverse of the split) on the last stage's ranks, DTensor() on the others.
  // Collective over the stages' mesh like step() (every rank runs eval at the same time).
  DTensor eval(const DTensor& input, const DTensor& target = DTensor());

  // The last step's or eval's loss of each microbatch (PyTorch's `losses` list, not scaled by
  // 1 / n_microbatches) on the last stage's ranks; empty on the others.
  const std::vector<double>& losses() const { return losses_; }
  // step() keeps the last stage's outputs (detached) and merges them as eval() does, for
  // output(), when set (PyTorch's step returns them by default, return_outputs=True; here off by
  // default: a language model's logits are the largest activation of the step).
  void set_return_outputs(bool keep) { return_outputs_ = keep; }
  // The merged output of the last step (with set_return_outputs(true)) or eval on the last
  // stage's ranks; DTensor() otherwise.
  const DTensor& output() const { return output_; }

  ScheduleKind kind() const { return kind_; }
  int64_t n_microbatches() const { return n_microbatches_; }
  // The actions of every pp rank (schedule.h pipeline_order).
  const std::vector<std::vector<Action>>& order() const { return order_; }
  const StepStats& last_step_stats() const { return stats_; }

 private:
  struct Slot;  // what one microbatch's forward keeps for its backward
  void check_agreement(const std::string& problem, bool eval);
  double run_step(const DTensor& input, const DTensor& target, bool eval);
  void forward(int64_t s, int64_t i, std::vector<DTensor>& inputs, std::vector<DTensor>& targets,
               double& loss_sum);
  void backward(int64_t s, int64_t i);
  void pass(const DTensor& value, const detail::TransferKey& key);
  DTensor take(const detail::TransferKey& key, const detail::TensorMeta* expected);
  PipelineStage& stage(int64_t s);

  ScheduleKind kind_;
  std::string op_;  // "ScheduleGPipe"
  std::vector<std::shared_ptr<PipelineStage>> stages_;
  int64_t n_microbatches_;
  LossFn loss_fn_;
  int64_t num_stages_;
  int64_t step_count_ = 0;
  std::vector<std::vector<Action>> order_;
  CommunicatorPtr mesh_comm_;  // every rank of the stages' mesh
  detail::Channel channel_;
  std::vector<std::shared_ptr<Slot>> slots_;  // [local stage * m + microbatch]
  std::vector<std::pair<std::tuple<int, int64_t, int64_t>, DTensor>> mailbox_;  // same-rank
  StepStats stats_;
  bool eval_ = false;  // the running step is eval()
  bool return_outputs_ = false;
  std::vector<double> losses_;
  std::vector<DTensor> outputs_;  // the last stage's output per microbatch, while it runs
  DTensor output_;
};

// The schedule named `name` (schedule.h schedule_kind: "GPipe", "1F1B", "Interleaved1F1B").
std::unique_ptr<PipelineSchedule> make_schedule(std::string_view name,
                                                std::vector<std::shared_ptr<PipelineStage>> stages,
                                                int64_t n_microbatches, LossFn loss_fn);

}  // namespace dtensor::pipelining
