// Dead-peer probe: the last rank drops out right before a redistribute that needs it, the
// others go ahead. Modes (argv[1]):
//   exit   the last rank leaves with std::_Exit(0) (no MPI_Finalize: a crashed or killed peer)
//   hang   the last rank sleeps (a peer stuck elsewhere, alive but absent)
// Run under mpirun -np N (N >= 2) with DTENSOR_COLLECTIVE_TIMEOUT=3: the surviving ranks must
// end within the deadline, the job's exit status must be non-zero, and the output must name the
// collective and the ranks (expect_job_ends.sh checks this). Reaching the end of main() on a
// surviving rank is a failure (exit 0 would be wrong; exit 1 with a message).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "dtensor/collectives/runtime.h"
#include "dtensor/core/distributed_tensor.h"
#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/tensor/creation.h"

int main(int argc, char** argv) {
  dtensor::Runtime rt(&argc, &argv);
  const std::string mode = argc > 1 ? argv[1] : "exit";
  const int world = dtensor::world_size();
  const int rank = dtensor::world_rank();
  if (world < 2) {
    std::fprintf(stderr, "dead_peer_probe needs at least 2 ranks\n");
    return 77;
  }
  const dtensor::DeviceMesh mesh = dtensor::init_device_mesh(dtensor::kCPU, {world}, {"probe"});
  const dtensor::Tensor x = dtensor::ones({4 * world + 1, 3});
  const dtensor::DTensor d = dtensor::distribute_tensor(x, mesh, {dtensor::Shard(0)});
  // Everyone is alive up to here: one healthy redistribute first.
  (void)d.redistribute(mesh, {dtensor::Replicate()});
  if (rank == world - 1) {
    std::fprintf(stderr, "dead_peer_probe: rank %d drops out (%s)\n", rank, mode.c_str());
    std::fflush(stderr);
    if (mode == "exit") std::_Exit(0);
    std::this_thread::sleep_for(std::chrono::seconds(60));
    std::fprintf(stderr, "dead_peer_probe: rank %d still alive after 60 s\n", rank);
    return 1;
  }
  // S(0) -> R: an all-gather over mesh dim 0 that the last rank never joins.
  const dtensor::DTensor r = d.redistribute(mesh, {dtensor::Replicate()});
  std::fprintf(stderr, "dead_peer_probe: rank %d: redistribute returned without rank %d (%s)\n",
               rank, world - 1, r.str().c_str());
  return 1;
}
