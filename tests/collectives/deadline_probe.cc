// Deadline probe: rank 1 skips an all_reduce that rank 0 issues. Run under mpirun -np 2 with
// DTENSOR_COLLECTIVE_TIMEOUT=2: rank 0's call must end the whole job (non-zero exit) with a
// message naming the collective, the communicator, its ranks and the tensor. expect_deadline.sh
// checks exactly that.
#include <chrono>
#include <cstdio>
#include <thread>

#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/tensor/creation.h"

int main(int argc, char** argv) {
  dtensor::Runtime rt(&argc, &argv);
  auto comm = dtensor::world_communicator();
  comm->set_description("mesh dim 0 (probe)");
  if (comm->size() < 2) {
    std::fprintf(stderr, "deadline_probe needs at least 2 ranks\n");
    return 77;
  }
  if (comm->rank() != 1) {
    dtensor::Tensor t = dtensor::ones({4, 3});
    comm->all_reduce(t, dtensor::ReduceOp::kSum)->wait();  // never completes
    std::fprintf(stderr, "rank %d: all_reduce returned although rank 1 skipped it\n", comm->rank());
    return 0;
  }
  // Rank 1 does something else for longer than any sane deadline; it is killed by the abort.
  std::this_thread::sleep_for(std::chrono::seconds(45));
  std::fprintf(stderr, "rank 1: still alive after 45 s: the deadline did not end the job\n");
  return 0;
}
