// Grouped-query attention on DTensors (mpirun at 1, 2, 4 ranks): with q and k/v both sharded
// by head and each rank's q heads mapping onto its own k/v heads, scaled_dot_product_attention
// (enable_gqa) runs with no collective, forward and backward (repeat_interleave keeps the head
// shard; its gradient sums each group locally), and equals the single-device op with its
// gradients; also batch x head on a 2-D mesh (2 k/v heads over its head dim of 2 at 4 ranks:
// aligned for the mesh dim that shards them, not for the whole mesh), uneven aligned heads (3
// k/v heads on 4 ranks), and query-sharded q over whole k/v, each top-left causal, bottom-right
// causal (PyTorch's causal_lower_right) or not, for a prefill (L == S), a prefill after a prefix (L
// < S) and a decode step (L == 1).
#include <catch2/catch.hpp>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/ops/attention/attention.h"
#include "dtensor/ops/view/copy_ops.h"
#include "tests/common/ops_dtensor_test_util.h"
#include "tests/ops/attention/attention_reference.h"

namespace dt = dtensor;
namespace tt = dtensor::test;
using dt::CausalAlign;
using dt::DTensor;
using dt::Placements;
using dt::Replicate;
using dt::Shard;
using dt::Tensor;

namespace {

struct Layout {
  Placements q, kv;
  // Head-sharded k/v: no collective in backward either (the gradient's group sums stay on
  // their ranks). Whole k/v receive partial gradients, reduced as they accumulate.
  bool no_comm_backward;
};

// The layouts of `mesh`: head-sharded (batch x head on a 2-D mesh), and query-sharded with k/v
// whole.
std::vector<Layout> layouts(const dt::DeviceMesh& mesh) {
  if (mesh.ndim() == 1) {
    return {{{Shard(1)}, {Shard(1)}, true}, {{Shard(2)}, {Replicate()}, false}};
  }
  return {{{Shard(0), Shard(1)}, {Shard(0), Shard(1)}, true},
          {{Shard(1), Shard(2)}, {Replicate(), Replicate()}, false}};
}

}  // namespace

TEST_CASE("grouped-query attention keeps the head sharding with no collective") {
  const int64_t w = dt::world_size();
  const int64_t B = 3, E = 4, Ev = 3, group = 2;
  // Even heads (2w); w - 1 heads: aligned on 4 ranks ([1, 1, 1, 0] k/v heads, [2, 2, 2, 0] q
  // heads), not on 2 (there the heads are gathered, values still equal); 2 heads: over the
  // head dim of a 2-D mesh (dp 2 x tp 2 at 4 ranks, the tiny Llama's kv heads) but not over 4.
  for (int64_t hk : {2 * w, std::max<int64_t>(w - 1, 1), int64_t{2}}) {
    const int64_t H = hk * group;
    struct Lengths {
      int64_t L, S;
    };
    for (const Lengths len :
         {Lengths{2 * w + 1, 2 * w + 1}, Lengths{3, 2 * w + 3}, Lengths{1, 5}}) {
      const Tensor q = tt::det_input({B, H, len.L, E}, 1, -1.0, 0.25, dt::kFloat64);
      const Tensor k = tt::det_input({B, hk, len.S, E}, 2, -1.0, 0.25, dt::kFloat64);
      const Tensor v = tt::det_input({B, hk, len.S, Ev}, 3, -1.0, 0.25, dt::kFloat64);
      const Tensor up = tt::det_input({B, H, len.L, Ev}, 4, -1.0, 0.25, dt::kFloat64);
      for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
        // Every rank's q heads map onto its own k/v heads: Hk divisible by the ranks sharding
        // the heads (the last mesh dim), or the uneven 3 on a 1-D mesh of 4.
        const int64_t tp = mesh.size(mesh.ndim() - 1);
        const bool heads_aligned = hk % tp == 0 || (mesh.ndim() == 1 && w == 4 && hk == 3);
        for (const Layout& lay : layouts(mesh)) {
          const bool aligned = heads_aligned || lay.q[mesh.ndim() - 1] == Shard(2);
          for (int causal : {0, 1, 2}) {  // none, top-left, bottom-right
            const int64_t shape[] = {B, H, len.L};
            INFO(tt::describe(mesh, {lay.q, lay.kv}, shape)
                 << " hk " << hk << " L " << len.L << " S " << len.S << " causal " << causal);
            const CausalAlign align =
                causal == 2 ? CausalAlign::kLowerRight : CausalAlign::kUpperLeft;
            DTensor dq = dt::distribute_tensor(q, mesh, lay.q, std::nullopt);
            DTensor dk = dt::distribute_tensor(k, mesh, lay.kv, std::nullopt);
            DTensor dv = dt::distribute_tensor(v, mesh, lay.kv, std::nullopt);
            for (DTensor* t : {&dq, &dk, &dv}) t->requires_grad_();
            const DTensor grad = dt::distribute_tensor(up, mesh, lay.q, std::nullopt);
            DTensor out;
            {
              dt::CommDebugMode comm;
              out = dt::scaled_dot_product_attention(dq, dk, dv, DTensor(), 0.0, causal > 0, 0.6,
                                                     /*enable_gqa=*/true, align);
              if (aligned) CHECK(comm.total_count() == 0);
            }
            for (int64_t m = 0; m < mesh.ndim(); ++m) {  // a mesh dim of one rank: a relabel
              if (aligned && mesh.size(m) > 1) CHECK(out.placements()[m] == lay.q[m]);
            }
            {
              dt::CommDebugMode comm;
              out.backward(grad);
              if (aligned && lay.no_comm_backward) CHECK(comm.total_count() == 0);
            }

            // The single-device reference: the math path on k/v repeated for each q head.
            DTensor a = dt::local_dtensor(q.clone()), b = dt::local_dtensor(k.clone()),
                    c = dt::local_dtensor(v.clone());
            for (DTensor* t : {&a, &b, &c}) t->requires_grad_();
            const DTensor want = tt::attention_reference(
                a, dt::repeat_interleave(b, group, 1), dt::repeat_interleave(c, group, 1),
                DTensor(), causal > 0, 0.6, causal == 2 ? len.S - len.L : 0);
            want.backward(dt::local_dtensor(up));
            CHECK(tt::same_values(out.full_tensor(), want.to_local(), 1e-12));
            CHECK(tt::same_values(dq.grad().full_tensor(), a.grad().to_local(), 1e-12));
            CHECK(tt::same_values(dk.grad().full_tensor(), b.grad().to_local(), 1e-12));
            CHECK(tt::same_values(dv.grad().full_tensor(), c.grad().to_local(), 1e-12));
          }
        }
      }
    }
  }
}
