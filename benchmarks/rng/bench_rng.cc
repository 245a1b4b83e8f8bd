// Philox throughput on the CPU: uniform and normal float32 into a preallocated tensor, 1 thread
// and all threads, 1 MB .. 256 MB; against the scalar one-Philox-per-word loop; and sharded
// generation (one block of a bigger global tensor) to show time follows the local size.
// Every run checks a few elements against the direct formula. Median of the repetitions.
//
//   bench_rng [max_mb=256] [min_seconds_per_point=0.3] [--json FILE]
// JSON lines (default <build>/benchmarks/results/bench_rng.jsonl): one per printed row.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <thread>
#include <vector>

#include "benchmarks/common/bench_common.h"
#include "dtensor/rng/distributions.h"
#include "dtensor/rng/philox.h"
#include "dtensor/tensor/creation.h"

using namespace dtensor;

namespace {

double g_min_seconds = 0.3;

struct Timing {
  double wall = 0;  // median wall seconds per repetition
  double cpu = 0;   // median process CPU seconds per repetition
};

double process_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

Timing median_time(const std::function<void()>& fn) {
  fn();  // warm up (page faults, thread start)
  std::vector<double> wall, cpu;
  double total = 0;
  while (wall.size() < 3 || (total < g_min_seconds && wall.size() < 50)) {
    const double c0 = process_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    cpu.push_back(process_cpu_seconds() - c0);
    wall.push_back(s);
    total += s;
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  return {wall[wall.size() / 2], cpu[cpu.size() / 2]};
}

void check_uniform(const Tensor& t, uint64_t seed, uint64_t offset) {
  const float* p = t.data<float>();
  const int64_t n = t.numel();
  for (int64_t i : {int64_t{0}, n / 3, n - 1}) {
    const float want = static_cast<float>(philox_word(seed, offset + i) >> 8) * 0x1p-24f;
    if (p[i] != want) {
      std::fprintf(stderr, "bench_rng: wrong value at %lld\n", static_cast<long long>(i));
      std::exit(1);
    }
  }
}

// The plain loop the vectorised path is measured against: one Philox call per block of 4
// words, one block at a time (offset must be a multiple of 4).
void scalar_uniform(float* out, int64_t n, uint64_t seed, uint64_t offset) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const PhiloxBlock x = philox_stream_block(seed, (offset + i) / 4);
    for (int q = 0; q < 4; ++q) out[i + q] = static_cast<float>(x.v[q] >> 8) * 0x1p-24f;
  }
  for (; i < n; ++i) out[i] = static_cast<float>(philox_word(seed, offset + i) >> 8) * 0x1p-24f;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<const char*> pos;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--json") {
      ++i;
    } else {
      pos.push_back(argv[i]);
    }
  }
  const int64_t max_mb = pos.size() > 0 ? std::atoll(pos[0]) : 256;
  if (pos.size() > 1) g_min_seconds = std::atof(pos[1]);
  dtensor::bench::JsonLines json("bench_rng", dtensor::bench::Flags(argc, argv).str("json", ""));
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const uint64_t seed = 1234;
  std::printf(
      "# bench_rng: float32 output, median over repetitions, %d hardware threads.\n"
      "# GB/s = bytes written / wall time; cpu_GB/s = bytes / (process CPU time /\n"
      "# threads), the rate with uncontended cores (the wall rate on a shared machine\n"
      "# mostly measures the other processes).\n",
      hw);
  std::printf("%-8s %-9s %8s %12s %12s %12s %14s\n", "dist", "size", "threads", "time_ms", "GB/s",
              "cpu_GB/s", "cpu_Gsample/s");
  for (int64_t mb = 1; mb <= max_mb; mb *= 4) {
    const int64_t n = mb * (int64_t{1} << 20) / 4;
    Tensor t = empty({n}, kFloat32);
    const Shape g = {n}, zero = {0};
    for (const char* dist : {"uniform", "normal", "scalar"}) {
      for (int threads : {1, hw}) {
        if (std::string_view(dist) == "scalar" && threads != 1) continue;
        set_rng_num_threads(threads);
        std::function<void()> fn;
        if (std::string_view(dist) == "uniform") {
          fn = [&] { fill_random(t, RandomSpec::uniform(kFloat32), seed, 8, g, zero); };
        } else if (std::string_view(dist) == "normal") {
          fn = [&] { fill_random(t, RandomSpec::normal(kFloat32), seed, 8, g, zero); };
        } else {
          fn = [&] { scalar_uniform(t.data<float>(), n, seed, 8); };
        }
        const Timing tm = median_time(fn);
        if (std::string_view(dist) != "normal") check_uniform(t, seed, 8);
        const int used = n >= (int64_t{1} << 16) ? threads : 1;
        const double cpu_s = tm.cpu / used;
        std::printf("%-8s %6lld MB %8d %12.3f %12.2f %12.2f %14.3f\n", dist,
                    static_cast<long long>(mb), threads, tm.wall * 1e3,
                    double(n) * 4 / tm.wall / 1e9, double(n) * 4 / cpu_s / 1e9,
                    double(n) / cpu_s / 1e9);
        std::fflush(stdout);
        auto rec = json.record(std::string(dist) + " float32");
        rec.add("bytes", n * 4)
            .add("threads", threads)
            .add("median_us", tm.wall * 1e6)
            .add("cpu_us", tm.cpu * 1e6)
            .add("GBps", double(n) * 4 / tm.wall / 1e9)
            .add("cpu_GBps", double(n) * 4 / cpu_s / 1e9)
            .add("baseline", "scalar loop");
        json.write(rec);
      }
    }
  }
  // Sharded generation: a 64 MB global tensor [4096, 4096] cut into k row blocks; generating
  // block 0 alone costs ~1/k of the whole (all threads).
  set_rng_num_threads(hw);
  const Shape global = {4096, 4096};
  std::printf("\n# sharded uniform float32, global %s (64 MB), one row block of k\n",
              shape_str(global).c_str());
  std::printf("%-4s %12s %12s %12s\n", "k", "time_ms", "cpu_ms", "cpu_ratio");
  double t1 = 0;
  for (int64_t k : {1, 2, 4, 8}) {
    const ChunkBounds b = chunk_bounds(global[0], k, 0);
    Tensor blk = empty({b.size, global[1]}, kFloat32);
    const Shape off = {b.offset, 0};
    const Timing tm =
        median_time([&] { fill_random(blk, RandomSpec::uniform(kFloat32), seed, 0, global, off); });
    if (k == 1) t1 = tm.cpu;
    std::printf("%-4lld %12.3f %12.3f %12.3f\n", static_cast<long long>(k), tm.wall * 1e3,
                tm.cpu * 1e3, tm.cpu / t1);
    auto rec = json.record("sharded uniform float32");
    rec.add("global", shape_str(global))
        .add("k", k)
        .add("median_us", tm.wall * 1e6)
        .add("cpu_us", tm.cpu * 1e6)
        .add("cpu_ratio_vs_whole", tm.cpu / t1)
        .add("ideal", 1.0 / double(k));
    json.write(rec);
  }
  return 0;
}
