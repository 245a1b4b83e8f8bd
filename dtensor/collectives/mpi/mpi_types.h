// Mapping dtensor dtypes and reduce ops to MPI, including the user-defined MPI_Ops that reduce
// float16/bfloat16 in float.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "dtensor/collectives/communicator.h"

namespace dtensor::detail {

// The MPI datatype that carries one element of `d` (float16/bfloat16 travel as MPI_UINT16_T,
// bool as MPI_C_BOOL).
MPI_Datatype mpi_datatype(DType d);

// The MPI_Op reducing `d` with `op`. kAvg maps to the sum (the caller divides afterwards).
// bool: sum/max -> logical or, min/product -> logical and. float16/bfloat16: commutative
// user-defined ops computing in float and rounding back once per pairwise step. max/min of
// floating types: user-defined ops that propagate NaN.
MPI_Op mpi_reduce_op(DType d, ReduceOp op);

// data[i] /= divisor for `numel` elements of dtype `d` (integers: truncating division;
// float16/bfloat16: divided in float). Used to turn a sum into an average.
void divide_in_place(void* data, DType d, int64_t numel, int64_t divisor);

}  // namespace dtensor::detail
