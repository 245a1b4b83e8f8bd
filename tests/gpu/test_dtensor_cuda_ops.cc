// DTensor ops on CUDA meshes (label gpu): for every input placement list the CPU suites
// enumerate (R, S(0), S(1), P(sum) per mesh dim; pairs on 1-D meshes, a few partners on 2-D
// meshes), the full_tensor() of the op on CUDA DTensors lives on this rank's GPU and equals the
// op on the full CPU tensors: exactly for data movement and integer results, within
// ct::check_gpu_result's tolerance for float math. Uneven shapes (w * 3 + 1) and empty shards
// are included.
#include <algorithm>
#include <catch2/catch.hpp>
#include <vector>

#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/embedding/embedding.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/matmul/einsum.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/softmax/softmax.h"
#include "dtensor/ops/view/view.h"
#include "dtensor_cuda_test_util.h"

namespace dt = dtensor;
namespace ct = dtensor::cuda_test;
namespace tt = dtensor::test;
using dt::DTensor;
using dt::Placements;
using dt::Replicate;
using dt::Shard;
using dt::Tensor;

namespace {

// `op` is a generic callable (auto parameters) that runs on Tensors and on DTensors alike:
// op on the CUDA DTensor of x, for every placement list over `choices`, equals op(x) on the CPU.
template <typename Op>
void check_unary(const Tensor& x, const std::vector<dt::Placement>& choices, const Op& op,
                 double tol = 1e-5) {
  const Tensor want = op(x);
  for (const dt::DeviceMesh& mesh : ct::cuda_family_meshes()) {
    for (const Placements& p : tt::placement_lists(mesh.ndim(), choices, x.dim())) {
      INFO(tt::describe(mesh, {p}, x.sizes()));
      const DTensor d = dt::distribute_tensor(x, mesh, p, std::nullopt);
      ct::check_gpu_result(op(d).full_tensor(), want, tol);
    }
  }
}

// op on CUDA DTensors of (x, y): every pair of lists on 1-D meshes; on 2-D meshes each list of
// x with the same, the reversed and the all-Replicate list for y.
template <typename Op>
void check_binary(const Tensor& x, const Tensor& y, const std::vector<dt::Placement>& xchoices,
                  const std::vector<dt::Placement>& ychoices, const Op& op, double tol = 1e-5) {
  const Tensor want = op(x, y);
  for (const dt::DeviceMesh& mesh : ct::cuda_family_meshes()) {
    const auto ylists = tt::placement_lists(mesh.ndim(), ychoices, y.dim());
    for (const Placements& px : tt::placement_lists(mesh.ndim(), xchoices, x.dim())) {
      const DTensor a = dt::distribute_tensor(x, mesh, px, std::nullopt);
      std::vector<Placements> partners = ylists;
      if (mesh.ndim() > 1) {
        partners.clear();
        for (const Placements& q : {px, tt::reversed(px), Placements(mesh.ndim(), Replicate())}) {
          if (std::find(ylists.begin(), ylists.end(), q) != ylists.end()) partners.push_back(q);
        }
      }
      for (const Placements& py : partners) {
        INFO(tt::describe(mesh, {px, py}, x.sizes()) << " with " << dt::shape_str(y.sizes()));
        const DTensor b = dt::distribute_tensor(y, mesh, py, std::nullopt);
        ct::check_gpu_result(op(a, b).full_tensor(), want, tol);
      }
    }
  }
}

std::vector<dt::Shape> shapes_2d() {
  const int64_t w = dt::world_size();
  return {{w * 3 + 1, 5}, {1, 2 * w + 1}, {0, 3}};
}

const std::vector<dt::Placement>& no_partial() {
  static const std::vector<dt::Placement> c = {Replicate(), Shard(0), Shard(1)};
  return c;
}

}  // namespace

TEST_CASE("CUDA DTensor elementwise ops (broadcast included) equal the CPU ops", "[cuda][ops]") {
  const auto all = tt::standard_choices();
  for (const dt::Shape& s : shapes_2d()) {
    const Tensor x = tt::det_input(s, 1), y = tt::det_input(s, 2);
    const Tensor row = tt::det_input(dt::Shape{s[1]}, 3);
    INFO("shape " << dt::shape_str(s));
    check_binary(x, y, all, all, [](const auto& a, const auto& b) { return dt::add(a, b); });
    check_binary(x, y, all, no_partial(),
                 [](const auto& a, const auto& b) { return dt::mul(a, b); });
    check_binary(x, row, all, all, [](const auto& a, const auto& b) { return dt::sub(a, b); });
    check_binary(x, y, no_partial(), no_partial(),
                 [](const auto& a, const auto& b) { return dt::maximum(a, b); });
    check_binary(x, y, no_partial(), no_partial(),
                 [](const auto& a, const auto& b) { return dt::gt(a, b); });
    check_unary(x, all, [](const auto& a) { return dt::div(a, 0.23); });
    check_unary(x, all, [](const auto& a) { return dt::gelu(a); });
    check_unary(x, all, [](const auto& a) { return dt::exp(dt::relu(a)); });
    check_unary(
        x, all, [](const auto& a) { return dt::cast(a, dt::kBFloat16); }, 0.0);
  }
}

TEST_CASE("CUDA DTensor reductions along dims equal the CPU reductions", "[cuda][ops]") {
  const auto all = tt::standard_choices();
  for (const dt::Shape& s : {dt::Shape{dt::world_size() * 3 + 1, 5}, dt::Shape{2, 7}}) {
    const Tensor x = tt::det_input(s, 4);
    for (bool keepdim : {false, true}) {
      for (const std::vector<int64_t>& dims :
           {std::vector<int64_t>{0}, std::vector<int64_t>{1}, std::vector<int64_t>{}}) {
        const dt::IntSpan d(dims.data(), dims.size());
        INFO("shape " << dt::shape_str(s) << " dims " << dt::shape_str(d) << " keepdim "
                      << keepdim);
        check_unary(x, all, [&](const auto& a) { return dt::sum(a, d, keepdim); });
        check_unary(x, all, [&](const auto& a) { return dt::mean(a, d, keepdim); });
        check_unary(x, all, [&](const auto& a) { return dt::amax(a, d, keepdim); });
        check_unary(x, all, [&](const auto& a) { return dt::amin(a, d, keepdim); });
      }
    }
  }
  // Empty shards and an empty tensor: sums are 0.
  const Tensor e = tt::det_input(dt::Shape{0, 3}, 5);
  check_unary(e, all, [](const auto& a) { return dt::sum(a, {0}); });
}

TEST_CASE("CUDA DTensor matmul family equals the CPU products", "[cuda][ops]") {
  const int64_t w = dt::world_size();
  const auto all = tt::standard_choices();
  struct Dims {
    int64_t n, k, m;
  };
  for (const Dims& s : {Dims{w * 3 + 1, w + 1, 5}, Dims{2 * w, 2 * w, w}, Dims{0, 3, 2}}) {
    const Tensor x = tt::det_input(dt::Shape{s.n, s.k}, 1);
    const Tensor y = tt::det_input(dt::Shape{s.k, s.m}, 2);
    check_binary(x, y, all, all, [](const auto& a, const auto& b) { return dt::mm(a, b); });
  }
  const Tensor x3 = tt::det_input(dt::Shape{w + 1, 3, 2 * w + 1}, 3);
  const Tensor y3 = tt::det_input(dt::Shape{w + 1, 2 * w + 1, 2}, 4);
  const std::vector<dt::Placement> choices3 = {Replicate(), Shard(0), Shard(1), Shard(2),
                                               dt::Partial()};
  check_binary(x3, y3, choices3, choices3,
               [](const auto& a, const auto& b) { return dt::bmm(a, b); });
  // einsum: its generated rows on CUDA meshes (a permuted batched product, a sum, a diagonal).
  check_binary(x3, y3, choices3, choices3, [](const auto& a, const auto& b) {
    return dt::einsum("bik,bkj->jbi", {a, b});
  });
  check_unary(x3, choices3, [](const auto& a) { return dt::einsum("bik->kb", {a}); });
  check_unary(tt::det_input(dt::Shape{w + 1, w + 1}, 7), all,
              [](const auto& a) { return dt::einsum("ii->i", {a}); });
  const Tensor weight = tt::det_input(dt::Shape{w + 2, 2 * w + 1}, 5);  // [out, in]
  const Tensor bias = tt::det_input(dt::Shape{w + 2}, 6);
  for (const dt::DeviceMesh& mesh : ct::cuda_family_meshes()) {
    const DTensor b = dt::distribute_tensor(bias, mesh, Placements(mesh.ndim(), Replicate()));
    for (const Placements& pw : tt::placement_lists(mesh.ndim(), all, 2)) {
      INFO("linear weight " << tt::describe(mesh, {pw}, weight.sizes()));
      const DTensor wt = dt::distribute_tensor(weight, mesh, pw);
      const DTensor in = dt::distribute_tensor(x3, mesh, Placements(mesh.ndim(), Shard(0)));
      ct::check_gpu_result(dt::linear(in, wt, b).full_tensor(), dt::linear(x3, weight, bias));
    }
  }
}

TEST_CASE("CUDA DTensor softmax, log_softmax, softmin, layer_norm and rms_norm equal the CPU ops",
          "[cuda][ops]") {
  const auto all = tt::standard_choices();
  for (const dt::Shape& s : shapes_2d()) {
    const Tensor x = tt::det_input(s, 7);
    INFO("shape " << dt::shape_str(s));
    for (int64_t dim : {0, 1, -1}) {
      check_unary(x, all, [&](const auto& a) { return dt::softmax(a, dim); });
      check_unary(x, all, [&](const auto& a) { return dt::log_softmax(a, dim); });
      check_unary(x, all, [&](const auto& a) { return dt::softmin(a, dim); });
    }
    const int64_t d = s[1];
    const Tensor wt = tt::det_input(dt::Shape{d}, 8, 0.5, 0.25);
    const Tensor bs = tt::det_input(dt::Shape{d}, 9);
    for (const dt::DeviceMesh& mesh : ct::cuda_family_meshes()) {
      const Placements rep(mesh.ndim(), Replicate());
      const DTensor dw = dt::distribute_tensor(wt, mesh, rep);
      const DTensor db = dt::distribute_tensor(bs, mesh, rep);
      for (const Placements& p : tt::placement_lists(mesh.ndim(), all, 2)) {
        INFO("norms " << tt::describe(mesh, {p}, x.sizes()));
        const DTensor dx = dt::distribute_tensor(x, mesh, p);
        ct::check_gpu_result(dt::layer_norm(dx, {d}, dw, db).full_tensor(),
                             dt::layer_norm(x, {d}, wt, bs));
        ct::check_gpu_result(dt::rms_norm(dx, {d}, dw).full_tensor(), dt::rms_norm(x, {d}, wt));
        ct::check_gpu_result(dt::layer_norm(dx, {d}).full_tensor(), dt::layer_norm(x, {d}));
      }
    }
  }
}

TEST_CASE("CUDA DTensor embedding and cross_entropy equal the CPU ops", "[cuda][ops]") {
  const int64_t w = dt::world_size();
  const int64_t rows = w * 3 + 1;
  const Tensor table = tt::det_input(dt::Shape{rows, 5}, 1);
  for (const dt::Shape& ishape : {dt::Shape{w * 2 + 1, 3}, dt::Shape{0, 2}}) {
    std::vector<int64_t> ids(static_cast<size_t>(dt::shape_numel(ishape)));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i * 5 + 3) % rows;
    const Tensor idx = dt::from_vector<int64_t>(ids, ishape);
    INFO("indices " << dt::shape_str(ishape));
    // Lookups are data movement: exact (P(sum) tables add zeros to one row).
    check_binary(
        idx, table, no_partial(), tt::standard_choices(),
        [](const auto& i, const auto& t) { return dt::embedding(i, t); }, 0.0);
  }
  // Cross entropy: logits [N, C] in every placement (C sharded = loss parallel), targets
  // Replicate or batch-sharded, the three reductions.
  const int64_t n = w * 2 + 1, c = w * 3 + 1;
  const Tensor logits = tt::det_input(dt::Shape{n, c}, 2);
  std::vector<int64_t> tv(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) tv[static_cast<size_t>(i)] = (i * 7 + 1) % c;
  tv[1] = -100;  // ignored
  const Tensor target = dt::from_vector<int64_t>(tv, {n});
  for (dt::Reduction r : {dt::Reduction::kMean, dt::Reduction::kSum, dt::Reduction::kNone}) {
    INFO("cross_entropy reduction " << static_cast<int>(r));
    check_binary(logits, target, tt::standard_choices(), {Replicate(), Shard(0)},
                 [r](const auto& x, const auto& t) { return dt::cross_entropy(x, t, r); });
  }
}

TEST_CASE("CUDA DTensor view, reshape and transpose equal the CPU ops (exact)", "[cuda][ops]") {
  const int64_t w = dt::world_size();
  const auto all = tt::standard_choices();
  const Tensor x = tt::det_input(dt::Shape{w * 2, 6}, 3);
  check_unary(
      x, all,
      [w](const auto& a) {
        return dt::view(a, {w * 2, 2, 3});
      },
      0.0);
  check_unary(
      x, all, [](const auto& a) { return dt::reshape(a, {-1}); }, 0.0);
  const Tensor u = tt::det_input(dt::Shape{w * 3 + 1, 5}, 4);
  check_unary(
      u, all, [](const auto& a) { return dt::transpose(a, 0, 1); }, 0.0);
  check_unary(
      u, all, [](const auto& a) { return dt::add(dt::transpose(a, 0, 1), 1.0); }, 0.0);
}
