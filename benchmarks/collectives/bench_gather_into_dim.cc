// Gather along dim 1 of a [rows, 256] float32 tensor (S(1)->R's collective), three ways,
// interleaved so that drifting machine load hits all alike (time = median over samples of the
// max over ranks):
//   raw      MPI_Allgather of the contiguous pieces into [n, rows, 256 / n] (no placement: the
//            lower bound the redistribute targets are stated against);
//   copy     Communicator::all_gather into that buffer, then each block copied into its
//            column range of a fresh [rows, 256] output (the executor's former path);
//   into     Communicator::all_gather_into_dim straight into a fresh [rows, 256] output.
// Both dtensor results are checked against each other.
//
//   mpirun -np 4 bench_gather_into_dim [--min-bytes 1048576] [--max-bytes 16777216]
//                                      [--samples 15] [--json path]
#include <mpi.h>

#include <cstdio>
#include <functional>
#include <vector>

#include "benchmarks/common/bench_common.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/mpi/mpi_communicator.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/tensor/creation.h"

namespace dt = dtensor;
namespace bench = dtensor::bench;

int main(int argc, char** argv) {
  dt::Runtime runtime(&argc, &argv);
  const bench::Flags flags(argc, argv);
  const int64_t min_bytes = flags.i64("min-bytes", 1 << 20);
  const int64_t max_bytes = flags.i64("max-bytes", 16 << 20);
  const int64_t samples = flags.i64("samples", 15);
  bench::JsonLines json("gather_into_dim", flags.str("json", ""));
  auto comm = dt::world_communicator();
  const MPI_Comm raw = dynamic_cast<dt::MpiCommunicator&>(*comm).mpi_comm();
  const int n = comm->size();
  constexpr int64_t kCols = 256;
  const int64_t w = kCols / n;
  bool all_ok = true;
  bench::print0("gather along dim 1 of [rows, %lld] float32, %d ranks (us, max over ranks)\n",
                static_cast<long long>(kCols), n);
  bench::print0("%10s %10s %10s %10s %10s %10s\n", "bytes", "raw", "copy", "into", "copy/raw",
                "into/raw");
  for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    const int64_t rows = bytes / 4 / kCols;
    dt::Tensor in = dt::full({rows, w}, static_cast<float>(comm->rank()));
    dt::Tensor buffer = dt::empty({n, rows, w});
    dt::Tensor copied, placed;
    std::vector<int64_t> sizes(static_cast<size_t>(n), w);
    std::vector<std::function<void()>> fns = {
        [&] {
          MPI_Allgather(in.data_ptr(), static_cast<int>(rows * w), MPI_FLOAT, buffer.data_ptr(),
                        static_cast<int>(rows * w), MPI_FLOAT, raw);
        },
        [&] {
          comm->all_gather(buffer, in)->wait();
          copied = dt::empty({rows, kCols});
          for (int r = 0; r < n; ++r) copied.narrow(1, r * w, w).copy_(buffer.select(0, r));
        },
        [&] {
          placed = dt::empty({rows, kCols});
          comm->all_gather_into_dim(placed, in, 1, sizes)->wait();
        }};
    const std::vector<bench::Stats> st = bench::time_interleaved(fns, 1, samples, true);
    const bool ok = copied.to_vector<float>() == placed.to_vector<float>();
    all_ok = all_ok && ok;
    auto us = [&](size_t j) { return st[j].median * 1e6; };
    bench::print0("%10lld %10.1f %10.1f %10.1f %10.3f %10.3f%s\n", static_cast<long long>(bytes),
                  us(0), us(1), us(2), us(1) / us(0), us(2) / us(0), ok ? "" : "  WRONG RESULT");
    auto rec = json.record("S(1)->R gather");
    rec.add("ranks", n).add("bytes", bytes).add("ok", ok);
    rec.add("raw_us", us(0)).add("copy_us", us(1)).add("into_us", us(2));
    json.write(rec);
  }
  return all_ok ? 0 : 1;
}
