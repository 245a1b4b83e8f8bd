// Shared plumbing of the benchmark programs: flag parsing, repeated timing (warm-up, barrier
// before each timed run, max over ranks), percentiles, and one JSON line per measurement.
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace dtensor::bench {

// "--key value" and "--flag" arguments (a flag followed by another --key, or last, is "1").
class Flags {
 public:
  Flags(int argc, char** argv);
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  std::string str(const std::string& key, const std::string& def) const;
  int64_t i64(const std::string& key, int64_t def) const;
  double f64(const std::string& key, double def) const;

 private:
  std::map<std::string, std::string> values_;
};

// Order statistics of a sample of seconds (nearest rank on the sorted sample).
struct Stats {
  double median = 0;
  double p10 = 0;
  double p90 = 0;
  int64_t n = 0;
};
Stats stats_of(std::vector<double> seconds);

// Times `fn`: `warmup` untimed runs, then `iters` timed runs. When `comm_world` is true
// (MPI programs) every run starts after a world barrier and the time of run i is the maximum
// over ranks of the per-rank time of run i (one all-reduce of the samples at the end), so the
// result is the same on every rank.
Stats time_runs(const std::function<void()>& fn, int64_t warmup, int64_t iters, bool comm_world);

// Like time_runs for several functions timed interleaved: iteration i runs fns[0], fns[1], ...
// in turn (each after its own barrier), so drifting machine load affects all of them alike.
// shuffled: each iteration runs them in an order shuffled per round (the same on every rank, a
// fixed seed), so that no function always follows the same one (e.g. a single-device run that
// leaves rank 0's caches cold and the other ranks idle). Returns one Stats per function.
std::vector<Stats> time_interleaved(const std::vector<std::function<void()>>& fns, int64_t warmup,
                                    int64_t iters, bool comm_world, bool shuffled = false);

// Runs `fn` once (a warm-up run, timed; max over ranks when `comm_world`) and returns how many
// timed runs fit in `budget_seconds`, clamped to [lo, hi]; the same on every rank.
int64_t iters_for_budget(const std::function<void()>& fn, double budget_seconds, int64_t lo,
                         int64_t hi, bool comm_world);

// Times `fn` in batches of `batch` calls until at least `min_seconds` and `min_batches` batches
// have run (single process); returns per-call statistics over the batches.
Stats time_batched(const std::function<void()>& fn, int64_t batch, double min_seconds,
                   int64_t min_batches = 15);

// One JSON object per line. Only opened (and truncated) on world rank 0; other ranks write
// nothing. Values are added in order; add() returns *this for chaining.
class JsonLines {
 public:
  // `path` empty (a run without --json, e.g. under perf): <DTENSOR_BENCH_RESULTS_DIR>/adhoc/
  // <bench>.jsonl (the build dir's benchmarks/results/adhoc/), so that an ad hoc run never
  // overwrites the results scripts/bench.sh saved (it passes --json for each). The directory
  // is created when missing.
  JsonLines(const std::string& bench, const std::string& path);
  ~JsonLines();
  JsonLines(const JsonLines&) = delete;
  JsonLines& operator=(const JsonLines&) = delete;
  const std::string& path() const { return path_; }

  class Record {
   public:
    Record& add(const std::string& key, const std::string& value);
    Record& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
    Record& add(const std::string& key, double value);
    Record& add(const std::string& key, int64_t value);
    Record& add(const std::string& key, int value) { return add(key, int64_t{value}); }
    Record& add(const std::string& key, bool value);
    // Adds median/p10/p90 in microseconds under prefix ("" -> "median_us", ...).
    Record& add_stats(const std::string& prefix, const Stats& s);
    std::string text() const { return "{" + body_ + "}"; }

   private:
    void key(const std::string& k);
    std::string body_;
  };
  // A record with "bench" and "name" filled in.
  Record record(const std::string& name) const;
  void write(const Record& r);

 private:
  std::string bench_;
  std::string path_;
  std::FILE* file_ = nullptr;
};

// World rank (0 when MPI is not initialised by the program).
int rank();
// Prints only on world rank 0 (printf format).
void print0(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace dtensor::bench
