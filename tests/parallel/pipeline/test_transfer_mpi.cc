// The pipeline's stage-to-stage transfers (dtensor/parallel/pipeline/transfer.h) at 2 ranks,
// through the Channel itself: a send moves while its sender computes (the progress thread,
// dtensor/collectives/p2p_progress.h: without it the receiver waits for the sender's next MPI
// call, here a second of sleep; that case's ctest entry reports "skipped" where the thread
// cannot run: MPI without MPI_THREAD_MULTIPLE, or DTENSOR_ASYNC=0), and a refused
// transfer is raised on both ranks within seconds, its shard drained (before, the sender's send
// of a shard the receiver never took waited for the collective deadline, which ends the job).
// The messages are 4 MiB, far above Open MPI's eager size, so neither send completes unless the
// receiver takes it and someone enters MPI on the sender's side.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "dtensor/collectives/runtime.h"
#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/parallel/pipeline/transfer.h"
#include "dtensor/tensor/creation.h"
#include "tests/common/async_test_util.h"

namespace dt = dtensor;
namespace pd = dtensor::pipelining::detail;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

constexpr int64_t kElements = int64_t{1} << 20;  // 4 MiB of float32

// A channel between the two ranks for a step of 4 stages and 1 microbatch, the step begun.
pd::Channel begun_channel(const dt::DeviceMesh& mesh) {
  pd::Channel channel(mesh.communicator(0), mesh.communicator(0), "test", 4, 1);
  channel.begin_step();
  return channel;
}

}  // namespace

TEST_CASE("a send moves while its sender computes", "[pipeline][transfer][progress]") {
  // Without the progress thread a send moves at the sender's next MPI call only.
  if (dt::world_size() != 2 || !dt::test::async_threaded_or_skip()) return;
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {2}, {"pp"});
  pd::Channel channel = begun_channel(mesh);
  const pd::TransferKey key{pd::Direction::kActivation, 0, 1, 0};
  mesh.communicator(0)->barrier()->wait();
  if (dt::world_rank() == 0) {
    const dt::Tensor value = dt::arange(kElements, dt::TensorOptions(dt::kFloat32));
    channel.send(dt::local_dtensor(value), 1, key, mesh);
    // A forward that makes no MPI call for a second.
    std::this_thread::sleep_for(std::chrono::seconds(1));
  } else {
    const auto start = Clock::now();
    const dt::DTensor got = channel.recv(0, key, nullptr, mesh);
    const double waited = seconds_since(start);
    INFO("waited " << waited << " s for the activation");
    if (dt::test::kTimeBoundsApply) CHECK(waited < 0.5);
    REQUIRE(got.defined());
    CHECK(got.to_local().to_vector<float>()[kElements - 1] == static_cast<float>(kElements - 1));
  }
  channel.finish_step();
}

// The sender names stage 0 as the activation's source, the receiver expects stage 2: the same
// message tag (a step's tags are numbered by direction, receiving stage and microbatch), a
// different transfer. Both raise the receiver's message at the step's end.
TEST_CASE("a refused transfer is raised on both ranks within seconds", "[pipeline][transfer]") {
  if (dt::world_size() != 2) return;
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {2}, {"pp"});
  pd::Channel channel = begun_channel(mesh);
  const auto start = Clock::now();
  if (dt::world_rank() == 0) {
    const dt::Tensor value = dt::zeros({kElements}, dt::TensorOptions(dt::kFloat32));
    channel.send(dt::local_dtensor(value), 1, {pd::Direction::kActivation, 0, 1, 0}, mesh);
  } else {
    try {
      channel.recv(0, {pd::Direction::kActivation, 2, 1, 0}, nullptr, mesh);
      FAIL("the transfer was not refused");
    } catch (const dt::Error& e) {
      channel.fail(e.what());
    }
  }
  const std::string message =
      "stage 1 expected the activation of microbatch 0 from stage 2 to stage 1 of step";
  CHECK_THROWS_WITH(channel.finish_step(),
                    Catch::Contains(message) &&
                        Catch::Contains("but pp rank 0 (world rank 0) sent the activation of "
                                        "microbatch 0 from stage 0 to stage 1"));
  CHECK(seconds_since(start) < 10);
}
