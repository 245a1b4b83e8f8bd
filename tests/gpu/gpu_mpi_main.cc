// main() for mpirun-launched CUDA suites (label gpu).
//
// The ranks first agree (MPI_Allreduce, MIN) on whether every one of them sees a CUDA device; if
// any does not, EVERY rank exits with 77, which ctest reports as skipped (never as passed).
// Otherwise the shared mpirun suite runner runs the tests: tests/mpi_main.cc, compiled for these
// suites without its main (DTENSOR_MPI_SUITE_NO_MAIN, see CMakeLists.txt), under the one Runtime
// constructed here (a process holds exactly one).
#include <mpi.h>

#include <cstdio>

#include "dtensor/collectives/runtime.h"
#include "dtensor/tensor/storage.h"

int dtensor_run_mpi_suite(int argc, char** argv);

int main(int argc, char** argv) {
  dtensor::Runtime runtime(&argc, &argv);
  int have_device = dtensor::cuda_device_count() > 0 ? 1 : 0;
  int all_have_device = 0;
  MPI_Allreduce(&have_device, &all_have_device, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all_have_device) {
    if (dtensor::world_rank() == 0) std::printf("no CUDA device on some rank: skipped\n");
    return 77;
  }
  return dtensor_run_mpi_suite(argc, argv);
}
