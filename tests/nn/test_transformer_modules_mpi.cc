// MultiheadAttention and TransformerEncoderLayer on batch-sharded inputs (Shard on the batch dim,
// uneven and empty shards: N = 2w + 1 and N = w - 1) with replicated parameters: the outputs and
// attention weights equal the single-device run (bit for bit but one case: check_same), the
// gradients of the inputs and
// every parameter within 1e-12 (each rank's partial sums are all-reduced), dropout included
// (the DTensor RNG draws the full tensor's mask on every layout).
#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/parallel/data_parallel/data_parallel.h"
#include "dtensor/rng/generator.h"
#include "dtensor/tensor/creation.h"
#include "tests/common/ops_dtensor_test_util.h"
#include "tests/nn/reference_case.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
namespace st = dtensor::test;
using dt::DTensor;
using dt::Replicate;
using dt::Shard;
using dt::Tensor;

namespace {

// Parameters with det_input values (the same on every rank), by name order.
void load(nn::Module& m) {
  int salt = 3;
  for (const auto& [fqn, p] : m.named_parameters()) {
    const size_t dot = fqn.rfind('.');
    nn::Module& owner = dot == std::string::npos ? m : m.get_submodule(fqn.substr(0, dot));
    owner.set_parameter(
        dot == std::string::npos ? fqn : fqn.substr(dot + 1),
        nn::local_dtensor(st::det_input(p.shape(), salt++, -0.6, 0.13, dt::kFloat64)));
  }
}

// Row n ignores key 1 + n % 3 (key 0 always attended).
Tensor padding_mask(int64_t n, int64_t s) {
  std::vector<double> v(static_cast<size_t>(n * s), 0.0);
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i * s + 1 + i % 3)] = 1.0;
  return dt::gt(dt::from_vector<double>(v, {n, s}), 0.5);
}

struct Run {
  Tensor out, weights;
  std::vector<Tensor> grads;  // the inputs', then every parameter's
};

// Runs `call` on the inputs (each distributed by `place`, or local when `mesh` is null), the
// loss sum(out * c) [+ sum(weights * c2)], backward; full values back.
template <typename Call>
Run run(nn::Module& m, const std::vector<Tensor>& inputs, const dt::DeviceMesh* mesh,
        const std::vector<dt::Placements>& place, Call call) {
  m.zero_grad();
  std::vector<DTensor> in;
  for (size_t i = 0; i < inputs.size(); ++i) {
    DTensor x = mesh == nullptr ? nn::local_dtensor(inputs[i].clone())
                                : dt::distribute_tensor(inputs[i], *mesh, place[i], std::nullopt);
    if (i < 3 && dt::is_floating(x.dtype())) x.requires_grad_(true);  // not the masks
    in.push_back(x);
  }
  auto [out, weights] = call(in);
  auto full = [](const DTensor& t) { return nn::is_local(t) ? t.to_local() : t.full_tensor(); };
  auto weight_of = [&](const DTensor& t, int salt) {
    const Tensor c = st::det_input(t.shape(), salt, -1.0, 0.25, dt::kFloat64);
    return mesh == nullptr ? nn::local_dtensor(c)
                           : dt::distribute_tensor(c, *mesh, {Replicate()}, std::nullopt);
  };
  DTensor loss = dt::sum(dt::mul(out, weight_of(out, 5)));
  if (weights.defined()) loss = dt::add(loss, dt::sum(dt::mul(weights, weight_of(weights, 6))));
  loss.backward();
  Run r{full(out), weights.defined() ? full(weights) : Tensor(), {}};
  for (const DTensor& x : in) {
    if (x.requires_grad()) r.grads.push_back(full(x.grad()));
  }
  for (const auto& [name, p] : m.named_parameters()) r.grads.push_back(full(p.grad()));
  return r;
}

// Values: bit for bit, but for one case seen, 1 ulp (N = 1 over 2 ranks: the engine's view of the
// size-1 sharded batch dim moves the shard onto the sequence dim, and out_proj's gemm over 2 of
// the 3 rows rounds one element differently), hence 1e-15 relative.
void check_same(const Run& got, const Run& want) {
  CHECK(st::same_values(got.out, want.out, 1e-15));
  CHECK(got.weights.defined() == want.weights.defined());
  if (want.weights.defined()) CHECK(st::same_values(got.weights, want.weights, 1e-15));
  REQUIRE(got.grads.size() == want.grads.size());
  for (size_t i = 0; i < want.grads.size(); ++i) {
    INFO("gradient " << i);
    CHECK(st::same_values(got.grads[i], want.grads[i], 1e-12));
  }
}

}  // namespace

TEST_CASE("MultiheadAttention on batch-sharded inputs equals the single-device run") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  constexpr int64_t E = 4, H = 2, L = 3, S = 4;
  for (const int64_t N : {2 * w + 1, w - 1}) {
    if (N == 0) continue;
    for (const bool need_weights : {true, false}) {
      for (const bool extras : {false, true}) {  // kdim / vdim, bias_kv, zero_attn, batch_first
        INFO("N " << N << ", need_weights " << need_weights << ", extras " << extras);
        const std::optional<int64_t> kv = extras ? std::optional<int64_t>(5) : std::nullopt;
        nn::MultiheadAttention m(E, H, 0.3, true, extras, extras, kv, kv, extras, st::f64());
        load(m);
        const int64_t b = extras ? 0 : 1;  // the batch dim of query / key / value
        auto shape = [&](int64_t t, int64_t f) {
          return extras ? dt::Shape{N, t, f} : dt::Shape{t, N, f};
        };
        const std::vector<Tensor> inputs = {
            st::det_input(shape(L, E), 1, -1.5, 0.3, dt::kFloat64),
            st::det_input(shape(S, kv.value_or(E)), 2, -1.5, 0.3, dt::kFloat64),
            st::det_input(shape(S, kv.value_or(E)), 4, -1.5, 0.3, dt::kFloat64),
            padding_mask(N, S),  // key_padding_mask [N, S]; attn_mask [N * H, L, S]
            st::det_input({N * H, L, S}, 2, -1.0, 0.35, dt::kFloat64)};
        auto call = [&](const std::vector<DTensor>& in) {
          nn::MultiheadAttentionArgs a;
          a.need_weights = need_weights;
          a.key_padding_mask = in[3];
          a.attn_mask = in[4];
          const nn::MultiheadAttentionOutput o = m.forward(in[0], in[1], in[2], a);
          return std::pair{o.attn_output, o.attn_weights};
        };
        // Dropout (training) draws through the DTensor RNG: the same seed before each run.
        dt::manual_seed(7);
        const Run want = run(m, inputs, nullptr, {}, call);
        dt::manual_seed(7);
        const Run got = run(m, inputs, &mesh,
                            {{Shard(b)}, {Shard(b)}, {Shard(b)}, {Shard(0)}, {Replicate()}}, call);
        check_same(got, want);
        if (extras || N != 2 * w + 1) continue;
        // Sequence- and feature-sharded q / k / v: the engine redistributes where the composite's
        // ops need it; the values are the op's on the full tensor, to rounding.
        for (const int64_t d : {int64_t{0}, int64_t{2}}) {
          INFO("q / k / v sharded on dim " << d);
          dt::manual_seed(7);
          const Run other =
              run(m, inputs, &mesh,
                  {{Shard(d)}, {Shard(d)}, {Shard(d)}, {Replicate()}, {Replicate()}}, call);
          CHECK(st::same_values(other.out, want.out, 1e-12));
          if (need_weights) CHECK(st::same_values(other.weights, want.weights, 1e-12));
          for (size_t i = 0; i < want.grads.size(); ++i) {
            CHECK(st::same_values(other.grads[i], want.grads[i], 1e-12));
          }
        }
      }
    }
  }
}

TEST_CASE("TransformerEncoderLayer on batch-sharded inputs equals the single-device run") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  constexpr int64_t E = 4, H = 2, L = 3;
  for (const int64_t N : {2 * w + 1, w - 1}) {
    if (N == 0) continue;
    for (const bool norm_first : {false, true}) {
      INFO("N " << N << ", norm_first " << norm_first);
      nn::TransformerEncoderLayer m(E, H, 6, 0.2, norm_first ? "gelu" : "relu", 1e-5, false,
                                    norm_first, true, st::f64());
      load(m);
      const std::vector<Tensor> inputs = {
          st::det_input({L, N, E}, 1, -1.5, 0.3, dt::kFloat64),
          dt::gt(st::det_input({L, L}, 0, 0, 1, dt::kFloat64), 9.0)};  // bool src_mask
      auto call = [&](const std::vector<DTensor>& in) {
        return std::pair{m.forward(in[0], in[1]), DTensor()};
      };
      dt::manual_seed(11);
      const Run want = run(m, inputs, nullptr, {}, call);
      dt::manual_seed(11);
      const Run got = run(m, inputs, &mesh, {{Shard(1)}, {Replicate()}}, call);
      check_same(got, want);
    }
  }
}

TEST_CASE("fully_shard TransformerEncoder called with masks equals the unsharded run") {
  // The stack (root unit, owning norm) and each layer (a unit) run fully_shard's hooks on the
  // masked calls enc(src, mask, kpm) and layer(x, mask, kpm): the gathers happen, and over two
  // steps each rank's outputs (its N sequences of a global batch of N w, batch dim 1) and the
  // (averaged) gradients of every parameter equal one device's run on the whole batch.
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w}, {"dp"});
  const int64_t r = mesh.get_local_rank(0);
  constexpr int64_t E = 4, H = 2, L = 3, N = 2;
  auto make = [&] {
    nn::TransformerEncoderLayer layer(E, H, 6, 0.0, "relu", 1e-5, false, false, true, st::f64());
    auto enc = std::make_shared<nn::TransformerEncoder>(
        layer, 2, std::make_shared<nn::LayerNorm>(E, 1e-5, true, st::f64()));
    load(*enc);
    return enc;
  };
  auto ref = make(), model = make();
  auto dp =
      dt::fully_shard(*model, mesh, {.grouping = {.module_types = {"TransformerEncoderLayer"}}});
  CHECK(dp->units().size() == 3);
  const DTensor mask = nn::local_dtensor(dt::gt(st::det_input({L, L}, 0, 0, 1, dt::kFloat64), 4.0));
  const Tensor kpm = padding_mask(N * w, L);
  for (int step = 0; step < 2; ++step) {
    INFO("step " << step);
    const Tensor x = st::det_input({L, N * w, E}, 1 + step, -1.5, 0.3, dt::kFloat64);
    const Tensor c = st::det_input({L, N * w, E}, 5, -1.0, 0.25, dt::kFloat64);
    std::vector<Tensor> outs;
    for (nn::TransformerEncoder* m : {ref.get(), model.get()}) {
      const int64_t begin = m == ref.get() ? 0 : N * r, count = m == ref.get() ? N * w : N;
      auto rows = [&](const Tensor& t, int64_t dim) {
        return nn::local_dtensor(t.narrow(dim, begin, count).contiguous());
      };
      m->zero_grad();
      const DTensor out = (*m)(rows(x, 1), mask, rows(kpm, 0));
      // The mean over the batch: the ranks' means average to the global one.
      dt::div(dt::sum(dt::mul(out, rows(c, 1))), dt::Scalar(static_cast<double>(count))).backward();
      outs.push_back(out.to_local());
    }
    CHECK(st::same_values(outs[1], outs[0].narrow(1, N * r, N).contiguous(), 1e-15));
    const auto want = ref->named_parameters(), got = model->named_parameters();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      INFO(want[i].first);
      CHECK(st::same_values(got[i].second.grad().full_tensor(), want[i].second.grad().to_local(),
                            1e-12));
    }
  }
}
