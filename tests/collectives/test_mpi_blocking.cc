// The MPI backend moves a collective's data with the blocking MPI call on the issuing thread
// (MpiCommunicator::run_blocking, under the deadline watchdog; all_gather excepted, whose
// nonblocking form is faster): the Work is complete when it is returned, every rank uses the
// same form (so the forms always match), and results are
// right whatever order the ranks then wait in, with point-to-point and communicator creation
// in between. The consistency check's fingerprint exchange is blocking too. Counted by
// detail::mpi_blocking_collectives.
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "dtensor/collectives/collective_check.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/deadline.h"
#include "dtensor/collectives/mpi/mpi_communicator.h"
#include "dtensor/collectives/runtime.h"
#include "tests/collectives/collective_test_util.h"

namespace dtensor::test {
namespace {

Tensor filled(int64_t n, double v) {
  return full({n}, v, TensorOptions(kFloat32));
}

std::vector<float> expect(int64_t n, double v) {
  return std::vector<float>(static_cast<size_t>(n), static_cast<float>(v));
}

}  // namespace

TEST_CASE("mpi: a collective's data moves by the blocking call, complete at issue",
          "[collectives][mpi_blocking]") {
  auto comm = world_communicator();
  const int n = comm->size();
  if (n < 2) return;  // one rank: collectives finish without MPI
  const bool check = collective_check_mode() != CollectiveCheckMode::kOff;
  for (const int64_t len : {int64_t{4}, int64_t{4096}}) {
    INFO("length " << len);
    // With the check on, a small collective travels inside the check's exchange and has no
    // data collective of its own.
    const int64_t data_calls = check && len * 4 <= 192 ? 0 : 1;
    Tensor t = filled(len, 1.0);
    Tensor g = filled(len * n, 0.0);
    const int64_t before = detail::mpi_blocking_collectives();
    WorkPtr w = comm->all_reduce(t, ReduceOp::kSum);
    if (data_calls == 1) CHECK(w->is_completed());  // done before it was returned
    w->wait();
    comm->all_gather(g, filled(len, comm->rank()))->wait();
    comm->barrier()->wait();
    // With the check on, each of the three starts with the (blocking) fingerprint exchange,
    // and the barrier is that exchange alone. all_gather's data goes by MPI_Iallgather (its
    // faster form), so it is not counted.
    CHECK(detail::mpi_blocking_collectives() - before ==
          (check ? 3 : 0) + data_calls + (check ? 0 : 1));
    CHECK(t.to_vector<float>() == expect(len, n));
    std::vector<float> want;
    for (int r = 0; r < n; ++r) {
      for (int64_t i = 0; i < len; ++i) want.push_back(static_cast<float>(r));
    }
    CHECK(g.to_vector<float>() == want);
  }
}

TEST_CASE("mpi: a huge collective timeout means no deadline, not an overflowed one",
          "[collectives][mpi_blocking]") {
  // 1e12 s does not fit the clock's int64 nanoseconds: the watchdog saturates it (an overflow
  // would put the deadline in the past and end the job at once).
  auto comm = world_communicator();
  const double before = collective_timeout();
  set_collective_timeout(1e12);
  Tensor t = filled(4096, 1.0);
  comm->all_reduce(t, ReduceOp::kSum)->wait();
  // The other ranks sit armed in the barrier's blocking call for two watchdog rounds.
  if (comm->rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(250));
  comm->barrier()->wait();
  set_collective_timeout(before);
  CHECK(t.to_vector<float>() == expect(4096, comm->size()));
}

TEST_CASE("mpi: results are right whatever order the ranks wait in",
          "[collectives][mpi_blocking]") {
  auto world = world_communicator();
  const int n = world->size();
  if (n < 2) return;
  const int me = world->rank();
  // Two communicators over the same ranks; rank parity decides the order of the waits.
  auto other = world->split(0, me);
  for (const int64_t len : {int64_t{8}, int64_t{4096}}) {  // inline and data path
    INFO("length " << len);
    Tensor x = filled(len, 1.0), y = filled(len, 3.0);
    WorkPtr wx = world->all_reduce(x, ReduceOp::kSum);
    WorkPtr wy = other->all_reduce(y, ReduceOp::kMax);
    if (me % 2 == 0) {
      wy->wait();
      wx->wait();
    } else {
      wx->wait();
      wy->wait();
    }
    CHECK(x.to_vector<float>() == expect(len, n));
    CHECK(y.to_vector<float>() == expect(len, 3.0));
    // A collective's Work kept across a point-to-point exchange and a communicator split.
    Tensor z = filled(len, 2.0);
    WorkPtr wz = world->all_reduce(z, ReduceOp::kSum);
    const int peer = me ^ 1;
    if (peer < n) {
      Tensor got = filled(len, 0.0);
      WorkPtr s = world->send(filled(len, me), peer);
      WorkPtr r = world->recv(got, peer);
      r->wait();
      s->wait();
      CHECK(got.to_vector<float>() == expect(len, peer));
    }
    auto split = world->split(me % 2, me);
    REQUIRE(split != nullptr);
    wz->wait();
    CHECK(z.to_vector<float>() == expect(len, 2.0 * n));
    // A Work dropped without a wait still completes (its destructor waits).
    {
      Tensor d = filled(len, 1.0);
      world->all_reduce(d, ReduceOp::kSum);
    }
    world->barrier()->wait();
  }
}

}  // namespace dtensor::test
