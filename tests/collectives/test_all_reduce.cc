// all_reduce and reduce_scatter against closed-form / loop expectations, every dtype and op.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/runtime.h"
#include "tests/collectives/collective_test_util.h"

namespace dtensor::test {
namespace {

// Rank r's element i for each reduce op (chosen so every result is exact in every dtype,
// including bfloat16's 8-bit mantissa). bool uses its own patterns.
template <typename T>
double value(ReduceOp op, int r, int64_t i) {
  if constexpr (std::is_same_v<T, bool>) {
    if (op == ReduceOp::kMin || op == ReduceOp::kProduct) return (r + i) % 3 != 0;
    return (r + i) % 3 == 0;
  } else {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        // Negative for odd i, so the truncating integer average is exercised both ways.
        return (i % 2 ? -1.0 : 1.0) * static_cast<double>((r + 1) + (i % 5));
      case ReduceOp::kMax:
      case ReduceOp::kMin:
        return static_cast<double>((r * 7 + i * 3) % 11) - 5.0;
      case ReduceOp::kProduct: {
        const int64_t k = (r + i) % 4;
        return k == 0 ? 2.0 : (k == 1 ? -1.0 : 1.0);
      }
    }
    return 0.0;
  }
}

// The reduction over ranks 0..n-1 of value(op, r, i), computed in double (exact here).
template <typename T>
double expected(ReduceOp op, int n, int64_t i) {
  double acc = value<T>(op, 0, i);
  for (int r = 1; r < n; ++r) {
    const double v = value<T>(op, r, i);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc = std::is_same_v<T, bool> ? static_cast<double>(acc != 0.0 || v != 0.0) : acc + v;
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, v);
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, v);
        break;
      case ReduceOp::kProduct:
        acc = std::is_same_v<T, bool> ? static_cast<double>(acc != 0.0 && v != 0.0) : acc * v;
        break;
    }
  }
  if (op == ReduceOp::kAvg) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<double>(static_cast<int64_t>(acc) / n);  // truncating
    } else {
      return acc / n;
    }
  }
  return acc;
}

template <typename T>
std::vector<ReduceOp> ops_for() {
  if constexpr (std::is_same_v<T, bool>) {
    return {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kProduct};
  } else {
    return {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kProduct};
  }
}

}  // namespace

TEMPLATE_TEST_CASE("all_reduce matches the reduction over ranks, in place and out of place",
                   "[collectives][all_reduce]", float, double, Half, BFloat16, int32_t, int64_t,
                   bool) {
  using T = TestType;
  auto comm = world_communicator();
  const int n = comm->size(), r = comm->rank();
  const int64_t numel = GENERATE(int64_t{0}, int64_t{1}, int64_t{7}, int64_t{25});
  const bool out_of_place = GENERATE(false, true);
  for (ReduceOp op : ops_for<T>()) {
    INFO("op " << reduce_op_name(op) << ", numel " << numel << ", world " << n
               << (out_of_place ? ", out of place" : ", in place"));
    const Tensor in = make_tensor<T>(numel, [&](int64_t i) { return value<T>(op, r, i); });
    const Tensor before = in.clone();
    const Tensor out = out_of_place ? make_tensor<T>(numel, [](int64_t) { return 1.0; }) : in;
    CommDebugMode mode;
    WorkPtr work = out_of_place ? comm->all_reduce(out, in, op) : comm->all_reduce(in, op);
    REQUIRE(work != nullptr);
    work->wait();
    CHECK(work->is_completed());
    CHECK(mode.count(CollectiveKind::kAllReduce) == 1);
    CHECK(mode.total_count() == 1);
    int bad = 0;
    for (int64_t i = 0; i < numel; ++i) {
      const double want = representable<T>(expected<T>(op, n, i));
      if (!close<T>(element<T>(out, i), want) && bad++ < 3) {
        FAIL_CHECK("element " << i << ": got " << element<T>(out, i) << " want " << want);
      }
      // Out of place, the input is left as it was.
      if (out_of_place && element<T>(in, i) != element<T>(before, i) && bad++ < 3) {
        FAIL_CHECK("input element " << i << " changed: " << element<T>(in, i) << " was "
                                    << element<T>(before, i));
      }
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("out-of-place all_reduce on 2-d tensors, the same tensor twice, and bad arguments",
          "[collectives][all_reduce]") {
  auto comm = world_communicator();
  const int n = comm->size(), r = comm->rank();
  const Tensor in = make_tensor<float>(12, [&](int64_t i) { return r + i; }).view({4, 3});
  Tensor out = make_tensor<float>(12, [](int64_t) { return 0.0; }).view({4, 3});
  comm->all_reduce(out, in, ReduceOp::kMax)->wait();
  for (int64_t i = 0; i < 12; ++i) {
    CHECK(element<float>(out.view({12}), i) == (n - 1) + i);
    CHECK(element<float>(in.view({12}), i) == r + i);
  }
  // The very same tensor as output and input reduces in place.
  Tensor same = make_tensor<float>(5, [&](int64_t) { return r + 1; });
  comm->all_reduce(same, same, ReduceOp::kSum)->wait();
  for (int64_t i = 0; i < 5; ++i) CHECK(element<float>(same, i) == n * (n + 1) / 2.0);

  // Errors are raised before any communication, identically on every rank.
  const Tensor f5 = make_tensor<float>(5, [](int64_t) { return 1.0; });
  const Tensor f6 = make_tensor<float>(6, [](int64_t) { return 1.0; });
  const Tensor d5 = make_tensor<double>(5, [](int64_t) { return 1.0; });
  const Tensor b5 = make_tensor<bool>(5, [](int64_t) { return 1.0; });
  CommDebugMode mode;
  REQUIRE_THROWS_WITH(comm->all_reduce(f6, f5, ReduceOp::kSum), Catch::Contains("[all_reduce]") &&
                                                                    Catch::Contains("shape [6]") &&
                                                                    Catch::Contains("[5]"));
  REQUIRE_THROWS_WITH(comm->all_reduce(d5, f5, ReduceOp::kSum),
                      Catch::Contains("[all_reduce]") && Catch::Contains("dtype float64"));
  REQUIRE_THROWS_WITH(comm->all_reduce(b5, b5.clone(), ReduceOp::kAvg),
                      Catch::Contains("[all_reduce]") && Catch::Contains("avg"));
  REQUIRE_THROWS_WITH(
      comm->all_reduce(f5.view({5, 1}).expand({5, 2}).transpose(0, 1),
                       make_tensor<float>(10, [](int64_t) { return 1.0; }).view({2, 5}),
                       ReduceOp::kSum),
      Catch::Contains("[all_reduce]") && Catch::Contains("contiguous"));
  // Partly overlapping views of one buffer.
  const Tensor base = make_tensor<float>(8, [](int64_t) { return 1.0; });
  REQUIRE_THROWS_WITH(comm->all_reduce(base.narrow(0, 0, 5), base.narrow(0, 3, 5), ReduceOp::kSum),
                      Catch::Contains("[all_reduce]") && Catch::Contains("overlap"));
  REQUIRE_THROWS_AS(comm->all_reduce(Tensor(), f5, ReduceOp::kSum), Error);
  CHECK(mode.total_count() == 0);
}

TEST_CASE("all_reduce on a 2-d tensor and on a view of a larger tensor",
          "[collectives][all_reduce]") {
  auto comm = world_communicator();
  const int n = comm->size(), r = comm->rank();
  // A contiguous row block of a 2-d tensor: only that block is reduced.
  Tensor base = make_tensor<float>(12, [&](int64_t i) { return r + i; }).view({4, 3});
  Tensor rows = base.narrow(0, 1, 2);  // rows 1..2, contiguous
  comm->all_reduce(rows, ReduceOp::kSum)->wait();
  for (int64_t i = 0; i < 12; ++i) {
    const double own = r + i;
    const double sum = n * static_cast<double>(i) + n * (n - 1) / 2.0;
    CHECK(element<float>(base.view({12}), i) == ((i >= 3 && i < 9) ? sum : own));
  }
}

TEST_CASE("all_reduce avg of float16 and bfloat16 divides in float", "[collectives][all_reduce]") {
  auto comm = world_communicator();
  const int n = comm->size(), r = comm->rank();
  // sum over ranks of (r + 1) = n(n+1)/2; avg = (n+1)/2, exact in both formats.
  Tensor h = make_tensor<Half>(5, [&](int64_t) { return r + 1; });
  Tensor b = make_tensor<BFloat16>(5, [&](int64_t) { return r + 1; });
  comm->all_reduce(h, ReduceOp::kAvg)->wait();
  comm->all_reduce(b, ReduceOp::kAvg)->wait();
  for (int64_t i = 0; i < 5; ++i) {
    CHECK(element<Half>(h, i) == (n + 1) / 2.0);
    CHECK(element<BFloat16>(b, i) == (n + 1) / 2.0);
  }
}

TEMPLATE_TEST_CASE("reduce_scatter gives each rank the reduction of its block",
                   "[collectives][reduce_scatter]", float, double, Half, BFloat16, int32_t, int64_t,
                   bool) {
  using T = TestType;
  auto comm = world_communicator();
  const int n = comm->size(), r = comm->rank();
  const int64_t block = GENERATE(int64_t{0}, int64_t{1}, int64_t{5});
  for (ReduceOp op : ops_for<T>()) {
    INFO("op " << reduce_op_name(op) << ", block " << block << ", world " << n);
    // Element j of block b is element (b * 7 + j) of the closed-form pattern.
    Tensor in = make_tensor<T>(n * block, [&](int64_t k) {
      return value<T>(op, r,
                      (k / std::max<int64_t>(block, 1)) * 7 + k % std::max<int64_t>(block, 1));
    });
    Tensor out = make_tensor<T>(block, [](int64_t) { return 0.0; });
    comm->reduce_scatter(out, in, op)->wait();
    for (int64_t j = 0; j < block; ++j) {
      const double want = representable<T>(expected<T>(op, n, r * 7 + j));
      CHECK(close<T>(element<T>(out, j), want));
    }
  }
}

}  // namespace dtensor::test
