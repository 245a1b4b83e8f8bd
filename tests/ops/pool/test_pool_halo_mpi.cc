// Height-sharded max / avg pools exchange halos (mpirun at 1, 2 and 4 ranks): an input sharded
// on its first spatial dim (dim 2) keeps that shard, moves only its edge rows (one all-gather of
// the edges in forward, one reduce-scatter of their gradient in backward, never the whole
// input), and equals the single-device op in values, max pool indices and input gradients, for
// 1-d, 2-d and 3-d pools, strides that make a shard's output rows read past a fixed halo,
// padding, dilation, ceil_mode, count_include_pad, and even, uneven and empty shards.
#include <catch2/catch.hpp>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/pool/pool.h"
#include "dtensor/ops/reduction/reduction.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace st = dtensor::test;
using dt::DTensor;
using dt::Placements;
using dt::Shard;
using dt::Tensor;

namespace {

struct Case {
  int64_t nd, k, s, p, d;
  bool max, ceil, include_pad;
};

// The pool of `c` on x (Tensor or DTensor): values, and indices for a max pool.
template <typename X>
std::vector<X> pool(const X& x, const Case& c) {
  const st::Ints k(c.nd, c.k), s(c.nd, c.s), p(c.nd, c.p), d(c.nd, c.d);
  if (c.max) {
    if (c.nd == 1) {
      auto r = dt::max_pool1d_with_indices(x, k, s, p, d, c.ceil);
      return {r.values, r.indices};
    }
    if (c.nd == 2) {
      auto r = dt::max_pool2d_with_indices(x, k, s, p, d, c.ceil);
      return {r.values, r.indices};
    }
    auto r = dt::max_pool3d_with_indices(x, k, s, p, d, c.ceil);
    return {r.values, r.indices};
  }
  if (c.nd == 1) return {dt::avg_pool1d(x, k, s, p, c.ceil, c.include_pad)};
  if (c.nd == 2) return {dt::avg_pool2d(x, k, s, p, c.ceil, c.include_pad)};
  return {dt::avg_pool3d(x, k, s, p, c.ceil, c.include_pad)};
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {2, 3, 1, 1, 1, true, false, true},   // size-keeping: a halo of one row each side
      {2, 3, 2, 1, 1, true, true, true},    // stride 2, ceil_mode (the classic ResNet stem pool)
      {2, 2, 2, 0, 1, true, false, true},   // non-overlapping windows: no halo at even splits
      {2, 3, 1, 2, 2, true, false, true},   // dilation 2
      {1, 4, 3, 2, 1, true, true, true},    // 1-d, stride 3: output chunks drift off the input's
      {3, 3, 2, 1, 1, true, false, true},   // 3-d
      {2, 3, 1, 1, 1, false, false, true},  // avg, count_include_pad
      {2, 3, 2, 1, 1, false, true, false},  // avg, ceil_mode, divisor clipped to the input
      {1, 5, 2, 2, 1, false, false, false}, {3, 2, 2, 1, 1, false, true, true},
  };
  return all;
}

}  // namespace

TEST_CASE("dtensor pools on height-sharded inputs exchange halos: values, indices, gradients") {
  for (const dt::DeviceMesh& mesh : st::family_meshes()) {
    const int64_t md = mesh.ndim(), m = md - 1, wm = mesh.size(m);
    // Even, uneven and short heights (a 1-row input leaves empty shards at 2 and 4 ranks).
    for (const int64_t height : {4 * wm, 3 * wm + 1, wm + 2, int64_t{3}, int64_t{1}}) {
      for (const Case& c : cases()) {
        if (height + 2 * c.p < c.d * (c.k - 1) + 1) continue;  // no output row
        INFO("mesh " << mesh.str() << " height " << height << " nd " << c.nd << " k " << c.k
                     << " s " << c.s << " p " << c.p << " d " << c.d << " max " << c.max << " ceil "
                     << c.ceil << " include_pad " << c.include_pad);
        st::Ints shape = {2, 3, height};
        for (int64_t i = 1; i < c.nd; ++i) shape.push_back(4 + i);
        const Tensor x = st::det_input(shape, 5, -1.0, 0.37, dt::kFloat64);
        const auto run = [&](const Placements& px) {
          DTensor dx = dt::distribute_tensor(x, mesh, px);
          dx.requires_grad_();
          const std::vector<DTensor> y = pool(dx, c);
          dt::sum(dt::mul(y[0], y[0])).backward();
          std::vector<Tensor> out;
          for (const DTensor& t : y) out.push_back(t.full_tensor());
          out.push_back(dx.grad().full_tensor());
          return out;
        };
        Placements px(md);
        px[m] = Shard(2);
        const std::vector<Tensor> want = run(Placements(md)), got = run(px);
        REQUIRE(got.size() == want.size());
        for (size_t i = 0; i < want.size(); ++i) {
          INFO("output " << i);
          CHECK(st::same_values(got[i], want[i], 1e-10));
        }
        // Only edge rows move, point to point: in forward at most span + stride rows per rank
        // and receiving rank (less than a shard at stride 1 and a narrow window; with a stride
        // the output chunks drift from the input chunks and a rank may read a neighbour's whole
        // shard); the output stays height-sharded; the backward sends each received piece's
        // gradient back to its owner (at most one message per message received in forward: a
        // max pool's forward exchanges more than its gradient needs back).
        using dt::CollectiveKind;
        DTensor sx = dt::distribute_tensor(x, mesh, px);
        sx.requires_grad_();
        dt::CommDebugMode fwd;
        const std::vector<DTensor> y = pool(sx, c);
        CHECK(fwd.total_count() ==
              fwd.count(CollectiveKind::kSend) + fwd.count(CollectiveKind::kRecv));
        const int64_t row_bytes = x.numel() / height * 8, span = c.d * (c.k - 1) + 1;
        CHECK(fwd.bytes(CollectiveKind::kSend) <=
              fwd.count(CollectiveKind::kSend) * (span + c.s) * row_bytes);
        if (height == 4 * wm && wm > 1 && c.s == 1 && span < 4) {
          CHECK(fwd.count(CollectiveKind::kSend) <= 2);
          CHECK(fwd.bytes(CollectiveKind::kSend) < x.numel() * 8 / wm);
        }
        for (const DTensor& t : y) CHECK(t.placements() == px);
        dt::CommDebugMode bwd;
        dt::sum(dt::mul(y[0], y[0])).backward();
        CHECK(bwd.count(CollectiveKind::kAllGather) == 0);
        CHECK(bwd.count(CollectiveKind::kReduceScatter) == 0);
        CHECK(bwd.count(CollectiveKind::kSend) <= fwd.count(CollectiveKind::kRecv));
        CHECK(bwd.count(CollectiveKind::kRecv) <= fwd.count(CollectiveKind::kSend));
      }
    }
  }
}
