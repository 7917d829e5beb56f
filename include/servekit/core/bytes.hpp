#pragma once
/// \file
/// Helpers for BYTES tensors: each element is a 4-byte little-endian length, then the bytes.

#include <servekit/core/buffer.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace servekit {

namespace detail {
inline std::uint32_t read_u32_le(const std::byte* p) noexcept {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8U) |
         (static_cast<std::uint32_t>(p[2]) << 16U) | (static_cast<std::uint32_t>(p[3]) << 24U);
}
} // namespace detail

/// Calls `f(std::string_view)` for each element; returns the element count, or nothing if the
/// bytes are not a well-formed sequence of length-prefixed elements.
template <class F>
std::optional<std::size_t> for_each_bytes_element(std::span<const std::byte> bytes, F&& f) {
  std::size_t count = 0;
  std::size_t at = 0;
  while (at < bytes.size()) {
    if (bytes.size() - at < 4) {
      return std::nullopt;
    }
    const std::uint32_t length = detail::read_u32_le(bytes.data() + at);
    at += 4;
    if (bytes.size() - at < length) {
      return std::nullopt;
    }
    f(std::string_view{reinterpret_cast<const char*>(bytes.data() + at), length});
    at += length;
    ++count;
  }
  return count;
}

/// The number of elements in a BYTES buffer, or nothing if malformed.
[[nodiscard]] inline std::optional<std::size_t>
count_bytes_elements(std::span<const std::byte> bytes) {
  return for_each_bytes_element(bytes, [](std::string_view) {});
}

/// Encodes strings as a BYTES buffer.
[[nodiscard]] inline buffer encode_bytes(std::span<const std::string_view> elements) {
  std::size_t total = 0;
  for (const auto e : elements) {
    total += 4 + e.size();
  }
  buffer out = buffer::allocate(total);
  std::byte* p = out.data();
  for (const auto e : elements) {
    const auto n = static_cast<std::uint32_t>(e.size());
    for (unsigned i = 0; i < 4; ++i) {
      p[i] = static_cast<std::byte>((n >> (8U * i)) & 0xFFU);
    }
    if (n != 0) {
      std::memcpy(p + 4, e.data(), n);
    }
    p += 4 + n;
  }
  return out;
}

/// Decodes a BYTES buffer into views of its elements (nothing if malformed).
[[nodiscard]] inline std::optional<std::vector<std::string_view>>
decode_bytes(std::span<const std::byte> bytes) {
  std::vector<std::string_view> out;
  if (!for_each_bytes_element(bytes, [&](std::string_view e) { out.push_back(e); })) {
    return std::nullopt;
  }
  return out;
}

} // namespace servekit
