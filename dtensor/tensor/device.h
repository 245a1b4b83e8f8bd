// Where a tensor's storage lives: the CPU or one CUDA device.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dtensor {

enum class DeviceType : uint8_t { kCPU, kCUDA };
inline constexpr DeviceType kCPU = DeviceType::kCPU;
inline constexpr DeviceType kCUDA = DeviceType::kCUDA;

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;  // CUDA ordinal; always 0 for the CPU

  constexpr Device() = default;
  constexpr Device(DeviceType t, int i = 0) : type(t), index(t == DeviceType::kCPU ? 0 : i) {}
  // Parses "cpu", "cuda", "cuda:1"; throws dtensor::Error otherwise.
  explicit Device(std::string_view spec);

  constexpr bool is_cpu() const { return type == DeviceType::kCPU; }
  constexpr bool is_cuda() const { return type == DeviceType::kCUDA; }
  constexpr bool operator==(const Device&) const = default;
  std::string str() const;  // "cpu", "cuda:0"
};

std::string_view device_type_name(DeviceType t);  // "cpu", "cuda"

// CUDA devices visible to this process (0 when dtensor is built without CUDA, or without a
// driver or device), and whether there is at least one.
int cuda_device_count();
bool cuda_available();

template <typename H>
H AbslHashValue(H h, const Device& d) {
  return H::combine(std::move(h), static_cast<uint8_t>(d.type), d.index);
}

}  // namespace dtensor
