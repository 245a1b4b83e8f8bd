#include "dtensor/tensor/device.h"

#include <absl/strings/str_cat.h>

#include <charconv>

#include "dtensor/tensor/error.h"

namespace dtensor {

namespace {

bool parse_index(std::string_view s, int* out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && ptr == end && *out >= 0;
}

}  // namespace

Device::Device(std::string_view spec) {
  if (spec == "cpu") {
    type = DeviceType::kCPU;
    index = 0;
    return;
  }
  if (spec == "meta") {
    type = DeviceType::kMeta;
    index = 0;
    return;
  }
  if (spec == "cuda") {
    type = DeviceType::kCUDA;
    index = 0;
    return;
  }
  int i = 0;
  if (spec.size() > 5 && spec.substr(0, 5) == "cuda:" && parse_index(spec.substr(5), &i)) {
    type = DeviceType::kCUDA;
    index = i;
    return;
  }
  DT_FAIL(
      "[Device] cannot parse device spec '%s' (expected 'cpu', 'cuda', 'cuda:<index>' or 'meta')",
      spec);
}

std::string Device::str() const {
  if (is_cpu()) return "cpu";
  if (is_meta()) return "meta";
  return absl::StrCat("cuda:", index);
}

std::string_view device_type_name(DeviceType t) {
  switch (t) {
    case DeviceType::kCPU:
      return "cpu";
    case DeviceType::kCUDA:
      return "cuda";
    case DeviceType::kMeta:
      return "meta";
  }
  return "?";
}

}  // namespace dtensor
