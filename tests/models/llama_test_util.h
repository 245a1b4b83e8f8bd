// Shared by the Llama tests: the committed tiny checkpoint (tests/data/tiny_llama, made by
// scripts/make_tiny_llama.py with transformers) read as plain tensors, and comparisons.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/tensor.h"

namespace llama_test {

inline const std::string kTinyLlama = DTENSOR_TINY_LLAMA_DIR;

// Every entry of a safetensors file (F32 / I64 only: what the reference files hold), read
// with the standard library so the test does not trust the reader it may check.
inline std::map<std::string, dtensor::Tensor> read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  std::string header(n, ' ');
  in.read(header.data(), static_cast<std::streamsize>(n));
  const auto j = nlohmann::json::parse(header);
  std::map<std::string, dtensor::Tensor> out;
  for (const auto& [name, e] : j.items()) {
    if (name == "__metadata__") continue;
    const std::string dt = e["dtype"];
    const dtensor::DType dtype = dt == "F32" ? dtensor::kFloat32 : dtensor::kInt64;
    if (dt != "F32" && dt != "I64") throw std::runtime_error("unexpected dtype " + dt);
    const std::vector<int64_t> shape = e["shape"];
    const uint64_t begin = e["data_offsets"][0], end = e["data_offsets"][1];
    dtensor::Tensor t = dtensor::empty(shape, dtensor::TensorOptions(dtype));
    if (end - begin != t.nbytes()) throw std::runtime_error("bad size of " + name);
    in.seekg(static_cast<std::streamoff>(8 + n + begin));
    in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
    out.emplace(name, t);
  }
  return out;
}

inline double max_abs_diff(const dtensor::Tensor& a, const dtensor::Tensor& b) {
  if (a.shape() != b.shape()) return INFINITY;
  const auto x = a.contiguous().to(dtensor::kFloat64).to_vector<double>();
  const auto y = b.contiguous().to(dtensor::kFloat64).to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

}  // namespace llama_test
