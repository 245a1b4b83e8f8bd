// A user-registered op on DTensors (examples/l2_normalize_op.h): registered once, then called
// like any library op on every layout. Checks, on a 1-D mesh of all ranks, that the op on a
// row-sharded input needs no communication, that on a column-sharded input the engine
// redistributes so that the normalised dim is whole, and that both results and their gradients
// equal the op on the replicated tensor. Exits non-zero when a check fails.
//
//   mpirun -np 4 ./custom_op [--rows 10] [--cols 7]
#include <dtensor/dtensor.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "l2_normalize_op.h"

namespace dt = dtensor;

namespace {

struct Result {
  dt::Tensor y, grad;
  std::string comms;        // the forward's collectives, as CommDebugMode prints them
  int64_t collectives = 0;  // how many
};

// y = l2_normalize(x laid out as `placements`, dim 1) and d(sum(y * w))/dx, both gathered.
Result run(const dt::Tensor& x, const dt::Tensor& w, const dt::DeviceMesh& mesh,
           dt::Placement placement) {
  const dt::Placements placements{placement};
  dt::DTensor xd = dt::distribute_tensor(x, mesh, placements);
  xd.requires_grad_();
  const dt::DTensor wd = dt::distribute_tensor(w, mesh, placements);
  Result r;
  dt::DTensor y;
  {
    dt::CommDebugMode comm;
    y = l2_example::l2_normalize(xd, /*dim=*/1);
    r.comms = comm.str();
    r.collectives = comm.total_count();
  }
  dt::sum(y * wd).backward();
  r.y = y.full_tensor();
  r.grad = xd.grad().full_tensor();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t rows = 10, cols = 7;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "--help" || f == "-h") {
      std::printf(
          "usage: custom_op [--rows N] [--cols N]\n"
          "  registers a user op (l2_normalize, examples/l2_normalize_op.h) and checks it on a\n"
          "  1-D mesh of all ranks (mpirun -np 4 ./custom_op): row- and column-sharded inputs,\n"
          "  results and gradients against the replicated tensor.\n");
      return 0;
    }
    if ((f == "--rows" || f == "--cols") && i + 1 < argc) {
      (f == "--rows" ? rows : cols) = std::atoll(argv[++i]);
    } else {
      std::fprintf(stderr, "custom_op: unknown argument '%s' (see --help)\n", f.c_str());
      return 2;
    }
  }
  dt::Runtime runtime(&argc, &argv);
  try {
    const int world = dt::world_size();
    dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {world}, {"x"});
    dt::Generator gen(3);  // the same tensors on every rank
    const dt::Tensor x = dt::randn({rows, cols}, dt::TensorOptions(dt::kFloat64), &gen);
    const dt::Tensor w = dt::randn({rows, cols}, dt::TensorOptions(dt::kFloat64), &gen);

    const Result ref = run(x, w, mesh, dt::Replicate());
    const Result by_rows = run(x, w, mesh, dt::Shard(0));
    const Result by_cols = run(x, w, mesh, dt::Shard(1));
    bool ok = true;
    for (const auto& [name, r] : {std::pair<const char*, const Result&>{"Shard(0)", by_rows},
                                  std::pair<const char*, const Result&>{"Shard(1)", by_cols}}) {
      const double dy = dt::max_abs_diff(r.y, ref.y), dg = dt::max_abs_diff(r.grad, ref.grad);
      const bool good = dy <= 1e-12 && dg <= 1e-12;
      ok = ok && good;
      if (dt::world_rank() == 0) {
        std::printf(
            "l2_normalize on %s: collectives [%s], max |diff| vs replicated: y %.3g, "
            "grad %.3g -> %s\n",
            name, r.collectives == 0 ? "none" : r.comms.c_str(), dy, dg, good ? "OK" : "MISMATCH");
      }
    }
    // Row shards hold whole rows: no collective may run. Column shards split the normalised
    // dim: with more than one rank the engine must redistribute (it picks the cheapest way to
    // make rows whole: an all-to-all to Shard(0), not an all-gather).
    if (by_rows.collectives != 0) ok = false;
    if (world > 1 && by_cols.collectives == 0) ok = false;
    if (dt::world_rank() == 0) std::printf("%s\n", ok ? "custom op: OK" : "custom op: FAILED");
    return ok ? 0 : 1;
  } catch (const dt::Error& e) {
    std::fprintf(stderr, "rank %d: %s\n", dt::world_rank(), e.what());
    return 1;
  }
}
