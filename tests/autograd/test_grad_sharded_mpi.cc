// Sharded gradients against single-device gradients (mpirun at 1, 2 and 4 ranks): for every
// differentiable registered op and each of its sample calls, with the inputs distributed over
// 1-D and 2-D meshes in many layouts (Replicate, every Shard dim, Partial(sum); even, uneven
// and empty shards: every op's samples leave some rank an empty shard), with the output's
// gradient Replicate and laid out as the output (so that the backward ops see sharded and
// empty gradient shards too), the leaves' gradients gathered equal the gradients of the same
// op on the full tensors, and each leaf's gradient has the leaf's placements. Plus the backward
// rules of redistribute for every source/target pair, and the gradient of from_local /
// to_local.
#include <absl/strings/str_join.h>

#include <catch2/catch.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/engine.h"
#include "dtensor/autograd/grad_mode.h"
#include "dtensor/autograd/node.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/embedding/embedding.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/reduction/reduction.h"
#include "tests/common/op_samples.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace tt = dtensor::test;
using dt::DTensor;
using dt::Placement;
using dt::Placements;
using dt::Tensor;

namespace {

Tensor make_input(const dt::SampleInput& in, uint64_t seed) {
  return tt::sample_values(in, seed, /*reals=*/true);
}

struct Result {
  std::vector<Tensor> grads;  // full gradients of the floating inputs (undefined otherwise)
  std::vector<Placements> grad_placements;
};

// Runs `op` on `full` laid out as `layout` on `mesh` (requires grad on floating inputs; in-place
// ops get a non-leaf self), backpropagates `v` (Replicate, or when `v_like_output` laid out as
// the output: its Shard dims kept, so that the backward ops receive sharded gradients) and
// gathers the gradients.
Result run(const dt::OpInfo& op, const std::vector<Tensor>& full,
           absl::Span<const dt::ArgValue> args, const dt::DeviceMesh& mesh,
           const std::vector<Placements>& layout, const std::vector<Tensor>& v,
           bool v_like_output = false) {
  std::vector<DTensor> leaves;
  for (size_t i = 0; i < full.size(); ++i) {
    DTensor d = dt::distribute_tensor(full[i], mesh, layout[i], std::nullopt);
    if (dt::is_floating(full[i].dtype())) d.requires_grad_();
    leaves.push_back(d);
  }
  std::vector<DTensor> in = leaves;
  if (op.inplace) in[0] = dt::mul(in[0], dt::Scalar(1.0));
  std::vector<const DTensor*> ptrs;
  for (const DTensor& t : in) ptrs.push_back(&t);
  const dt::DTensorList outs = dt::dispatch_multi(op, ptrs, args);
  std::vector<DTensor> roots, grads;
  for (size_t o = 0; o < outs.size(); ++o) {
    if (!v[o].defined() || !outs[o].requires_grad()) continue;
    roots.push_back(outs[o]);
    Placements vp(static_cast<size_t>(mesh.ndim()), dt::Replicate());
    if (v_like_output) {
      for (size_t m = 0; m < vp.size(); ++m) {
        if (outs[o].placements()[m].is_shard()) vp[m] = outs[o].placements()[m];
      }
    }
    grads.push_back(dt::distribute_tensor(v[o], mesh, vp, std::nullopt));
  }
  Result r;
  if (roots.empty()) return r;
  dt::autograd::backward(roots, grads);
  for (const DTensor& leaf : leaves) {
    r.grads.push_back(leaf.grad().defined() ? leaf.grad().full_tensor() : Tensor());
    r.grad_placements.push_back(leaf.grad().defined() ? leaf.grad().placements() : Placements());
  }
  return r;
}

// Input layouts to try: per mesh, every uniform placement list for input 0 with the others
// following it (the same list where it fits, else Replicate), then input 0 Replicate with the
// others laid out.
std::vector<std::vector<Placements>> layouts(const std::vector<Tensor>& full, int64_t mesh_ndim,
                                             bool in_place) {
  std::vector<std::vector<Placements>> out;
  auto choices = [&](const Tensor& t) {
    std::vector<Placement> c = tt::shard_choices(t.dim(), dt::is_floating(t.dtype()));
    return c;
  };
  const Placements all_r(static_cast<size_t>(mesh_ndim), dt::Replicate());
  auto fits = [&](const Placements& p, const Tensor& t) {
    for (const Placement& q : p) {
      if (q.is_shard() && q.dim() >= t.dim()) return false;
      if (q.is_partial() && !dt::is_floating(t.dtype())) return false;
    }
    return true;
  };
  for (const Placements& p : tt::all_placements(choices(full[0]), static_cast<size_t>(mesh_ndim))) {
    bool partial = false;
    for (const Placement& q : p) partial |= q.is_partial();
    if (partial && in_place) continue;  // self must keep its placements; a Partial one cannot
    std::vector<Placements> lay;
    for (const Tensor& t : full) lay.push_back(fits(p, t) ? p : all_r);
    out.push_back(lay);
  }
  for (size_t i = 1; i < full.size(); ++i) {
    for (const Placements& p :
         tt::all_placements(choices(full[i]), static_cast<size_t>(mesh_ndim))) {
      std::vector<Placements> lay(full.size(), all_r);
      lay[i] = p;
      out.push_back(lay);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("every op's gradients on sharded inputs equal the single-device gradients") {
  const dt::Registry& reg = dt::registered_ops();
  const int64_t w = dt::world_size();
  int64_t cases = 0, empty_cases = 0;
  // Differentiable ops with a layout that leaves some rank an empty shard of a non-empty input
  // (so that every backward also runs on such shards), and the ops there are.
  std::set<std::string> empty_shard_ops, differentiable;
  for (const std::string& name : reg.names()) {
    const dt::OpInfo& op = reg.get(name);
    if (!op.differentiable || !op.samples) continue;
    const std::vector<dt::OpSample> calls = op.samples(w);
    for (size_t si = 0; si < calls.size(); ++si) {
      const dt::OpSample& call = calls[si];
      std::vector<Tensor> full;
      bool floating = false;
      for (size_t i = 0; i < call.inputs.size(); ++i) {
        full.push_back(make_input(call.inputs[i], 31 * si + i + 1));
        floating |= dt::is_floating(full.back().dtype());
      }
      if (!floating) continue;
      differentiable.insert(name);
      // The single-device reference (this rank's self mesh).
      const dt::DeviceMesh self = dt::self_mesh();
      std::vector<Placements> local_layout(full.size(), Placements{dt::Replicate()});
      std::vector<DTensor> probe_in;
      for (const Tensor& t : full) probe_in.push_back(dt::local_dtensor(t));
      std::vector<const DTensor*> probe_ptrs;
      for (const DTensor& t : probe_in) probe_ptrs.push_back(&t);
      std::vector<Tensor> v;
      {
        dt::autograd::NoGradGuard no_grad;
        for (const DTensor& o : dt::dispatch_multi(op, probe_ptrs, call.args)) {
          v.push_back(dt::is_floating(o.dtype())
                          ? make_input({dt::TensorMeta(o.shape(), o.dtype()), -1, 1}, 97 + si)
                          : Tensor());
        }
      }
      const Result want = run(op, full, call.args, self, local_layout, v);
      for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
        for (const std::vector<Placements>& layout : layouts(full, mesh.ndim(), op.inplace)) {
          std::string desc = name + " sample " + std::to_string(si) + " mesh " +
                             dt::shape_str(mesh.shape()) + " inputs";
          for (const Placements& p : layout) desc += " " + dt::placements_str(p);
          INFO(desc);
          // Twice: a Replicate output gradient, and one laid out as the output.
          for (const bool v_like_output : {false, true}) {
            INFO((v_like_output ? "gradient laid out as the output" : "Replicate gradient"));
            const Result got = run(op, full, call.args, mesh, layout, v, v_like_output);
            ++cases;
            bool empty_shard = false;
            for (size_t i = 0; i < full.size(); ++i) {
              empty_shard |= tt::some_shard_empty(full[i].shape(), mesh, layout[i]);
            }
            if (empty_shard) {
              ++empty_cases;
              empty_shard_ops.insert(name);
            }
            REQUIRE(got.grads.size() == want.grads.size());
            for (size_t i = 0; i < full.size(); ++i) {
              if (!want.grads[i].defined()) continue;
              INFO("input " << i);
              REQUIRE(got.grads[i].defined());
              CHECK(tt::same_values(got.grads[i], want.grads[i], 1e-9));
              CHECK(got.grad_placements[i] == layout[i]);  // the leaf's own placements
            }
          }
        }
      }
    }
  }
  if (dt::world_rank() == 0) {
    std::printf(
        "sharded gradients: %lld runs checked (each layout with a Replicate gradient and "
        "one laid out as the output; %lld with an empty shard)\n",
        static_cast<long long>(cases), static_cast<long long>(empty_cases));
  }
  CHECK(cases > 0);
  // Every differentiable op's forward and backward run with an empty shard on some rank
  // (issue 39). Needs two ranks: on one, no shard of a non-empty tensor is empty.
  if (w >= 2) {
    std::vector<std::string> without_empty;
    for (const std::string& name : differentiable) {
      if (!empty_shard_ops.count(name)) without_empty.push_back(name);
    }
    INFO("ops whose samples never leave a rank an empty shard: " << absl::StrJoin(without_empty,
                                                                                  ", "));
    CHECK(without_empty.empty());
  }
}

TEST_CASE("embedding's gradient for a column-sharded table whose last block of columns is empty") {
  // Issue 39: a [7, 5] table S(1) on 4 ranks (columns 2, 2, 1, 0) with replicated indices: the
  // rank with no columns raised "[reshape] shape [-1, 0] is invalid for a tensor of 0 elements"
  // in embedding_backward while the others waited in their next collective until the deadline.
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = tt::make_mesh({w});
  const std::vector<int64_t> ids = {0, 3, 6, 3, 1, 5, 3, 0};
  for (const int64_t cols : {w + 1, w - 1}) {  // 4 ranks: 2, 2, 1, 0 and 1, 1, 1, 0
    if (cols < 1) continue;
    INFO("table [7, " << cols << "] S(1) on " << w << " ranks");
    const Tensor table = tt::det_input({7, cols}, 1, -2.5, 0.5, dt::kFloat64);
    const Tensor gout = tt::det_input({2, 4, cols}, 3, -1.5, 0.25, dt::kFloat64);
    DTensor weight = dt::distribute_tensor(table, mesh, {dt::Shard(1)});
    weight.requires_grad_();
    const DTensor indices =
        dt::distribute_tensor(dt::from_vector<int64_t>(ids, {2, 4}), mesh, {dt::Replicate()});
    const DTensor out = dt::embedding(indices, weight);  // [2, 4, cols] S(2)
    // The gradient laid out as the output: embedding_backward runs [S(1) | S(-1), R], on the
    // empty block of columns too.
    REQUIRE(out.placements() == Placements{dt::Shard(2)});
    out.backward(dt::distribute_tensor(gout, mesh, {dt::Shard(2)}));
    // Row r of the table's gradient: the sum of the output gradient's rows that looked r up.
    std::vector<double> want(static_cast<size_t>(7 * cols), 0.0);
    const std::vector<double> g = gout.to_vector<double>();
    for (size_t i = 0; i < ids.size(); ++i) {
      for (int64_t c = 0; c < cols; ++c) {
        want[static_cast<size_t>(ids[i] * cols + c)] += g[i * static_cast<size_t>(cols) + c];
      }
    }
    REQUIRE(weight.grad().defined());
    CHECK(weight.grad().placements() == Placements{dt::Shard(1)});
    CHECK(tt::same_values(weight.grad().full_tensor(), dt::from_vector<double>(want, {7, cols}),
                          1e-12));
  }
}

TEST_CASE("redistribute's gradient flows back to the source placements (PyTorch's rules)") {
  const int64_t w = dt::world_size();
  const Tensor x = tt::det_input({w * 3 + 1, 4}, 1, -2.5, 0.5, dt::kFloat64);
  const Tensor scale = tt::det_input({w * 3 + 1, 4}, 5, -1.5, 0.25, dt::kFloat64);
  for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
    const std::vector<Placement> choices = {dt::Replicate(), dt::Shard(0), dt::Shard(1),
                                            dt::Partial(), dt::Partial(dt::ReduceOp::kAvg)};
    for (const Placements& src : tt::all_placements(choices, mesh.ndim())) {
      for (const Placements& dst : tt::all_placements(choices, mesh.ndim())) {
        INFO("mesh " << dt::shape_str(mesh.shape()) << " " << dt::placements_str(src) << " -> "
                     << dt::placements_str(dst));
        DTensor a = dt::distribute_tensor(x, mesh, src, std::nullopt);
        a.requires_grad_();
        std::vector<Placements> seen;
        a.register_hook([&](const DTensor& g) {
          seen.push_back(g.placements());
          return DTensor();
        });
        const DTensor b = a.redistribute(dst);
        const DTensor s = dt::distribute_tensor(
            scale, mesh, Placements(static_cast<size_t>(mesh.ndim()), dt::Replicate()),
            std::nullopt);
        dt::sum(b * s).backward();
        // d sum(x * s) / dx = s, whatever the layouts.
        CHECK(tt::same_values(a.grad().full_tensor(), scale, 1e-12));
        CHECK(a.grad().placements() == src);
        // The rule, seen by the leaf's hook: Partial source dims receive Replicate (or the same
        // Partial, when the gradient arrives so); the others their own placement, unless the
        // incoming gradient is Partial over a Replicate dim.
        REQUIRE(seen.size() == 1);
        for (size_t m = 0; m < src.size(); ++m) {
          if (src[m].is_partial()) {
            CHECK((seen[0][m] == dt::Replicate() || seen[0][m] == src[m]));
          } else if (!seen[0][m].is_partial()) {
            CHECK(seen[0][m] == src[m]);
          } else {
            CHECK(src[m].is_replicate());
          }
        }
      }
    }
  }
}

TEST_CASE("a Replicate source whose gradient arrives Partial keeps it Partial") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = tt::make_mesh({w});
  const Tensor x = tt::det_input({w * 2, 3}, 2, -1.0, 0.5, dt::kFloat64);
  DTensor a = dt::distribute_tensor(x, mesh, {dt::Replicate()}, std::nullopt);
  a.requires_grad_();
  const DTensor b = a.redistribute({dt::Shard(0)});
  std::vector<Placements> seen;
  a.register_hook([&](const DTensor& g) {
    seen.push_back(g.placements());
    return DTensor();
  });
  // A Partial gradient for b (each rank's share of ones): it must reach a unreduced.
  const DTensor gb = dt::distribute_tensor(dt::ones({w * 2, 3}, dt::kFloat64), mesh,
                                           {dt::Partial()}, std::nullopt);
  b.backward(gb);
  REQUIRE(seen.size() == 1);
  CHECK(seen[0] == Placements{dt::Partial()});
  // The leaf's gradient is laid out like the leaf: reduced there.
  CHECK(a.grad().placements() == Placements{dt::Replicate()});
  CHECK(tt::same_values(a.grad().to_local(), dt::ones({w * 2, 3}, dt::kFloat64), 1e-12));
}

TEST_CASE("from_local / to_local(grad_placements) are differentiable") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = tt::make_mesh({w});
  // Each rank's local piece of an S(0) DTensor; the gradient of the piece is its chunk.
  DTensor piece = dt::local_dtensor(
      dt::full({2, 3}, static_cast<double>(dt::world_rank()), dt::TensorOptions(dt::kFloat64)));
  piece.requires_grad_();
  const DTensor d = DTensor::from_local(piece, mesh, {dt::Shard(0)});
  const Tensor weights = tt::det_input({2 * w, 3}, 3, -1.0, 0.5, dt::kFloat64);
  const DTensor wd = dt::distribute_tensor(weights, mesh, {dt::Replicate()}, std::nullopt);
  dt::sum(d * wd).backward();
  CHECK(
      tt::same_values(piece.grad().to_local(), weights.narrow(0, 2 * dt::world_rank(), 2), 1e-12));
  // to_local: the local gradient comes back as the given placements (Partial: summed later).
  DTensor a = dt::distribute_tensor(weights, mesh, {dt::Replicate()}, std::nullopt);
  a.requires_grad_();
  const DTensor l = a.to_local_dtensor({dt::Partial()});
  dt::sum(l * 2.0).backward();
  // Every rank contributed 2 * ones: the Partial sum is 2 w.
  CHECK(tt::same_values(a.grad().to_local(),
                        dt::full({2 * w, 3}, 2.0 * w, dt::TensorOptions(dt::kFloat64)), 1e-12));
}
