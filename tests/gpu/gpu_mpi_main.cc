// main() for mpirun-launched CUDA suites (label gpu).
//
// The ranks first agree (MPI_Allreduce, MIN) on whether every one of them sees a CUDA device; if
// any does not, EVERY rank exits with 77, which ctest reports as skipped (never as passed).
// Otherwise the shared mpirun main runs the suite: tests/mpi_main.cc, compiled for these suites
// with its main renamed to dtensor_mpi_suite_main (see CMakeLists.txt). Its Runtime finds MPI
// initialised by the one here; MPI is finalised when the inner Runtime ends.
#include <mpi.h>

#include <cstdio>

#include "collectives/runtime.h"
#include "tensor/storage.h"

int dtensor_mpi_suite_main(int argc, char** argv);

int main(int argc, char** argv) {
  dtensor::Runtime runtime(&argc, &argv);
  int have_device = dtensor::cuda_device_count() > 0 ? 1 : 0;
  int all_have_device = 0;
  MPI_Allreduce(&have_device, &all_have_device, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all_have_device) {
    if (dtensor::world_rank() == 0) std::printf("no CUDA device on some rank: skipped\n");
    return 77;
  }
  return dtensor_mpi_suite_main(argc, argv);
}
