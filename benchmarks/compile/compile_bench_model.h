// The model the compile benchmarks train (bench_compile, bench_compile_cuda_graph): the main
// example's tensor-parallel transformer with AdamW, built on `device` from seed 5, its step
// zero_grad, forward, cross_entropy (loss parallel), backward, update.
#pragma once

#include <vector>

#include "benchmarks/common/bench_common.h"
#include "dtensor/dtensor.h"

namespace dtensor::bench {

struct CompileBenchModel {
  nn::Transformer model;
  optim::AdamW opt;
  // The loss from device-side ops on one-hot targets (the batch's third input) instead of
  // cross_entropy, whose CUDA path reads the loss sum on the host (a CUDA graph cannot capture
  // that): log_softmax, the product with the one-hot targets, sum, mean.
  bool onehot_loss;
  CompileBenchModel(const nn::TransformerConfig& cfg, const DeviceMesh& mesh,
                    Device device = Device(), bool onehot = false)
      : model((manual_seed(5), cfg), nn::ModuleOptions{.device = device}),
        opt(params(model, mesh), optim::AdamWOptions(1e-3)),
        onehot_loss(onehot) {}

  static std::vector<DTensor> params(nn::Transformer& m, const DeviceMesh& mesh) {
    parallelize_module(m, mesh, transformer_tp_plan({.loss_parallel = true}));
    return m.parameters();
  }

  DTensorList step(const DTensorList& in) {
    opt.zero_grad();
    const DTensor logits = model(in[0]);
    const int64_t rows[] = {-1, logits.size(-1)};
    const DTensor flat = reshape(logits, rows);
    const int64_t classes[] = {-1};
    const DTensor loss = onehot_loss ? neg(mean(sum(mul(log_softmax(flat, -1), in[2]), classes)))
                                     : cross_entropy(flat, in[1]);
    loss.backward();
    opt.step();
    return {loss.detach()};
  }
};

// The model's size from the flags (defaults: the main example's small model): --dim 64
// --layers 2 --heads 4 --vocab 16 --seq 15 (max_seq_len = seq + 1), RMSNorm, SwiGLU.
inline nn::TransformerConfig compile_bench_config(const Flags& flags) {
  nn::TransformerConfig cfg;
  cfg.dim = flags.i64("dim", 64);
  cfg.n_layers = flags.i64("layers", 2);
  cfg.n_heads = flags.i64("heads", 4);
  cfg.vocab_size = flags.i64("vocab", 16);
  cfg.max_seq_len = flags.i64("seq", 15) + 1;
  cfg.norm = nn::NormKind::kRMSNorm;
  cfg.mlp = nn::MLPKind::kSwiGLU;
  return cfg;
}

// The batch both benchmarks train on: tokens [batch, seq] (a local DTensor) and targets
// [batch * seq] (Replicate on `mesh`), drawn from Generator(17), on `device`; with `onehot`,
// the targets one-hot too ([batch * seq, vocab] float, Replicate).
inline DTensorList compile_bench_batch(const nn::TransformerConfig& cfg, int64_t batch,
                                       const DeviceMesh& mesh, Device device = Device(),
                                       bool onehot = false) {
  const int64_t seq = cfg.max_seq_len - 1;
  Generator gen(17);
  const Tensor tokens = randint(0, cfg.vocab_size, {batch, seq}, TensorOptions(kInt64), &gen);
  const Tensor targets = randint(0, cfg.vocab_size, {batch * seq}, TensorOptions(kInt64), &gen);
  DTensorList in = {nn::local_dtensor(tokens.to(device)),
                    DTensor::from_local(targets.to(device), mesh, {Replicate()})};
  if (onehot) {
    Tensor hot = zeros({batch * seq, cfg.vocab_size});
    for (int64_t r = 0; r < batch * seq; ++r) {
      hot.data<float>()[r * cfg.vocab_size + targets.data<int64_t>()[r]] = 1;
    }
    in.push_back(DTensor::from_local(hot.to(device), mesh, {Replicate()}));
  }
  return in;
}

}  // namespace dtensor::bench
