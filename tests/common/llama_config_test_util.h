// The small random Llama that the sharded Llama tests build (tests/models, and the activation
// checkpointing tests in tests/nn), in one place so that their shapes agree.
#pragma once

#include <cstdint>

#include "dtensor/models/llama_config.h"

namespace llama_test {

// GQA with `heads` q heads and `kv_heads` kv heads of 6 (by default 4 and 2: tp 2 shards
// both), hidden 24, uneven vocab (50) and intermediate (36) shards at 4 ranks, 32 positions,
// `layers` decoder layers; rope_theta is LlamaConfig's default.
inline dtensor::models::LlamaConfig small_config(int64_t layers, int64_t heads = 4,
                                                 int64_t kv_heads = 2) {
  dtensor::models::LlamaConfig cfg;
  cfg.vocab_size = 50;
  cfg.hidden_size = 24;
  cfg.intermediate_size = 36;
  cfg.num_hidden_layers = layers;
  cfg.num_attention_heads = heads;
  cfg.num_key_value_heads = kv_heads;
  cfg.head_dim = 6;
  cfg.max_position_embeddings = 32;
  return cfg;
}

}  // namespace llama_test
