// DTensor view and shape ops (mpirun at 1, 2 and 4 ranks): for every input placement list (R,
// S(d) for each d, P(sum)) on a 1-D and a 2-D mesh, even and uneven shapes, full_tensor() of
// the result equals the Tensor op on the full tensor bit for bit; shardings that map through
// issue no collective; bad dims raise errors naming the op.
#include <catch2/catch.hpp>
#include <functional>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/view/copy_ops.h"
#include "dtensor/ops/view/view.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace tt = dtensor::test;
using dt::DTensor;
using dt::Placements;
using dt::Shard;
using dt::Tensor;

namespace {

using UnaryCase =
    std::pair<std::function<DTensor(const DTensor&)>, std::function<Tensor(const Tensor&)>>;

// Runs `cases` on every placement list of a tensor of `shape` on every mesh.
void check_unary(const tt::Ints& shape, const std::vector<UnaryCase>& cases) {
  const Tensor x = tt::det_input(shape);
  for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
    for (const Placements& p : tt::all_placements(tt::shard_choices(shape.size()), mesh.ndim())) {
      const DTensor dx = dt::distribute_tensor(x, mesh, p, std::nullopt);
      for (size_t k = 0; k < cases.size(); ++k) {
        INFO(tt::describe(mesh, {p}, shape) << " case " << k);
        const Tensor want = cases[k].second(x).contiguous();
        const DTensor dy = cases[k].first(dx);
        CHECK(dt::equal(dy.full_tensor(), want));
      }
    }
  }
}

}  // namespace

TEST_CASE("dtensor view: transpose, permute, t equal the full-tensor op") {
  const int64_t w = dt::world_size();
  for (const tt::Ints& shape : {tt::Ints{w * 3 + 1, 5, 2}, tt::Ints{2 * w, 3, w}}) {
    check_unary(shape, {
                           {[](const DTensor& a) { return dt::transpose(a, 0, 2); },
                            [](const Tensor& a) { return dt::transpose(a, 0, 2); }},
                           {[](const DTensor& a) { return dt::transpose(a, -1, 1); },
                            [](const Tensor& a) { return dt::transpose(a, -1, 1); }},
                           {[](const DTensor& a) {
                              return dt::permute(a, {2, 0, 1});
                            },
                            [](const Tensor& a) {
                              return dt::permute(a, {2, 0, 1});
                            }},
                       });
  }
  check_unary({w * 2 + 1, 3}, {{[](const DTensor& a) { return dt::t(a); },
                                [](const Tensor& a) { return dt::t(a); }}});
}

TEST_CASE("dtensor view: unsqueeze, squeeze equal the full-tensor op") {
  const int64_t w = dt::world_size();
  check_unary({w * 3 + 1, 1, 3}, {
                                     {[](const DTensor& a) { return dt::unsqueeze(a, 0); },
                                      [](const Tensor& a) { return dt::unsqueeze(a, 0); }},
                                     {[](const DTensor& a) { return dt::unsqueeze(a, -1); },
                                      [](const Tensor& a) { return dt::unsqueeze(a, -1); }},
                                     {[](const DTensor& a) { return dt::squeeze(a); },
                                      [](const Tensor& a) { return dt::squeeze(a); }},
                                     {[](const DTensor& a) { return dt::squeeze(a, 1); },
                                      [](const Tensor& a) { return dt::squeeze(a, 1); }},
                                     {[](const DTensor& a) { return dt::squeeze(a, 0); },
                                      [](const Tensor& a) { return dt::squeeze(a, 0); }},
                                 });
}

TEST_CASE("dtensor view: view, reshape, flatten equal the full-tensor op") {
  const int64_t w = dt::world_size();
  // Leading dims divisible by the mesh size (merges keep S(0)) and uneven ones.
  for (const tt::Ints& shape : {tt::Ints{w * 2, 3, 2}, tt::Ints{w * 3 + 1, 2, 3}}) {
    const int64_t a = shape[0], b = shape[1], c = shape[2];
    check_unary(shape, {
                           {[=](const DTensor& x) {
                              return dt::view(x, {a * b, c});
                            },
                            [=](const Tensor& x) {
                              return dt::view(x, {a * b, c});
                            }},
                           {[=](const DTensor& x) {
                              return dt::reshape(x, {a, -1});
                            },
                            [=](const Tensor& x) {
                              return dt::reshape(x, {a, -1});
                            }},
                           {[=](const DTensor& x) { return dt::reshape(x, {-1}); },
                            [=](const Tensor& x) { return dt::reshape(x, {-1}); }},
                           {[=](const DTensor& x) {
                              return dt::reshape(x, {a, c, b});
                            },
                            [=](const Tensor& x) {
                              return dt::reshape(x, {a, c, b});
                            }},
                           {[=](const DTensor& x) {
                              return dt::reshape(x, {a, b, 1, c});
                            },
                            [=](const Tensor& x) {
                              return dt::reshape(x, {a, b, 1, c});
                            }},
                           {[](const DTensor& x) { return dt::flatten(x, 1); },
                            [](const Tensor& x) { return dt::flatten(x, 1); }},
                           {[](const DTensor& x) { return dt::flatten(x); },
                            [](const Tensor& x) { return dt::flatten(x); }},
                       });
  }
  // Split of a merged dim back into two.
  check_unary({w * 4 * 3}, {{[=](const DTensor& x) {
                               return dt::view(x, {w * 4, 3});
                             },
                             [=](const Tensor& x) {
                               return dt::view(x, {w * 4, 3});
                             }}});
  // Zero-size tensor.
  check_unary({0, 3, 2}, {{[](const DTensor& x) {
                             return dt::reshape(x, {3, 0});
                           },
                           [](const Tensor& x) {
                             return dt::reshape(x, {3, 0});
                           }}});
}

TEST_CASE("dtensor view: expand, narrow, slice, select equal the full-tensor op") {
  const int64_t w = dt::world_size();
  check_unary({w * 3 + 1, 1, 3}, {
                                     {[](const DTensor& x) {
                                        return dt::expand(x, {2, -1, 4, 3});
                                      },
                                      [](const Tensor& x) {
                                        return dt::expand(x, {2, -1, 4, 3});
                                      }},
                                     {[](const DTensor& x) { return dt::narrow(x, 0, 1, 2); },
                                      [](const Tensor& x) { return dt::narrow(x, 0, 1, 2); }},
                                     {[](const DTensor& x) { return dt::narrow(x, 2, 0, 3); },
                                      [](const Tensor& x) { return dt::narrow(x, 2, 0, 3); }},
                                     {[](const DTensor& x) { return dt::narrow(x, -1, 1, 1); },
                                      [](const Tensor& x) { return dt::narrow(x, -1, 1, 1); }},
                                     {[](const DTensor& x) { return dt::slice(x, 0, 1, 100, 2); },
                                      [](const Tensor& x) { return dt::slice(x, 0, 1, 100, 2); }},
                                     {[](const DTensor& x) { return dt::slice(x, 2, 0, 3); },
                                      [](const Tensor& x) { return dt::slice(x, 2, 0, 3); }},
                                     {[](const DTensor& x) { return dt::select(x, 0, -1); },
                                      [](const Tensor& x) { return dt::select(x, 0, -1); }},
                                     {[](const DTensor& x) { return dt::select(x, 2, 1); },
                                      [](const Tensor& x) { return dt::select(x, 2, 1); }},
                                 });
}

TEST_CASE("dtensor view: split and chunk equal the full-tensor op") {
  const int64_t w = dt::world_size();
  const tt::Ints shape = {w * 3 + 1, 5};
  const Tensor x = tt::det_input(shape);
  for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
    for (const Placements& p : tt::all_placements(tt::shard_choices(2), mesh.ndim())) {
      INFO(tt::describe(mesh, {p}, shape));
      const DTensor dx = dt::distribute_tensor(x, mesh, p, std::nullopt);
      for (int64_t dim : {0, 1}) {
        const std::vector<Tensor> want = dt::split(x, 2, dim);
        const std::vector<DTensor> got = dt::split(dx, 2, dim);
        REQUIRE(got.size() == want.size());
        for (size_t i = 0; i < want.size(); ++i)
          CHECK(dt::equal(got[i].full_tensor(), want[i].contiguous()));
        const std::vector<Tensor> wc = dt::chunk(x, 3, dim);
        const std::vector<DTensor> gc = dt::chunk(dx, 3, dim);
        REQUIRE(gc.size() == wc.size());
        for (size_t i = 0; i < wc.size(); ++i)
          CHECK(dt::equal(gc[i].full_tensor(), wc[i].contiguous()));
        const int64_t sizes[] = {1, shape[dim] - 1};
        const std::vector<Tensor> ws = dt::split(x, sizes, dim);
        const std::vector<DTensor> gs = dt::split(dx, sizes, dim);
        REQUIRE(gs.size() == 2);
        for (size_t i = 0; i < 2; ++i) CHECK(dt::equal(gs[i].full_tensor(), ws[i].contiguous()));
      }
    }
  }
}

TEST_CASE("dtensor view: cat and stack equal the full-tensor op") {
  const int64_t w = dt::world_size();
  const tt::Ints sa = {w * 3 + 1, 4}, sb = {2, 4};
  const Tensor a = tt::det_input(sa, 0), b = tt::det_input(sb, 5), c = tt::det_input(sa, 9);
  for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
    const auto ls = tt::all_placements(tt::shard_choices(2), mesh.ndim());
    for (const Placements& pa : ls) {
      for (const Placements& pb : {ls.front(), pa, ls.back()}) {
        INFO(tt::describe(mesh, {pa}, sa) << " and " << dt::placements_str(pb));
        const DTensor da = dt::distribute_tensor(a, mesh, pa, std::nullopt);
        const DTensor db = dt::distribute_tensor(b, mesh, pb, std::nullopt);
        const DTensor dc = dt::distribute_tensor(c, mesh, pb, std::nullopt);
        CHECK(dt::equal(dt::cat({da, db}, 0).full_tensor(), dt::cat({a, b}, 0)));
        CHECK(dt::equal(dt::cat({da, dc, da}, 1).full_tensor(), dt::cat({a, c, a}, 1)));
        CHECK(dt::equal(dt::stack({da, dc}, 0).full_tensor(), dt::stack({a, c}, 0)));
        CHECK(dt::equal(dt::stack({da, dc}, -1).full_tensor(), dt::stack({a, c}, -1)));
      }
    }
  }
}

TEST_CASE("dtensor view: cat and stack promote mixed dtypes, as PyTorch's, gradients cast back") {
  // tests/ops/torch_grad_conventions.py: cat(float32, float64) is float64 and each gradient has
  // its input's dtype; cat(int32, float64) float64; stack(bool, int64) int64. It raised
  // "[cat] tensor 1 has ... dtype float64, expected ... dtype float32".
  const int64_t w = dt::world_size();
  auto mesh = dt::init_device_mesh(dt::kCPU, {w});
  for (const Placements& p : {Placements{dt::Replicate()}, Placements{Shard(0)}}) {
    INFO(dt::placements_str(p));
    auto dist = [&](const Tensor& t) { return dt::distribute_tensor(t, mesh, p, std::nullopt); };
    DTensor a = dist(dt::from_vector<double>({1, 2}, {2}).to(dt::kFloat32));
    DTensor b = dist(dt::from_vector<double>({0.5}, {1}));
    a.requires_grad_();
    b.requires_grad_();
    const DTensor y = dt::cat({a, b});
    CHECK(tt::same_values(y.full_tensor(), dt::from_vector<double>({1, 2, 0.5}, {3}), 0.0));
    y.backward(dist(dt::from_vector<double>({1, 2, 3}, {3})));
    CHECK(tt::same_values(a.grad().full_tensor(),
                          dt::from_vector<double>({1, 2}, {2}).to(dt::kFloat32), 0.0));
    CHECK(tt::same_values(b.grad().full_tensor(), dt::from_vector<double>({3}, {1}), 0.0));
    const DTensor i = dist(dt::from_vector<double>({1, 2}, {2}).to(dt::kInt32));
    CHECK(dt::cat({i, b}).dtype() == dt::kFloat64);
    const DTensor m = dist(dt::from_vector<double>({1, 0}, {2}).to(dt::kBool));
    const DTensor l = dist(dt::from_vector<double>({3, 4}, {2}).to(dt::kInt64));
    CHECK(tt::same_values(dt::stack({m, l}).full_tensor(),
                          dt::from_vector<double>({1, 0, 3, 4}, {2, 2}).to(dt::kInt64), 0.0));
  }
}

TEST_CASE("dtensor view: shardings that map through need no communication") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = tt::det_input({w * 2, 3, 5});
  const DTensor s0 = dt::distribute_tensor(x, mesh, {Shard(0)}, std::nullopt);
  const DTensor s1 = dt::distribute_tensor(x, mesh, {Shard(1)}, std::nullopt);
  const DTensor p = dt::distribute_tensor(x, mesh, {dt::Partial()}, std::nullopt);
  dt::CommDebugMode comm;
  CHECK(dt::transpose(s0, 0, 2).placements() == Placements{Shard(2)});
  CHECK(dt::permute(s1, {1, 2, 0}).placements() == Placements{Shard(0)});
  CHECK(dt::unsqueeze(s1, 0).placements() == Placements{Shard(2)});
  CHECK(dt::reshape(s0, {w * 6, 5}).placements() == Placements{Shard(0)});
  CHECK(dt::flatten(s0).placements() == Placements{Shard(0)});
  CHECK(dt::narrow(s0, 2, 1, 3).placements() == Placements{Shard(0)});
  CHECK(dt::select(s1, 0, 1).placements() == Placements{Shard(0)});
  CHECK(dt::cat({s0, s0}, 1).placements() == Placements{Shard(0)});
  CHECK(dt::stack({s1, s1}, 0).placements() == Placements{Shard(2)});
  CHECK(dt::chunk(s0, 2, 2)[1].placements() == Placements{Shard(0)});
  CHECK(dt::transpose(p, 0, 1).placements() == Placements{dt::Partial()});
  CHECK(dt::cat({p, p}, 0).placements() == Placements{dt::Partial()});
  // Data movement commutes with max/min too: P(max) passes through.
  const DTensor pmax =
      dt::distribute_tensor(x, mesh, {dt::Partial(dt::ReduceOp::kMax)}, std::nullopt);
  const DTensor pt = dt::transpose(pmax, 0, 1);
  CHECK(pt.placements() == Placements{dt::Partial(dt::ReduceOp::kMax)});
  INFO(comm.str());
  CHECK(comm.total_count() == 0);
  CHECK(dt::equal(pt.full_tensor(), dt::transpose(x, 0, 1).contiguous()));
}

TEST_CASE("dtensor view: an unevenly sharded merged dim is replicated first, not mis-sliced") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = tt::det_input({w * 3 + 1, 3});
  const DTensor dx = dt::distribute_tensor(x, mesh, {Shard(0)}, std::nullopt);
  const DTensor y = dt::reshape(dx, {-1});
  CHECK(dt::equal(y.full_tensor(), dt::reshape(x, {-1})));
  if (w > 1) CHECK(y.placements() == Placements{dt::Replicate()});
}

// There is no strided-shard placement (PyTorch's _StridedShard): merging dims whose non-leading
// member is sharded moves the shard onto the leading member first, one all-to-all of the local
// shard (each rank sends (n-1)/n of it), never an all-gather of the whole tensor.
// docs/SEMANTICS.md "Views of sharded dims" says why.
TEST_CASE("dtensor view: merging a sharded non-leading dim costs one all-to-all") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = tt::det_input({w * 2, w * 3});
  const DTensor s1 = dt::distribute_tensor(x, mesh, {Shard(1)}, std::nullopt);
  dt::CommDebugMode comm;
  const DTensor y = dt::flatten(s1);
  INFO(comm.str());
  CHECK(comm.count(dt::CollectiveKind::kAllGather) == 0);
  CHECK(comm.count(dt::CollectiveKind::kAllToAll) == (w > 1 ? 1 : 0));
  CHECK(comm.total_count() == comm.count(dt::CollectiveKind::kAllToAll));
  CHECK(y.placements() == Placements{Shard(0)});
  CHECK(dt::equal(y.full_tensor(), dt::flatten(x)));
}

TEST_CASE("dtensor view: bad arguments raise errors naming the op") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const DTensor dx =
      dt::distribute_tensor(tt::det_input({w * 2, 3}), mesh, {Shard(0)}, std::nullopt);
  const DTensor dy =
      dt::distribute_tensor(tt::det_input({w * 2, 4, 1}), mesh, {Shard(0)}, std::nullopt);
  REQUIRE_THROWS_WITH(dt::transpose(dx, 0, 5), Catch::Contains("[transpose]"));
  REQUIRE_THROWS_WITH(dt::permute(dx, {0, 0}), Catch::Contains("[permute]"));
  REQUIRE_THROWS_WITH(dt::view(dx, {7, -1}), Catch::Contains("[view]"));
  REQUIRE_THROWS_WITH(dt::reshape(dx, {-1, -1}), Catch::Contains("[reshape]"));
  REQUIRE_THROWS_WITH(dt::flatten(dx, 1, 0), Catch::Contains("[flatten]"));
  REQUIRE_THROWS_WITH(dt::expand(dx, {w * 2, 4}), Catch::Contains("[expand]"));
  REQUIRE_THROWS_WITH(dt::narrow(dx, 1, 2, 5), Catch::Contains("[narrow]"));
  REQUIRE_THROWS_WITH(dt::select(dx, 2, 0), Catch::Contains("[select]"));
  REQUIRE_THROWS_WITH(dt::unsqueeze(dx, 4), Catch::Contains("[unsqueeze]"));
  REQUIRE_THROWS_WITH(dt::cat({dx, dy}, 0), Catch::Contains("[cat]"));
  REQUIRE_THROWS_WITH(dt::stack({dx, dy}, 0), Catch::Contains("[stack]"));
  REQUIRE_THROWS_WITH(dt::split(dx, 0, 0), Catch::Contains("[split]"));
  REQUIRE_THROWS_WITH(dt::t(dy), Catch::Contains("[t]"));
  REQUIRE_THROWS_AS(dt::transpose(DTensor(), 0, 1), dt::Error);
}

TEST_CASE("dtensor copy ops and composites equal the full-tensor op") {
  const int64_t w = dt::world_size();
  // flip/roll/repeat/tril/triu through the registered ops, the rest through their composites.
  check_unary({3 * w + 1, 5, 2}, {{[](const DTensor& x) {
                                     return dt::flip(x, {0, 2});
                                   },
                                   [](const Tensor& x) {
                                     return dt::flip(x, {0, 2});
                                   }},
                                  {[](const DTensor& x) { return dt::roll(x, {4}); },  // flattened
                                   [](const Tensor& x) { return dt::roll(x, {4}); }},
                                  {[](const DTensor& x) {
                                     return dt::roll(x, {-1, 3}, {1, 0});
                                   },
                                   [](const Tensor& x) {
                                     return dt::roll(x, {-1, 3}, {1, 0});
                                   }},
                                  {[](const DTensor& x) {
                                     return dt::tile(x, {2, 1});
                                   },
                                   [](const Tensor& x) {
                                     return dt::tile(x, {2, 1});
                                   }},
                                  {[](const DTensor& x) { return dt::tril(x, 1); },
                                   [](const Tensor& x) { return dt::tril(x, 1); }},
                                  {[](const DTensor& x) { return dt::triu(x); },
                                   [](const Tensor& x) { return dt::triu(x); }},
                                  {[](const DTensor& x) { return dt::movedim(x, {0}, {2}); },
                                   [](const Tensor& x) { return dt::movedim(x, {0}, {2}); }},
                                  {[](const DTensor& x) {
                                     return dt::unflatten(x, 1, {1, -1});
                                   },
                                   [](const Tensor& x) {
                                     return dt::unflatten(x, 1, {1, -1});
                                   }},
                                  {[](const DTensor& x) { return dt::unbind(x, 2)[1]; },
                                   [](const Tensor& x) { return dt::unbind(x, 2)[1]; }},
                                  {[](const DTensor& x) { return dt::clone(x); },
                                   [](const Tensor& x) { return dt::clone(x); }}});
  // tril keeps a [S(0), S(1)] layout and issues no collective.
  if (w % 2 == 0) {
    const dt::DeviceMesh mesh = tt::make_mesh({2, w / 2});
    const Tensor x = tt::det_input({2 * w + 1, 3 * w - 1});
    const DTensor dx = dt::distribute_tensor(x, mesh, {Shard(0), Shard(1)}, std::nullopt);
    DTensor lower;
    {
      dt::CommDebugMode debug;
      lower = dt::tril(dx, -1);
      CHECK(debug.total_count() == 0);
    }
    CHECK(lower.placements() == Placements{Shard(0), Shard(1)});
    CHECK(dt::equal(lower.full_tensor(), dt::tril(x, -1)));
  }
}

TEST_CASE("dtensor view: DTensor's members equal Tensor's members on the full tensor") {
  // x.view(...), x.t(), x.clone() ... are the free functions (installed by the ops layer into
  // the core, dtensor/core/detail/view_hooks.h), so they shard, record and cache as those do.
  const int64_t w = dt::world_size();
  check_unary(
      {w * 3 + 1, 1, 4},
      {
          {[](const DTensor& a) { return a.transpose(0, 2); },
           [](const Tensor& a) { return a.transpose(0, 2); }},
          {[](const DTensor& a) {
             return a.permute({2, 0, 1});
           },
           [](const Tensor& a) {
             return a.permute({2, 0, 1});
           }},
          {[](const DTensor& a) { return a.unsqueeze(-1); },
           [](const Tensor& a) { return a.unsqueeze(-1); }},
          {[](const DTensor& a) { return a.squeeze(); },
           [](const Tensor& a) { return a.squeeze(); }},
          {[](const DTensor& a) { return a.squeeze(1); },
           [](const Tensor& a) { return a.squeeze(1); }},
          {[](const DTensor& a) { return a.flatten(1); },
           [](const Tensor& a) { return a.flatten(1); }},
          {[](const DTensor& a) {
             return a.reshape({-1, 2});
           },
           [](const Tensor& a) {
             return a.reshape({-1, 2});
           }},
          {[w](const DTensor& a) {
             return a.view({w * 3 + 1, 4});
           },
           [w](const Tensor& a) {
             return a.view({w * 3 + 1, 4});
           }},
          {[w](const DTensor& a) {
             return a.expand({2, w * 3 + 1, 3, 4});
           },
           [w](const Tensor& a) {
             return a.expand({2, w * 3 + 1, 3, 4});
           }},
          {[](const DTensor& a) { return a.narrow(2, 1, 2); },
           [](const Tensor& a) { return a.narrow(2, 1, 2); }},
          {[w](const DTensor& a) { return a.slice(0, 1, w * 3 + 1, 2); },
           [w](const Tensor& a) { return a.slice(0, 1, w * 3 + 1, 2); }},
          {[](const DTensor& a) { return a.select(2, 3); },
           [](const Tensor& a) { return a.select(2, 3); }},
          {[](const DTensor& a) { return a.transpose(0, 2).contiguous(); },
           [](const Tensor& a) { return a.transpose(0, 2).contiguous(); }},
          {[](const DTensor& a) { return a.clone(); }, [](const Tensor& a) { return a.clone(); }},
      });
  check_unary({w * 2 + 1, 3}, {{[](const DTensor& a) { return a.t(); },
                                [](const Tensor& a) { return a.transpose(0, 1); }}});
  // A member is recorded like its free function: the gradient of sum(x.t() * c) is c^T.
  const dt::DeviceMesh mesh = tt::make_mesh({w});
  const Tensor x = tt::det_input({w * 2 + 1, 3});
  DTensor dx = dt::distribute_tensor(x, mesh, {Shard(0)}, std::nullopt);
  dx.requires_grad_();
  const Tensor c = tt::det_input({3, w * 2 + 1});
  const DTensor dc = dt::distribute_tensor(c, mesh, {dt::Replicate()}, std::nullopt);
  dt::sum(dt::mul(dx.t(), dc)).backward();
  CHECK(dt::equal(dx.grad().full_tensor(), c.transpose(0, 1).contiguous()));
}
