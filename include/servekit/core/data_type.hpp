#pragma once
/// \file
/// data_type: Triton's tensor element types, their protocol names and byte sizes.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace servekit {

/// Tensor element types, named as in Triton. BYTES holds length-prefixed strings: each
/// element is a 4-byte little-endian length followed by that many bytes.
enum class data_type : std::uint8_t {
  invalid,
  boolean,
  uint8,
  uint16,
  uint32,
  uint64,
  int8,
  int16,
  int32,
  int64,
  fp16,
  bf16,
  fp32,
  fp64,
  bytes,
};

namespace detail {
struct data_type_info {
  data_type type;
  std::string_view name;        // KServe v2 protocol name: "FP32"
  std::string_view config_name; // model-config name: "TYPE_FP32"
  std::size_t byte_size;        // 0 for BYTES (variable)
};

inline constexpr data_type_info data_type_table[] = {
    {data_type::boolean, "BOOL", "TYPE_BOOL", 1},
    {data_type::uint8, "UINT8", "TYPE_UINT8", 1},
    {data_type::uint16, "UINT16", "TYPE_UINT16", 2},
    {data_type::uint32, "UINT32", "TYPE_UINT32", 4},
    {data_type::uint64, "UINT64", "TYPE_UINT64", 8},
    {data_type::int8, "INT8", "TYPE_INT8", 1},
    {data_type::int16, "INT16", "TYPE_INT16", 2},
    {data_type::int32, "INT32", "TYPE_INT32", 4},
    {data_type::int64, "INT64", "TYPE_INT64", 8},
    {data_type::fp16, "FP16", "TYPE_FP16", 2},
    {data_type::bf16, "BF16", "TYPE_BF16", 2},
    {data_type::fp32, "FP32", "TYPE_FP32", 4},
    {data_type::fp64, "FP64", "TYPE_FP64", 8},
    {data_type::bytes, "BYTES", "TYPE_STRING", 0},
};

constexpr const data_type_info* find_info(data_type type) noexcept {
  for (const auto& info : data_type_table) {
    if (info.type == type) {
      return &info;
    }
  }
  return nullptr;
}
} // namespace detail

/// Bytes per element; 0 for BYTES (variable-length) and for invalid.
[[nodiscard]] constexpr std::size_t byte_size(data_type type) noexcept {
  switch (type) {
  case data_type::boolean:
  case data_type::uint8:
  case data_type::int8:
    return 1;
  case data_type::uint16:
  case data_type::int16:
  case data_type::fp16:
  case data_type::bf16:
    return 2;
  case data_type::uint32:
  case data_type::int32:
  case data_type::fp32:
    return 4;
  case data_type::uint64:
  case data_type::int64:
  case data_type::fp64:
    return 8;
  case data_type::invalid:
  case data_type::bytes:
    return 0;
  }
  return 0;
}

/// The KServe v2 name ("FP32"); "INVALID" for data_type::invalid.
[[nodiscard]] constexpr std::string_view to_string(data_type type) noexcept {
  const auto* info = detail::find_info(type);
  return info != nullptr ? info->name : "INVALID";
}

/// The model-configuration name ("TYPE_FP32"; BYTES is "TYPE_STRING" as in Triton).
[[nodiscard]] constexpr std::string_view to_config_string(data_type type) noexcept {
  const auto* info = detail::find_info(type);
  return info != nullptr ? info->config_name : "TYPE_INVALID";
}

/// Parses either spelling: "FP32" or "TYPE_FP32" (and "TYPE_STRING" for BYTES).
[[nodiscard]] constexpr std::optional<data_type> parse_data_type(std::string_view name) noexcept {
  for (const auto& info : detail::data_type_table) {
    if (name == info.name || name == info.config_name) {
      return info.type;
    }
  }
  return std::nullopt;
}

} // namespace servekit
