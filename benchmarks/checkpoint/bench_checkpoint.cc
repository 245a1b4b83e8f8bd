// Checkpoint throughput: checkpoint::save and checkpoint::load of a model of --mb MB (float32
// tensors of --tensor-mb MB, Shard(0) over every rank) against a dd-style raw write (write(2)
// in 64 MB blocks + fsync) and read (read(2)) of the same bytes per rank on the same disk.
// Also a resharded load (the targets Shard(1): every rank reads a slice of every chunk).
//
//   mpirun -np N bench_checkpoint [--mb 256] [--tensor-mb 16] [--iters 3] [--warmup 1]
//                                 [--dir /tmp/dtensor_bench_ckpt] [--json FILE]
//
// Times: median over iterations of the max over ranks (barrier before each run, variants
// interleaved). GB/s per rank = the rank's bytes / time; aggregate = all bytes / time. Reads
// run right after writes, so both ours and the raw ones are served mostly by the page cache,
// alike. The loaded values are checked against the saved ones (exit 1 when they differ).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "benchmarks/common/bench_common.h"
#include "dtensor/checkpoint/checkpoint.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/compare.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dt = dtensor;
namespace ck = dtensor::checkpoint;
namespace bench = dtensor::bench;

namespace {

constexpr size_t kBlock = size_t{64} << 20;

void raw_write(const std::string& path, const char* data, size_t n) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  DT_CHECK(fd >= 0, "[bench_checkpoint] open %s: %s", path, std::strerror(errno));
  for (size_t off = 0; off < n;) {
    const ssize_t w = ::write(fd, data + off, std::min(kBlock, n - off));
    DT_CHECK(w > 0, "[bench_checkpoint] write %s: %s", path, std::strerror(errno));
    off += static_cast<size_t>(w);
  }
  ::fsync(fd);
  ::close(fd);
}

void raw_read(const std::string& path, char* data, size_t n) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  DT_CHECK(fd >= 0, "[bench_checkpoint] open %s: %s", path, std::strerror(errno));
  for (size_t off = 0; off < n;) {
    const ssize_t r = ::read(fd, data + off, std::min(kBlock, n - off));
    DT_CHECK(r > 0, "[bench_checkpoint] read %s: %s", path, std::strerror(errno));
    off += static_cast<size_t>(r);
  }
  ::close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  dt::Runtime runtime(&argc, &argv);
  const bench::Flags flags(argc, argv);
  const int64_t mb = flags.i64("mb", 256),
                tensor_mb = std::max<int64_t>(1, flags.i64("tensor-mb", 16));
  const int64_t iters = flags.i64("iters", 3), warmup = flags.i64("warmup", 1);
  const std::string dir = flags.str("dir", "/tmp/dtensor_bench_ckpt");
  bench::JsonLines json("checkpoint", flags.str("json", ""));
  const int rank = dt::world_rank(), world = dt::world_size();

  // Tensors of [rows, 1024] float32; the last one takes the remainder.
  const int64_t cols = 1024, total_rows = std::max<int64_t>(1, mb * (1 << 20) / (4 * cols));
  const int64_t rows_per = std::max<int64_t>(1, tensor_mb * (1 << 20) / (4 * cols));
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {world});
  const dt::Placements s0 = {dt::Shard(0)}, s1 = {dt::Shard(1)};
  ck::StateDict state, same, resharded;
  dt::manual_seed(7);
  int64_t my_bytes = 0, all_bytes = 0;
  for (int64_t r0 = 0, i = 0; r0 < total_rows; r0 += rows_per, ++i) {
    const int64_t rows = std::min(rows_per, total_rows - r0);
    const dt::Tensor full = dt::randn({rows, cols});
    const std::string name = "layer" + std::to_string(i) + ".weight";
    state.emplace_back(name, dt::distribute_tensor(full, mesh, s0, std::nullopt));
    same.emplace_back(name, dt::distribute_tensor(dt::zeros({rows, cols}), mesh, s0, std::nullopt));
    resharded.emplace_back(name,
                           dt::distribute_tensor(dt::zeros({rows, cols}), mesh, s1, std::nullopt));
    my_bytes += static_cast<int64_t>(state.back().second.to_local().nbytes());
    all_bytes += rows * cols * 4;
  }
  // The raw baseline: this rank's bytes, contiguous.
  std::vector<char> raw(static_cast<size_t>(my_bytes));
  int64_t pos = 0;
  for (const auto& [name, t] : state) {
    std::memcpy(raw.data() + pos, t.to_local().data_ptr(), t.to_local().nbytes());
    pos += static_cast<int64_t>(t.to_local().nbytes());
  }
  std::vector<char> back(raw.size());
  const std::string raw_dir = dir + "_raw";
  if (rank == 0) std::filesystem::create_directories(raw_dir);
  dt::world_communicator()->barrier()->wait();
  const std::string raw_path = raw_dir + "/rank" + std::to_string(rank);

  const std::vector<std::function<void()>> fns = {
      [&] { raw_write(raw_path, raw.data(), raw.size()); },
      [&] { ck::save(state, dir); },
      [&] { raw_read(raw_path, back.data(), back.size()); },
      [&] { ck::load(same, dir); },
      [&] { ck::load(resharded, dir); },
  };
  const std::vector<bench::Stats> st = bench::time_interleaved(fns, warmup, iters, true);

  bool ok = std::memcmp(raw.data(), back.data(), raw.size()) == 0;
  for (size_t i = 0; i < state.size(); ++i) {
    ok = ok && dt::equal(same[i].second.to_local(), state[i].second.to_local());
    ok = ok && dt::equal(resharded[i].second.full_tensor(), state[i].second.full_tensor());
  }
  const char* names[] = {"raw_write", "save", "raw_read", "load", "load_resharded"};
  bench::print0("bench_checkpoint: %d rank(s), %.1f MB in %zu tensors (%.1f MB per rank), dir %s\n",
                world, all_bytes / 1e6, state.size(), my_bytes / 1e6, dir.c_str());
  bench::print0("%-16s %10s %14s %14s %12s\n", "op", "median s", "GB/s per rank", "GB/s aggregate",
                "vs raw");
  for (size_t i = 0; i < fns.size(); ++i) {
    const double raw_s = i <= 1 ? st[0].median : st[2].median;
    const double ratio = raw_s / st[i].median;
    bench::print0("%-16s %10.4f %14.2f %14.2f %12.2f\n", names[i], st[i].median,
                  my_bytes / st[i].median / 1e9, all_bytes / st[i].median / 1e9, ratio);
    json.write(json.record(names[i])
                   .add("ranks", world)
                   .add("bytes_per_rank", my_bytes)
                   .add("bytes_total", all_bytes)
                   .add_stats("", st[i])
                   .add("gbps_per_rank", my_bytes / st[i].median / 1e9)
                   .add("gbps_aggregate", all_bytes / st[i].median / 1e9)
                   .add("vs_raw", ratio));
  }
  bench::print0("loaded values %s\n", ok ? "match" : "DIFFER");
  dt::world_communicator()->barrier()->wait();
  if (rank == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::remove_all(raw_dir);
  }
  return ok ? 0 : 1;
}
