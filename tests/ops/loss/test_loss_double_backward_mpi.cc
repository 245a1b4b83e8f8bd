// Double backward (create_graph) on sharded DTensors (mpirun at 1, 2 and 4 ranks), against one
// device, float64 at 1e-12: a gradient penalty g = dL/d(params) with create_graph, then
// d sum(g^2) / d(params). Loss parallel: cross_entropy with class weights (replicated or sharded
// like the classes), ignored targets, label smoothing, through a colwise Linear whose logits are
// class-sharded, uneven; nll_loss with weights on class-sharded log-probabilities; the pointwise
// losses on batch- or class-sharded inputs (uneven, empty shards at 4 ranks); and the linear
// gradient ops of indexing whose derivative is their forward op: embedding_backward on a vocab- or
// column-sharded table, gather_backward, masked_select_backward, repeat_interleave_backward and
// diagonal_backward on sharded inputs.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "dtensor/autograd/create_graph.h"
#include "dtensor/autograd/engine.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/embedding/embedding.h"
#include "dtensor/ops/index/index.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/masked_select/masked_select.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/softmax/softmax.h"
#include "dtensor/ops/view/copy_ops.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace tt = dtensor::test;
using dt::DTensor;
using dt::Placements;
using dt::Reduction;
using dt::Tensor;

namespace {

using Fn = std::function<DTensor(const std::vector<DTensor>& ins)>;

// g = d fn / d ins with create_graph, then h = d sum_i sum(g_i^2) / d ins: g and h.
std::vector<DTensor> penalty(const Fn& fn, const std::vector<DTensor>& ins) {
  const DTensor loss[] = {fn(ins)};
  const std::vector<DTensor> g =
      dt::autograd::grad(loss, ins, {}, std::nullopt, /*create_graph=*/true);
  DTensor p;
  for (const DTensor& gi : g) {
    const DTensor s = dt::sum(gi * gi);
    p = p.defined() ? p + s : s;
  }
  const DTensor outs[] = {p};
  std::vector<DTensor> out = g;
  const std::vector<DTensor> h =
      dt::autograd::grad(outs, ins, {}, false, /*create_graph=*/false, /*allow_unused=*/true);
  for (size_t i = 0; i < h.size(); ++i) {
    out.push_back(h[i].defined() ? h[i] : dt::zeros_like(ins[i]).detach());
  }
  return out;
}

// The penalty on `full` laid out by `layout` (requiring grad) equals the one on one device.
void check_sharded(const Fn& fn, const std::vector<Tensor>& full, const dt::DeviceMesh& mesh,
                   const std::vector<Placements>& layout) {
  std::vector<DTensor> local, sharded;
  for (size_t i = 0; i < full.size(); ++i) {
    local.push_back(dt::local_dtensor(full[i]));
    local.back().requires_grad_();
    sharded.push_back(dt::distribute_tensor(full[i], mesh, layout[i], std::nullopt));
    sharded.back().requires_grad_();
  }
  const std::vector<DTensor> want = penalty(fn, local);
  const std::vector<DTensor> got = penalty(fn, sharded);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO((i < full.size() ? "g " : "h ") << i % full.size());
    CHECK(got[i].requires_grad() == (i < full.size()));
    CHECK(tt::same_values(got[i].full_tensor(), want[i].to_local(), 1e-12));
  }
}

// A constant replicated on ref's mesh (local for the single-device run).
DTensor like(const Tensor& t, const DTensor& ref) {
  if (ref.device_mesh().size() == 1 && dt::world_size() > 1) return dt::local_dtensor(t);
  const Placements all_r(static_cast<size_t>(ref.device_mesh().ndim()), dt::Replicate());
  return dt::distribute_tensor(t, ref.device_mesh(), all_r, std::nullopt);
}

// Class targets over every class, every 4th ignored (-100).
Tensor targets(int64_t n, int64_t classes) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i % 4 == 3 ? -100 : (i * 3 + 1) % classes;
  return dt::from_vector<int64_t>(v, {n});
}

Tensor f64(const tt::Ints& shape, int salt, double lo, double step) {
  return tt::det_input(dt::IntSpan(shape.data(), shape.size()), salt, lo, step, dt::kFloat64);
}

}  // namespace

TEST_CASE("create_graph: loss-parallel cross_entropy with weights equals one device") {
  const int64_t w = dt::world_size();
  const int64_t n = 2 * w + 1, c = 2 * w + 1, f = 3;
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w}, {"tp"});
  const Tensor cls = targets(n, c);
  const Tensor weight = f64({c}, 3, 0.5, 0.125);
  const std::vector<Tensor> full = {f64({n, f}, 1, -1.0, 0.25), f64({c, f}, 2, -0.75, 0.125),
                                    f64({c}, 4, -0.5, 0.125)};
  // x replicated, W and b colwise (Shard(0)): class-sharded logits, never gathered.
  const std::vector<Placements> layout = {{dt::Replicate()}, {dt::Shard(0)}, {dt::Shard(0)}};
  for (const Placements& pw : {Placements{dt::Replicate()}, Placements{dt::Shard(0)}}) {
    for (Reduction r : {Reduction::kMean, Reduction::kSum, Reduction::kNone}) {
      for (double s : {0.0, 0.1}) {
        INFO("weight " << dt::placements_str(pw) << " reduction " << static_cast<int>(r)
                       << " smoothing " << s);
        const Fn fn = [&](const std::vector<DTensor>& p) {
          const DTensor z = dt::linear(p[0], p[1], p[2]);
          const bool local = z.device_mesh().size() == 1 && w > 1;
          const DTensor t = like(cls, z);
          const DTensor cw = local
                                 ? dt::local_dtensor(weight)
                                 : dt::distribute_tensor(weight, z.device_mesh(), pw, std::nullopt);
          const DTensor l = dt::cross_entropy(z, t, r, -100, s, cw);
          return r == Reduction::kNone ? dt::sum(l * like(f64({n}, 5, -1.0, 0.25), z)) : l;
        };
        check_sharded(fn, full, mesh, layout);
      }
    }
  }
}

TEST_CASE("create_graph: nll_loss with weights on class-sharded log-probabilities") {
  const int64_t w = dt::world_size();
  const int64_t n = 2 * w + 1, c = 2 * w + 1;
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor cls = targets(n, c);
  const Tensor weight = f64({c}, 3, 0.5, 0.125);
  for (Reduction r : {Reduction::kMean, Reduction::kSum}) {
    INFO("reduction " << static_cast<int>(r));
    const Fn fn = [&](const std::vector<DTensor>& p) {
      const DTensor lp = dt::log_softmax(dt::tanh(p[0]) * 2.0, 1);
      return dt::nll_loss(lp, like(cls, p[0]), r, -100, like(weight, p[0]));
    };
    check_sharded(fn, {f64({n, c}, 1, -1.0, 0.25)}, mesh, {{dt::Shard(1)}});
  }
}

TEST_CASE("create_graph: pointwise losses on batch-sharded inputs equal one device") {
  const int64_t w = dt::world_size();
  const int64_t n = w * 3 + 1, c = 5;
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor cw = f64({c}, 3, 0.5, 0.125), pw = f64({c}, 4, 0.75, 0.25);
  const Tensor probs = f64({n, c}, 6, 0.05, 0.09);
  struct Case {
    const char* name;
    std::function<DTensor(const DTensor& z, const DTensor& y)> loss;
  };
  const Case cases[] = {
      {"l1", [](const DTensor& z, const DTensor& y) { return dt::l1_loss(z, y); }},
      {"smooth_l1",
       [](const DTensor& z, const DTensor& y) {
         return dt::smooth_l1_loss(z, y, Reduction::kSum, 0.6);
       }},
      {"huber", [](const DTensor& z,
                   const DTensor& y) { return dt::huber_loss(z, y, Reduction::kMean, 0.4); }},
      {"mse", [](const DTensor& z, const DTensor& y) { return dt::mse_loss(z, y); }},
      {"binary_cross_entropy",
       [&](const DTensor& z, const DTensor& y) {
         return dt::binary_cross_entropy(dt::sigmoid(z), dt::sigmoid(y), Reduction::kMean,
                                         like(cw, z));
       }},
      {"binary_cross_entropy_with_logits",
       [&](const DTensor& z, const DTensor& y) {
         return dt::binary_cross_entropy_with_logits(z, dt::sigmoid(y), Reduction::kMean,
                                                     like(cw, z), like(pw, z));
       }},
      {"kl_div",
       [](const DTensor& z, const DTensor& y) {
         return dt::kl_div(dt::log_softmax(z, 1), dt::softmax(y, 1), Reduction::kBatchMean);
       }},
      {"kl_div log_target",
       [](const DTensor& z, const DTensor& y) {
         return dt::kl_div(dt::log_softmax(z, 1), dt::log_softmax(y, 1), Reduction::kSum, true);
       }},
  };
  const std::vector<Tensor> full = {f64({n, 3}, 1, -1.0, 0.25), f64({c, 3}, 2, -0.75, 0.125),
                                    f64({c}, 4, -0.5, 0.125), f64({n, c}, 5, -1.0, 0.21)};
  // x and the target batch-sharded (the last rank's shard empty at 4 ranks: 13 rows, 4 each),
  // the Linear replicated; or the Linear colwise, so the losses' inputs, the target and the
  // weights are class-sharded (5 classes: 2, 2, 1, 0 at 4 ranks).
  const std::vector<Placements> layouts[] = {
      {{dt::Shard(0)}, {dt::Replicate()}, {dt::Replicate()}, {dt::Shard(0)}},
      {{dt::Replicate()}, {dt::Shard(0)}, {dt::Shard(0)}, {dt::Shard(1)}}};
  for (const std::vector<Placements>& layout : layouts) {
    for (const Case& k : cases) {
      INFO(k.name << " target " << dt::placements_str(layout[3]));
      const Fn fn = [&](const std::vector<DTensor>& p) {
        return k.loss(dt::linear(p[0], p[1], p[2]), p[3]);
      };
      check_sharded(fn, full, mesh, layout);
    }
  }
}

TEST_CASE("create_graph: the linear gradient ops of indexing on sharded inputs") {
  const int64_t w = dt::world_size();
  const int64_t n = 2 * w + 1;
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  SECTION("embedding_backward: vocab- and column-sharded tables, sharded indices") {
    std::vector<int64_t> iv;
    for (int64_t i = 0; i < 2 * n; ++i) iv.push_back((i * 5 + 2) % n);
    const Tensor idx = dt::from_vector<int64_t>(iv, {n, 2});
    for (const Placements& pe :
         {Placements{dt::Shard(0)}, Placements{dt::Shard(1)}, Placements{dt::Replicate()}}) {
      for (const Placements& pi : {Placements{dt::Replicate()}, Placements{dt::Shard(0)}}) {
        INFO("table " << dt::placements_str(pe) << " indices " << dt::placements_str(pi));
        const Fn fn = [&](const std::vector<DTensor>& p) {
          const bool local = p[0].device_mesh().size() == 1 && w > 1;
          const DTensor i = local
                                ? dt::local_dtensor(idx)
                                : dt::distribute_tensor(idx, p[0].device_mesh(), pi, std::nullopt);
          return dt::sum(dt::tanh(dt::embedding(i, p[0])) * like(f64({n, 2, n}, 7, -1, 0.2), p[0]));
        };
        check_sharded(fn, {f64({n, n}, 1, -1.0, 0.25)}, mesh, {pe});
      }
    }
  }
  SECTION("gather_backward, masked_select_backward, repeat_interleave_backward, diagonal") {
    std::vector<int64_t> gv;
    for (int64_t i = 0; i < 3 * n; ++i) gv.push_back((i * 2 + 1) % 4);
    const Tensor gidx = dt::from_vector<int64_t>(gv, {n, 3});
    std::vector<double> mv;
    for (int64_t i = 0; i < 4 * n; ++i) mv.push_back(i % 3 != 1 ? 1.0 : 0.0);
    const Tensor mask = dt::from_vector<double>(mv, {n, 4}).to(dt::kBool);
    struct Case {
      const char* name;
      std::function<DTensor(const DTensor&)> op;
      tt::Ints shape;
    };
    const Case cases[] = {
        {"gather", [&](const DTensor& x) { return dt::gather(x, 1, like(gidx, x)); }, {n, 4}},
        {"masked_select",
         [&](const DTensor& x) { return dt::masked_select(x, like(mask, x)); },
         {n, 4}},
        {"repeat_interleave",
         [](const DTensor& x) { return dt::repeat_interleave(x, 2, 1); },
         {n, 4}},
        {"diagonal", [](const DTensor& x) { return dt::diagonal(x, 0, 1, 2); }, {n, 3, 3}},
    };
    for (const Case& k : cases) {
      for (const Placements& px : {Placements{dt::Shard(0)}, Placements{dt::Replicate()}}) {
        INFO(k.name << " " << dt::placements_str(px));
        const Fn fn = [&](const std::vector<DTensor>& p) {
          const DTensor y = k.op(p[0]);
          return dt::sum(dt::tanh(y) * dt::sin(y * 3.0));
        };
        check_sharded(fn, {f64(k.shape, 1, -1.0, 0.25)}, mesh, {px});
      }
    }
  }
}
