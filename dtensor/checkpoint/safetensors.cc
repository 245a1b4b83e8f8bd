#include "dtensor/checkpoint/detail/safetensors.h"

#include <array>
#include <nlohmann/json.hpp>

#include "dtensor/tensor/error.h"

namespace dtensor::checkpoint::detail {

namespace {

using json = nlohmann::json;

constexpr std::array<std::pair<DType, std::string_view>, 7> kDTypeNames = {{
    {DType::kFloat32, "F32"},
    {DType::kFloat64, "F64"},
    {DType::kFloat16, "F16"},
    {DType::kBFloat16, "BF16"},
    {DType::kInt32, "I32"},
    {DType::kInt64, "I64"},
    {DType::kBool, "BOOL"},
}};

// The safetensors reference implementation refuses headers above 100 MB; so do we, so that a
// corrupt length field never makes us allocate gigabytes.
constexpr uint64_t kMaxHeader = 100'000'000;

void store_le64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

uint64_t load_le64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

std::string_view safetensors_dtype(DType dtype) {
  for (const auto& [d, name] : kDTypeNames) {
    if (d == dtype) return name;
  }
  DT_FAIL("[checkpoint] dtype %s has no safetensors name", dtype_name(dtype));
}

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  for (const auto& [d, n] : kDTypeNames) {
    if (n == name) return d;
  }
  return std::nullopt;
}

SafetensorsLayout layout_safetensors(const std::vector<SafetensorsEntryMeta>& entries,
                                     const SafetensorsMetadata& metadata) {
  json header = json::object();
  std::vector<uint64_t> offsets;
  offsets.reserve(entries.size());
  uint64_t offset = 0;
  for (const SafetensorsEntryMeta& e : entries) {
    const uint64_t n = static_cast<uint64_t>(shape_numel(e.shape)) * dtype_size(e.dtype);
    header[e.name] = {{"dtype", safetensors_dtype(e.dtype)},
                      {"shape", json(std::vector<int64_t>(e.shape.begin(), e.shape.end()))},
                      {"data_offsets", {offset, offset + n}}};
    offsets.push_back(offset);
    offset += n;
  }
  json meta = {{"format", "pt"}, {"writer", "dtensor"}};
  for (const auto& [k, v] : metadata) meta[k] = v;
  header["__metadata__"] = std::move(meta);
  std::string text = header.dump();
  // Pad with spaces so that the data starts 8-byte aligned (as the reference writer does).
  text.append((8 - text.size() % 8) % 8, ' ');
  SafetensorsLayout layout;
  layout.prefix.resize(8 + text.size());
  store_le64(layout.prefix.data(), text.size());
  std::copy(text.begin(), text.end(), layout.prefix.begin() + 8);
  for (uint64_t& o : offsets) o += layout.prefix.size();
  layout.begin = std::move(offsets);
  layout.file_size = layout.prefix.size() + offset;
  return layout;
}

std::vector<uint32_t> write_safetensors(const std::string& path,
                                        const std::vector<std::pair<std::string, Tensor>>& entries,
                                        const SafetensorsMetadata& metadata, std::string_view op) {
  // The data is written as it lies in memory: this build targets little-endian hosts only
  // (checked in save.cc), which is what the format prescribes.
  std::vector<SafetensorsEntryMeta> metas;
  metas.reserve(entries.size());
  for (const auto& [name, t] : entries) metas.push_back({name, t.dtype(), t.shape()});
  const SafetensorsLayout layout = layout_safetensors(metas, metadata);
  std::vector<uint32_t> crcs;
  crcs.reserve(entries.size());
  const File f = File::create(path, op);
  f.pwrite_all(layout.prefix.data(), layout.prefix.size(), 0);
  for (size_t i = 0; i < entries.size(); ++i) {
    const Tensor& t = entries[i].second;
    crcs.push_back(f.pwrite_all_crc(t.data_ptr(), t.nbytes(), layout.begin[i]));
  }
  f.sync();
  return crcs;
}

SafetensorsHeader read_safetensors_header(const File& file, std::string_view op) {
  const std::string& path = file.path();
  const uint64_t file_size = file.size();
  DT_CHECK(file_size >= 8,
           "[%s] file '%s' is truncated: %d bytes, shorter than the 8-byte header length", op, path,
           file_size);
  unsigned char len_bytes[8];
  file.pread_all(len_bytes, 8, 0);
  const uint64_t n = load_le64(len_bytes);
  DT_CHECK(n <= kMaxHeader && 8 + n <= file_size,
           "[%s] file '%s' is truncated or corrupt: header length %d but the file has %d bytes", op,
           path, n, file_size);
  std::string text(n, '\0');
  file.pread_all(text.data(), n, 8);
  const json header = json::parse(text, nullptr, /*allow_exceptions=*/false);
  DT_CHECK(header.is_object(), "[%s] file '%s' is corrupt: its header is not a JSON object", op,
           path);

  SafetensorsHeader out_header;
  const uint64_t data_start = 8 + n;
  for (const auto& [name, e] : header.items()) {
    if (name == "__metadata__") {
      DT_CHECK(e.is_object(), "[%s] file '%s' is corrupt: its __metadata__ is not a JSON object",
               op, path);
      for (const auto& [k, v] : e.items()) {
        DT_CHECK(v.is_string(), "[%s] file '%s' is corrupt: __metadata__ '%s' is not a string", op,
                 path, k);
        out_header.metadata.emplace(k, v.get<std::string>());
      }
      continue;
    }
    auto bad = [&](const char* what) {
      DT_FAIL("[%s] file '%s' is corrupt: entry '%s' %s", op, path, name, what);
    };
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") ||
        !e.contains("data_offsets") || !e["dtype"].is_string() || !e["shape"].is_array() ||
        !e["data_offsets"].is_array() || e["data_offsets"].size() != 2) {
      bad("lacks dtype, shape or data_offsets");
    }
    SafetensorsEntry out;
    const auto dtype = dtype_from_safetensors(e["dtype"].get<std::string>());
    if (!dtype) bad("has an unknown dtype");
    out.dtype = *dtype;
    uint64_t bytes = dtype_size(out.dtype);
    for (const auto& s : e["shape"]) {
      if (!s.is_number_unsigned()) bad("has a negative or non-integer size");
      const uint64_t v = s.get<uint64_t>();
      if (v != 0 && bytes > (uint64_t{1} << 62) / v) bad("has an overflowing shape");
      bytes *= v;
      out.shape.push_back(static_cast<int64_t>(v));
    }
    const auto& off = e["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) bad("has bad data_offsets");
    const uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
    if (en < b || en - b != bytes) bad("has data_offsets that do not match its dtype and shape");
    if (en > file_size - data_start) {
      DT_FAIL("[%s] file '%s' is truncated: entry '%s' ends at byte %d but the file has %d bytes",
              op, path, name, data_start + en, file_size);
    }
    out.begin = data_start + b;
    out.end = data_start + en;
    out_header.entries.emplace(name, std::move(out));
  }
  return out_header;
}

}  // namespace dtensor::checkpoint::detail
