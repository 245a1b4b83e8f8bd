#include "dtensor/collectives/mpi/rank_ordered_reduce.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "dtensor/collectives/mpi/mpi_types.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {

namespace {

// out[i] = ((rows[0][i] op rows[1][i]) op rows[2][i]) ... for `world` rows `stride` apart: one
// pass per row keeps the association fixed (no compiler reassociates across the passes) and
// each pass vectorises.
template <typename T>
void fold_rows(T* out, const T* rows, int64_t stride, int world, int64_t n, bool product) {
  const T* r0 = rows;
  const T* r1 = rows + stride;
  if (product) {
    for (int64_t i = 0; i < n; ++i) out[i] = r0[i] * r1[i];
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = r0[i] + r1[i];
  }
  for (int k = 2; k < world; ++k) {
    const T* rk = rows + k * stride;
    if (product) {
      for (int64_t i = 0; i < n; ++i) out[i] *= rk[i];
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] += rk[i];
    }
  }
}

void fold(void* out, const void* rows, int64_t stride, int world, int64_t n, DType dtype,
          ReduceOp op) {
  if (n == 0) return;
  const bool product = op == ReduceOp::kProduct;
  if (dtype == DType::kFloat64) {
    fold_rows(static_cast<double*>(out), static_cast<const double*>(rows), stride, world, n,
              product);
  } else {
    fold_rows(static_cast<float*>(out), static_cast<const float*>(rows), stride, world, n, product);
  }
}

// Room for `bytes` of received rows, reused by every reduction on this thread (the
// communication thread has its own): a training loop allocates nothing after its first step,
// and, like the buffers MPI keeps for its own algorithms, this is not tensor memory
// (memory_stats does not count it). At most kSegmentBytes plus a chunk's rounding per thread
// (kGatherAllBytes below it), whatever the message.
void* scratch(int64_t bytes) {
  thread_local std::unique_ptr<double[]> buffer;
  thread_local int64_t capacity = 0;  // in doubles
  const int64_t need = (bytes + 7) / 8;
  if (need > capacity) {
    buffer.reset();
    buffer = std::make_unique_for_overwrite<double[]>(static_cast<size_t>(need));
    capacity = need;
  }
  return buffer.get();
}

int comm_size(MPI_Comm comm, int* rank) {
  int world = 0;
  MPI_Comm_rank(comm, rank);
  MPI_Comm_size(comm, &world);
  return world;
}

}  // namespace

bool rank_ordered(DType dtype, ReduceOp op, int world) {
  return world > 2 && (dtype == DType::kFloat32 || dtype == DType::kFloat64) &&
         (op == ReduceOp::kSum || op == ReduceOp::kAvg || op == ReduceOp::kProduct);
}

int rank_ordered_all_reduce(void* data, int count, DType dtype, ReduceOp op, MPI_Comm comm) {
  int rank = 0;
  const int world = comm_size(comm, &rank);
  const MPI_Datatype type = mpi_datatype(dtype);
  const auto item = static_cast<int64_t>(dtype_size(dtype));
  if (int64_t{world} * count * item <= kGatherAllBytes) {
    // Small: every contribution to every rank, then the same fold everywhere.
    void* all = scratch(int64_t{world} * count * item);
    const int rc = MPI_Allgather(data, count, type, all, count, type, comm);
    if (rc != MPI_SUCCESS) return rc;
    fold(data, all, count, world, count, dtype, op);
    return MPI_SUCCESS;
  }
  // Large, by segments of at most kSegmentBytes: chunk k of a segment (torch.chunk) is folded on
  // rank k, then the folded chunks are gathered back.
  const int64_t segment = std::max<int64_t>(world, kSegmentBytes / item);
  std::vector<int> counts(static_cast<size_t>(world)), displs(static_cast<size_t>(world));
  std::vector<int> recv_counts(static_cast<size_t>(world)), recv_displs(static_cast<size_t>(world));
  for (int64_t base = 0; base < count; base += segment) {
    const int64_t len = std::min<int64_t>(segment, count - base);
    const int64_t chunk = (len + world - 1) / world;
    for (int k = 0; k < world; ++k) {
      const int64_t start = std::min<int64_t>(len, k * chunk);
      displs[static_cast<size_t>(k)] = static_cast<int>(start);
      counts[static_cast<size_t>(k)] = static_cast<int>(std::min<int64_t>(chunk, len - start));
    }
    const int mine = counts[static_cast<size_t>(rank)];
    for (int k = 0; k < world; ++k) {
      recv_counts[static_cast<size_t>(k)] = mine;
      recv_displs[static_cast<size_t>(k)] = k * mine;
    }
    char* seg = static_cast<char*>(data) + base * item;
    void* rows = scratch(int64_t{world} * mine * item);
    int rc = MPI_Alltoallv(seg, counts.data(), displs.data(), type, rows, recv_counts.data(),
                           recv_displs.data(), type, comm);
    if (rc != MPI_SUCCESS) return rc;
    fold(seg + displs[static_cast<size_t>(rank)] * item, rows, mine, world, mine, dtype, op);
    // Open MPI's nonblocking all-gather is the faster form here too (mpi_communicator.cc's
    // do_all_gather); the wait stays inside this blocking call, under its deadline.
    MPI_Request request;
    rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, seg, counts.data(), displs.data(),
                         type, comm, &request);
    if (rc != MPI_SUCCESS) return rc;
    rc = MPI_Wait(&request, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}

int rank_ordered_reduce_scatter(const void* send, void* recv, int count, DType dtype, ReduceOp op,
                                MPI_Comm comm) {
  int rank = 0;
  const int world = comm_size(comm, &rank);
  const MPI_Datatype type = mpi_datatype(dtype);
  const auto item = static_cast<int64_t>(dtype_size(dtype));
  if (int64_t{world} * count * item <= kSegmentBytes) {
    void* rows = scratch(int64_t{world} * count * item);
    const int rc = MPI_Alltoall(send, count, type, rows, count, type, comm);
    if (rc != MPI_SUCCESS) return rc;
    fold(recv, rows, count, world, count, dtype, op);
    return MPI_SUCCESS;
  }
  // By segments: elements [base, base + len) of every rank's block per round.
  const int64_t segment = std::max<int64_t>(1, kSegmentBytes / (int64_t{world} * item));
  std::vector<int> counts(static_cast<size_t>(world)), send_displs(static_cast<size_t>(world));
  std::vector<int> recv_displs(static_cast<size_t>(world));
  for (int64_t base = 0; base < count; base += segment) {
    const int len = static_cast<int>(std::min<int64_t>(segment, count - base));
    for (int k = 0; k < world; ++k) {
      counts[static_cast<size_t>(k)] = len;
      send_displs[static_cast<size_t>(k)] =
          static_cast<int>(k * static_cast<int64_t>(count) + base);
      recv_displs[static_cast<size_t>(k)] = k * len;
    }
    void* rows = scratch(int64_t{world} * len * item);
    const int rc = MPI_Alltoallv(send, counts.data(), send_displs.data(), type, rows, counts.data(),
                                 recv_displs.data(), type, comm);
    if (rc != MPI_SUCCESS) return rc;
    fold(static_cast<char*>(recv) + base * item, rows, len, world, len, dtype, op);
  }
  return MPI_SUCCESS;
}

}  // namespace dtensor::detail
