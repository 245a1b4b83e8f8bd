// Cost of the collective consistency check (dtensor/collectives/communicator.h) on small
// collectives: the same Communicator call timed with the check off (DTENSOR_CHECK_COLLECTIVES=0)
// and on, next to the raw MPI call on the same MPI_Comm (the blocking form, as the backend issues
// it). Interleaved (off, check, raw, off, ...) so that drifting machine load hits all alike; each
// sample is a batch of back-to-back collectives after a barrier; time = median over samples of the
// max over ranks, per collective. Every result is checked.
//
//   mpirun -np 4 bench_collective_check [--min-bytes 4] [--max-bytes 65536] [--batch 50]
//                                       [--samples 60] [--json path]
#include <mpi.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "benchmarks/common/bench_common.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/mpi/mpi_communicator.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/tensor/creation.h"

namespace dt = dtensor;
namespace bench = dtensor::bench;

namespace {

const char* kModeNames[] = {"off", "check"};
const dt::CollectiveCheckMode kModes[] = {dt::CollectiveCheckMode::kOff,
                                          dt::CollectiveCheckMode::kOn};

}  // namespace

int main(int argc, char** argv) {
  dt::Runtime runtime(&argc, &argv);
  const bench::Flags flags(argc, argv);
  const int64_t min_bytes = flags.i64("min-bytes", 4);
  const int64_t max_bytes = flags.i64("max-bytes", 65536);
  const int64_t batch = flags.i64("batch", 50);
  const int64_t samples = flags.i64("samples", 60);
  bench::JsonLines json("collective_check", flags.str("json", ""));

  auto comm = dt::world_communicator()->split(0, dt::world_rank());
  comm->set_description("bench");
  const MPI_Comm raw = dynamic_cast<dt::MpiCommunicator&>(*comm).mpi_comm();
  const int n = comm->size();
  bool all_ok = true;

  bench::print0(
      "collective consistency check cost, %d ranks, %d per batch, median of %d batches "
      "(us per collective, max over ranks)\n",
      n, static_cast<int>(batch), static_cast<int>(samples));
  bench::print0("%-10s %8s %9s %9s %9s %10s %10s\n", "op", "bytes", "raw MPI", "off", "check",
                "check-off", "check/off");
  for (const std::string op : {"all_reduce", "all_gather", "broadcast"}) {
    for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
      const int64_t count = std::max<int64_t>(1, bytes / 4);
      dt::Tensor in = dt::full({count}, 1.0f);
      dt::Tensor out = dt::empty({op == "all_gather" ? count * n : count});
      std::function<void()> issue;
      std::function<void()> raw_call;
      if (op == "all_reduce") {
        issue = [&] { comm->all_reduce(out, in, dt::ReduceOp::kSum)->wait(); };
        raw_call = [&] {
          MPI_Allreduce(in.data_ptr(), out.data_ptr(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                        raw);
        };
      } else if (op == "all_gather") {
        issue = [&] { comm->all_gather(out, in)->wait(); };
        raw_call = [&] {
          MPI_Allgather(in.data_ptr(), static_cast<int>(count), MPI_FLOAT, out.data_ptr(),
                        static_cast<int>(count), MPI_FLOAT, raw);
        };
      } else {
        issue = [&] { comm->broadcast(out, 0)->wait(); };
        raw_call = [&] { MPI_Bcast(out.data_ptr(), static_cast<int>(count), MPI_FLOAT, 0, raw); };
      }
      std::vector<std::function<void()>> fns;
      for (dt::CollectiveCheckMode mode : kModes) {
        fns.push_back([&, mode] {
          dt::set_collective_check_mode(mode);
          for (int64_t i = 0; i < batch; ++i) issue();
        });
      }
      fns.push_back([&] {
        for (int64_t i = 0; i < batch; ++i) raw_call();
      });
      const std::vector<bench::Stats> st = bench::time_interleaved(fns, 2, samples, true);
      // Check every mode's result: for broadcast the root holds 1 and the others 0 first.
      const float want = op == "all_reduce" ? static_cast<float>(n) : 1.0f;
      bool ok = true;
      for (int m = 0; m < 3; ++m) {
        if (m < 2) dt::set_collective_check_mode(kModes[m]);
        out.fill_(op == "broadcast" && comm->rank() != 0 ? 0.0f : 1.0f);
        (m < 2 ? issue : raw_call)();
        for (float v : out.to_vector<float>()) ok = ok && v == want;
      }
      dt::set_collective_check_mode(dt::CollectiveCheckMode::kOn);
      all_ok = all_ok && ok;
      auto us = [&](size_t j) { return st[j].median / static_cast<double>(batch) * 1e6; };
      bench::print0("%-10s %8lld %9.2f %9.2f %9.2f %10.2f %10.3f%s\n", op.c_str(),
                    static_cast<long long>(count * 4), us(2), us(0), us(1), us(1) - us(0),
                    us(1) / us(0), ok ? "" : "  WRONG RESULT");
      auto rec = json.record(op);
      rec.add("ranks", n).add("bytes", count * 4).add("batch", batch).add("ok", ok);
      rec.add("raw_us", us(2));
      for (size_t j = 0; j < 2; ++j) rec.add(std::string(kModeNames[j]) + "_us", us(j));
      rec.add("check_over_off", us(1) / us(0));
      json.write(rec);
    }
  }
  return all_ok ? 0 : 1;
}
