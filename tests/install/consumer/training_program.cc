// The README's training snippet, as a program: a small transformer parallelized over every
// rank (the Megatron plan, loss parallel) learns to copy its input tokens. Every line of the
// README's snippet appears here as written (tests/install/build_consumer.sh checks it); exits 1
// unless the loss falls.
#include <dtensor/dtensor.h>

#include <cstdint>
#include <cstdio>
namespace dt = dtensor;

int main(int argc, char** argv) {
  dt::Runtime rt(&argc, &argv);
  const int64_t vocab = 16, batch = 8, seq = 8;
  const int steps = 30;
  dt::nn::TransformerConfig cfg;
  cfg.vocab_size = vocab;
  cfg.dim = 32;
  cfg.n_layers = 1;
  cfg.n_heads = 4;
  cfg.max_seq_len = seq;
  dt::manual_seed(1234);  // the same weights everywhere
  dt::nn::Transformer model(cfg);
  auto mesh = dt::init_device_mesh(dt::kCPU, {dt::world_size()}, {"tp"});
  const dt::ParallelizePlan plan = dt::transformer_tp_plan({.loss_parallel = true});
  const dt::Tensor tokens = dt::randint(0, vocab, {batch, seq});  // the same batch everywhere
  const dt::DTensor targets =                                     // copy task: targets = inputs
      dt::DTensor::from_local(tokens.reshape({batch * seq}), mesh, {dt::Replicate()});
  double first = 0.0, last = 0.0;

  dt::parallelize_module(model, mesh, plan);  // Colwise/RowwiseParallel
  dt::optim::AdamW opt(model.parameters(), dt::optim::AdamWOptions(3e-3));
  for (int step = 0; step < steps; ++step) {
    opt.zero_grad();
    dt::DTensor out = model(dt::nn::local_dtensor(tokens));  // [B, S, V]
    dt::DTensor logits = dt::reshape(out, {-1, vocab});      // [B * S, V]
    dt::DTensor loss = dt::cross_entropy(logits, targets);   // targets [B * S]
    loss.backward();  // grads keep each parameter's placements
    opt.step();
    last = loss.full_tensor().item<float>();
    if (step == 0) first = last;
  }
  if (dt::world_rank() == 0) std::printf("training: loss %.4f -> %.4f\n", first, last);
  return last < 0.8 * first ? 0 : 1;
}
