// LlamaConfig: the hyper-parameters of a Llama (transformers' LlamaConfig names and defaults),
// read from a Hugging Face config.json, so a checkpoint directory builds its model unchanged:
//   auto cfg = models::LlamaConfig::from_hf_dir("tests/data/tiny_llama");
//   models::Llama model(cfg);
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dtensor/nn/functional.h"

namespace dtensor::models {

// rope_scaling / rope_parameters of config.json. "default": none. "llama3" (Llama 3.1+): the
// inverse frequencies are rescaled by wavelength (long ones divided by `factor`, short ones
// kept, those between interpolated), as transformers' _compute_llama3_parameters.
struct RopeScaling {
  std::string rope_type = "default";  // "default" or "llama3"
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct LlamaConfig {
  int64_t vocab_size = 32000;
  int64_t hidden_size = 4096;
  int64_t intermediate_size = 11008;
  int64_t num_hidden_layers = 32;
  int64_t num_attention_heads = 32;
  int64_t num_key_value_heads = 32;  // < num_attention_heads: GQA (1: MQA)
  int64_t head_dim = 128;            // config.json's, or hidden_size / num_attention_heads
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  int64_t max_position_embeddings = 2048;
  bool tie_word_embeddings = false;  // lm_head uses model.embed_tokens.weight
  // Which features rotary embeddings pair (nn::functional::RotaryStyle): Hugging Face
  // checkpoints are trained for rotate_half; Meta's original checkpoints for interleaved pairs
  // (their q/k rows permuted per head, as transformers' convert_llama_weights_to_hf does, turn
  // one into the other). Not a config.json key.
  nn::functional::RotaryStyle rotary_style = nn::functional::RotaryStyle::kRotateHalf;

  // Parses config.json's text. vocab_size, hidden_size, intermediate_size, num_hidden_layers
  // and num_attention_heads are required; the others take transformers' defaults when absent
  // (num_key_value_heads: num_attention_heads; head_dim: hidden_size / num_attention_heads).
  // rope_theta / rope_scaling are read from the top level (transformers 4) or from
  // "rope_parameters" (transformers 5). Throws "[LlamaConfig] <where>: ..." naming the key for
  // a missing one, a wrong type or a value out of range, and refuses what this Llama does not
  // compute (attention_bias / mlp_bias true, hidden_act other than silu, other rope types).
  // `where` names the source in errors (e.g. the file's path).
  static LlamaConfig from_json_text(std::string_view text, std::string_view where = "config.json");
  // Reads <dir>/config.json (checkpoint::read_hf_config: "[read_hf_config] ..." when it cannot).
  static LlamaConfig from_hf_dir(const std::string& dir);

  // Checks the values against each other (positive sizes, heads dividing, even head_dim, ...);
  // the constructor of Llama calls it. Throws "[LlamaConfig] ...".
  void validate() const;

  // The rotary inverse frequencies (head_dim / 2 of them): rope_theta^(-2i / head_dim), then
  // rope_scaling applied.
  std::vector<double> rope_inv_freq() const;
  // The same as transformers computes them, in float32 (LlamaRotaryEmbedding: inv_freq =
  // 1 / base^(arange(0, D, 2).float() / D), and llama3 scaling's float32 arithmetic): the
  // angles position * inv_freq are float32 too, so the last bits of inv_freq matter at large
  // positions. The Llama's tables use these.
  std::vector<float> rope_inv_freq_float32() const;
};

}  // namespace dtensor::models
