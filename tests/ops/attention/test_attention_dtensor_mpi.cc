// scaled_dot_product_attention on DTensors (mpirun at 1, 2, 4 ranks): batch-, head- and
// query-sharded layouts on 1-D and 2-D meshes (uneven and empty shards) give the single-device
// result and gradients with no collective in the forward; a causal query-sharded call counts
// its rows from each block's global offset.
#include <catch2/catch.hpp>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/ops/attention/attention.h"
#include "dtensor/ops/reduction/reduction.h"
#include "tests/common/ops_dtensor_test_util.h"
#include "tests/ops/attention/attention_reference.h"

namespace dt = dtensor;
namespace tt = dtensor::test;
using dt::DTensor;
using dt::Placement;
using dt::Placements;
using dt::Replicate;
using dt::Shard;
using dt::Tensor;

TEST_CASE("attention on sharded q, k, v equals the single-device op, gradients included") {
  const int64_t w = dt::world_size();
  const int64_t B = 2, H = 2 * w + 1, L = 3 * w + 1, S = w + 2, E = 3, Ev = 2;
  const Tensor q = tt::det_input({B, H, L, E}, 1, -1.0, 0.25, dt::kFloat64);
  const Tensor k = tt::det_input({B, H, S, E}, 2, -1.0, 0.25, dt::kFloat64);
  const Tensor v = tt::det_input({B, H, S, Ev}, 3, -1.0, 0.25, dt::kFloat64);
  const Tensor up = tt::det_input({B, H, L, Ev}, 4, -1.0, 0.25, dt::kFloat64);
  Tensor mask = dt::gt(tt::det_input({L, S}, 5, -1.0, 0.25, dt::kFloat64), dt::Scalar(-0.6));
  mask.narrow(1, 0, 1).fill_(true);
  for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
    // [q's placement, k's and v's] per mesh dim: batch, heads, queries (k and v whole).
    const std::vector<std::pair<Placements, Placements>> layouts =
        mesh.ndim() == 1
            ? std::vector<std::pair<Placements, Placements>>{{{Shard(0)}, {Shard(0)}},
                                                             {{Shard(1)}, {Shard(1)}},
                                                             {{Shard(2)}, {Replicate()}}}
            : std::vector<std::pair<Placements, Placements>>{
                  {{Shard(0), Shard(1)}, {Shard(0), Shard(1)}},
                  {{Shard(1), Shard(2)}, {Shard(1), Replicate()}}};
    for (const auto& [qp, kp] : layouts) {
      for (bool causal : {false, true}) {
        for (bool masked : {false, true}) {
          const int64_t shape[] = {B, H, L};
          INFO(tt::describe(mesh, {qp, kp}, shape) << " causal " << causal << " mask " << masked);
          DTensor dq = dt::distribute_tensor(q, mesh, qp, std::nullopt);
          DTensor dk = dt::distribute_tensor(k, mesh, kp, std::nullopt);
          DTensor dv = dt::distribute_tensor(v, mesh, kp, std::nullopt);
          for (DTensor* t : {&dq, &dk, &dv}) t->requires_grad_();
          const Placements whole(static_cast<size_t>(mesh.ndim()), Replicate());
          const DTensor dmask =
              masked ? dt::distribute_tensor(mask, mesh, whole, std::nullopt) : DTensor();
          DTensor out;
          {
            dt::CommDebugMode comm;
            out = dt::scaled_dot_product_attention(dq, dk, dv, dmask, 0.0, causal, 0.7);
            CHECK(comm.total_count() == 0);
          }
          CHECK(out.placements() == qp);
          dt::sum(dt::mul(out, dt::distribute_tensor(up, mesh, qp, std::nullopt))).backward();

          // The single-device reference, through the math path.
          DTensor a = dt::local_dtensor(q.clone()), b = dt::local_dtensor(k.clone()),
                  c = dt::local_dtensor(v.clone());
          for (DTensor* t : {&a, &b, &c}) t->requires_grad_();
          const DTensor want = tt::attention_reference(
              a, b, c, masked ? dt::local_dtensor(mask) : DTensor(), causal, 0.7);
          dt::sum(dt::mul(want, dt::local_dtensor(up))).backward();
          CHECK(tt::same_values(out.full_tensor(), want.to_local(), 1e-12));
          CHECK(tt::same_values(dq.grad().full_tensor(), a.grad().to_local(), 1e-12));
          CHECK(tt::same_values(dk.grad().full_tensor(), b.grad().to_local(), 1e-12));
          CHECK(tt::same_values(dv.grad().full_tensor(), c.grad().to_local(), 1e-12));
        }
      }
    }
  }
}
