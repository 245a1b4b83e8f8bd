// The Llama's rotary tables (models::detail::llama_rotary_tables) equal transformers'
// LlamaRotaryEmbedding, which computes inv_freq, the angles and cos / sin in float32: at
// position 4095 with head_dim 128 and theta 5e5 float64 tables differ from them by ~1e-4. The
// reference (tests/data/rotary/llama_rope_reference.safetensors) comes from
// tests/data/rotary/make_reference.py; float32 cos / sin may differ by an ulp between libm and
// torch's vectorized kernels, so the tolerance is a few float32 ulps of 1.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "dtensor/models/llama.h"
#include "tests/models/llama_test_util.h"

namespace dt = dtensor;
namespace models = dtensor::models;

TEST_CASE("Llama rotary tables equal transformers' float32 tables", "[llama][rotary]") {
  const auto ref = llama_test::read_safetensors(DTENSOR_ROTARY_REFERENCE);
  const std::string kind = GENERATE("default", "llama3");
  INFO(kind);
  models::LlamaConfig cfg;
  cfg.hidden_size = 512;
  cfg.num_attention_heads = 4;
  cfg.num_key_value_heads = 4;
  cfg.head_dim = 128;
  cfg.rope_theta = 500000.0;
  if (kind == "llama3") {
    cfg.rope_scaling.rope_type = "llama3";
    cfg.rope_scaling.factor = 8.0;
    cfg.rope_scaling.low_freq_factor = 1.0;
    cfg.rope_scaling.high_freq_factor = 4.0;
    cfg.rope_scaling.original_max_position_embeddings = 8192;
  }
  // inv_freq bit for bit: at position 4095 one ulp of it moves the float32 angle by ~2e-4.
  const std::vector<float> inv = cfg.rope_inv_freq_float32();
  CHECK(inv == ref.at(kind + ".inv_freq").contiguous().to_vector<float>());

  const dt::nn::functional::RotaryTables t = models::detail::llama_rotary_tables(cfg, 4096);
  const std::vector<int64_t> positions = ref.at("positions").to_vector<int64_t>();
  for (const char* which : {"cos", "sin"}) {
    const dt::Tensor got = std::string(which) == "cos" ? t.cos : t.sin;
    const std::vector<float> want = ref.at(kind + "." + which).contiguous().to_vector<float>();
    const int64_t half = got.size(1);
    for (size_t r = 0; r < positions.size(); ++r) {
      const std::vector<float> row = got.select(0, positions[r]).contiguous().to_vector<float>();
      for (int64_t i = 0; i < half; ++i) {
        INFO(which << " position " << positions[r] << " column " << i);
        CHECK(std::abs(row[static_cast<size_t>(i)] -
                       want[r * static_cast<size_t>(half) + static_cast<size_t>(i)]) <= 3e-7);
      }
    }
  }
}
