// Entry points of the NCCL backend that do not need nccl.h. nccl_communicator.cc implements
// them when CUDA is compiled in; no_nccl.cc otherwise (is_available false, factories throw).
#pragma once

#include "dtensor/collectives/communicator.h"

namespace dtensor::detail {

// True when the NCCL backend is compiled in.
bool nccl_compiled();

// Creates an NCCL communicator with the membership and rank order of `mpi` (an MPI-backend
// communicator). Collective over `mpi`: rank 0 creates the unique id and broadcasts it over
// MPI; initialisation is nonblocking and guarded by the collective deadline. Uses the current
// CUDA device. Throws "[nccl] NCCL support is not compiled in" without CUDA.
CommunicatorPtr make_nccl_communicator(const CommunicatorPtr& mpi);

}  // namespace dtensor::detail
