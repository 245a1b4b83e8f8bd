// Process-level bootstrap: MPI init/finalize, the world communicator, CUDA device choice.
#pragma once

#include <string_view>

#include "dtensor/collectives/communicator.h"

namespace dtensor {

// RAII owner of the MPI runtime. Construct once at the top of main():
//   dtensor::Runtime rt(&argc, &argv);
// MPI_Init_thread (MPI_THREAD_MULTIPLE requested, at least FUNNELED required) / MPI_Finalize.
// With CUDA compiled in and a GPU present it selects device (local rank % device count).
// A plain run without mpirun is a world of size 1. If MPI is already initialised (by the
// application) the Runtime neither initialises nor finalises it. Without any Runtime, the
// functions below initialise MPI on first use and finalise it at exit.
//
// Lifecycle rules (each violation raises dtensor::Error instead of aborting inside MPI):
// one Runtime at a time ("[Runtime] a dtensor::Runtime already exists"); no Runtime, and no
// call that needs MPI (world_rank, a collective, building a DeviceMesh, ...), after MPI was
// finalized ("[...] MPI is finalized"). Work still in flight when the Runtime ends is completed
// before MPI_Finalize, so waiting on (or dropping) it afterwards is safe. When dtensor
// initialises MPI it sets MPI_ERRORS_RETURN on MPI_COMM_WORLD and MPI_COMM_SELF.
class Runtime {
 public:
  // Initialises MPI (MPI_Init_thread with argc/argv, or none), reads DTENSOR_LOG and picks the
  // CUDA device by local rank.
  Runtime(int* argc, char*** argv);
  Runtime() : Runtime(nullptr, nullptr) {}
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Whether MPI is initialised and not finalised, or the fake backend runs
  // (dtensor/collectives/fake_communicator.h: no MPI, but world_rank() and collectives work).
  static bool initialized();
};

// This process's rank in MPI_COMM_WORLD, and the number of ranks.
int world_rank();
int world_size();
// Rank among the processes on this node (OMPI_COMM_WORLD_LOCAL_RANK / MPI shared split).
int local_rank();
// The MPI communicator over all ranks (CPU tensors, CUDA tensors by staging).
CommunicatorPtr world_communicator();
// A communicator over all ranks for `device_type`, created once and cached: MPI for the CPU; for
// CUDA the backend chosen by the CUDA backend rule below. Collective the first time.
//
// CUDA backend rule. The environment variable DTENSOR_CUDA_BACKEND selects it:
//   unset or empty: auto. NCCL when it is compiled in, a CUDA device is visible and every rank
//     on each node has a device of its own (node-local ranks, counted with
//     MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), <= visible devices; rank r uses device
//     local_rank() % count), on every node; otherwise the MPI backend, which stages CUDA
//     tensors through pinned host memory (so several ranks may share one GPU).
//   "nccl": NCCL; throws dtensor::Error when NCCL is not compiled in, no device is visible or
//     ranks would share a device.
//   "mpi": the MPI backend with staging.
// Every rank reaches the same decision: the "NCCL possible" flag (and the requested value) are
// agreed with one MPI_Allreduce while the world CUDA communicator is created. An unknown value,
// or a value that differs between ranks, throws dtensor::Error naming the variable, the value and
// the allowed values, on every rank. Nothing is cached after an error.
CommunicatorPtr world_communicator(DeviceType device_type);
// A sub-communicator of the world for `device_type`: world_communicator(device_type)->split(
// color, key) (MPI_Comm_split semantics; color < 0 gives nullptr on that rank). Collective over
// the world. This is how the device mesh builds one communicator per mesh dimension.
CommunicatorPtr split_world(DeviceType device_type, int color, int key);
// A new single-rank communicator holding only this process (MPI_COMM_SELF). Not collective: the
// device mesh uses it for mesh dims of size 1, so a mesh of just this process can be built by
// each rank on its own. For CUDA: a 1-rank NCCL communicator when NCCL is compiled in, a device
// is visible and DTENSOR_CUDA_BACKEND is not "mpi" (a 1-rank communicator needs no device of its
// own, so ranks sharing a GPU may each hold one); otherwise MPI with staging. Throws for
// DTENSOR_CUDA_BACKEND=nccl without NCCL or device, and for an unknown value.
CommunicatorPtr self_communicator(DeviceType device_type);

// The CUDA device this process computes on: local_rank() % visible devices (0 without a
// device). The Runtime makes it current, NCCL communicators are created on it, and DTensors on a
// CUDA mesh place their local tensors there.
int local_cuda_device();

namespace detail {

// The CUDA backend rule above as a pure function (unit-tested): `env` is the value of
// DTENSOR_CUDA_BACKEND (nullptr when unset), `nccl_possible` whether NCCL is compiled in, a device
// is visible and no two ranks of a node share one (agreed over the ranks that must agree).
// Returns "nccl" or "mpi"; throws dtensor::Error "[<op>] DTENSOR_CUDA_BACKEND=..." for an
// unknown value or for "nccl" when !nccl_possible.
std::string_view choose_cuda_backend(const char* env, bool nccl_possible, std::string_view op);

// Throws dtensor::Error "[op] MPI is finalized ..." after MPI_Finalize (the Runtime was
// destroyed): every communicator call checks it first instead of aborting inside MPI.
void check_mpi_running(std::string_view op);

}  // namespace detail

}  // namespace dtensor
