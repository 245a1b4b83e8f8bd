// dtensor half of the context-parallel side-by-side probe (round 8d); probe.py is the PyTorch
// half and compare.py prints the differences (README.md beside it; docs/SEMANTICS.md, "Context
// parallelism against PyTorch (round 8d)"). Built by the target cp_parity_probe (not run by
// ctest): mpirun -np N build/tests/parallel/cp_parity_probe (N = 2, 4) writes dt_w<N>_r<rank>.json.
// The cases, names and formulas are probe.py's. Attention and model records are whole tensors:
// ring_attention's outputs and gradients after context_parallel_unshard.
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "dtensor/collectives/runtime.h"
#include "dtensor/nn/layers.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/parallel/context/context_parallel.h"
#include "dtensor/tensor/creation.h"
#include "tests/parallel/torch_dp_parity/json_out.h"

namespace dt = dtensor;
using dt::DTensor;

namespace {
using namespace probe_json;
int64_t W = 1;

void rec_tensor(const std::string& name, const dt::Tensor& t) {
  std::string vals = "[";
  for (double v : dt::cast(t.contiguous(), dt::kFloat64).to_vector<double>())
    vals += (vals.size() > 1 ? "," : "") + num(v);
  entry("\"case\":" + quoted(name) + ",\"shape\":" + ints(t.shape()) + ",\"values\":" + vals + "]");
}
void attempt(const std::string& name, const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    rec_error(name, e);
  }
}
// value i = sin(a i + b), i the flat index (probe.py's formula).
dt::Tensor formula(const dt::Shape& shape, double a, double b) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(a * i + b);
  return dt::from_vector(v, shape);
}
dt::Tensor iota(const dt::Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return dt::reshape(dt::arange(0.0, static_cast<double>(n)).to(dt::kFloat64), shape);
}

}  // namespace

int main(int argc, char** argv) {
  dt::Runtime rt(&argc, &argv);
  W = dt::world_size();
  const auto mesh = dt::init_device_mesh(dt::kCPU, {W}, {"cp"});
  const auto replicate = [&](const dt::Tensor& t) {
    return DTensor::from_local(t, mesh, {dt::Replicate()});
  };

  for (int64_t S : {8, 12, 16, 6}) {
    attempt("lb_index S" + std::to_string(S), [&] {
      rec_tensor("lb_index S" + std::to_string(S), dt::head_tail_order(iota({S}), 0, W));
    });
    attempt("lb_restore S" + std::to_string(S), [&] {
      rec_tensor("lb_restore S" + std::to_string(S), dt::natural_order(iota({S}), 0, W));
    });
  }

  constexpr int64_t B = 2, H = 2;
  for (int64_t S : {8, 12, 6, 5}) {
    for (bool lb : {true, false}) {
      const std::string tail = " S" + std::to_string(S) + " lb" + std::to_string(lb);
      const std::vector<std::pair<std::string, std::pair<dt::Tensor, int64_t>>> bufs{
          {"tok", {iota({B, S}), 1}}, {"q", {iota({B, H, S, 3}), 2}}, {"pos", {iota({S}), 0}}};
      for (const auto& [n, td] : bufs) {
        std::optional<DTensor> shard;
        attempt("shard " + n + tail, [&] {
          shard = dt::context_parallel_shard(replicate(td.first), 0, td.second, lb);
          rec_tensor("shard " + n + tail, shard->to_local());
        });
        if (!shard) {
          rec_error("unshard " + n + tail, std::runtime_error("no shard"));
          continue;
        }
        attempt("unshard " + n + tail, [&] {
          rec_tensor("unshard " + n + tail,
                     dt::context_parallel_unshard(*shard, 0, td.second, lb).to_local());
        });
      }
    }
  }
  // probe.py's torch_cp_sdpa (PyTorch's context_parallel around a causal sdpa, which raises on
  // CPU): dtensor's ring_attention on the same q, k, v, this rank's shard of the output.
  attempt("torch_cp_sdpa", [&] {
    const auto lay = [&](double a) {
      return dt::context_parallel_shard(replicate(formula({1, 2, 8, 4}, a, 0.1)), 0, 2);
    };
    rec_tensor("torch_cp_sdpa",
               dt::ring_attention(lay(0.3), lay(1.3), lay(2.3), 0, {.is_causal = true}).to_local());
  });

  // probe.py's 'ring' cases (PyTorch's ring driven directly): this rank's shards in the layout.
  // dtensor has no rotate method: the same records under both names.
  for (const char* rot : {"allgather", "alltoall"})
    for (int64_t S : {8, 16})
      for (bool causal : {false, true})
        for (bool lb : {false, true})
          for (std::optional<double> scale :
               {std::optional<double>(), std::optional<double>(0.3)}) {
            const std::string name = "ring S" + std::to_string(S) + " c" + std::to_string(causal) +
                                     " lb" + std::to_string(lb) + " " + rot + " s" +
                                     (scale ? "0.3" : "None");
            const auto lay = [&](double a, double b) {
              return dt::context_parallel_shard(replicate(formula({2, 4, S, 3}, a, b)), 0, 2, lb)
                  .detach();
            };
            attempt(name, [&] {
              DTensor q = lay(0.37, 0.2).requires_grad_();
              DTensor k = lay(0.53, 0.4).requires_grad_();
              DTensor v = lay(0.71, 0.9).requires_grad_();
              DTensor o = dt::ring_attention(
                  q, k, v, 0, {.is_causal = causal, .scale = scale, .load_balance = lb});
              dt::sum(dt::mul(o, lay(0.29, 0.7))).backward();
              rec_tensor(name + " out", o.to_local());
              rec_tensor(name + " dq", q.grad().to_local());
              rec_tensor(name + " dk", k.grad().to_local());
              rec_tensor(name + " dv", v.grad().to_local());
            });
          }

  for (int64_t S : {8, 12, 5}) {
    const bool lb = S % (2 * W) == 0;  // PyTorch's default load balancer's rule
    const auto lay = [&](const dt::Tensor& t) {
      return dt::context_parallel_shard(replicate(t), 0, 2, lb).detach();
    };
    const auto whole = [&](const DTensor& t) {
      return dt::context_parallel_unshard(t, 0, 2, lb).to_local();
    };
    for (bool causal : {false, true})
      for (int64_t Hk : {4, 2})
        for (std::optional<double> scale : {std::optional<double>(), std::optional<double>(0.3)}) {
          const std::string name = "attn S" + std::to_string(S) + " c" + std::to_string(causal) +
                                   " hk" + std::to_string(Hk) + " s" + (scale ? "0.3" : "None");
          attempt(name, [&] {
            DTensor q = lay(formula({2, 4, S, 3}, 0.37, 0.2)).requires_grad_();
            DTensor k = lay(formula({2, Hk, S, 3}, 0.53, 0.4)).requires_grad_();
            DTensor v = lay(formula({2, Hk, S, 3}, 0.71, 0.9)).requires_grad_();
            DTensor o = dt::ring_attention(
                q, k, v, 0,
                {.is_causal = causal, .scale = scale, .load_balance = lb, .enable_gqa = Hk != 4});
            dt::sum(dt::mul(o, lay(formula({2, 4, S, 3}, 0.29, 0.7)))).backward();
            rec_tensor(name + " out", whole(o));
            rec_tensor(name + " dq", whole(q.grad()));
            rec_tensor(name + " dk", whole(k.grad()));
            rec_tensor(name + " dv", whole(v.grad()));
          });
        }
  }

  // probe.py's Net: wq, wk, wv (Linear 8 -> 8) -> 2 heads of attention -> wo, loss sum(y * coeff).
  for (int64_t S : {8, 12}) {
    const bool lb = S % (2 * W) == 0;
    for (bool causal : {false, true}) {
      const std::string name = "model S" + std::to_string(S) + " c" + std::to_string(causal);
      attempt(name, [&] {
        const dt::nn::ModuleOptions f64{.dtype = dt::kFloat64};
        std::vector<std::pair<std::string, std::unique_ptr<dt::nn::Linear>>> ws;
        int j = 0;
        for (const char* n : {"wq", "wk", "wv", "wo"}) {
          auto m = std::make_unique<dt::nn::Linear>(8, 8, true, f64);
          for (const char* p : {"weight", "bias"}) {
            const dt::Shape shape = m->named_parameters()[p[0] == 'w' ? 0 : 1].second.shape();
            m->set_parameter(
                p, replicate(dt::mul(formula(shape, 0.37, 1.1 * j + 0.2), 0.3)).requires_grad_());
            ++j;
          }
          ws.emplace_back(n, std::move(m));
        }
        DTensor x = dt::context_parallel_shard(replicate(formula({2, S, 8}, 0.53, 0.4)), 0, 1, lb)
                        .detach()
                        .requires_grad_();
        const auto split = [&](const DTensor& t) {
          return dt::transpose(dt::reshape(t, {2, S, 2, 4}), 1, 2);
        };
        DTensor a = dt::ring_attention(split((*ws[0].second)(x)), split((*ws[1].second)(x)),
                                       split((*ws[2].second)(x)), 0,
                                       {.is_causal = causal, .load_balance = lb});
        DTensor y = (*ws[3].second)(dt::reshape(dt::transpose(a, 1, 2), {2, S, 8}));
        DTensor loss = dt::sum(dt::mul(
            y, dt::context_parallel_shard(replicate(formula({2, S, 8}, 0.71, 0.3)), 0, 1, lb)));
        loss.backward();
        rec_tensor(name + " y", dt::context_parallel_unshard(y, 0, 1, lb).to_local());
        rec_tensor(name + " loss", loss.full_tensor());
        rec_tensor(name + " dx", dt::context_parallel_unshard(x.grad(), 0, 1, lb).to_local());
        for (const auto& [n, m] : ws)
          for (const auto& [p, t] : m->named_parameters())
            rec_tensor(name + " grad " + n + "." + p, t.grad().full_tensor());
      });
    }
  }
  write("dt_w" + std::to_string(W) + "_r" + std::to_string(dt::world_rank()) + ".json");
  return 0;
}
