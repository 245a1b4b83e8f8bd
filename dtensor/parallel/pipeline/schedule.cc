#include "dtensor/parallel/pipeline/schedule.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "dtensor/tensor/error.h"

namespace dtensor::pipelining {

namespace {
std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}
}  // namespace

ScheduleKind schedule_kind(std::string_view name) {
  std::string n = lower(name);
  if (n.rfind("schedule", 0) == 0) n = n.substr(8);
  if (n == "gpipe") return ScheduleKind::kGPipe;
  if (n == "1f1b") return ScheduleKind::kOneFOneB;
  if (n == "interleaved1f1b") return ScheduleKind::kInterleaved1F1B;
  DT_CHECK(false,
           "[get_schedule_class] unknown schedule '%s' (expected GPipe, 1F1B or "
           "Interleaved1F1B)",
           std::string(name).c_str());
  return ScheduleKind::kGPipe;
}

std::string_view schedule_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kGPipe:
      return "GPipe";
    case ScheduleKind::kOneFOneB:
      return "1F1B";
    case ScheduleKind::kInterleaved1F1B:
      return "Interleaved1F1B";
  }
  return "?";
}

std::string Action::str(bool with_stage) const {
  std::string s = with_stage ? std::to_string(stage) : "";
  s += kind == ActionKind::kForward ? 'F' : 'B';
  return s + std::to_string(microbatch);
}

int64_t interleaved_rounds(int64_t pp_size, int64_t n_microbatches) {
  return std::max<int64_t>(1, n_microbatches / std::max<int64_t>(pp_size, 1));
}

void check_schedule(ScheduleKind kind, int64_t pp_size, int64_t stages_per_rank,
                    int64_t n_microbatches) {
  const std::string name(schedule_name(kind));
  DT_CHECK(pp_size >= 1, "[Schedule%s] the pp dim has %lld ranks (expected at least 1)",
           name.c_str(), static_cast<long long>(pp_size));
  DT_CHECK(n_microbatches >= 1, "[Schedule%s] n_microbatches is %lld (expected at least 1)",
           name.c_str(), static_cast<long long>(n_microbatches));
  if (kind == ScheduleKind::kInterleaved1F1B) {
    DT_CHECK(stages_per_rank >= 1,
             "[ScheduleInterleaved1F1B] %lld stages per rank (expected at least 1)",
             static_cast<long long>(stages_per_rank));
    const auto accepted = [&](int64_t m) { return m % interleaved_rounds(pp_size, m) == 0; };
    if (!accepted(n_microbatches)) {
      // The accepted counts next to it (any below 2 * pp size; pp size * k always above).
      int64_t below = n_microbatches - 1, above = n_microbatches + 1;
      while (!accepted(below)) --below;
      while (!accepted(above)) ++above;
      DT_FAIL(
          "[ScheduleInterleaved1F1B] n_microbatches %lld is not a multiple of the %lld "
          "rounds (max(1, n_microbatches / pp size %lld): the rounds must be equal); "
          "accepted: 1 to %lld, then the counts m that floor(m / pp size) divides, "
          "the nearest %lld and %lld",
          static_cast<long long>(n_microbatches),
          static_cast<long long>(interleaved_rounds(pp_size, n_microbatches)),
          static_cast<long long>(pp_size), static_cast<long long>(2 * pp_size - 1),
          static_cast<long long>(below), static_cast<long long>(above));
    }
  } else {
    DT_CHECK(stages_per_rank == 1,
             "[Schedule%s] takes one stage per rank, got %lld (use Interleaved1F1B for virtual "
             "stages)",
             name.c_str(), static_cast<long long>(stages_per_rank));
  }
}

std::vector<std::vector<Action>> pipeline_order(ScheduleKind kind, int64_t p, int64_t v,
                                                int64_t m) {
  check_schedule(kind, p, v, m);
  std::vector<std::vector<Action>> order(static_cast<size_t>(p));
  for (int64_t r = 0; r < p; ++r) {
    auto& out = order[static_cast<size_t>(r)];
    auto F = [&](int64_t stage, int64_t mb) { out.push_back({ActionKind::kForward, stage, mb}); };
    auto B = [&](int64_t stage, int64_t mb) { out.push_back({ActionKind::kBackward, stage, mb}); };
    switch (kind) {
      case ScheduleKind::kGPipe:
        for (int64_t i = 0; i < m; ++i) F(r, i);
        for (int64_t i = 0; i < m; ++i) B(r, i);
        break;
      case ScheduleKind::kOneFOneB: {
        const int64_t warmup = std::min(p - 1 - r, m);
        int64_t f = 0, b = 0;
        while (f < warmup) F(r, f++);
        while (f < m) {
          F(r, f++);
          B(r, b++);
        }
        while (b < m) B(r, b++);
        break;
      }
      case ScheduleKind::kInterleaved1F1B: {
        // Megatron-LM's virtual microbatch k: rounds of n = m / rounds microbatches (p when m is
        // a multiple of p) walk the rank's v stages (forward in stage order, backward in reverse).
        const int64_t total = m * v;
        const int64_t n = m / interleaved_rounds(p, m);
        auto chunk = [&](int64_t k, bool forward) {
          const int64_t c = (k / n) % v;
          return forward ? c : v - 1 - c;
        };
        auto mb = [&](int64_t k) { return (k / (n * v)) * n + k % n; };
        const int64_t warmup = std::min((p - r - 1) * 2 + (v - 1) * n, total);
        int64_t f = 0, b = 0;
        while (f < warmup) {
          F(chunk(f, true) * p + r, mb(f));
          ++f;
        }
        while (f < total) {
          F(chunk(f, true) * p + r, mb(f));
          ++f;
          B(chunk(b, false) * p + r, mb(b));
          ++b;
        }
        while (b < total) {
          B(chunk(b, false) * p + r, mb(b));
          ++b;
        }
        break;
      }
    }
  }
  return order;
}

std::string order_str(const std::vector<std::vector<Action>>& order) {
  bool one_stage_per_rank = true;
  for (size_t r = 0; r < order.size(); ++r) {
    for (const Action& a : order[r]) one_stage_per_rank &= a.stage == static_cast<int64_t>(r);
  }
  std::string s;
  // Appended piece by piece: GCC 12 reports a false -Wrestrict in `" " + std::string`.
  for (size_t r = 0; r < order.size(); ++r) {
    s += "rank ";
    s += std::to_string(r);
    s += ':';
    for (const Action& a : order[r]) {
      s += ' ';
      s += a.str(!one_stage_per_rank);
    }
    s += '\n';
  }
  return s;
}

Simulation simulate(const std::vector<std::vector<Action>>& order, int64_t n_stages,
                    double forward_cost, double backward_cost) {
  const size_t p = order.size();
  Simulation sim;
  sim.peak_in_flight.assign(p, 0);
  // End time of each (kind, stage, microbatch) that has run.
  std::map<std::tuple<int, int64_t, int64_t>, double> done;
  std::vector<size_t> next(p, 0);
  std::vector<double> free_at(p, 0);
  std::vector<int64_t> in_flight(p, 0);
  double busy = 0;
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t r = 0; r < p; ++r) {
      while (next[r] < order[r].size()) {
        const Action& a = order[r][next[r]];
        const bool fwd = a.kind == ActionKind::kForward;
        // The action whose result this one needs (none for the first forward).
        std::tuple<int, int64_t, int64_t> dep{-1, 0, 0};
        if (fwd && a.stage > 0) dep = {0, a.stage - 1, a.microbatch};
        if (!fwd) {
          dep = a.stage == n_stages - 1
                    ? std::tuple<int, int64_t, int64_t>{0, a.stage, a.microbatch}
                    : std::tuple<int, int64_t, int64_t>{1, a.stage + 1, a.microbatch};
        }
        double ready = free_at[r];
        if (std::get<0>(dep) >= 0) {
          auto it = done.find(dep);
          if (it == done.end()) break;  // its input has not been produced yet
          ready = std::max(ready, it->second);
        }
        const double cost = fwd ? forward_cost : backward_cost;
        free_at[r] = ready + cost;
        busy += cost;
        done[{fwd ? 0 : 1, a.stage, a.microbatch}] = free_at[r];
        in_flight[r] += fwd ? 1 : -1;
        sim.peak_in_flight[r] = std::max(sim.peak_in_flight[r], in_flight[r]);
        ++next[r];
        progress = true;
      }
    }
  }
  for (size_t r = 0; r < p; ++r) {
    sim.deadlock |= next[r] < order[r].size();
    sim.makespan = std::max(sim.makespan, free_at[r]);
  }
  sim.bubble = sim.makespan > 0 ? 1 - busy / (static_cast<double>(p) * sim.makespan) : 0;
  return sim;
}

double theoretical_bubble(int64_t pp_size, int64_t n_microbatches, int64_t stages_per_rank) {
  const double p = static_cast<double>(pp_size);
  return (p - 1) / (static_cast<double>(stages_per_rank * n_microbatches) + p - 1);
}

}  // namespace dtensor::pipelining
