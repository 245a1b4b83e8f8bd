// The generation loop over a step function, and transformers' sampling warpers (generate.h).
// Token choice runs on the host in float64 over each row's last logits: B rows of one vocab
// per step are small next to the model's forward, and plain loops make the warpers' order and
// tie rules exact.
#include "dtensor/models/generate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "dtensor/autograd/grad_mode.h"
#include "dtensor/core/distributed_tensor.h"
#include "dtensor/models/kv_cache.h"
#include "dtensor/models/llama.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/rng/generator.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/shape_ops.h"

namespace dtensor::models {
namespace {

constexpr const char* kOp = "generate";
constexpr double kInf = std::numeric_limits<double>::infinity();

void check_options(const GenerateOptions& o) {
  DT_CHECK(o.max_new_tokens >= 0, "[%s] max_new_tokens %d, expected >= 0", kOp, o.max_new_tokens);
  if (o.do_sample) {
    DT_CHECK(std::isfinite(o.temperature) && o.temperature > 0,
             "[%s] temperature %g, expected a finite value > 0", kOp, o.temperature);
    DT_CHECK(o.top_k >= 0, "[%s] top_k %d, expected >= 0 (0: off)", kOp, o.top_k);
    DT_CHECK(o.top_p > 0 && o.top_p <= 1, "[%s] top_p %g, expected in (0, 1]", kOp, o.top_p);
  }
  for (int64_t id : o.eos_token_id) {
    DT_CHECK(id >= 0, "[%s] eos_token_id %d, expected >= 0", kOp, id);
  }
  DT_CHECK(!o.pad_token_id || *o.pad_token_id >= 0, "[%s] pad_token_id %d, expected >= 0", kOp,
           o.pad_token_id.value_or(0));
}

// The prompt's rows as int64 values [B * P], checked.
std::vector<int64_t> prompt_values(const Tensor& prompt) {
  DT_CHECK(prompt.defined() && prompt.dim() == 2 && prompt.dtype() == kInt64 &&
               prompt.size(0) > 0 && prompt.size(1) > 0,
           "[%s] prompt_ids must be int64 [batch, prompt_len] with both > 0, got %s %s", kOp,
           prompt.defined() ? dtype_name(prompt.dtype()) : "undefined",
           prompt.defined() ? shape_str(prompt.sizes()) : "[]");
  return prompt.contiguous().to(Device(kCPU)).to_vector<int64_t>();
}

// The attention mask as int64 [B, P] of 0 / 1 with each row's zeros first (left padding) and
// at least one 1; undefined stays undefined.
Tensor checked_mask(const Tensor& mask, int64_t B, int64_t P) {
  if (!mask.defined()) return mask;
  DT_CHECK(mask.dim() == 2 && mask.size(0) == B && mask.size(1) == P &&
               (mask.dtype() == kInt64 || mask.dtype() == kBool),
           "[%s] attention_mask is %s %s, expected int64 or bool [%d, %d] (the prompt's shape)",
           kOp, dtype_name(mask.dtype()), shape_str(mask.sizes()), B, P);
  const Tensor m = mask.to(Device(kCPU)).to(kInt64).contiguous();
  const std::vector<int64_t> v = m.to_vector<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    bool seen_token = false;
    for (int64_t j = 0; j < P; ++j) {
      const int64_t x = v[static_cast<size_t>(b * P + j)];
      DT_CHECK(x == 0 || x == 1, "[%s] attention_mask[%d, %d] is %d, expected 0 or 1", kOp, b, j,
               x);
      DT_CHECK(x == 1 || !seen_token,
               "[%s] attention_mask row %d has padding after a prompt token: prompts must be "
               "left-padded (padding first, as transformers' generate expects)",
               kOp, b);
      seen_token = seen_token || x == 1;
    }
    DT_CHECK(seen_token, "[%s] attention_mask row %d has no prompt token", kOp, b);
  }
  return m;
}

// The last position's logits of a step's output ([B, S, V] or [B, V]) as float64 [B * V].
std::vector<double> last_logits(const Tensor& logits, int64_t B, int64_t& vocab) {
  DT_CHECK(logits.defined() && (logits.dim() == 3 || logits.dim() == 2) && logits.size(0) == B &&
               logits.size(-1) > 0 && (logits.dim() == 2 || logits.size(1) > 0) &&
               is_floating(logits.dtype()),
           "[%s] the step returned logits %s, expected floating [%d, S, vocab] or [%d, vocab]", kOp,
           logits.defined() ? shape_str(logits.sizes()) : "undefined", B, B);
  DT_CHECK(vocab < 0 || logits.size(-1) == vocab,
           "[%s] the step returned logits over %d tokens, earlier %d", kOp, logits.size(-1), vocab);
  vocab = logits.size(-1);
  Tensor last = logits.dim() == 3 ? logits.select(1, logits.size(1) - 1) : logits;
  std::vector<double> v = last.to(Device(kCPU)).to(kFloat64).contiguous().to_vector<double>();
  for (size_t i = 0; i < v.size(); ++i) {
    DT_CHECK(!std::isnan(v[i]), "[%s] the logits of row %d hold NaN", kOp,
             static_cast<int64_t>(i) / vocab);
  }
  return v;
}

// The argmax of row [x, x + n), the first on ties (torch.argmax).
int64_t argmax(const double* x, int64_t n) {
  return std::max_element(x, x + n) - x;
}

// transformers' warpers on one row of scores (in place; removed tokens -inf), then softmax.
void warp_to_probs(double* s, int64_t n, const GenerateOptions& o) {
  for (int64_t i = 0; i < n; ++i) s[i] /= o.temperature;
  if (o.top_k > 0 && o.top_k < n) {
    // TopKLogitsWarper: scores below the k-th largest are removed (ties with it kept).
    std::vector<double> sorted(s, s + n);
    std::nth_element(sorted.begin(), sorted.begin() + (o.top_k - 1), sorted.end(),
                     std::greater<double>());
    const double kth = sorted[static_cast<size_t>(o.top_k - 1)];
    for (int64_t i = 0; i < n; ++i) {
      if (s[i] < kth) s[i] = -kInf;
    }
  }
  const auto softmax = [n](double* x) {
    const double m = *std::max_element(x, x + n);
    double total = 0;
    for (int64_t i = 0; i < n; ++i) total += (x[i] = std::exp(x[i] - m));
    for (int64_t i = 0; i < n; ++i) x[i] /= total;
  };
  if (o.top_p < 1) {
    // TopPLogitsWarper: ascending order, cumulative probabilities; tokens whose cumulative
    // mass is <= 1 - top_p are removed, the highest token always kept.
    std::vector<double> p(s, s + n);
    softmax(p.data());
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return s[a] < s[b]; });
    double cum = 0;
    for (int64_t r = 0; r + 1 < n; ++r) {
      const int64_t i = order[static_cast<size_t>(r)];
      cum += p[static_cast<size_t>(i)];
      if (cum <= 1 - o.top_p) s[i] = -kInf;
    }
  }
  softmax(s);
}

// The first token whose cumulative probability passes u (inverse CDF); the last token with
// mass when rounding leaves u beyond the total.
int64_t draw(const double* p, int64_t n, double u) {
  double cum = 0;
  int64_t last = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (p[i] <= 0) continue;
    cum += p[i];
    last = i;
    if (u < cum) return i;
  }
  return last;
}

// The largest `x` over the ranks of `mesh` (each rank's value gathered, then the max on the host).
int64_t mesh_max(int64_t x, const DeviceMesh& mesh) {
  const int64_t one[] = {1};
  const Placements shards(static_cast<size_t>(mesh.ndim()), Shard(0));
  const std::vector<int64_t> all = DTensor::from_local(from_vector<int64_t>({x}, one), mesh, shards)
                                       .full_tensor()
                                       .to_vector<int64_t>();
  return *std::max_element(all.begin(), all.end());
}

// The loop of both generate()s. `synced` (transformers' synced_gpus): the ranks of this mesh run
// the model's forwards together (FSDP's all-gathers over dp, where each rank has its own rows),
// so none may leave the loop alone: a rank whose rows are all finished (or that reached its own
// max_new_tokens) keeps stepping with pad tokens, adding none to its rows, until every rank of
// the mesh is done, which one gather per step tells them. `steps`: the most steps any rank
// runs (max_new_tokens, agreed over `synced`).
Tensor generate_loop(const StepFn& step, const Tensor& prompt_ids, const GenerateOptions& o,
                     const DeviceMesh* synced, int64_t steps) {
  std::vector<int64_t> prompt = prompt_values(prompt_ids);
  const int64_t B = prompt_ids.size(0), P = prompt_ids.size(1);
  Tensor mask = checked_mask(o.attention_mask, B, P);
  // Finished rows exist only when an eos id is set, so pad always has a value when used.
  const int64_t pad = o.pad_token_id.value_or(o.eos_token_id.empty() ? 0 : o.eos_token_id.front());
  Generator seeded(o.seed.value_or(kDefaultRngSeed));
  Generator* gen = o.seed ? &seeded : o.generator;  // null: the default generator

  // Tokens so far, [B][P + t], and whether each row has finished.
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    rows[b].assign(prompt.begin() + b * P, prompt.begin() + (b + 1) * P);
  }
  std::vector<bool> finished(static_cast<size_t>(B), false);
  bool done = o.max_new_tokens == 0;  // this rank adds no more tokens
  int64_t vocab = -1;
  Tensor input = prompt_ids.to(Device(kCPU)).contiguous();
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<double> scores = last_logits(step(input, mask), B, vocab);
    std::vector<double> u;
    if (o.do_sample) {
      // One draw per row per step, also for finished rows, so a row's draws do not depend on
      // when the others finish.
      u = rand({B}, TensorOptions(kFloat64), gen).to_vector<double>();
    }
    std::vector<int64_t> next(static_cast<size_t>(B), pad);
    for (int64_t b = 0; b < B && !done; ++b) {
      double* row = scores.data() + b * vocab;
      if (o.do_sample) {
        warp_to_probs(row, vocab, o);
        next[b] = draw(row, vocab, u[b]);
      } else {
        next[b] = argmax(row, vocab);
      }
      if (finished[b]) next[b] = pad;
      rows[b].push_back(next[b]);
      if (std::find(o.eos_token_id.begin(), o.eos_token_id.end(), next[b]) !=
          o.eos_token_id.end()) {
        finished[b] = true;
      }
    }
    done = done || t + 1 >= o.max_new_tokens ||
           std::all_of(finished.begin(), finished.end(), [](bool f) { return f; });
    const bool all_done = synced != nullptr ? mesh_max(done ? 0 : 1, *synced) == 0 : done;
    if (all_done || t + 1 == steps) break;
    const int64_t one[] = {B, 1};
    input = from_vector<int64_t>(next, one);
    if (mask.defined()) mask = cat({mask, ones(one, TensorOptions(kInt64))}, 1);
  }
  const int64_t len = static_cast<int64_t>(rows[0].size());
  std::vector<int64_t> flat;
  flat.reserve(static_cast<size_t>(B * len));
  for (const std::vector<int64_t>& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  const int64_t shape[] = {B, len};
  return from_vector<int64_t>(flat, shape);
}

}  // namespace

Tensor sampling_probs(const Tensor& logits, const GenerateOptions& options) {
  GenerateOptions o = options;
  o.do_sample = true;
  check_options(o);
  DT_CHECK(
      logits.defined() && logits.dim() == 2 && logits.size(1) > 0 && is_floating(logits.dtype()),
      "[sampling_probs] logits must be floating [batch, vocab], got %s",
      logits.defined() ? shape_str(logits.sizes()) : "undefined");
  const int64_t B = logits.size(0), V = logits.size(1);
  std::vector<double> v = logits.to(Device(kCPU)).to(kFloat64).contiguous().to_vector<double>();
  for (int64_t b = 0; b < B; ++b) warp_to_probs(v.data() + b * V, V, o);
  const int64_t shape[] = {B, V};
  return from_vector<double>(v, shape);
}

Tensor generate(const StepFn& step, const Tensor& prompt_ids, const GenerateOptions& o) {
  check_options(o);
  return generate_loop(step, prompt_ids, o, nullptr, o.max_new_tokens);
}

Tensor generate(Llama& model, const Tensor& prompt_ids, const GenerateOptions& options) {
  check_options(options);
  prompt_values(prompt_ids);  // checked before its sizes are read
  autograd::NoGradGuard no_grad;
  // Ranks that share the model's forward collectives (its parameters' mesh: tensor parallel's
  // and FSDP's) step together (synced_gpus, generate_loop), up to the largest max_new_tokens.
  const std::vector<DTensor> params = model.parameters();
  const DeviceMesh* synced = !params.empty() && params.front().device_mesh().size() > 1
                                 ? &params.front().device_mesh()
                                 : nullptr;
  const int64_t steps =
      synced != nullptr ? mesh_max(options.max_new_tokens, *synced) : options.max_new_tokens;
  KVCache cache = model.make_cache(prompt_ids.size(0), prompt_ids.size(1) + steps);
  const StepFn step = [&](const Tensor& ids, const Tensor& mask) {
    const DTensor logits =
        model.forward(local_dtensor(ids), &cache, mask.defined() ? local_dtensor(mask) : DTensor());
    // Only the last position chooses the next token.
    return narrow(logits, 1, logits.size(1) - 1, 1).full_tensor();
  };
  return generate_loop(step, prompt_ids, options, synced, steps);
}

}  // namespace dtensor::models
