#include "benchmarks/common/bench_common.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <random>

#ifndef DTENSOR_BENCH_RESULTS_DIR
#define DTENSOR_BENCH_RESULTS_DIR "benchmarks/results"
#endif

namespace dtensor::bench {

Flags::Flags(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) continue;
    a = a.substr(2);
    const auto eq = a.find('=');
    if (eq != std::string::npos) {
      values_[a.substr(0, eq)] = a.substr(eq + 1);
    } else if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) {
      values_[a] = argv[++i];
    } else {
      values_[a] = "1";
    }
  }
}

std::string Flags::str(const std::string& key, const std::string& def) const {
  auto it = values_.find(key);
  return it == values_.end() ? def : it->second;
}

int64_t Flags::i64(const std::string& key, int64_t def) const {
  auto it = values_.find(key);
  return it == values_.end() ? def : std::atoll(it->second.c_str());
}

double Flags::f64(const std::string& key, double def) const {
  auto it = values_.find(key);
  return it == values_.end() ? def : std::atof(it->second.c_str());
}

Stats stats_of(std::vector<double> s) {
  Stats r;
  r.n = static_cast<int64_t>(s.size());
  if (s.empty()) return r;
  std::sort(s.begin(), s.end());
  auto at = [&](double q) {
    const auto i = static_cast<size_t>(std::lround(q * double(s.size() - 1)));
    return s[std::min(i, s.size() - 1)];
  };
  r.median = at(0.5);
  r.p10 = at(0.1);
  r.p90 = at(0.9);
  return r;
}

namespace {

bool mpi_up() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

Stats time_runs(const std::function<void()>& fn, int64_t warmup, int64_t iters, bool comm_world) {
  const bool mpi = comm_world && mpi_up();
  for (int64_t i = 0; i < warmup; ++i) fn();
  std::vector<double> t(static_cast<size_t>(iters));
  for (int64_t i = 0; i < iters; ++i) {
    if (mpi) MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = now();
    fn();
    t[i] = now() - t0;
  }
  if (mpi && iters > 0) {
    MPI_Allreduce(MPI_IN_PLACE, t.data(), static_cast<int>(iters), MPI_DOUBLE, MPI_MAX,
                  MPI_COMM_WORLD);
  }
  return stats_of(std::move(t));
}

std::vector<Stats> time_interleaved(const std::vector<std::function<void()>>& fns, int64_t warmup,
                                    int64_t iters, bool comm_world, bool shuffled) {
  const bool mpi = comm_world && mpi_up();
  for (int64_t i = 0; i < warmup; ++i)
    for (const auto& fn : fns) fn();
  const size_t k = fns.size();
  std::vector<size_t> order(k);
  std::iota(order.begin(), order.end(), size_t{0});
  std::mt19937 rng(12345);
  std::vector<double> t(k * static_cast<size_t>(iters));  // t[j * iters + i]
  for (int64_t i = 0; i < iters; ++i) {
    if (shuffled) std::shuffle(order.begin(), order.end(), rng);
    for (const size_t j : order) {
      if (mpi) MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = now();
      fns[j]();
      t[j * iters + i] = now() - t0;
    }
  }
  if (mpi && !t.empty()) {
    MPI_Allreduce(MPI_IN_PLACE, t.data(), static_cast<int>(t.size()), MPI_DOUBLE, MPI_MAX,
                  MPI_COMM_WORLD);
  }
  std::vector<Stats> out;
  for (size_t j = 0; j < k; ++j) {
    out.push_back(
        stats_of(std::vector<double>(t.begin() + j * iters, t.begin() + (j + 1) * iters)));
  }
  return out;
}

int64_t iters_for_budget(const std::function<void()>& fn, double budget_seconds, int64_t lo,
                         int64_t hi, bool comm_world) {
  const bool mpi = comm_world && mpi_up();
  if (mpi) MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = now();
  fn();
  double t = now() - t0;
  if (mpi) MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  const double n = t > 0 ? budget_seconds / t : double(hi);
  return std::clamp<int64_t>(static_cast<int64_t>(n), lo, hi);
}

Stats time_batched(const std::function<void()>& fn, int64_t batch, double min_seconds,
                   int64_t min_batches) {
  for (int64_t i = 0; i < batch; ++i) fn();  // warm-up
  std::vector<double> per_call;
  double total = 0;
  while (static_cast<int64_t>(per_call.size()) < min_batches || total < min_seconds) {
    const double t0 = now();
    for (int64_t i = 0; i < batch; ++i) fn();
    const double s = now() - t0;
    total += s;
    per_call.push_back(s / double(batch));
    if (per_call.size() > 100000) break;
  }
  return stats_of(std::move(per_call));
}

int rank() {
  if (!mpi_up()) return 0;
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

void print0(const char* fmt, ...) {
  if (rank() != 0) return;
  va_list ap;
  va_start(ap, fmt);
  std::vprintf(fmt, ap);
  va_end(ap);
  std::fflush(stdout);
}

JsonLines::JsonLines(const std::string& bench, const std::string& path) : bench_(bench) {
  path_ =
      path.empty() ? std::string(DTENSOR_BENCH_RESULTS_DIR) + "/adhoc/" + bench + ".jsonl" : path;
  if (rank() != 0) return;
  std::error_code ec;
  const auto parent = std::filesystem::path(path_).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  file_ = std::fopen(path_.c_str(), "w");
  if (file_ == nullptr) std::fprintf(stderr, "%s: cannot write %s\n", bench.c_str(), path_.c_str());
}

JsonLines::~JsonLines() {
  if (file_ != nullptr) std::fclose(file_);
}

JsonLines::Record JsonLines::record(const std::string& name) const {
  Record r;
  r.add("bench", bench_).add("name", name);
  return r;
}

void JsonLines::write(const Record& r) {
  if (file_ == nullptr) return;
  std::fprintf(file_, "%s\n", r.text().c_str());
  std::fflush(file_);
}

void JsonLines::Record::key(const std::string& k) {
  if (!body_.empty()) body_ += ", ";
  body_ += "\"" + k + "\": ";
}

JsonLines::Record& JsonLines::Record::add(const std::string& k, const std::string& v) {
  key(k);
  body_ += '"';
  for (char c : v) {
    if (c == '"' || c == '\\') body_ += '\\';
    body_ += c;
  }
  body_ += '"';
  return *this;
}

JsonLines::Record& JsonLines::Record::add(const std::string& k, double v) {
  key(k);
  if (!std::isfinite(v)) {
    body_ += "null";
  } else {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.6g", v);
    body_ += buf;
  }
  return *this;
}

JsonLines::Record& JsonLines::Record::add(const std::string& k, int64_t v) {
  key(k);
  body_ += std::to_string(v);
  return *this;
}

JsonLines::Record& JsonLines::Record::add(const std::string& k, bool v) {
  key(k);
  body_ += v ? "true" : "false";
  return *this;
}

JsonLines::Record& JsonLines::Record::add_stats(const std::string& prefix, const Stats& s) {
  const std::string p = prefix.empty() ? "" : prefix + "_";
  add(p + "median_us", s.median * 1e6);
  add(p + "p10_us", s.p10 * 1e6);
  add(p + "p90_us", s.p90 * 1e6);
  return *this;
}

}  // namespace dtensor::bench
