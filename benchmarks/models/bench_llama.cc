// The Llama's speed beside transformers' LlamaForCausalLM (issue 43 item 7): forward (no grad),
// forward + backward (HF's causal LM loss) and greedy decode with the KV cache, tensor parallel
// over all ranks (one thread per rank: run with OPENBLAS_NUM_THREADS=1),
//
//   mpirun -np N bench_llama [--config tiny|medium] [--dir DIR] [--batch B] [--seq S]
//                            [--prompt 16] [--new 64] [--iters 10] [--warmup 2]
//                            [--decode 1] [--json FILE]
//
// tiny: the committed checkpoint (tests/data/tiny_llama, read with load_hf), batch 2 x 12 tokens
// by default (the reference batch's shape). medium: a Llama-shaped config large enough that the
// GEMMs matter (hidden 512, 4 layers, 8 heads, 4 kv heads, intermediate 1408, vocab 1024), seeded
// random weights, batch 2 x 64 by default. bench_llama_torch.py builds the same configs and
// inputs and prints the same rows, so the two are compared row by row.
// Rows: "forward" and "forward+backward" (ms, median over --iters, interleaved; max over ranks),
// and at --decode 1 "decode" (batch 1) as bench_generate times it (decode_timing.h).
// The run fails unless the loss is finite and both generate runs agree on the first token.
#include <cmath>
#include <string>
#include <vector>

#include "benchmarks/common/bench_common.h"
#include "benchmarks/common/bench_util.h"
#include "benchmarks/models/decode_timing.h"
#include "dtensor/dtensor.h"

namespace dt = dtensor;
namespace bench = dtensor::bench;
namespace models = dtensor::models;
namespace nn = dtensor::nn;

namespace {

// The random-weight config the Python side builds alike (bench_llama_torch.py MEDIUM).
models::LlamaConfig medium_config() {
  models::LlamaConfig c;
  c.vocab_size = 1024;
  c.hidden_size = 512;
  c.intermediate_size = 1408;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 4;
  c.head_dim = 64;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000.0;
  c.max_position_embeddings = 256;
  return c;
}

// [rows, cols] int64 ids (i * 7 + 3) % vocab over the flattened index, as the Python side.
dt::Tensor pattern_ids(int64_t rows, int64_t cols, int64_t vocab) {
  std::vector<int64_t> ids(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = (static_cast<int64_t>(i) * 7 + 3) % vocab;
  const int64_t shape[] = {rows, cols};
  return dt::from_vector<int64_t>(ids, shape);
}

int run(int argc, char** argv) {
  bench::Flags flags(argc, argv);
  const std::string config = flags.str("config", "tiny");
  DT_CHECK(config == "tiny" || config == "medium",
           "[bench_llama] --config %s: expected tiny or medium", config);
  const bool tiny = config == "tiny";
  const std::string dir = flags.str("dir", DTENSOR_TINY_LLAMA_DIR);
  const int64_t B = flags.i64("batch", 2), S = flags.i64("seq", tiny ? 12 : 64);
  const int64_t P = flags.i64("prompt", 16), N = flags.i64("new", 64);
  const int64_t iters = flags.i64("iters", 10), warmup = flags.i64("warmup", 2);
  const bool decode = flags.i64("decode", 1) != 0;
  const int world = dt::world_size();

  dt::manual_seed(1234);
  models::Llama model(tiny ? models::LlamaConfig::from_hf_dir(dir) : medium_config());
  if (world > 1) {
    models::parallelize_llama(model, dt::init_device_mesh(dt::kCPU, {world}, {"tp"}));
  }
  if (tiny) dt::checkpoint::load_hf(model, dir);
  const int64_t vocab = model.config().vocab_size;
  const dt::DTensor ids = nn::local_dtensor(pattern_ids(B, S, vocab));

  float loss_value = 0;
  const std::vector<bench::Stats> st =
      bench::time_interleaved({[&] {
                                 dt::autograd::NoGradGuard no_grad;
                                 (void)model(ids);
                               },
                               [&] {
                                 model.zero_grad();
                                 const dt::DTensor loss = models::causal_lm_loss(model(ids), ids);
                                 loss.backward();
                                 loss_value = loss.full_tensor().item<float>();
                               }},
                              warmup, iters, /*comm_world=*/true);
  DT_CHECK(std::isfinite(loss_value), "[bench_llama] the loss is not finite");

  bench::print0(
      "# bench_llama %s: %s, float32, tp %d, 1 thread per rank; median of %lld runs "
      "(max over ranks); %s\n",
      config.c_str(), tiny ? dir.c_str() : "random weights", world, (long long)iters,
      dt::config_str().c_str());
  bench::print0("forward            batch %lld x %lld  %9.3f ms\n", (long long)B, (long long)S,
                st[0].median * 1e3);
  bench::print0("forward+backward   batch %lld x %lld  %9.3f ms  (loss %.4f)\n", (long long)B,
                (long long)S, st[1].median * 1e3, loss_value);
  bench::JsonLines json("bench_llama", flags.str("json", ""));
  for (int i = 0; i < 2; ++i) {
    json.write(json.record(i == 0 ? "forward" : "forward_backward")
                   .add("config", config)
                   .add("tp", world)
                   .add("batch", B)
                   .add("seq", S)
                   .add_stats("", st[static_cast<size_t>(i)]));
  }
  if (!decode) return 0;

  const bench::DecodeTiming d =
      bench::time_greedy_decode(model, pattern_ids(1, P, vocab), N, warmup, iters, "bench_llama");
  const double step = d.step_s;
  bench::print0(
      "decode             prompt %lld, %lld new  %9.3f ms/token  %.1f tokens/s "
      "(prefill+1 %.3f ms)\n",
      (long long)P, (long long)N, step * 1e3, 1.0 / step, d.prefill_s * 1e3);
  json.write(d.add_to(json.record("greedy_decode").add("config", config).add("tp", world), P, N));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_main(argc, argv, run);
}
