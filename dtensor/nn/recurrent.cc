#include "dtensor/nn/recurrent.h"

#include <cmath>
#include <string_view>
#include <utility>

#include "dtensor/core/factories.h"
#include "dtensor/nn/functional.h"
#include "dtensor/nn/layers.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/rng/dtensor_random.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/shape.h"

namespace dtensor::nn {
namespace {

enum class Kind { kRNN, kLSTM, kGRU };

Kind kind_of(std::string_view mode) {
  if (mode.substr(0, 4) == "LSTM") return Kind::kLSTM;
  if (mode.substr(0, 3) == "GRU") return Kind::kGRU;
  return Kind::kRNN;
}

int64_t gates_of(Kind k) {
  return k == Kind::kLSTM ? 4 : k == Kind::kGRU ? 3 : 1;
}

double bound_of(int64_t hidden_size) {
  return 1.0 / std::sqrt(static_cast<double>(hidden_size));
}

void redraw(Module& m, int64_t hidden_size, Generator* gen) {
  const double b = bound_of(hidden_size);
  for (const auto& [name, p] : m.own_parameters()) uniform_(p, -b, b, gen);
}

// The parameter `name` of `m` taken onto `mesh` (undefined when `m` has none).
DTensor param_on(const Module& m, const std::string& name, const DeviceMesh& mesh,
                 std::string_view op) {
  return m.has_param(name) ? functional::on_mesh(m.param(name), mesh, op, name) : DTensor();
}

// The recurrence reads each step's whole feature vector in order, so only the batch dim
// (`batch_dim`, -1: none) may be sharded; anything else is refused on every rank (the
// placements are the same everywhere).
void check_layout(const DTensor& t, int64_t batch_dim, std::string_view op, std::string_view what) {
  for (const Placement& p : t.placements()) {
    DT_CHECK(!p.is_partial(),
             "[%s] %s is Partial: reduce it first (expected Replicate or Shard "
             "on the batch dim)",
             op, what);
    DT_CHECK(!p.is_shard() || p.dim() == batch_dim,
             "[%s] %s is sharded on dim %d: only the batch dim (%d) may be sharded (the time and "
             "feature dims must be whole for an exact recurrence)",
             op, what, p.dim(), batch_dim);
  }
}

// Zeros of `shape` laid out like `x` on its batch dim: Shard(state_batch_dim) where x is
// Shard(x_batch_dim), Replicate elsewhere.
DTensor zero_state(const DTensor& x, int64_t x_batch_dim, IntSpan shape, int64_t state_batch_dim) {
  Placements ps;
  for (const Placement& p : x.placements()) {
    ps.push_back(p.is_shard(x_batch_dim) ? Placement::shard(state_batch_dim) : Replicate());
  }
  return zeros(shape, x.device_mesh(), ps, x.dtype());
}

void check_state(const DTensor& s, IntSpan want, int64_t batch_dim, std::string_view op,
                 std::string_view what, std::string_view meaning) {
  DT_CHECK(Shape(s.shape().begin(), s.shape().end()) == Shape(want.begin(), want.end()),
           "[%s] %s must be %s (%s), got %s", op, what, shape_str(want), meaning,
           shape_str(s.shape()));
  check_layout(s, batch_dim, op, what);
}

struct StepWeights {
  DTensor w_hh, b_hh, w_hr;
};

// One time step from the input projection gi = x W_ih^T + b_ih ([B, G * H]) and the state h
// (and c for LSTM, replaced by c'), PyTorch's CPU formulas (ATen RNN.cpp's cells). Returns h'.
DTensor cell_step(Kind kind, bool relu, const DTensor& gi, const DTensor& h, DTensor& c,
                  const StepWeights& w) {
  const DTensor gh = linear(h, w.w_hh, w.b_hh);
  if (kind == Kind::kRNN) {
    const DTensor pre = add(gh, gi);
    return relu ? dtensor::relu(pre) : dtensor::tanh(pre);
  }
  if (kind == Kind::kGRU) {
    const std::vector<DTensor> i = chunk(gi, 3, -1);
    const std::vector<DTensor> g = chunk(gh, 3, -1);
    const DTensor r = sigmoid(add(i[0], g[0]));
    const DTensor z = sigmoid(add(i[1], g[1]));
    const DTensor n = dtensor::tanh(add(i[2], mul(g[2], r)));
    return add(mul(sub(h, n), z), n);
  }
  const std::vector<DTensor> g = chunk(add(gh, gi), 4, -1);
  c = add(mul(c, sigmoid(g[1])), mul(sigmoid(g[0]), dtensor::tanh(g[2])));
  const DTensor h1 = mul(sigmoid(g[3]), dtensor::tanh(c));
  return w.w_hr.defined() ? linear(h1, w.w_hr) : h1;
}

}  // namespace

// ---- RNN / LSTM / GRU ---------------------------------------------------------------------------

RecurrentBase::RecurrentBase(std::string mode, int64_t input_size, int64_t hidden_size,
                             RecurrentOptions ro, const ModuleOptions& opts)
    : mode_(std::move(mode)),
      input_size_(input_size),
      hidden_size_(hidden_size),
      ro_(std::move(ro)) {
  const char* op = mode_.c_str();
  const Kind kind = kind_of(mode_);
  DT_CHECK(ro_.dropout >= 0.0 && ro_.dropout <= 1.0,
           "[%s] dropout should be a number in range [0, 1] representing the probability of an "
           "element being zeroed, got %g",
           op, ro_.dropout);
  DT_CHECK(input_size >= 0, "[%s] input_size must be >= 0, got %d", op, input_size);
  DT_CHECK(hidden_size > 0, "[%s] hidden_size must be greater than zero, got %d", op, hidden_size);
  DT_CHECK(ro_.num_layers > 0, "[%s] num_layers must be greater than zero, got %d", op,
           ro_.num_layers);
  DT_CHECK(ro_.proj_size >= 0,
           "[%s] proj_size should be a positive integer or zero to disable projections, got %d", op,
           ro_.proj_size);
  DT_CHECK(ro_.proj_size == 0 || kind == Kind::kLSTM,
           "[%s] proj_size argument is only supported for LSTM, not RNN or GRU", op);
  DT_CHECK(ro_.proj_size < hidden_size, "[%s] proj_size %d has to be smaller than hidden_size %d",
           op, ro_.proj_size, hidden_size);
  if (kind == Kind::kRNN) {
    DT_CHECK(ro_.nonlinearity == "tanh" || ro_.nonlinearity == "relu",
             "[%s] Unknown nonlinearity '%s'. Select from 'tanh' or 'relu'.", op, ro_.nonlinearity);
  } else {
    DT_CHECK(ro_.nonlinearity == "tanh", "[%s] nonlinearity is an option of RNN only, got '%s'", op,
             ro_.nonlinearity);
  }
  const int64_t g = gates_of(kind) * hidden_size;
  const int64_t h_out = ro_.proj_size > 0 ? ro_.proj_size : hidden_size;
  const int64_t dirs = ro_.bidirectional ? 2 : 1;
  const double b = bound_of(hidden_size);
  // PyTorch's order: per layer, per direction: w_ih, w_hh, b_ih, b_hh, w_hr.
  for (int64_t layer = 0; layer < ro_.num_layers; ++layer) {
    for (int64_t d = 0; d < dirs; ++d) {
      const std::string sfx = "_l" + std::to_string(layer) + (d == 1 ? "_reverse" : "");
      const int64_t in = layer == 0 ? input_size : dirs * h_out;
      register_parameter("weight_ih" + sfx, detail::uniform_parameter({g, in}, b, opts));
      register_parameter("weight_hh" + sfx, detail::uniform_parameter({g, h_out}, b, opts));
      if (ro_.bias) {
        register_parameter("bias_ih" + sfx, detail::uniform_parameter({g}, b, opts));
        register_parameter("bias_hh" + sfx, detail::uniform_parameter({g}, b, opts));
      }
      if (ro_.proj_size > 0) {
        register_parameter("weight_hr" + sfx,
                           detail::uniform_parameter({ro_.proj_size, hidden_size}, b, opts));
      }
    }
  }
}

void RecurrentBase::reset_own_parameters(Generator* gen) {
  redraw(*this, hidden_size_, gen);
}

DTensor RecurrentBase::forward(const DTensor& x) {
  return forward_with_state(x, DTensor()).output;
}

RecurrentOutput RecurrentBase::operator()(const DTensor& x, const DTensor& h0, const DTensor& c0) {
  if (!has_hooks()) return forward_with_state(x, h0, c0);
  RecurrentOutput out;
  const DTensor in[] = {x, h0, c0};
  DTensor output = call_with_hooks(absl::MakeConstSpan(in, kind_of(mode_) == Kind::kLSTM ? 3 : 2),
                                   [&](absl::Span<const DTensor> a) {
                                     out = forward_with_state(a[0], a[1], a.size() > 2 ? a[2] : c0);
                                     return out.output;
                                   });
  out.output = std::move(output);
  return out;
}

RecurrentOutput RecurrentBase::forward_with_state(const DTensor& x, const DTensor& h0,
                                                  const DTensor& c0) {
  const std::string_view op = mode_;
  const Kind kind = kind_of(mode_);
  DT_CHECK(x.defined(), "[%s] input is undefined (expected a DTensor)", op);
  DT_CHECK(x.dim() == 2 || x.dim() == 3,
           "[%s] input must be 2-D (unbatched [L, H_in]) or 3-D, got %d-D", op, x.dim());
  DT_CHECK(x.size(-1) == input_size_,
           "[%s] input.size(-1) must be equal to input_size. Expected %d, got %d", op, input_size_,
           x.size(-1));
  DT_CHECK(kind == Kind::kLSTM || !c0.defined(), "[%s] c0 is LSTM's only", op);
  const bool batched = x.dim() == 3;
  const int64_t x_batch_dim = !batched ? -1 : ro_.batch_first ? 0 : 1;
  check_layout(x, x_batch_dim, op, "input");
  // Time-major [T, B, H_in] from here on.
  DTensor seq = !batched ? unsqueeze(x, 1) : ro_.batch_first ? transpose(x, 0, 1) : x;
  const int64_t steps = seq.size(0);
  const int64_t batch = seq.size(1);
  DT_CHECK(steps > 0, "[%s] Expected sequence length to be larger than 0 in RNN", op);
  const int64_t dirs = ro_.bidirectional ? 2 : 1;
  const int64_t h_out = ro_.proj_size > 0 ? ro_.proj_size : hidden_size_;
  const int64_t states = dirs * ro_.num_layers;
  const char* state_meaning = "num_layers * num_directions, batch, hidden size";
  auto state_in = [&](const DTensor& s, int64_t width, std::string_view what) {
    if (!s.defined()) return zero_state(seq, 1, Shape{states, batch, width}, 1);
    if (!batched) {
      check_state(s, Shape{states, width}, -1, op, what, state_meaning);
      return unsqueeze(s, 1);
    }
    check_state(s, Shape{states, batch, width}, 1, op, what, state_meaning);
    return s;
  };
  const DTensor h_all = state_in(h0, h_out, "h0");
  const DTensor c_all = kind == Kind::kLSTM ? state_in(c0, hidden_size_, "c0") : DTensor();
  const DeviceMesh& mesh = seq.device_mesh();
  const bool relu = ro_.nonlinearity == "relu";
  std::vector<DTensor> h_n, c_n;
  for (int64_t layer = 0; layer < ro_.num_layers; ++layer) {
    std::vector<DTensor> dir_out;
    for (int64_t d = 0; d < dirs; ++d) {
      const std::string sfx = "_l" + std::to_string(layer) + (d == 1 ? "_reverse" : "");
      const StepWeights w{param_on(*this, "weight_hh" + sfx, mesh, op),
                          param_on(*this, "bias_hh" + sfx, mesh, op),
                          param_on(*this, "weight_hr" + sfx, mesh, op)};
      // The input projection of every step at once: [T, B, G * H].
      const DTensor gi = linear(seq, param_on(*this, "weight_ih" + sfx, mesh, op),
                                param_on(*this, "bias_ih" + sfx, mesh, op));
      const int64_t idx = layer * dirs + d;
      DTensor h = select(h_all, 0, idx);
      DTensor c = c_all.defined() ? select(c_all, 0, idx) : DTensor();
      std::vector<DTensor> out(static_cast<size_t>(steps));
      for (int64_t i = 0; i < steps; ++i) {
        const int64_t t = d == 0 ? i : steps - 1 - i;
        h = cell_step(kind, relu, select(gi, 0, t), h, c, w);
        out[static_cast<size_t>(t)] = h;
      }
      dir_out.push_back(stack(out, 0));
      h_n.push_back(h);
      if (c.defined()) c_n.push_back(c);
    }
    seq = dirs == 1 ? dir_out[0] : cat(dir_out, -1);
    if (ro_.dropout > 0.0 && is_training() && layer + 1 < ro_.num_layers) {
      seq = dropout(seq, ro_.dropout, true, ro_.dropout_generator);
    }
  }
  RecurrentOutput r;
  r.output = !batched ? squeeze(seq, 1) : ro_.batch_first ? transpose(seq, 0, 1) : seq;
  r.h_n = stack(h_n, 0);
  if (!c_n.empty()) r.c_n = stack(c_n, 0);
  if (!batched) {
    r.h_n = squeeze(r.h_n, 1);
    if (r.c_n.defined()) r.c_n = squeeze(r.c_n, 1);
  }
  return r;
}

// ---- cells --------------------------------------------------------------------------------------

RecurrentCellBase::RecurrentCellBase(std::string mode, int64_t input_size, int64_t hidden_size,
                                     bool bias, const ModuleOptions& opts)
    : mode_(std::move(mode)), input_size_(input_size), hidden_size_(hidden_size) {
  const char* op = mode_.c_str();
  DT_CHECK(input_size >= 0, "[%s] input_size must be >= 0, got %d", op, input_size);
  DT_CHECK(hidden_size > 0, "[%s] hidden_size must be greater than zero, got %d", op, hidden_size);
  const int64_t g = gates_of(kind_of(mode_)) * hidden_size;
  const double b = bound_of(hidden_size);
  register_parameter("weight_ih", detail::uniform_parameter({g, input_size}, b, opts));
  register_parameter("weight_hh", detail::uniform_parameter({g, hidden_size}, b, opts));
  if (bias) {
    register_parameter("bias_ih", detail::uniform_parameter({g}, b, opts));
    register_parameter("bias_hh", detail::uniform_parameter({g}, b, opts));
  }
}

void RecurrentCellBase::reset_own_parameters(Generator* gen) {
  redraw(*this, hidden_size_, gen);
}

DTensor RecurrentCellBase::forward(const DTensor& x) {
  return step(x, DTensor(), DTensor())[0];
}

std::vector<DTensor> RecurrentCellBase::step(const DTensor& x, const DTensor& h, const DTensor& c) {
  const std::string_view op = mode_;
  const Kind kind = kind_of(mode_);
  DT_CHECK(x.defined(), "[%s] input is undefined (expected a DTensor)", op);
  DT_CHECK(x.dim() == 1 || x.dim() == 2, "[%s] Expected input to be 1D or 2D, got %dD instead", op,
           x.dim());
  DT_CHECK(x.size(-1) == input_size_,
           "[%s] input.size(-1) must be equal to input_size. Expected %d, got %d", op, input_size_,
           x.size(-1));
  const bool batched = x.dim() == 2;
  check_layout(x, batched ? 0 : -1, op, "input");
  const DTensor xb = batched ? x : unsqueeze(x, 0);
  const int64_t batch = xb.size(0);
  const char* meaning = "batch, hidden_size";
  auto state_in = [&](const DTensor& s, std::string_view what) {
    if (!s.defined()) return zero_state(xb, 0, Shape{batch, hidden_size_}, 0);
    if (!batched) {
      check_state(s, Shape{hidden_size_}, -1, op, what, "hidden_size");
      return unsqueeze(s, 0);
    }
    check_state(s, Shape{batch, hidden_size_}, 0, op, what, meaning);
    return s;
  };
  const DeviceMesh& mesh = xb.device_mesh();
  const DTensor gi =
      linear(xb, param_on(*this, "weight_ih", mesh, op), param_on(*this, "bias_ih", mesh, op));
  const StepWeights w{param_on(*this, "weight_hh", mesh, op), param_on(*this, "bias_hh", mesh, op),
                      DTensor()};
  DTensor c1 = kind == Kind::kLSTM ? state_in(c, "c") : DTensor();
  DTensor h1 = cell_step(kind, nonlinearity_ == "relu", gi, state_in(h, "h"), c1, w);
  if (!batched) {
    h1 = squeeze(h1, 0);
    if (c1.defined()) c1 = squeeze(c1, 0);
  }
  return {h1, c1};
}

std::vector<DTensor> RecurrentCellBase::call_step(const DTensor& x, const DTensor& h,
                                                  const DTensor& c) {
  if (!has_hooks()) return step(x, h, c);
  std::vector<DTensor> out;
  const DTensor in[] = {x, h, c};
  DTensor h1 = call_with_hooks(absl::MakeConstSpan(in, kind_of(mode_) == Kind::kLSTM ? 3 : 2),
                               [&](absl::Span<const DTensor> a) {
                                 out = step(a[0], a[1], a.size() > 2 ? a[2] : c);
                                 return out[0];
                               });
  out[0] = std::move(h1);
  return out;
}

RNNCell::RNNCell(int64_t input_size, int64_t hidden_size, bool bias, std::string nonlinearity,
                 ModuleOptions opts)
    : RecurrentCellBase("RNNCell", input_size, hidden_size, bias, opts) {
  DT_CHECK(nonlinearity == "tanh" || nonlinearity == "relu",
           "[RNNCell] Unknown nonlinearity: %s. Select from 'tanh' or 'relu'.", nonlinearity);
  nonlinearity_ = std::move(nonlinearity);
}

DTensor RNNCell::forward_with_state(const DTensor& x, const DTensor& h) {
  return step(x, h, DTensor())[0];
}

LSTMCellState LSTMCell::forward_with_state(const DTensor& x, const DTensor& h, const DTensor& c) {
  std::vector<DTensor> s = step(x, h, c);
  return {s[0], s[1]};
}

DTensor GRUCell::forward_with_state(const DTensor& x, const DTensor& h) {
  return step(x, h, DTensor())[0];
}

}  // namespace dtensor::nn
