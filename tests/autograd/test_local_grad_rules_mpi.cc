// The gradient rules of the boundary between DTensors and local values (to_local_dtensor(),
// full_tensor_dtensor(), from_local and their grad_placements): every round trip through them gives
// the exact gradient, for every placement kind (Shard, Replicate, Partial sum/avg/max/min) on 1-D
// and 2-D meshes, even, uneven and empty shards, and Partial values whose pieces differ across
// ranks. The expected gradients are closed forms (d/dX sum(X * W) = W, d/dX sum(X * X) = 2 X); the
// rules are PyTorch 2.15's (a Partial placement's gradient is Replicate unless grad_placements
// says otherwise), which PyTorch computes equal to these on the same graphs.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "dtensor/autograd/engine.h"
#include "dtensor/core/factories.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "tests/common/dtensor_test_util.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace tt = dtensor::test;
namespace tp = dtensor::test::placements;
using dt::DTensor;
using dt::Placement;
using dt::Placements;
using dt::Tensor;

namespace {

const dt::TensorOptions kF64(dt::kFloat64);

// A leaf DTensor laid out as `p` whose logical value is `x`. On a Partial mesh dim the pieces
// differ across the dim's ranks (a sum/avg perturbation that cancels over the dim; for max/min
// every rank but the dim's first holds a smaller/larger value), so a rule that confuses a piece
// with the value shows.
DTensor leaf(const Tensor& x, const dt::DeviceMesh& mesh, const Placements& p) {
  const DTensor d = dt::distribute_tensor(x, mesh, p, std::nullopt);
  Tensor piece = d.to_local().clone();
  if (mesh.contains_me()) {
    const Tensor shift = tt::expected_block(tt::det_input(x.shape(), 5, -1.0, 0.25, dt::kFloat64),
                                            mesh, dt::without_partial(d.spec()));
    const auto coord = mesh.get_coordinate();
    for (size_t m = 0; m < p.size(); ++m) {
      if (!p[m].is_partial()) continue;
      const double c = static_cast<double>(coord[m]);
      const double k = static_cast<double>(mesh.size(static_cast<int64_t>(m)));
      switch (p[m].reduce_op()) {
        case dt::ReduceOp::kSum:
        case dt::ReduceOp::kAvg:
          piece = piece + shift * dt::Scalar(c - (k - 1) / 2);
          break;
        case dt::ReduceOp::kMax:
          piece = piece - (shift * shift + dt::Scalar(1.0)) * dt::Scalar(c);
          break;
        default:
          piece = piece + (shift * shift + dt::Scalar(1.0)) * dt::Scalar(c);
          break;
      }
    }
  }
  DTensor out = DTensor::from_local(piece, mesh, p, /*run_check=*/false, x.shape());
  out.requires_grad_();
  return out;
}

// The placement lists to try: every kind on every mesh dim, without two different Partial ops
// in one list (PyTorch's from_local refuses those).
std::vector<Placements> layouts(size_t ndim) {
  const std::vector<Placement> kinds = {tp::S0,   tp::S1,   tp::R,   tp::Psum,
                                        tp::Pavg, tp::Pmax, tp::Pmin};
  std::vector<Placements> out;
  for (const Placements& p : tt::all_placements(kinds, ndim)) {
    const Placement* partial = nullptr;
    bool mixed = false;
    for (const Placement& q : p) {
      if (!q.is_partial()) continue;
      mixed |= partial != nullptr && !(*partial == q);
      partial = &q;
    }
    if (!mixed) out.push_back(p);
  }
  return out;
}

struct Case {
  std::string name;
  // Builds the loss (a DTensor scalar, global or per rank) from the leaf; its gradient with
  // respect to the leaf's value must be `want`.
  std::function<DTensor(const DTensor&)> loss;
  bool twice_x;  // want = 2 X (else W)
};

}  // namespace

TEST_CASE("local / full / from_local round trips give exact gradients for every placement") {
  const int64_t w = dt::world_size();
  std::vector<tt::Ints> meshes = {{w}};
  if (w % 2 == 0 && w > 2) meshes.push_back({2, w / 2});
  int64_t checked = 0;
  for (const tt::Ints& mesh_shape : meshes) {
    const dt::DeviceMesh mesh = tt::make_mesh(mesh_shape);
    const Placements all_r(mesh_shape.size(), dt::Replicate());
    // Uneven rows (2w + 1), and a shape where the last rank's row shard is empty (w - 1 rows).
    for (const tt::Ints& shape :
         {tt::Ints{2 * w + 1, 3}, tt::Ints{std::max<int64_t>(w - 1, 1), 2}}) {
      const Tensor x = tt::det_input(shape, 1, -2.0, 0.5, dt::kFloat64);
      const Tensor wt = tt::det_input(shape, 3, -1.0, 0.25, dt::kFloat64);
      const DTensor wd = dt::distribute_tensor(wt, mesh, all_r, std::nullopt);
      for (const Placements& p : layouts(mesh_shape.size())) {
        bool partial = false;
        for (const Placement& q : p) partial |= q.is_partial();
        const Placements kept(p.begin(), p.end());
        std::vector<Case> cases = {
            {"sum(from_local(x.to_local_dtensor(), p) * W)",
             [&](const DTensor& l) {
               return dt::sum(DTensor::from_local(l.to_local_dtensor(), mesh, kept, false, shape) *
                              wd);
             },
             false},
            {"sum(x.full_tensor_dtensor() * W) on every rank",
             [&](const DTensor& l) {
               return dt::sum(l.full_tensor_dtensor() * dt::local_dtensor(wt));
             },
             false},
            {"sum(from_local(x.full_tensor_dtensor(), R) * W)",
             [&](const DTensor& l) {
               return dt::sum(
                   DTensor::from_local(l.full_tensor_dtensor(), mesh, all_r, false, shape) * wd);
             },
             false},
            {"sum(x.to_local_dtensor() * W's block) on every rank",
             [&](const DTensor& l) {
               const Tensor block = tt::expected_block(wt, mesh, dt::without_partial(l.spec()));
               return dt::sum(l.to_local_dtensor() * dt::local_dtensor(block));
             },
             false},
            {"sum(x.full_tensor_dtensor() * x.full_tensor_dtensor())",
             [&](const DTensor& l) {
               return dt::sum(l.full_tensor_dtensor() * l.full_tensor_dtensor());
             },
             true},
            {"sum(from_local(x.to_local_dtensor(), p) * x)",
             [&](const DTensor& l) {
               return dt::sum(DTensor::from_local(l.to_local_dtensor(), mesh, kept, false, shape) *
                              l);
             },
             true},
        };
        if (partial) {
          // Explicit Partial grad_placements on both sides: the pieces of the gradient travel
          // through the local values and sum to it.
          cases.push_back({"sum(from_local(x.to_local_dtensor(p), p, grad_placements p) * W)",
                           [&](const DTensor& l) {
                             return dt::sum(DTensor::from_local(l.to_local_dtensor(kept), mesh,
                                                                kept, false, shape, {}, kept) *
                                            wd);
                           },
                           false});
        }
        for (const Case& c : cases) {
          CAPTURE(tt::describe(mesh_shape, shape, dt::kFloat64), dt::placements_str(p), c.name);
          const DTensor x_leaf = leaf(x, mesh, p);
          REQUIRE(tt::same_values(x_leaf.full_tensor(), x, 1e-12));
          c.loss(x_leaf).backward();
          REQUIRE(x_leaf.grad().defined());
          const Tensor want = c.twice_x ? x * dt::Scalar(2.0) : wt;
          CHECK(tt::same_values(x_leaf.grad().full_tensor(), want, 1e-12));
          ++checked;
        }
      }
    }
  }
  CHECK(checked > 0);
}

TEST_CASE("from_local rejects grad_placements of the wrong length") {
  const dt::DeviceMesh mesh = tt::make_mesh({dt::world_size()});
  DTensor l = dt::local_dtensor(dt::ones({2, 3}, kF64));
  l.requires_grad_();
  CHECK_THROWS_WITH(
      DTensor::from_local(l, mesh, {dt::Shard(0)}, false, {}, {}, {dt::Replicate(), dt::Shard(0)}),
      Catch::Contains("[from_local]"));
}
