// Issue 44's modules where sharding matters (mpirun at 1, 2 and 4 ranks): Embedding's
// padding_idx on a vocab-sharded (S(0), uneven), column-sharded (S(1)) and batch-sharded layout
// gives the single-device gradient, its padding row zero on the rank that holds it; Dropout of
// a sharded input keeps, on every rank, exactly the elements the full input's dropout keeps;
// Conv2d with padding 'same' and each padding_mode on batch- and height-sharded inputs; RNN,
// LSTM, GRU on batch-sharded inputs and their refusal of a time- or feature-sharded one; the
// round-9 random modules (channel and alpha dropouts, RReLU) and EmbeddingBag on sharded layouts.
#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/rng/dtensor_random.h"
#include "dtensor/tensor/creation.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
namespace st = dtensor::test;
using dt::DTensor;
using dt::Replicate;
using dt::Shard;
using dt::Tensor;

TEST_CASE("Embedding padding_idx masks the right global row of a sharded table") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const int64_t rows = 2 * w + 1;  // uneven over w > 1 ranks: the last block is short
  nn::ModuleOptions o;
  o.dtype = dt::kFloat64;
  const Tensor table = st::det_input({rows, 3}, 1, -2.0, 0.5, dt::kFloat64);
  // Every row looked up, some twice.
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < rows + 3; ++i) ids.push_back((i * 5) % rows);
  const Tensor idx = dt::from_vector<int64_t>(ids, {static_cast<int64_t>(ids.size())});
  const Tensor c =
      st::det_input({static_cast<int64_t>(ids.size()), 3}, 4, -1.0, 0.25, dt::kFloat64);
  struct Layout {
    const char* name;
    dt::Placements table, indices;
  };
  const std::vector<Layout> layouts = {{"vocab-sharded S(0)", {Shard(0)}, {Replicate()}},
                                       {"column-sharded S(1)", {Shard(1)}, {Replicate()}},
                                       {"batch-sharded indices", {Replicate()}, {Shard(0)}}};
  // The first row, the last row (on the last rank) and a negative index.
  for (const int64_t padding_idx : {int64_t{0}, rows - 1, int64_t{-2}}) {
    const int64_t pad = padding_idx < 0 ? padding_idx + rows : padding_idx;
    nn::Embedding single(rows, 3, padding_idx, o);
    single.set_parameter("weight", nn::local_dtensor(table));
    dt::sum(dt::mul(single(nn::local_dtensor(idx)), nn::local_dtensor(c))).backward();
    const Tensor want = single.param("weight").grad().to_local();
    REQUIRE(st::same_values(want.narrow(0, pad, 1), dt::zeros({1, 3}, dt::kFloat64), 0));
    for (const Layout& l : layouts) {
      INFO(l.name << ", padding_idx " << padding_idx);
      nn::Embedding sharded(rows, 3, padding_idx, o);
      sharded.set_parameter("weight", dt::distribute_tensor(table, mesh, l.table, std::nullopt));
      const DTensor out = sharded(dt::distribute_tensor(idx, mesh, l.indices, std::nullopt))
                              .redistribute(mesh, {Replicate()});
      dt::sum(dt::mul(out, dt::distribute_tensor(c, mesh, {Replicate()}, std::nullopt))).backward();
      const DTensor& g = sharded.param("weight").grad();
      CHECK(st::same_values(g.full_tensor(), want, 1e-12));
      // reset_parameters zeroes the padding row wherever it lives.
      sharded.reset_parameters();
      const Tensor reset = sharded.param("weight").full_tensor();
      CHECK(st::same_values(reset.narrow(0, pad, 1), dt::zeros({1, 3}, dt::kFloat64), 0));
    }
  }
}

TEST_CASE("Dropout of a sharded input equals Dropout of the full input on every rank") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = st::det_input({3 * w + 1, 2 * w + 3}, 2, 0.5, 0.25, dt::kFloat64);  // > 0
  dt::Generator full_gen(2024);
  nn::Dropout full(0.4, &full_gen);
  const Tensor want = full(nn::local_dtensor(x)).to_local();
  for (const dt::Placements& p :
       {dt::Placements{Shard(0)}, dt::Placements{Shard(1)}, dt::Placements{Replicate()}}) {
    INFO(dt::placements_str(p));
    dt::Generator gen(2024);
    nn::Dropout drop(0.4, &gen);
    const DTensor y = drop(dt::distribute_tensor(x, mesh, p, std::nullopt));
    CHECK(y.placements() == p);
    CHECK(st::same_values(y.full_tensor(), want, 0));
    CHECK(gen.offset() == full_gen.offset());
    drop.eval();
    CHECK(
        st::same_values(drop(dt::distribute_tensor(x, mesh, p, std::nullopt)).full_tensor(), x, 0));
  }
}

TEST_CASE("Conv with padding 'same' and padding_mode on batch- and height-sharded inputs") {
  // The module pads with pad (reflect / replicate / circular, or zeros for an asymmetric 'same')
  // and convolves with padding 0: a batch-sharded input keeps its shards through pad; a
  // height-sharded one with reflect / replicate / circular exchanges the rows the mode reads
  // point to point (issue L2-4: no all-gather), with zeros it is gathered by pad's strategy;
  // all give the single-device values and gradients.
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  nn::ModuleOptions o;
  o.dtype = dt::kFloat64;
  const Tensor x = st::det_input({2 * w + 1, 2, 2 * w + 2, 5}, 1, -2.0, 0.5, dt::kFloat64);
  for (const char* mode : {"zeros", "reflect", "replicate", "circular"}) {
    auto make = [&] {
      auto m = std::make_shared<nn::Conv2d>(2, 3, dt::Shape{2, 3}, dt::Shape{1}, "same",
                                            dt::Shape{1, 2}, 1, true, mode, o);
      m->set_parameter("weight",
                       nn::local_dtensor(st::det_input({3, 2, 2, 3}, 3, -1.0, 0.25, dt::kFloat64)));
      m->set_parameter("bias", nn::local_dtensor(st::det_input({3}, 2, -1.0, 0.5, dt::kFloat64)));
      return m;
    };
    auto single = make();
    DTensor xs = nn::local_dtensor(x);
    xs.requires_grad_(true);
    const DTensor ys = (*single)(xs);
    const Tensor c = st::det_input(ys.shape(), 5, -1.0, 0.25, dt::kFloat64);
    dt::sum(dt::mul(ys, nn::local_dtensor(c))).backward();
    for (const int64_t dim : {int64_t{0}, int64_t{2}}) {
      INFO(mode << ", input sharded on dim " << dim);
      auto sharded = make();
      DTensor xd = dt::distribute_tensor(x, mesh, {Shard(dim)}, std::nullopt);
      xd.requires_grad_(true);
      std::optional<dt::CommDebugMode> comm;
      comm.emplace();
      const DTensor y = (*sharded)(xd);
      if (dim == 2 && std::string(mode) != "zeros") {
        CHECK(comm->total_count() ==
              comm->count(dt::CollectiveKind::kSend) + comm->count(dt::CollectiveKind::kRecv));
        CHECK(y.placements()[0] == Shard(2));
      }
      comm.reset();
      CHECK(st::same_values(y.full_tensor(), ys.to_local(), 1e-12));
      dt::sum(dt::mul(y, dt::distribute_tensor(c, mesh, {Replicate()}, std::nullopt))).backward();
      CHECK(st::same_values(xd.grad().full_tensor(), xs.grad().to_local(), 1e-12));
      CHECK(st::same_values(sharded->param("weight").grad().full_tensor(),
                            single->param("weight").grad().to_local(), 1e-12));
    }
  }
}

TEST_CASE("Recurrent layers on a batch-sharded input equal the unsharded run") {
  // RNN / LSTM / GRU are composites of row-wise ops over the batch: a batch-sharded input
  // (uneven, and with an empty shard) with replicated parameters gives the single-device
  // values and gradients to 1e-12, not bit for bit: the local matmul of a shard of other row
  // count may take another BLAS kernel (a 1-row shard at 4 ranks differs in the last bits), and
  // the parameter gradients are summed over ranks.
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  nn::ModuleOptions o;
  o.dtype = dt::kFloat64;
  using Opts = nn::RecurrentOptions;
  struct Case {
    const char* name;
    std::function<std::shared_ptr<nn::RecurrentBase>()> make;
    bool h0, c0;
  };
  const std::vector<Case> cases = {
      {"LSTM 2 layers bidirectional proj_size h0 c0",
       [&] {
         return std::make_shared<nn::LSTM>(
             3, 4, Opts{.num_layers = 2, .bidirectional = true, .proj_size = 2}, o);
       },
       true, true},
      {"GRU batch_first",
       [&] { return std::make_shared<nn::GRU>(3, 4, Opts{.batch_first = true}, o); }, false, false},
      {"RNN relu 2 layers h0",
       [&] {
         return std::make_shared<nn::RNN>(3, 4, Opts{.num_layers = 2, .nonlinearity = "relu"}, o);
       },
       true, false},
  };
  std::vector<int64_t> batches = {2 * w + 1};
  if (w > 1) batches.push_back(w - 1);  // the last rank's shard is empty
  for (const Case& c : cases) {
    for (const int64_t b : batches) {
      INFO(c.name << ", batch " << b);
      auto single = c.make();
      const bool bf = single->options().batch_first;
      const dt::Shape xs = bf ? dt::Shape{b, 3, 3} : dt::Shape{3, b, 3};
      const int64_t states =
          single->options().num_layers * (single->options().bidirectional ? 2 : 1);
      const int64_t h_out = single->options().proj_size > 0 ? single->options().proj_size : 4;
      const Tensor x = st::det_input(xs, 1, -1.0, 0.25, dt::kFloat64);
      const Tensor h0 = st::det_input({states, b, h_out}, 2, -0.5, 0.1, dt::kFloat64);
      const Tensor c0 = st::det_input({states, b, 4}, 3, -0.5, 0.1, dt::kFloat64);
      DTensor xl = nn::local_dtensor(x);
      xl.requires_grad_(true);
      const nn::RecurrentOutput want = single->forward_with_state(
          xl, c.h0 ? nn::local_dtensor(h0) : DTensor(), c.c0 ? nn::local_dtensor(c0) : DTensor());
      const Tensor cw = st::det_input(want.output.shape(), 5, -1.0, 0.25, dt::kFloat64);
      const Tensor hw = st::det_input(want.h_n.shape(), 6, -1.0, 0.25, dt::kFloat64);
      dt::add(dt::sum(dt::mul(want.output, nn::local_dtensor(cw))),
              dt::sum(dt::mul(want.h_n, nn::local_dtensor(hw))))
          .backward();
      auto sharded = c.make();
      for (const auto& [n, p] : single->named_parameters()) {
        sharded->set_parameter(n, nn::local_dtensor(p.to_local()));
      }
      DTensor xd = dt::distribute_tensor(x, mesh, {Shard(bf ? 0 : 1)}, std::nullopt);
      xd.requires_grad_(true);
      const nn::RecurrentOutput got = sharded->forward_with_state(
          xd, c.h0 ? dt::distribute_tensor(h0, mesh, {Shard(1)}, std::nullopt) : DTensor(),
          c.c0 ? dt::distribute_tensor(c0, mesh, {Replicate()}, std::nullopt) : DTensor());
      CHECK(got.output.placements()[0] == Shard(bf ? 0 : 1));
      CHECK(st::same_values(got.output.full_tensor(), want.output.to_local(), 1e-12));
      CHECK(st::same_values(got.h_n.full_tensor(), want.h_n.to_local(), 1e-12));
      if (c.c0) CHECK(st::same_values(got.c_n.full_tensor(), want.c_n.to_local(), 1e-12));
      auto on = [&](const Tensor& t) {
        return dt::distribute_tensor(t, mesh, {Replicate()}, std::nullopt);
      };
      dt::add(dt::sum(dt::mul(got.output, on(cw))), dt::sum(dt::mul(got.h_n, on(hw)))).backward();
      CHECK(st::same_values(xd.grad().full_tensor(), xl.grad().to_local(), 1e-12));
      for (const auto& [n, p] : sharded->named_parameters()) {
        INFO(n);
        CHECK(st::same_values(p.grad().full_tensor(), single->param(n).grad().to_local(), 1e-12));
      }
    }
  }
  // The time or feature dim sharded: refused on every rank.
  nn::LSTM lstm(3, 4, Opts{}, o);
  const Tensor x = st::det_input({2 * w, 2, 3}, 1, -1.0, 0.25, dt::kFloat64);
  if (w > 1) {
    CHECK_THROWS_WITH(lstm(dt::distribute_tensor(x, mesh, {Shard(0)}, std::nullopt)),
                      Catch::Contains("[LSTM] input is sharded on dim 0: only the batch dim (1)"));
    CHECK_THROWS_WITH(lstm(dt::distribute_tensor(x, mesh, {Shard(2)}, std::nullopt)),
                      Catch::Contains("[LSTM] input is sharded on dim 2"));
    // A state sharded on its hidden dim, too.
    const Tensor h0 = st::det_input({1, 2, 4}, 2, -0.5, 0.1, dt::kFloat64);
    CHECK_THROWS_WITH(
        lstm.forward_with_state(dt::distribute_tensor(x, mesh, {Shard(1)}, std::nullopt),
                                dt::distribute_tensor(h0, mesh, {Shard(2)}, std::nullopt),
                                dt::distribute_tensor(h0, mesh, {Replicate()}, std::nullopt)),
        Catch::Contains("[LSTM] h0 is sharded on dim 2: only the batch dim (1)"));
  }
}

TEST_CASE("Round-9 random modules and EmbeddingBag on sharded inputs equal the full-input run") {
  // Dropout2d, FeatureAlphaDropout (one replicated mask per (n, c)), AlphaDropout (the element
  // mask of the full tensor) and RReLU in training draw the same values for every placement.
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = st::det_input({2 * w + 1, w + 2, 3}, 2, -1.0, 0.25, dt::kFloat64);
  using Make = std::function<std::shared_ptr<nn::Module>(dt::Generator*)>;
  const std::vector<std::pair<const char*, Make>> makes = {
      {"Dropout2d", [](dt::Generator* g) { return std::make_shared<nn::Dropout2d>(0.4, g); }},
      {"FeatureAlphaDropout",
       [](dt::Generator* g) { return std::make_shared<nn::FeatureAlphaDropout>(0.3, g); }},
      {"AlphaDropout", [](dt::Generator* g) { return std::make_shared<nn::AlphaDropout>(0.3, g); }},
      {"RReLU", [](dt::Generator* g) { return std::make_shared<nn::RReLU>(0.1, 0.3, g); }},
  };
  for (const auto& [name, make] : makes) {
    dt::Generator full_gen(7);
    const Tensor want = (*make(&full_gen))(nn::local_dtensor(x)).to_local();
    for (const dt::Placements& p :
         {dt::Placements{Shard(0)}, dt::Placements{Shard(1)}, dt::Placements{Replicate()}}) {
      INFO(name << " " << dt::placements_str(p));
      dt::Generator gen(7);
      const DTensor y = (*make(&gen))(dt::distribute_tensor(x, mesh, p, std::nullopt));
      CHECK(st::same_values(y.full_tensor(), want, 0));
    }
  }
  // EmbeddingBag on a vocab- or column-sharded table: the single-device output and gradient.
  nn::ModuleOptions f64;
  f64.dtype = dt::kFloat64;
  const Tensor table = st::det_input({2 * w + 3, 4}, 1, -1.0, 0.25, dt::kFloat64);
  const Tensor idx = dt::from_vector<int64_t>({1, 0, 2 * w + 2, 3, 1, 2, 2 * w}, {7});
  const Tensor offs = dt::from_vector<int64_t>({0, 3, 3, 5}, {4});
  const Tensor c = st::det_input({4, 4}, 5, -1.0, 0.25, dt::kFloat64);
  for (const char* mode : {"sum", "mean", "max"}) {
    nn::EmbeddingBag ref(2 * w + 3, 4, {.mode = mode, .padding_idx = 2}, f64);
    ref.set_parameter("weight", nn::local_dtensor(table));
    const DTensor want = ref.forward_bags(nn::local_dtensor(idx), nn::local_dtensor(offs));
    dt::sum(dt::mul(want, nn::local_dtensor(c))).backward();
    for (const dt::Placements& p : {dt::Placements{Shard(0)}, dt::Placements{Shard(1)}}) {
      INFO(mode << " " << dt::placements_str(p));
      nn::EmbeddingBag bag(2 * w + 3, 4, {.mode = mode, .padding_idx = 2}, f64);
      bag.set_parameter("weight", dt::distribute_tensor(table, mesh, p, std::nullopt));
      const dt::Placements r{Replicate()};
      const DTensor out = bag.forward_bags(dt::distribute_tensor(idx, mesh, r, std::nullopt),
                                           dt::distribute_tensor(offs, mesh, r, std::nullopt));
      CHECK(st::same_values(out.full_tensor(), want.to_local(), 1e-15));
      dt::sum(dt::mul(out, dt::distribute_tensor(c, mesh, r, std::nullopt))).backward();
      CHECK(st::same_values(bag.param("weight").grad().full_tensor(),
                            ref.param("weight").grad().to_local(), 1e-15));
    }
  }
}
