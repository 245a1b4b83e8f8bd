// Shared by the Hugging Face checkpoint tests: an independent reader of whole safetensors files
// (its own header parsing, no dtensor::checkpoint code), the committed data's paths, and a
// stand-in module tree that registers parameters under given fully-qualified names.
#pragma once

#include <absl/strings/str_split.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/nn/module.h"
#include "dtensor/tensor/creation.h"

namespace hf_test {

namespace dt = dtensor;

inline const std::string kTinyLlama = DTENSOR_TEST_DATA_DIR "/tiny_llama";
inline const std::string kDtypes = DTENSOR_TEST_DATA_DIR "/hf_dtypes";

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A safetensors file's header JSON.
inline nlohmann::json header_of(const std::string& path) {
  const std::string blob = read_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, blob.data(), 8);
  return nlohmann::json::parse(blob.substr(8, n));
}

// Every entry of a safetensors file, read whole (entry name -> tensor), in file order.
inline std::map<std::string, dt::Tensor> read_whole(const std::string& path) {
  static const std::map<std::string, dt::DType> kDTypes = {
      {"F32", dt::kFloat32}, {"F64", dt::kFloat64}, {"F16", dt::kFloat16}, {"BF16", dt::kBFloat16},
      {"I32", dt::kInt32},   {"I64", dt::kInt64},   {"BOOL", dt::kBool}};
  const std::string blob = read_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, blob.data(), 8);
  const nlohmann::json header = nlohmann::json::parse(blob.substr(8, n));
  std::map<std::string, dt::Tensor> out;
  for (const auto& [name, e] : header.items()) {
    if (name == "__metadata__") continue;
    const std::vector<int64_t> dims = e["shape"].get<std::vector<int64_t>>();
    const dt::Shape shape(dims.begin(), dims.end());
    dt::Tensor t = dt::empty(shape, dt::TensorOptions(kDTypes.at(e["dtype"].get<std::string>())));
    const uint64_t begin = e["data_offsets"][0].get<uint64_t>();
    std::memcpy(t.data_ptr(), blob.data() + 8 + n + begin, t.nbytes());
    out.emplace(name, t);
  }
  return out;
}

// A module with no computation, only children and parameters (a stand-in for a model).
class Holder : public dt::nn::Module {
 public:
  std::string type_name() const override { return "Holder"; }
};

// A tree of Holders with a parameter at each fully-qualified name ("model.layers.0.mlp.w"),
// made by `make(name, shape)`.
template <typename Make>
std::shared_ptr<Holder> make_tree(const std::vector<std::pair<std::string, dt::Shape>>& params,
                                  Make&& make) {
  auto root = std::make_shared<Holder>();
  for (const auto& [fqn, shape] : params) {
    std::vector<std::string> parts = absl::StrSplit(fqn, '.');
    dt::nn::Module* m = root.get();
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      dt::nn::Module* next = nullptr;
      for (const auto& [name, child] : m->named_children()) {
        if (name == parts[i]) next = child.get();
      }
      if (next == nullptr) next = m->register_module(parts[i], std::make_shared<Holder>()).get();
      m = next;
    }
    m->register_parameter(parts.back(), make(fqn, shape));
  }
  return root;
}

// The tiny Llama's parameter names and shapes, in transformers' module order (its
// state_dict's order).
inline std::vector<std::pair<std::string, dt::Shape>> tiny_llama_params() {
  std::vector<std::pair<std::string, dt::Shape>> p = {{"model.embed_tokens.weight", {256, 64}}};
  for (int i = 0; i < 2; ++i) {
    const std::string l = "model.layers." + std::to_string(i) + ".";
    p.push_back({l + "self_attn.q_proj.weight", {64, 64}});
    p.push_back({l + "self_attn.k_proj.weight", {32, 64}});
    p.push_back({l + "self_attn.v_proj.weight", {32, 64}});
    p.push_back({l + "self_attn.o_proj.weight", {64, 64}});
    p.push_back({l + "mlp.gate_proj.weight", {160, 64}});
    p.push_back({l + "mlp.up_proj.weight", {160, 64}});
    p.push_back({l + "mlp.down_proj.weight", {64, 160}});
    p.push_back({l + "input_layernorm.weight", {64}});
    p.push_back({l + "post_attention_layernorm.weight", {64}});
  }
  p.push_back({"model.norm.weight", {64}});
  p.push_back({"lm_head.weight", {256, 64}});
  return p;
}

}  // namespace hf_test
