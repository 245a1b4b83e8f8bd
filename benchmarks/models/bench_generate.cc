// Greedy decode speed of models::generate with the KV cache (issue 43 item 7): a Llama read
// from a Hugging Face directory (the committed tiny checkpoint by default), tensor parallel over
// all ranks,
//
//   mpirun -np N bench_generate [--dir DIR] [--prompt 16] [--new 32] [--iters 5] [--warmup 1]
//                               [--json FILE]
//
// times greedy decode as decode_timing.h says (batch 1, float32): tokens/s counts decode steps
// only. bench_generate_torch.py times transformers' generate the same way on the same
// directory. The run fails unless both lengths give the same first token (the prefill's
// argmax) on every rank.
#include <algorithm>
#include <string>
#include <vector>

#include "benchmarks/common/bench_common.h"
#include "benchmarks/common/bench_util.h"
#include "benchmarks/models/decode_timing.h"
#include "dtensor/dtensor.h"

namespace dt = dtensor;
namespace bench = dtensor::bench;
namespace models = dtensor::models;

namespace {

int run(int argc, char** argv) {
  bench::Flags flags(argc, argv);
  const std::string dir = flags.str("dir", DTENSOR_TINY_LLAMA_DIR);
  const int64_t P = flags.i64("prompt", 16), N = flags.i64("new", 32);
  const int64_t iters = flags.i64("iters", 5), warmup = flags.i64("warmup", 1);
  const int world = dt::world_size();
  models::Llama model(models::LlamaConfig::from_hf_dir(dir));
  if (world > 1) {
    models::parallelize_llama(model, dt::init_device_mesh(dt::kCPU, {world}, {"tp"}));
  }
  dt::checkpoint::load_hf(model, dir);
  const int64_t vocab = model.config().vocab_size;
  std::vector<int64_t> ids(static_cast<size_t>(P));
  for (int64_t i = 0; i < P; ++i) ids[static_cast<size_t>(i)] = (i * 7 + 3) % vocab;
  const int64_t shape[] = {1, P};
  const dt::Tensor prompt = dt::from_vector<int64_t>(ids, shape);

  const bench::DecodeTiming d =
      bench::time_greedy_decode(model, prompt, N, warmup, iters, "bench_generate");
  const dt::Tensor& long_out = d.tokens;
  const double step = d.step_s;
  bench::print0(
      "# bench_generate: %s, prompt %lld, %lld decode steps, batch 1, float32, tp %d; median of "
      "%lld runs (max over ranks)\n",
      dir.c_str(), (long long)P, (long long)N, world, (long long)iters);
  bench::print0("prefill+1 %.3f ms  decode %.3f ms/token  %.1f tokens/s\n", d.prefill_s * 1e3,
                step * 1e3, 1.0 / step);
  std::string tokens;  // to compare with transformers' (bench_generate_torch.py prints its own)
  for (int64_t t : long_out.to_vector<int64_t>())
    tokens += (tokens.empty() ? "" : ", ") + std::to_string(t);
  bench::print0("tokens [%s]\n", tokens.c_str());
  bench::JsonLines json("bench_generate", flags.str("json", ""));
  json.write(d.add_to(json.record("greedy_decode").add("tp", world), P, N));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_main(argc, argv, run);
}
