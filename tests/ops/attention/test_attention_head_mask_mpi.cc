// A mask broadcast over the heads ([B, 1, L, S], PyTorch's shape for a padding mask; issue 43
// R1 E) (mpirun at 1, 2, 4 ranks): the kernels give bit for bit what the mask expanded to
// [B, H, L, S] gives, forward and backward, bool and additive, causal or not (a [1, 1, L, S]
// mask too), without a copy of it per head (memory_stats); on DTensors with the heads sharded
// the mask stays whole on every rank and no collective runs, forward or backward.
#include <catch2/catch.hpp>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/ops/attention/attention.h"
#include "dtensor/tensor/compare.h"
#include "dtensor/tensor/memory_stats.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace tt = dtensor::test;
using dt::DTensor;
using dt::Placements;
using dt::Replicate;
using dt::Shard;
using dt::Tensor;

namespace {

// A bool mask [Bm, 1, L, S], left padding as a batch of prompts has it: row b hides its
// first b keys (queries whose keys are all hidden give 0, as in PyTorch), and a few more.
Tensor padding_mask(int64_t Bm, int64_t L, int64_t S) {
  std::vector<int32_t> seen(static_cast<size_t>(Bm * L * S));
  for (int64_t b = 0; b < Bm; ++b) {
    for (int64_t i = 0; i < L; ++i) {
      for (int64_t j = 0; j < S; ++j) {
        seen[static_cast<size_t>((b * L + i) * S + j)] = j >= b && (i + 2 * j) % 5 != 3;
      }
    }
  }
  const int64_t shape[] = {Bm, 1, L, S};
  return dt::from_vector(seen, shape).to(dt::kBool);
}

// The mask as the op took it before: one copy per head.
Tensor per_head(const Tensor& mask, int64_t B, int64_t H) {
  return mask.expand({B, H, mask.size(2), mask.size(3)}).contiguous();
}

}  // namespace

TEST_CASE("attention: a mask broadcast over the heads equals the expanded one bit for bit",
          "[attention]") {
  const int64_t B = 3, H = 4, L = 5, S = 7, E = 4, Ev = 3;
  const Tensor q = tt::det_input({B, H, L, E}, 1, -1.0, 0.25, dt::kFloat64);
  const Tensor k = tt::det_input({B, H, S, E}, 2, -1.0, 0.25, dt::kFloat64);
  const Tensor v = tt::det_input({B, H, S, Ev}, 3, -1.0, 0.25, dt::kFloat64);
  const Tensor up = tt::det_input({B, H, L, Ev}, 4, -1.0, 0.25, dt::kFloat64);
  const Tensor up_lse = tt::det_input({B, H, L}, 5, -1.0, 0.25, dt::kFloat64);
  const std::vector<Tensor> masks = {
      padding_mask(B, L, S), padding_mask(1, L, S),
      tt::det_input({B, 1, L, S}, 6, -1.0, 0.25, dt::kFloat64)};  // additive
  for (const Tensor& mask : masks) {
    for (const bool causal : {false, true}) {
      INFO("mask " << dt::shape_str(mask.sizes()) << " " << dt::dtype_name(mask.dtype())
                   << " causal " << causal);
      const dt::AttentionParams p{.scale = 0.6, .causal = causal, .q_offset = S - L};
      const Tensor whole = per_head(mask, B, H);
      const dt::AttentionResult got = dt::attention_forward(q, k, v, mask, p);
      const dt::AttentionResult want = dt::attention_forward(q, k, v, whole, p);
      CHECK(dt::equal(got.out, want.out));
      CHECK(dt::equal(got.lse, want.lse));
      const dt::AttentionGrads g =
          dt::attention_backward(up, up_lse, q, k, v, mask, got.out, got.lse, p);
      const dt::AttentionGrads w =
          dt::attention_backward(up, up_lse, q, k, v, whole, want.out, want.lse, p);
      CHECK(dt::equal(g.q, w.q));
      CHECK(dt::equal(g.k, w.k));
      CHECK(dt::equal(g.v, w.v));
    }
  }
  // Only the heads (and the batch) broadcast: a mask of 2 heads for 4 is refused.
  CHECK_THROWS_WITH(dt::attention_forward(q, k, v, per_head(masks[0], B, 2), {}),
                    Catch::Contains("the mask has shape [3, 2, 5, 7], expected [5, 7] or "
                                    "[3, 4, 5, 7]"));
}

TEST_CASE("attention: a [B, 1, L, S] mask is not materialised per head (memory_stats)",
          "[attention]") {
  const int64_t B = 2, H = 8, L = 256, S = 256, E = 16;
  const Tensor q = tt::det_input({B, H, L, E}, 1, -1.0, 0.25);
  const Tensor k = tt::det_input({B, H, S, E}, 2, -1.0, 0.25);
  const Tensor v = tt::det_input({B, H, S, E}, 3, -1.0, 0.25);
  const Tensor mask = padding_mask(B, L, S);
  const dt::AttentionParams p{.scale = 0.25, .causal = true};
  // The bytes a call allocates above what was held before it (its peak).
  const auto peak_of = [](const auto& call) {
    dt::empty_cpu_cache();
    dt::reset_peak_memory_stats();
    const int64_t before = dt::memory_stats().current_bytes;
    call();
    return dt::memory_stats().peak_bytes - before;
  };
  const int64_t broadcast = peak_of([&] { dt::attention_forward(q, k, v, mask, p); });
  const int64_t expanded =
      peak_of([&] { dt::attention_forward(q, k, v, per_head(mask, B, H), p); });
  // The expanded call holds at least the float32 bias of H - 1 more heads.
  const int64_t saved = (H - 1) * B * L * S * 4;
  INFO("peak bytes: broadcast " << broadcast << ", expanded " << expanded);
  CHECK(expanded - broadcast >= saved);
}

TEST_CASE("head-sharded attention with a [B, 1, L, S] mask needs no collective") {
  const int64_t w = dt::world_size();
  const int64_t B = 2, H = 2 * w + 1, L = 3, S = 6, E = 4, Ev = 3;
  const Tensor q = tt::det_input({B, H, L, E}, 1, -1.0, 0.25, dt::kFloat64);
  const Tensor k = tt::det_input({B, H, S, E}, 2, -1.0, 0.25, dt::kFloat64);
  const Tensor v = tt::det_input({B, H, S, Ev}, 3, -1.0, 0.25, dt::kFloat64);
  const Tensor up = tt::det_input({B, H, L, Ev}, 4, -1.0, 0.25, dt::kFloat64);
  const Tensor mask = padding_mask(B, L, S);
  for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
    // Heads over the last mesh dim, the batch over the first of a 2-D mesh.
    const Placements heads =
        mesh.ndim() == 1 ? Placements{Shard(1)} : Placements{Shard(0), Shard(1)};
    const Placements mask_at =
        mesh.ndim() == 1 ? Placements{Replicate()} : Placements{Shard(0), Replicate()};
    for (const bool causal : {false, true}) {
      INFO("mesh " << mesh.str() << " causal " << causal);
      // The same call with the mask broadcast ([B, 1, L, S], whole along the heads) and
      // expanded ([B, H, L, S], cut like q's heads).
      struct Run {
        DTensor out, dq, dk, dv;
      };
      const auto run = [&](const Tensor& m, const Placements& m_at, bool expect_no_comm) {
        DTensor dq = dt::distribute_tensor(q, mesh, heads, std::nullopt);
        DTensor dk = dt::distribute_tensor(k, mesh, heads, std::nullopt);
        DTensor dv = dt::distribute_tensor(v, mesh, heads, std::nullopt);
        for (DTensor* t : {&dq, &dk, &dv}) t->requires_grad_();
        const DTensor dm = dt::distribute_tensor(m, mesh, m_at, std::nullopt);
        const DTensor grad = dt::distribute_tensor(up, mesh, heads, std::nullopt);
        DTensor out;
        {
          dt::CommDebugMode comm;
          out = dt::scaled_dot_product_attention(dq, dk, dv, dm, 0.0, causal, 0.6);
          if (expect_no_comm) CHECK(comm.total_count() == 0);
        }
        CHECK(out.placements() == heads);
        {
          dt::CommDebugMode comm;
          out.backward(grad);
          if (expect_no_comm) CHECK(comm.total_count() == 0);
        }
        return Run{out, dq.grad(), dk.grad(), dv.grad()};
      };
      const Run got = run(mask, mask_at, true);
      const Run want = run(per_head(mask, B, H), heads, false);
      CHECK(dt::equal(got.out.full_tensor(), want.out.full_tensor()));
      CHECK(dt::equal(got.dq.full_tensor(), want.dq.full_tensor()));
      CHECK(dt::equal(got.dk.full_tensor(), want.dk.full_tensor()));
      CHECK(dt::equal(got.dv.full_tensor(), want.dv.full_tensor()));
    }
  }
}
