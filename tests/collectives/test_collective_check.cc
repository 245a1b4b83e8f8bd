// The collective consistency check under mpirun (2 and 4 ranks): ranks that issue different
// collectives (kind, size, dtype, reduce op, root, order, label) get dtensor::Error on EVERY rank
// naming both sides, instead of MPI pairing the collectives (garbage, MPI_ERR_TRUNCATE aborts or
// hangs). Each case runs on a fresh communicator split off the world, the last rank diverges,
// and every rank then meets in a world barrier, so a rank that hung or ran ahead fails the entry.
// Also: NaN through max/min, 16-bit sums in float, MPI errors as dtensor::Error, the thread rule.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "dtensor/collectives/collective_check.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/tensor/creation.h"
#include "tests/collectives/collective_test_util.h"

namespace dtensor::test {

namespace {

using Catch::Contains;

// A collective larger than the inline block (kInlineBytes), so its data exchange is separate.
constexpr int64_t kLarge = 1000;

CommunicatorPtr fresh_comm() {
  return world_communicator()->split(0, world_rank());
}

void all_ranks_arrive() {
  world_communicator()->barrier()->wait();
}

bool is_last(const CommunicatorPtr& c) {
  return c->rank() == c->size() - 1;
}

// "ranks 0, 1, 2" / "rank 0": the world ranks of every rank but the last (the comm spans the
// world in rank order).
std::string others_text() {
  const int n = world_size();
  std::string s = n - 1 == 1 ? "rank 0" : "ranks 0";
  for (int r = 1; r < n - 1; ++r) s += ", " + std::to_string(r);
  return s;
}
std::string last_text() {
  return "rank " + std::to_string(world_size() - 1);
}

Tensor ones_f(int64_t n) {
  return full({n}, 1.0f);
}

}  // namespace

TEST_CASE("check: different kinds (small, inline) raise on every rank naming both sides",
          "[collectives][check]") {
  auto comm = fresh_comm();
  const int n = comm->size();
  Tensor t = ones_f(4);
  Tensor gathered = empty({4 * n});
  auto run = [&] {
    if (is_last(comm)) return comm->all_gather(gathered, t)->wait();
    comm->all_reduce(t, ReduceOp::kSum)->wait();
  };
  REQUIRE_THROWS_AS(run(), Error);
  // The message, identical on every rank but for the leading [op].
  // (The second call: sequence number #2 on every rank.)
  const std::string expect = last_text() + " issued all_gather(float32, 4 elements) #2 where " +
                             others_text() + " issued all_reduce(sum, float32, 4 elements) #2";
  REQUIRE_THROWS_WITH(run(), Contains("collective mismatch on") && Contains(expect));
  // Nothing was sent but the fingerprints: the communicator still works, and the values are
  // right (inline all_reduce).
  Tensor x = full({3}, static_cast<float>(comm->rank() + 1));
  comm->all_reduce(x, ReduceOp::kSum)->wait();
  CHECK(x.to_vector<float>() == std::vector<float>(3, n * (n + 1) / 2.0f));
  all_ranks_arrive();
}

TEST_CASE("check: different kinds (large) raise on every rank before any data moves",
          "[collectives][check]") {
  auto comm = fresh_comm();
  const int n = comm->size();
  Tensor t = ones_f(kLarge);
  Tensor gathered = full({kLarge * n}, -1.0f);
  auto run = [&] {
    if (is_last(comm)) return comm->all_gather(gathered, t)->wait();
    comm->all_reduce(t, ReduceOp::kSum)->wait();
  };
  // The call itself raises (the fingerprints are compared before the data collective is
  // posted), on every rank.
  REQUIRE_THROWS_WITH(run(), Contains("all_gather(float32, 1000 elements) #1") &&
                                 Contains("all_reduce(sum, float32, 1000 elements) #1") &&
                                 Contains(last_text() + " issued all_gather"));
  // Nothing moved: the tensors are untouched and the communicator works.
  CHECK(element<float>(t, 0) == 1.0f);
  CHECK(element<float>(gathered, 0) == -1.0f);
  comm->all_reduce(t, ReduceOp::kSum)->wait();
  CHECK(element<float>(t, kLarge - 1) == n);
  all_ranks_arrive();
}

TEST_CASE("check: sizes that differ (was MPI_ERR_TRUNCATE) raise on every rank",
          "[collectives][check]") {
  for (int64_t base : {int64_t{8}, kLarge}) {
    auto comm = fresh_comm();
    const int n = comm->size();
    const int64_t count = is_last(comm) ? 2 * base : base;
    Tensor in = ones_f(count);
    Tensor out = empty({count * n});
    REQUIRE_THROWS_WITH(
        comm->all_gather(out, in)->wait(),
        Contains(last_text() + " issued all_gather(float32, " + std::to_string(2 * base) +
                 " elements) #1 where " + others_text() + " issued all_gather(float32, " +
                 std::to_string(base) + " elements) #1"));
  }
  all_ranks_arrive();
}

TEST_CASE("check: a zero-size collective on one rank only is caught", "[collectives][check]") {
  auto comm = fresh_comm();
  const int n = comm->size();
  const int64_t count = is_last(comm) ? 0 : 3;
  Tensor in = ones_f(count);
  Tensor out = empty({count * n});
  REQUIRE_THROWS_WITH(
      comm->all_gather(out, in)->wait(),
      Contains("all_gather(float32, 0 elements)") && Contains("all_gather(float32, 3 elements)"));
  all_ranks_arrive();
}

TEST_CASE("check: dtype, reduce op and root that differ raise on every rank",
          "[collectives][check]") {
  const bool last = world_rank() == world_size() - 1;
  SECTION("dtype") {
    auto comm = fresh_comm();
    Tensor t = last ? full({kLarge}, 1, TensorOptions(kInt32)) : ones_f(kLarge);
    REQUIRE_THROWS_WITH(comm->all_reduce(t, ReduceOp::kSum)->wait(),
                        Contains("all_reduce(sum, int32, 1000 elements)") &&
                            Contains("all_reduce(sum, float32, 1000 elements)"));
  }
  SECTION("reduce op") {
    auto comm = fresh_comm();
    Tensor t = ones_f(4);
    REQUIRE_THROWS_WITH(comm->all_reduce(t, last ? ReduceOp::kMax : ReduceOp::kSum)->wait(),
                        Contains(last_text() + " issued all_reduce(max, float32, 4 elements)") &&
                            Contains("issued all_reduce(sum, float32, 4 elements)"));
  }
  SECTION("root") {
    auto comm = fresh_comm();
    Tensor t = ones_f(kLarge);
    REQUIRE_THROWS_WITH(comm->broadcast(t, last ? 1 : 0)->wait(),
                        Contains("broadcast(float32, 1000 elements, root 1)") &&
                            Contains("broadcast(float32, 1000 elements, root 0)"));
  }
  all_ranks_arrive();
}

TEST_CASE("check: an error raised on one rank only desynchronises the sequence, caught next",
          "[collectives][check]") {
  auto comm = fresh_comm();
  Tensor t = ones_f(6);
  if (is_last(comm)) {
    // A validation error on this rank alone (non-contiguous tensor): the call still takes
    // sequence number #1, so this rank's next collective is #2 where the others issue #1.
    Tensor mt = ones_f(6).view({2, 3}).transpose(0, 1);
    REQUIRE_THROWS_WITH(comm->all_reduce(mt, ReduceOp::kSum), Contains("contiguous"));
  }
  REQUIRE_THROWS_WITH(comm->all_reduce(t, ReduceOp::kSum)->wait(),
                      Contains(last_text() +
                               " issued all_reduce(sum, float32, 6 elements) #2 "
                               "where " +
                               others_text() + " issued all_reduce(sum, float32, 6 elements) #1"));
  all_ranks_arrive();
}

TEST_CASE("check: a rank that skips a collective is caught at its next one",
          "[collectives][check]") {
  auto comm = fresh_comm();
  Tensor t = ones_f(5);
  // The others reduce then meet in a barrier; the last rank goes straight to the barrier: its
  // barrier meets their all_reduce.
  if (is_last(comm)) {
    REQUIRE_THROWS_WITH(comm->barrier()->wait(),
                        Contains("[barrier]") && Contains(last_text() + " issued barrier() #1") &&
                            Contains("all_reduce(sum, float32, 5 elements) #1"));
  } else {
    REQUIRE_THROWS_WITH(comm->all_reduce(t, ReduceOp::kSum)->wait(),
                        Contains("[all_reduce]") && Contains("barrier() #1"));
  }
  all_ranks_arrive();
}

TEST_CASE("check: a split on one rank meets a collective on the others", "[collectives][check]") {
  auto comm = fresh_comm();
  Tensor t = ones_f(kLarge);
  if (is_last(comm)) {
    REQUIRE_THROWS_WITH(comm->split(0, 0), Contains("[split]") && Contains("split() #1"));
  } else {
    REQUIRE_THROWS_WITH(comm->all_reduce(t, ReduceOp::kSum)->wait(),
                        Contains(last_text() + " issued split() #1"));
  }
  all_ranks_arrive();
}

TEST_CASE("check: collective labels take part in the comparison", "[collectives][check]") {
  auto comm = fresh_comm();
  Tensor t = ones_f(2);
  {
    CollectiveLabel label(is_last(comm) ? "from_local" : "distribute_tensor");
    REQUIRE_THROWS_WITH(
        comm->all_reduce(t, ReduceOp::kSum)->wait(),
        Contains("all_reduce(sum, float32, 2 elements) #1 (from_local)") &&
            Contains("all_reduce(sum, float32, 2 elements) #1 (distribute_tensor)"));
  }
  all_ranks_arrive();  // unlabelled again
}

TEST_CASE("check: every collective gives the right result with and without the check",
          "[collectives][check]") {
  const CollectiveCheckMode mode = GENERATE(CollectiveCheckMode::kOn, CollectiveCheckMode::kOff);
  set_collective_check_mode(mode);
  auto comm = fresh_comm();
  const int n = comm->size(), r = comm->rank();
  for (int64_t m : {int64_t{3}, kLarge}) {
    INFO("mode " << static_cast<int>(mode) << ", " << m << " elements per rank");
    Tensor in = make_tensor<double>(m, [&](int64_t i) { return r * 100 + i; });
    Tensor ar = in.clone();
    comm->all_reduce(ar, ReduceOp::kSum)->wait();
    Tensor ag = empty({m * n}, TensorOptions(kFloat64));
    comm->all_gather(ag, in)->wait();
    Tensor rs_in = make_tensor<double>(m * n, [&](int64_t i) { return r + i; });
    Tensor rs = empty({m}, TensorOptions(kFloat64));
    comm->reduce_scatter(rs, rs_in, ReduceOp::kMax)->wait();
    Tensor a2a = empty({m * n}, TensorOptions(kFloat64));
    comm->all_to_all(a2a, rs_in)->wait();
    Tensor bc = in.clone();
    comm->broadcast(bc, n - 1)->wait();
    Tensor sc_in = make_tensor<double>(m * n, [&](int64_t i) { return 7 * i + r; }).view({n, m});
    Tensor sc = empty({m}, TensorOptions(kFloat64));
    comm->scatter(sc, sc_in, 0)->wait();
    comm->barrier()->wait();
    for (int64_t i = 0; i < m; ++i) {
      CHECK(element<double>(ar, i) == n * i + 100.0 * n * (n - 1) / 2);
      CHECK(element<double>(rs, i) == (n - 1) + r * m + i);
      CHECK(element<double>(bc, i) == (n - 1) * 100 + i);
      CHECK(element<double>(sc, i) == 7 * (r * m + i));  // rank 0's block r
      for (int k = 0; k < n; ++k) {
        CHECK(element<double>(ag, k * m + i) == k * 100 + i);
        CHECK(element<double>(a2a, k * m + i) == k + r * m + i);  // rank k's block r
      }
    }
  }
  set_collective_check_mode(CollectiveCheckMode::kOn);
  all_ranks_arrive();
}

TEMPLATE_TEST_CASE("check: max and min propagate NaN from any rank, inline and large",
                   "[collectives][nan]", float, double, Half, BFloat16) {
  using T = TestType;
  auto comm = world_communicator();
  const int n = comm->size(), r = comm->rank();
  for (int64_t m : {int64_t{2}, kLarge}) {
    for (int nan_rank = 0; nan_rank < n; ++nan_rank) {
      for (ReduceOp op : {ReduceOp::kMax, ReduceOp::kMin}) {
        INFO(m << " elements, NaN on rank " << nan_rank << ", op " << reduce_op_name(op));
        // Element 0: NaN on nan_rank, finite elsewhere; element 1: finite everywhere.
        Tensor t = make_tensor<T>(m, [&](int64_t i) {
          return (i == 0 && r == nan_rank) ? std::numeric_limits<double>::quiet_NaN() : r + i;
        });
        comm->all_reduce(t, op)->wait();
        CHECK(std::isnan(element<T>(t, 0)));
        CHECK(element<T>(t, 1) == (op == ReduceOp::kMax ? n : 1.0));
        // reduce_scatter: NaN in block 0 of nan_rank reaches rank 0 only.
        Tensor rs_in = make_tensor<T>(m * n, [&](int64_t i) {
          return (i == 0 && r == nan_rank) ? std::numeric_limits<double>::quiet_NaN() : 1.0;
        });
        Tensor rs = empty({m}, TensorOptions(dtype_of_v<T>));
        comm->reduce_scatter(rs, rs_in, op)->wait();
        CHECK(std::isnan(element<T>(rs, 0)) == (r == 0));
      }
    }
  }
}

TEMPLATE_TEST_CASE("check: float16/bfloat16 sum and avg accumulate in float (no overflow)",
                   "[collectives][numerics]", Half, BFloat16) {
  using T = TestType;
  auto comm = world_communicator();
  const int n = comm->size(), r = comm->rank();
  for (int64_t m : {int64_t{4}, kLarge}) {
    INFO(m << " elements");
    // The avg of v = 40000 (as T holds it) on every rank is v; the float16 pairwise sum
    // overflows (65504 is the largest float16).
    const double v = representable<T>(40000.0);
    Tensor a = make_tensor<T>(m, [&](int64_t) { return v; });
    comm->all_reduce(a, ReduceOp::kAvg)->wait();
    CHECK(element<T>(a, m - 1) == v);
    // 256 on rank 0 and 1 elsewhere: the float sum 256 + (n - 1) rounds once; bfloat16 pairwise
    // rounding would give 256 at 4 ranks.
    Tensor s = make_tensor<T>(m, [&](int64_t) { return r == 0 ? 256.0 : 1.0; });
    comm->all_reduce(s, ReduceOp::kSum)->wait();
    CHECK(element<T>(s, 0) == to_double(T(256.0f + static_cast<float>(n - 1))));
    Tensor rs_in = make_tensor<T>(m * n, [&](int64_t) { return v; });
    Tensor rs = empty({m}, TensorOptions(dtype_of_v<T>));
    comm->reduce_scatter(rs, rs_in, ReduceOp::kAvg)->wait();
    CHECK(element<T>(rs, 0) == v);
  }
}

TEST_CASE("check: MPI errors come back as dtensor::Error (truncated message)",
          "[collectives][mpi_errors]") {
  auto comm = world_communicator();
  const int r = comm->rank();
  // Point-to-point messages are matched by tag, not fingerprinted; a receive buffer that is too
  // small is MPI_ERR_TRUNCATE, which used to abort the job.
  if (r == 0) {
    comm->send(ones_f(8), 1, 77)->wait();
  } else if (r == 1) {
    Tensor small = empty({4});
    REQUIRE_THROWS_AS(comm->recv(small, 0, 77)->wait(), Error);
  }
  all_ranks_arrive();
}

TEST_CASE("check: a second thread cannot issue while another thread's Work is in flight",
          "[collectives][threads]") {
  auto comm = fresh_comm();
  const int n = comm->size();
  for (int64_t m : {int64_t{4}, kLarge}) {
    Tensor a = ones_f(m), b = ones_f(m);
    WorkPtr pending;
    std::thread other([&] { pending = comm->all_reduce(a, ReduceOp::kSum); });
    other.join();
    // Deterministic on every rank: the other thread's collective is issued and not waited.
    REQUIRE_THROWS_WITH(comm->all_reduce(b, ReduceOp::kSum),
                        Contains("[all_reduce] another thread still has 1 un-waited collective") &&
                            Contains("one thread at a time"));
    pending->wait();
    CHECK(element<float>(a, 0) == n);
    // Once it is waited, this thread may take over.
    comm->all_reduce(b, ReduceOp::kSum)->wait();
    CHECK(element<float>(b, m - 1) == n);
  }
  all_ranks_arrive();
}

}  // namespace dtensor::test
