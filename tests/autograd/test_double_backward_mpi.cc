// Double backward (create_graph) under mpirun (1, 2 and 4 ranks): a gradient penalty through
// batch_norm (training: batch statistics, the batch-sharded form all-reducing them, as
// SyncBatchNorm; eval: running statistics), group_norm and instance_norm equals PyTorch 2.15's
// (double_backward_references.inc) at 1e-12 for every input placement (replicated, batch-,
// channel- and spatially-sharded, uneven); through cdist (p 2, 1, 3 and inf), prod and cumprod
// (with zeros, against PyTorch's values of the same functions written as repeated multiplication)
// the sharded penalty's gradients equal the single-device ones.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "dtensor/autograd/engine.h"
#include "dtensor/ops/distance/distance.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/scan/scan.h"
#include "tests/autograd/double_backward_references.inc"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace tt = dtensor::test;
namespace refs = dtensor::test::double_backward_refs;
using dt::DTensor;
using dt::Placements;
using dt::Tensor;

namespace {

DTensor leaf(const Tensor& full, const dt::DeviceMesh& mesh, const Placements& p) {
  DTensor d = dt::distribute_tensor(full, mesh, p, std::nullopt);
  d.requires_grad_();
  return d;
}

// The first gradients g of sum(f(leaves) * r) with create_graph, then the gradients of
// sum((g_0 + g_0 * g_0) * s) + sum over i > 0 of sum(g_i * g_i) with respect to the leaves (a
// Hessian-vector product plus a gradient penalty): g followed by them, as full tensors.
template <class F>
std::vector<Tensor> penalty(F f, const std::vector<DTensor>& leaves, const DTensor& r,
                            const DTensor& s) {
  const DTensor loss[] = {dt::sum(f(leaves) * r)};
  const std::vector<DTensor> g = dt::autograd::grad(loss, leaves, {}, std::nullopt, true);
  DTensor pen = dt::sum((g[0] + g[0] * g[0]) * s);
  for (size_t i = 1; i < g.size(); ++i) pen = pen + dt::sum(g[i] * g[i]);
  const DTensor roots[] = {pen};
  const std::vector<DTensor> h = dt::autograd::grad(roots, leaves);
  std::vector<Tensor> out;
  for (const DTensor& t : g) out.push_back(t.full_tensor());
  for (const DTensor& t : h) out.push_back(t.full_tensor());
  return out;
}

Tensor ref(const std::vector<double>& v, dt::IntSpan shape) {
  return dt::from_vector<double>(v, shape);
}

// Placement lists for a tensor of `ndim` dims on `mesh`: all Replicate, then S(d) on the last
// mesh dim for each d, and on a 2-D mesh S(0) on the first with S(d) on the second.
std::vector<Placements> layouts(const dt::DeviceMesh& mesh, int64_t ndim) {
  const size_t n = static_cast<size_t>(mesh.ndim());
  std::vector<Placements> out = {Placements(n, dt::Replicate())};
  for (int64_t d = 0; d < ndim; ++d) {
    Placements p(n, dt::Replicate());
    p.back() = dt::Shard(d);
    out.push_back(p);
    if (n == 2) {
      p.front() = dt::Shard(0);
      out.push_back(p);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("double backward of batch_norm, group_norm and instance_norm equals PyTorch's") {
  const int64_t shape[] = {5, 4, 3};
  const Tensor x = tt::det_input(shape, 1, -1.0, 0.25, dt::kFloat64);
  const Tensor w = tt::det_input({4}, 2, 0.5, 0.125, dt::kFloat64);
  const Tensor b = tt::det_input({4}, 3, -0.5, 0.125, dt::kFloat64);
  const Tensor rm = tt::det_input({4}, 4, -0.25, 0.0625, dt::kFloat64);
  const Tensor rv = tt::det_input({4}, 5, 0.5, 0.25, dt::kFloat64);
  const Tensor r = tt::det_input(shape, 6, -0.75, 0.125, dt::kFloat64);
  const Tensor s = tt::det_input(shape, 7, 0.25, 0.125, dt::kFloat64);
  struct Case {
    const char* name;
    int kind;  // 0 batch_norm training, 1 eval, 2 group_norm (2 groups), 3 instance_norm
    const std::vector<double>*gx, *gw, *hx, *hw;
  };
  const Case cases[] = {
      {"batch_norm train", 0, &refs::kBatchTrainGx, &refs::kBatchTrainGw, &refs::kBatchTrainHx,
       &refs::kBatchTrainHw},
      {"batch_norm eval", 1, &refs::kBatchEvalGx, &refs::kBatchEvalGw, &refs::kBatchEvalHx,
       &refs::kBatchEvalHw},
      {"group_norm", 2, &refs::kGroupGx, &refs::kGroupGw, &refs::kGroupHx, &refs::kGroupHw},
      {"instance_norm", 3, &refs::kInstanceGx, &refs::kInstanceGw, &refs::kInstanceHx,
       &refs::kInstanceHw},
  };
  for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
    const Placements all_r(static_cast<size_t>(mesh.ndim()), dt::Replicate());
    const DTensor db = dt::distribute_tensor(b, mesh, all_r);
    const DTensor drm = dt::distribute_tensor(rm, mesh, all_r);
    const DTensor drv = dt::distribute_tensor(rv, mesh, all_r);
    for (const Placements& px : layouts(mesh, 3)) {
      for (const Case& c : cases) {
        INFO(c.name << ", mesh " << dt::shape_str(mesh.shape()) << ", x "
                    << dt::placements_str(px));
        const auto f = [&](const std::vector<DTensor>& l) {
          switch (c.kind) {
            case 0:
              return dt::batch_norm(l[0], DTensor(), DTensor(), l[1], db, true, 0.1, 1e-5);
            case 1:
              return dt::batch_norm(l[0], drm, drv, l[1], db, false, 0.1, 1e-5);
            case 2:
              return dt::group_norm(l[0], 2, l[1], db, 1e-5);
            default:
              return dt::instance_norm(l[0], DTensor(), DTensor(), l[1], db, true, 0.1, 1e-5);
          }
        };
        const std::vector<Tensor> got =
            penalty(f, {leaf(x, mesh, px), leaf(w, mesh, all_r)},
                    dt::distribute_tensor(r, mesh, px), dt::distribute_tensor(s, mesh, px));
        CHECK(tt::same_values(got[0], ref(*c.gx, shape), 1e-12));
        CHECK(tt::same_values(got[1], ref(*c.gw, {4}), 1e-12));
        CHECK(tt::same_values(got[2], ref(*c.hx, shape), 1e-12));
        CHECK(tt::same_values(got[3], ref(*c.hw, {4}), 1e-12));
      }
    }
  }
}

TEST_CASE(
    "double backward of float32 and bfloat16 batch_norm and group_norm is float64's, rounded") {
  // The [2, C] sums and their gradients stay float64 and the factors float32 (batch_norm's
  // kernel dtypes): the double backward's casts meet them.
  const int64_t shape[] = {5, 4, 3};
  const dt::DeviceMesh mesh = tt::family_meshes()[0];
  const Placements p0 = {dt::Shard(0)}, pr = {dt::Replicate()};
  for (const dt::DType dtype : {dt::kFloat32, dt::kBFloat16}) {
    const double tol = dtype == dt::kFloat32 ? 2e-6 : 2e-2;
    const auto in = [&](dt::IntSpan sh, int salt, double lo, double step) {
      return tt::det_input(sh, salt, lo, step, dtype);
    };
    const Tensor x = in(shape, 1, -1.0, 0.25), w = in({4}, 2, 0.5, 0.125),
                 b = in({4}, 3, -0.5, 0.125), r = in(shape, 6, -0.75, 0.125),
                 s = in(shape, 7, 0.25, 0.125);
    const DTensor db = dt::distribute_tensor(b, mesh, pr);
    for (const bool group : {false, true}) {
      INFO(dt::dtype_name(dtype) << (group ? " group_norm" : " batch_norm"));
      const auto f = [&](const std::vector<DTensor>& l) {
        return group ? dt::group_norm(l[0], 2, l[1], db, 1e-5)
                     : dt::batch_norm(l[0], DTensor(), DTensor(), l[1], db, true, 0.1, 1e-5);
      };
      const std::vector<Tensor> got =
          penalty(f, {leaf(x, mesh, p0), leaf(w, mesh, pr)}, dt::distribute_tensor(r, mesh, p0),
                  dt::distribute_tensor(s, mesh, p0));
      CHECK(got[2].dtype() == dtype);
      CHECK(got[3].dtype() == dtype);
      const std::vector<double>& hx = group ? refs::kGroupHx : refs::kBatchTrainHx;
      const std::vector<double>& hw = group ? refs::kGroupHw : refs::kBatchTrainHw;
      // Relative to the largest reference value (bfloat16 keeps 8 bits): passes at 2e-6 / 2e-2,
      // fails at 2e-7 / 2e-3 (review R, finding 6: was 1e-4 / 0.1, ~300x the float32 error).
      double scale = 0;
      for (const double v : hx) scale = std::max(scale, std::abs(v));
      const std::vector<double> gx = got[2].to(dt::kFloat64).to_vector<double>();
      const std::vector<double> gw = got[3].to(dt::kFloat64).to_vector<double>();
      for (size_t i = 0; i < hx.size(); ++i) CHECK(std::abs(gx[i] - hx[i]) <= tol * scale);
      for (size_t i = 0; i < hw.size(); ++i) CHECK(std::abs(gw[i] - hw[i]) <= tol * scale);
    }
  }
}

TEST_CASE("double backward of cdist, prod and cumprod on sharded inputs equals one device") {
  const int64_t xs[] = {2, 5, 3}, ys[] = {2, 4, 3}, ds[] = {2, 5, 4};
  const Tensor x1 = tt::det_input(xs, 1, -1.0, 0.25, dt::kFloat64);
  const Tensor x2 = tt::det_input(ys, 2, -0.75, 0.25, dt::kFloat64);
  const Tensor rd = tt::det_input(ds, 3, -0.5, 0.125, dt::kFloat64);
  const Tensor sd = tt::det_input(xs, 4, 0.25, 0.125, dt::kFloat64);
  // Multiples of 0.5 in [-2.5, 2.5]: a zero every 11 elements (rows with one zero and none; the
  // product of all elements of the [3, 4] input has two).
  const int64_t ps[] = {5, 6}, ps_all[] = {3, 4}, row[] = {5};
  const Tensor px = tt::det_input(ps, 0, -2.5, 0.5, dt::kFloat64);
  const Tensor px_all = tt::det_input(ps_all, 5, -2.5, 0.5, dt::kFloat64);
  const Tensor pr = tt::det_input(ps, 5, -0.5, 0.125, dt::kFloat64);
  const Tensor psn = tt::det_input(ps, 6, 0.25, 0.125, dt::kFloat64);
  const Tensor psn_all = tt::det_input(ps_all, 6, 0.25, 0.125, dt::kFloat64);
  const Tensor pr_row = tt::det_input(row, 5, -0.5, 0.125, dt::kFloat64);
  const Tensor one = tt::det_input({1}, 0, 0.75, 0.0, dt::kFloat64);
  const int64_t vec[] = {7};
  const Tensor px_vec = tt::det_input(vec, 2, -2.5, 0.5, dt::kFloat64);
  const Tensor pr_vec = tt::det_input(vec, 5, -0.5, 0.125, dt::kFloat64);
  const Tensor psn_vec = tt::det_input(vec, 6, 0.25, 0.125, dt::kFloat64);
  // The single-device values: each rank's own one-rank DTensors.
  const auto local = [](const Tensor& t) { return dt::local_dtensor(t); };
  const auto local_leaf = [](const Tensor& t) {
    DTensor d = dt::local_dtensor(t.clone());
    d.requires_grad_();
    return d;
  };
  for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
    const Placements all_r(static_cast<size_t>(mesh.ndim()), dt::Replicate());
    for (const double p : {2.0, 1.0, 3.0, std::numeric_limits<double>::infinity()}) {
      const auto f = [p](const std::vector<DTensor>& l) { return dt::cdist(l[0], l[1], p); };
      const std::vector<Tensor> want =
          penalty(f, {local_leaf(x1), local_leaf(x2)}, local(rd), local(sd));
      for (const Placements& pl : layouts(mesh, 3)) {
        INFO("cdist p " << p << ", mesh " << dt::shape_str(mesh.shape()) << ", x1 and x2 "
                        << dt::placements_str(pl));
        // The output is laid out as x1 on the batch and P dims (x2's R dim replicated there).
        const std::vector<Tensor> got =
            penalty(f, {leaf(x1, mesh, pl), leaf(x2, mesh, pl)},
                    dt::distribute_tensor(rd, mesh, all_r), dt::distribute_tensor(sd, mesh, pl));
        for (size_t i = 0; i < want.size(); ++i) {
          INFO("gradient " << i);
          CHECK(tt::same_values(got[i], want[i], 1e-12));
        }
      }
    }
    for (int kind = 0; kind < 5; ++kind) {
      // 0: prod along dim 1, 1: prod of all, 2: cumprod along dim 1, 3: along dim 0, 4: of a
      // vector along dim -1.
      const auto f = [kind](const std::vector<DTensor>& l) {
        switch (kind) {
          case 0:
            return dt::prod(l[0], 1, false);
          case 1:
            return dt::prod(l[0]);
          case 2:
            return dt::cumprod(l[0], 1);
          case 3:
            return dt::cumprod(l[0], 0);
          default:
            return dt::cumprod(l[0], -1);
        }
      };
      const Tensor& x = kind == 1 ? px_all : kind == 4 ? px_vec : px;
      const Tensor& r = kind == 0 ? pr_row : kind == 1 ? one : kind == 4 ? pr_vec : pr;
      const Tensor& s = kind == 1 ? psn_all : kind == 4 ? psn_vec : psn;
      const std::vector<Tensor> want = penalty(f, {local_leaf(x)}, local(r), local(s));
      // PyTorch's values of the same functions written as repeated multiplication (exact
      // derivatives at the zeros).
      const std::vector<double>* const refs_of[][2] = {
          {&refs::kProdDimGx, &refs::kProdDimHx},
          {&refs::kProdAllGx, &refs::kProdAllHx},
          {&refs::kCumprod1Gx, &refs::kCumprod1Hx},
          {&refs::kCumprod0Gx, &refs::kCumprod0Hx},
          {&refs::kCumprodVecGx, &refs::kCumprodVecHx}};
      CHECK(tt::same_values(want[0], ref(*refs_of[kind][0], x.sizes()), 1e-12));
      CHECK(tt::same_values(want[1], ref(*refs_of[kind][1], x.sizes()), 1e-12));
      for (const Placements& pl : layouts(mesh, x.dim())) {
        INFO("kind " << kind << ", mesh " << dt::shape_str(mesh.shape()) << ", x "
                     << dt::placements_str(pl));
        const std::vector<Tensor> got =
            penalty(f, {leaf(x, mesh, pl)}, dt::distribute_tensor(r, mesh, all_r),
                    dt::distribute_tensor(s, mesh, all_r));
        for (size_t i = 0; i < want.size(); ++i) {
          INFO("gradient " << i);
          CHECK(tt::same_values(got[i], want[i], 1e-12));
        }
      }
    }
  }
}
