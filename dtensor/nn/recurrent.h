// Recurrent layers as PyTorch 2.15 has them: RNNCell, LSTMCell, GRUCell and the multi-layer
// RNN, LSTM, GRU (options, defaults, parameter names, shapes and order, gate order and
// formulas PyTorch's, so a state_dict loads from / into PyTorch's by name).
//
// Composites of the DTensor ops (linear, sigmoid, tanh, relu, chunk, select, stack, cat,
// dropout): autograd and the DTensor layouts come from the ops. Per layer and direction the
// input projection of every time step is one linear over [L, B, H_in]; then a loop over time
// runs the hidden projection and the gates. Parameters enter as Replicate on the input's mesh
// (functional::on_mesh). The input may be sharded on the batch dim only (any mesh dim, uneven or
// empty shards included): every op then works row by row and the result is the unsharded run's
// up to rounding (a shard's local matmul may take another BLAS kernel than the full batch's:
// the last bits can differ; the parameter gradients arrive Partial and are summed). A time- or
// feature-sharded or Partial input is refused ("[LSTM] input is sharded on dim 2 ..."): the
// recurrence reads the whole feature vector of each step in order.
//
// Kept different from PyTorch: no PackedSequence (pad and mask instead), no cuDNN-fused path
// (the same math, op by op), dropout between layers draws from the DTensor RNG
// (dtensor/rng/dtensor_random.h), so the mask is not torch's for the same seed.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/nn/module.h"

namespace dtensor::nn {

// The options of RNN / LSTM / GRU after input_size and hidden_size, PyTorch's defaults.
// C++20 designated initializers read like PyTorch's keywords:
//   nn::LSTM lstm(10, 20, {.num_layers = 2, .bidirectional = true}, opts);
struct RecurrentOptions {
  int64_t num_layers = 1;
  std::string nonlinearity = "tanh";       // RNN only: "tanh" or "relu"
  bool bias = true;                        // bias_ih_l{k} and bias_hh_l{k}
  bool batch_first = false;                // input / output [B, L, H] instead of [L, B, H]
  double dropout = 0.0;                    // on each layer's output but the last, training only
  bool bidirectional = false;              // adds the _reverse parameters; output 2 * H_out wide
  int64_t proj_size = 0;                   // LSTM only: h projected to proj_size by weight_hr_l{k}
  Generator* dropout_generator = nullptr;  // nullptr: the input device's default generator
};

// What forward_with_state returns (PyTorch's (output, h_n) / (output, (h_n, c_n))): output
// [L, B, D * H_out] ([B, L, ...] when batch_first, [L, D * H_out] unbatched), h_n
// [D * num_layers, B, H_out], c_n [D * num_layers, B, hidden_size] (LSTM only; undefined
// otherwise). H_out is proj_size when > 0, else hidden_size.
struct RecurrentOutput {
  DTensor output;
  DTensor h_n;
  DTensor c_n;
};

// The common part of RNN, LSTM and GRU (PyTorch's RNNBase). Parameters per layer k and
// direction (suffix "" then "_reverse"): weight_ih_l{k} [G * H, H_in or D * H_out],
// weight_hh_l{k} [G * H, H_out], bias_ih_l{k} [G * H], bias_hh_l{k} [G * H], weight_hr_l{k}
// [proj_size, H] (LSTM with proj_size), G = 1 / 4 / 3, all uniform on [-1/sqrt(H), 1/sqrt(H)].
class RecurrentBase : public Module {
 public:
  std::string type_name() const override { return mode_; }
  // Module's one-input call: the output only, from a zero initial state.
  DTensor forward(const DTensor& x) override;
  // h0 [D * num_layers, B, H_out] ([D * num_layers, H_out] for an unbatched input) and, for
  // LSTM, c0 [D * num_layers, B, hidden_size]; an undefined h0 / c0 is zeros. PyTorch's forward
  // with a state: the module's hooks do not run (as the cells' forward_with_state); call
  // module(x, h0[, c0]) for them.
  RecurrentOutput forward_with_state(const DTensor& x, const DTensor& h0,
                                     const DTensor& c0 = DTensor());
  // PyTorch's module(x, h0) / lstm(x, (h0, c0)): forward_with_state through the module's hooks
  // (Module::call_with_hooks). The args hooks see (x, h0) for RNN and GRU, (x, h0, c0) for LSTM
  // (PyTorch's nested (h0, c0) flattened); an undefined state is passed as it is (zeros). The
  // forward hooks see and may replace output; h_n and c_n come back beside it (PyTorch's hooks
  // see the tuple). A one-input hook raises at this call; module(x) runs forward(x). The cells'
  // operator()(x, h[, c]) alike: args (x, h) or (x, h, c), the forward hooks see h'.
  using Module::operator();
  RecurrentOutput operator()(const DTensor& x, const DTensor& h0, const DTensor& c0 = DTensor());
  int64_t input_size() const { return input_size_; }
  int64_t hidden_size() const { return hidden_size_; }
  const RecurrentOptions& options() const { return ro_; }

 protected:
  RecurrentBase(std::string mode, int64_t input_size, int64_t hidden_size, RecurrentOptions ro,
                const ModuleOptions& opts);
  void reset_own_parameters(Generator* gen) override;

 private:
  std::string mode_;  // "RNN", "LSTM", "GRU"
  int64_t input_size_;
  int64_t hidden_size_;
  RecurrentOptions ro_;
};

// h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (relu with nonlinearity "relu").
class RNN : public RecurrentBase {
 public:
  RNN(int64_t input_size, int64_t hidden_size, RecurrentOptions ro = {}, ModuleOptions opts = {})
      : RecurrentBase("RNN", input_size, hidden_size, std::move(ro), opts) {}
};

// Gates i, f, g, o (in that order in the weights): c_t = f * c_{t-1} + i * g,
// h_t = o * tanh(c_t), then h_t W_hr^T with proj_size.
class LSTM : public RecurrentBase {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, RecurrentOptions ro = {}, ModuleOptions opts = {})
      : RecurrentBase("LSTM", input_size, hidden_size, std::move(ro), opts) {}
};

// Gates r, z, n: n = tanh(W_in x + b_in + r * (W_hn h + b_hn)), h_t = (1 - z) * n + z * h.
class GRU : public RecurrentBase {
 public:
  GRU(int64_t input_size, int64_t hidden_size, RecurrentOptions ro = {}, ModuleOptions opts = {})
      : RecurrentBase("GRU", input_size, hidden_size, std::move(ro), opts) {}
};

// One time step (PyTorch's RNNCellBase): weight_ih [G * H, input_size], weight_hh [G * H, H],
// bias_ih, bias_hh [G * H], uniform on [-1/sqrt(H), 1/sqrt(H)]. Input [B, input_size] or
// unbatched [input_size]; state [B, H] or [H]. forward(x) starts from zeros and returns h'.
class RecurrentCellBase : public Module {
 public:
  std::string type_name() const override { return mode_; }
  DTensor forward(const DTensor& x) override;
  int64_t input_size() const { return input_size_; }
  int64_t hidden_size() const { return hidden_size_; }

 protected:
  RecurrentCellBase(std::string mode, int64_t input_size, int64_t hidden_size, bool bias,
                    const ModuleOptions& opts);
  void reset_own_parameters(Generator* gen) override;
  // h' (and c' for LSTMCell) from x, h, c (undefined: zeros).
  std::vector<DTensor> step(const DTensor& x, const DTensor& h, const DTensor& c);
  // step through the module's hooks: args (x, h), or (x, h, c) for LSTMCell; the hooks' output
  // is h'.
  std::vector<DTensor> call_step(const DTensor& x, const DTensor& h, const DTensor& c);
  std::string nonlinearity_ = "tanh";

 private:
  std::string mode_;  // "RNNCell", "LSTMCell", "GRUCell"
  int64_t input_size_;
  int64_t hidden_size_;
};

class RNNCell : public RecurrentCellBase {
 public:
  RNNCell(int64_t input_size, int64_t hidden_size, bool bias = true,
          std::string nonlinearity = "tanh", ModuleOptions opts = {});
  // h' from x and h (undefined: zeros).
  DTensor forward_with_state(const DTensor& x, const DTensor& h);
  // forward_with_state through the hooks (RecurrentBase::operator()).
  using Module::operator();
  DTensor operator()(const DTensor& x, const DTensor& h) { return call_step(x, h, DTensor())[0]; }
};

// What LSTMCell::forward_with_state returns (PyTorch's (h_1, c_1)).
struct LSTMCellState {
  DTensor h;
  DTensor c;
};

class LSTMCell : public RecurrentCellBase {
 public:
  LSTMCell(int64_t input_size, int64_t hidden_size, bool bias = true, ModuleOptions opts = {})
      : RecurrentCellBase("LSTMCell", input_size, hidden_size, bias, opts) {}
  // (h', c') from x, h and c (undefined: zeros).
  LSTMCellState forward_with_state(const DTensor& x, const DTensor& h, const DTensor& c);
  using Module::operator();
  LSTMCellState operator()(const DTensor& x, const DTensor& h, const DTensor& c) {
    std::vector<DTensor> s = call_step(x, h, c);
    return {s[0], s[1]};
  }
};

class GRUCell : public RecurrentCellBase {
 public:
  GRUCell(int64_t input_size, int64_t hidden_size, bool bias = true, ModuleOptions opts = {})
      : RecurrentCellBase("GRUCell", input_size, hidden_size, bias, opts) {}
  DTensor forward_with_state(const DTensor& x, const DTensor& h);
  using Module::operator();
  DTensor operator()(const DTensor& x, const DTensor& h) { return call_step(x, h, DTensor())[0]; }
};

}  // namespace dtensor::nn
