// Pipeline schedules as data (torch.distributed.pipelining's pipeline_order): for every rank of
// the pp dim, the ordered list of actions it runs in one training step, F (forward of one
// microbatch through one stage) and B (its backward). One executor (schedule_runtime.h) runs
// any list; the lists are pure and testable without processes, and simulate() replays them
// on a cost model (bubble fraction, in-flight activations, deadlock).
//
// Stage s lives on pp rank s % pp_size (PyTorch's loop placement): one stage per rank for
// GPipe and 1F1B, `stages_per_rank` virtual stages for interleaved 1F1B (rank r holds stages
// r, r + p, r + 2p, ...). Sends never block the sender (the executor posts them and waits at the
// end of the step); a receive blocks until its message comes. A list is valid when that
// program cannot deadlock, which simulate() checks.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtensor::pipelining {

enum class ScheduleKind { kGPipe, kOneFOneB, kInterleaved1F1B };

// "GPipe", "1F1B", "Interleaved1F1B" (PyTorch's schedule class names without "Schedule", and
// those names with it: "ScheduleGPipe", ...; case-insensitive). Throws "[get_schedule_class]
// unknown schedule 'x' (expected GPipe, 1F1B or Interleaved1F1B)".
ScheduleKind schedule_kind(std::string_view name);
std::string_view schedule_name(ScheduleKind kind);  // "GPipe", "1F1B", "Interleaved1F1B"

enum class ActionKind { kForward, kBackward };

// One action of a rank: forward or backward of `microbatch` through `stage`.
struct Action {
  ActionKind kind;
  int64_t stage;
  int64_t microbatch;
  bool operator==(const Action&) const = default;
  // "F3" / "B3" when stages are one per rank, with the stage "2F3" otherwise (PyTorch's
  // _Action text: stage, kind, microbatch).
  std::string str(bool with_stage = true) const;
};

// Checks that `kind` can run `n_microbatches` over `pp_size` ranks with `stages_per_rank`
// stages each, and throws dtensor::Error naming the schedule otherwise: n_microbatches >= 1,
// pp_size >= 1; GPipe and 1F1B take one stage per rank (1F1B also runs fewer microbatches than
// stages, which PyTorch's Schedule1F1B refuses); interleaved 1F1B runs
// interleaved_rounds(pp_size, m) equal rounds and needs m to be a multiple of their number
// (PyTorch's rule: m = 3 or 6 on 4 ranks run one round, m = 10 two rounds of 5, m = 9 is refused).
void check_schedule(ScheduleKind kind, int64_t pp_size, int64_t stages_per_rank,
                    int64_t n_microbatches);

// Interleaved 1F1B's rounds: max(1, m / pp_size) (PyTorch's number_of_rounds); each round is
// m / rounds microbatches long (pp_size when m is a multiple of it, as in Megatron-LM).
int64_t interleaved_rounds(int64_t pp_size, int64_t n_microbatches);

// The actions of every rank (index = pp rank) for one step. GPipe: all forwards, then all
// backwards. 1F1B: rank r runs min(p - 1 - r, m) warm-up forwards, then alternates one forward
// and one backward, then drains the backwards: at most p - r microbatches in flight. Interleaved
// 1F1B (Megatron-LM's order, PyTorch's ScheduleInterleaved1F1B): forwards walk the rank's stages
// in rounds of n = m / interleaved_rounds(p, m) microbatches, backwards walk them in reverse;
// warm-up (p - 1 - r) * 2 + (v - 1) * n forwards.
std::vector<std::vector<Action>> pipeline_order(ScheduleKind kind, int64_t pp_size,
                                                int64_t stages_per_rank, int64_t n_microbatches);

// One line per rank, the actions separated by spaces ("rank 0: F0 F1 B0 B1"), for messages
// and tests.
std::string order_str(const std::vector<std::vector<Action>>& order);

// The replay of an order on a cost model: every forward takes forward_cost, every backward
// backward_cost, messages take no time; an action starts when its rank is free and its input
// is there (F of stage s after F of stage s - 1 of the same microbatch; B of stage s after B of
// stage s + 1, or after its own F on the last stage).
struct Simulation {
  bool deadlock = false;  // some rank waits for an action that never runs
  double makespan = 0;    // time at which the last action ends
  double bubble = 0;      // idle fraction: 1 - busy / (ranks * makespan)
  // Per rank: the most microbatches forwarded and not yet backwarded at once, summed over the
  // rank's stages (what activation memory is proportional to).
  std::vector<int64_t> peak_in_flight;
};
Simulation simulate(const std::vector<std::vector<Action>>& order, int64_t n_stages,
                    double forward_cost = 1, double backward_cost = 2);

// The textbook bubble of GPipe and 1F1B: (p - 1) / (m + p - 1); interleaving with v stages per
// rank divides the ramp by v: (p - 1) / (v * m + p - 1).
double theoretical_bubble(int64_t pp_size, int64_t n_microbatches, int64_t stages_per_rank = 1);

}  // namespace dtensor::pipelining
