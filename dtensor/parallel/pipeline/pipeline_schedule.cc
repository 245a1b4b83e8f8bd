#include "dtensor/parallel/pipeline/pipeline_schedule.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "dtensor/autograd/grad_mode.h"
#include "dtensor/collectives/fake_communicator.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/shape_ops.h"

namespace dtensor::pipelining {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The i-th of m equal microbatches of x along dim 0 of each rank's shard; "" or the reason why
// x cannot be split.
std::string split_problem(const DTensor& x, int64_t m, const char* what) {
  if (!x.defined()) return std::string("no ") + what + " was given to a stage that needs one";
  if (x.shape().empty()) return std::string("the ") + what + " is a scalar (no batch dim)";
  const int64_t local = x.to_local().dim() > 0 ? x.to_local().size(0) : 0;
  if (x.shape()[0] % m != 0 || local % m != 0) {
    return std::string("the ") + what + "'s batch of " + std::to_string(x.shape()[0]) +
           " (this rank's shard: " + std::to_string(local) + ") does not split into " +
           std::to_string(m) + " equal microbatches";
  }
  return "";
}

std::vector<DTensor> microbatches(const DTensor& x, int64_t m) {
  std::vector<DTensor> out;
  if (!x.defined()) return out;
  Shape shape = x.shape();
  shape[0] /= m;
  const Tensor& local = x.to_local();
  const int64_t b = local.size(0) / m;
  for (int64_t i = 0; i < m; ++i) {
    out.push_back(DTensor::from_local(local.narrow(0, i * b, b), x.device_mesh(), x.placements(),
                                      false, shape));
  }
  return out;
}

// The inverse of microbatches(): the pieces' local values concatenated along dim 0, with their
// placements and the whole batch's global size.
DTensor merge(const std::vector<DTensor>& pieces) {
  if (pieces.empty() || !pieces.front().defined()) return DTensor();
  std::vector<Tensor> locals;
  Shape shape = pieces.front().shape();
  shape.at(0) = 0;
  for (const DTensor& x : pieces) {
    locals.push_back(x.to_local());
    shape[0] += x.shape().at(0);
  }
  const DTensor& first = pieces.front();
  return DTensor::from_local(cat(locals, 0), first.device_mesh(), first.placements(), false, shape);
}

double scalar_value(const DTensor& loss) {
  return loss.full_tensor().to(kFloat64).to_vector<double>().at(0);
}

// Data parallelism under the pipeline, as PyTorch's stage backward
// (set_requires_gradient_sync(last) on an FSDP stage): a stage's gradients are reduced once per
// step, in the backward of its last microbatch; the earlier ones accumulate unreduced (no_sync).
// Restores each stage's own setting at the end of the step (an outer NoSync stays in force).
class DeferredGradientSync {
 public:
  DeferredGradientSync(const std::vector<std::shared_ptr<PipelineStage>>& stages,
                       const std::vector<Action>& actions)
      : stages_(stages), last_(stages.size(), actions.size()) {
    const int64_t p = stages.front()->pp_group()->size();
    for (size_t k = 0; k < actions.size(); ++k) {
      if (actions[k].kind == ActionKind::kBackward) {
        last_[static_cast<size_t>(actions[k].stage / p)] = k;
      }
    }
    for (const auto& st : stages_) {
      saved_.push_back(st->data_parallel() && st->data_parallel()->requires_gradient_sync());
    }
  }
  ~DeferredGradientSync() {
    for (size_t j = 0; j < stages_.size(); ++j) {
      if (stages_[j]->data_parallel())
        stages_[j]->data_parallel()->set_requires_gradient_sync(saved_[j]);
    }
  }
  DeferredGradientSync(const DeferredGradientSync&) = delete;
  DeferredGradientSync& operator=(const DeferredGradientSync&) = delete;

  // Before action k (a backward of local stage j): sync only in the stage's last backward.
  void before(size_t k, const Action& a) {
    if (a.kind != ActionKind::kBackward) return;
    const auto j = static_cast<size_t>(a.stage / stages_.front()->pp_group()->size());
    if (stages_[j]->data_parallel()) {
      stages_[j]->data_parallel()->set_requires_gradient_sync(saved_[j] && k == last_[j]);
    }
  }

 private:
  const std::vector<std::shared_ptr<PipelineStage>>& stages_;
  std::vector<size_t> last_;  // the index of each local stage's last backward action
  std::vector<bool> saved_;
};

// eval() computes the loss on the last stage when that rank passes a target; its ranks (dp / tp
// peers of the last stage) must all do so or none, since the loss may communicate among them
// (loss parallel's cross_entropy): one word per rank (2 off the last stage), compared among the
// last stage's ranks, so every rank raises alike instead of some waiting in the loss.
void check_eval_loss_agreement(const CommunicatorPtr& ranks, bool last, bool with_loss,
                               const std::string& op) {
  const int n = ranks->size();
  Tensor mine = full({1}, last ? (with_loss ? 1 : 0) : 2, TensorOptions(kInt64));
  Tensor all = zeros({n}, TensorOptions(kInt64));
  {
    CollectiveLabel label("pipeline eval");
    ranks->all_gather(all, mine)->wait();
  }
  const int64_t* a = all.data<int64_t>();
  int first = -1;
  for (int r = 0; r < n; ++r) {
    if (a[r] == 2) continue;
    if (first < 0) {
      first = r;
    } else if (a[r] != a[first]) {
      const int with = a[r] == 1 ? r : first, without = a[r] == 1 ? first : r;
      DT_FAIL(
          "[%s] eval: the last stage's ranks disagree on computing the loss: world rank %d "
          "passes a target, world rank %d does not (pass it on every rank of the last stage "
          "or on none)",
          op, ranks->world_ranks()[static_cast<size_t>(with)],
          ranks->world_ranks()[static_cast<size_t>(without)]);
    }
  }
}

}  // namespace

// The forward's input (a leaf when received) and output, kept until the backward.
struct PipelineSchedule::Slot {
  DTensor input;
  DTensor output;  // the loss on the last stage
};

PipelineSchedule::PipelineSchedule(ScheduleKind kind,
                                   std::vector<std::shared_ptr<PipelineStage>> stages,
                                   int64_t n_microbatches, LossFn loss_fn)
    : kind_(kind),
      op_("Schedule" + std::string(schedule_name(kind))),
      stages_(std::move(stages)),
      n_microbatches_(n_microbatches),
      loss_fn_(std::move(loss_fn)) {
  DT_CHECK(!stages_.empty() && stages_[0], "[%s] no stage given", op_.c_str());
  const CommunicatorPtr& pp = stages_[0]->pp_group();
  const int64_t p = pp->size();
  num_stages_ = stages_[0]->num_stages();
  const auto v = static_cast<int64_t>(stages_.size());
  DT_CHECK(num_stages_ == p * v,
           "[%s] %lld stages over %lld pp ranks need %lld stages per rank, this rank was given "
           "%lld",
           op_.c_str(), static_cast<long long>(num_stages_), static_cast<long long>(p),
           static_cast<long long>(num_stages_ / p), static_cast<long long>(v));
  for (int64_t j = 0; j < v; ++j) {
    DT_CHECK(stages_[j] && stages_[j]->stage_index() == j * p + pp->rank() &&
                 stages_[j]->num_stages() == num_stages_ && stages_[j]->pp_group() == pp,
             "[%s] this rank's stages must be %lld + k * %lld (k = 0..%lld) in order, on one pp "
             "group; entry %lld is stage %lld of %lld",
             op_.c_str(), static_cast<long long>(pp->rank()), static_cast<long long>(p),
             static_cast<long long>(v - 1), static_cast<long long>(j),
             static_cast<long long>(stages_[j] ? stages_[j]->stage_index() : -1),
             static_cast<long long>(stages_[j] ? stages_[j]->num_stages() : -1));
  }
  DT_CHECK(n_microbatches <= detail::kMaxMicrobatches, "[%s] %lld microbatches (at most %lld)",
           op_.c_str(), static_cast<long long>(n_microbatches),
           static_cast<long long>(detail::kMaxMicrobatches));
  order_ = pipeline_order(kind, p, v, n_microbatches);
  // Every rank of the mesh agrees and fails together (R2-1): a dp, tp or cp peer whose pipeline
  // raised alone would leave the others waiting in their collectives on those dims. Created
  // (collectively, the first time for this mesh) after the checks above, which every rank
  // passes or fails alike.
  const DeviceMesh& mesh = stages_[0]->mesh();
  std::vector<int64_t> dims(static_cast<size_t>(mesh.ndim()));
  for (int64_t d = 0; d < mesh.ndim(); ++d) dims[static_cast<size_t>(d)] = d;
  mesh_comm_ = mesh.flattened_communicator(dims);
  channel_ = detail::Channel(pp, mesh_comm_, op_, num_stages_, n_microbatches_);
}

PipelineStage& PipelineSchedule::stage(int64_t s) {
  return *stages_[static_cast<size_t>(s / stages_[0]->pp_group()->size())];
}

// Every rank of the mesh must run the same schedule, microbatch count and stage count at the
// same step; a rank that cannot start (`problem`, e.g. a dp shard of the batch that does not
// split) makes every rank of the mesh raise its message, before any rank enters a collective of
// its stages (FSDP's, tensor parallelism's) that the failed rank would never join.
void PipelineSchedule::check_agreement(const std::string& problem, bool eval) {
  const CommunicatorPtr& all_ranks = mesh_comm_;
  const int n = all_ranks->size();
  constexpr int kWords = 6;
  Tensor mine = zeros({kWords}, TensorOptions(kInt64));
  int64_t* w = mine.data<int64_t>();
  w[0] = static_cast<int64_t>(kind_);
  w[1] = n_microbatches_;
  w[2] = num_stages_;
  w[3] = step_count_;
  w[4] = eval ? 1 : 0;
  w[5] = problem.empty() ? 0 : 1;
  Tensor all = zeros({kWords * n}, TensorOptions(kInt64));
  {
    CollectiveLabel label("pipeline step");
    all_ranks->all_gather(all, mine)->wait();
  }
  const int64_t* a = all.data<int64_t>();
  int first = -1;
  for (int r = 0; r < n && first < 0; ++r) {
    if (a[r * kWords + 5] != 0) first = r;
  }
  // On the fake backend every peer is taken to be this rank (its words fill every slot): a
  // problem is this rank's own.
  if (fake_backend() && !problem.empty()) first = all_ranks->rank();
  detail::raise_first_failure(*all_ranks, first, problem);
  for (int r = 0; r < n; ++r) {
    const int64_t* o = a + r * kWords;
    if (std::equal(o, o + 5, a)) continue;
    auto describe = [](const int64_t* x) {
      return "Schedule" + std::string(schedule_name(static_cast<ScheduleKind>(x[0]))) + " with " +
             std::to_string(x[1]) + " microbatches over " + std::to_string(x[2]) +
             " stages at step " + std::to_string(x[3]) + (x[4] ? " (eval)" : "");
    };
    DT_CHECK(false,
             "[%s] the pipeline's ranks disagree: world rank %d runs %s, world rank %d runs %s",
             op_.c_str(), all_ranks->world_ranks()[0], describe(a).c_str(),
             all_ranks->world_ranks()[static_cast<size_t>(r)], describe(o).c_str());
  }
}

double PipelineSchedule::step(const DTensor& input, const DTensor& target) {
  return run_step(input, target, false);
}

DTensor PipelineSchedule::eval(const DTensor& input, const DTensor& target) {
  run_step(input, target, true);
  return output_;
}

double PipelineSchedule::run_step(const DTensor& input, const DTensor& target, bool eval) {
  const auto start = Clock::now();
  const int64_t m = n_microbatches_;
  const CommunicatorPtr& pp = stages_[0]->pp_group();
  const bool last = stages_.back()->is_last();
  // eval computes the loss when it can (a loss function and a target), step needs both.
  const bool with_loss = last && (!eval || (loss_fn_ && target.defined()));
  std::string problem;
  if (stages_.front()->is_first()) problem = split_problem(input, m, "input");
  if (problem.empty() && with_loss && !loss_fn_) {
    problem =
        "no loss function was given to the last stage (step() needs one; eval() runs "
        "without)";
  }
  if (problem.empty() && with_loss) problem = split_problem(target, m, "target");
  if (!problem.empty()) problem = "[" + op_ + "] " + problem;
  check_agreement(problem, eval);
  if (eval) check_eval_loss_agreement(mesh_comm_, last, with_loss, op_);
  eval_ = eval;
  losses_.clear();
  outputs_.clear();
  output_ = DTensor();
  ++step_count_;
  std::vector<DTensor> inputs =
      stages_.front()->is_first() ? microbatches(input, m) : std::vector<DTensor>();
  std::vector<DTensor> targets = with_loss ? microbatches(target, m) : std::vector<DTensor>();
  slots_.assign(stages_.size() * static_cast<size_t>(m), nullptr);
  mailbox_.clear();
  stats_ = StepStats{};
  double loss_sum = 0;
  // Every action runs, even after a failure (then poisoned: no computation, the messages still
  // sent and received, transfer.h), so finish_step raises the failure on every rank of the mesh.
  channel_.begin_step();
  {
    const std::vector<Action>& actions = order_[static_cast<size_t>(pp->rank())];
    DeferredGradientSync sync(stages_, actions);
    // eval: the forwards alone, in the schedule's order (a forward waits only for forwards,
    // which come no later than in the whole order, so it cannot deadlock either).
    std::optional<autograd::NoGradGuard> no_grad;
    if (eval) no_grad.emplace();
    for (size_t k = 0; k < actions.size(); ++k) {
      if (actions[k].kind == ActionKind::kForward) {
        forward(actions[k].stage, actions[k].microbatch, inputs, targets, loss_sum);
      } else if (!eval) {
        sync.before(k, actions[k]);
        backward(actions[k].stage, actions[k].microbatch);
      }
    }
  }
  slots_.clear();
  mailbox_.clear();
  try {
    channel_.finish_step();
  } catch (...) {
    // The step failed on some rank (raised here on every rank): the backwards that ran before
    // the failure summed their gradients under no_sync, and the stage's last backward, which
    // reduces them, did not run. Dropped, so the next step's gradients are its own.
    for (const auto& st : stages_) {
      if (st->data_parallel()) st->data_parallel()->discard_unsynced();
    }
    throw;
  }
  if (!outputs_.empty()) output_ = merge(outputs_);
  outputs_.clear();
  // The loss lives on the last stage's ranks (pp rank p - 1): every rank gets it.
  Tensor loss = full({1}, loss_sum / static_cast<double>(m), TensorOptions(kFloat64));
  {
    CollectiveLabel label("pipeline loss");
    pp->broadcast(loss, pp->size() - 1)->wait();
  }
  stats_.wall_seconds = seconds_since(start);
  return loss.data<double>()[0];
}

// Sends (or, to a stage of this rank, keeps) a value; a poisoned rank sends a poisoned header.
void PipelineSchedule::pass(const DTensor& value, const detail::TransferKey& key) {
  PipelineStage& from = stage(key.from_stage);
  const int dst = from.pp_rank_of(key.to_stage);
  if (dst == from.pp_group()->rank()) {
    mailbox_.emplace_back(std::tuple<int, int64_t, int64_t>{static_cast<int>(key.direction),
                                                            key.to_stage, key.microbatch},
                          value.defined() && !channel_.poisoned() ? value.detach() : DTensor());
    return;
  }
  channel_.send(value, dst, key, from.stage_mesh());
}

// Receives (or takes from this rank's own stage) a value; undefined once this rank is poisoned.
// A refused value poisons this rank with the error.
DTensor PipelineSchedule::take(const detail::TransferKey& key, const detail::TensorMeta* expected) {
  PipelineStage& me = stage(key.to_stage);
  const int src = me.pp_rank_of(key.from_stage);
  try {
    if (src != me.pp_group()->rank()) return channel_.recv(src, key, expected, me.stage_mesh());
    const std::tuple<int, int64_t, int64_t> id{static_cast<int>(key.direction), key.to_stage,
                                               key.microbatch};
    auto it = std::find_if(mailbox_.begin(), mailbox_.end(),
                           [&](const auto& entry) { return entry.first == id; });
    DT_CHECK(it != mailbox_.end(), "[%s] %s was never produced", op_.c_str(), key.str().c_str());
    DTensor value = std::move(it->second);
    mailbox_.erase(it);
    DT_CHECK(!value.defined() || expected == nullptr ||
                 *expected == detail::TensorMeta::of(value, me.stage_mesh()),
             "[%s] stage %lld expected %s as %s, but stage %lld produced %s (the stages disagree "
             "on the shape between them)",
             op_.c_str(), static_cast<long long>(key.to_stage), key.str().c_str(),
             expected ? expected->str().c_str() : "", static_cast<long long>(key.from_stage),
             value.defined() ? detail::TensorMeta::of(value, me.stage_mesh()).str().c_str() : "");
    return value;
  } catch (const std::exception& e) {
    channel_.fail(e.what());
    return DTensor();
  }
}

void PipelineSchedule::forward(int64_t s, int64_t i, std::vector<DTensor>& inputs,
                               std::vector<DTensor>& targets, double& loss_sum) {
  PipelineStage& st = stage(s);
  auto slot = std::make_shared<Slot>();
  if (st.is_first()) {
    slot->input = inputs[static_cast<size_t>(i)];
  } else {
    const auto& want = st.expected_input();
    slot->input = take({detail::Direction::kActivation, s - 1, s, i}, want ? &*want : nullptr);
  }
  DTensor out;
  if (!channel_.poisoned()) {
    try {
      if (!st.is_first() && !eval_) slot->input.requires_grad_();
      const auto t0 = Clock::now();
      out = st.submod()(slot->input);
      if (st.is_last() && (eval_ || return_outputs_)) outputs_.push_back(out.detach());
      if (st.is_last() && targets.empty()) {
        slot->output = out;  // eval without a loss
      } else if (st.is_last()) {
        const DTensor loss = loss_fn_(out, targets[static_cast<size_t>(i)]);
        DT_CHECK(loss.defined() && loss.numel() == 1,
                 "[%s] the loss function returned %s for microbatch %lld (expected a scalar)",
                 op_.c_str(), loss.defined() ? shape_str(loss.shape()).c_str() : "nothing",
                 static_cast<long long>(i));
        // A meta loss (a dry run) has no value to add.
        if (!loss.to_local().device().is_meta()) {
          losses_.push_back(scalar_value(loss));
          loss_sum += losses_.back();
        }
        slot->output = loss;
      } else {
        DT_CHECK(is_floating(out.dtype()),
                 "[%s] stage %lld's output is %s: activations between stages must be floating "
                 "(they carry gradients back)",
                 op_.c_str(), static_cast<long long>(s),
                 std::string(dtype_name(out.dtype())).c_str());
        slot->output = out;
      }
      stats_.compute_seconds += seconds_since(t0);
    } catch (const std::exception& e) {
      channel_.fail(e.what());
    }
  }
  if (!st.is_last()) pass(slot->output, {detail::Direction::kActivation, s, s + 1, i});
  if (!eval_) {  // kept for the backward
    slots_[static_cast<size_t>(s / st.pp_group()->size() * n_microbatches_ + i)] = std::move(slot);
  }
}

void PipelineSchedule::backward(int64_t s, int64_t i) {
  PipelineStage& st = stage(s);
  std::shared_ptr<Slot> slot =
      std::move(slots_[static_cast<size_t>(s / st.pp_group()->size() * n_microbatches_ + i)]);
  DTensor grad;
  if (!st.is_last()) {
    const bool known = !channel_.poisoned() && slot->output.defined();
    const detail::TensorMeta want =
        known ? detail::TensorMeta::of(slot->output, st.stage_mesh()) : detail::TensorMeta{};
    grad = take({detail::Direction::kGradient, s + 1, s, i}, known ? &want : nullptr);
  }
  DTensor input_grad;
  if (!channel_.poisoned()) {
    try {
      const auto t0 = Clock::now();
      if (st.is_last()) {
        // Scaled so that the microbatches' gradients add up to the whole batch's mean loss.
        mul(slot->output, Scalar(1.0 / static_cast<double>(n_microbatches_))).backward();
      } else {
        slot->output.backward(grad);
      }
      stats_.compute_seconds += seconds_since(t0);
      if (!st.is_first()) {
        input_grad = slot->input.grad().defined() ? slot->input.grad() : zeros_like(slot->input);
      }
    } catch (const std::exception& e) {
      channel_.fail(e.what());
    }
  }
  if (!st.is_first()) pass(input_grad, {detail::Direction::kGradient, s, s - 1, i});
}

std::unique_ptr<PipelineSchedule> make_schedule(std::string_view name,
                                                std::vector<std::shared_ptr<PipelineStage>> stages,
                                                int64_t n_microbatches, LossFn loss_fn) {
  return std::make_unique<PipelineSchedule>(schedule_kind(name), std::move(stages), n_microbatches,
                                            std::move(loss_fn));
}

}  // namespace dtensor::pipelining
