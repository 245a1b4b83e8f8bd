// Floating sums, averages and products reduce in rank order at every message size
// (dtensor/collectives/mpi/rank_ordered_reduce.h): the bits of an element do not depend on the
// message it travels in (a gradient alone or inside a bucket) nor on the collective (all_reduce,
// reduce_scatter). The expectations are computed here by the same left fold over the ranks'
// values, regenerated on every rank, and compared bit for bit.
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/mpi/rank_ordered_reduce.h"
#include "dtensor/collectives/runtime.h"
#include "tests/collectives/collective_test_util.h"

namespace dtensor::test {
namespace {

// Rank r's values: magnitudes spread over 2^-20 .. 2^20 with both signs (sums whose association
// shows in the last bits), or factors near 1 for products (no overflow on 8 ranks).
template <typename T>
std::vector<T> values(int r, int64_t n, ReduceOp op) {
  std::mt19937_64 gen(1000 + static_cast<uint64_t>(r));
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<T> v(static_cast<size_t>(n));
  for (T& x : v) {
    const double u = unit(gen);
    if (op == ReduceOp::kProduct) {
      x = from_double<T>(1.0 + (u - 0.5) / 7.0);
    } else {
      x = from_double<T>((unit(gen) < 0.5 ? -1.0 : 1.0) *
                         std::ldexp(1.0 + u, static_cast<int>(unit(gen) * 40) - 20));
    }
  }
  return v;
}

// ((x0 op x1) op x2) ... in the type the reduction computes in (float for 16-bit types), then
// the average's division, then the rounding to T.
template <typename T>
std::vector<T> rank_fold(int world, int64_t n, ReduceOp op) {
  using Acc = std::conditional_t<is_float16_v<T>, float, T>;
  std::vector<Acc> acc(static_cast<size_t>(n));
  for (int r = 0; r < world; ++r) {
    const std::vector<T> v = values<T>(r, n, op);
    for (size_t i = 0; i < acc.size(); ++i) {
      const auto x = static_cast<Acc>(v[i]);
      if (r == 0) {
        acc[i] = x;
      } else {
        acc[i] = op == ReduceOp::kProduct ? acc[i] * x : acc[i] + x;
      }
    }
  }
  std::vector<T> out(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) {
    const Acc a = op == ReduceOp::kAvg ? acc[i] / static_cast<Acc>(world) : acc[i];
    out[i] = static_cast<T>(a);
  }
  return out;
}

template <typename T>
Tensor tensor_of(const std::vector<T>& v) {
  Tensor t = empty({static_cast<int64_t>(v.size())}, TensorOptions(dtype_of_v<T>));
  if (!v.empty()) std::memcpy(t.data_ptr(), v.data(), v.size() * sizeof(T));
  return t;
}

// Index of the first element whose bits differ, or -1.
template <typename T>
int64_t first_difference(const Tensor& got, const std::vector<T>& want, int64_t offset = 0) {
  const auto* g = static_cast<const unsigned char*>(got.data_ptr());
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(g + i * sizeof(T), &want[i], sizeof(T)) != 0) {
      return static_cast<int64_t>(i) + offset;
    }
  }
  return -1;
}

}  // namespace

TEMPLATE_TEST_CASE("floating all_reduce folds the ranks' values in rank order at every size",
                   "[collectives][all_reduce][rank_ordered]", float, double, BFloat16) {
  using T = TestType;
  auto comm = world_communicator();
  const int world = comm->size(), r = comm->rank();
  // Both sides of the gather-all threshold (16-bit types travel as float), uneven chunks, fewer
  // elements than ranks, several segments.
  const int64_t item = is_float16_v<T> ? 4 : static_cast<int64_t>(sizeof(T));
  const int64_t threshold = detail::kGatherAllBytes / (item * world);
  const int64_t segment = detail::kSegmentBytes / item;
  const int64_t n = GENERATE_COPY(int64_t{1}, int64_t{5}, threshold, threshold + 1, int64_t{100003},
                                  2 * segment + 7);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kProduct}) {
    // The segments: once (the largest case; regenerating every rank's values is the cost).
    if (n > 100003 && (op != ReduceOp::kSum || !std::is_same_v<T, double>)) continue;
    INFO("op " << reduce_op_name(op) << ", numel " << n << ", world " << world);
    const std::vector<T> want = rank_fold<T>(world, n, op);
    Tensor t = tensor_of(values<T>(r, n, op));
    comm->all_reduce(t, op)->wait();
    CHECK(first_difference(t, want) == -1);
  }
}

TEST_CASE("a bucket reduces each gradient to the bits it gets alone; reduce_scatter agrees",
          "[collectives][all_reduce][rank_ordered]") {
  // The property dtensor::compile's bucketing pass and data parallel's buckets rely on: one
  // all_reduce over [a, b] gives what all_reduce(a) and all_reduce(b) give, and reduce_scatter
  // gives each rank its block of the all_reduce (P -> S -> R equals P -> R).
  auto comm = world_communicator();
  const int world = comm->size(), r = comm->rank();
  const int64_t small = 37, large = 5 * detail::kGatherAllBytes / 8 + 3;  // float64 elements
  const std::vector<double> va = values<double>(r, small, ReduceOp::kSum);
  const std::vector<double> vb = values<double>(r + 17, large, ReduceOp::kSum);
  std::vector<double> both = va;
  both.insert(both.end(), vb.begin(), vb.end());
  Tensor a = tensor_of(va), b = tensor_of(vb), bucket = tensor_of(both);
  comm->all_reduce(a, ReduceOp::kSum)->wait();
  comm->all_reduce(b, ReduceOp::kSum)->wait();
  comm->all_reduce(bucket, ReduceOp::kSum)->wait();
  std::vector<double> alone(a.data<double>(), a.data<double>() + small);
  alone.insert(alone.end(), b.data<double>(), b.data<double>() + large);
  CHECK(first_difference(bucket, alone) == -1);

  // reduce_scatter of world blocks of `block` elements: block r of the all_reduce (one round,
  // then blocks whose total exceeds a segment: several rounds).
  for (const int64_t block : {int64_t{1001}, detail::kSegmentBytes / (8 * world) + 5}) {
    INFO("block " << block);
    const std::vector<double> vs = values<double>(r + 40, block * world, ReduceOp::kAvg);
    Tensor reduced = tensor_of(vs);
    comm->all_reduce(reduced, ReduceOp::kAvg)->wait();
    Tensor mine = empty({block}, TensorOptions(kFloat64));
    comm->reduce_scatter(mine, tensor_of(vs), ReduceOp::kAvg)->wait();
    const std::vector<double> want(reduced.data<double>() + r * block,
                                   reduced.data<double>() + (r + 1) * block);
    CHECK(first_difference(mine, want) == -1);
  }
}

TEST_CASE("a sub-communicator folds in its own rank order", "[collectives][rank_ordered]") {
  // The ranks split into two groups in reverse world order (key = -rank): the group's rank k is
  // the fold's k-th term, whatever its world rank.
  auto world_comm = world_communicator();
  const int wr = world_comm->rank();
  auto comm = world_comm->split(wr % 2, -wr);
  const int n = comm->size(), r = comm->rank();
  const int64_t count = 3 * detail::kGatherAllBytes / 8;  // float64: the large path at 3+ ranks
  INFO("group " << wr % 2 << " of " << n << " ranks, rank " << r);
  const std::vector<double> want = rank_fold<double>(n, count, ReduceOp::kSum);
  Tensor t = tensor_of(values<double>(r, count, ReduceOp::kSum));
  comm->all_reduce(t, ReduceOp::kSum)->wait();
  CHECK(first_difference(t, want) == -1);
}

}  // namespace dtensor::test
