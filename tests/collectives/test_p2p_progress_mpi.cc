// Host progress for point-to-point transfers (dtensor/collectives/p2p_progress.h) at 2 ranks:
// a transfer moves while its owner makes no MPI call; an error raised by a test on the progress
// thread comes back to the owner (it used to end the process: std::terminate); an MPI Work that
// failed is never waited as a success afterwards. The cases that need the progress thread are
// tagged [progress]: their ctest entry reports "skipped" when it cannot run (MPI without
// MPI_THREAD_MULTIPLE, or DTENSOR_ASYNC=0), not a pass.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <exception>
#include <thread>

#include "dtensor/collectives/p2p_progress.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"
#include "tests/common/async_test_util.h"

namespace dt = dtensor;
using Catch::Matchers::Contains;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The message text of `e` (null: "").
std::string what(const std::exception_ptr& e) {
  if (!e) return "";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  }
}

// A Work whose test fails (as MPI_Test does on an MPI error), counting its tests.
class FailingWork final : public dt::Work {
 public:
  bool is_completed() override {
    ++tests;
    throw dt::Error("[test] MPI_Test failed");
  }
  void wait() override {}
  std::atomic<int> tests{0};
};

constexpr int64_t kElements = int64_t{1} << 20;  // 4 MiB of float32: far above the eager size

}  // namespace

TEST_CASE("a send moves while its owner makes no MPI call", "[progress]") {
  if (dt::world_size() != 2 || !dt::test::async_threaded_or_skip()) return;
  const dt::CommunicatorPtr comm = dt::world_communicator();
  comm->barrier()->wait();
  if (comm->rank() == 0) {
    const dt::Tensor value = dt::arange(kElements, dt::TensorOptions(dt::kFloat32));
    dt::detail::P2PProgress progress;
    const dt::WorkPtr send = comm->send(value, 1, 5);
    progress.add(send, *comm, value.device());
    std::this_thread::sleep_for(std::chrono::seconds(1));  // a compute item with no MPI call
    CHECK(progress.stop() == nullptr);
    send->wait();
  } else {
    const dt::Tensor got = dt::empty({kElements}, dt::TensorOptions(dt::kFloat32));
    const auto start = Clock::now();
    comm->recv(got, 0, 5)->wait();
    const double waited = seconds_since(start);
    INFO("waited " << waited << " s for the message");
    if (dt::test::kTimeBoundsApply)
      CHECK(waited < 0.5);  // without the progress thread: the sender's second of sleep
    CHECK(got.to_vector<float>()[kElements - 1] == static_cast<float>(kElements - 1));
  }
  comm->barrier()->wait();
}

TEST_CASE("an error raised by a test on the progress thread is returned to its owner",
          "[progress]") {
  if (!dt::test::async_threaded_or_skip()) return;
  const dt::CommunicatorPtr comm = dt::world_communicator();
  auto work = std::make_shared<FailingWork>();
  dt::detail::P2PProgress progress;
  progress.add(work, *comm, dt::Device(dt::kCPU));
  const auto start = Clock::now();
  while (work->tests.load() == 0 && seconds_since(start) < 10) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the round that failed ends
  CHECK(work->tests.load() == 1);  // tested once: a failed Work is not polled again
  const std::exception_ptr error = progress.stop();
  CHECK(what(error) == "[test] MPI_Test failed");
  CHECK(progress.stop() == nullptr);  // returned once
}

// Rank 1 receives into a buffer too small for rank 0's message: MPI_ERR_TRUNCATE.
TEST_CASE("a truncated receive seen by the progress thread fails its owner and every wait",
          "[progress]") {
  if (dt::world_size() != 2 || !dt::test::async_threaded_or_skip()) return;
  const dt::CommunicatorPtr comm = dt::world_communicator();
  if (comm->rank() == 0) {
    comm->send(dt::ones({8}), 1, 6)->wait();
  } else {
    const dt::WorkPtr recv = comm->recv(dt::empty({4}), 0, 6);
    dt::detail::P2PProgress progress;
    progress.add(recv, *comm, dt::Device(dt::kCPU));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const std::exception_ptr error = progress.stop();
    CHECK_THAT(what(error), Contains("MPI_Test"));
    CHECK_THROWS_AS(recv->wait(), dt::Error);
    CHECK_THROWS_AS(recv->wait(), dt::Error);
  }
  comm->barrier()->wait();
}

TEST_CASE("an MPI Work whose test failed is never waited as a success", "[mpi_errors]") {
  if (dt::world_size() != 2) return;
  const dt::CommunicatorPtr comm = dt::world_communicator();
  if (comm->rank() == 0) {
    comm->send(dt::ones({8}), 1, 7)->wait();
  } else {
    const dt::WorkPtr recv = comm->recv(dt::empty({4}), 0, 7);
    bool failed = false;
    const auto start = Clock::now();
    while (!failed && seconds_since(start) < 10) {
      try {
        if (recv->is_completed()) break;
      } catch (const dt::Error&) {
        failed = true;  // MPI_ERR_TRUNCATE, from MPI_Test
      }
    }
    REQUIRE(failed);
    CHECK(recv->is_completed());                            // given up: done, not pending
    CHECK_THROWS_WITH(recv->wait(), Contains("MPI_Test"));  // before: returned as a success
  }
  comm->barrier()->wait();
}
