#include "dtensor/checkpoint/train_state.h"

#include <absl/strings/match.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>

#include <bit>

#include "dtensor/checkpoint/detail/world.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor::checkpoint {

namespace {

constexpr char kModel[] = "model.", kOptim[] = "optim.", kRng[] = "rng.state",
               kScheduler[] = "lr_scheduler.";

DTensor rng_tensor(const Generator& gen) {
  const GeneratorState s = gen.state();
  return local_dtensor(from_vector(
      std::vector<int64_t>{std::bit_cast<int64_t>(s.seed), std::bit_cast<int64_t>(s.offset)}, {2}));
}

}  // namespace

StateDict training_state(const nn::Module* model, const optim::Optimizer* optimizer,
                         const Generator* generator) {
  return training_state(model, optimizer, nullptr, generator);
}

StateDict training_state(const nn::Module* model, const optim::Optimizer* optimizer,
                         const optim::LRScheduler* scheduler, const Generator* generator) {
  StateDict out;
  if (model != nullptr) {
    for (auto& [name, p] : model->named_parameters())
      out.emplace_back(absl::StrCat(kModel, name), p);
    // Buffers (BatchNorm's running statistics) in the same namespace, as PyTorch's
    // state_dict: loaded in place, like the parameters.
    for (auto& [name, b] : model->named_buffers()) out.emplace_back(absl::StrCat(kModel, name), b);
  }
  if (optimizer != nullptr) {
    for (auto& [name, s] : optimizer->state_dict()) out.emplace_back(absl::StrCat(kOptim, name), s);
  }
  if (scheduler != nullptr) {
    for (auto& [name, s] : scheduler->state_dict())
      out.emplace_back(absl::StrCat(kScheduler, name), s);
  }
  if (generator != nullptr) out.emplace_back(std::string(kRng), rng_tensor(*generator));
  return out;
}

void save_training_state(const nn::Module* model, const optim::Optimizer* optimizer,
                         const Generator* generator, const std::string& dir,
                         const SaveOptions& options) {
  save(training_state(model, optimizer, nullptr, generator), dir, options);
}

void save_training_state(const nn::Module* model, const optim::Optimizer* optimizer,
                         const optim::LRScheduler* scheduler, const Generator* generator,
                         const std::string& dir, const SaveOptions& options) {
  save(training_state(model, optimizer, scheduler, generator), dir, options);
}

void load_training_state(nn::Module* model, optim::Optimizer* optimizer, Generator* generator,
                         const std::string& dir) {
  load_training_state(model, optimizer, nullptr, generator, dir);
}

void load_training_state(nn::Module* model, optim::Optimizer* optimizer,
                         optim::LRScheduler* scheduler, Generator* generator,
                         const std::string& dir) {
  StateDict targets = training_state(model, nullptr, nullptr);  // the model's: loaded last
  const DTensor rng = generator != nullptr ? rng_tensor(*generator) : DTensor();
  // The optimizer creates its states lazily, so the targets follow what the checkpoint holds:
  // a zero state laid out like its parameter for every "optim.<i>.<slot>" entry, a local step
  // count for every "optim.<i>.step" (a parameter's own count of updates).
  std::vector<std::pair<std::string, DTensor>> optim_state, scheduler_state;
  std::map<std::string, TensorInfo> index;
  if (optimizer != nullptr || scheduler != nullptr)
    detail::run_on_all_ranks(detail::world_mesh(), [&] { index = read_index(dir); });
  // The scheduler's entries when the checkpoint holds them: each "lr_scheduler.<entry>" it
  // holds, as saved (a checkpoint from before round 8b has no hyper-parameters: the
  // scheduler keeps its own; another kind of scheduler's entries are refused by
  // LRScheduler::check_state_dict below).
  if (scheduler != nullptr && index.contains(absl::StrCat(kScheduler, "last_epoch"))) {
    for (const auto& [name, info] : index) {
      if (absl::StartsWith(name, kScheduler))
        scheduler_state.emplace_back(name.substr(sizeof(kScheduler) - 1),
                                     local_dtensor(zeros(info.shape, info.dtype)));
    }
  }
  if (optimizer != nullptr) {
    optim_state.emplace_back("step", local_dtensor(zeros({1}, kInt64)));
    const auto& params = optimizer->parameters();
    const std::vector<std::pair<std::string, double>> own_values = optimizer->hyper_parameters();
    for (const auto& [name, info] : index) {
      if (!absl::StartsWith(name, kOptim) || name == absl::StrCat(kOptim, "step")) continue;
      const std::string rest = name.substr(sizeof(kOptim) - 1);
      // A hyper-parameter (Optimizer::state_dict's "param_groups.<name>", float64 [1]), holding
      // the optimizer's own value until loaded, so that the check of names below passes the
      // values (those loaded are checked after the load).
      if (absl::StartsWith(rest, "param_groups.")) {
        double own = 0;
        for (const auto& [k, v] : own_values) {
          if (rest == absl::StrCat("param_groups.", k)) own = v;
        }
        optim_state.emplace_back(rest, local_dtensor(full({1}, own, TensorOptions(kFloat64))));
        continue;
      }
      size_t i = 0;
      const size_t dot = rest.find('.');
      // Every rank reads the same index, so every rank raises this alike.
      if (dot == std::string::npos || !absl::SimpleAtoi(rest.substr(0, dot), &i) ||
          i >= params.size()) {
        DT_FAIL(
            "[checkpoint::load_training_state] checkpoint '%s' holds optimizer state '%s' "
            "but the optimizer has %d parameters",
            dir, name, params.size());
      }
      optim_state.emplace_back(rest, rest.substr(dot + 1) == "step"
                                         ? local_dtensor(zeros({1}, kInt64))
                                         : zeros_like(params[i]));
    }
    // Another optimizer's state is refused before anything is loaded (every rank read the same
    // index, so every rank raises alike).
    optimizer->check_state_dict(optim_state);
  }
  // Two phases: first the entries that are read into new tensors (the optimizer's, the
  // scheduler's, the generator's), whose values are checked before the second phase writes
  // the model's parameters in place. Every rank reads the same values, so a hand-edited
  // invalid hyper-parameter is refused alike on every rank, with the model unchanged.
  StateDict small;
  for (const auto& [name, t] : optim_state) small.emplace_back(absl::StrCat(kOptim, name), t);
  for (const auto& [name, t] : scheduler_state)
    small.emplace_back(absl::StrCat(kScheduler, name), t);
  if (rng.defined()) small.emplace_back(std::string(kRng), rng);
  if (!small.empty()) load(small, dir);
  // The loaded values now (the optimizer's hyper-parameters as set_hyper_parameters checks
  // them), still changing nothing.
  if (optimizer != nullptr) optimizer->check_state_dict(optim_state);
  if (!scheduler_state.empty()) scheduler->check_state_dict(scheduler_state);
  if (!targets.empty()) load(targets, dir);
  if (optimizer != nullptr) optimizer->load_state_dict(optim_state);
  if (!scheduler_state.empty()) scheduler->load_state_dict(scheduler_state);
  if (rng.defined()) {
    const std::vector<int64_t> v = rng.to_local().to_vector<int64_t>();
    generator->set_state({std::bit_cast<uint64_t>(v[0]), std::bit_cast<uint64_t>(v[1])});
  }
}

}  // namespace dtensor::checkpoint
