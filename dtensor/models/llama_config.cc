#include "dtensor/models/llama_config.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <numbers>

#include "dtensor/checkpoint/hf.h"
#include "dtensor/tensor/error.h"

namespace dtensor::models {

namespace {

using nlohmann::json;

// Reads config.json's keys with errors that name the key and the source.
class Reader {
 public:
  Reader(const json& j, std::string_view where) : j_(j), where_(where) {}

  const json* find(const json& obj, const char* key) const {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  int64_t integer(const json& obj, const char* key, std::optional<int64_t> fallback) const {
    const json* v = find(obj, key);
    if (v == nullptr) {
      DT_CHECK(fallback.has_value(), "[LlamaConfig] %s: missing key '%s' (expected an integer)",
               where_, key);
      return *fallback;
    }
    DT_CHECK(v->is_number_integer(), "[LlamaConfig] %s: key '%s' is %s, expected an integer",
             where_, key, v->dump());
    return v->get<int64_t>();
  }
  double number(const json& obj, const char* key, double fallback) const {
    const json* v = find(obj, key);
    if (v == nullptr) return fallback;
    DT_CHECK(v->is_number(), "[LlamaConfig] %s: key '%s' is %s, expected a number", where_, key,
             v->dump());
    return v->get<double>();
  }
  bool boolean(const json& obj, const char* key, bool fallback) const {
    const json* v = find(obj, key);
    if (v == nullptr) return fallback;
    DT_CHECK(v->is_boolean(), "[LlamaConfig] %s: key '%s' is %s, expected true or false", where_,
             key, v->dump());
    return v->get<bool>();
  }
  std::string string(const json& obj, const char* key, const std::string& fallback) const {
    const json* v = find(obj, key);
    if (v == nullptr) return fallback;
    DT_CHECK(v->is_string(), "[LlamaConfig] %s: key '%s' is %s, expected a string", where_, key,
             v->dump());
    return v->get<std::string>();
  }
  const json& root() const { return j_; }
  std::string_view where() const { return where_; }

 private:
  const json& j_;
  std::string_view where_;
};

// rope_theta and rope_scaling: transformers 4 writes "rope_theta" and "rope_scaling" at the top
// level, transformers 5 one "rope_parameters" object holding rope_theta and rope_type.
void read_rope(const Reader& r, LlamaConfig& cfg) {
  const json& j = r.root();
  cfg.rope_theta = r.number(j, "rope_theta", cfg.rope_theta);
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    const json* rope = r.find(j, key);
    if (rope == nullptr) continue;
    DT_CHECK(rope->is_object(), "[LlamaConfig] %s: key '%s' is %s, expected an object", r.where(),
             key, rope->dump());
    cfg.rope_theta = r.number(*rope, "rope_theta", cfg.rope_theta);
    RopeScaling& s = cfg.rope_scaling;
    // transformers 4.x wrote "type" before "rope_type".
    s.rope_type = r.string(*rope, "rope_type", r.string(*rope, "type", s.rope_type));
    DT_CHECK(s.rope_type == "default" || s.rope_type == "llama3",
             "[LlamaConfig] %s: %s.rope_type '%s' is not supported (expected 'default' or "
             "'llama3')",
             r.where(), key, s.rope_type);
    if (s.rope_type == "llama3") {
      s.factor = r.number(*rope, "factor", s.factor);
      s.low_freq_factor = r.number(*rope, "low_freq_factor", s.low_freq_factor);
      s.high_freq_factor = r.number(*rope, "high_freq_factor", s.high_freq_factor);
      s.original_max_position_embeddings =
          r.integer(*rope, "original_max_position_embeddings", s.original_max_position_embeddings);
    }
  }
}

}  // namespace

LlamaConfig LlamaConfig::from_json_text(std::string_view text, std::string_view where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    DT_FAIL("[LlamaConfig] %s is not valid JSON: %s", where, e.what());
  }
  DT_CHECK(j.is_object(), "[LlamaConfig] %s: expected a JSON object, got %s", where, j.type_name());
  const Reader r(j, where);
  LlamaConfig cfg;
  cfg.vocab_size = r.integer(j, "vocab_size", std::nullopt);
  cfg.hidden_size = r.integer(j, "hidden_size", std::nullopt);
  cfg.intermediate_size = r.integer(j, "intermediate_size", std::nullopt);
  cfg.num_hidden_layers = r.integer(j, "num_hidden_layers", std::nullopt);
  cfg.num_attention_heads = r.integer(j, "num_attention_heads", std::nullopt);
  cfg.num_key_value_heads = r.integer(j, "num_key_value_heads", cfg.num_attention_heads);
  DT_CHECK(cfg.num_attention_heads > 0, "[LlamaConfig] %s: num_attention_heads %d must be positive",
           where, cfg.num_attention_heads);
  cfg.head_dim = r.integer(j, "head_dim", cfg.hidden_size / cfg.num_attention_heads);
  cfg.rms_norm_eps = r.number(j, "rms_norm_eps", cfg.rms_norm_eps);
  cfg.max_position_embeddings =
      r.integer(j, "max_position_embeddings", cfg.max_position_embeddings);
  cfg.tie_word_embeddings = r.boolean(j, "tie_word_embeddings", cfg.tie_word_embeddings);
  read_rope(r, cfg);
  // What this Llama does not compute is refused rather than silently ignored.
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    DT_CHECK(!r.boolean(j, key, false),
             "[LlamaConfig] %s: %s true is not supported (the projections have no bias)", where,
             key);
  }
  const std::string act = r.string(j, "hidden_act", "silu");
  DT_CHECK(act == "silu", "[LlamaConfig] %s: hidden_act '%s' is not supported (expected 'silu')",
           where, act);
  cfg.validate();
  return cfg;
}

LlamaConfig LlamaConfig::from_hf_dir(const std::string& dir) {
  return from_json_text(checkpoint::read_hf_config(dir), dir + "/config.json");
}

void LlamaConfig::validate() const {
  DT_CHECK(vocab_size > 0 && hidden_size > 0 && intermediate_size > 0 && num_hidden_layers >= 0 &&
               max_position_embeddings > 0,
           "[LlamaConfig] vocab_size %d, hidden_size %d, intermediate_size %d, "
           "max_position_embeddings %d must be positive and num_hidden_layers %d >= 0",
           vocab_size, hidden_size, intermediate_size, max_position_embeddings, num_hidden_layers);
  DT_CHECK(num_attention_heads > 0 && num_key_value_heads > 0 &&
               num_attention_heads % num_key_value_heads == 0,
           "[LlamaConfig] num_attention_heads %d must be a positive multiple of "
           "num_key_value_heads %d (each key/value head serves a group of query heads)",
           num_attention_heads, num_key_value_heads);
  DT_CHECK(head_dim > 0 && head_dim % 2 == 0,
           "[LlamaConfig] head_dim %d must be even and positive (rotary embeddings rotate pairs)",
           head_dim);
  DT_CHECK(rms_norm_eps >= 0 && rope_theta > 0,
           "[LlamaConfig] rms_norm_eps %g must be >= 0 and rope_theta %g > 0", rms_norm_eps,
           rope_theta);
  if (rope_scaling.rope_type == "llama3") {
    DT_CHECK(rope_scaling.factor > 0 && rope_scaling.original_max_position_embeddings > 0 &&
                 rope_scaling.high_freq_factor > rope_scaling.low_freq_factor,
             "[LlamaConfig] rope_scaling llama3: factor %g and original_max_position_embeddings "
             "%d must be positive, high_freq_factor %g > low_freq_factor %g",
             rope_scaling.factor, rope_scaling.original_max_position_embeddings,
             rope_scaling.high_freq_factor, rope_scaling.low_freq_factor);
  }
}

std::vector<double> LlamaConfig::rope_inv_freq() const {
  std::vector<double> inv(static_cast<size_t>(head_dim / 2));
  for (size_t i = 0; i < inv.size(); ++i) {
    inv[i] = std::pow(rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  }
  if (rope_scaling.rope_type != "llama3") return inv;
  // transformers' _compute_llama3_parameters: wavelengths longer than the original context /
  // low_freq_factor are stretched by `factor`, shorter than context / high_freq_factor kept,
  // the band between interpolated smoothly.
  const RopeScaling& s = rope_scaling;
  const double old_len = static_cast<double>(s.original_max_position_embeddings);
  const double low_wavelen = old_len / s.low_freq_factor;
  const double high_wavelen = old_len / s.high_freq_factor;
  for (double& f : inv) {
    const double wavelen = 2.0 * std::numbers::pi / f;
    if (wavelen > low_wavelen) {
      f /= s.factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth =
          (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      f = (1.0 - smooth) * f / s.factor + smooth * f;
    }
  }
  return inv;
}

std::vector<float> LlamaConfig::rope_inv_freq_float32() const {
  std::vector<float> inv(static_cast<size_t>(head_dim / 2));
  for (size_t i = 0; i < inv.size(); ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv[i] = 1.0f / std::pow(static_cast<float>(rope_theta), exponent);
  }
  if (rope_scaling.rope_type != "llama3") return inv;
  // _compute_llama3_parameters on float32 tensors: a Python scalar divided by a tensor is the
  // tensor's reciprocal times the scalar; the scalars meet the tensors as float32.
  const RopeScaling& s = rope_scaling;
  const double old_len = static_cast<double>(s.original_max_position_embeddings);
  const auto low_wavelen = static_cast<float>(old_len / s.low_freq_factor);
  const auto high_wavelen = static_cast<float>(old_len / s.high_freq_factor);
  const auto factor = static_cast<float>(s.factor);
  const auto low = static_cast<float>(s.low_freq_factor);
  const auto band = static_cast<float>(s.high_freq_factor - s.low_freq_factor);
  const auto two_pi = static_cast<float>(2.0 * std::numbers::pi);
  for (float& f : inv) {
    const float wavelen = (1.0f / f) * two_pi;
    const float scaled = wavelen > low_wavelen ? f / factor : f;
    const float smooth = ((1.0f / wavelen) * static_cast<float>(old_len) - low) / band;
    const float smoothed = (1.0f - smooth) * scaled / factor + smooth * scaled;
    const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    f = medium ? smoothed : scaled;
  }
  return inv;
}

}  // namespace dtensor::models
