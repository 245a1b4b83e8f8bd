// Process-level bootstrap: MPI init/finalize, the world communicator, CUDA device choice.
#pragma once

#include "collectives/communicator.h"

namespace dtensor {

// RAII owner of the MPI runtime. Construct once at the top of main():
//   dtensor::Runtime rt(&argc, &argv);
// MPI_Init_thread (MPI_THREAD_MULTIPLE requested, at least FUNNELED required) / MPI_Finalize.
// With CUDA compiled in and a GPU present it selects device (local rank % device count).
// A plain run without mpirun is a world of size 1. If MPI is already initialised (by the
// application) the Runtime neither initialises nor finalises it. Without any Runtime, the
// functions below initialise MPI on first use and finalise it at exit.
class Runtime {
 public:
  Runtime(int* argc, char*** argv);
  Runtime() : Runtime(nullptr, nullptr) {}
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  static bool initialized();
};

int world_rank();
int world_size();
// Rank among the processes on this node (OMPI_COMM_WORLD_LOCAL_RANK / MPI shared split).
int local_rank();
// The MPI communicator over all ranks (CPU tensors, CUDA tensors by staging).
CommunicatorPtr world_communicator();
// A communicator over all ranks for `device_type`: MPI for the CPU, NCCL for CUDA when
// compiled in (otherwise MPI with staging). Created once and cached.
CommunicatorPtr world_communicator(DeviceType device_type);
// A sub-communicator of the world for `device_type`: world_communicator(device_type)->split(
// color, key) (MPI_Comm_split semantics; color < 0 gives nullptr on that rank). Collective over
// the world. This is how the device mesh builds one communicator per mesh dimension.
CommunicatorPtr split_world(DeviceType device_type, int color, int key);
// A new single-rank communicator holding only this process (MPI_COMM_SELF; a 1-rank NCCL
// communicator for CUDA when compiled in). Not collective: the device mesh uses it for mesh
// dims of size 1, so a mesh of just this process can be built by each rank on its own.
CommunicatorPtr self_communicator(DeviceType device_type);

}  // namespace dtensor
