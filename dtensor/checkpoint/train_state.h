// The state a training run needs to resume — a model's parameters, its optimizer's state and
// a random generator — under fixed names, saved and loaded with checkpoint::save / load:
//   "model.<fqn>"        each parameter (named_parameters())
//   "optim.step"         the optimizer's step count (int64 [1], a local tensor)
//   "optim.<i>.<slot>"   its states, i indexing optimizer.parameters() ("optim.3.exp_avg")
//   "optim.param_groups.<name>"  its hyper-parameters ("optim.param_groups.lr"; float64 [1],
//                        local), restored on load as PyTorch's param_groups are; a checkpoint
//                        without them keeps the optimizer's own
//   "lr_scheduler.<entry>"  a learning-rate scheduler's LRScheduler::state_dict()
//                        ("lr_scheduler.last_epoch", "lr_scheduler.gamma", ...; local), with
//                        the overloads that take one
//   "rng.state"          the generator's (seed, offset) as int64 [2] (a local tensor)
// Any of them may be omitted (nullptr).
#pragma once

#include <string>

#include "dtensor/checkpoint/checkpoint.h"
#include "dtensor/nn/module.h"
#include "dtensor/optim/lr_scheduler.h"
#include "dtensor/optim/optimizer.h"
#include "dtensor/rng/generator.h"

namespace dtensor::checkpoint {

// The named DTensors above (they share storage with the parameters and states).
StateDict training_state(const nn::Module* model, const optim::Optimizer* optimizer,
                         const Generator* generator);
// With the scheduler's state (PyTorch users save scheduler.state_dict() beside the model's and
// the optimizer's; torchtitan's checkpoint holds its lr_schedulers): a run resumed without it
// would restart the schedule.
StateDict training_state(const nn::Module* model, const optim::Optimizer* optimizer,
                         const optim::LRScheduler* scheduler, const Generator* generator);

// save(training_state(...), dir, options).
void save_training_state(const nn::Module* model, const optim::Optimizer* optimizer,
                         const Generator* generator, const std::string& dir,
                         const SaveOptions& options = {});
void save_training_state(const nn::Module* model, const optim::Optimizer* optimizer,
                         const optim::LRScheduler* scheduler, const Generator* generator,
                         const std::string& dir, const SaveOptions& options = {});

// Loads what save_training_state wrote, resharded to the model's current placements: the
// parameters in place, then the optimizer's states (those the checkpoint holds, e.g. none
// before its first step) through Optimizer::load_state_dict (its hyper-parameters too, where
// the checkpoint holds them), then the scheduler's (LRScheduler::load_state_dict: the
// optimizer's learning rate becomes the schedule's), then the generator's state. A checkpoint
// without the scheduler's entries (saved without one, or before they existed) leaves the
// scheduler as it was built: the schedule restarts. Collective over the world like load(); an
// error changes nothing: the optimizer's, scheduler's and generator's entries are read first
// and checked (Optimizer::check_state_dict and the hyper-parameters' values,
// LRScheduler::check_state_dict: another optimizer's or scheduler's state, an invalid value),
// alike on every rank, before the model's parameters are written.
void load_training_state(nn::Module* model, optim::Optimizer* optimizer, Generator* generator,
                         const std::string& dir);
void load_training_state(nn::Module* model, optim::Optimizer* optimizer,
                         optim::LRScheduler* scheduler, Generator* generator,
                         const std::string& dir);

}  // namespace dtensor::checkpoint
