// Where a tensor's storage lives: the CPU or one CUDA device; or nowhere, on the meta device
// (PyTorch's device="meta"): a meta tensor has sizes, strides and a dtype but no data, so a dry
// run (dtensor/models/dry_run.h) can follow shapes, placements and byte counts of a model far
// larger than this machine's memory.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dtensor {

enum class DeviceType : uint8_t { kCPU, kCUDA, kMeta };
inline constexpr DeviceType kCPU = DeviceType::kCPU;
inline constexpr DeviceType kCUDA = DeviceType::kCUDA;
inline constexpr DeviceType kMeta = DeviceType::kMeta;

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;  // CUDA ordinal; always 0 for the CPU and the meta device

  constexpr Device() = default;
  constexpr Device(DeviceType t, int i = 0) : type(t), index(t == DeviceType::kCUDA ? i : 0) {}
  // Parses "cpu", "cuda", "cuda:1", "meta"; throws dtensor::Error otherwise.
  explicit Device(std::string_view spec);

  constexpr bool is_cpu() const { return type == DeviceType::kCPU; }
  constexpr bool is_cuda() const { return type == DeviceType::kCUDA; }
  constexpr bool is_meta() const { return type == DeviceType::kMeta; }
  constexpr bool operator==(const Device&) const = default;
  std::string str() const;  // "cpu", "cuda:0", "meta"
};

std::string_view device_type_name(DeviceType t);  // "cpu", "cuda", "meta"

// CUDA devices visible to this process (0 when dtensor is built without CUDA, or without a
// driver or device), and whether there is at least one.
int cuda_device_count();
bool cuda_available();

template <typename H>
H AbslHashValue(H h, const Device& d) {
  return H::combine(std::move(h), static_cast<uint8_t>(d.type), d.index);
}

}  // namespace dtensor
