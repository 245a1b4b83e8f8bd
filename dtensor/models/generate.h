// Text generation (issue 43 item 4), as transformers' generate() for a causal language model:
// greedy decoding or sampling (temperature, top-k, top-p, applied in Hugging Face's warper
// order), an end-of-sequence id that stops a row (padded after), and prompts of different
// lengths given left-padded with an attention mask.
//
//   models::GenerateOptions o;
//   o.max_new_tokens = 8;                      // greedy by default (do_sample false)
//   Tensor tokens = models::generate(model, prompt_ids, o);   // [B, P + n] int64
//
// The loop is written over a step function (any model that keeps its own KV cache): the first
// call gets the whole prompt (prefill), each later call the B tokens just chosen (decode), and
// returns the logits of its tokens. The Llama form builds the step from nn::Llama's
// forward(ids, cache, mask) with a preallocated models::KVCache.
//
// Every rank returns the same tokens: the logits every rank sees are the same values (the
// model's output is Replicate), token choice is a deterministic function of them, and the
// uniform numbers sampling draws come from the DTensor RNG's Philox stream, which for one
// generator state gives every rank the same values without communication.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "dtensor/tensor/tensor.h"

namespace dtensor {
class Generator;
}  // namespace dtensor

namespace dtensor::models {

class Llama;  // dtensor/models/llama.h

// transformers' GenerationConfig fields of the same names and defaults.
struct GenerateOptions {
  int64_t max_new_tokens = 20;
  // false: greedy (the argmax; ties go to the lowest id, as torch.argmax). true: sample from
  // softmax of the logits warped by temperature, then top_k, then top_p.
  bool do_sample = false;
  double temperature = 1.0;  // > 0; logits are divided by it
  int64_t top_k = 50;        // keep the k highest logits (ties at the k-th kept); 0: off
  double top_p = 1.0;        // keep the smallest set of highest tokens whose mass reaches top_p
  // The sampling draws: a generator seeded with `seed` for this call, or `generator` (advanced
  // by the draws), or else the default CPU generator (dtensor::manual_seed).
  std::optional<uint64_t> seed;
  Generator* generator = nullptr;
  // A row that emits one of these ids is finished: its later positions hold pad_token_id
  // (default: the first eos id, as transformers). Generation stops once every row is finished.
  std::vector<int64_t> eos_token_id;
  std::optional<int64_t> pad_token_id;
  // [B, P] int64 or bool, 1 for a prompt token, 0 for padding; each row's padding must come
  // first (left padding). Undefined: every prompt token is real.
  Tensor attention_mask;
};

// The model step: input_ids [B, S] int64 (the prompt, then one token per row) and the
// attention mask over every token so far [B, past + S] (undefined when the caller gave none)
// -> logits [B, S, vocab] (or [B, vocab] for the last position), a local tensor holding the
// same values on every rank.
using StepFn = std::function<Tensor(const Tensor& input_ids, const Tensor& attention_mask)>;

// Runs the generation loop: prompt_ids [B, P] int64 -> [B, P + n] int64, the prompt followed by
// n <= max_new_tokens new tokens (fewer when every row finished early). Throws "[generate] ..."
// for a bad prompt, mask or option (naming it and what was expected), on every rank alike.
Tensor generate(const StepFn& step, const Tensor& prompt_ids, const GenerateOptions& options);

// generate() for models::Llama: a KVCache for P + max_new_tokens positions laid out like the
// model's k/v (Llama::make_cache: call it after parallelize_llama), the prompt as one prefill
// forward, then one forward per new token, without recording autograd. On a tensor-parallel
// mesh each step issues only the model's own collectives (the logits are Replicate); greedy
// tokens are the same at every tensor-parallel degree up to ties within float rounding.
// Under data parallelism (FSDP) each rank generates its own rows, yet every rank of the
// parameters' mesh must run each forward (its all-gathers): as transformers' synced_gpus, the
// ranks agree on the largest max_new_tokens and one gather per step tells them whether every
// rank is done; a rank whose rows are finished (or that reached its own max_new_tokens) keeps
// stepping with pad tokens and adds nothing to its rows.
Tensor generate(Llama& model, const Tensor& prompt_ids, const GenerateOptions& options);

// The next-token distribution sampling draws from: logits [B, vocab] -> probabilities
// [B, vocab] float64 after temperature, top_k and top_p (transformers' TemperatureLogitsWarper,
// TopKLogitsWarper, TopPLogitsWarper, in that order, each keeping at least one token).
Tensor sampling_probs(const Tensor& logits, const GenerateOptions& options);

}  // namespace dtensor::models
