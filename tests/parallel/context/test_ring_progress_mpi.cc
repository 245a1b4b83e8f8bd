// Ring attention's k/v hop (detail::ring_shift, dtensor/parallel/context/ring_attention.cc) moves
// while the caller computes, at 2 ranks: its transfers are tested by the progress thread
// (dtensor/collectives/p2p_progress.h). The blocks are 4 MiB, far above Open MPI's eager size, so
// a hop completes only when both ranks enter MPI: without the thread, the rank that waits at
// once waits for its peer's second of compute. The ctest entry reports "skipped" where the thread
// cannot run (MPI without MPI_THREAD_MULTIPLE, or DTENSOR_ASYNC=0).
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "dtensor/collectives/runtime.h"
#include "dtensor/parallel/context/detail/ring_exchange.h"
#include "dtensor/tensor/creation.h"
#include "tests/common/async_test_util.h"

namespace dt = dtensor;

namespace {
using Clock = std::chrono::steady_clock;
constexpr int64_t kElements = int64_t{1} << 20;  // 4 MiB of float32
constexpr int kTag = 4700;
}  // namespace

TEST_CASE("a ring hop moves while the caller computes", "[context][progress]") {
  if (dt::world_size() != 2 || !dt::test::async_threaded_or_skip()) return;
  const dt::CommunicatorPtr comm = dt::world_communicator();
  const int r = comm->rank();
  const dt::TensorOptions f32(dt::kFloat32);
  // Each rank sends its k and v blocks (filled with its rank) and receives its peer's.
  const dt::Tensor k = dt::full({kElements}, dt::Scalar(r + 1.0), f32);
  const dt::Tensor v = dt::full({kElements}, dt::Scalar(r + 10.0), f32);
  const dt::Tensor in_k = dt::empty({kElements}, f32), in_v = dt::empty({kElements}, f32);
  comm->barrier()->wait();
  const auto start = Clock::now();
  const dt::WorkPtr hop = dt::detail::ring_shift(comm, {k, v}, {in_k, in_v}, kTag);
  if (r == 0) std::this_thread::sleep_for(std::chrono::seconds(1));  // a block's compute
  hop->wait();
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  if (r == 1) {
    INFO("rank 1 waited " << waited << " s for its hop");
    if (dt::test::kTimeBoundsApply) CHECK(waited < 0.5);  // without progress: rank 0's second
  }
  const int peer = 1 - r;
  CHECK(in_k.to_vector<float>()[kElements - 1] == static_cast<float>(peer + 1));
  CHECK(in_v.to_vector<float>()[0] == static_cast<float>(peer + 10));
  comm->barrier()->wait();
}
