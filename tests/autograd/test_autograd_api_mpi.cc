// autograd::grad under mpirun: on sharded inputs (1-D and 2-D meshes) the gradients equal the
// single-device ones, leaves' laid out like the leaves, nothing accumulated; inside data parallel
// a gradient with respect to the model's input runs no data-parallel reduction, and one with
// respect to a parameter is refused on every rank. autograd::functional (vjp ... hessian) on
// Shard(0) inputs equals its single-device results.
#include <catch2/catch.hpp>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "dtensor/autograd/create_graph.h"
#include "dtensor/autograd/engine.h"
#include "dtensor/autograd/functional.h"
#include "dtensor/collectives/comm_debug.h"
#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/parallel/data_parallel/data_parallel.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/memory_stats.h"
#include "tests/autograd/functional_functions.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace tt = dtensor::test;
using Catch::Contains;
using dt::DTensor;
using dt::Placements;
using dt::Tensor;

namespace {

// grad(sum((r @ w2)^2), [w1, h, x]) with h = x @ w1, r = h * h + h.
std::vector<DTensor> grads_of(const DTensor& x, const DTensor& w1, const DTensor& w2) {
  const DTensor h = dt::matmul(x, w1);
  const DTensor r = h * h + h;
  const DTensor y = dt::matmul(r, w2);
  const DTensor loss[] = {dt::sum(y * y)};
  const DTensor inputs[] = {w1, h, x};
  return dt::autograd::grad(loss, inputs);
}

DTensor input(const Tensor& full, const dt::DeviceMesh& mesh, const Placements& p) {
  DTensor d = dt::distribute_tensor(full, mesh, p, std::nullopt);
  d.requires_grad_();
  return d;
}

}  // namespace

TEST_CASE("autograd.grad on sharded inputs equals the single-device gradients") {
  const int64_t w = dt::world_size();
  const Tensor x = tt::det_input({w * 3 + 1, 3}, 1, -1.0, 0.25, dt::kFloat64);
  const Tensor w1 = tt::det_input({3, 4}, 2, -0.75, 0.125, dt::kFloat64);
  const Tensor w2 = tt::det_input({4, 2}, 3, -0.5, 0.125, dt::kFloat64);
  DTensor lx = dt::local_dtensor(x), lw1 = dt::local_dtensor(w1), lw2 = dt::local_dtensor(w2);
  for (DTensor* t : {&lx, &lw1, &lw2}) t->requires_grad_();
  const std::vector<DTensor> want = grads_of(lx, lw1, lw2);
  for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
    const size_t n = static_cast<size_t>(mesh.ndim());
    const Placements all_r(n, dt::Replicate()), all_s0(n, dt::Shard(0));
    Placements last_s1 = all_r;
    last_s1.back() = dt::Shard(1);
    for (const auto& [px, pw1] : {std::pair{all_s0, all_r}, std::pair{all_r, last_s1}}) {
      INFO("mesh " << dt::shape_str(mesh.shape()) << " x " << dt::placements_str(px) << " w1 "
                   << dt::placements_str(pw1));
      const DTensor dx = input(x, mesh, px), dw1 = input(w1, mesh, pw1),
                    dw2 = input(w2, mesh, all_r);
      const std::vector<DTensor> got = grads_of(dx, dw1, dw2);
      for (size_t i = 0; i < 3; ++i) {
        CHECK(tt::same_values(got[i].full_tensor(), want[i].to_local(), 1e-12));
      }
      CHECK(got[0].placements() == pw1);  // leaves: laid out like the leaf
      CHECK(got[2].placements() == px);
      CHECK_FALSE(dw1.grad().defined());
      CHECK_FALSE(dx.grad().defined());
      CHECK_FALSE(dw2.grad().defined());
    }
  }
}

namespace {

// A gradient penalty: gx = d sum(linear(act(linear(x, w1, b1)), w2, b2)) / dx with
// create_graph, then sum(gx^2) backward into the parameters. Returns gx and the grads.
// `checkpointed`: the MLP runs inside nn::checkpoint with x and the parameters as its inputs.
std::vector<DTensor> penalty_grads(const std::vector<DTensor>& p, bool gelu,
                                   bool checkpointed = false) {
  const auto mlp = [gelu](absl::Span<const DTensor> q) {
    const DTensor h = dt::linear(q[0], q[1], q[2]);
    return dt::DTensorList{dt::linear(gelu ? dt::gelu(h) : dt::tanh(h), q[3], q[4])};
  };
  const DTensor out = checkpointed ? dt::nn::checkpoint(mlp, p)[0] : mlp(p)[0];
  const DTensor outs[] = {dt::sum(out)}, ins[] = {p[0]};
  const DTensor gx = dt::autograd::grad(outs, ins, {}, std::nullopt, /*create_graph=*/true)[0];
  dt::sum(gx * gx).backward();
  return {gx, p[1].grad(), p[2].grad(), p[3].grad()};
}

}  // namespace

TEST_CASE("create_graph: a gradient penalty with Shard(0) input, TP Linear weights, uneven") {
  // Also through activation checkpointing (nn::checkpoint on the sharded inputs).
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w}, {"tp"});
  const Tensor full[] = {tt::det_input({2 * w + 1, 3}, 1, -1.0, 0.25, dt::kFloat64),
                         tt::det_input({2 * w + 1, 3}, 2, -0.75, 0.125, dt::kFloat64),
                         tt::det_input({2 * w + 1}, 3, -0.5, 0.125, dt::kFloat64),
                         tt::det_input({1, 2 * w + 1}, 4, -0.5, 0.25, dt::kFloat64),
                         tt::det_input({1}, 5, 0.1, 0.1, dt::kFloat64)};
  // x Shard(0); w1, b1 Shard(0) (colwise), w2 Shard(1) (rowwise), b2 Replicate: 2w + 1 rows and
  // features, uneven over the ranks.
  const Placements layout[] = {
      {dt::Shard(0)}, {dt::Shard(0)}, {dt::Shard(0)}, {dt::Shard(1)}, {dt::Replicate()}};
  for (const auto& [gelu, checkpointed] : {std::pair{false, false}, std::pair{true, false},
                                           std::pair{false, true}, std::pair{true, true}}) {
    // checkpointed: the sharded MLP inside nn::checkpoint (its recompute recorded under
    // create_graph) against the plain single-device one.
    INFO((gelu ? "gelu" : "tanh") << (checkpointed ? ", checkpointed" : ""));
    std::vector<DTensor> local, sharded;
    for (size_t i = 0; i < 5; ++i) {
      local.push_back(dt::local_dtensor(full[i]));
      local.back().requires_grad_();
      sharded.push_back(input(full[i], mesh, layout[i]));
    }
    const std::vector<DTensor> want = penalty_grads(local, gelu);
    const std::vector<DTensor> got = penalty_grads(sharded, gelu, checkpointed);
    for (size_t i = 0; i < want.size(); ++i) {
      INFO("value " << i);
      CHECK(tt::same_values(got[i].full_tensor(), want[i].to_local(), 1e-12));
    }
    CHECK(got[1].placements() == layout[1]);
  }
}

TEST_CASE("create_graph: grad of grad through from_local and to_local equals one device") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w}, {"tp"});
  // Each rank's block of a [2w, 3] x, the full one on every rank for the reference.
  const Tensor full = tt::det_input({2 * w, 3}, 1, -1.0, 0.25, dt::kFloat64);
  DTensor xl = dt::local_dtensor(full.slice(0, 2 * dt::world_rank(), 2 * dt::world_rank() + 2));
  DTensor xf = dt::local_dtensor(full);
  xl.requires_grad_();
  xf.requires_grad_();
  const Placements s0 = {dt::Shard(0)};
  const DTensor x = DTensor::from_local(xl, mesh, s0);
  // f = sum(sin(x)^3) over the global x, through to_local and back: each rank's piece.
  const DTensor y = dt::sin(x);
  const DTensor piece = y.to_local_dtensor();
  const DTensor f[] = {dt::sum(piece * piece * piece)}, in[] = {xl};
  const DTensor g = dt::autograd::grad(f, in, {}, std::nullopt, /*create_graph=*/true)[0];
  const DTensor gg[] = {dt::sum(g * g)};
  const DTensor h = dt::autograd::grad(gg, in)[0];
  const DTensor yf = dt::sin(xf);
  const DTensor ff[] = {dt::sum(yf * yf * yf)}, inf[] = {xf};
  const DTensor gf = dt::autograd::grad(ff, inf, {}, std::nullopt, true)[0];
  const DTensor ggf[] = {dt::sum(gf * gf)};
  const DTensor hf = dt::autograd::grad(ggf, inf)[0];
  const int64_t r = dt::world_rank();
  CHECK(tt::same_values(g.to_local(), gf.to_local().slice(0, 2 * r, 2 * r + 2), 1e-12));
  CHECK(tt::same_values(h.to_local(), hf.to_local().slice(0, 2 * r, 2 * r + 2), 1e-12));
}

TEST_CASE("autograd.grad inside data parallel: no reduction for the input, parameters refused") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w}, {"dp"});
  for (bool shard : {false, true}) {
    INFO((shard ? "fully_shard" : "replicate"));
    // Two Linear units under fully_shard: the first is resharded after forward and gathered
    // again for the input's gradient.
    auto mlp = [w] {
      dt::manual_seed(3);
      const dt::nn::ModuleOptions f64{dt::kFloat64};
      return dt::nn::Sequential{std::make_shared<dt::nn::Linear>(3, 4 * w, true, f64),
                                std::make_shared<dt::nn::Linear>(4 * w, 2 * w, true, f64)};
    };
    dt::nn::Sequential model = mlp(), ref = mlp();
    dt::DataParallelOptions options;
    options.grouping.module_types = {"Linear"};
    auto dp = shard ? dt::fully_shard(model, mesh, options) : dt::replicate(model, mesh);
    // Each rank its own slice of the batch.
    const Tensor xs =
        tt::det_input({2, 3}, static_cast<int>(dt::world_rank()), -1.0, 0.25, dt::kFloat64);
    auto loss_of = [](dt::nn::Module& m, const DTensor& x) {
      const DTensor out = m(x);
      return dt::sum(out * out);
    };
    DTensor x = dt::local_dtensor(xs), rx = dt::local_dtensor(xs);
    x.requires_grad_();
    rx.requires_grad_();
    {
      dt::CommDebugMode comm;
      const DTensor loss[] = {loss_of(model, x)};
      const DTensor in[] = {x};
      const DTensor gx = dt::autograd::grad(loss, in)[0];
      // The resharded units gather again (fully_shard); nothing is reduced.
      CHECK(comm.count(dt::CollectiveKind::kAllReduce) == 0);
      CHECK(comm.count(dt::CollectiveKind::kReduceScatter) == 0);
      const DTensor rloss[] = {loss_of(ref, rx)};
      const DTensor rin[] = {rx};
      CHECK(tt::same_values(gx.to_local(), dt::autograd::grad(rloss, rin)[0].to_local(), 1e-12));
      for (const DTensor& p : model.parameters()) CHECK_FALSE(p.grad().defined());
    }
    const DTensor loss[] = {loss_of(model, x)};
    const DTensor weight[] = {model.get_parameter("1.weight")};
    CHECK_THROWS_WITH(dt::autograd::grad(loss, weight),
                      Contains("[autograd.grad] an input is a parameter of a replicate"));
    if (shard) {
      // A gradient penalty's first gradient (create_graph, with respect to the input) through
      // fully_shard units: the recorded graph would read the units' freed parameters later, so
      // it is refused on every rank when the last unit's gradient arrives (review R3, finding 1).
      const DTensor penalty[] = {loss_of(model, x)};
      const DTensor in[] = {x};
      CHECK_THROWS_WITH(dt::autograd::grad(penalty, in, {}, std::nullopt, /*create_graph=*/true),
                        Contains("[fully_shard] create_graph=true through unit '1'"));
    }
    // Backward still trains: the refused call released what it gathered and counted its
    // backward (the case below checks the memory). The weight's post accumulate
    // grad hook runs once, after data parallel accumulated the reduced gradient (as FSDP2's).
    const DTensor& w = model.get_parameter("0.weight");
    int calls = 0;
    w.register_post_accumulate_grad_hook([&](const DTensor& p) {
      ++calls;
      REQUIRE(p.grad().defined());
      CHECK(p.grad().placements() == w.placements());
    });
    loss_of(model, x).backward();
    CHECK(calls == 1);
    CHECK(w.grad().defined());
    // backward(create_graph) reaching the parameters is refused on every rank (the reduction
    // would drop the gradients' history).
    const DTensor again[] = {loss_of(model, x)};
    CHECK_THROWS_WITH(dt::autograd::backward(again, {}, false, /*create_graph=*/true),
                      Contains(shard ? "[fully_shard] create_graph=true through unit"
                                     : "[backward] create_graph=true reached a parameter of a "
                                       "replicate / fully_shard"));
    // The refusals left nothing behind: a step gives what a model that saw none gives.
    dt::nn::Sequential fresh = mlp();
    auto fresh_dp = shard ? dt::fully_shard(fresh, mesh, options) : dt::replicate(fresh, mesh);
    model.zero_grad();
    loss_of(model, x).backward();
    loss_of(fresh, x).backward();
    for (const char* name : {"0.weight", "1.weight", "1.bias"}) {
      INFO(name);
      CHECK(tt::same_values(model.get_parameter(name).grad().to_local(),
                            fresh.get_parameter(name).grad().to_local(), 0.0));
    }
  }
}

namespace {

// Linear, LayerNorm (its own unit), Linear under fully_shard: a root holding sharded
// parameters (float64, width D = 16 * world size), and an input requiring grad.
struct ShardedChain {
  int64_t D = 16 * dt::world_size();
  int64_t linear_bytes = (D * D + D) * 8;
  dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {dt::world_size()}, {"dp"});
  std::shared_ptr<dt::nn::Sequential> model;

  explicit ShardedChain(uint64_t seed) {
    dt::manual_seed(seed);
    const dt::nn::ModuleOptions f64{dt::kFloat64};
    model = std::make_shared<dt::nn::Sequential>(
        std::vector<dt::nn::ModulePtr>{std::make_shared<dt::nn::Linear>(D, D, true, f64),
                                       std::make_shared<dt::nn::LayerNorm>(D, 1e-5, true, f64),
                                       std::make_shared<dt::nn::Linear>(D, D, true, f64)});
    dt::DataParallelOptions options;
    options.grouping.module_types = {"LayerNorm"};
    dt::fully_shard(*model, mesh, options);
  }
  DTensor input() const {
    DTensor x = dt::local_dtensor(
        tt::det_input({2, D}, static_cast<int>(dt::world_rank()), -1.0, 0.25, dt::kFloat64));
    x.requires_grad_();
    return x;
  }
};

}  // namespace

// fully_shard with a root holding sharded parameters (the two Linears; the LayerNorm its own
// unit, last in forward: kept gathered): autograd::grad runs the units' re-gather hooks but
// prunes (w.r.t. the input) or refuses at (w.r.t. a weight) their gather nodes, whose backward
// releases them and counts their backward. Before, the root stayed gathered after grad() and,
// its count of pending backwards never decremented, after every later backward too.
TEST_CASE("autograd.grad under fully_shard releases what it gathered") {
  const ShardedChain chain(5);
  dt::nn::Sequential& model = *chain.model;
  const int64_t linear_bytes = chain.linear_bytes;
  DTensor x = chain.input();
  auto loss_of = [&] {
    const DTensor out = model(x);
    return dt::sum(out * out);
  };
  // Bytes held beyond those before the first call (nothing gathered) once `run` is done and its
  // graph gone, less the `kept` bytes it returns.
  const int64_t base = dt::memory_stats().current_bytes;
  auto left_after = [base](const auto& run) {
    const int64_t kept = run();
    return dt::memory_stats().current_bytes - base - kept;
  };
  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    bool defined = false;
    const int64_t after_grad = left_after([&] {
      const DTensor loss[] = {loss_of()};
      const DTensor in[] = {x};
      defined = dt::autograd::grad(loss, in)[0].defined();
      return int64_t{0};
    });
    CHECK(defined);
    CHECK(after_grad < linear_bytes);
    std::string refusal;
    const int64_t after_refused = left_after([&] {
      const DTensor loss[] = {loss_of()};
      const DTensor weight[] = {model.get_parameter("0.weight")};
      try {
        dt::autograd::grad(loss, weight);
      } catch (const std::exception& e) {
        refusal = e.what();
      }
      return int64_t{0};
    });
    CHECK_THAT(refusal, Contains("[autograd.grad] an input is a parameter"));
    CHECK(after_refused < linear_bytes);
    // A following step: the root is released by its backward again. The gradients it leaves
    // (sharded) are not counted, and dropped before the next round.
    const int64_t after_step = left_after([&] {
      loss_of().backward();
      int64_t grads = 0;
      for (const DTensor& p : model.parameters()) grads += p.grad().to_local().numel() * 8;
      return grads;
    });
    CHECK(after_step < linear_bytes);
    // grad() over a retained graph released the root: the backward of that graph gathers it
    // again (the same gradients as a fresh step).
    std::vector<Tensor> fresh;
    for (const DTensor& p : model.parameters()) fresh.push_back(p.grad().to_local().clone());
    for (const DTensor& p : model.parameters()) p.set_grad(DTensor());
    {
      const DTensor loss[] = {loss_of()};
      const DTensor in[] = {x};
      dt::autograd::grad(loss, in, {}, /*retain_graph=*/true);
      loss[0].backward();
    }
    size_t k = 0;
    for (const DTensor& p : model.parameters()) {
      CHECK(tt::same_values(p.grad().to_local(), fresh[k++], 0.0));
    }
    for (const DTensor& p : model.parameters()) p.set_grad(DTensor());
  }
}

// A grad() pass that raises (here a hook on the input's gradient, after the units noted it)
// drops its queued end-of-pass callback: the next forward counts and releases what it
// gathered, and a later grad() releases again. Before, the callback stayed marked queued for
// good: no later grad() released the root (two Linears' bytes left after each).
TEST_CASE("autograd.grad under fully_shard recovers from a pass that raised") {
  const ShardedChain chain(6);
  dt::nn::Sequential& model = *chain.model;
  auto input_of = [&] { return chain.input(); };
  const int64_t base = dt::memory_stats().current_bytes;
  {
    DTensor bad = input_of();
    bad.register_hook(
        [](const DTensor&) -> DTensor { throw std::runtime_error("[test] hook raised"); });
    const DTensor out = model(bad);
    const DTensor loss[] = {dt::sum(out * out)};
    const DTensor in[] = {bad};
    CHECK_THROWS_WITH(dt::autograd::grad(loss, in), Contains("[test] hook raised"));
  }
  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    {
      const DTensor x = input_of();
      const DTensor out = model(x);
      const DTensor loss[] = {dt::sum(out * out)};
      const DTensor in[] = {x};
      CHECK(dt::autograd::grad(loss, in)[0].defined());
    }
    CHECK(dt::memory_stats().current_bytes - base < chain.linear_bytes);
  }
}

TEST_CASE("autograd.functional on Shard(0) inputs equals the single-device results") {
  namespace af = dt::autograd::functional;
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = tt::make_mesh({w});
  const Placements s0 = {dt::Shard(0)};
  // x [3w + 1, 5] and w [5, 2]: uneven shards at 2 and 4 ranks.
  const std::vector<Tensor> in = {tt::det_input({w * 3 + 1, 5}, 1, -1.0, 0.25, dt::kFloat64),
                                  tt::det_input({5, 2}, 2, -0.75, 0.125, dt::kFloat64)};
  const std::vector<Tensor> v_out = {tt::det_input({w * 3 + 1, 2}, 3, -0.5, 0.125, dt::kFloat64),
                                     tt::det_input({w * 3 + 1}, 4, -0.5, 0.25, dt::kFloat64)};
  std::vector<DTensor> local, sharded, lv_out, sv_out, lv_in, sv_in;
  for (size_t i = 0; i < 2; ++i) {
    local.push_back(dt::local_dtensor(in[i]));
    sharded.push_back(dt::distribute_tensor(in[i], mesh, s0, std::nullopt));
    lv_out.push_back(dt::local_dtensor(v_out[i]));
    sv_out.push_back(dt::distribute_tensor(v_out[i], mesh, s0, std::nullopt));
    const Tensor v =
        tt::det_input(in[i].sizes(), 5 + static_cast<int>(i), -0.5, 0.25, dt::kFloat64);
    lv_in.push_back(dt::local_dtensor(v));
    sv_in.push_back(dt::distribute_tensor(v, mesh, s0, std::nullopt));
  }
  const auto same = [](const DTensor& got, const DTensor& want) {
    return tt::same_values(got.full_tensor(), want.to_local(), 1e-12);
  };
  const af::Function g = dt::test::functional_g, s = dt::test::functional_s;
  SECTION("vjp, jvp, vhp, hvp") {
    const af::FunctionalResult vjp = af::vjp(g, sharded, sv_out), want = af::vjp(g, local, lv_out);
    const af::FunctionalResult jvp = af::jvp(g, sharded, sv_in), wjvp = af::jvp(g, local, lv_in);
    const af::FunctionalResult vhp = af::vhp(s, sharded, sv_in), wvhp = af::vhp(s, local, lv_in);
    const af::FunctionalResult hvp = af::hvp(s, sharded, sv_in), whvp = af::hvp(s, local, lv_in);
    for (size_t i = 0; i < 2; ++i) {
      CHECK(same(vjp.outputs[i], want.outputs[i]));
      CHECK(same(vjp.result[i], want.result[i]));
      CHECK(vjp.result[i].placements() == s0);  // laid out like the input
      CHECK(same(jvp.result[i], wjvp.result[i]));
      CHECK(jvp.result[i].placements() == jvp.outputs[i].placements());  // like the output
      CHECK(same(vhp.result[i], wvhp.result[i]));
      CHECK(vhp.result[i].placements() == s0);
      CHECK(same(hvp.result[i], whvp.result[i]));
    }
  }
  SECTION("jacobian and hessian") {
    const auto jac = af::jacobian(g, sharded), wjac = af::jacobian(g, local);
    const auto hess = af::hessian(s, sharded), whess = af::hessian(s, local);
    for (size_t i = 0; i < 2; ++i) {
      for (size_t j = 0; j < 2; ++j) {
        INFO("block " << i << j << " jacobian " << dt::placements_str(jac[i][j].placements())
                      << " hessian " << dt::placements_str(hess[i][j].placements()));
        CHECK(same(jac[i][j], wjac[i][j]));
        CHECK(same(hess[i][j], whess[i][j]));
        // Shard(0) of input j (2-d) moves past the output's (the other input's) dims.
        CHECK(jac[i][j].placements() == Placements(1, dt::Shard(jac[i][j].dim() - 2)));
        CHECK(hess[i][j].placements() == Placements(1, dt::Shard(2)));
      }
    }
  }
  SECTION("create_graph: laid out like the inputs, differentiable again") {
    // The inputs require grad, so func sees views of them (non-leaves, whose gradients
    // autograd::grad returns as they arrive: a Replicate w's x^T g is Partial).
    const Placements r = {dt::Replicate()};
    const std::vector<Placements> like = {s0, r};
    std::vector<DTensor> rg, lrg;
    for (size_t i = 0; i < 2; ++i) {
      rg.push_back(dt::distribute_tensor(in[i], mesh, like[i], std::nullopt).requires_grad_());
      lrg.push_back(local[i].detach().requires_grad_());
    }
    const af::FunctionalResult vjp = af::vjp(g, rg, sv_out, true),
                               want = af::vjp(g, lrg, lv_out, true);
    const af::FunctionalResult vhp = af::vhp(s, rg, sv_in, true),
                               wvhp = af::vhp(s, lrg, lv_in, true);
    const af::FunctionalResult hvp = af::hvp(s, rg, sv_in, true),
                               whvp = af::hvp(s, lrg, lv_in, true);
    const auto jac = af::jacobian(g, rg, true), wjac = af::jacobian(g, lrg, true);
    const auto hess = af::hessian(s, rg, true), whess = af::hessian(s, lrg, true);
    // d sum(r * r) / d x: the results keep their history through the redistributes.
    const auto second = [](const DTensor& r, const DTensor& x) {
      const DTensor loss[] = {dt::sum(r * r)}, in[] = {x};
      return dt::autograd::grad(loss, in, {}, /*retain_graph=*/true)[0];
    };
    for (size_t i = 0; i < 2; ++i) {
      INFO("input " << i << " vjp " << dt::placements_str(vjp.result[i].placements()) << " vhp "
                    << dt::placements_str(vhp.result[i].placements()) << " hvp "
                    << dt::placements_str(hvp.result[i].placements()));
      CHECK(vjp.result[i].placements() == like[i]);
      CHECK(vhp.result[i].placements() == like[i]);
      CHECK(hvp.result[i].placements() == like[i]);
      CHECK(same(vjp.result[i], want.result[i]));
      CHECK(same(vhp.result[i], wvhp.result[i]));
      CHECK(same(hvp.result[i], whvp.result[i]));
      CHECK(same(second(vjp.result[i], rg[0]), second(want.result[i], lrg[0])));
      CHECK(same(second(hvp.result[i], rg[1]), second(whvp.result[i], lrg[1])));
      for (size_t j = 0; j < 2; ++j) {
        INFO("block " << i << j << " jacobian " << dt::placements_str(jac[i][j].placements())
                      << " hessian " << dt::placements_str(hess[i][j].placements()));
        CHECK(jac[i][j].placements() ==
              (j == 0 ? Placements(1, dt::Shard(jac[i][j].dim() - 2)) : r));
        CHECK(hess[i][j].placements() == (j == 0 ? Placements(1, dt::Shard(2)) : r));
        CHECK(same(jac[i][j], wjac[i][j]));
        CHECK(same(hess[i][j], whess[i][j]));
      }
    }
    CHECK(same(second(jac[0][1], rg[1]), second(wjac[0][1], lrg[1])));
    CHECK(same(second(hess[1][0], rg[0]), second(whess[1][0], lrg[0])));
  }
}
