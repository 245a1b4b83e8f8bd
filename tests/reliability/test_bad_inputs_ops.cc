// Bad-input catalogue, DTensor ops (built into test_bad_inputs when the ops layer has its op
// registry): mixed dtypes, mismatched shapes, a wrong numel, inputs on different meshes and an
// in-place op that would change placements are refused on every rank with the op and the
// argument in the message.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/core/distributed_tensor.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/pool/pool.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/scan/scan.h"
#include "dtensor/ops/softmax/softmax.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/compare.h"
#include "dtensor/tensor/creation.h"

namespace dtensor {
namespace {

using Catch::Contains;

DTensor make(const DeviceMesh& mesh, const Shape& shape, DType dtype, Placements p) {
  return distribute_tensor(zeros(shape, TensorOptions(dtype)), mesh, std::move(p));
}

TEST_CASE("bad input: DTensor op with mixed dtypes") {
  const int64_t w = world_size();
  const DeviceMesh mesh = init_device_mesh(kCPU, {w});
  const DTensor a = make(mesh, {2 * w, 3}, kFloat32, {Shard(0)});
  const DTensor b = make(mesh, {2 * w, 3}, kInt32, {Shard(0)});
  // cat promotes mixed dtypes, as torch.cat (788581f); a matmul refuses them, as torch.mm.
  CHECK(cat({a, b}, 0).dtype() == kFloat32);
  const DTensor bt = make(mesh, {3, 2 * w}, kInt32, {Replicate()});
  REQUIRE_THROWS_AS(mm(a, bt), Error);
  REQUIRE_THROWS_WITH(mm(a, bt), Contains("mm") && Contains("int32"));
  REQUIRE_THROWS_WITH(softmax(make(mesh, {w, 3}, kInt64, {Shard(0)}), 1),
                      Contains("softmax") && Contains("int64"));
  // Ops with no integer meaning name the argument and the dtypes they take, as the Tensor ops.
  const DTensor ints = make(mesh, {w, 2, 4, 4}, kInt64, {Shard(0)});
  REQUIRE_THROWS_WITH(max_pool2d(ints, {2}),
                      Contains("[max_pool2d_with_indices] expected a floating input, got int64 "
                               "(argument self: float32, float64, float16 or bfloat16"));
  REQUIRE_THROWS_WITH(
      logcumsumexp(ints, 1),
      Contains("[logcumsumexp] expected a floating input, got int64 (argument self:"));
  CHECK(pad(ints, {1, 1}).dtype() == kInt64);  // constant padding takes any dtype
  world_communicator()->barrier()->wait();
}

TEST_CASE("bad input: DTensor op with mismatched shapes") {
  const int64_t w = world_size();
  const DeviceMesh mesh = init_device_mesh(kCPU, {w});
  const DTensor a = make(mesh, {2 * w + 1, 3}, kFloat32, {Shard(0)});
  const DTensor b = make(mesh, {2 * w + 1, 4}, kFloat32, {Replicate()});
  REQUIRE_THROWS_AS(cat({a, b}, 0), Error);
  REQUIRE_THROWS_WITH(cat({a, b}, 0), Contains("[cat]") && Contains("4"));
  REQUIRE_THROWS_WITH(stack({a, b}, 0), Contains("[stack]"));
  REQUIRE_THROWS_WITH(reshape(a, Shape{5 * w}),
                      Contains("[reshape]") && Contains(std::to_string(5 * w)));
  REQUIRE_THROWS_WITH(view(a, Shape{-1, 7}), Contains("[view]"));
  REQUIRE_THROWS_WITH(transpose(a, 0, 2), Contains("[transpose]") && Contains("2"));
  world_communicator()->barrier()->wait();
}

TEST_CASE("bad input: DTensor op with inputs on different meshes") {
  const int64_t w = world_size();
  const DeviceMesh m1 = init_device_mesh(kCPU, {w});
  const DeviceMesh m2 = init_device_mesh(kCPU, {1, w});
  const DTensor a = make(m1, {w, 3}, kFloat32, {Shard(0)});
  const DTensor b = make(m2, {w, 3}, kFloat32, {Replicate(), Shard(0)});
  REQUIRE_THROWS_AS(cat({a, b}, 1), Error);
  REQUIRE_THROWS_WITH(cat({a, b}, 1), Contains("[cat]") && Contains("mesh"));
  world_communicator()->barrier()->wait();
}

TEST_CASE("bad input: in-place op that would change placements") {
  const int64_t w = world_size();
  const DeviceMesh mesh = init_device_mesh(kCPU, {w});
  const DTensor self = make(mesh, {2 * w + 1, 3}, kFloat32, {Partial(ReduceOp::kMax)});
  const DTensor other = make(mesh, {2 * w + 1, 3}, kFloat32, {Shard(0)});
  // mul_ (add_ keeps a P(max) self: max(a_i) + b = max(a_i + b), as PyTorch).
  REQUIRE_THROWS_AS(mul_(self, other), Error);
  REQUIRE_THROWS_WITH(mul_(self, other),
                      Contains("[mul_]") && Contains("self") && Contains("P(max)"));
  // Nothing was written: self still holds its value.
  REQUIRE(self.placements() == Placements{Partial(ReduceOp::kMax)});
  REQUIRE(equal(self.full_tensor(), zeros({2 * w + 1, 3})));
  world_communicator()->barrier()->wait();
}

TEST_CASE("bad input: in-place op with a dtype the result cannot take") {
  const int64_t w = world_size();
  const DeviceMesh mesh = init_device_mesh(kCPU, {w});
  const DTensor self = make(mesh, {w, 3}, kInt32, {Shard(0)});
  const DTensor other = make(mesh, {w, 3}, kFloat32, {Shard(0)});
  REQUIRE_THROWS_AS(add_(self, other), Error);
  REQUIRE_THROWS_WITH(add_(self, other),
                      Contains("add_") && Contains("int32") && Contains("float32"));
  world_communicator()->barrier()->wait();
}

TEST_CASE("bad input: in-place op into an expanded (stride-0) local tensor") {
  // PyTorch refuses: each element would be written several times.
  Tensor e = zeros({1, 3}).expand({4, 3});
  REQUIRE_THROWS_WITH(add_(e, ones({4, 3})),
                      Contains("[add_] unsupported operation: more than one element of the "
                               "written-to tensor refers to a single memory location"));
  REQUIRE_THROWS_WITH(mul_(e, Scalar(2.0)), Contains("[mul_] unsupported operation"));
  REQUIRE_THROWS_WITH(fill_(e, Scalar(1.0)), Contains("unsupported operation"));
  world_communicator()->barrier()->wait();
}

TEST_CASE("numerics: amax/amin of a sharded DTensor propagate NaN from any shard") {
  const int64_t w = world_size();
  const DeviceMesh mesh = init_device_mesh(kCPU, {w});
  for (int64_t at : {int64_t{0}, 2 * w}) {  // NaN in the first or the last rank's shard
    std::vector<float> v(static_cast<size_t>(2 * w + 1));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
    v[static_cast<size_t>(at)] = std::numeric_limits<float>::quiet_NaN();
    const DTensor d = distribute_tensor(from_vector(v, {2 * w + 1}), mesh, {Shard(0)});
    CHECK(std::isnan(amax(d).full_tensor().item<float>()));
    CHECK(std::isnan(amin(d).full_tensor().item<float>()));
  }
  world_communicator()->barrier()->wait();
}

// ---- one rank fails inside a DTensor op (issue 39 items 3 and 9) ----------------------------

// "fail_on_rank"(self; fail, backward_fail): a copy of self whose kernel raises on world rank
// `fail` only; its gradient is fail_on_rank(g; backward_fail, -1), so a backward can be made
// to fail inside a dispatched op on one rank, as embedding_backward did on the rank whose block
// of columns was empty.
const OpInfo& fail_on_rank_op() {
  static const OpInfo& op = []() -> const OpInfo& {
    OpInfo info;
    info.name = "fail_on_rank";
    info.input_names = {"self"};
    info.schema_info.static_argnum = 2;  // both args are runtime values
    info.meta = [](const OpSchema& s) { return OutputMetas{s.input(0).meta()}; };
    info.strategy = [](const OpSchema& s) {
      StrategyRows rows;
      for (int64_t d = 0; d < s.input(0).ndim(); ++d) rows.push_back({Shard(d), Shard(d)});
      return rows;
    };
    info.kernel = single_output([](const KernelContext& c, absl::Span<const Tensor> l) {
      DT_CHECK(world_rank() != c.arg<int64_t>(0),
               "[fail_on_rank] deliberate failure of the kernel on rank %d", world_rank());
      return l[0].clone();
    });
    // Laid out like the input (so that a redistribute before the op all-gathers it back).
    info.backward = [](const autograd::BackwardContext& c, absl::Span<const DTensor> g) {
      const ArgValue args[] = {c.arg<int64_t>(1), int64_t{-1}};
      const DTensor r = dispatch(fail_on_rank_op(), {&g[0]}, args);
      return DTensorList{r.redistribute(c.input_spec(0).placements())};
    };
    return register_op(std::move(info));
  }();
  return op;
}

DTensor fail_on_rank(const DTensor& x, int64_t fail, int64_t backward_fail) {
  const ArgValue args[] = {fail, backward_fail};
  return dispatch(fail_on_rank_op(), {&x}, args);
}

TEST_CASE("one rank: an allocation that fails in a DTensor op is raised on every rank") {
  // DESIGN.md item 10: an allocation that fails on one rank is raised on every rank of the
  // mesh. Was: that rank raised alone; the others waited in their next collective until the
  // deadline ("[all_gather] collective deadline exceeded ... A peer rank is missing"), or
  // paired it with the failed rank's next collective and went on as if nothing happened.
  const int64_t w = world_size();
  const DeviceMesh mesh = init_device_mesh(kCPU, {w});
  // [1, 2^50] float32 S(0): rank 0 holds the one row, expanded from one element (no memory),
  // the others hold none. A new local tensor of that shape needs 4 PiB: on rank 0 only.
  const int64_t cols = int64_t{1} << 50;
  const Tensor local =
      world_rank() == 0 ? zeros({1, 1}).expand({1, cols}) : zeros({0, 1}).expand({0, cols});
  const Shape global = {1, cols};
  const DTensor x = DTensor::from_local(local, mesh, {Shard(0)}, /*run_check=*/false, global);
  const DTensor small = make(mesh, {2 * w + 1, 3}, kFloat32, {Shard(0)});
  const std::string bytes = "out of host memory allocating 4503599627370496 bytes";
  // The failing rank raises its own error; the others raise it from their next collective on
  // the mesh (the all_gather of full_tensor), naming the op and the rank.
  auto step = [&] {
    const DTensor y = mul(x, Scalar(2.0));
    return small.full_tensor();
  };
  if (world_rank() == 0) {
    REQUIRE_THROWS_WITH(step(), Contains(bytes));
  } else {
    REQUIRE_THROWS_WITH(step(), Contains("[mul.Scalar]") && Contains(bytes) &&
                                    Contains("(raised on rank 0; reported to this rank by its "
                                             "all_gather on mesh dim 0"));
  }
  // The mesh still works: the ranks agree on where its collectives are.
  REQUIRE(equal(small.full_tensor(), zeros({2 * w + 1, 3})));
  world_communicator()->barrier()->wait();
}

TEST_CASE("one rank: an error inside a backward op is raised by backward() on every rank") {
  const int64_t w = world_size();
  const DeviceMesh mesh = init_device_mesh(kCPU, {w});
  const int64_t last = w - 1;
  const std::string what =
      "[fail_on_rank] deliberate failure of the kernel on rank " + std::to_string(last);
  const Tensor values =
      arange(0.0, static_cast<double>(6 * w), 1.0, TensorOptions(kFloat64)).reshape({2 * w, 3});
  // The failing backward op is the last node with work, as embedding_backward was: the other
  // ranks learn at the meeting that ends backward().
  {
    DTensor x = distribute_tensor(values, mesh, {Shard(0)});
    x.requires_grad_();
    const DTensor loss = sum(fail_on_rank(x, -1, last));
    if (world_rank() == last) {
      REQUIRE_THROWS_WITH(loss.backward(), Contains(what));
    } else {
      REQUIRE_THROWS_WITH(loss.backward(),
                          Contains(what) && Contains("(raised on rank " + std::to_string(last)));
    }
  }
  // Nodes with collectives follow the failing one (the backward of R -> S(0) all-gathers): the
  // others raise there, inside the backward.
  {
    DTensor x = distribute_tensor(values, mesh, {Replicate()});
    x.requires_grad_();
    const DTensor loss = sum(fail_on_rank(x.redistribute({Shard(0)}), -1, last));
    if (world_rank() == last) {
      REQUIRE_THROWS_WITH(loss.backward(), Contains(what));
    } else {
      REQUIRE_THROWS_WITH(loss.backward(), Contains(what) && Contains("raised on rank"));
    }
  }
  // The same ops without a failure: the mesh still works and the gradient is right.
  DTensor x = distribute_tensor(values, mesh, {Replicate()});
  x.requires_grad_();
  sum(fail_on_rank(x.redistribute({Shard(0)}), -1, -1)).backward();
  REQUIRE(equal(x.grad().full_tensor(), ones({2 * w, 3}, TensorOptions(kFloat64))));
  world_communicator()->barrier()->wait();
}

}  // namespace
}  // namespace dtensor
