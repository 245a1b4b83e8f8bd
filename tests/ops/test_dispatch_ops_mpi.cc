// Properties of the engine over the whole op library (mpirun at 1, 2 and 4 ranks):
//   - every DTensor op call propagates exactly once (one lookup of the sharding-propagation
//     cache), including the ops whose kernels depend on the chosen layout (linear with a bias,
//     the vocab-sharded embedding, views that need the local target shape);
//   - no collective ever runs on a mesh dim of one rank: on meshes with size-1 dims, every
//     redistribute pair, every registered op and a forward + backward issue none there.
#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <vector>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/collectives/comm_debug.h"
#include "dtensor/core/propagation/sharding_propagation.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/embedding/embedding.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/view/view.h"
#include "tests/common/op_samples.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace tt = dtensor::test;
using dt::DTensor;
using dt::Placements;

namespace {

int64_t lookups() {
  const dt::PropagationCacheStats s = dt::propagation_cache_stats();
  return s.hits + s.misses;
}

// The registered op on its first sample call, inputs laid out `p` where they fit (else R).
dt::DTensorList run_first_sample(const dt::OpInfo& op, const dt::DeviceMesh& mesh,
                                 const Placements& p) {
  const dt::OpSample call = op.samples(dt::world_size())[0];
  std::vector<DTensor> in;
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    const dt::Tensor full = tt::sample_values(call.inputs[i], 5 + i, false);
    Placements q = p;
    for (dt::Placement& x : q) {
      if ((x.is_shard() && x.dim() >= full.dim()) ||
          (x.is_partial() && !dt::is_floating(full.dtype())))
        x = dt::Replicate();
    }
    in.push_back(dt::distribute_tensor(
        full, mesh, op.inplace ? Placements(p.size(), dt::Replicate()) : q, std::nullopt));
  }
  std::vector<const DTensor*> ptrs;
  for (const DTensor& t : in) ptrs.push_back(&t);
  return dt::dispatch_multi(op, ptrs, call.args);
}

}  // namespace

TEST_CASE("every DTensor op call propagates exactly once") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = tt::make_mesh({w});
  const dt::Registry& reg = dt::registered_ops();
  for (const std::string& name : reg.names()) {
    const dt::OpInfo& op = reg.get(name);
    if (!op.samples) continue;
    for (const Placements& p : {Placements{dt::Replicate()}, Placements{dt::Shard(0)}}) {
      INFO(name << " inputs " << dt::placements_str(p));
      const int64_t before = lookups();
      run_first_sample(op, mesh, p);
      CHECK(lookups() - before == 1);
    }
  }
  // The public functions whose kernels read the chosen layout.
  const dt::Tensor x = tt::det_input({2, 3, 4 * w}, 1, -1.0, 0.25);
  const dt::Tensor weight = tt::det_input({w + 1, 4 * w}, 2, -1.0, 0.25);
  const dt::Tensor bias = tt::det_input({w + 1}, 3, -1.0, 0.25);
  const DTensor dx = dt::distribute_tensor(x, mesh, {dt::Shard(-1)}, std::nullopt);
  const DTensor dw = dt::distribute_tensor(weight, mesh, {dt::Shard(1)}, std::nullopt);
  const DTensor db = dt::distribute_tensor(bias, mesh, {dt::Replicate()}, std::nullopt);
  const DTensor table = dt::distribute_tensor(weight, mesh, {dt::Shard(0)}, std::nullopt);
  const DTensor ids = dt::distribute_tensor(dt::from_vector<int64_t>({0, w, 1}, {3}), mesh,
                                            {dt::Replicate()}, std::nullopt);
  const int64_t flat[] = {6, 4 * w};
  const int64_t wide[] = {3, 2, 3, 4 * w};
  struct Call {
    const char* what;
    std::function<DTensor()> fn;
  };
  const std::vector<Call> calls = {
      {"linear with a bias (rowwise)", [&] { return dt::linear(dx, dw, db); }},
      {"embedding (vocab-sharded)", [&] { return dt::embedding(ids, table); }},
      {"reshape", [&] { return dt::reshape(dx, flat); }},
      {"expand", [&] { return dt::expand(dt::unsqueeze(dx, 0), wide); }},
      {"narrow", [&] { return dt::narrow(dx, 1, 1, 2); }},
      {"slice", [&] { return dt::slice(dx, 0, 0, 2, 2); }},
  };
  for (const Call& c : calls) {
    INFO(c.what);
    (void)c.fn();  // warm (expand's unsqueeze is a call of its own)
    const int64_t before = lookups();
    (void)c.fn();
    CHECK(lookups() - before == (std::string(c.what) == "expand" ? 2 : 1));
  }
}

TEST_CASE("no collective runs on a mesh dim of one rank") {
  const int64_t w = dt::world_size();
  const std::vector<dt::Placement> choices = {dt::Replicate(), dt::Shard(0), dt::Shard(1),
                                              dt::Partial()};
  for (const tt::Ints& shape : {tt::Ints{w, 1}, tt::Ints{1, w}, tt::Ints{1}}) {
    const dt::DeviceMesh mesh = tt::make_mesh(shape);
    const dt::Tensor x = tt::det_input({3 * w + 1, 5}, 0, -2.0, 0.5);
    dt::CommDebugMode comm;
    // Every redistribute pair.
    for (const Placements& src : tt::all_placements(choices, shape.size())) {
      const DTensor a = dt::distribute_tensor(x, mesh, src, std::nullopt);
      for (const Placements& dst : tt::all_placements(choices, shape.size())) {
        INFO(dt::shape_str(mesh.shape())
             << " " << dt::placements_str(src) << " -> " << dt::placements_str(dst));
        const dt::Tensor full = a.redistribute(dst).full_tensor();
        if (mesh.contains_me()) CHECK(tt::same_values(full, x, 1e-6));
      }
    }
    // Every registered op on sharded inputs, forward and backward.
    const dt::Registry& reg = dt::registered_ops();
    for (const std::string& name : reg.names()) {
      const dt::OpInfo& op = reg.get(name);
      if (!op.samples) continue;
      for (const Placements& p : tt::all_placements(choices, shape.size())) {
        if (op.data_dependent_shape && !mesh.contains_me()) {
          // An outside rank cannot know a data-dependent shape: told so, no collective.
          CHECK_THROWS_WITH(run_first_sample(op, mesh, p), Catch::Contains("is outside that mesh"));
          continue;
        }
        run_first_sample(op, mesh, p);
      }
    }
    DTensor leaf =
        dt::distribute_tensor(x, mesh, Placements(shape.size(), dt::Shard(0)), std::nullopt);
    leaf.requires_grad_();
    dt::sum(dt::mm(leaf, dt::t(leaf))).backward();
    INFO("mesh " << dt::shape_str(mesh.shape()) << ": " << comm.str());
    CHECK(comm.single_rank_count() == 0);
    if (mesh.size() == 1) CHECK(comm.total_count() == 0);
  }
}
