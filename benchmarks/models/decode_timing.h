// Greedy decode speed of models::generate with the KV cache, as bench_generate and bench_llama
// time it (issue 43 item 7): generate(max_new_tokens = 1) (the prompt's prefill and one token)
// and generate(1 + new), interleaved; a decode step is their difference over `new`, so
// tokens/s counts decode steps only. bench_*_torch.py time transformers' generate the same way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "benchmarks/common/bench_common.h"
#include "dtensor/dtensor.h"

namespace dtensor::bench {

struct DecodeTiming {
  double prefill_s = 0;  // median of generate(max_new_tokens = 1)
  double step_s = 0;     // one decode step
  Tensor tokens;         // the long run's output [B, P + 1 + new]

  // The figures of a "greedy_decode" JSON record (prompt length, new tokens, times).
  JsonLines::Record& add_to(JsonLines::Record& r, int64_t prompt_len, int64_t n_new) const {
    return r.add("prompt", prompt_len)
        .add("new_tokens", n_new)
        .add("prefill_ms", prefill_s * 1e3)
        .add("decode_ms_per_token", step_s * 1e3)
        .add("tokens_per_s", 1.0 / step_s);
  }
};

// Times the two runs on `prompt` [B, P] (every rank the same prompt; eos ids left empty, so no
// run stops early). Throws "[<bench>] ..." unless both runs agree on the prompt's next token.
inline DecodeTiming time_greedy_decode(models::Llama& model, const Tensor& prompt, int64_t n_new,
                                       int64_t warmup, int64_t iters, const std::string& bench) {
  models::GenerateOptions one, many;
  one.max_new_tokens = 1;
  many.max_new_tokens = 1 + n_new;
  Tensor short_out, long_out;
  const std::vector<Stats> st =
      time_interleaved({[&] { short_out = models::generate(model, prompt, one); },
                        [&] { long_out = models::generate(model, prompt, many); }},
                       warmup, iters, /*comm_world=*/true);
  const int64_t P = prompt.size(1);
  DT_CHECK(long_out.size(1) == P + 1 + n_new &&
               long_out.narrow(1, 0, P + 1).contiguous().to_vector<int64_t>() ==
                   short_out.contiguous().to_vector<int64_t>(),
           "[%s] the two generate runs disagree on the prompt's next token", bench);
  return {st[0].median, (st[1].median - st[0].median) / static_cast<double>(n_new), long_out};
}

}  // namespace dtensor::bench
