// DTensor embedding (mpirun at 1, 2 and 4 ranks): for every table placement (R, S(0), S(1),
// P(sum)) and index placement (R, S(d)) on a 1-D and a 2-D mesh, uneven sizes, the result
// equals the lookup on the full tensors; the vocab-parallel (S(0) table) and column-parallel
// (S(1) table) layouts need no communication and give P(sum) and S(-1) outputs.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>

#include "dtensor/autograd/grad_mode.h"
#include "dtensor/collectives/comm_debug.h"
#include "dtensor/core/factories.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/embedding/detail/embedding_backward.h"
#include "dtensor/ops/embedding/embedding.h"
#include "dtensor/ops/reduction/reduction.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace st = dtensor::test;
using dt::DTensor;
using dt::Placements;
using dt::Shard;
using dt::Tensor;

namespace {

// Indices spread over every row of a `rows`-row table.
Tensor indices(const st::Ints& shape, int64_t rows, dt::DType dtype = dt::kInt64) {
  const int64_t n = dt::shape_numel(dt::IntSpan(shape.data(), shape.size()));
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = (i * 5 + 3) % rows;
  return dt::from_vector<int64_t>(v, dt::IntSpan(shape.data(), shape.size())).to(dtype);
}

}  // namespace

TEST_CASE("dtensor embedding equals the full lookup for every placement") {
  const int64_t w = dt::world_size();
  const int64_t rows = w * 3 + 1;
  const Tensor table = st::det_input({rows, 5}, 1);
  for (const st::Ints& ishape : {st::Ints{w * 2 + 1, 3}, st::Ints{0, 2}}) {
    for (dt::DType itype : {dt::kInt64, dt::kInt32}) {
      const Tensor idx = indices(ishape, rows, itype);
      const Tensor want = dt::embedding(idx, table);
      for (const dt::DeviceMesh& mesh : st::family_meshes()) {
        for (const Placements& pw :
             st::all_placements(st::shard_choices(2), static_cast<size_t>(mesh.ndim()))) {
          for (const Placements& pi :
               st::all_placements(st::shard_choices(2, false), static_cast<size_t>(mesh.ndim()))) {
            INFO(st::describe(mesh, {pi}, ishape) << " table " << dt::placements_str(pw));
            const DTensor dw = dt::distribute_tensor(table, mesh, pw, std::nullopt);
            const DTensor di = dt::distribute_tensor(idx, mesh, pi, std::nullopt);
            CHECK(dt::equal(dt::embedding(di, dw).full_tensor(), want));
          }
        }
      }
    }
  }
}

TEST_CASE("dtensor embedding: vocab- and column-parallel lookups issue no collective") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const int64_t rows = w * 3 + 1;
  const Tensor table = st::det_input({rows, 6});
  const Tensor idx = indices({4, 3}, rows);
  const DTensor di = dt::distribute_tensor(idx, mesh, {dt::Replicate()}, std::nullopt);
  const DTensor row_sharded = dt::distribute_tensor(table, mesh, {Shard(0)}, std::nullopt);
  const DTensor col_sharded = dt::distribute_tensor(table, mesh, {Shard(1)}, std::nullopt);
  DTensor a, b;
  {
    dt::CommDebugMode comm;
    a = dt::embedding(di, row_sharded);
    b = dt::embedding(di, col_sharded);
    CHECK(comm.total_count() == 0);
  }
  CHECK(a.placements() == Placements{dt::Partial()});
  CHECK(b.placements() == Placements{Shard(2)});
  const Tensor want = dt::embedding(idx, table);
  dt::CommDebugMode comm;
  CHECK(dt::equal(a.full_tensor(), want));  // the one all-reduce of vocab parallelism
  CHECK(comm.count(dt::CollectiveKind::kAllGather) == 0);
  CHECK(dt::equal(b.full_tensor(), want));
}

TEST_CASE("dtensor embedding errors name the op and the argument") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const int64_t rows = w * 2 + 1;
  const DTensor table =
      dt::distribute_tensor(st::det_input({rows, 4}), mesh, {Shard(0)}, std::nullopt);
  const Tensor bad = dt::full({2}, rows, dt::TensorOptions(dt::kInt64));
  const DTensor di = dt::distribute_tensor(bad, mesh, {dt::Replicate()}, std::nullopt);
  REQUIRE_THROWS_WITH(dt::embedding(di, table), Catch::Contains("[embedding] index"));
  const DTensor fi =
      dt::distribute_tensor(st::det_input({2}), mesh, {dt::Replicate()}, std::nullopt);
  REQUIRE_THROWS_WITH(dt::embedding(fi, table), Catch::Contains("argument indices"));
  const DTensor t3 =
      dt::distribute_tensor(st::det_input({2, 2, 2}), mesh, {dt::Replicate()}, std::nullopt);
  REQUIRE_THROWS_WITH(dt::embedding(di, t3), Catch::Contains("argument weight"));
  REQUIRE_THROWS_WITH(dt::embedding(fi, table, std::nullopt, 1.0),
                      Catch::Contains("[embedding_renorm_] argument indices"));
  REQUIRE_THROWS_WITH(dt::embedding(di, table, rows), Catch::Contains("padding_idx"));
}

TEST_CASE("dtensor embedding: a bad index in one rank's batch shard raises on every rank") {
  const int64_t w = dt::world_size();
  const int64_t me = dt::world_rank();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const int64_t rows = 7;
  // Each rank holds 3 ids of a batch sharded along dim 0; only the last rank's are bad.
  std::vector<int64_t> ids = {1, 2, 3};
  if (me == w - 1) ids[1] = rows + 5;
  const DTensor di =
      DTensor::from_local(dt::from_vector<int64_t>(ids, {3}), mesh, {Shard(0)}, false);
  for (const dt::Placement& table_layout :
       {dt::Placement(dt::Replicate()), dt::Placement(Shard(0)), dt::Placement(Shard(1))}) {
    INFO("table " << table_layout.str());
    const DTensor table =
        dt::distribute_tensor(st::det_input({rows, 4}), mesh, {table_layout}, std::nullopt);
    // Every rank throws (one that did not would wait in the next collective). A replicated
    // table takes the batch-sharded ids as they are: the ranks agree through one all-reduce
    // and name the failing rank. For a sharded table the planner may gather the ids instead;
    // then every rank finds the bad one itself.
    const auto bad_index =
        Catch::Contains("[embedding] index 12 out of range for a table of 7 rows");
    if (w > 1 && table_layout.is_replicate()) {
      REQUIRE_THROWS_WITH(
          dt::embedding(di, table),
          bad_index && Catch::Contains("(raised on rank " + std::to_string(w - 1) + ")"));
    } else {
      REQUIRE_THROWS_WITH(dt::embedding(di, table), bad_index);
    }
    // The ranks are still in step: the next collective pairs correctly.
    const DTensor ok =
        DTensor::from_local(dt::from_vector<int64_t>({1, 2, 3}, {3}), mesh, {Shard(0)}, false);
    CHECK(dt::equal(dt::embedding(ok, table).full_tensor(),
                    dt::embedding(ok.full_tensor(), table.full_tensor())));
  }
}

TEST_CASE("dtensor embedding max_norm and scale_grad_by_freq equal one device on every layout") {
  // The renormed table, the output and the table's gradient of sum(out * c) on a row-sharded,
  // column-sharded or replicated table with replicated or batch-sharded indices equal one
  // device's. The counts of scale_grad_by_freq are of the global batch (PyTorch's DTensor
  // counts each shard's indices alone when they are sharded). The last row is never looked up:
  // max_norm leaves it although its norm is over.
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const int64_t rows = w * 3 + 1;
  const Tensor table = st::det_input({rows, 4}, 1, -2.5, 0.5, dt::kFloat64);
  std::vector<int64_t> v(static_cast<size_t>((w * 2 + 1) * 3));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(i * 5 + 3) % (rows - 1);
  const Tensor idx = dt::from_vector<int64_t>(v, {w * 2 + 1, 3});
  const Tensor c = st::det_input({w * 2 + 1, 3, 4}, 2, -2.5, 0.5, dt::kFloat64);
  for (const double norm_type : {2.0, 1.0}) {
    const double max_norm = norm_type == 2.0 ? 2.5 : 3.0;
    DTensor one = dt::local_dtensor(table.clone());
    one.requires_grad_();
    const DTensor one_out =
        dt::embedding(dt::local_dtensor(idx), one, std::nullopt, max_norm, norm_type, true);
    dt::sum(dt::mul(one_out, dt::local_dtensor(c))).backward();
    // The test can fail: some looked-up rows are renormed, some kept, and counts exceed 1.
    CHECK_FALSE(dt::equal(one.to_local(), table));
    CHECK(dt::equal(one.to_local().narrow(0, rows - 1, 1), table.narrow(0, rows - 1, 1)));
    for (const dt::Placement& pw :
         {dt::Placement(dt::Replicate()), dt::Placement(Shard(0)), dt::Placement(Shard(1))}) {
      for (const dt::Placement& pi :
           {dt::Placement(dt::Replicate()), dt::Placement(Shard(0)), dt::Placement(Shard(1))}) {
        INFO("norm_type " << norm_type << " table " << pw.str() << " indices " << pi.str());
        DTensor dw = dt::distribute_tensor(table.clone(), mesh, {pw}, std::nullopt);
        dw.requires_grad_();
        const DTensor di = dt::distribute_tensor(idx, mesh, {pi}, std::nullopt);
        const DTensor out = dt::embedding(di, dw, std::nullopt, max_norm, norm_type, true);
        dt::sum(dt::mul(out, dt::distribute_tensor(c, mesh, {dt::Replicate()}, std::nullopt)))
            .backward();
        CHECK(dw.placements() == Placements{pw});
        CHECK(st::same_values(dw.full_tensor(), one.to_local(), 1e-12));
        CHECK(st::same_values(out.full_tensor(), one_out.to_local(), 1e-12));
        CHECK(st::same_values(dw.grad().full_tensor(), one.grad().to_local(), 1e-12));
      }
    }
  }
}

namespace {

// embedding_renorm_'s whole-table form (its code before it renormed only the looked-up rows,
// issue L3-2) on one device: every row's norm, the scale of the looked-up rows, one product.
Tensor renorm_whole_table(const Tensor& table, const std::vector<int64_t>& ids, double max_norm,
                          double norm_type) {
  const int64_t dims[] = {1};
  const int64_t rows = table.size(0);
  const Tensor norm = dt::cast(dt::vector_norm(table, norm_type, dims, true), dt::kFloat64);
  const Tensor one = dt::full({rows, 1}, 1.0, dt::TensorOptions(dt::kFloat64));
  Tensor scale = dt::where(
      dt::gt(norm, max_norm),
      dt::div(dt::full({rows, 1}, max_norm, dt::TensorOptions(dt::kFloat64)), dt::add(norm, 1e-7)),
      one);
  std::vector<double> seen(static_cast<size_t>(rows), 0.0);
  for (int64_t r : ids) seen[static_cast<size_t>(r)] = 1.0;
  scale = dt::where(dt::gt(dt::from_vector<double>(seen, {rows, 1}), 0.0), scale, one);
  return dt::mul_(table.clone(), scale);
}

}  // namespace

TEST_CASE("dtensor embedding_renorm_ renorms the looked-up rows alone, as the whole-table form") {
  // Bit for bit the whole-table form on every table layout (the row-whole ones renorm only the
  // looked-up rows they hold) with replicated and batch-sharded indices, float32 and float64:
  // row norms 3.57 to 4.12 (2-norm), 7.5 to 9 (1-norm), so some looked-up rows are over
  // max_norm, some under, and so are rows never looked up (the last two among them).
  const int64_t w = dt::world_size();
  const int64_t rows = w * 5 + 3;
  std::vector<int64_t> ids(static_cast<size_t>(w * 4));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i * 3 + 1) % (rows - 2);
  const Tensor idx = dt::from_vector<int64_t>(ids, {w * 4});
  for (const dt::DType dtype : {dt::kFloat32, dt::kFloat64}) {
    const Tensor table = st::det_input({rows, 6}, 3, -2.5, 0.5, dtype);
    for (const double norm_type : {2.0, 1.0}) {
      const double max_norm = norm_type == 2.0 ? 3.8 : 8.0;
      const Tensor want = renorm_whole_table(table, ids, max_norm, norm_type);
      CHECK_FALSE(dt::equal(want, table));
      CHECK(dt::equal(want.narrow(0, rows - 2, 2), table.narrow(0, rows - 2, 2)));
      for (const dt::DeviceMesh& mesh : st::family_meshes()) {
        for (const Placements& pw :
             st::all_placements(st::shard_choices(2, false), static_cast<size_t>(mesh.ndim()))) {
          for (const Placements& pi :
               st::all_placements(st::shard_choices(1, false), static_cast<size_t>(mesh.ndim()))) {
            INFO(st::describe(mesh, {pi}, {w * 4})
                 << " table " << dt::placements_str(pw) << " " << dt::dtype_name(dtype)
                 << " norm_type " << norm_type);
            const DTensor dw = dt::distribute_tensor(table.clone(), mesh, pw, std::nullopt);
            const DTensor di = dt::distribute_tensor(idx, mesh, pi, std::nullopt);
            const uint32_t version = dw.to_local().storage().version();
            dt::embedding_renorm_(dw, di, max_norm, norm_type);
            CHECK(dt::equal(dw.full_tensor(), want));
            // An in-place write on every rank (a rank holding no looked-up row included).
            CHECK(dw.to_local().storage().version() > version);
          }
        }
      }
    }
  }
}

TEST_CASE("dtensor embedding max_norm forward time, looked-up rows vs whole table",
          "[.][!benchmark]") {
  // Prints only (issue L3-2): a forward with max_norm on a 32000 x 256 float32 table and 512
  // replicated tokens, replicated, vocab-sharded S(0) and column-sharded S(1) (which keeps the
  // whole-table form), against the whole-table form (the code before: every row's norm, the
  // counts of the batch, one product over the table) followed by the plain lookup. Each
  // timing the median of 9 forwards on a fresh copy of the table.
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const int64_t vocab = 32000, dim = 256, tokens = 512;
  const Tensor table = st::det_input({vocab, dim}, 1, -0.5, 0.1);
  std::vector<int64_t> v(static_cast<size_t>(tokens));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(i * 7919 + 11) % vocab;
  const DTensor di = dt::distribute_tensor(dt::from_vector<int64_t>(v, {tokens}), mesh,
                                           {dt::Replicate()}, std::nullopt);
  const double max_norm = 1.0;
  const auto whole_table = [&](const DTensor& weight) {
    dt::autograd::NoGradGuard no_grad;
    const int64_t dims[] = {1};
    const DTensor norm =
        dt::cast(dt::vector_norm(weight, 2.0, dims, /*keepdim=*/true), dt::kFloat64);
    const DTensor one = dt::ones_like(norm);
    DTensor scale = dt::where(dt::gt(norm, max_norm),
                              dt::div(dt::full_like(norm, max_norm), dt::add(norm, 1e-7)), one);
    const DTensor counts = dt::detail::embedding_counts(di, vocab, dt::kFloat64);
    scale = dt::where(dt::gt(counts, 0.0), scale, one);
    dt::mul_(weight, scale);
    return dt::embedding(di, weight);
  };
  for (const dt::Placement& pw :
       {dt::Placement(dt::Replicate()), dt::Placement(Shard(0)), dt::Placement(Shard(1))}) {
    for (const bool rows_only : {false, true}) {
      std::vector<double> ms;
      for (int rep = 0; rep < 9; ++rep) {
        const DTensor dw = dt::distribute_tensor(table.clone(), mesh, {pw}, std::nullopt);
        mesh.communicator(0)->barrier()->wait();
        const auto t0 = std::chrono::steady_clock::now();
        const DTensor out =
            rows_only ? dt::embedding(di, dw, std::nullopt, max_norm) : whole_table(dw);
        out.to_local();
        mesh.communicator(0)->barrier()->wait();
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count());
      }
      std::sort(ms.begin(), ms.end());
      if (dt::world_rank() == 0) {
        std::printf("embedding max_norm forward, %d ranks, table %s, %s: median %.3f ms\n",
                    static_cast<int>(w), pw.str().c_str(),
                    rows_only ? "looked-up rows" : "whole table", ms[ms.size() / 2]);
      }
    }
  }
}
