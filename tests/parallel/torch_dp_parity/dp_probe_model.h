// The model and batches of the data-parallel probe (probe.cc, probe.py's Net and batch(): the
// same formulas) and of test_data_parallel_mpi's PyTorch-parity case.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/nn/functional.h"
#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/tensor/creation.h"

namespace dp_probe {
namespace dt = dtensor;
namespace nn = dtensor::nn;
using dt::DTensor;

constexpr int64_t V = 7, D = 4, H = 5, T = 3, ROWS = 4;

// The probe.py model: h = tanh(fc1(ln(emb(tok)))); h = frozen(h); on even steps
// h = h + extra(h); logits = h @ emb.weight^T (head: tied to emb.weight).
class Net : public dtensor::nn::Module {
 public:
  explicit Net(dt::DType dtype) {
    const nn::ModuleOptions o{.dtype = dtype};
    emb_ = register_module("emb", std::make_shared<nn::Embedding>(V, D, o));
    ln_ = register_module("ln", std::make_shared<nn::LayerNorm>(D, 1e-5, true, o));
    fc1_ = register_module("fc1", std::make_shared<nn::Linear>(D, H, true, o));
    frozen_ = register_module("frozen", std::make_shared<nn::Linear>(H, D, true, o));
    extra_ = register_module("extra", std::make_shared<nn::Linear>(D, D, false, o));
    int k = 0;
    for (auto& [name, p] : named_parameters()) {
      std::vector<double> v(static_cast<size_t>(p.numel()));
      for (size_t i = 0; i < v.size(); ++i) v[i] = 0.3 * std::sin(0.37 * i + 1.1 * k + 0.2);
      const auto dot = name.rfind('.');
      get_submodule(name.substr(0, dot))
          .set_parameter(name.substr(dot + 1),
                         nn::local_dtensor(dt::cast(dt::from_vector(v, p.shape()), dtype)));
      ++k;
    }
    head_ = register_module("head", std::make_shared<Head>(emb_->param("weight")));
    for (auto* m : {frozen_.get()})
      for (auto& [n, p] : m->named_parameters()) p.requires_grad_(false);
  }
  std::string type_name() const override { return "Net"; }
  DTensor forward(const DTensor& tok) override {
    DTensor h = dt::tanh((*fc1_)((*ln_)((*emb_)(tok))));
    h = (*frozen_)(h);
    if (step % 2 == 0) h = dt::add(h, (*extra_)(h));
    return (*head_)(h);
  }
  int step = 0;

 private:
  class Head : public nn::Module {
   public:
    explicit Head(const DTensor& w) { tie_parameter("weight", w); }
    std::string type_name() const override { return "Head"; }
    DTensor forward(const DTensor& x) override {
      return dt::linear(x, nn::functional::on_mesh(param("weight"), x.device_mesh()));
    }
  };
  nn::ModulePtr emb_, ln_, fc1_, frozen_, extra_, head_;
};

// Rank r of w ranks' rows (ROWS / w of them) of micro-batch `micro` of step `step`: tokens
// [rows, T] and flattened targets.
inline std::pair<dt::Tensor, dt::Tensor> batch(int step, int micro, int64_t r, int64_t w) {
  std::vector<int64_t> tok, tgt;
  const int64_t per = ROWS / w;
  for (int64_t b = r * per; b < (r + 1) * per; ++b)
    for (int64_t t = 0; t < T; ++t) {
      tok.push_back((b * 3 + t * 5 + step + 2 * micro) % V);
      tgt.push_back((b * 2 + t + 3 * step + micro) % V);
    }
  return {dt::from_vector(tok, {per, T}), dt::from_vector(tgt, {per * T})};
}

}  // namespace dp_probe
