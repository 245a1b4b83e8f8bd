// Redistribute vs the raw MPI collective on the same communicator (nccl-tests style).
//
//   mpirun -np 4 bench_redistribute [--min-bytes 4096] [--max-bytes 67108864] [--factor 4]
//                                   [--iters N | --budget 0.5 --max-iters 50] [--warmup 1]
//                                   [--json FILE] [--only 'S(1)->R;P->R'] [--regions 0|1]
//
// For each transition and each global size (float32, geometric from --min-bytes to --max-bytes),
// (default max 64 MB: the 256 MB sweep takes many minutes on a small shared machine) times
// DTensor::redistribute and the raw MPI collective that implements it, on the mesh dim's
// MPI_Comm with preallocated buffers. Every run: a barrier before each timed iteration, the
// per-iteration time is the max over ranks, median / p10 / p90 over iterations. The DTensor
// result is checked against an independently built expectation once per size (exact: values
// are small integers). Reported: time, ratio = raw median / DTensor median (1.0 = as fast as
// raw MPI), algbw = S / t and busbw as nccl-tests defines them (all-reduce x 2(n-1)/n;
// all-gather, reduce-scatter, all-to-all x (n-1)/n), S = the global tensor size except for
// all-to-all where S = the per-rank buffer (global / n), as in nccl-tests. A second baseline
// runs the same collective through dtensor's Communicator (comm_us; dt/comm = comm / DTensor)
// to separate the backend's cost from the DTensor layer's (the backend issues the blocking
// call, as raw_us does), and raw_nb_us times the nonblocking form (MPI_Iallreduce, ...)
// finished by MPI_Wait, for comparison. The
// DTensor call and the baselines are timed interleaved (one run of each per iteration).
// --only keeps the transitions whose names are in the ';'-separated list (names hold commas).
#include <absl/strings/str_split.h>
#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "benchmarks/common/bench_common.h"
#include "dtensor/collectives/mpi/mpi_communicator.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/core/distributed_tensor.h"
#include "dtensor/core/placement.h"
#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dt = dtensor;
namespace bench = dtensor::bench;

namespace {

enum class Raw { kNone, kAllGather, kAllReduce, kReduceScatter, kAllToAll };

const char* raw_name(Raw r) {
  switch (r) {
    case Raw::kAllGather:
      return "MPI_Allgather";
    case Raw::kAllReduce:
      return "MPI_Allreduce";
    case Raw::kReduceScatter:
      return "MPI_Reduce_scatter_block";
    case Raw::kAllToAll:
      return "MPI_Alltoall";
    default:
      return "-";
  }
}

struct Case {
  std::string name;
  dt::Placements src, dst;
  int mesh_ndim;     // 1 or 2
  Raw raw;           // raw baseline
  int raw_mesh_dim;  // mesh dim whose MPI_Comm the baseline uses; -1: MPI_COMM_WORLD
};

// Global tensor [rows, kCols], value at linear index i = (i % 13) - 6 (exact in float sums).
constexpr int64_t kCols = 256;

dt::Tensor make_global(int64_t rows, float scale) {
  dt::Tensor t = dt::empty({rows, kCols}, dt::TensorOptions(dt::kFloat32));
  float* p = t.data<float>();
  for (int64_t i = 0; i < rows * kCols; ++i) p[i] = scale * float((i % 13) - 6);
  return t;
}

// Number of Partial mesh dims in `p` and the product of their sizes.
int64_t partial_factor(const dt::Placements& p, const dt::DeviceMesh& mesh) {
  int64_t f = 1;
  for (size_t d = 0; d < p.size(); ++d)
    if (p[d].is_partial()) f *= mesh.size(static_cast<int64_t>(d));
  return f;
}

// The source DTensor: every rank builds the same global x and takes its chunk; Partial(sum)
// mesh dims are realised by giving each rank the value x (so the logical value is x * size).
dt::DTensor make_source(const dt::Tensor& x, const dt::DeviceMesh& mesh,
                        const dt::Placements& src) {
  dt::Placements no_partial = src;
  for (auto& p : no_partial)
    if (p.is_partial()) p = dt::Replicate();
  dt::DTensor r = dt::distribute_tensor(x, mesh, no_partial, std::nullopt);
  return dt::DTensor::from_local(r.to_local(), mesh, src, false, x.shape());
}

bool same_bytes(const dt::Tensor& a, const dt::Tensor& b) {
  if (a.shape() != b.shape()) return false;
  const dt::Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.nbytes() == 0 || std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

MPI_Comm comm_of(const dt::DeviceMesh& mesh, int dim) {
  if (dim < 0) return MPI_COMM_WORLD;
  auto* m = dynamic_cast<dt::MpiCommunicator*>(mesh.communicator(dim).get());
  return m != nullptr ? m->mpi_comm() : MPI_COMM_NULL;
}

}  // namespace

int run(int argc, char** argv) {
  bench::Flags flags(argc, argv);
  const int64_t min_bytes = flags.i64("min-bytes", 4096);
  const int64_t max_bytes = flags.i64("max-bytes", int64_t{64} << 20);
  const int64_t factor = std::max<int64_t>(2, flags.i64("factor", 4));
  const int64_t warmup = flags.i64("warmup", 1);
  const int64_t fixed_iters = flags.i64("iters", 0);
  const int64_t max_iters = flags.i64("max-iters", 50);
  const double budget = flags.f64("budget", 0.5);
  // --regions 0: the MPI backend packs strided pieces into blocks (the CUDA path) instead of
  // placing them with derived datatypes, to compare the two.
  dt::MpiCommunicator::set_regions_enabled(flags.i64("regions", 1) != 0);
  bench::JsonLines json("bench_redistribute", flags.str("json", ""));
  const int world = dt::world_size();

  dt::DeviceMesh mesh1 = dt::init_device_mesh(dt::kCPU, {world}, {"x"});
  dt::DeviceMesh mesh2;
  const bool two_d = world == 4;
  if (two_d) mesh2 = dt::init_device_mesh(dt::kCPU, {2, 2}, {"dp", "tp"});

  using dt::Partial, dt::Replicate, dt::Shard;
  std::vector<Case> cases = {
      {"S(0)->R", {Shard(0)}, {Replicate()}, 1, Raw::kAllGather, 0},
      {"S(1)->R", {Shard(1)}, {Replicate()}, 1, Raw::kAllGather, 0},
      {"P->R", {Partial()}, {Replicate()}, 1, Raw::kAllReduce, 0},
      {"P->S(0)", {Partial()}, {Shard(0)}, 1, Raw::kReduceScatter, 0},
      {"S(0)->S(1)", {Shard(0)}, {Shard(1)}, 1, Raw::kAllToAll, 0},
      {"R->S(0)", {Replicate()}, {Shard(0)}, 1, Raw::kNone, 0},
  };
  if (two_d) {
    cases.push_back({"2d [S(0),R]->[R,R]",
                     {Shard(0), Replicate()},
                     {Replicate(), Replicate()},
                     2,
                     Raw::kAllGather,
                     0});
    cases.push_back({"2d [R,P]->[R,R]",
                     {Replicate(), Partial()},
                     {Replicate(), Replicate()},
                     2,
                     Raw::kAllReduce,
                     1});
    cases.push_back({"2d [S(0),S(1)]->[R,R]",
                     {Shard(0), Shard(1)},
                     {Replicate(), Replicate()},
                     2,
                     Raw::kAllGather,
                     -1});
    cases.push_back({"2d [P,P]->[R,R]",
                     {Partial(), Partial()},
                     {Replicate(), Replicate()},
                     2,
                     Raw::kAllReduce,
                     -1});
    cases.push_back({"2d [S(0),S(0)]->[S(1),S(1)]",
                     {Shard(0), Shard(0)},
                     {Shard(1), Shard(1)},
                     2,
                     Raw::kAllToAll,
                     -1});
  }

  if (flags.has("only")) {
    const std::vector<std::string> only = absl::StrSplit(flags.str("only", ""), ';');
    std::erase_if(cases, [&](const Case& c) {
      return std::find(only.begin(), only.end(), c.name) == only.end();
    });
  }
  bench::print0(
      "# bench_redistribute: %d ranks, float32, global [rows, %lld]; time = median of the\n"
      "# per-iteration max over ranks; ratio = raw / dtensor (1.0 = as fast as raw MPI);\n"
      "# bus bandwidth as in nccl-tests. Results: %s\n",
      world, static_cast<long long>(kCols), json.path().c_str());
  bench::print0("%-28s %10s %6s %11s %11s %11s %11s %11s %7s %7s %8s %8s %9s %5s\n", "transition",
                "bytes", "iters", "dt_us", "dt_p90_us", "raw_us", "raw_nb_us", "comm_us", "ratio",
                "dt/comm", "algbw", "busbw", "raw_busbw", "check");
  bool all_ok = true;
  for (const Case& c : cases) {
    const dt::DeviceMesh& mesh = c.mesh_ndim == 1 ? mesh1 : mesh2;
    const MPI_Comm rc = comm_of(mesh, c.raw_mesh_dim);
    int n = 1;
    MPI_Comm_size(rc, &n);
    for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= factor) {
      const int64_t numel = bytes / 4;
      const int64_t rows = numel / kCols;
      if (rows < mesh.size()) continue;  // at least one row per rank
      const dt::Tensor x = make_global(rows, 1.0f);
      const dt::DTensor src = make_source(x, mesh, c.src);
      const dt::Placements dst = c.dst;

      // Correctness: the target's local shard equals the chunk of the expected global value.
      const dt::DTensor out = src.redistribute(mesh, dst);
      const float scale = float(partial_factor(c.src, mesh)) / float(partial_factor(dst, mesh));
      const dt::Tensor want =
          dt::distribute_tensor(make_global(rows, scale), mesh, dst, std::nullopt).to_local();
      int ok = same_bytes(out.to_local(), want) ? 1 : 0;
      MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
      all_ok = all_ok && ok;

      // Iterations: what fits in --budget seconds per measurement (5..--max-iters), taken from
      // one timed DTensor run, so the slow sizes do not dominate the runtime; --iters fixes it.
      const std::function<void()> dt_fn = [&] { (void)src.redistribute(mesh, dst); };
      const int64_t iters = fixed_iters > 0
                                ? fixed_iters
                                : bench::iters_for_budget(dt_fn, budget, 5, max_iters, true);

      // Raw collective on preallocated buffers. DTensor and the baselines are timed
      // interleaved (one run of each per iteration) so load drift hits them alike.
      bench::Stats dts, raws, comms, nbs;
      double s_bytes = double(bytes);  // nccl-tests "size"
      double bus_factor = double(n - 1) / double(n);
      if (c.raw != Raw::kNone) {
        const int64_t local = numel / n;
        std::vector<float> in(
            static_cast<size_t>(c.raw == Raw::kAllReduce || c.raw == Raw::kReduceScatter ? numel
                                                                                         : local),
            1.0f);
        std::vector<float> outb(
            static_cast<size_t>(c.raw == Raw::kAllGather || c.raw == Raw::kAllReduce ? numel
                                                                                     : local),
            0.0f);
        std::function<void()> fn;
        switch (c.raw) {
          case Raw::kAllGather:
            fn = [&] {
              MPI_Allgather(in.data(), int(local), MPI_FLOAT, outb.data(), int(local), MPI_FLOAT,
                            rc);
            };
            break;
          case Raw::kAllReduce:
            bus_factor = 2.0 * double(n - 1) / double(n);
            fn = [&] { MPI_Allreduce(in.data(), outb.data(), int(numel), MPI_FLOAT, MPI_SUM, rc); };
            break;
          case Raw::kReduceScatter:
            fn = [&] {
              MPI_Reduce_scatter_block(in.data(), outb.data(), int(local), MPI_FLOAT, MPI_SUM, rc);
            };
            break;
          case Raw::kAllToAll:
            s_bytes = double(local) * 4;
            fn = [&] {
              MPI_Alltoall(in.data(), int(local / n), MPI_FLOAT, outb.data(), int(local / n),
                           MPI_FLOAT, rc);
            };
            break;
          default:
            break;
        }

        // The nonblocking form (MPI_I* + MPI_Wait), for comparison with the blocking one the
        // backend issues.
        std::function<void()> nbfn;
        MPI_Request req;
        switch (c.raw) {
          case Raw::kAllGather:
            nbfn = [&] {
              MPI_Iallgather(in.data(), int(local), MPI_FLOAT, outb.data(), int(local), MPI_FLOAT,
                             rc, &req);
              MPI_Wait(&req, MPI_STATUS_IGNORE);
            };
            break;
          case Raw::kAllReduce:
            nbfn = [&] {
              MPI_Iallreduce(in.data(), outb.data(), int(numel), MPI_FLOAT, MPI_SUM, rc, &req);
              MPI_Wait(&req, MPI_STATUS_IGNORE);
            };
            break;
          case Raw::kReduceScatter:
            nbfn = [&] {
              MPI_Ireduce_scatter_block(in.data(), outb.data(), int(local), MPI_FLOAT, MPI_SUM, rc,
                                        &req);
              MPI_Wait(&req, MPI_STATUS_IGNORE);
            };
            break;
          case Raw::kAllToAll:
            nbfn = [&] {
              MPI_Ialltoall(in.data(), int(local / n), MPI_FLOAT, outb.data(), int(local / n),
                            MPI_FLOAT, rc, &req);
              MPI_Wait(&req, MPI_STATUS_IGNORE);
            };
            break;
          default:
            break;
        }

        // The same collective through dtensor's Communicator (the backend redistribute uses),
        // to separate the backend's cost from the DTensor layer's.
        const dt::CommunicatorPtr comm =
            c.raw_mesh_dim < 0 ? dt::world_communicator() : mesh.communicator(c.raw_mesh_dim);
        const dt::TensorOptions f32(dt::kFloat32);
        const dt::Tensor tin = dt::full({int64_t(in.size())}, 1.0, f32);
        const dt::Tensor tout = dt::zeros({int64_t(outb.size())}, f32);
        std::function<void()> cfn;
        switch (c.raw) {
          case Raw::kAllGather:
            cfn = [&] { comm->all_gather(tout, tin)->wait(); };
            break;
          case Raw::kAllReduce:
            cfn = [&] { comm->all_reduce(tin, dt::ReduceOp::kSum)->wait(); };
            break;
          case Raw::kReduceScatter:
            cfn = [&] { comm->reduce_scatter(tout, tin, dt::ReduceOp::kSum)->wait(); };
            break;
          case Raw::kAllToAll:
            cfn = [&] { comm->all_to_all(tout, tin)->wait(); };
            break;
          default:
            break;
        }
        const auto st = bench::time_interleaved({dt_fn, fn, nbfn, cfn}, warmup, iters, true);
        dts = st[0];
        raws = st[1];
        nbs = st[2];
        comms = st[3];
      } else {
        dts = bench::time_runs(dt_fn, warmup, iters, true);
      }
      const double algbw = s_bytes / dts.median / 1e9;
      const double busbw = algbw * bus_factor;
      const double raw_busbw = c.raw != Raw::kNone ? s_bytes / raws.median / 1e9 * bus_factor : 0.0;
      const double ratio = c.raw != Raw::kNone ? raws.median / dts.median : 0.0;
      const bool has_raw = c.raw != Raw::kNone;
      const double comm_ratio = has_raw ? comms.median / dts.median : 0.0;
      bench::print0(
          "%-28s %10lld %6lld %11.1f %11.1f %11.1f %11.1f %11.1f %7.3f %7.3f %8.3f %8.3f %9.3f "
          "%5s\n",
          c.name.c_str(), static_cast<long long>(bytes), static_cast<long long>(iters),
          dts.median * 1e6, dts.p90 * 1e6, has_raw ? raws.median * 1e6 : 0.0,
          has_raw ? nbs.median * 1e6 : 0.0, has_raw ? comms.median * 1e6 : 0.0, ratio, comm_ratio,
          has_raw ? algbw : 0.0, has_raw ? busbw : 0.0, raw_busbw, ok ? "ok" : "FAIL");
      auto rec = json.record(c.name);
      rec.add("ranks", world)
          .add("mesh", mesh.str())
          .add("src", dt::placements_str(c.src))
          .add("dst", dt::placements_str(dst))
          .add("bytes", bytes)
          .add("iters", iters)
          .add_stats("", dts)
          .add("baseline", raw_name(c.raw))
          .add("algbw_GBps", has_raw ? algbw : 0.0)
          .add("busbw_GBps", c.raw != Raw::kNone ? busbw : 0.0)
          .add("correct", ok != 0);
      if (c.raw != Raw::kNone) {
        rec.add_stats("baseline", raws)
            .add("baseline_busbw_GBps", raw_busbw)
            .add("ratio_vs_baseline", ratio)
            .add_stats("comm", comms)
            .add_stats("raw_nonblocking", nbs)
            .add("ratio_vs_comm", comm_ratio);
      }
      json.write(rec);
    }
  }
  bench::print0("# correctness: %s\n", all_ok ? "all ok" : "FAILURES (see check column)");
  return all_ok ? 0 : 1;
}

int main(int argc, char** argv) {
  dt::Runtime runtime(&argc, &argv);
  try {
    return run(argc, argv);
  } catch (const dt::Error& e) {
    std::fprintf(stderr, "rank %d: %s\n", bench::rank(), e.what());
    return 1;
  }
}
