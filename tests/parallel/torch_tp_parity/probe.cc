// dtensor half of the tensor-parallel side-by-side probe (round 7a); probe.py is the PyTorch half
// (torch.distributed.tensor.parallel on gloo) and compare.py prints the differences
// (docs/SEMANTICS.md, "Tensor parallelism against PyTorch (round 7a)"). Built by the target
// tp_parity_probe (not run by ctest): then in one directory
//   mpirun -np N build/tests/parallel/tp_parity_probe      (N = 2, 4)
//   /root/venv/bin/torchrun --nproc-per-node N tests/parallel/torch_tp_parity/probe.py
//   python3 tests/parallel/torch_tp_parity/compare.py N
// Writes dt_w<N>_r<rank>.json. The cases, names and formulas are probe.py's.
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dtensor/collectives/runtime.h"
#include "dtensor/nn/functional.h"
#include "dtensor/nn/nn.h"
#include "dtensor/ops/attention/attention.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/optim/optimizer.h"
#include "dtensor/parallel/data_parallel/data_parallel.h"
#include "dtensor/parallel/parallelize.h"
#include "dtensor/tensor/creation.h"
#include "tests/parallel/torch_dp_parity/json_out.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
using dt::DTensor;
using dt::Replicate;
using dt::Shard;

namespace {
using namespace probe_json;
int64_t R = 0, W = 1;
constexpr int64_t B = 2, T = 4, D = 4;
const nn::ModuleOptions kF64{.dtype = dt::kFloat64};

void record(const std::string& name, const DTensor& d) {
  rec(name, d, d.defined() && nn::is_local(d));
}

// probe.py's init(): parameter k (in named_parameters order) = 0.3 sin(0.37 i + 1.1 k + 0.2).
nn::ModulePtr init(nn::ModulePtr m) {
  int k = 0;
  for (auto& [name, p] : m->named_parameters()) {
    std::vector<double> v(static_cast<size_t>(p.numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.3 * std::sin(0.37 * i + 1.1 * k + 0.2);
    const auto dot = name.rfind('.');
    nn::Module& owner = dot == std::string::npos ? *m : m->get_submodule(name.substr(0, dot));
    owner.set_parameter(dot == std::string::npos ? name : name.substr(dot + 1),
                        nn::local_dtensor(dt::from_vector(v, p.shape())));
    ++k;
  }
  return m;
}

dt::Tensor formula(const dt::Shape& shape, const std::function<double(int64_t)>& f) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = f(i);
  return dt::from_vector(v, shape);
}
dt::Tensor full_input(const dt::Shape& shape, int step) {
  return formula(shape, [&](int64_t i) { return std::sin(0.53 * i + 0.9 * step + 0.4); });
}
dt::Tensor coeff(const dt::Shape& shape) {
  return formula(shape, [](int64_t i) { return std::cos(0.71 * i + 0.3); });
}
dt::Tensor tokens(int step, int64_t V = 7) {
  std::vector<int64_t> v;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) v.push_back((b * 3 + t * 5 + step) % V);
  return dt::from_vector(v, {B, T});
}

class Wrap : public nn::Module {
 public:
  explicit Wrap(nn::ModulePtr inner) { inner_ = register_module("inner", std::move(inner)); }
  std::string type_name() const override { return "Wrap"; }
  DTensor forward(const DTensor& x) override { return (*inner_)(x); }

 private:
  nn::ModulePtr inner_;
};

class MLP : public nn::Module {
 public:
  explicit MLP(int64_t hidden = 8) {
    fc1_ = register_module("fc1", std::make_shared<nn::Linear>(D, hidden, true, kF64));
    fc2_ = register_module("fc2", std::make_shared<nn::Linear>(hidden, D, true, kF64));
  }
  std::string type_name() const override { return "MLP"; }
  DTensor forward(const DTensor& x) override { return (*fc2_)(dt::tanh((*fc1_)(x))); }

 private:
  nn::ModulePtr fc1_, fc2_;
};

// probe.py's Attention, FeedForward and Block (torchtitan's TransformerBlock, small): 4 heads
// of 2, the heads sharded by the colwise q / k / v.
class Attention : public nn::Module {
 public:
  Attention() {
    for (const char* n : {"wq", "wk", "wv", "wo"})
      w_.push_back(register_module(n, std::make_shared<nn::Linear>(8, 8, false, kF64)));
  }
  std::string type_name() const override { return "Attention"; }
  DTensor forward(const DTensor& x) override {
    const int64_t b = x.shape()[0], t = x.shape()[1];
    const int64_t heads[] = {b, t, -1, 2}, merged[] = {b, t, -1};
    DTensor qkv[3];
    for (int i = 0; i < 3; ++i) qkv[i] = dt::transpose(dt::view((*w_[i])(x), heads), 1, 2);
    const DTensor o =
        dt::scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], DTensor(), 0.0, true);
    return (*w_[3])(dt::reshape(dt::transpose(o, 1, 2), merged));
  }

 private:
  std::vector<nn::ModulePtr> w_;
};

class FeedForward : public nn::Module {
 public:
  FeedForward() {
    w1_ = register_module("w1", std::make_shared<nn::Linear>(8, 8, false, kF64));
    w2_ = register_module("w2", std::make_shared<nn::Linear>(8, 8, false, kF64));
    w3_ = register_module("w3", std::make_shared<nn::Linear>(8, 8, false, kF64));
  }
  std::string type_name() const override { return "FeedForward"; }
  DTensor forward(const DTensor& x) override {
    return (*w2_)(dt::mul(dt::silu((*w1_)(x)), (*w3_)(x)));
  }

 private:
  nn::ModulePtr w1_, w2_, w3_;
};

class Block : public nn::Module {
 public:
  Block() {
    attention_norm_ =
        register_module("attention_norm", std::make_shared<nn::RMSNorm>(8, std::nullopt, kF64));
    attention_ = register_module("attention", std::make_shared<Attention>());
    ffn_norm_ = register_module("ffn_norm", std::make_shared<nn::RMSNorm>(8, std::nullopt, kF64));
    feed_forward_ = register_module("feed_forward", std::make_shared<FeedForward>());
  }
  std::string type_name() const override { return "Block"; }
  DTensor forward(const DTensor& x) override {
    const DTensor h = dt::add(x, (*attention_)((*attention_norm_)(x)));
    return dt::add(h, (*feed_forward_)((*ffn_norm_)(h)));
  }

 private:
  nn::ModulePtr attention_norm_, attention_, ffn_norm_, feed_forward_;
};

// probe.py's Chain: rowwise -> sequence-parallel norm -> colwise, DTensors between.
class Chain : public nn::Module {
 public:
  Chain() {
    row_ = register_module("row", std::make_shared<nn::Linear>(8, D, true, kF64));
    norm_ = register_module("norm", std::make_shared<nn::LayerNorm>(D, 1e-5, true, kF64));
    col_ = register_module("col", std::make_shared<nn::Linear>(D, 6, true, kF64));
  }
  std::string type_name() const override { return "Chain"; }
  DTensor forward(const DTensor& x) override { return (*col_)((*norm_)((*row_)(x))); }

 private:
  nn::ModulePtr row_, norm_, col_;
};

// probe.py's block_plan (torchtitan's plan for one block).
dt::ParallelizePlan block_plan(bool sp) {
  const dt::Placement seq = sp ? dt::Placement(Shard(1)) : dt::Placement(Replicate());
  dt::ParallelizePlan p = {
      {"attention",
       dt::PrepareModuleInput({.input_layouts = seq, .desired_input_layouts = Replicate()})},
      {"attention.wq", dt::ColwiseParallel()},
      {"attention.wk", dt::ColwiseParallel()},
      {"attention.wv", dt::ColwiseParallel()},
      {"attention.wo", dt::RowwiseParallel({.input_layouts = std::nullopt, .output_layouts = seq})},
      {"feed_forward",
       dt::PrepareModuleInput({.input_layouts = seq, .desired_input_layouts = Replicate()})},
      {"feed_forward.w1", dt::ColwiseParallel()},
      {"feed_forward.w2",
       dt::RowwiseParallel({.input_layouts = std::nullopt, .output_layouts = seq})},
      {"feed_forward.w3", dt::ColwiseParallel()},
  };
  if (sp)
    for (const char* n : {"attention_norm", "ffn_norm"})
      p.push_back({n, dt::SequenceParallel({.sequence_dim = 1, .use_local_output = true})});
  return p;
}

DTensor weighted_loss(const DTensor& y) {
  const DTensor f = nn::is_local(y) ? y : y.full_tensor_dtensor();
  return dt::sum(dt::mul(f, nn::local_dtensor(coeff(f.shape()))));
}

using Build = std::function<nn::ModulePtr()>;
using Plan = std::function<void(nn::Module&, const dt::DeviceMesh&)>;
struct Opts {
  std::function<dt::Tensor(int)> x_full;  // the global input of a step
  std::optional<int64_t> in_layout;       // the local input is this dim's torch.chunk
  bool tok = false;                       // token input (Embedding)
  // The loss of an output; backpropagated unless `done` (then it was already).
  std::function<DTensor(const DTensor&)> loss = weighted_loss;
  bool loss_done = false;
  std::optional<dt::DeviceMesh> fsdp;  // fully_shard on this (2-d) mesh after parallelize
  std::optional<dt::DeviceMesh> pmesh;
};

void run(const std::string& tag, const Build& build, const Plan& plan, const dt::DeviceMesh& mesh,
         Opts o) {
  for (const bool adamw : {true, false}) {
    const std::string t = tag + (adamw ? " adamw" : " sgd");
    try {
      nn::ModulePtr m = init(build());
      plan(*m, o.pmesh ? *o.pmesh : mesh);
      std::shared_ptr<dt::DataParallel> dp;
      if (o.fsdp) dp = dt::fully_shard(*m, *o.fsdp, {});
      if (adamw)
        for (auto& [n, p] : m->named_parameters()) record(tag + " parallelized " + n, p);
      std::unique_ptr<dt::optim::Optimizer> opt;
      if (adamw)
        opt = std::make_unique<dt::optim::AdamW>(m->parameters(), dt::optim::AdamWOptions(1e-2));
      else
        opt = std::make_unique<dt::optim::SGD>(m->parameters(),
                                               dt::optim::SGDOptions(0.1).momentum(0.9));
      for (int step = 0; step < 3; ++step) {
        const std::string s = t + " step" + std::to_string(step);
        opt->zero_grad();
        DTensor x;
        if (o.tok) {
          x = nn::local_dtensor(tokens(step));
        } else {
          dt::Tensor xf = o.x_full(step);
          if (o.in_layout) {
            const int64_t parts = o.fsdp ? 2 : W, me = o.fsdp ? R % 2 : R;
            const auto b = dt::chunk_bounds(xf.size(*o.in_layout), parts, me);
            xf = xf.narrow(*o.in_layout, b.offset, b.size).contiguous();
          }
          x = nn::local_dtensor(xf);
          x.requires_grad_(true);
        }
        const DTensor y = (*m)(x);
        record(s + " out", y);
        const DTensor l = o.loss(y);
        record(s + " loss", l);
        if (!o.loss_done) l.backward();
        if (!o.tok) record(s + " input grad", x.grad());
        for (auto& [n, p] : m->named_parameters()) record(s + " grad " + n, p.grad());
        opt->step();
        for (auto& [n, p] : m->named_parameters()) {
          record(s + " param " + n, p);
          if (o.fsdp) {  // the layouts differ (docs/SEMANTICS.md): the values gathered
            rec(s + " full param " + n, p.full_tensor_dtensor(), true);
            rec(s + " full grad " + n, p.grad().full_tensor_dtensor(), true);
          }
        }
      }
    } catch (const std::exception& e) {
      rec_error(t, e);
    }
  }
}

dt::Tensor x3(int step, int64_t d = D) {
  return full_input({B, T, d}, step);
}

// probe.py's ce_loss: cross_entropy of the flattened vocab-sharded logits (loss parallel).
struct CE {
  dt::Reduction reduction = dt::Reduction::kMean;
  bool ignore = false;
  int64_t ignore_index = -100;
  double smoothing = 0;
  bool weight = false;
  bool ignore_all = false;  // every target -100
  bool three_d = false;     // [B, 7, T] logits (class dim 1), [B, T] targets
};
std::function<DTensor(const DTensor&)> ce_loss(CE c) {
  return [c](const DTensor& y) {
    std::vector<int64_t> tv;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) tv.push_back((b * 2 + t + 1) % 7);
    if (c.ignore_all) std::fill(tv.begin(), tv.end(), -100);
    if (c.ignore) tv[1] = tv[6] = c.ignore_index;
    const dt::DeviceMesh& mesh = y.device_mesh();
    const DTensor tgt =
        DTensor::from_local(nn::local_dtensor(dt::from_vector(tv, {B * T})), mesh, {Replicate()});
    DTensor w;
    if (c.weight) {
      const dt::Tensor wt = formula({7}, [](int64_t i) { return 0.5 + 0.1 * i; });
      w = DTensor::from_local(nn::local_dtensor(wt), mesh, {Replicate()});
    }
    const int64_t rows[] = {-1, 7}, bt[] = {B, T};
    DTensor l = c.three_d ? dt::cross_entropy(dt::transpose(y, 1, 2), dt::reshape(tgt, bt),
                                              c.reduction, c.ignore_index, c.smoothing, w)
                          : dt::cross_entropy(dt::reshape(y, rows), tgt, c.reduction,
                                              c.ignore_index, c.smoothing, w);
    if (c.reduction == dt::Reduction::kNone) {
      l = dt::sum(dt::mul(l.full_tensor_dtensor(), nn::local_dtensor(coeff(l.shape()))));
    }
    l.backward();
    return l.full_tensor_dtensor();
  };
}

void err(const std::string& tag, const std::function<void()>& f) {
  try {
    f();
    rec_value(tag, "ok");
  } catch (const std::exception& e) {
    rec_error(tag, e);
  }
}

template <class S>
Plan style(S s) {
  return [s](nn::Module& m, const dt::DeviceMesh& mesh) { dt::parallelize_module(m, mesh, s); };
}
Plan plan(dt::ParallelizePlan p) {
  return [p](nn::Module& m, const dt::DeviceMesh& mesh) { dt::parallelize_module(m, mesh, p); };
}
// A style on the Wrap itself, then `inner` on its Linear (PrepareModuleInput / Output around
// a colwise Linear).
template <class S>
Plan around(S outer, dt::ColwiseParallel inner) {
  return [outer, inner](nn::Module& m, const dt::DeviceMesh& mesh) {
    dt::parallelize_module(m, mesh, outer);
    dt::parallelize_module(m, mesh, {{"inner", inner}});
  };
}
Build lin(int64_t i, int64_t o, bool b = true) {
  return [=] { return std::make_shared<nn::Linear>(i, o, b, kF64); };
}

}  // namespace

int main(int argc, char** argv) {
  dt::Runtime rt(&argc, &argv);
  R = dt::world_rank();
  W = dt::world_size();
  const auto mesh = dt::init_device_mesh(dt::kCPU, {W}, {"tp"});
  using Col = dt::ColwiseParallel;
  using Row = dt::RowwiseParallel;
  using Seq = dt::SequenceParallel;
  const Opts rep{.x_full = [](int s) { return x3(s); }};
  Opts s1 = rep;
  s1.in_layout = 1;
  const Opts in8{.x_full = [](int s) { return x3(s, 8); }, .in_layout = 2};
  const Opts in8r{.x_full = [](int s) { return x3(s, 8); }};
  const Opts tok{.tok = true};
  run("col_default", lin(D, 5), style(Col()), mesh, rep);
  run("col_out_R", lin(D, 5), style(Col({.output_layouts = Replicate()})), mesh, rep);
  run("col_dtensor", lin(D, 5), style(Col({.use_local_output = false})), mesh, rep);
  run("col_in_S1", lin(D, 6), style(Col({.input_layouts = Shard(1)})), mesh, s1);
  run("col_in_S1_out_R_dt", lin(D, 6),
      style(Col(
          {.input_layouts = Shard(1), .output_layouts = Replicate(), .use_local_output = false})),
      mesh, s1);
  run("row_default", lin(8, 3), style(Row()), mesh, in8);
  run("row_in_R", lin(8, 3), style(Row({.input_layouts = Replicate()})), mesh, in8r);
  run("row_out_S1", lin(8, 3), style(Row({.output_layouts = Shard(1)})), mesh, in8);
  run("row_out_S1_dt", lin(8, 3),
      style(Row({.output_layouts = Shard(1), .use_local_output = false})), mesh, in8);
  run("row_dtensor", lin(8, 3, false), style(Row({.use_local_output = false})), mesh, in8);
  run("row_in_S0", lin(8, 3), style(Row({.input_layouts = Shard(0)})), mesh,
      {.x_full =
           [](int s) {
             return full_input({4, T, 8}, s);
           },
       .in_layout = 0});
  run("col_out_S1_dt", lin(D, 8),
      style(Col({.output_layouts = Shard(1), .use_local_output = false})), mesh, rep);
  run("col_in_partial", lin(D, 6), style(Col({.input_layouts = dt::Partial()})), mesh, rep);
  run("row_uneven_in5", lin(5, 3), style(Row({.input_layouts = Replicate()})), mesh,
      {.x_full = [](int s) { return x3(s, 5); }});
  run("row_uneven_in5_S", lin(5, 3), style(Row()), mesh,
      {.x_full = [](int s) { return x3(s, 5); }, .in_layout = 2});
  run("col_uneven_out5_R", lin(D, 5),
      style(Col({.output_layouts = Replicate(), .use_local_output = false})), mesh, rep);
  const Build ln = [] { return std::make_shared<nn::LayerNorm>(D, 1e-5, true, kF64); };
  const Build rms = [] { return std::make_shared<nn::RMSNorm>(D, std::nullopt, kF64); };
  run("seq_layernorm", ln, style(Seq()), mesh, s1);
  run("seq_layernorm_local", ln, style(Seq({.use_local_output = true})), mesh, s1);
  run("seq_rmsnorm", rms, style(Seq()), mesh, s1);
  run("seq_rmsnorm_dim0", rms, style(Seq({.sequence_dim = 0})), mesh,
      {.x_full =
           [](int s) {
             return full_input({T, B, D}, s);
           },
       .in_layout = 0});
  const Build wrap6 = [] {
    return std::make_shared<Wrap>(std::make_shared<nn::Linear>(D, 6, true, kF64));
  };
  run("prep_in_col", wrap6,
      around(
          dt::PrepareModuleInput({.input_layouts = Shard(1), .desired_input_layouts = Replicate()}),
          Col()),
      mesh, s1);
  run("prep_in_local", wrap6,
      style(dt::PrepareModuleInput({.input_layouts = Shard(1),
                                    .desired_input_layouts = Replicate(),
                                    .use_local_output = true})),
      mesh, s1);
  rec_error("prep_in_none adamw", std::runtime_error("no None layouts (a plain input) in dtensor"));
  rec_error("prep_in_none sgd", std::runtime_error("no None layouts (a plain input) in dtensor"));
  const Build wrap8 = [] {
    return std::make_shared<Wrap>(std::make_shared<nn::Linear>(D, 8, true, kF64));
  };
  run("prep_out_gather", wrap8,
      around(dt::PrepareModuleOutput(
                 {.output_layouts = Shard(-1), .desired_output_layouts = Replicate()}),
             Col()),
      mesh, rep);
  run("prep_out_dt", wrap8,
      around(dt::PrepareModuleOutput({.output_layouts = Shard(-1),
                                      .desired_output_layouts = Shard(1),
                                      .use_local_output = false}),
             Col()),
      mesh, rep);
  const auto emb = [](int64_t d) {
    return [d] { return nn::ModulePtr(std::make_shared<nn::Embedding>(7, d, kF64)); };
  };
  run("emb_row", emb(D), style(Row()), mesh, tok);
  run("emb_row_S1", emb(D),
      style(Row(
          {.input_layouts = Replicate(), .output_layouts = Shard(1), .use_local_output = false})),
      mesh, tok);
  run("emb_col", emb(D), style(Col()), mesh, tok);
  run("emb_col_R", emb(6), style(Col({.output_layouts = Replicate()})), mesh, tok);
  const Build emb_pad = [] { return std::make_shared<nn::Embedding>(7, D, 3, kF64); };
  run("emb_row_pad", emb_pad, style(Row({.input_layouts = Replicate()})), mesh, tok);
  run("emb_col_pad", emb_pad, style(Col()), mesh, tok);
  run("emb_col_S1", emb(D), style(Col({.output_layouts = Shard(1), .use_local_output = false})),
      mesh, tok);
  run("emb_row_S0", emb(D),
      style(Row(
          {.input_layouts = Replicate(), .output_layouts = Shard(0), .use_local_output = false})),
      mesh, tok);
  const Opts t5{.x_full = [](int s) { return full_input({B, 5, 8}, s); }, .in_layout = 2};
  run("row_out_S1_T5_dt", lin(8, 3),
      style(Row({.output_layouts = Shard(1), .use_local_output = false})), mesh, t5);
  run(
      "sp_chain_T5", [] { return std::make_shared<Chain>(); },
      plan({{"row", Row({.output_layouts = Shard(1), .use_local_output = false})},
            {"norm", Seq()},
            {"col", Col({.input_layouts = Shard(1)})}}),
      mesh, t5);
  run(
      "sp_chain_col_default", [] { return std::make_shared<Chain>(); },
      plan({{"row", Row({.output_layouts = Shard(1), .use_local_output = false})},
            {"norm", Seq()},
            {"col", Col()}}),
      mesh, in8);
  run("prep_out_same_layout", wrap8,
      around(dt::PrepareModuleOutput(
                 {.output_layouts = Replicate(), .desired_output_layouts = Replicate()}),
             Col({.use_local_output = false})),
      mesh, rep);
  const Build mlp5 = [] { return std::make_shared<MLP>(5); };
  run("mlp5_dt", mlp5, plan({{"fc1", Col({.use_local_output = false})}, {"fc2", Row()}}), mesh,
      rep);
  run("mlp5_local", mlp5, plan({{"fc1", Col()}, {"fc2", Row()}}), mesh, rep);
  const Build mlp = [] { return std::make_shared<MLP>(); };
  run("mlp", mlp, plan({{"fc1", Col()}, {"fc2", Row()}}), mesh, rep);
  run(
      "mlp_sp", [] { return std::make_shared<Wrap>(std::make_shared<MLP>()); },
      plan({{"inner.fc1", Col({.input_layouts = Shard(1)})},
            {"inner.fc2", Row({.output_layouts = Shard(1), .use_local_output = false})}}),
      mesh, s1);
  const Build block = [] { return std::make_shared<Block>(); };
  run("block", block, plan(block_plan(false)), mesh, {.x_full = [](int s) { return x3(s, 8); }});
  run("block_sp", block, plan(block_plan(true)), mesh,
      {.x_full = [](int s) { return x3(s, 8); }, .in_layout = 1});
  const std::pair<const char*, CE> losses[] = {
      {"mean", {}},
      {"sum", {.reduction = dt::Reduction::kSum}},
      {"none", {.reduction = dt::Reduction::kNone}},
      {"ignore", {.ignore = true}},
      {"3d", {.ignore = true, .three_d = true}},
      {"3d_none", {.reduction = dt::Reduction::kNone, .three_d = true}},
      {"ignore_all", {.ignore_all = true}},
      {"ignore_all_sum", {.reduction = dt::Reduction::kSum, .ignore_all = true}},
      {"ignore_index3", {.ignore = true, .ignore_index = 3}},
      {"smooth", {.smoothing = 0.1}},
      {"weight", {.weight = true}},
      {"weight_ignore_sum", {.reduction = dt::Reduction::kSum, .ignore = true, .weight = true}},
  };
  for (const auto& [name, c] : losses) {
    Opts o = rep;
    o.loss = ce_loss(c);
    o.loss_done = true;
    run(std::string("loss_") + name, lin(D, 7),
        style(Col({.output_layouts = Shard(-1), .use_local_output = false})), mesh, o);
    // What PyTorch's loss_parallel refuses (probe.py): accepted here.
    if (c.smoothing != 0 || (c.weight && c.ignore))
      for (const char* opt : {" adamw", " sgd"})
        rec_value(std::string("loss_") + name + " loss_parallel" + opt, "ok");
  }
  {
    Opts o = rep;
    o.loss = ce_loss({});
    o.loss_done = true;
    run("loss_replicated_logits", lin(D, 7),
        style(Col({.output_layouts = Replicate(), .use_local_output = false})), mesh, o);
  }
  if (W == 4) {
    const auto m2 = dt::init_device_mesh(dt::kCPU, {2, 2}, {"dp", "tp"});
    Opts o{.x_full = [](int s) { return full_input({2 * B, T, D}, s); }, .in_layout = 0};
    o.fsdp = m2;
    o.pmesh = m2[{"tp"}];
    run("fsdp_tp_mlp", mlp, plan({{"fc1", Col()}, {"fc2", Row()}}), mesh, o);
    // Loss parallel under FSDP2 + TP: vocab-sharded logits on tp, each dp rank its rows.
    o.loss = ce_loss({.ignore = true});
    o.loss_done = true;
    run("fsdp_tp_loss", lin(D, 7),
        style(Col({.output_layouts = Shard(-1), .use_local_output = false})), mesh, o);
  }
  err("err_col_layernorm", [&] {
    nn::LayerNorm m(D, 1e-5, true, kF64);
    dt::parallelize_module(m, mesh, Col());
  });
  err("err_row_conv", [&] {
    nn::Conv1d m(2, 4, {3});
    dt::parallelize_module(m, mesh, Row());
  });
  err("err_seq_linear", [&] {
    nn::Linear m(4, 4, true, kF64);
    dt::parallelize_module(m, mesh, Seq());
  });
  err("err_nomatch", [&] {
    MLP m;
    dt::parallelize_module(m, mesh, {{"fc3", Col()}});
  });
  err("err_twice", [&] {
    MLP m;
    dt::parallelize_module(m, mesh, {{"fc1", Col()}, {"fc*", Row()}});
  });
  err("err_in_layout_dim", [&] {
    nn::Linear m(4, 4, true, kF64);
    dt::parallelize_module(m, mesh, Row({.input_layouts = Shard(3)}));
    m(nn::local_dtensor(full_input({2, 4}, 0)));
  });
  err("err_row_in_wrong_size", [&] {
    nn::Linear m(8, 4, true, kF64);
    dt::parallelize_module(m, mesh, Row());
    m(nn::local_dtensor(full_input({2, 8}, 0)));
  });
  if (W == 4)
    err("err_2d_mesh", [&] {
      nn::Linear m(4, 4, true, kF64);
      dt::parallelize_module(m, dt::init_device_mesh(dt::kCPU, {2, 2}), Col());
    });
  write("dt_w" + std::to_string(W) + "_r" + std::to_string(R) + ".json");
  return 0;
}
