// Sub-communicators, Work handles, CommDebugMode, validation errors, names and the timeout API.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "dtensor/collectives/collective_check.h"
#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/deadline.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/tensor/error.h"
#include "tests/collectives/collective_test_util.h"

namespace dtensor::test {

namespace {

// A backend that serves only CUDA devices and counts the do_* calls that reach it: checks that
// the public calls validate the device and record before handing over, and never hand over an
// invalid call.
class CudaOnlyComm final : public Communicator {
 public:
  CudaOnlyComm() : Communicator(0, 2, {0, 1}) {}
  std::string_view backend() const override { return "fake"; }
  bool supports(Device d) const override { return d.is_cuda(); }
  int calls = 0;

 protected:
  WorkPtr done() {
    ++calls;
    return completed_work();
  }
  WorkPtr do_all_reduce(const Tensor&, ReduceOp) override { return done(); }
  WorkPtr do_all_gather(const Tensor&, const Tensor&) override { return done(); }
  WorkPtr do_reduce_scatter(const Tensor&, const Tensor&, ReduceOp) override { return done(); }
  WorkPtr do_all_to_all(const Tensor&, const Tensor&) override { return done(); }
  WorkPtr do_broadcast(const Tensor&, int) override { return done(); }
  WorkPtr do_scatter(const Tensor&, const Tensor&, int) override { return done(); }
  WorkPtr do_send(const Tensor&, int, int) override { return done(); }
  WorkPtr do_recv(const Tensor&, int, int) override { return done(); }
  WorkPtr do_barrier() override { return done(); }
  std::shared_ptr<Communicator> do_split(int, int) override { return nullptr; }
  // Both "ranks" are this object: every slot is this rank's.
  WorkPtr do_exchange_slots(const void* mine, void* all, std::string_view, const Tensor*) override {
    for (int r = 0; r < size(); ++r) {
      std::memcpy(static_cast<char*>(all) + r * detail::kSlotBytes, mine, detail::kSlotBytes);
    }
    return completed_work();
  }
};

}  // namespace

TEST_CASE("public calls reject devices the backend does not serve", "[collectives][validation]") {
  CudaOnlyComm comm;
  CommDebugMode debug;
  Tensor cpu = make_tensor<float>(4, [](int64_t) { return 1; });
  Tensor cpu8 = make_tensor<float>(8, [](int64_t) { return 1; });
  REQUIRE_THROWS_WITH(
      comm.all_reduce(cpu, ReduceOp::kSum),
      Catch::Contains("[all_reduce] tensor is on device cpu") && Catch::Contains("fake backend"));
  REQUIRE_THROWS_WITH(comm.all_gather(cpu8, cpu), Catch::Contains("[all_gather] output"));
  REQUIRE_THROWS_WITH(comm.reduce_scatter(cpu, cpu8, ReduceOp::kMax),
                      Catch::Contains("[reduce_scatter] output"));
  REQUIRE_THROWS_WITH(comm.all_to_all(cpu, cpu), Catch::Contains("[all_to_all] output"));
  REQUIRE_THROWS_WITH(comm.broadcast(cpu, 1), Catch::Contains("[broadcast] tensor"));
  REQUIRE_THROWS_WITH(comm.scatter(cpu, Tensor(), 1), Catch::Contains("[scatter] output"));
  REQUIRE_THROWS_WITH(comm.send(cpu, 1), Catch::Contains("[send] tensor"));
  REQUIRE_THROWS_WITH(comm.recv(cpu, 1), Catch::Contains("[recv] tensor"));
  CHECK(comm.calls == 0);
  CHECK(debug.total_count() == 0);
  comm.barrier()->wait();  // no tensor to validate
  CHECK(comm.calls == 1);
  CHECK(debug.count(CollectiveKind::kBarrier) == 1);
}

TEST_CASE("runtime: world rank/size agree with the world communicator", "[collectives][runtime]") {
  REQUIRE(Runtime::initialized());
  auto comm = world_communicator();
  CHECK(comm->rank() == world_rank());
  CHECK(comm->size() == world_size());
  CHECK(local_rank() >= 0);
  CHECK(comm->backend() == "mpi");
  CHECK(comm->description() == "world");
  CHECK(world_communicator() == comm);  // cached
  CHECK(world_communicator(kCPU) == comm);
  CHECK(world_communicator(kCUDA) != nullptr);  // NCCL or MPI with staging
  std::vector<int> expect(static_cast<size_t>(world_size()));
  for (int i = 0; i < world_size(); ++i) expect[static_cast<size_t>(i)] = i;
  CHECK(comm->world_ranks() == expect);
  CHECK(comm->supports(Device(kCPU)));
}

TEST_CASE("split into even and odd ranks", "[collectives][split]") {
  auto comm = world_communicator();
  const int n = comm->size(), r = comm->rank();
  auto sub = split_world(kCPU, r % 2, r);
  REQUIRE(sub != nullptr);
  const int expect_size = (n + 1 - r % 2) / 2;
  CHECK(sub->size() == expect_size);
  CHECK(sub->rank() == r / 2);
  for (int k = 0; k < sub->size(); ++k)
    CHECK(sub->world_ranks()[static_cast<size_t>(k)] == 2 * k + r % 2);
  // Sum of world ranks within the parity class.
  Tensor t = make_tensor<int64_t>(3, [&](int64_t i) { return r + i; });
  sub->all_reduce(t, ReduceOp::kSum)->wait();
  int64_t sum = 0;
  for (int q = r % 2; q < n; q += 2) sum += q;
  for (int64_t i = 0; i < 3; ++i) CHECK(element<int64_t>(t, i) == sum + expect_size * i);
  // Errors name the split.
  CHECK(sub->description().find("color") != std::string::npos);
}

TEST_CASE("split orders members by key and color < 0 leaves a rank out", "[collectives][split]") {
  auto comm = world_communicator();
  const int n = comm->size(), r = comm->rank();
  // Reverse order; the last rank opts out when there is more than one rank.
  const bool out = n > 1 && r == n - 1;
  auto sub = comm->split(out ? -1 : 0, n - r);
  if (out) {
    CHECK(sub == nullptr);
  } else {
    REQUIRE(sub != nullptr);
    const int members = n > 1 ? n - 1 : 1;
    CHECK(sub->size() == members);
    CHECK(sub->rank() == members - 1 - r);
    CHECK(sub->world_ranks().front() == members - 1);
    // Nested split of the sub-communicator: singletons.
    auto single = sub->split(sub->rank(), 0);
    REQUIRE(single != nullptr);
    CHECK(single->size() == 1);
    Tensor t = make_tensor<float>(2, [&](int64_t i) { return r + i; });
    single->all_reduce(t, ReduceOp::kAvg)->wait();
    CHECK(element<float>(t, 1) == r + 1);
  }
}

TEST_CASE("Work handles: completion, out-of-order waits, completed_work", "[collectives][work]") {
  auto done = completed_work();
  CHECK(done->is_completed());
  done->wait();
  CHECK(done->is_completed());

  auto comm = world_communicator();
  const int n = comm->size(), r = comm->rank();
  std::vector<Tensor> ts;
  std::vector<WorkPtr> works;
  for (int k = 0; k < 4; ++k) {
    ts.push_back(make_tensor<double>(10, [&](int64_t i) { return r * k + i; }));
    works.push_back(comm->all_reduce(ts.back(), ReduceOp::kSum));
  }
  // Poll the first until it completes, then wait on the rest in reverse order.
  while (!works[0]->is_completed()) std::this_thread::yield();
  for (int k = 3; k >= 0; --k) {
    works[static_cast<size_t>(k)]->wait();
    CHECK(works[static_cast<size_t>(k)]->is_completed());
  }
  for (int k = 0; k < 4; ++k) {
    for (int64_t i = 0; i < 10; ++i) {
      CHECK(element<double>(ts[static_cast<size_t>(k)], i) == k * n * (n - 1) / 2.0 + n * i);
    }
  }
  // A dropped Work still completes its operation before releasing the buffers.
  Tensor t = make_tensor<int32_t>(4, [&](int64_t) { return 1; });
  comm->all_reduce(t, ReduceOp::kSum);
  CHECK(element<int32_t>(t, 3) == n);
  comm->barrier()->wait();
}

TEST_CASE("CommDebugMode counts collectives and bytes, scopes nest", "[collectives][debug]") {
  auto comm = world_communicator();
  const int n = comm->size();
  Tensor a = make_tensor<float>(8, [](int64_t i) { return i; });
  Tensor out = make_tensor<float>(8 * n, [](int64_t) { return 0; });
  CommDebugMode outer;
  CHECK(outer.total_count() == 0);
  CHECK(outer.str() == "no collectives");
  comm->all_reduce(a, ReduceOp::kSum)->wait();
  {
    CommDebugMode inner;
    comm->all_gather(out, a)->wait();
    comm->all_gather(out, a)->wait();
    comm->barrier()->wait();
    CHECK(inner.count(CollectiveKind::kAllGather) == 2);
    CHECK(inner.bytes(CollectiveKind::kAllGather) == 2 * 8 * 4);
    CHECK(inner.count(CollectiveKind::kAllReduce) == 0);
    CHECK(inner.count(CollectiveKind::kBarrier) == 1);
    CHECK(inner.total_count() == 3);
    CHECK(inner.str() == "all_gather: 2 (64 B), barrier: 1 (0 B)");
  }
  // Zero-size calls are still counted: they are issued collectives.
  Tensor empty_t = make_tensor<float>(0, [](int64_t) { return 0; });
  comm->all_reduce(empty_t, ReduceOp::kSum)->wait();
  CHECK(outer.count(CollectiveKind::kAllReduce) == 2);
  CHECK(outer.bytes(CollectiveKind::kAllReduce) == 32);
  CHECK(outer.count(CollectiveKind::kAllGather) == 2);
  CHECK(outer.total_count() == 5);
  // Validation failures are not counted.
  Tensor bad = make_tensor<float>(3, [](int64_t) { return 0; });
  CHECK_THROWS_AS(comm->all_gather(bad, a), Error);
  CHECK(outer.count(CollectiveKind::kAllGather) == 2);
  // split does not count its internal exchange.
  auto sub = comm->split(0, comm->rank());
  CHECK(outer.total_count() == 5);
}

TEST_CASE("validation errors are raised on every rank before any communication",
          "[collectives][validation]") {
  auto comm = world_communicator();
  const int n = comm->size();
  Tensor m = make_tensor<float>(6, [](int64_t i) { return i; }).view({2, 3});
  Tensor mt = m.transpose(0, 1);  // non-contiguous
  REQUIRE_FALSE(mt.is_contiguous());
  REQUIRE_THROWS_AS(comm->all_reduce(mt, ReduceOp::kSum), Error);
  REQUIRE_THROWS_WITH(comm->all_reduce(mt, ReduceOp::kSum),
                      Catch::Contains("[all_reduce]") && Catch::Contains("contiguous"));
  REQUIRE_THROWS_WITH(comm->broadcast(mt, 0), Catch::Contains("[broadcast]"));
  REQUIRE_THROWS_WITH(comm->send(mt, 0), Catch::Contains("[send]"));
  REQUIRE_THROWS_WITH(comm->all_reduce(Tensor(), ReduceOp::kSum),
                      Catch::Contains("[all_reduce]") && Catch::Contains("undefined"));

  Tensor in = make_tensor<float>(4, [](int64_t) { return 0; });
  Tensor wrong = make_tensor<float>(4 * n + 1, [](int64_t) { return 0; });
  REQUIRE_THROWS_WITH(comm->all_gather(wrong, in),
                      Catch::Contains("[all_gather]") && Catch::Contains("output"));
  REQUIRE_THROWS_WITH(comm->reduce_scatter(in, wrong, ReduceOp::kSum),
                      Catch::Contains("[reduce_scatter]") && Catch::Contains("input"));
  Tensor in_d = make_tensor<double>(4, [](int64_t) { return 0; });
  Tensor out_f = make_tensor<float>(4 * n, [](int64_t) { return 0; });
  REQUIRE_THROWS_WITH(comm->all_gather(out_f, in_d),
                      Catch::Contains("[all_gather]") && Catch::Contains("dtype"));
  REQUIRE_THROWS_WITH(comm->all_to_all(in, wrong),
                      Catch::Contains("[all_to_all]") && Catch::Contains("numel"));
  if (n > 1) {
    Tensor odd = make_tensor<float>(n + 1, [](int64_t) { return 0; });
    REQUIRE_THROWS_WITH(comm->all_to_all(odd, odd),
                        Catch::Contains("[all_to_all]") && Catch::Contains("multiple"));
  }
  Tensor flags = make_tensor<bool>(3, [](int64_t) { return 1; });
  REQUIRE_THROWS_WITH(comm->all_reduce(flags, ReduceOp::kAvg),
                      Catch::Contains("[all_reduce]") && Catch::Contains("bool"));
  REQUIRE_THROWS_WITH(comm->broadcast(in, n),
                      Catch::Contains("[broadcast]") && Catch::Contains("root"));
  REQUIRE_THROWS_WITH(comm->broadcast(in, -1), Catch::Contains("[broadcast] root -1"));
  REQUIRE_THROWS_WITH(comm->send(in, n), Catch::Contains("[send] dst"));
  REQUIRE_THROWS_WITH(comm->recv(in, -2), Catch::Contains("[recv] src"));
  REQUIRE_THROWS_WITH(comm->send(in, 0, -1), Catch::Contains("[send] tag"));
  // scatter: the root's input must be [size(), output sizes...]; every rank is its own root
  // here, so every rank throws before communicating.
  const int r = comm->rank();
  Tensor block = make_tensor<float>(4, [](int64_t) { return 0; });
  Tensor stacked = make_tensor<float>(4 * n, [](int64_t) { return 0; }).view({n, 4});
  Tensor tall = make_tensor<float>(4 * (n + 1), [](int64_t) { return 0; }).view({n + 1, 4});
  const std::string tall_msg = "[scatter] input on the root has shape [" + std::to_string(n + 1) +
                               ", 4], expected [size(), output sizes...] = [" + std::to_string(n) +
                               ", 4]";
  REQUIRE_THROWS_WITH(comm->scatter(block, tall, r), Catch::Contains(tall_msg));
  Tensor flat = make_tensor<float>(4 * n, [](int64_t) { return 0; });
  REQUIRE_THROWS_WITH(comm->scatter(block, flat, r),
                      Catch::Contains("[scatter] input") && Catch::Contains("expected"));
  Tensor stacked_d = make_tensor<double>(4 * n, [](int64_t) { return 0; }).view({n, 4});
  REQUIRE_THROWS_WITH(comm->scatter(block, stacked_d, r),
                      Catch::Contains("[scatter]") && Catch::Contains("dtype"));
  REQUIRE_THROWS_WITH(comm->scatter(block, Tensor(), r),
                      Catch::Contains("[scatter] input is an undefined tensor"));
  REQUIRE_THROWS_WITH(comm->scatter(mt, stacked, r),
                      Catch::Contains("[scatter] output") && Catch::Contains("contiguous"));
  REQUIRE_THROWS_WITH(comm->scatter(block, stacked, n),
                      Catch::Contains("[scatter] root " + std::to_string(n) + " out of range"));
  REQUIRE_THROWS_WITH(comm->scatter(block, stacked, -1), Catch::Contains("[scatter] root -1"));
  // A CUDA tensor cannot even be created without CUDA; the message then comes from dtensor/tensor/.
  // Everyone is still in step: a collective afterwards works.
  Tensor ok = make_tensor<int32_t>(2, [](int64_t) { return 1; });
  comm->all_reduce(ok, ReduceOp::kSum)->wait();
  CHECK(element<int32_t>(ok, 0) == n);
}

TEST_CASE("names of ops and collectives", "[collectives][names]") {
  CHECK(reduce_op_name(ReduceOp::kSum) == "sum");
  CHECK(reduce_op_name(ReduceOp::kAvg) == "avg");
  CHECK(reduce_op_name(ReduceOp::kMax) == "max");
  CHECK(reduce_op_name(ReduceOp::kMin) == "min");
  CHECK(reduce_op_name(ReduceOp::kProduct) == "product");
  const char* names[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast",
                         "send",       "recv",       "barrier",        "scatter"};
  REQUIRE(kNumCollectiveKinds == 9);
  for (int k = 0; k < kNumCollectiveKinds; ++k) {
    CHECK(collective_name(static_cast<CollectiveKind>(k)) == names[k]);
  }
}

TEST_CASE("collective timeout: environment value and API override", "[collectives][deadline]") {
  // The mpi test entries run with DTENSOR_COLLECTIVE_TIMEOUT=120.
  const double initial = collective_timeout();
  const char* env = std::getenv("DTENSOR_COLLECTIVE_TIMEOUT");
  if (env != nullptr) CHECK(initial == std::strtod(env, nullptr));
  set_collective_timeout(2.5);
  CHECK(collective_timeout() == 2.5);
  REQUIRE_THROWS_WITH(set_collective_timeout(0.0), Catch::Contains("[set_collective_timeout]"));
  REQUIRE_THROWS_WITH(set_collective_timeout(-1.0), Catch::Contains("[set_collective_timeout]"));
  CHECK(collective_timeout() == 2.5);
  set_collective_timeout(initial);
  CHECK(collective_timeout() == initial);
}

}  // namespace dtensor::test
