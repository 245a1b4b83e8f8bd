// DTensor losses (mpirun at 1, 2 and 4 ranks). cross_entropy: for every logits placement (R,
// S(d), P(sum)) and target placement (R, S(0)) on a 1-D and a 2-D mesh, uneven sizes, each
// reduction, ignored targets and label smoothing, the result equals the op on the full
// tensors; loss parallel: class-sharded logits are never all-gathered (CommDebugMode); the same
// with class weights (replicated or sharded like the classes) and class-probability targets,
// gradients included. The pointwise losses and nll_loss (class weights): the same over every
// layout, uneven and empty shards, with the result placements and collective counts the
// sharding implies; nll_loss's means (a registered op) also through the backward, against one
// device.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/softmax/softmax.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace tt = dtensor::test;
using dt::DTensor;
using dt::Placements;
using dt::Reduction;
using dt::Shard;
using dt::Tensor;

namespace {

// Targets over every class, with every 4th one ignored (-100).
Tensor targets(const tt::Ints& shape, int64_t classes) {
  const int64_t n = dt::shape_numel(dt::IntSpan(shape.data(), shape.size()));
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i % 4 == 3 ? -100 : (i * 3 + 1) % classes;
  return dt::from_vector<int64_t>(v, dt::IntSpan(shape.data(), shape.size()));
}

}  // namespace

TEST_CASE("dtensor cross_entropy equals the full-tensor op for every placement") {
  const int64_t w = dt::world_size();
  const int64_t n = w * 3 + 1, c = w * 2 + 1;
  struct Case {
    tt::Ints logits, target;
  };
  for (const Case& k : {Case{{n, c}, {n}}, Case{{n, c, 2}, {n, 2}}, Case{{c}, {}}}) {
    const Tensor x = tt::det_input(k.logits, 3, -3.0, 0.65);
    const Tensor tg = targets(k.target, c);
    for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
      const int64_t nd = static_cast<int64_t>(k.logits.size());
      for (const Placements& px : tt::all_placements(tt::shard_choices(nd), mesh.ndim())) {
        for (const Placements& pt :
             tt::all_placements(tt::shard_choices(k.target.empty() ? 0 : 1, false), mesh.ndim())) {
          const DTensor dx = dt::distribute_tensor(x, mesh, px, std::nullopt);
          const DTensor dtg = dt::distribute_tensor(tg, mesh, pt, std::nullopt);
          for (Reduction r : {Reduction::kNone, Reduction::kSum, Reduction::kMean}) {
            for (double s : {0.0, 0.1}) {
              INFO(tt::describe(mesh, {px}, k.logits)
                   << " target " << dt::placements_str(pt) << " reduction " << static_cast<int>(r)
                   << " smoothing " << s);
              const Tensor want = dt::cross_entropy(x, tg, r, -100, s);
              const DTensor got = dt::cross_entropy(dx, dtg, r, -100, s);
              CHECK(tt::same_values(got.full_tensor(), want, 1e-5));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("dtensor cross_entropy: loss parallel on class-sharded logits never all-gathers") {
  const int64_t w = dt::world_size();
  const int64_t n = w * 2 + 1, c = w * 5 + 3;
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = tt::det_input({n, c}, 1, -4.0, 0.8);
  const Tensor tg = targets({n}, c);
  for (dt::Placement p : {Shard(1), Shard(-1)}) {
    const DTensor dx = dt::distribute_tensor(x, mesh, {p}, std::nullopt);
    const DTensor dtg = dt::distribute_tensor(tg, mesh, {dt::Replicate()}, std::nullopt);
    for (Reduction r : {Reduction::kNone, Reduction::kSum, Reduction::kMean}) {
      dt::CommDebugMode comm;
      const DTensor loss = dt::cross_entropy(dx, dtg, r, -100, 0.2);
      CHECK(comm.count(dt::CollectiveKind::kAllGather) == 0);
      CHECK(comm.count(dt::CollectiveKind::kAllToAll) == 0);
      if (w > 1) CHECK(comm.count(dt::CollectiveKind::kAllReduce) == 2);  // max, then sums
      INFO(comm.str());
      CHECK(loss.placements() == Placements{dt::Replicate()});
      CHECK(tt::same_values(loss.full_tensor(), dt::cross_entropy(x, tg, r, -100, 0.2), 1e-5));
    }
  }
  // Batch-sharded on one mesh dim and class-sharded on the other.
  if (w % 2 == 0) {
    const dt::DeviceMesh m2 = dt::init_device_mesh(dt::kCPU, {2, w / 2});
    const DTensor dx = dt::distribute_tensor(x, m2, {Shard(0), Shard(1)}, std::nullopt);
    const DTensor dtg = dt::distribute_tensor(tg, m2, {Shard(0), dt::Replicate()}, std::nullopt);
    dt::CommDebugMode comm;
    const DTensor loss = dt::cross_entropy(dx, dtg, Reduction::kNone);
    CHECK(comm.count(dt::CollectiveKind::kAllGather) == 0);
    CHECK(loss.placements() == Placements{Shard(0), dt::Replicate()});
    const DTensor sum = dt::cross_entropy(dx, dtg, Reduction::kSum);
    CHECK(sum.placements() == Placements{dt::Partial(), dt::Replicate()});
    CHECK(comm.count(dt::CollectiveKind::kAllGather) == 0);
    CHECK(tt::same_values(loss.full_tensor(), dt::cross_entropy(x, tg, Reduction::kNone)));
    CHECK(tt::same_values(sum.full_tensor(), dt::cross_entropy(x, tg, Reduction::kSum)));
  }
}

TEST_CASE("dtensor cross_entropy errors name the op and the argument") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const DTensor dx = dt::distribute_tensor(tt::det_input({w, 4}), mesh, {Shard(1)}, std::nullopt);
  const DTensor good =
      dt::distribute_tensor(targets({w}, 4), mesh, {dt::Replicate()}, std::nullopt);
  const DTensor wrong_shape =
      dt::distribute_tensor(targets({w + 1}, 4), mesh, {dt::Replicate()}, std::nullopt);
  const DTensor out_of_range = dt::distribute_tensor(
      dt::full({w}, 9, dt::TensorOptions(dt::kInt64)), mesh, {dt::Replicate()}, std::nullopt);
  const DTensor float_target =
      dt::distribute_tensor(tt::det_input({w}), mesh, {dt::Replicate()}, std::nullopt);
  REQUIRE_THROWS_WITH(dt::cross_entropy(dx, wrong_shape), Catch::Contains("argument target"));
  REQUIRE_THROWS_WITH(dt::cross_entropy(dx, out_of_range), Catch::Contains("out of range"));
  REQUIRE_THROWS_WITH(dt::cross_entropy(dx, float_target), Catch::Contains("[cross_entropy]"));
  REQUIRE_THROWS_WITH(dt::cross_entropy(dx, good, Reduction::kMean, -100, 1.5),
                      Catch::Contains("label_smoothing"));
  REQUIRE_THROWS_AS(dt::cross_entropy(DTensor(), good), dt::Error);
}

TEST_CASE("dtensor cross_entropy: a bad target in one rank's batch shard raises on every rank") {
  const int64_t w = dt::world_size();
  const int64_t me = dt::world_rank();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  // Each rank holds 2 rows of a batch-sharded [2w, 5] problem; only rank 0's targets are bad.
  const DTensor dx =
      dt::distribute_tensor(tt::det_input({2 * w, 5}), mesh, {Shard(0)}, std::nullopt);
  std::vector<int64_t> t = {1, 4};
  if (me == 0) t[1] = 7;
  const DTensor target =
      DTensor::from_local(dt::from_vector<int64_t>(t, {2}), mesh, {Shard(0)}, false);
  const auto bad_target = Catch::Contains("[cross_entropy] target 7 out of range for 5 classes");
  if (w > 1) {
    REQUIRE_THROWS_WITH(dt::cross_entropy(dx, target),
                        bad_target && Catch::Contains("(raised on rank 0)"));
  } else {
    REQUIRE_THROWS_WITH(dt::cross_entropy(dx, target),
                        bad_target && !Catch::Contains("raised on rank"));
  }
  // The ranks are still in step: the next call's collectives pair correctly.
  const DTensor fine =
      DTensor::from_local(dt::from_vector<int64_t>({1, 4}, {2}), mesh, {Shard(0)}, false);
  const DTensor loss = dt::cross_entropy(dx, fine);
  CHECK(dt::allclose(loss.full_tensor(), dt::cross_entropy(dx.full_tensor(), fine.full_tensor())));
}

// PyTorch 2.15 (tests/ops/torch_grad_conventions.py): cross_entropy(reduction=mean) with every
// target ignored is 0/0 = NaN, and its gradient is 0 everywhere (not NaN: a division by the
// count 0 would send inf back, and inf times the 0/1 mask of the ignored targets is NaN); also
// with label smoothing. A batch in which some targets count keeps their gradient finite.
TEST_CASE("dtensor cross_entropy: a mean with every target ignored is NaN with a zero gradient") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = tt::det_input({3, 4}, 0, -1.0, 0.25, dt::kFloat64);
  const Tensor ignored = dt::full({3}, -100, dt::TensorOptions(dt::kInt64));
  const Tensor some = dt::from_vector<int64_t>({-100, 2, -100}, {3});
  for (const dt::Placement p :
       {dt::Placement(dt::Replicate()), dt::Placement(Shard(0)), dt::Placement(Shard(1))}) {
    for (double s : {0.0, 0.1}) {
      INFO("logits " << p.str() << " smoothing " << s);
      DTensor dx = dt::distribute_tensor(x, mesh, {p}, std::nullopt);
      dx.requires_grad_();
      const DTensor target = dt::distribute_tensor(ignored, mesh, {dt::Replicate()}, std::nullopt);
      const DTensor loss = dt::cross_entropy(dx, target, Reduction::kMean, -100, s);
      CHECK(std::isnan(loss.full_tensor().item<double>()));
      loss.backward();
      CHECK(tt::same_values(dx.grad().full_tensor(), dt::zeros({3, 4}, dt::kFloat64), 0));

      DTensor dy = dt::distribute_tensor(x, mesh, {p}, std::nullopt);
      dy.requires_grad_();
      const DTensor partly = dt::distribute_tensor(some, mesh, {dt::Replicate()}, std::nullopt);
      dt::cross_entropy(dy, partly, Reduction::kMean, -100, s).backward();
      const std::vector<double> g = dy.grad().full_tensor().to_vector<double>();
      // The one counted row (target 2, a mean over one target): softmax(x1) minus the smoothed
      // one-hot, (1 - s) e_2 + s / 4.
      const std::vector<double> p1 = dt::softmax(x.narrow(0, 1, 1), -1).to_vector<double>();
      for (size_t i = 0; i < g.size(); ++i) {
        if (i / 4 != 1) {
          CHECK(g[i] == 0.0);  // the ignored rows
          continue;
        }
        const double want = p1[i % 4] - ((i % 4 == 2 ? 1.0 - s : 0.0) + s / 4);
        CHECK(g[i] == Approx(want).margin(1e-12));
      }
    }
  }
}

// ---- cross_entropy with class weights and class-probability targets -------------------------

namespace {

// The weights replicated, or sharded like the classes where the logits px are (class dim cd).
Placements weight_layout(const Placements& px, int64_t cd, bool sharded) {
  Placements pw(px.size(), dt::Replicate());
  for (size_t m = 0; m < px.size() && sharded; ++m) {
    if (px[m].is_shard() && px[m].dim() == cd) pw[m] = Shard(0);
  }
  return pw;
}

}  // namespace

TEST_CASE("dtensor cross_entropy with weights or probabilities equals the full-tensor op") {
  const int64_t w = dt::world_size();
  const int64_t n = w * 3 + 1, c = w * 2 + 1;
  struct Case {
    tt::Ints logits, target;
  };
  for (const Case& k : {Case{{n, c}, {n}}, Case{{n, c, 2}, {n, 2}}, Case{{c}, {}}}) {
    const Tensor x = tt::det_input(k.logits, 3, -3.0, 0.65);
    const Tensor tg = targets(k.target, c);
    const Tensor probs = tt::det_input(k.logits, 5, 0.05, 0.09);  // rows need not sum to 1
    const Tensor weight = tt::det_input({c}, 1, 0.5, 0.25);
    const int64_t nd = static_cast<int64_t>(k.logits.size());
    const int64_t cd = nd == 1 ? 0 : 1;
    for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
      const auto on = [&](const Tensor& v, const Placements& p) {
        return dt::distribute_tensor(v, mesh, p, std::nullopt);
      };
      const Placements replicated(static_cast<size_t>(mesh.ndim()), dt::Replicate());
      for (const Placements& px : tt::all_placements(tt::shard_choices(nd), mesh.ndim())) {
        const DTensor dx = on(x, px);
        // Probabilities laid out like the logits (Partial: a replicated copy), or replicated.
        bool partial = false;
        for (const dt::Placement& q : px) partial |= q.is_partial();
        const DTensor dp = on(probs, partial ? replicated : px);
        const DTensor dp_r = on(probs, replicated);
        const DTensor dtg = on(tg, replicated);
        for (bool sharded_weight : {false, true}) {
          const DTensor dw = on(weight, weight_layout(px, cd, sharded_weight));
          for (Reduction r : {Reduction::kNone, Reduction::kSum, Reduction::kMean}) {
            for (double s : {0.0, 0.1}) {
              INFO(tt::describe(mesh, {px}, k.logits)
                   << " weight " << dt::placements_str(dw.placements()) << " reduction "
                   << dt::reduction_name(r) << " smoothing " << s);
              CHECK(tt::same_values(dt::cross_entropy(dx, dtg, r, -100, s, dw).full_tensor(),
                                    dt::cross_entropy(x, tg, r, -100, s, weight), 1e-5));
              CHECK(tt::same_values(dt::cross_entropy(dx, dp, r, -100, s, dw).full_tensor(),
                                    dt::cross_entropy(x, probs, r, -100, s, weight), 1e-5));
              if (sharded_weight) continue;
              CHECK(tt::same_values(dt::cross_entropy(dx, dp_r, r, -100, s).full_tensor(),
                                    dt::cross_entropy(x, probs, r, -100, s), 1e-5));
            }
          }
        }
      }
    }
  }
}

// Loss parallel with weights / probabilities: the class-sharded logits are never gathered (one
// all-reduce(max), one all-reduce(sum) of every class sum together), and the gradients (of the
// logits and of a probability target) equal one device's, class-sharded, batch-sharded and 2-D.
TEST_CASE("dtensor cross_entropy weights and probabilities: loss parallel, gradients exact") {
  const int64_t w = dt::world_size();
  const int64_t n = 2 * w + 1, c = 3 * w + 2;
  const Tensor x = tt::det_input({n, c}, 1, -4.0, 0.8, dt::kFloat64);
  const Tensor tg = targets({n}, c);
  const Tensor probs = tt::det_input({n, c}, 5, 0.05, 0.09, dt::kFloat64);
  const Tensor weight = tt::det_input({c}, 2, 0.5, 0.25, dt::kFloat64);
  const Tensor upstream = tt::det_input({n}, 4, -1.0, 0.3, dt::kFloat64);
  struct Layout {
    tt::Ints mesh;
    Placements x, t, w;
  };
  std::vector<Layout> layouts = {{{w}, {Shard(1)}, {dt::Replicate()}, {Shard(0)}},
                                 {{w}, {Shard(1)}, {dt::Replicate()}, {dt::Replicate()}},
                                 {{w}, {Shard(0)}, {Shard(0)}, {dt::Replicate()}}};
  if (w % 2 == 0) {
    layouts.push_back({{2, w / 2},
                       {Shard(0), Shard(1)},
                       {Shard(0), dt::Replicate()},
                       {dt::Replicate(), Shard(0)}});
  }
  for (const Layout& lay : layouts) {
    const dt::DeviceMesh mesh = tt::make_mesh(lay.mesh);
    const bool class_sharded = lay.x.back() == Shard(1);
    for (bool prob : {false, true}) {
      for (Reduction r : {Reduction::kNone, Reduction::kSum, Reduction::kMean}) {
        INFO("logits " << dt::placements_str(lay.x) << " on " << mesh.ndim() << "-d mesh, "
                       << (prob ? "probabilities" : "class indices") << ", reduction "
                       << dt::reduction_name(r));
        // One device, through autograd.
        DTensor rx = dt::local_dtensor(x.clone()), rp = dt::local_dtensor(probs.clone());
        rx.requires_grad_();
        rp.requires_grad_();
        const DTensor rt = prob ? rp : dt::local_dtensor(tg);
        const DTensor ref = dt::cross_entropy(rx, rt, r, -100, 0.2, dt::local_dtensor(weight));
        if (r == Reduction::kNone) {
          ref.backward(dt::local_dtensor(upstream));
        } else {
          ref.backward();
        }
        // Sharded.
        DTensor dx = dt::distribute_tensor(x, mesh, lay.x, std::nullopt);
        DTensor dp = dt::distribute_tensor(probs, mesh, lay.x, std::nullopt);
        dx.requires_grad_();
        dp.requires_grad_();
        const DTensor dtarget = prob ? dp : dt::distribute_tensor(tg, mesh, lay.t, std::nullopt);
        const DTensor dw = dt::distribute_tensor(weight, mesh, lay.w, std::nullopt);
        dt::CommDebugMode comm;
        const DTensor loss = dt::cross_entropy(dx, dtarget, r, -100, 0.2, dw);
        INFO(comm.str());
        CHECK(comm.count(dt::CollectiveKind::kAllGather) == 0);
        CHECK(comm.count(dt::CollectiveKind::kAllToAll) == 0);
        if (class_sharded && lay.mesh.size() == 1 && w > 1) {
          CHECK(comm.count(dt::CollectiveKind::kAllReduce) == 2);  // max, then the sums
        }
        CHECK(tt::same_values(loss.full_tensor(), ref.to_local(), 1e-12));
        if (r == Reduction::kNone) {
          Placements pu(static_cast<size_t>(mesh.ndim()), dt::Replicate());
          loss.backward(dt::distribute_tensor(upstream, mesh, pu, std::nullopt)
                            .redistribute(loss.placements()));
        } else {
          loss.backward();
        }
        CHECK(dx.grad().placements() == lay.x);
        CHECK(tt::same_values(dx.grad().full_tensor(), rx.grad().to_local(), 1e-12));
        if (prob) CHECK(tt::same_values(dp.grad().full_tensor(), rp.grad().to_local(), 1e-12));
      }
    }
  }
}

TEST_CASE("dtensor cross_entropy weight and probability target errors, raised on every rank") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const auto on = [&](const Tensor& v, dt::Placement p) {
    return dt::distribute_tensor(v, mesh, {p}, std::nullopt);
  };
  const DTensor dx = on(tt::det_input({2 * w, 5}), Shard(1));
  const DTensor good = on(targets({2 * w}, 5), dt::Replicate());
  REQUIRE_THROWS_WITH(
      dt::cross_entropy(dx, good, Reduction::kMean, -100, 0.0, on(dt::ones({4}), dt::Replicate())),
      Catch::Contains("[cross_entropy] weight of shape [4], expected [5] (one weight per class)"));
  REQUIRE_THROWS_WITH(dt::cross_entropy(dx, good, Reduction::kMean, -100, 0.0,
                                        on(dt::ones({5}, dt::kInt64), dt::Replicate())),
                      Catch::Contains("[cross_entropy] weight has dtype int64, expected a floating "
                                      "dtype"));
  REQUIRE_THROWS_WITH(
      dt::cross_entropy(dx, on(dt::zeros({2 * w, 5}, dt::kInt64), Shard(1))),
      Catch::Contains("[cross_entropy] argument target holds class probabilities") &&
          Catch::Contains("has dtype int64, expected the input's floating dtype float32"));
  REQUIRE_THROWS_WITH(
      dt::cross_entropy(dx, on(dt::zeros({2 * w, 5}, dt::kFloat64), Shard(1))),
      Catch::Contains("has dtype float64, expected the input's floating dtype float32"));
  REQUIRE_THROWS_WITH(dt::cross_entropy(dx, on(dt::zeros({2 * w, 4}), Shard(0))),
                      Catch::Contains("[cross_entropy] argument target has dtype float32, "
                                      "expected int64 or int32 (class indices), or class "
                                      "probabilities of the input's shape"));
  REQUIRE_THROWS_WITH(
      dt::cross_entropy(dx, on(dt::zeros({2 * w, 5}), Shard(1)), Reduction::kMean, 3),
      Catch::Contains("[cross_entropy] ignore_index 3 is not supported with "
                      "class-probability targets"));
  // Still in step: a good call afterwards pairs its collectives.
  const DTensor p = on(tt::det_input({2 * w, 5}, 2, 0.1, 0.05), Shard(1));
  CHECK(std::isfinite(dt::cross_entropy(dx, p).full_tensor().item<double>()));
}

// ---- pointwise losses and nll_loss ----------------------------------------------------------

namespace {

// Every pointwise loss (weighted forms included) applied to Tensors or DTensors alike: input x
// (probabilities p for binary_cross_entropy), target y (t in [0, 1] for the bce forms), the
// weights w [C] and pw [C] (C the last dim).
template <typename T>
std::vector<std::pair<const char*, T>> all_losses(const T& x, const T& y, const T& p, const T& t,
                                                  const T& w, const T& pw, Reduction r) {
  const Reduction kl = r == Reduction::kMean ? Reduction::kBatchMean : r;
  return {
      {"mse_loss", dt::mse_loss(x, y, r)},
      {"l1_loss", dt::l1_loss(x, y, r)},
      {"smooth_l1_loss", dt::smooth_l1_loss(x, y, r, 0.75)},
      {"huber_loss", dt::huber_loss(x, y, r, 1.5)},
      {"binary_cross_entropy", dt::binary_cross_entropy(p, t, r, w)},
      {"binary_cross_entropy_with_logits", dt::binary_cross_entropy_with_logits(x, t, r, w, pw)},
      {"kl_div", dt::kl_div(x, p, kl)},
      {"kl_div(log_target)", dt::kl_div(x, y, r, true)}};
}

struct LossData {
  Tensor x, y, p, t, w, pw;
};

LossData loss_data(const tt::Ints& shape) {
  const int64_t c = shape.back();
  return {tt::det_input(shape, 1, -2.0, 0.4),  tt::det_input(shape, 4, -2.5, 0.5),
          tt::det_input(shape, 2, 0.05, 0.09), tt::det_input(shape, 5, 0.0, 0.1),
          tt::det_input({c}, 3, 0.5, 0.25),    tt::det_input({c}, 6, 0.5, 0.3)};
}

}  // namespace

TEST_CASE("dtensor pointwise losses equal the full-tensor op for every layout and reduction") {
  const int64_t w = dt::world_size();
  // Uneven shards, and a short dim that leaves the last rank an empty shard.
  for (const tt::Ints& shape : {tt::Ints{3 * w + 1, 3}, tt::Ints{w > 1 ? w - 1 : 1, 2}}) {
    const LossData d = loss_data(shape);
    for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
      const auto on = [&](const Tensor& v, const Placements& p) {
        return dt::distribute_tensor(v, mesh, p, std::nullopt);
      };
      const Placements replicated(static_cast<size_t>(mesh.ndim()), dt::Replicate());
      for (const Placements& px : tt::placement_lists(mesh.ndim(), tt::shard_choices(2), 2)) {
        // The target laid out like the input, or replicated (redistributed to the input's).
        for (const Placements& pt : {px, replicated}) {
          for (Reduction r : {Reduction::kNone, Reduction::kSum, Reduction::kMean}) {
            const auto want = all_losses(d.x, d.y, d.p, d.t, d.w, d.pw, r);
            const auto got = all_losses(on(d.x, px), on(d.y, pt), on(d.p, px), on(d.t, pt),
                                        on(d.w, replicated), on(d.pw, replicated), r);
            for (size_t k = 0; k < want.size(); ++k) {
              INFO(want[k].first << " " << tt::describe(mesh, {px}, shape) << " target "
                                 << dt::placements_str(pt) << " reduction "
                                 << dt::reduction_name(r));
              CHECK(tt::same_values(got[k].second.full_tensor(), want[k].second, 1e-5));
              // Inputs laid out alike stay as they are: the result is kept, or Partial(sum)
              // where they are sharded. (A replicated target is chunked for free, but then the
              // engine weighs the deferred all-reduce against gathering a tiny input.)
              bool partial_input = false;
              for (const dt::Placement& q : px) partial_input |= q.is_partial();
              if (partial_input || pt != px) continue;
              // (A mesh dim of one rank may relabel either way: every candidate is free there.)
              const Placements& out = got[k].second.placements();
              for (int64_t m = 0; m < mesh.ndim(); ++m) {
                if (mesh.size(m) == 1) continue;
                const bool reduced = r != Reduction::kNone && px[m].is_shard();
                CHECK(out[m] == (reduced ? dt::Placement(dt::Partial()) : px[m]));
              }
            }
          }
        }
      }
    }
  }
}

TEST_CASE("dtensor mse_loss(mean) over batch-sharded inputs: one scalar all-reduce, no gather") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = tt::det_input({3 * w + 1, 4}, 1, -2.0, 0.4);
  const Tensor y = tt::det_input({3 * w + 1, 4}, 2, -1.0, 0.3);
  DTensor dx = dt::distribute_tensor(x, mesh, {Shard(0)}, std::nullopt);
  const DTensor dy = dt::distribute_tensor(y, mesh, {Shard(0)}, std::nullopt);
  dx.requires_grad_();
  dt::CommDebugMode comm;
  const DTensor loss = dt::mse_loss(dx, dy);
  CHECK(comm.total_count() == 0);  // each rank's share: its rows' sum / the global numel
  CHECK(loss.placements() == Placements{dt::Partial()});
  const Tensor value = loss.full_tensor();
  INFO(comm.str());
  CHECK(comm.count(dt::CollectiveKind::kAllReduce) == (w > 1 ? 1 : 0));
  CHECK(comm.total_count() == comm.count(dt::CollectiveKind::kAllReduce));
  CHECK(tt::same_values(value, dt::mse_loss(x, y), 1e-6));
  // The gradient 2 (x - y) / numel stays batch-sharded: no collective at all.
  loss.backward();
  CHECK(comm.total_count() == (w > 1 ? 1 : 0));
  CHECK(dx.grad().placements() == Placements{Shard(0)});
  const Tensor n = dt::full({}, static_cast<double>(x.numel()), dt::TensorOptions(dt::kFloat32));
  CHECK(tt::same_values(dx.grad().full_tensor(), dt::div(dt::mul(dt::sub(x, y), 2.0), n), 1e-6));
}

TEST_CASE("dtensor bce_with_logits on class-sharded logits slices replicated weights locally") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const LossData d = loss_data({5, 2 * w + 1});
  const DTensor x = dt::distribute_tensor(d.x, mesh, {Shard(1)}, std::nullopt);
  const DTensor t = dt::distribute_tensor(d.t, mesh, {Shard(1)}, std::nullopt);
  const DTensor wt = dt::distribute_tensor(d.w, mesh, {dt::Replicate()}, std::nullopt);
  const DTensor pw = dt::distribute_tensor(d.pw, mesh, {dt::Replicate()}, std::nullopt);
  dt::CommDebugMode comm;
  const DTensor loss = dt::binary_cross_entropy_with_logits(x, t, Reduction::kSum, wt, pw);
  CHECK(comm.total_count() == 0);
  CHECK(loss.placements() == Placements{dt::Partial()});
  CHECK(tt::same_values(loss.full_tensor(),
                        dt::binary_cross_entropy_with_logits(d.x, d.t, Reduction::kSum, d.w, d.pw),
                        1e-5));
}

TEST_CASE(
    "dtensor binary_cross_entropy: an input outside [0, 1] in one rank's shard raises on "
    "every rank") {
  const int64_t w = dt::world_size();
  const int64_t me = dt::world_rank();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  std::vector<double> v = {0.25, 0.5};
  if (me == w - 1) v[1] = 1.5;
  const DTensor p = DTensor::from_local(dt::from_vector<double>(v, {2}), mesh, {Shard(0)}, false);
  const DTensor t =
      DTensor::from_local(dt::from_vector<double>({0.0, 1.0}, {2}), mesh, {Shard(0)}, false);
  const auto bad =
      Catch::Contains("[binary_cross_entropy] all elements of input should be between 0 and 1");
  if (w > 1) {
    REQUIRE_THROWS_WITH(dt::binary_cross_entropy(p, t),
                        bad && Catch::Contains("(raised on rank " + std::to_string(w - 1) + ")"));
  } else {
    REQUIRE_THROWS_WITH(dt::binary_cross_entropy(p, t), bad);
  }
  // Still in step.
  const DTensor fine =
      DTensor::from_local(dt::from_vector<double>({0.25, 0.5}, {2}), mesh, {Shard(0)}, false);
  CHECK(std::isfinite(dt::binary_cross_entropy(fine, t).full_tensor().item<double>()));
  // A target outside [0, 1] on the last rank only: raised on every rank too.
  const DTensor bad_t = DTensor::from_local(
      dt::from_vector<double>({0.0, me == w - 1 ? 2.0 : 1.0}, {2}), mesh, {Shard(0)}, false);
  REQUIRE_THROWS_WITH(dt::binary_cross_entropy(fine, bad_t),
                      Catch::Contains("all elements of target should be between 0 and 1"));
  CHECK(std::isfinite(dt::binary_cross_entropy(fine, t).full_tensor().item<double>()));
}

TEST_CASE("dtensor nll_loss with class weights equals the full-tensor op for every placement") {
  const int64_t w = dt::world_size();
  const int64_t n = w * 3 + 1, c = w * 2 + 1;
  struct Case {
    tt::Ints input, target;
  };
  for (const Case& k : {Case{{n, c}, {n}}, Case{{n, c, 2}, {n, 2}}, Case{{c}, {}}}) {
    const Tensor lp = tt::det_input(k.input, 3, -3.0, 0.25);
    const Tensor tg = targets(k.target, c);
    const Tensor weight = tt::det_input({c}, 1, 0.5, 0.25);
    for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
      const int64_t nd = static_cast<int64_t>(k.input.size());
      for (const Placements& px : tt::all_placements(tt::shard_choices(nd), mesh.ndim())) {
        const Placements pt(static_cast<size_t>(mesh.ndim()), dt::Replicate());
        // The weights replicated, or sharded like the classes where the input is.
        Placements pw(static_cast<size_t>(mesh.ndim()), dt::Replicate());
        const int64_t class_dim = nd == 1 ? 0 : 1;
        for (size_t m = 0; m < px.size(); ++m) {
          if (px[m].is_shard() && px[m].dim() == class_dim) pw[m] = Shard(0);
        }
        const DTensor dx = dt::distribute_tensor(lp, mesh, px, std::nullopt);
        const DTensor dtg = dt::distribute_tensor(tg, mesh, pt, std::nullopt);
        const DTensor dw = dt::distribute_tensor(weight, mesh, pw, std::nullopt);
        for (Reduction r : {Reduction::kNone, Reduction::kSum, Reduction::kMean}) {
          for (bool weighted : {false, true}) {
            INFO(tt::describe(mesh, {px}, k.input)
                 << " reduction " << dt::reduction_name(r) << " weighted " << weighted);
            const Tensor want = dt::nll_loss(lp, tg, r, -100, weighted ? weight : Tensor());
            dt::CommDebugMode comm;
            const DTensor got = dt::nll_loss(dx, dtg, r, -100, weighted ? dw : DTensor());
            CHECK(comm.count(dt::CollectiveKind::kAllGather) == 0);
            CHECK(tt::same_values(got.full_tensor(), want, 1e-5));
          }
        }
      }
    }
  }
}

TEST_CASE("dtensor nll_loss means, class- or batch-sharded: one op, no gather, gradients exact") {
  // nll_loss is one registered op: its mean all-reduces (loss sum, W, the range check's flag)
  // together in the forward, and its backward divides by the forward's total_weight: ONE
  // collective per forward + backward, batch- or class-sharded (it was 3 and 2 before W was
  // kept). The loss comes back Replicate, the gradient keeps the input's layout.
  const int64_t w = dt::world_size();
  const int64_t n = 3 * w + 1, c = 2 * w + 1;
  const Tensor lp = tt::det_input({n, c}, 3, -3.0, 0.25);
  const Tensor tg = targets({n}, c);
  const Tensor weight = tt::det_input({c}, 1, 0.5, 0.25);
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  for (bool weighted : {false, true}) {
    DTensor rx = dt::local_dtensor(lp.clone());
    rx.requires_grad_();
    const DTensor rw = weighted ? dt::local_dtensor(weight) : DTensor();
    const DTensor ref = dt::nll_loss(rx, dt::local_dtensor(tg), Reduction::kMean, -100, rw);
    ref.backward();
    for (int64_t dim : {0, 1}) {
      INFO("input sharded on dim " << dim << ", weighted " << weighted);
      const auto on = [&](const Tensor& v, dt::Placement p) {
        return dt::distribute_tensor(v, mesh, {p}, std::nullopt);
      };
      DTensor dx = on(lp, Shard(dim));
      dx.requires_grad_();
      const DTensor dtg = on(tg, dim == 0 ? dt::Placement(Shard(0)) : dt::Replicate());
      const DTensor dw =
          weighted ? on(weight, dim == 1 ? dt::Placement(Shard(0)) : dt::Replicate()) : DTensor();
      dt::CommDebugMode comm;
      const DTensor loss = dt::nll_loss(dx, dtg, Reduction::kMean, -100, dw);
      loss.backward();
      INFO(comm.str());
      CHECK(comm.count(dt::CollectiveKind::kAllGather) == 0);
      if (w > 1) {
        CHECK(comm.total_count() == 1);
        CHECK(comm.count(dt::CollectiveKind::kAllReduce) == 1);
      }
      CHECK(loss.placements()[0].is_replicate());
      CHECK(tt::same_values(loss.to_local(), ref.to_local(), 1e-12));
      CHECK(dx.grad().placements()[0] == Shard(dim));
      CHECK(tt::same_values(dx.grad().full_tensor(), rx.grad().to_local(), 1e-12));
    }
  }
}

TEST_CASE("dtensor nll_loss mean on 16-bit inputs: W above float16's range keeps the gradient") {
  // The backward divides by the forward's total_weight; kept in float16 it would overflow to
  // inf above 65504 counted targets (here 67500: every 4th of 90000 ignored) and every gradient
  // would be 0, while the forward (which divides in double) stayed right. total_weight is float32
  // for 16-bit inputs, so the gradient equals float32's within the 16-bit rounding.
  const int64_t w = dt::world_size();
  const int64_t n = 90000, c = 3;
  const Tensor lp = tt::det_input({n, c}, 3, -3.0, 0.25);
  const Tensor tg = targets({n}, c);
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  DTensor rx = dt::local_dtensor(lp.to(dt::kFloat32));
  rx.requires_grad_();
  const DTensor ref = dt::nll_loss(rx, dt::local_dtensor(tg), Reduction::kMean, -100, DTensor());
  ref.backward();
  for (dt::DType d : {dt::kFloat16, dt::kBFloat16}) {
    INFO(dt::dtype_name(d));
    DTensor dx = dt::distribute_tensor(lp.to(d), mesh, {Shard(0)}, std::nullopt);
    dx.requires_grad_();
    const DTensor dtg = dt::distribute_tensor(tg, mesh, {Shard(0)}, std::nullopt);
    const DTensor loss = dt::nll_loss(dx, dtg, Reduction::kMean, -100, DTensor());
    loss.backward();
    const double rel = d == dt::kFloat16 ? 1e-3 : 8e-3;  // one rounding of the 16-bit type
    const double want = ref.to_local().to(dt::kFloat64).item<double>();
    CHECK(std::abs(loss.to_local().to(dt::kFloat64).item<double>() - want) <= rel * std::abs(want));
    // Each counted element's gradient is -1 / W = -1.48e-5; the ignored ones 0.
    const Tensor got = dx.grad().full_tensor().to(dt::kFloat64);
    const Tensor exp = rx.grad().to_local().to(dt::kFloat64);
    // float16 holds 1.48e-5 as a subnormal (steps of 6e-8), bfloat16 to 8 bits (steps of 6e-8).
    CHECK(tt::same_values(got, exp, 1.2e-7));
    CHECK(dt::amax(dt::abs(got)).item<double>() > 1e-5);
  }
}

TEST_CASE("dtensor nll_loss: errors name nll_loss, a bad target raises on every rank") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const DTensor dx =
      dt::distribute_tensor(tt::det_input({2 * w, 5}), mesh, {Shard(0)}, std::nullopt);
  std::vector<int64_t> t = {1, 4};
  if (dt::world_rank() == 0) t[1] = 7;
  const DTensor target =
      DTensor::from_local(dt::from_vector<int64_t>(t, {2}), mesh, {Shard(0)}, false);
  // Every reduction (the mean's check travels in its (loss, W) all-reduce), on every rank.
  const std::string raised = w > 1 ? " (raised on rank 0)" : "";
  for (const Reduction r : {Reduction::kMean, Reduction::kSum, Reduction::kNone}) {
    INFO("reduction " << dt::reduction_name(r));
    REQUIRE_THROWS_WITH(dt::nll_loss(dx, target, r),
                        Catch::Contains("[nll_loss] target 7 out of range for 5 classes" + raised));
  }
  const DTensor good = dt::distribute_tensor(targets({2 * w}, 5), mesh, {Shard(0)}, std::nullopt);
  const DTensor bad_weight =
      dt::distribute_tensor(dt::ones({4}), mesh, {dt::Replicate()}, std::nullopt);
  REQUIRE_THROWS_WITH(dt::nll_loss(dx, good, Reduction::kMean, -100, bad_weight),
                      Catch::Contains("[nll_loss] weight of shape [4]"));
  REQUIRE_THROWS_WITH(dt::nll_loss(dx, dt::distribute_tensor(tt::det_input({2 * w}), mesh,
                                                             {Shard(0)}, std::nullopt)),
                      Catch::Contains("[nll_loss] argument target"));
  REQUIRE_THROWS_WITH(dt::mse_loss(dx, dt::distribute_tensor(tt::det_input({2 * w, 4}), mesh,
                                                             {Shard(0)}, std::nullopt)),
                      Catch::Contains("[mse_loss] target of shape [" + std::to_string(2 * w) +
                                      ", 4] does not match input of shape"));
}

namespace {

// A round-9 loss on its inputs (full tensors; `sharded`: laid out Shard(0) on the batch, else
// replicated), for the batch-sharding checks below.
struct MarginCase {
  const char* name;
  std::function<DTensor(const std::vector<DTensor>&, Reduction)> loss;
  std::vector<Tensor> inputs;
  std::vector<bool> sharded;
};

std::vector<MarginCase> margin_cases(int64_t n) {
  const auto x = [n](int64_t c, int salt, double lo = -2.0, double step = 0.45) {
    return tt::det_input({n, c}, salt, lo, step, dt::kFloat64);
  };
  // +-1 (and 0 where `zero`) labels, and int64 class indices below c.
  const auto sign = [n](dt::IntSpan shape, bool zero) {
    std::vector<double> v(static_cast<size_t>(dt::shape_numel(shape)));
    for (size_t i = 0; i < v.size(); ++i) v[i] = zero && i % 5 == 2 ? 0.0 : (i % 3 == 1 ? -1 : 1);
    return dt::from_vector<double>(v, shape);
  };
  std::vector<int64_t> cls(static_cast<size_t>(n)), lists(static_cast<size_t>(n * 4));
  for (int64_t i = 0; i < n; ++i) cls[i] = (i * 2 + 1) % 3;
  for (int64_t i = 0; i < n * 4; ++i) lists[i] = i % 7 == 5 ? -1 : (i * 3 + 1) % 4;
  const Tensor labels = dt::from_vector<int64_t>(cls, {n});
  const Tensor label_lists = dt::from_vector<int64_t>(lists, {n, 4});
  const Tensor positive = x(3, 5, 0.1, 0.3), counts = x(3, 6, 0.0, 0.6);
  using V = const std::vector<DTensor>&;
  return {
      {"margin_ranking_loss",
       [](V a, Reduction r) { return dt::margin_ranking_loss(a[0], a[1], a[2], r, 0.4); },
       {tt::det_input({n}, 1, -1.0, 0.5, dt::kFloat64),
        tt::det_input({n}, 2, -1.0, 0.4, dt::kFloat64), sign({n}, false)},
       {true, true, true}},
      {"hinge_embedding_loss",
       [](V a, Reduction r) { return dt::hinge_embedding_loss(a[0], a[1], r, 1.5); },
       {x(3, 1), sign({n, 3}, true)},
       {true, true}},
      {"cosine_embedding_loss",
       [](V a, Reduction r) { return dt::cosine_embedding_loss(a[0], a[1], a[2], r, 0.2); },
       {x(4, 1), x(4, 3), sign({n}, true)},
       {true, true, true}},
      {"soft_margin_loss",
       [](V a, Reduction r) { return dt::soft_margin_loss(a[0], a[1], r); },
       {x(3, 2), sign({n, 3}, false)},
       {true, true}},
      {"multilabel_soft_margin_loss(weight)",
       [](V a, Reduction r) { return dt::multilabel_soft_margin_loss(a[0], a[1], r, a[2]); },
       {x(3, 2), x(3, 4, 0.0, 0.1), tt::det_input({3}, 1, 0.5, 0.25, dt::kFloat64)},
       {true, true, false}},
      {"multi_margin_loss(p=2, weight)",
       [](V a, Reduction r) { return dt::multi_margin_loss(a[0], a[1], r, 2, 0.8, a[2]); },
       {x(3, 3, -1.0, 0.3), labels, tt::det_input({3}, 2, 0.5, 0.25, dt::kFloat64)},
       {true, true, false}},
      {"multilabel_margin_loss",
       [](V a, Reduction r) { return dt::multilabel_margin_loss(a[0], a[1], r); },
       {x(4, 3, -1.0, 0.3), label_lists},
       {true, true}},
      {"triplet_margin_loss(swap)",
       [](V a, Reduction r) {
         return dt::triplet_margin_loss(a[0], a[1], a[2], r, 1.0, 2.0, 1e-6, true);
       },
       {x(3, 1), x(3, 2), x(3, 3)},
       {true, true, true}},
      {"triplet_margin_with_distance_loss",
       [](V a, Reduction r) {
         return dt::triplet_margin_with_distance_loss(a[0], a[1], a[2], r, {}, 2.0);
       },
       {x(3, 1), x(3, 2), x(3, 3)},
       {true, true, true}},
      {"poisson_nll_loss(log_input=False, full)",
       [](V a, Reduction r) { return dt::poisson_nll_loss(a[0], a[1], r, false, true); },
       {positive, counts},
       {true, true}},
      {"gaussian_nll_loss(full)",
       [](V a, Reduction r) { return dt::gaussian_nll_loss(a[0], a[1], a[2], r, true); },
       {x(3, 1), x(3, 2), x(3, 4, 0.0, 0.2)},
       {true, true, true}},
      {"gaussian_nll_loss(var [N])",
       [](V a, Reduction r) { return dt::gaussian_nll_loss(a[0], a[1], a[2], r); },
       {x(3, 1), x(3, 2), tt::det_input({n}, 3, 0.0, 0.3, dt::kFloat64)},
       {true, true, true}},
  };
}

// got equals want to 1e-15 relative to 1 + |want| (bit for bit but for the order of a sum).
bool nearly_same(const Tensor& got, const Tensor& want) {
  return tt::same_values(got, want, 1e-15);
}

}  // namespace

TEST_CASE("dtensor margin and likelihood losses: batch shards equal one device, gradients too") {
  const int64_t w = dt::world_size();
  // The batch on a 1-D mesh, and at 4 ranks on both dims of a 2 x 2 mesh (nested shards).
  std::vector<dt::DeviceMesh> meshes = {dt::init_device_mesh(dt::kCPU, {w})};
  if (w == 4) meshes.push_back(dt::init_device_mesh(dt::kCPU, {2, 2}));
  // Uneven shards, and a short batch that leaves the last ranks empty shards.
  for (const dt::DeviceMesh& mesh : meshes) {
    const Placements batch(static_cast<size_t>(mesh.ndim()), Shard(0));
    const Placements replicated(static_cast<size_t>(mesh.ndim()), dt::Replicate());
    for (int64_t n : {2 * w + 1, std::max<int64_t>(1, w - 2)}) {
      for (const MarginCase& k : margin_cases(n)) {
        for (Reduction r : {Reduction::kNone, Reduction::kSum, Reduction::kMean}) {
          INFO(k.name << " batch " << n << " mesh of " << mesh.ndim() << " dims, reduction "
                      << dt::reduction_name(r));
          std::vector<DTensor> ref, got;
          for (size_t i = 0; i < k.inputs.size(); ++i) {
            ref.push_back(dt::local_dtensor(k.inputs[i].clone()));
            got.push_back(dt::distribute_tensor(k.inputs[i], mesh,
                                                k.sharded[i] ? batch : replicated, std::nullopt));
            if (dt::is_floating(k.inputs[i].dtype())) {
              ref.back().requires_grad_();
              got.back().requires_grad_();
            }
          }
          const DTensor want = k.loss(ref, r), loss = k.loss(got, r);
          CHECK(nearly_same(loss.full_tensor(), want.to_local()));
          if (r == Reduction::kNone) {
            CHECK(loss.placements() == batch);
            const Tensor up = tt::det_input(want.shape(), 4, -1.0, 0.5, dt::kFloat64);
            want.backward(dt::local_dtensor(up));
            loss.backward(dt::distribute_tensor(up, mesh, loss.placements(), std::nullopt));
          } else {
            want.backward();
            loss.backward();
          }
          for (size_t i = 0; i < ref.size(); ++i) {
            if (!ref[i].requires_grad() || !ref[i].grad().defined()) continue;
            INFO("gradient of input " << i);
            REQUIRE(got[i].grad().defined());
            CHECK(nearly_same(got[i].grad().full_tensor(), ref[i].grad().to_local()));
          }
        }
      }
    }
  }
}

TEST_CASE(
    "dtensor margin losses: other layouts go through the composite, bad values raise "
    "on every rank") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const int64_t n = 2 * w + 1;
  // Feature-sharded inputs (the class / feature dim split): the sums over it all-reduce.
  for (const MarginCase& k : margin_cases(n)) {
    INFO(k.name << " sharded on dim 1");
    std::vector<DTensor> ref, got;
    for (const Tensor& t : k.inputs) {
      ref.push_back(dt::local_dtensor(t));
      const bool two_d = t.dim() == 2;
      got.push_back(dt::distribute_tensor(
          t, mesh, {two_d ? dt::Placement(Shard(1)) : dt::Replicate()}, std::nullopt));
    }
    for (Reduction r : {Reduction::kNone, Reduction::kMean}) {
      CHECK(tt::same_values(k.loss(got, r).full_tensor(), k.loss(ref, r).to_local(), 1e-12));
    }
  }
  // A bad class index or a negative variance held by the last rank alone raises on every rank.
  std::vector<int64_t> cls(static_cast<size_t>(n), 1);
  cls.back() = 3;
  const auto on = [&](const Tensor& t) {
    return dt::distribute_tensor(t, mesh, {Shard(0)}, std::nullopt);
  };
  const DTensor x = on(tt::det_input({n, 3}, 1, -1.0, 0.3, dt::kFloat64));
  REQUIRE_THROWS_WITH(dt::multi_margin_loss(x, on(dt::from_vector<int64_t>(cls, {n}))),
                      Catch::Contains("[multi_margin_loss] target 3 out of range for 3 classes"));
  Tensor var = tt::det_input({n, 3}, 1, 0.0, 0.3, dt::kFloat64);
  std::vector<double> v = var.to_vector<double>();
  v.back() = -0.5;
  REQUIRE_THROWS_WITH(dt::gaussian_nll_loss(x, x, on(dt::from_vector<double>(v, {n, 3}))),
                      Catch::Contains("[gaussian_nll_loss] var has negative entry/entries"));
  // A Partial(sum) var is reduced before the check and the loss.
  const Tensor full_var = tt::det_input({n, 3}, 2, 0.1, 0.3, dt::kFloat64);
  const DTensor partial_var = dt::distribute_tensor(full_var, mesh, {dt::Partial()}, std::nullopt);
  const Tensor x_full = x.full_tensor();
  CHECK(tt::same_values(dt::gaussian_nll_loss(x, x, partial_var, Reduction::kNone).full_tensor(),
                        dt::gaussian_nll_loss(x_full, x_full, full_var, Reduction::kNone), 1e-15));
}
