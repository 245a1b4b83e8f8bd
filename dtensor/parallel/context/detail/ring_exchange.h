// The one message pattern of ring attention (ring_attention.cc), exposed for the benchmark that
// times the ring's communication (benchmarks/context_parallel).
#pragma once

#include <vector>

#include "dtensor/collectives/communicator.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// Sends each of `out` to the next rank of `comm`'s ring and receives each of `in` from the
// previous one (tags tag, tag + 1, ...): posted at once on the caller's thread and tested by the
// progress thread (dtensor/collectives/p2p_progress.h), so the transfer progresses while the
// caller computes; wait() on the result completes them (rethrowing the first error, after
// waiting for every transfer). Even ranks send first and odd ranks receive first, so a backend
// whose point-to-point calls wait for their match in issue order (NCCL on one stream) pairs them
// up. One rank: `in` = `out`, no message.
WorkPtr ring_shift(const CommunicatorPtr& comm, std::vector<Tensor> out, std::vector<Tensor> in,
                   int tag);

// Seconds this thread has spent in ring_attention's forward and backward waiting for their
// messages, after issuing them and computing the current block: the communication that compute
// did not hide. The backward's last hop (each dk/dv accumulator's return to its owner, with
// nothing left to compute behind it) is not counted. A running total (the benchmark reads
// differences).
double ring_wait_seconds();

}  // namespace dtensor::detail
